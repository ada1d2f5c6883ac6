//! The verifying pass: the token after the cache and the drafts after it
//! run as one step (`InferenceStep::Verify`: each row through decode's
//! kernels and sums, several rows a dispatch; or, where passes are not
//! exact, a prefill chunk); a token is sampled after every row on the GPU,
//! and only those ids are read back.

use super::super::step::InferenceStep;
use super::super::{Pipeline, StepIds, StepOutput};
use crate::gpu::Recorder;
use crate::pipeline::error::PipelineError;
use crate::pipeline::logit_rows;

/// What one pass kept.
#[derive(Debug, PartialEq)]
pub struct Verified {
    /// Leading drafts the model agreed with.
    pub accepted: usize,
    /// The tokens the pass gives: the accepted drafts, then the model's own
    /// token after them.
    pub tokens: Vec<u32>,
}

/// How many leading `drafts` the model's samples confirm: `sampled[j]` is
/// what the model drew after row j (row 0 the token before the drafts), so
/// draft j is kept while every draft before it was and it equals
/// `sampled[j]`.
pub fn accept(drafts: &[u32], sampled: &[u32]) -> Verified {
    debug_assert_eq!(sampled.len(), drafts.len() + 1);
    let accepted = drafts
        .iter()
        .zip(sampled)
        .take_while(|(d, s)| d == s)
        .count();
    Verified {
        accepted,
        tokens: sampled[..=accepted].to_vec(),
    }
}

impl Pipeline {
    /// Runs `input` (the token after the cache) and `drafts` at the current
    /// position in one step and samples after every row, row j with random
    /// number `us[j]` (parameters: `configure_sampler`). Keeps the positions
    /// of `input` and the accepted drafts; the rest are given back.
    pub async fn verify_drafts(
        &mut self,
        input: u32,
        drafts: &[u32],
        us: &[f32],
    ) -> Result<Verified, PipelineError> {
        let rows = drafts.len() + 1;
        if drafts.is_empty() || rows > self.verify_rows() || us.len() != rows {
            return Err(PipelineError::InvalidOption(format!(
                "a verifying pass of {} drafts with {} random numbers (1..={} drafts, one number a row)",
                drafts.len(),
                us.len(),
                self.verify_rows() - 1
            )));
        }
        self.check_room(rows)?;
        let ids: Vec<u32> = std::iter::once(input)
            .chain(drafts.iter().copied())
            .collect();
        self.sampler.write_randoms(&self.ctx, 0, us)?;
        self.tokens.reset();
        let ctx = self.ctx.clone();
        let mut rec = Recorder::new(&ctx);
        let pos0 = self.pos;
        let step = self.verify_step(pos0, rows);
        self.held.forget_from(pos0);
        self.record_step(
            &mut rec,
            step,
            StepIds::Host(&ids),
            StepOutput::SampleRows(rows),
        )?;
        let ticket = self.tokens.record_readback(&mut rec, rows)?;
        let submitted = rec.submit_indexed().await?;
        let sampled = self.tokens.read(&ctx, ticket, submitted.index).await?;
        let verified = accept(drafts, &sampled);
        let kept = verified.accepted + 1;
        self.held.wrote(pos0, &ids[..kept]);
        self.pos = pos0 + kept;
        // The next plain decode step embeds the ring's input slot.
        let last = *verified.tokens.last().expect("a pass gives a token");
        self.tokens.set_input(&ctx, last);
        Ok(verified)
    }

    /// The step a verifying pass of `rows` rows from `pos0` runs: each row
    /// as a decode step at its position would run (what the pass keeps is
    /// then what decoding one by one gives), or where passes are not exact
    /// a prefill chunk.
    pub(crate) fn verify_step(&self, pos0: usize, rows: usize) -> InferenceStep {
        match self.exact_passes {
            true => InferenceStep::Verify { pos0, rows },
            false => InferenceStep::Prefill { pos0, rows },
        }
    }

    /// Whether verifying passes run their rows as decode steps would.
    pub fn exact_passes(&self) -> bool {
        self.exact_passes
    }

    /// Sets whether verifying passes run their rows as decode steps would
    /// (`InferenceStep::Verify`: drafted greedy output is then bit for bit
    /// plain decoding's) or as a prefill chunk (cheaper on CPU adapters;
    /// where two tokens' logits tie within rounding, a drafted greedy run
    /// can part from the plain one there). The default is the adapter's
    /// (`Tuning::exact_passes`: exact on GPUs). Prepares the pipelines the
    /// other form's passes use, up to the rows already prepared.
    pub async fn set_exact_passes(&mut self, exact: bool) -> Result<(), PipelineError> {
        if exact == self.exact_passes {
            return Ok(());
        }
        self.exact_passes = exact;
        if self.verify_rows_warmed > 0 {
            self.warm_up_verifying(self.verify_rows_warmed).await?;
        }
        Ok(())
    }

    /// Most rows a verifying pass runs: one step, one sampled token a row.
    pub fn verify_rows(&self) -> usize {
        debug_assert_eq!(self.act.max_logit_rows, logit_rows(self.act.max_rows));
        verify_rows(self.act.max_rows)
    }
}

/// Most rows a verifying pass of a pipeline whose steps run `step_rows`
/// rows runs: its logits rows, and a sampled token (and under a grammar a
/// mask) a row.
pub(crate) fn verify_rows(step_rows: usize) -> usize {
    step_rows
        .min(logit_rows(step_rows))
        .min(super::MAX_DRAFT_TOKENS + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_drafts_up_to_the_first_disagreement_and_the_token_there() {
        let v = accept(&[5, 6, 7], &[5, 6, 9, 4]);
        assert_eq!((v.accepted, v.tokens), (2, vec![5, 6, 9]));
        let v = accept(&[5, 6, 7], &[5, 6, 7, 4]);
        assert_eq!((v.accepted, v.tokens), (3, vec![5, 6, 7, 4]));
        let v = accept(&[5, 6, 7], &[1, 6, 7, 4]);
        assert_eq!((v.accepted, v.tokens), (0, vec![1]));
    }
}
