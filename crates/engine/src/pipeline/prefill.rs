//! Prefill: a prompt in chunks, each one step.

use super::step::{plan_prefill, InferenceStep};
use super::{Pipeline, StepIds, StepOutput};
use crate::gpu::Recorder;
use crate::pipeline::error::PipelineError;

impl Pipeline {
    /// Runs `ids` at the current position and returns the logits of the last
    /// `last` of them (teacher forcing; `last` = 1 to start generating).
    pub async fn prefill(
        &mut self,
        ids: &[u32],
        last: usize,
    ) -> Result<Vec<Vec<f32>>, PipelineError> {
        self.check_prompt(ids)?;
        if last > ids.len() {
            return Err(PipelineError::InvalidOption(format!(
                "asked for logits of the last {last} positions of a {}-token input",
                ids.len()
            )));
        }
        let first_wanted = ids.len() - last;
        let start = self.pos;
        let mut logits = Vec::with_capacity(last);
        // A step returns at most the logits buffer's rows; a chunk's wanted
        // rows are at most `last`, and at most its length.
        let chunk = if last > self.act.max_logit_rows {
            self.act.max_logit_rows
        } else {
            self.act.max_rows
        };
        for step in plan_prefill(self.pos, ids.len(), chunk) {
            let (lo, rows) = (step.pos0() - start, step.rows());
            let wanted = (lo + rows).saturating_sub(first_wanted.max(lo));
            let chunk_ids = &ids[lo..lo + rows];
            logits.extend(self.run_step(step, chunk_ids, wanted).await?);
        }
        Ok(logits)
    }

    /// Runs `ids` and samples the token after them on the GPU with random
    /// number `u` (parameters: `configure_sampler`); it lands in the token ring as the next
    /// decode step's input, and only its id is read back.
    pub async fn prefill_sampled(&mut self, ids: &[u32], u: f32) -> Result<u32, PipelineError> {
        self.check_prompt(ids)?;
        let start = self.pos;
        let plan = self.plan(ids.len());
        let (last, chunks) = plan.split_last().expect("a non-empty prompt has a chunk");
        for &step in chunks {
            let lo = step.pos0() - start;
            self.run_step(step, &ids[lo..lo + step.rows()], 0).await?;
        }
        self.sampler.write_randoms(&self.ctx, 0, &[u])?;
        self.tokens.reset();
        let ctx = self.ctx.clone();
        let mut rec = Recorder::new(&ctx);
        let lo = last.pos0() - start;
        let chunk = StepIds::Host(&ids[lo..lo + last.rows()]);
        let slot = self.tokens.output_slot(0);
        let output = StepOutput::Sample { step: 0, slot };
        self.held.forget_from(last.pos0());
        self.record_step(&mut rec, *last, chunk, output)?;
        let ticket = self.tokens.record_readback(&mut rec, 1)?;
        let submitted = rec.submit_indexed().await?;
        self.held.wrote(last.pos0(), &ids[lo..lo + last.rows()]);
        self.pos += last.rows();
        Ok(self.tokens.read(&ctx, ticket, submitted.index).await?[0])
    }

    fn check_prompt(&self, ids: &[u32]) -> Result<(), PipelineError> {
        if ids.is_empty() {
            return Err(PipelineError::InvalidOption(
                "the prompt has no tokens".into(),
            ));
        }
        self.check_room(ids.len())
    }

    fn plan(&self, n: usize) -> Vec<InferenceStep> {
        plan_prefill(self.pos, n, self.act.max_rows)
    }
}
