//! Constrained generation: every token is sampled on the GPU under the
//! grammar's allowed-token mask, so the output always matches the grammar.
//!
//! The mask depends on the token before, so this runs one sampled token per
//! submit: compute the mask on the CPU (llguidance), upload it (a few
//! kilobytes), decode and sample on the GPU, read back the id, advance the
//! grammar. Where the grammar forces tokens (a JSON key after its `{`), they
//! are not sampled: they go through the model with the sampled token before
//! them as one host chunk (a prefill step), which also samples the next
//! token. It ends when the grammar is finished (an end token sampled where
//! the grammar accepts, or nothing more can follow), or at `max_tokens` or a
//! full context, where the output is cut short of a match.
//!
//! `start_constrained` / `next_constrained_token` step it one token at a
//! time (the JS bindings stream that way, as `Generation` does for free
//! text); `generate_constrained` runs it to the end.

use std::collections::VecDeque;

use web_time::Instant;

use super::sampling::{Sampler, SamplingParams};
use super::stats::GenerationStats;
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::constrain::Constraint;
use crate::gpu::CounterSnapshot;
use crate::pipeline::error::PipelineError;

pub struct ConstrainedOutput {
    /// Generated ids, sampled and forced, an end token included.
    pub ids: Vec<u32>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
    /// CPU seconds spent computing masks and advancing the grammar.
    pub mask_seconds: f64,
    /// Masks computed (one per sampled token).
    pub masks: usize,
    /// Of `ids`, how many the grammar forced.
    pub forced_tokens: usize,
}

impl ConstrainedOutput {
    /// Milliseconds of grammar work per sampled token.
    pub fn mask_ms_per_token(&self) -> f64 {
        if self.masks == 0 {
            0.0
        } else {
            self.mask_seconds * 1e3 / self.masks as f64
        }
    }
}

/// A constrained generation in progress (`Pipeline::start_constrained`).
pub struct ConstrainedGeneration {
    constraint: Constraint,
    sampler: Sampler,
    sampling: SamplingParams,
    stop: StopCriteria,
    prompt: Vec<u32>,
    /// Host tokens to run before the next sample: the prompt, then the last
    /// sampled token and the tokens forced after it.
    host: Vec<u32>,
    mask: Vec<u32>,
    /// Handed out by a step but not yet returned by `next_constrained_token`.
    queue: VecDeque<u32>,
    out: ConstrainedOutput,
    reason: Option<FinishReason>,
    /// `finish_constrained` ran: the stats are final.
    finished: bool,
    start: Instant,
    decode_start: Instant,
    counters_before: CounterSnapshot,
}

impl ConstrainedGeneration {
    /// Tokens returned so far by `next_constrained_token` (sampled and
    /// forced).
    pub fn ids(&self) -> &[u32] {
        &self.out.ids[..self.out.ids.len() - self.queue.len()]
    }
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.reason
    }
    pub fn stats(&self) -> &GenerationStats {
        &self.out.stats
    }
    /// Ends after the tokens already returned (the text reached a stop
    /// string): finishes as `Stop`.
    pub fn stop_at_string(&mut self) {
        self.end_early(FinishReason::Stop);
    }
    /// Stops after the tokens already returned (an abort).
    pub fn cancel(&mut self) {
        self.end_early(FinishReason::Cancelled);
    }
    fn end_early(&mut self, reason: FinishReason) {
        if !self.finished && (self.reason.is_none() || !self.queue.is_empty()) {
            // Tokens queued but never returned are not part of the output.
            let kept = self.out.ids.len() - self.queue.len();
            self.out.ids.truncate(kept);
            self.queue.clear();
            self.reason = Some(reason);
        }
    }

    /// Appends `ids` to the output as far as `max_tokens` allows; says why
    /// to stop, if it is time.
    fn hand_out(&mut self, ids: &[u32], forced: bool) -> Option<FinishReason> {
        for &id in ids {
            if self.out.ids.len() >= self.stop.max_tokens {
                return Some(FinishReason::Length);
            }
            self.out.ids.push(id);
            self.queue.push_back(id);
            self.out.forced_tokens += forced as usize;
        }
        (self.out.ids.len() >= self.stop.max_tokens).then_some(FinishReason::Length)
    }
}

impl Pipeline {
    /// Restricts the GPU sampler to the tokens `words` allows (see
    /// `kernels::sample::SamplerState::set_mask`) until `configure_sampler`.
    pub fn set_token_mask(&mut self, words: &[u32]) -> Result<(), PipelineError> {
        let ctx = self.ctx.clone();
        Ok(self.sampler.set_mask(&ctx, words)?)
    }

    /// Starts generating from `prompt` under `constraint` (the leading
    /// tokens the KV cache already holds are not run again); nothing runs on
    /// the GPU until the first `next_constrained_token`.
    pub fn start_constrained(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
        mut constraint: Constraint,
    ) -> Result<ConstrainedGeneration, PipelineError> {
        let sampler = Sampler::new(sampling.clone())?;
        if stop.max_tokens == 0 {
            return Err(PipelineError::InvalidOption(
                "max tokens must be > 0".into(),
            ));
        }
        // The prompt's leading tokens whose K/V the cache holds are kept, as
        // `start_generation` keeps them (a conversation's next turn, or the
        // same tools prompt under another tool_choice).
        let cached = self.held.reusable(prompt);
        self.pos = cached;
        self.held.forget_from(cached);
        self.configure_sampler(sampling, prompt)?;
        let start = Instant::now();
        let forced = constraint.take_forced()?;
        let mut g = ConstrainedGeneration {
            constraint,
            sampler,
            sampling: sampling.clone(),
            stop,
            prompt: prompt.to_vec(),
            host: prompt[cached..].to_vec(),
            mask: Vec::new(),
            queue: VecDeque::new(),
            out: ConstrainedOutput {
                ids: Vec::new(),
                finish_reason: FinishReason::Cancelled,
                stats: GenerationStats {
                    prompt_tokens: prompt.len(),
                    cached_tokens: cached,
                    tokens_per_submit: 1,
                    weight_bytes_per_token: self.model().weight_bytes_per_token(),
                    ..Default::default()
                },
                mask_seconds: start.elapsed().as_secs_f64(),
                masks: 0,
                forced_tokens: 0,
            },
            reason: None,
            finished: false,
            start,
            decode_start: start,
            counters_before: self.ctx.counters.snapshot(),
        };
        g.reason = g.hand_out(&forced, true);
        g.host.extend(&forced);
        if g.reason.is_none() && g.constraint.is_finished() {
            g.reason = Some(FinishReason::Stop);
        }
        Ok(g)
    }

    /// The next token of `g`, or `None` once it has finished: a step runs
    /// (mask, sample, the grammar's forced tokens after it) only when the
    /// tokens of the last one are all returned.
    pub async fn next_constrained_token(
        &mut self,
        g: &mut ConstrainedGeneration,
    ) -> Result<Option<u32>, PipelineError> {
        if g.queue.is_empty() && g.reason.is_none() {
            self.constrained_step(g).await?;
        }
        // A step hands out a token or ends the generation, so an empty queue
        // here means the end.
        let next = g.queue.pop_front();
        if next.is_none() && !g.finished {
            self.finish_constrained(g);
        }
        Ok(next)
    }

    /// One sampled token under the mask, and the tokens forced after it.
    async fn constrained_step(
        &mut self,
        g: &mut ConstrainedGeneration,
    ) -> Result<(), PipelineError> {
        if self.pos + g.host.len().max(1) > self.ctx_len() {
            g.reason = Some(FinishReason::ContextFull);
            return Ok(());
        }
        let t = Instant::now();
        g.constraint.next_mask(&mut g.mask)?;
        g.out.mask_seconds += t.elapsed().as_secs_f64();
        g.out.masks += 1;
        self.set_token_mask(&g.mask)?;
        if !g.host.is_empty() && g.sampling.penalties_on() {
            // Forced tokens were never sampled, so the GPU's penalty window
            // lacks them: refill it with the whole sequence.
            let seq: Vec<u32> = g.prompt.iter().chain(&g.out.ids).copied().collect();
            self.sampler.write_history(&self.ctx, &seq);
        }
        let u = g.sampler.next_uniform();
        let id = if g.host.is_empty() {
            // The last sampled token is still in the token ring.
            self.decode_sampled(&[u]).await?.0[0]
        } else {
            self.prefill_sampled(&g.host, u).await?
        };
        if g.out.masks == 1 {
            // The prompt's step: prefill and the first token.
            g.out.stats.prefill_seconds = g.start.elapsed().as_secs_f64();
            g.out.stats.time_to_first_token = g.out.stats.prefill_seconds;
            g.decode_start = Instant::now();
        } else {
            // Positions this step ran: the ring's token, or the host chunk.
            g.out.stats.decode_steps += g.host.len().max(1);
        }
        g.host.clear();
        let t = Instant::now();
        g.constraint.consume(id)?;
        let forced = if g.constraint.is_finished() {
            Vec::new()
        } else {
            g.constraint.take_forced()?
        };
        g.out.mask_seconds += t.elapsed().as_secs_f64();
        g.reason = g.hand_out(&[id], false);
        if g.reason.is_none() && !forced.is_empty() {
            g.reason = g.hand_out(&forced, true);
            g.host.push(id);
            g.host.extend(&forced);
        }
        if g.constraint.is_finished() || g.stop.stop_ids.contains(&id) {
            g.reason = Some(FinishReason::Stop);
        }
        Ok(())
    }

    /// The mask off, the stats final.
    fn finish_constrained(&mut self, g: &mut ConstrainedGeneration) {
        g.finished = true;
        self.sampler.clear_mask();
        g.out.finish_reason = g.reason.unwrap_or(FinishReason::Cancelled);
        g.out.stats.generated_tokens = g.out.ids.len();
        g.out.stats.decode_seconds = g.decode_start.elapsed().as_secs_f64();
        g.out.stats.decode_counters = self.ctx.counters.snapshot().since(g.counters_before);
    }

    /// Generates from `prompt` under `constraint`, reusing the cached prefix.
    /// `on_token` sees each token (forced ones too) and returns false to stop.
    pub async fn generate_constrained(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        constraint: Constraint,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<ConstrainedOutput, PipelineError> {
        let mut g = self.start_constrained(prompt, sampling, stop.clone(), constraint)?;
        while let Some(id) = self.next_constrained_token(&mut g).await? {
            if !on_token(id) {
                g.cancel();
            }
        }
        Ok(g.out)
    }
}
