//! Generation: prefill the prompt, then sample and decode until a stop.
//!
//! Step-wise (`start_generation`, then `next_token` until `None`) so a caller
//! that yields between tokens — a JavaScript async iterator, a chat server —
//! drives it one token per call; `generate` is the whole loop.
//!
//! Sampling runs on the GPU (`kernels::sample`) and the sampled token feeds
//! the next step there, so one submit decodes `tokens_per_submit` tokens and
//! reads back only their ids. Tokens are then handed out one per call; those
//! sampled past a stop are never returned, and their K/V positions are given
//! back. The CPU `Sampler` draws the random numbers (seeded), so a seed gives
//! the same tokens whatever the tokens per submit.

use std::collections::VecDeque;

use web_time::Instant;

use super::decode::InFlight;
use super::sampling::{Sampler, SamplingParams};
use super::stats::GenerationStats;
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::gpu::CounterSnapshot;
use crate::pipeline::error::PipelineError;

/// One generation in progress.
pub struct Generation {
    /// The CPU sampler: the random numbers (and the reference's window).
    sampler: Sampler,
    stop: StopCriteria,
    /// Sampled but not yet returned by `next_token`, in order.
    queue: VecDeque<u32>,
    /// The submit after the one `queue` came from, already running.
    in_flight: Option<InFlight>,
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
    /// Ends after the tokens already returned because the text reached a
    /// stop string (see `StopStrings`): finishes as `Stop`.
    pub fn stop_at_string(&mut self) {
        if self.finish_reason.is_none() {
            self.finish_reason = Some(FinishReason::Stop);
        }
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
    /// Starts a sequence: prefills `prompt` and samples the first token.
    /// The longest prefix the cache already holds (the last sequence's prompt
    /// and reply, as a chat's next turn starts) is kept, and only the rest is
    /// prefilled; where `prompt` differs earlier, the position rolls back to
    /// the difference and the cache past it is overwritten.
    pub async fn start_generation(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
    ) -> Result<Generation, PipelineError> {
        let mut sampler = Sampler::new(sampling.clone())?;
        if stop.max_tokens == 0 {
            return Err(PipelineError::InvalidOption(
                "max tokens must be > 0".into(),
            ));
        }
        let cached = self.held.reusable(prompt);
        self.pos = cached;
        self.held.forget_from(cached);
        self.configure_sampler(sampling, prompt)?;
        sampler.accept(prompt);
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            cached_tokens: cached,
            tokens_per_submit: self.tokens_per_submit(),
            weight_bytes_per_token: self.model().weight_bytes_per_token(),
            ..Default::default()
        };
        let start = Instant::now();
        let u = sampler.next_uniform();
        let first = self.prefill_sampled(&prompt[cached..], u).await?;
        stats.prefill_seconds = start.elapsed().as_secs_f64();
        stats.time_to_first_token = stats.prefill_seconds;
        Ok(Generation {
            sampler,
            stop,
            queue: VecDeque::from([first]),
            in_flight: None,
            ids: Vec::new(),
            finish_reason: None,
            stats,
            decode_start: Instant::now(),
            counters_before: self.ctx.counters.snapshot(),
        })
    }

    /// The next token, or `None` once the generation has finished (see
    /// `Generation::finish_reason`). A call that finds no sampled token
    /// waiting runs one submit of decode steps.
    pub async fn next_token(&mut self, g: &mut Generation) -> Result<Option<u32>, PipelineError> {
        if g.finish_reason.is_some() {
            self.discard(g);
            return Ok(None);
        }
        if g.queue.is_empty() {
            let current = match g.in_flight.take() {
                Some(running) => running,
                None => self
                    .launch(g, 0)
                    .await?
                    .expect("room for a step: checked at the last token"),
            };
            // Record and submit the next steps before waiting for these: the
            // GPU runs them back to back while the CPU reads and hands out.
            g.in_flight = self.launch(g, current.steps()).await?;
            let ids = self.land_decode(current).await?;
            g.queue.extend(ids);
        }
        let token = g.queue.pop_front().expect("a sampled token");
        // Positions whose K/V hold this token's predecessors (it is not yet in).
        let running = g.in_flight.as_ref().map_or(0, InFlight::steps);
        let pos = self.pos - g.queue.len() - running;
        if let Some(&previous) = g.ids.last() {
            // `token` was sampled by the step that embedded `previous`, so
            // that step's K/V is in.
            self.held.learned(pos - 1, previous);
        }
        g.sampler.accept(&[token]);
        g.ids.push(token);
        g.stats.generated_tokens = g.ids.len();
        g.stats.decode_seconds = g.decode_start.elapsed().as_secs_f64();
        g.stats.decode_counters = self.ctx.counters.snapshot().since(g.counters_before);
        g.finish_reason = g.stop.check(token, g.ids.len(), pos, self.ctx_len());
        if g.finish_reason.is_some() {
            self.discard(g);
        }
        Ok(Some(token))
    }

    /// Launches the next submit of decode steps, if any are left: never past
    /// max_tokens or the context, so only stop tokens leave sampled tokens
    /// unused. `landing`: steps launched earlier whose ids are not yet in.
    async fn launch(
        &mut self,
        g: &mut Generation,
        landing: usize,
    ) -> Result<Option<InFlight>, PipelineError> {
        let running = g.in_flight.as_ref().map_or(0, InFlight::steps);
        let left = g.stop.max_tokens - g.ids.len() - g.queue.len() - running - landing;
        let n = self
            .tokens_per_submit()
            .min(left)
            .min(self.ctx_len() - self.pos);
        if n == 0 {
            return Ok(None);
        }
        let mut us = [0.0f32; super::MAX_TOKENS_PER_SUBMIT];
        for u in &mut us[..n] {
            *u = g.sampler.next_uniform();
        }
        let in_flight = self.launch_decode(&us[..n]).await?;
        g.stats.decode_steps += n;
        g.stats.cpu_record_seconds += in_flight.cpu_seconds;
        Ok(Some(in_flight))
    }

    /// Drops tokens sampled past the end (handed back or still running) and
    /// gives back their positions.
    fn discard(&mut self, g: &mut Generation) {
        let running = g.in_flight.take().map_or(0, |f| f.steps());
        self.roll_back(g.queue.len() + running);
        g.queue.clear();
    }

    /// Generates from `prompt` (reusing the cached prefix, as
    /// `start_generation` does). `on_token` sees each token
    /// as it is sampled and returns false to stop early.
    pub async fn generate(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenerationOutput, PipelineError> {
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
