//! Token sampling on the GPU: one dispatch of one workgroup turns a logits
//! row into a token id in `out_ids[out_index]` and appends it to a history
//! ring that the next step's penalties read, so tokens can stay on the GPU
//! across several decode steps per submit. Semantics: those of
//! `pipeline::sampling` (its CPU reference), which the tests compare against.
//!
//! Buffers (u32 / f32 elements):
//! - `bias`: `[2 * bias_len]`, pairs (id, `f32::to_bits(bias)`) with distinct
//!   ids: `bias_words` builds them from `SamplingParams::logit_bias`;
//! - `history`: `[2 + cap]` = `len, next, ids[cap]`, a ring of the last `cap`
//!   (= `penalty_last_n`) tokens, `next` the slot the next token overwrites;
//!   `history_words` builds it from the prompt's ids;
//! - `randoms`: `[steps]`, `randoms[step]` the uniform `u` in [0, 1) of a
//!   step (`Sampler::next_uniform` gives the CPU sampler's numbers);
//! - `scratch`: `[2 * vocab]` u32, overwritten;
//! - `mask`: `[rows * ceil(vocab / 32)]`, allowed-token bitmasks of
//!   constrained decoding (bit `i % 32` of word `i / 32` allows token `i`),
//!   read only while `set_masks` has turned them on; the CPU computes them
//!   and uploads these few words, never reading the logits back. One mask
//!   for a decode step; one a row for a verifying pass of drafted tokens,
//!   whose row j samples after the drafts before it (`SampleTarget::mask_row`).

pub mod params;

use crate::gpu::params::kernel_params;
use bytemuck::Zeroable;

use crate::gpu::{
    error::shape_err, Access, BufferRef, GpuBuffer, GpuContext, GpuError, KernelSpec, Recorder,
};
use crate::kernels::sample::params::{fixed24, SamplingParams};
use crate::kernels::{check_elems, words};

kernel_params! {
    pub(crate) struct Params {
        /// tokens in the row
        vocab: u32,
        /// first element of the row in `logits`
        logits_offset: u32,
        /// where the id goes in `out_ids`
        out_index: u32,
        /// which random number: randoms[step]
        step: u32,
        /// 1: argmax only
        greedy: u32,
        /// 0: off
        top_k: u32,
        /// top_p as a 24-bit fraction; 1 << 24: off
        top_p24: u32,
        /// min_p as a 24-bit fraction; 0: off
        min_p24: u32,
        /// 1 / temperature
        inv_temp: f32,
        /// repetition penalty (multiplies logits <= 0)
        rep: f32,
        /// 1 / repetition penalty (multiplies logits > 0)
        inv_rep: f32,
        /// frequency penalty
        freq: f32,
        /// presence penalty
        presence: f32,
        /// 1: apply the three penalties
        penalties: u32,
        /// capacity of the history ring (0: none)
        hist_cap: u32,
        /// (id, bias) pairs in `bias`
        n_bias: u32,
        /// 1: only tokens whose bit is set in `mask` may be picked
        masked: u32,
        /// where this sample's mask starts in `mask` (words)
        mask_offset: u32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "sample",
    sources: &[include_str!("../../../../../shaders/sample/sample.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[
        Access::Read,      // logits
        Access::Read,      // bias
        Access::ReadWrite, // history
        Access::Read,      // randoms
        Access::ReadWrite, // out_ids
        Access::ReadWrite, // scratch
        Access::Read,      // mask
    ],
};

/// Words of an allowed-token bitmask over `vocab` tokens.
pub fn mask_words(vocab: usize) -> usize {
    vocab.div_ceil(32)
}

/// The history buffer's words for a ring of capacity `cap` holding the last
/// `cap` of `ids` (oldest first).
pub fn history_words(cap: usize, ids: &[u32]) -> Vec<u32> {
    let kept = &ids[ids.len().saturating_sub(cap)..];
    let mut words = vec![0; 2 + cap];
    words[0] = kept.len() as u32;
    words[1] = if cap == 0 {
        0
    } else {
        (kept.len() % cap) as u32
    };
    words[2..2 + kept.len()].copy_from_slice(kept);
    words
}

/// The bias buffer's words: `params.merged_bias()` as (id, bits) pairs.
pub fn bias_words(params: &SamplingParams) -> Vec<u32> {
    let merged = params.merged_bias();
    merged
        .iter()
        .flat_map(|&(id, b)| [id, b.to_bits()])
        .collect()
}

/// A sampler's GPU state for one sequence: its parameters, logit bias,
/// history ring, random numbers and scratch, made once per generation.
pub struct SamplerState {
    params: Params,
    pub vocab: usize,
    pub bias: BufferRef,
    pub history: BufferRef,
    pub randoms: BufferRef,
    pub scratch: BufferRef,
    pub mask: BufferRef,
    /// Masks `set_masks` uploaded, which the samples read (0: none since
    /// `configure` or `clear_mask`, and every token may be picked).
    masks: usize,
}

/// Where one sample reads its row and writes its id.
pub struct SampleTarget<'a> {
    pub logits: &'a GpuBuffer,
    /// First element of the row in `logits`.
    pub logits_offset: usize,
    pub out_ids: &'a GpuBuffer,
    pub out_index: usize,
    /// Which random number (`randoms[step]`) this sample uses.
    pub step: usize,
    /// Which of the masks `set_masks` uploaded restricts it (0 where one
    /// mask serves every sample; ignored while no mask is on).
    pub mask_row: usize,
}

fn err(message: impl Into<String>) -> GpuError {
    shape_err("sample", message)
}

/// Most logit-bias entries a sampler state holds (OpenAI allows 300).
pub const MAX_BIAS: usize = 1024;

impl SamplerState {
    /// Validates `params` (a `SamplingError` becomes a shape error of
    /// kernel "sample"), uploads the bias, a history of the last
    /// `penalty_last_n` of `history`, and room for `max_steps` randoms.
    pub fn new(
        ctx: &GpuContext,
        params: &SamplingParams,
        vocab: usize,
        history: &[u32],
        max_steps: usize,
    ) -> Result<SamplerState, GpuError> {
        let mut state =
            Self::with_capacity(ctx, vocab, max_steps, params.penalty_last_n, MAX_BIAS, 1)?;
        state.configure(ctx, params, history)?;
        Ok(state)
    }

    /// Buffers for any parameters with a penalty window of at most
    /// `max_history`, at most `max_bias` biased tokens and up to
    /// `mask_rows` masks at once; `configure` sets the parameters. A
    /// pipeline makes one and reuses it for every generation, so its bind
    /// groups are made once.
    pub fn with_capacity(
        ctx: &GpuContext,
        vocab: usize,
        max_steps: usize,
        max_history: usize,
        max_bias: usize,
        mask_rows: usize,
    ) -> Result<SamplerState, GpuError> {
        if vocab == 0 || vocab > u32::MAX as usize / 2 {
            return Err(err(format!("vocab {vocab} is not in 1..2^31")));
        }
        let [bias, history, randoms, scratch, mask] =
            Self::buffer_sizes(vocab, max_steps, max_history, max_bias, mask_rows)
                .map(|(label, bytes)| ctx.create_storage(label, bytes));
        Ok(SamplerState {
            params: Params::zeroed(),
            vocab,
            bias: bias?,
            history: history?,
            randoms: randoms?,
            scratch: scratch?,
            mask: mask?,
            masks: 0,
        })
    }

    /// (label, bytes) of each buffer `with_capacity` makes, in the order of
    /// its fields: also what the memory preflight counts.
    pub fn buffer_sizes(
        vocab: usize,
        max_steps: usize,
        max_history: usize,
        max_bias: usize,
        mask_rows: usize,
    ) -> [(&'static str, u64); 5] {
        [
            ("sample bias", 8 * max_bias.max(1) as u64),
            ("sample history", 4 * (2 + max_history as u64)),
            ("sample randoms", 4 * max_steps.max(1) as u64),
            ("sample scratch", 8 * vocab as u64),
            (
                "sample mask",
                4 * (mask_rows.max(1) * mask_words(vocab)) as u64,
            ),
        ]
    }

    /// Sets the parameters of the next samples and refills the history ring
    /// with the last `penalty_last_n` of `history` (a new sequence).
    pub fn configure(
        &mut self,
        ctx: &GpuContext,
        params: &SamplingParams,
        history: &[u32],
    ) -> Result<(), GpuError> {
        params.validate().map_err(|e| err(e.to_string()))?;
        let cap = params.penalty_last_n;
        let bias = bias_words(params);
        if bias.len() * 4 > self.bias.size() as usize {
            return Err(err(format!(
                "{} biased tokens, more than the {} this sampler holds",
                bias.len() / 2,
                self.bias.size() / 8
            )));
        }
        if 4 * (2 + cap) as u64 > self.history.size() {
            return Err(err(format!(
                "a penalty window of {cap} tokens, more than the {} this sampler holds",
                self.history.size() / 4 - 2
            )));
        }
        self.params = Params {
            vocab: self.vocab as u32,
            logits_offset: 0,
            out_index: 0,
            step: 0,
            greedy: params.is_greedy() as u32,
            top_k: params.top_k.min(u32::MAX as usize) as u32,
            top_p24: fixed24(params.top_p),
            min_p24: fixed24(params.min_p),
            inv_temp: params.inv_temperature(),
            rep: params.repetition_penalty,
            inv_rep: params.inv_repetition_penalty(),
            freq: params.frequency_penalty,
            presence: params.presence_penalty,
            penalties: params.penalties_on() as u32,
            hist_cap: u32::try_from(cap).map_err(|_| err("penalty_last_n over u32"))?,
            n_bias: (bias.len() / 2) as u32,
            masked: 0,
            mask_offset: 0,
        };
        self.masks = 0;
        if !bias.is_empty() {
            ctx.write(&self.bias, 0, bytemuck::cast_slice(&bias));
        }
        self.write_history(ctx, history);
        Ok(())
    }

    /// Restricts the next samples to the tokens whose bits are set in
    /// `words` (`ceil(vocab / 32)` of them; bits past the vocab ignored).
    /// Written with `queue.write_buffer`, so it is ordered before the next
    /// submit; `configure` turns the mask off again.
    pub fn set_mask(&mut self, ctx: &GpuContext, words: &[u32]) -> Result<(), GpuError> {
        self.set_masks(ctx, words)
    }

    /// `set_mask` for several samples at once: `words` holds whole masks,
    /// one after another, and the sample with `mask_row` j reads mask j.
    pub fn set_masks(&mut self, ctx: &GpuContext, words: &[u32]) -> Result<(), GpuError> {
        let per = mask_words(self.vocab);
        let room = self.mask.size() as usize / 4 / per;
        let rows = words.len() / per;
        if words.is_empty() || words.len() % per != 0 || rows > room {
            return Err(err(format!(
                "masks of {} words in all for a vocab of {} (needs 1..={room} masks of {per} words)",
                words.len(),
                self.vocab
            )));
        }
        ctx.write(&self.mask, 0, bytemuck::cast_slice(words));
        self.masks = rows;
        Ok(())
    }

    /// Lets every token be sampled again.
    pub fn clear_mask(&mut self) {
        self.masks = 0;
    }

    /// Capacity of the history ring (`penalty_last_n`).
    pub fn history_cap(&self) -> usize {
        self.params.hist_cap as usize
    }

    /// Refills the history ring with the last `cap` of `ids` (a new sequence).
    pub fn write_history(&self, ctx: &GpuContext, ids: &[u32]) {
        let words = history_words(self.history_cap(), ids);
        ctx.write(&self.history, 0, bytemuck::cast_slice(&words));
    }

    /// Writes the uniforms of steps `first..first + us.len()`, ordered before
    /// the next submit.
    pub fn write_randoms(
        &self,
        ctx: &GpuContext,
        first: usize,
        us: &[f32],
    ) -> Result<(), GpuError> {
        check_elems("sample", "randoms", &self.randoms, first + us.len())?;
        ctx.write(&self.randoms, 4 * first as u64, bytemuck::cast_slice(us));
        Ok(())
    }
}

/// Records one sample: one dispatch of one workgroup. Allocates nothing
/// unless it fails.
pub fn sample(rec: &mut Recorder, state: &SamplerState, t: &SampleTarget) -> Result<(), GpuError> {
    let vocab = state.vocab;
    check_elems("sample", "logits", t.logits, t.logits_offset + vocab)?;
    check_elems("sample", "out_ids", t.out_ids, t.out_index + 1)?;
    check_elems("sample", "randoms", &state.randoms, t.step + 1)?;
    check_elems("sample", "scratch", &state.scratch, 2 * vocab)?;
    check_elems("sample", "mask", &state.mask, mask_words(vocab))?;
    let masked = state.masks > 0;
    if masked && t.mask_row >= state.masks {
        return Err(err(format!(
            "mask {} of the {} uploaded",
            t.mask_row, state.masks
        )));
    }
    check_elems("sample", "history", &state.history, 2 + state.history_cap())?;
    check_elems(
        "sample",
        "bias",
        &state.bias,
        2 * state.params.n_bias as usize,
    )?;
    // The logits row and the mask read, the id written (the penalty window,
    // the bias and the sorting scratch depend on the parameters, and are
    // small or unused when sampling greedily).
    rec.moved(words(vocab + mask_words(vocab) + 1));
    let params = Params {
        logits_offset: t.logits_offset as u32,
        out_index: t.out_index as u32,
        step: t.step as u32,
        masked: masked as u32,
        mask_offset: if masked {
            (t.mask_row * mask_words(vocab)) as u32
        } else {
            0
        },
        ..state.params
    };
    let buffers = [
        t.logits,
        &*state.bias,
        &*state.history,
        &*state.randoms,
        t.out_ids,
        &*state.scratch,
        &*state.mask,
    ];
    rec.dispatch(&SPEC, &params, &buffers, [1, 1, 1]);
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod mask_tests;
