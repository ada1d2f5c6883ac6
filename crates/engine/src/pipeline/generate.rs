//! Generation: one state machine for free text and text under a grammar.
//!
//! Step-wise (`start_generation`, then `next_token` until `None`) so a caller
//! that yields between tokens — a JavaScript async iterator, a chat server —
//! drives it one token per call; `generate` is the whole loop.
//!
//! Each step runs what the model has not yet seen (the prompt, or tokens a
//! grammar forced) as a host chunk, or the last sampled token from the GPU's
//! token ring, and samples on the GPU (`kernels::sample`); only ids are read
//! back. Tokens are handed out one per call; those sampled past a stop are
//! never returned, and the positions they took are given back. The CPU
//! `Sampler` draws the random numbers (seeded), so a seed gives the same
//! tokens however the steps are grouped into submits.
//!
//! Free text is the grammar that allows every token and forces none, so no
//! step depends on the CPU seeing the token before: one submit decodes
//! `tokens_per_submit` tokens, and the next submit is recorded while the GPU
//! runs the current one. Under a grammar (`constrain::Constraint`) the
//! allowed-token mask depends on the token before, so a step samples one
//! token: compute the mask (llguidance), upload it (a few kilobytes), sample
//! under it, advance the grammar. Tokens the grammar forces (a JSON key
//! after its `{`) are not sampled: they are handed out and run through the
//! model with the sampled token before them, as the next step's host chunk.
//! A grammar ends the generation when it is finished (an end token sampled
//! where it accepts, or nothing more can follow); `max_tokens` or a full
//! context cut the output short of a match.
//!
//! With drafting (`speculative`), a step verifies drafted tokens in one
//! pass where the drafter has some: under a grammar only those it allows,
//! each row sampled under the grammar's mask after the drafts before it
//! (`Constraint::draft_masks`).

use std::collections::VecDeque;

use web_time::Instant;

use super::decode::InFlight;
use super::sampling::{Sampler, SamplingParams};
use super::speculative::{lookup, Speculation, SpeculativeStats};
use super::stats::{GenerationStats, GrammarStats};
use super::stopping::{FinishReason, StopCriteria};
use super::Pipeline;
use crate::constrain::Constraint;
use crate::gpu::CounterSnapshot;
use crate::pipeline::error::PipelineError;

/// One generation in progress.
pub struct Generation {
    /// The CPU sampler: the random numbers (and the reference's window).
    sampler: Sampler,
    sampling: SamplingParams,
    stop: StopCriteria,
    /// The grammar the output must match; `None` for free text.
    grammar: Option<Grammar>,
    /// How the generation drafts tokens (`speculative`).
    speculation: Speculation,
    /// The prompt, and every token handed out or queued after it.
    sequence: Vec<u32>,
    /// Tokens the model has not seen, to run as a host chunk before the
    /// next sample: the prompt's uncached part at first; under a grammar,
    /// the last sampled token and the tokens forced after it.
    host: Vec<u32>,
    /// Sampled (or forced) but not yet returned by `next_token`, in order.
    queue: VecDeque<u32>,
    /// Under a grammar: how many of the queue's first tokens hold a cache
    /// position (a verifying pass embedded the token before each; a plain
    /// step under a grammar embeds nothing of what it queues).
    queued_positions: usize,
    /// Free text: the submit after the one `queue` came from, already running.
    in_flight: Option<InFlight>,
    /// The token in the ring that the next decode step embeds.
    ring_token: u32,
    /// Returned by `next_token`.
    ids: Vec<u32>,
    /// The prompt's step has run.
    prefilled: bool,
    /// Why no step will run any more; the queue is still handed out.
    end: Option<FinishReason>,
    /// Positions taken by tokens dropped unreturned, to give back.
    dropped_positions: usize,
    /// `finish` ran: the stats are final and the sampler's mask is off.
    finished: bool,
    stats: GenerationStats,
    start: Instant,
    decode_start: Instant,
    counters_before: CounterSnapshot,
}

/// What a step under a grammar did about drafting (`grammar_pass`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum GrammarPass {
    /// Nothing drafted: the step samples one token, its mask still to compute.
    NoDrafts,
    /// The grammar allowed no draft: the step samples one token under the
    /// mask that found it (the grammar's next, in `Grammar::mask`).
    MaskOnly,
    /// A verifying pass ran.
    Ran,
}

/// A grammar being followed: its matcher and the mask buffer it fills.
struct Grammar {
    constraint: Constraint,
    mask: Vec<u32>,
}

impl Generation {
    /// Tokens returned so far (sampled and, under a grammar, forced).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
    /// Why it finished; `None` while tokens may still come.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.end.filter(|_| self.queue.is_empty())
    }
    pub fn stats(&self) -> &GenerationStats {
        &self.stats
    }
    /// Ends after the tokens already returned because the text reached a
    /// stop string (see `StopStrings`): finishes as `Stop`.
    pub fn stop_at_string(&mut self) {
        self.end_early(FinishReason::Stop);
    }
    /// Stops after the tokens already returned (an abort).
    pub fn cancel(&mut self) {
        self.end_early(FinishReason::Cancelled);
    }
    fn end_early(&mut self, reason: FinishReason) {
        if self.finish_reason().is_none() {
            self.end = Some(reason);
            self.drop_queue();
        }
    }

    /// Drops the tokens not yet returned. Free text: each was sampled by a
    /// decode step that embedded the token before it, so each holds a
    /// position. Under a grammar a step runs only once every token is
    /// returned, and what a plain step queues is not embedded until the
    /// next step; a verifying pass's tokens hold positions as free text's do
    /// (`queued_positions`).
    fn drop_queue(&mut self) {
        self.dropped_positions += match self.grammar {
            None => self.queue.len(),
            Some(_) => self.queued_positions,
        };
        self.queued_positions = 0;
        let kept = self.sequence.len() - self.queue.len();
        self.sequence.truncate(kept);
        self.queue.clear();
    }

    /// Queues `tokens` as far as `max_tokens` allows.
    fn queue(&mut self, tokens: &[u32], forced: bool) {
        let room = self.stop.max_tokens - self.ids.len() - self.queue.len();
        let taken = &tokens[..tokens.len().min(room)];
        self.queue.extend(taken);
        self.sequence.extend(taken);
        if forced {
            if let Some(g) = &mut self.stats.grammar {
                g.forced_tokens += taken.len();
            }
        }
    }

    /// Tokens a step sampled under the grammar: advanced through it and
    /// queued with what it forces after them; the last is the next step's
    /// input (the ring's token, or where tokens are forced, the host
    /// chunk's first). Ends the generation where the grammar is finished.
    /// Returns how many of `tokens` were queued (`max_tokens` may cut them).
    fn take_sampled(&mut self, tokens: &[u32]) -> Result<usize, PipelineError> {
        let grammar = self.grammar.as_mut().expect("a grammar step");
        let t = Instant::now();
        for &id in tokens {
            grammar.constraint.consume(id)?;
        }
        let forced = if grammar.constraint.is_finished() {
            Vec::new()
        } else {
            grammar.constraint.take_forced()?
        };
        // Forced tokens may complete it too.
        let finished = grammar.constraint.is_finished();
        self.stats.add_mask_seconds(t.elapsed().as_secs_f64());
        let before = self.queue.len();
        self.queue(tokens, false);
        let queued = self.queue.len() - before;
        self.queue(&forced, true);
        let last = *tokens.last().expect("a step samples a token");
        if forced.is_empty() {
            self.ring_token = last;
        } else {
            self.host.push(last);
            self.host.extend(&forced);
        }
        if finished {
            self.end = Some(FinishReason::Stop);
        }
        Ok(queued)
    }

    /// Tokens sampled or queued, not yet past `max_tokens`.
    fn room(&self) -> usize {
        let running = self.in_flight.as_ref().map_or(0, InFlight::steps);
        self.stop.max_tokens - self.ids.len() - self.queue.len() - running
    }
}

pub struct GenerationOutput {
    /// Every token returned (under a grammar, forced ones too).
    pub ids: Vec<u32>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
}

impl Pipeline {
    /// Restricts the GPU sampler to the tokens `words` allows (see
    /// `kernels::sample::SamplerState::set_mask`) until `configure_sampler`.
    pub fn set_token_mask(&mut self, words: &[u32]) -> Result<(), PipelineError> {
        let ctx = self.ctx.clone();
        Ok(self.sampler.set_mask(&ctx, words)?)
    }

    /// Starts a sequence, under `grammar` where one is given: prefills
    /// `prompt` and samples the first token. The longest prefix the cache
    /// already holds (the last sequence's prompt and reply, as a chat's next
    /// turn starts) is kept, and only the rest is prefilled; where `prompt`
    /// differs earlier, the position rolls back to the difference and the
    /// cache past it is overwritten.
    pub async fn start_generation(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
        grammar: Option<Constraint>,
    ) -> Result<Generation, PipelineError> {
        let mut sampler = Sampler::new(sampling.clone())?;
        if stop.max_tokens == 0 {
            return Err(PipelineError::InvalidOption(
                "max tokens must be > 0".into(),
            ));
        }
        if prompt.is_empty() {
            return Err(PipelineError::InvalidOption(
                "the prompt has no tokens".into(),
            ));
        }
        let speculation = self.speculation;
        let cached = self.held.reusable(prompt);
        self.pos = cached;
        self.held.forget_from(cached);
        self.configure_sampler(sampling, prompt)?;
        sampler.accept(prompt);
        let start = Instant::now();
        let free = grammar.is_none();
        let mut g = Generation {
            sampler,
            sampling: sampling.clone(),
            stop,
            grammar: grammar.map(|constraint| Grammar {
                constraint,
                mask: Vec::new(),
            }),
            speculation,
            sequence: prompt.to_vec(),
            host: prompt[cached..].to_vec(),
            queue: VecDeque::new(),
            queued_positions: 0,
            in_flight: None,
            ring_token: 0,
            ids: Vec::new(),
            prefilled: false,
            end: None,
            dropped_positions: 0,
            finished: false,
            stats: GenerationStats {
                prompt_tokens: prompt.len(),
                cached_tokens: cached,
                tokens_per_submit: if free { self.tokens_per_submit() } else { 1 },
                weight_bytes_per_token: self.model().weight_bytes_per_token(),
                grammar: (!free).then(GrammarStats::default),
                speculative: (speculation != Speculation::Off).then(|| SpeculativeStats {
                    drafter: speculation.to_string(),
                    exact: self.exact_passes(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            start,
            decode_start: start,
            counters_before: self.ctx.counters.snapshot(),
        };
        if let Some(grammar) = &mut g.grammar {
            // What the grammar forces before anything is sampled (a JSON
            // schema's opening brace) is handed out first and prefilled
            // with the prompt.
            let t = Instant::now();
            let forced = grammar.constraint.take_forced()?;
            let finished = grammar.constraint.is_finished();
            g.stats.add_mask_seconds(t.elapsed().as_secs_f64());
            g.queue(&forced, true);
            g.host.extend(&forced);
            if finished {
                g.end = Some(FinishReason::Stop);
                return Ok(g);
            }
        }
        self.step(&mut g).await?;
        Ok(g)
    }

    /// The next token, or `None` once the generation has finished (see
    /// `Generation::finish_reason`). A call that finds no token waiting runs
    /// a step (free text: a submit of decode steps).
    pub async fn next_token(&mut self, g: &mut Generation) -> Result<Option<u32>, PipelineError> {
        if g.queue.is_empty() && g.end.is_none() {
            self.step(g).await?;
        }
        let Some(token) = g.queue.pop_front() else {
            self.finish(g);
            return Ok(None);
        };
        g.queued_positions = g.queued_positions.saturating_sub(1);
        g.sampler.accept(&[token]);
        g.ids.push(token);
        g.stats.generated_tokens = g.ids.len();
        g.stats.decode_seconds = g.decode_start.elapsed().as_secs_f64();
        g.stats.decode_counters = self.ctx.counters.snapshot().since(g.counters_before);
        // Free text: the position this token would be embedded at, which
        // must be inside the context. Under a grammar each step checks the
        // room for what it embeds.
        let pos = match g.grammar {
            None => {
                let running = g.in_flight.as_ref().map_or(0, InFlight::steps);
                self.pos - g.queue.len() - running
            }
            Some(_) => 0,
        };
        if let Some(reason) = g.stop.check(token, g.ids.len(), pos, self.ctx_len()) {
            g.end = Some(reason);
            g.drop_queue();
        }
        Ok(Some(token))
    }

    /// One step: a host chunk or the ring's token through the model, and
    /// what it samples queued (under a grammar, with what is forced after
    /// it). Ends the generation where no step can run.
    async fn step(&mut self, g: &mut Generation) -> Result<(), PipelineError> {
        if g.grammar.is_some() {
            return self.grammar_step(g).await;
        }
        if !g.host.is_empty() {
            let u = g.sampler.next_uniform();
            let first = self.prefill_host(g, u).await?;
            g.queue(&[first], false);
            return Ok(());
        }
        if g.speculation != Speculation::Off {
            return self.speculative_step(g).await;
        }
        let current = match g.in_flight.take() {
            Some(running) => running,
            None => match self.launch(g, 0).await? {
                Some(launched) => launched,
                None => {
                    g.end = Some(FinishReason::ContextFull);
                    return Ok(());
                }
            },
        };
        // Record and submit the next steps before waiting for these: the
        // GPU runs them back to back while the CPU reads and hands out.
        g.in_flight = self.launch(g, current.steps()).await?;
        let ids = self.land(g, current).await?;
        g.queue(&ids, false);
        Ok(())
    }

    /// A step with drafting: the drafts after the ring's token verified in
    /// one pass, or where nothing is drafted, a submit of plain decode
    /// steps. Never past max_tokens or the context.
    async fn speculative_step(&mut self, g: &mut Generation) -> Result<(), PipelineError> {
        if let Some(running) = g.in_flight.take() {
            return self.land_plain(g, running, Instant::now()).await;
        }
        let room = g.room().min(self.ctx_len() - self.pos);
        if room == 0 {
            g.end = Some(FinishReason::ContextFull);
            return Ok(());
        }
        let k = g.speculation.draft_tokens().min(room - 1);
        let drafts = self.drafts(g, k).await?;
        let start = Instant::now();
        if drafts.is_empty() {
            // Nothing to verify: two submits of plain decode steps, the
            // second recorded while the first runs; the next call lands it
            // (above) before drafting again.
            let current = self.launch(g, 0).await?.expect("room for a step");
            g.in_flight = self.launch(g, current.steps()).await?;
            return self.land_plain(g, current, start).await;
        }
        let tokens = self.verify_pass(g, &drafts, start).await?;
        g.ring_token = *tokens.last().expect("a pass gives a token");
        g.queue(&tokens, false);
        Ok(())
    }

    /// Up to `k` drafted tokens after the sequence, from the generation's
    /// drafter.
    async fn drafts(&mut self, g: &Generation, k: usize) -> Result<Vec<u32>, PipelineError> {
        Ok(match (g.speculation, self.draft.as_deref_mut()) {
            (Speculation::Draft { .. }, Some(draft)) => draft.draft_greedy(&g.sequence, k).await?,
            _ => lookup::draft(&g.sequence, k).to_vec(),
        })
    }

    /// Verifies `drafts` after the ring's token in one pass (under the
    /// masks already set, under a grammar) and returns the tokens it gives,
    /// counted in the stats from `start`.
    async fn verify_pass(
        &mut self,
        g: &mut Generation,
        drafts: &[u32],
        start: Instant,
    ) -> Result<Vec<u32>, PipelineError> {
        let us = g.sampler.peek_uniforms(drafts.len() + 1);
        let verified = self.verify_drafts(g.ring_token, drafts, &us).await?;
        let tokens = verified.tokens;
        g.sampler.skip(tokens.len());
        if verified.accepted < drafts.len() && g.sampling.penalties_on() {
            // Every row's sample went into the GPU's penalty window, the
            // rejected ones too: refill it with the sequence as kept.
            let kept: Vec<u32> = g.sequence.iter().chain(&tokens).copied().collect();
            self.sampler.write_history(&self.ctx, &kept);
        }
        g.stats.decode_steps += tokens.len();
        if let Some(s) = &mut g.stats.speculative {
            s.passes += 1;
            s.drafted += drafts.len();
            s.accepted += verified.accepted;
            s.tokens += tokens.len();
            s.pass_seconds += start.elapsed().as_secs_f64();
        }
        Ok(tokens)
    }

    /// Lands a submit of plain decode steps run while drafting (nothing was
    /// drafted), counting them from `start` in the drafting stats.
    async fn land_plain(
        &mut self,
        g: &mut Generation,
        running: InFlight,
        start: Instant,
    ) -> Result<(), PipelineError> {
        let steps = running.steps();
        let ids = self.land(g, running).await?;
        if let Some(s) = &mut g.stats.speculative {
            s.plain_steps += steps;
            s.plain_seconds += start.elapsed().as_secs_f64();
        }
        g.queue(&ids, false);
        Ok(())
    }

    /// A step under the grammar: one token sampled under its mask, or
    /// where drafting finds drafts the grammar allows, a verifying pass.
    async fn grammar_step(&mut self, g: &mut Generation) -> Result<(), PipelineError> {
        if self.pos + g.host.len().max(1) > self.ctx_len() {
            g.end = Some(FinishReason::ContextFull);
            return Ok(());
        }
        let drafting = g.speculation != Speculation::Off;
        let mut pass = GrammarPass::NoDrafts;
        if drafting && g.host.is_empty() && g.queue.is_empty() {
            pass = self.grammar_pass(g).await?;
        }
        if pass == GrammarPass::Ran {
            return Ok(());
        }
        let start = Instant::now();
        let grammar = g.grammar.as_mut().expect("a grammar step");
        if pass == GrammarPass::NoDrafts {
            let t = Instant::now();
            grammar.constraint.next_mask(&mut grammar.mask)?;
            g.stats.add_mask_seconds(t.elapsed().as_secs_f64());
            if let Some(stats) = &mut g.stats.grammar {
                stats.masks += 1;
            }
        }
        self.set_token_mask(&grammar.mask)?;
        if !g.host.is_empty() && g.sampling.penalties_on() {
            // Forced tokens were never sampled, so the GPU's penalty window
            // lacks them: refill it with the whole sequence.
            self.sampler.write_history(&self.ctx, &g.sequence);
        }
        let u = g.sampler.next_uniform();
        let id = if g.host.is_empty() {
            let launched = self.launch_decode(&[u]).await?;
            g.stats.decode_steps += 1;
            g.stats.cpu_record_seconds += launched.cpu_seconds;
            self.land(g, launched).await?[0]
        } else {
            self.prefill_host(g, u).await?
        };
        g.take_sampled(&[id])?;
        if let Some(s) = &mut g.stats.speculative {
            s.plain_steps += 1;
            s.plain_seconds += start.elapsed().as_secs_f64();
        }
        Ok(())
    }

    /// A verifying pass under the grammar: the drafts it allows (see
    /// `Constraint::draft_masks`) checked in one pass with a mask a row,
    /// then the tokens kept go through the grammar as sampled ones do.
    /// Where nothing was drafted, or the grammar allows no draft, the caller
    /// samples one token (in the second case under the mask already in
    /// `Grammar::mask`).
    async fn grammar_pass(&mut self, g: &mut Generation) -> Result<GrammarPass, PipelineError> {
        let room = g.room().min(self.ctx_len() - self.pos);
        let k = g.speculation.draft_tokens().min(room.saturating_sub(1));
        if k == 0 {
            return Ok(GrammarPass::NoDrafts);
        }
        let mut drafts = self.drafts(g, k).await?;
        if drafts.is_empty() {
            return Ok(GrammarPass::NoDrafts);
        }
        let start = Instant::now();
        let grammar = g.grammar.as_mut().expect("a grammar step");
        let t = Instant::now();
        let kept = grammar.constraint.draft_masks(&drafts, &mut grammar.mask)?;
        g.stats.add_mask_seconds(t.elapsed().as_secs_f64());
        if let Some(stats) = &mut g.stats.grammar {
            stats.masks += kept + 1;
        }
        if kept == 0 {
            return Ok(GrammarPass::MaskOnly);
        }
        drafts.truncate(kept);
        let ctx = self.ctx.clone();
        self.sampler.set_masks(&ctx, &grammar.mask)?;
        let tokens = self.verify_pass(g, &drafts, start).await?;
        g.queued_positions = g.take_sampled(&tokens)?;
        Ok(GrammarPass::Ran)
    }

    /// Runs the host chunk and samples the token after it with random
    /// number `u`; the first such step is the prompt's prefill.
    async fn prefill_host(&mut self, g: &mut Generation, u: f32) -> Result<u32, PipelineError> {
        let host = std::mem::take(&mut g.host);
        let id = self.prefill_sampled(&host, u).await?;
        if !g.prefilled {
            g.prefilled = true;
            g.stats.prefill_seconds = g.start.elapsed().as_secs_f64();
            g.stats.time_to_first_token = g.stats.prefill_seconds;
            g.decode_start = Instant::now();
            g.counters_before = self.ctx.counters.snapshot();
        } else {
            // Forced tokens and the sampled one before them: decode positions.
            g.stats.decode_steps += host.len();
        }
        g.ring_token = id;
        Ok(id)
    }

    /// Launches the next submit of decode steps, if any are left: never past
    /// max_tokens or the context, so only stop tokens leave sampled tokens
    /// unused. `landing`: steps launched earlier whose ids are not yet in.
    async fn launch(
        &mut self,
        g: &mut Generation,
        landing: usize,
    ) -> Result<Option<InFlight>, PipelineError> {
        let n = self
            .tokens_per_submit()
            .min(g.room() - landing)
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

    /// The ids of a launched submit; the tokens its steps embedded (the
    /// ring's token, then each id but the last) are now held in the cache.
    async fn land(
        &mut self,
        g: &mut Generation,
        in_flight: InFlight,
    ) -> Result<Vec<u32>, PipelineError> {
        let pos0 = in_flight.pos0;
        let ids = self.land_decode(in_flight).await?;
        let (&last, sampled_before) = ids.split_last().expect("a launch has a step");
        self.held.wrote(pos0, &[g.ring_token]);
        self.held.wrote(pos0 + 1, sampled_before);
        g.ring_token = last;
        Ok(ids)
    }

    /// The end: tokens sampled past it dropped (handed back or still
    /// running) and their positions given back; the mask off; the stats
    /// final.
    fn finish(&mut self, g: &mut Generation) {
        if g.finished {
            return;
        }
        g.finished = true;
        g.drop_queue();
        let running = g.in_flight.take().map_or(0, |f| f.steps());
        self.roll_back(g.dropped_positions + running);
        g.dropped_positions = 0;
        if g.grammar.is_some() {
            self.sampler.clear_mask();
        }
        g.end.get_or_insert(FinishReason::Cancelled);
        g.stats.generated_tokens = g.ids.len();
        g.stats.decode_seconds = g.decode_start.elapsed().as_secs_f64();
        g.stats.decode_counters = self.ctx.counters.snapshot().since(g.counters_before);
    }

    /// Generates from `prompt`, under `grammar` where one is given (reusing
    /// the cached prefix, as `start_generation` does). `on_token` sees each
    /// token as it is handed out and returns false to stop early.
    pub async fn generate(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: &StopCriteria,
        grammar: Option<Constraint>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenerationOutput, PipelineError> {
        let mut g = self
            .start_generation(prompt, sampling, stop.clone(), grammar)
            .await?;
        while let Some(token) = self.next_token(&mut g).await? {
            if !on_token(token) {
                g.cancel();
            }
        }
        Ok(GenerationOutput {
            finish_reason: g.finish_reason().unwrap_or(FinishReason::Cancelled),
            ids: g.ids,
            stats: g.stats,
        })
    }
}
