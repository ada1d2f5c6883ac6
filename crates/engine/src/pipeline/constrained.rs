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

use web_time::Instant;

use super::sampling::{Sampler, SamplingParams};
use super::stats::GenerationStats;
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::constrain::Constraint;
use crate::error::WickError;

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

impl Pipeline {
    /// Restricts the GPU sampler to the tokens `words` allows (see
    /// `kernels::sample::SamplerState::set_mask`) until `configure_sampler`.
    pub fn set_token_mask(&mut self, words: &[u32]) -> Result<(), WickError> {
        let ctx = self.ctx.clone();
        Ok(self.sampler.set_mask(&ctx, words)?)
    }

    /// Generates from `prompt` (a fresh sequence) under `constraint`.
    /// `on_token` sees each token (forced ones too) and returns false to stop.
    pub async fn generate_constrained(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        constraint: &mut Constraint,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<ConstrainedOutput, WickError> {
        let mut sampler = Sampler::new(sampling.clone())?;
        if stop.max_tokens == 0 {
            return Err(WickError::InvalidOption("max tokens must be > 0".into()));
        }
        self.reset();
        self.configure_sampler(sampling, prompt)?;
        let mut out = ConstrainedOutput {
            ids: Vec::new(),
            finish_reason: FinishReason::Cancelled,
            stats: GenerationStats {
                prompt_tokens: prompt.len(),
                tokens_per_submit: 1,
                weight_bytes_per_token: self.model().weight_bytes_per_token(),
                ..Default::default()
            },
            mask_seconds: 0.0,
            masks: 0,
            forced_tokens: 0,
        };
        let counters_before = self.ctx.counters.snapshot();
        let start = Instant::now();
        let mut decode_start = start;
        // Host tokens to run before the next sample: the prompt, then the
        // last sampled token and the tokens forced after it.
        let mut host: Vec<u32> = prompt.to_vec();
        let mut mask = Vec::new();
        let t = Instant::now();
        let forced = constraint.take_forced()?;
        out.mask_seconds += t.elapsed().as_secs_f64();
        let mut reason = self.hand_out(&mut out, &forced, true, stop, on_token);
        host.extend(&forced);
        if reason.is_none() && constraint.is_finished() {
            reason = Some(FinishReason::Stop);
        }
        while reason.is_none() {
            if self.pos + host.len().max(1) > self.ctx_len() {
                reason = Some(FinishReason::ContextFull);
                break;
            }
            let t = Instant::now();
            constraint.next_mask(&mut mask)?;
            out.mask_seconds += t.elapsed().as_secs_f64();
            out.masks += 1;
            self.set_token_mask(&mask)?;
            if !host.is_empty() && sampling.penalties_on() {
                // Forced tokens were never sampled, so the GPU's penalty
                // window lacks them: refill it with the whole sequence.
                let seq: Vec<u32> = prompt.iter().chain(&out.ids).copied().collect();
                self.sampler.write_history(&self.ctx, &seq);
            }
            let u = sampler.next_uniform();
            let id = if host.is_empty() {
                // The last sampled token is still in the token ring.
                self.decode_sampled(&[u]).await?.0[0]
            } else {
                self.prefill_sampled(&host, u).await?
            };
            if out.masks == 1 {
                // The prompt's step: prefill and the first token.
                out.stats.prefill_seconds = start.elapsed().as_secs_f64();
                out.stats.time_to_first_token = out.stats.prefill_seconds;
                decode_start = Instant::now();
            } else {
                // Positions this step ran: the ring's token, or the host chunk.
                out.stats.decode_steps += host.len().max(1);
            }
            host.clear();
            let t = Instant::now();
            constraint.consume(id)?;
            let forced = if constraint.is_finished() {
                Vec::new()
            } else {
                constraint.take_forced()?
            };
            out.mask_seconds += t.elapsed().as_secs_f64();
            reason = self.hand_out(&mut out, &[id], false, stop, on_token);
            if reason.is_none() && !forced.is_empty() {
                reason = self.hand_out(&mut out, &forced, true, stop, on_token);
                host.push(id);
                host.extend(&forced);
            }
            if constraint.is_finished() || stop.stop_ids.contains(&id) {
                reason = Some(FinishReason::Stop);
            }
        }
        self.sampler.clear_mask();
        out.finish_reason = reason.unwrap_or(FinishReason::Cancelled);
        out.stats.generated_tokens = out.ids.len();
        out.stats.decode_seconds = decode_start.elapsed().as_secs_f64();
        out.stats.decode_counters = self.ctx.counters.snapshot().since(counters_before);
        Ok(out)
    }

    /// Appends `ids` to the output as far as `max_tokens` allows, showing
    /// each to `on_token`; says why to stop, if it is time.
    fn hand_out(
        &self,
        out: &mut ConstrainedOutput,
        ids: &[u32],
        forced: bool,
        stop: &StopCriteria,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Option<FinishReason> {
        for &id in ids {
            if out.ids.len() >= stop.max_tokens {
                return Some(FinishReason::Length);
            }
            out.ids.push(id);
            out.forced_tokens += forced as usize;
            if !on_token(id) {
                return Some(FinishReason::Cancelled);
            }
        }
        (out.ids.len() >= stop.max_tokens).then_some(FinishReason::Length)
    }
}
