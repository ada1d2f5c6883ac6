//! The shape of a decoder-only transformer, as read from GGUF metadata.
//!
//! Each architecture file fills this from its own metadata keys (the loader
//! never guesses); the shared decoder code reads only this.

use super::bounds::{bounded, MAX_EXPERTS, MAX_FFN};
use super::ModelError;
use crate::format::gguf::{GgufError, GgufFile};
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::rope::{RopeLayout, Yarn};

#[derive(Clone, Debug)]
pub struct RopeConfig {
    pub layout: RopeLayout,
    /// Dimensions of each head that rotate (the rest pass through).
    pub n_rot: usize,
    pub theta: f32,
    /// Base for sliding-window layers where it differs (Gemma 3: 1e4).
    pub local_theta: Option<f32>,
    /// Linear position scaling (`rope_scaling.rs`): multiplies every angle
    /// of the layers with the global base (1.0 without scaling).
    pub freq_scale: f32,
    /// YaRN's ramp and magnitude, and `rope.scaling.attn_factor`
    /// (`Yarn::NONE` without them).
    pub yarn: Yarn,
    /// Per-pair divisors of the frequencies, from tensors of the file.
    pub factors: FreqFactors,
    /// Every `skip_every`-th layer (1-based) has no position embedding at
    /// all (SmolLM3's NoPE layers: every 4th).
    pub skip_every: Option<usize>,
}

impl RopeConfig {
    /// Whether a context of `ctx_len` positions takes LongRoPE's long
    /// factors: past the original context, as llama.cpp chooses
    /// (`n_ctx_per_seq > n_ctx_orig_yarn`).
    pub fn long_factors_at(&self, ctx_len: usize) -> bool {
        ctx_len > self.yarn.n_ctx_orig as usize
    }
}

/// Where a model's per-pair frequency divisors come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreqFactors {
    None,
    /// `rope_freqs.weight` (Llama 3.1 / 3.2's scaling, which llama.cpp's
    /// converter stores as a tensor).
    Fixed,
    /// LongRoPE (Phi-3.5, Phi-3 128k): `rope_factors_long.weight` where the
    /// context is longer than the original one (`Yarn::n_ctx_orig`),
    /// `rope_factors_short.weight` where it is not, as llama.cpp chooses.
    LongShort,
}

#[derive(Clone, Debug)]
pub struct SlidingWindow {
    pub window: u32,
    /// Every `global_every`-th layer (1-based) attends globally, the others
    /// through the window; `None`: every layer slides.
    pub global_every: Option<usize>,
}

/// A mixture-of-experts MLP: every block routes each token to `top_k` of
/// `n_experts` gated MLPs of width `expert_ffn`.
#[derive(Clone, Debug)]
pub struct MoeConfig {
    pub n_experts: usize,
    pub top_k: usize,
    pub expert_ffn: usize,
    /// Router weights renormalized over the chosen k (qwen3moe, Mixtral) or
    /// left as softmax probabilities over all experts (qwen2moe).
    pub normalize_weights: bool,
    /// Width of an always-on shared expert with a sigmoid gate (qwen2moe).
    pub shared_ffn: Option<usize>,
}

impl MoeConfig {
    /// Reads `expert_count`, `expert_used_count` and the expert width
    /// (`expert_feed_forward_length`, else `default_ffn`), checking them.
    pub fn from_meta(
        meta: &Meta,
        default_ffn: usize,
        normalize_weights: bool,
    ) -> Result<MoeConfig, ModelError> {
        let n_experts = meta.dim("expert_count", MAX_EXPERTS)?;
        let top_k = meta.dim("expert_used_count", n_experts)?;
        Ok(MoeConfig {
            n_experts,
            top_k,
            expert_ffn: meta.dim_or("expert_feed_forward_length", default_ffn, MAX_FFN)?,
            normalize_weights,
            shared_ffn: None,
        })
    }
}

#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub architecture: String,
    pub n_layers: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub vocab_size: usize,
    /// Context length the model was trained for.
    pub ctx_train: usize,
    pub rms_eps: f32,
    pub rope: RopeConfig,
    /// Multiplies q·k (usually 1/sqrt(head_dim)).
    pub attn_scale: f32,
    pub sliding_window: Option<SlidingWindow>,
    pub activation: Activation,
    /// Multiplies token embeddings (Gemma: sqrt(d_model)).
    pub embed_scale: f32,
    /// Attention scores soft-capped as `c * tanh(s / c)` after scaling
    /// (Gemma 2: 50).
    pub attn_softcap: Option<f32>,
    /// The output logits soft-capped the same way (Gemma 2: 30).
    pub final_softcap: Option<f32>,
    /// Every block's MLP is a mixture of experts (then `ffn_dim` is unused).
    pub moe: Option<MoeConfig>,
}

impl ModelConfig {
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
    /// Width of the dense MLP the blocks run: the shared expert's in a
    /// mixture-of-experts model (0 without one).
    pub fn dense_ffn(&self) -> usize {
        match &self.moe {
            Some(moe) => moe.shared_ffn.unwrap_or(0),
            None => self.ffn_dim,
        }
    }
    /// The sliding window of layer `layer`, if it is a local layer.
    pub fn window_of(&self, layer: usize) -> Option<u32> {
        let sw = self.sliding_window.as_ref()?;
        let global = sw.global_every.is_some_and(|n| (layer + 1) % n == 0);
        (!global).then_some(sw.window)
    }
    /// Whether layer `layer` rotates queries and keys at all.
    pub fn rotates(&self, layer: usize) -> bool {
        self.rope.skip_every.is_none_or(|n| (layer + 1) % n != 0)
    }
    pub fn rope_theta_of(&self, layer: usize) -> f32 {
        match (self.window_of(layer), self.rope.local_theta) {
            (Some(_), Some(local)) => local,
            _ => self.rope.theta,
        }
    }
    /// Layers with a base of their own (Gemma 3's local layers) are not
    /// scaled: llama.cpp gives them a scale of 1 whatever the metadata says.
    pub fn rope_freq_scale_of(&self, layer: usize) -> f32 {
        match (self.window_of(layer), self.rope.local_theta) {
            (Some(_), Some(_)) => 1.0,
            _ => self.rope.freq_scale,
        }
    }
}

/// Reads `{arch}.{key}` style metadata with errors that name the key.
pub struct Meta<'a> {
    pub file: &'a GgufFile,
    pub arch: &'a str,
}

impl Meta<'_> {
    fn key(&self, key: &str) -> String {
        format!("{}.{}", self.arch, key)
    }
    /// A count or dimension: `1..=max` (see `bounds.rs`), else an error
    /// naming the key and its value.
    pub fn dim(&self, key: &str, max: usize) -> Result<usize, ModelError> {
        let k = self.key(key);
        bounded(&k, self.file.meta_u64(&k)?, max)
    }
    pub fn dim_or(&self, key: &str, default: usize, max: usize) -> Result<usize, ModelError> {
        match self.file.meta(&self.key(key)) {
            None => Ok(default),
            Some(_) => self.dim(key, max),
        }
    }
    pub fn f32(&self, key: &str) -> Result<f32, GgufError> {
        self.file.meta_f32(&self.key(key))
    }
    pub fn f32_or(&self, key: &str, default: f32) -> Result<f32, GgufError> {
        match self.file.meta(&self.key(key)) {
            None => Ok(default),
            Some(_) => self.f32(key),
        }
    }
}
