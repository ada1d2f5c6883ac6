//! Generation: prefill the prompt, then sample and decode until a stop.
//!
//! Step-wise (`start_generation`, then `next_token` until `None`) so a caller
//! that yields between tokens — a JavaScript async iterator, a chat server —
//! drives it one token per call; `generate` is the whole loop.

use web_time::Instant;

use super::sampling::{Sampler, SamplingParams};
use super::stats::GenerationStats;
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::error::WickError;
use crate::gpu::CounterSnapshot;

/// One generation in progress.
pub struct Generation {
    sampler: Sampler,
    stop: StopCriteria,
    /// Sampled but not yet returned by `next_token`.
    next: Option<u32>,
    ids: Vec<u32>,
    finish_reason: Option<FinishReason>,
    stats: GenerationStats,
    decode_start: Instant,
    counters_before: CounterSnapshot,
}

impl Generation {
    /// Tokens returned so far.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish_reason
    }
    pub fn stats(&self) -> &GenerationStats {
        &self.stats
    }
    /// Stops after the tokens already returned (an abort).
    pub fn cancel(&mut self) {
        if self.finish_reason.is_none() {
            self.finish_reason = Some(FinishReason::Cancelled);
        }
    }
}

pub struct GenerationOutput {
    pub ids: Vec<u32>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
}

impl Pipeline {
    /// Starts a fresh sequence: prefills `prompt` and samples the first token.
    pub async fn start_generation(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
    ) -> Result<Generation, WickError> {
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
        let first = sampler.sample(&logits[0]);
        stats.time_to_first_token = start.elapsed().as_secs_f64();
        Ok(Generation {
            sampler,
            stop,
            next: Some(first),
            ids: Vec::new(),
            finish_reason: None,
            stats,
            decode_start: Instant::now(),
            counters_before: self.ctx.counters.snapshot(),
        })
    }

    /// The next token, or `None` once the generation has finished (see
    /// `Generation::finish_reason`). Each call after the first runs one
    /// decode step.
    pub async fn next_token(&mut self, g: &mut Generation) -> Result<Option<u32>, WickError> {
        if g.finish_reason.is_some() {
            return Ok(None);
        }
        let token = match g.next.take() {
            Some(token) => token,
            None => {
                let last = *g.ids.last().expect("a token was returned before");
                let logits = self.decode(last).await?;
                g.stats.decode_steps += 1;
                g.sampler.sample(&logits)
            }
        };
        g.ids.push(token);
        g.stats.generated_tokens = g.ids.len();
        g.stats.decode_seconds = g.decode_start.elapsed().as_secs_f64();
        g.stats.decode_counters = self.ctx.counters.snapshot().since(g.counters_before);
        g.finish_reason = g.stop.check(token, g.ids.len(), self.pos, self.ctx_len());
        Ok(Some(token))
    }

    /// Generates from `prompt` (a fresh sequence). `on_token` sees each token
    /// as it is sampled and returns false to stop early.
    pub async fn generate(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenerationOutput, WickError> {
        let mut g = self
            .start_generation(prompt, sampling, stop.clone())
            .await?;
        while let Some(token) = self.next_token(&mut g).await? {
            if !on_token(token) {
                g.cancel();
            }
        }
        Ok(GenerationOutput {
            finish_reason: g.finish_reason.unwrap_or(FinishReason::Cancelled),
            ids: g.ids,
            stats: g.stats,
        })
    }
}
