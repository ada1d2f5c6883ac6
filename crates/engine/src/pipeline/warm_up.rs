//! No compile on the first token: loading records every step shape a
//! generation will use through a compile-only recorder (each pipeline and
//! bind group is created once, nothing runs), then runs one real step so the
//! GPU has touched every buffer before the first `generate`.

use super::sampling::SamplingParams;
use super::step::InferenceStep;
use super::{Pipeline, StepIds, StepOutput};
use crate::error::WickError;
use crate::gpu::Recorder;

/// Row counts that select every kernel variant a prefill chunk can use: one
/// per matrix-vector width (1..=4 rows), one per token-tile count of the
/// tiled form (5..8, 9..16, 17..32, 33+ rows).
const ROW_CLASSES: [usize; 8] = [1, 2, 3, 4, 5, 9, 17, 33];

impl Pipeline {
    /// Prepares every kernel a prompt, a teacher-forced read of logits and
    /// sampled decoding will record, then runs a one-token step and forgets it.
    pub async fn warm_up(&mut self) -> Result<(), WickError> {
        let ctx = self.ctx.clone();
        let mut rec = Recorder::compile_only(&ctx);
        let chunk = self.act.max_rows;
        let zeros = vec![0u32; chunk];
        let sizes = ROW_CLASSES.iter().copied().filter(|&r| r < chunk);
        for rows in sizes.chain([chunk]) {
            let step = InferenceStep::Prefill { pos0: 0, rows };
            self.record_step(
                &mut rec,
                step,
                StepIds::Host(&zeros[..rows]),
                StepOutput::Logits(rows),
            )?;
            let sample = StepOutput::Sample { step: 0, slot: 0 };
            self.record_step(&mut rec, step, StepIds::Host(&zeros[..rows]), sample)?;
        }
        self.record_decode_step(&mut rec)?;
        rec.submit().await?;
        self.reset();
        self.configure_sampler(&SamplingParams::default(), &[])?;
        self.prefill_sampled(&[0], 0.0).await?;
        self.reset();
        Ok(())
    }

    /// Records one sampled decode step into `rec` (tests count what the
    /// recording allocates through a compile-only recorder).
    pub fn record_decode_step(&self, rec: &mut Recorder) -> Result<(), WickError> {
        let decode = InferenceStep::Decode { pos: 0 };
        let sample = StepOutput::Sample { step: 0, slot: 1 };
        self.record_step(rec, decode, StepIds::Ring(0), sample)
    }
}
