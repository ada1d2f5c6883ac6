//! Generation: prefill the prompt, then sample and decode until a stop.

use web_time::Instant;

use super::sampling::{Sampler, SamplingParams};
use super::stats::GenerationStats;
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::error::WickError;

pub struct GenerationOutput {
    pub ids: Vec<u32>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
}

impl Pipeline {
    /// Generates from `prompt` (starting a fresh sequence). `on_token` sees
    /// each token as it is sampled and returns false to stop early.
    pub async fn generate(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenerationOutput, WickError> {
        let mut sampler = Sampler::new(sampling.clone())?;
        if stop.max_tokens == 0 {
            return Err(WickError::InvalidOption("max tokens must be > 0".into()));
        }
        self.reset();
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            ..Default::default()
        };
        let start = Instant::now();
        let logits = self.prefill(prompt, 1).await?;
        stats.prefill_seconds = start.elapsed().as_secs_f64();
        let mut token = sampler.sample(&logits[0]);
        stats.time_to_first_token = start.elapsed().as_secs_f64();

        let mut ids = Vec::new();
        let decode_start = Instant::now();
        let counters_before = self.ctx.counters.snapshot();
        let finish_reason = loop {
            ids.push(token);
            if !on_token(token) {
                break FinishReason::Cancelled;
            }
            if let Some(reason) = stop.check(token, ids.len(), self.pos, self.ctx_len()) {
                break reason;
            }
            let logits = self.decode(token).await?;
            stats.decode_steps += 1;
            token = sampler.sample(&logits);
        };
        stats.decode_seconds = decode_start.elapsed().as_secs_f64();
        stats.decode_counters = self.ctx.counters.snapshot().since(counters_before);
        stats.generated_tokens = ids.len();
        Ok(GenerationOutput {
            ids,
            finish_reason,
            stats,
        })
    }
}
