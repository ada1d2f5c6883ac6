//! Decode: one token a step. `decode` runs one step from a host token and
//! returns its logits (teacher forcing, tests); `decode_sampled` records
//! several steps into one submit, each embedding the token the previous one
//! sampled on the GPU, and reads back only the new ids; `launch_decode` and
//! `land_decode` are its two halves, so the next submit can be recorded while
//! the GPU runs the current one.

use web_time::Instant;

use super::step::InferenceStep;
use super::tokens::Ticket;
use super::{Pipeline, StepIds, StepOutput};
use crate::gpu::Recorder;
use crate::pipeline::error::PipelineError;

/// Decode steps submitted and not yet read back.
pub struct InFlight {
    ticket: Ticket,
    /// The position of its first step.
    pub pos0: usize,
    submission: Option<wgpu::SubmissionIndex>,
    /// CPU seconds spent recording and submitting them (not counting the
    /// driver's submit call, which on software adapters runs the work).
    pub cpu_seconds: f64,
}

impl InFlight {
    /// Decode steps (and positions) it holds.
    pub fn steps(&self) -> usize {
        self.ticket.n
    }
}

impl Pipeline {
    /// Appends `id` at the current position; returns its logits.
    pub async fn decode(&mut self, id: u32) -> Result<Vec<f32>, PipelineError> {
        self.check_room(1)?;
        let step = InferenceStep::Decode { pos: self.pos };
        let mut rows = self.run_step(step, &[id], 1).await?;
        Ok(rows.pop().expect("one logits row"))
    }

    /// Runs `us.len()` decode steps in one submit from the token in the ring
    /// (the last one sampled), step `s` drawing with random number `us[s]`
    /// under the parameters `configure_sampler` set. Returns the new ids and
    /// the CPU seconds spent recording and submitting.
    pub async fn decode_sampled(&mut self, us: &[f32]) -> Result<(Vec<u32>, f64), PipelineError> {
        let in_flight = self.launch_decode(us).await?;
        let cpu_seconds = in_flight.cpu_seconds;
        Ok((self.land_decode(in_flight).await?, cpu_seconds))
    }

    /// The first half of `decode_sampled`: records and submits the steps
    /// and returns without waiting for them, so the caller can record the
    /// next submit while the GPU works (tokens never leave the GPU between
    /// submits). Positions are taken at once; `land_decode` reads the ids.
    pub async fn launch_decode(&mut self, us: &[f32]) -> Result<InFlight, PipelineError> {
        let n = us.len();
        if n == 0 || n > self.tokens.max_steps() {
            return Err(PipelineError::InvalidOption(format!(
                "{n} decode steps in one submit (1..={})",
                self.tokens.max_steps()
            )));
        }
        self.check_room(n)?;
        let start = Instant::now();
        self.sampler.write_randoms(&self.ctx, 0, us)?;
        // The steps embed tokens not yet read back: their positions are
        // remembered when the ids land (`Pipeline::next_token`).
        self.held.forget_from(self.pos);
        let ctx = self.ctx.clone();
        let mut rec = Recorder::new(&ctx);
        for s in 0..n {
            let step = InferenceStep::Decode { pos: self.pos + s };
            let ids = StepIds::Ring(self.tokens.input_slot(s));
            let slot = self.tokens.output_slot(s);
            let output = StepOutput::Sample { step: s, slot };
            self.record_step(&mut rec, step, ids, output)?;
        }
        let ticket = self.tokens.record_readback(&mut rec, n)?;
        let submitted = rec.submit_indexed().await?;
        self.pos += n;
        Ok(InFlight {
            ticket,
            pos0: self.pos - n,
            submission: submitted.index,
            cpu_seconds: start.elapsed().as_secs_f64() - submitted.driver_seconds,
        })
    }

    /// The ids of a launched submit, once the GPU has run it.
    pub async fn land_decode(&mut self, in_flight: InFlight) -> Result<Vec<u32>, PipelineError> {
        let ids = self
            .tokens
            .read(&self.ctx, in_flight.ticket, in_flight.submission)
            .await?;
        Ok(ids)
    }

    /// Forgets the last `n` positions (tokens sampled past a stop).
    pub(crate) fn roll_back(&mut self, n: usize) {
        self.pos -= n.min(self.pos);
        self.held.forget_from(self.pos);
    }
}

impl Pipeline {
    /// Sets the GPU sampler's parameters and penalty window for a new sequence.
    pub fn configure_sampler(
        &mut self,
        params: &crate::pipeline::sampling::SamplingParams,
        history: &[u32],
    ) -> Result<(), PipelineError> {
        let ctx = self.ctx.clone();
        Ok(self.sampler.configure(&ctx, params, history)?)
    }
}
