//! Gemma 2: Gemma 3's block without the per-head q/k norms, plus
//! - attention scores soft-capped as `50 tanh(s / 50)` after scaling
//!   (`{arch}.attn_logit_softcapping`), and the output logits as
//!   `30 tanh(l / 30)` (`{arch}.final_logit_softcapping`);
//! - sliding-window attention on every other layer (0, 2, ...; llama.cpp's
//!   `set_swa_pattern(2)`), all layers with the model's one RoPE base;
//! - scores scaled by 1/sqrt(head_dim), but for 27B, whose
//!   `query_pre_attn_scalar` is d_model / n_heads: GGUF does not carry the
//!   scalar, and llama.cpp tells 27B by its 46 layers, as wick does.
//!
//! As in Gemma 3: embeddings times sqrt(d_model), post-attention and
//! post-MLP norms (stored as 1 + w by the converter), GELU(tanh) gating,
//! half-split RoPE pairs and a tied output head.

use crate::format::gguf::GgufFile;
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::rope::RopeLayout;

use super::bounds::MAX_CONTEXT;
use super::config::{Meta, ModelConfig, SlidingWindow};
use super::llama::{base_config, refuse_block0, refuse_rope_freqs, require_block0};
use super::ModelError;

/// Every second layer attends globally.
const GLOBAL_EVERY: usize = 2;

pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let meta = Meta {
        file,
        arch: "gemma2",
    };
    let mut cfg = base_config(&meta)?;
    cfg.rope.layout = RopeLayout::NeoX;
    refuse_rope_freqs(&cfg)?;
    cfg.activation = Activation::GeluTanh;
    cfg.embed_scale = (cfg.d_model as f32).sqrt();
    cfg.attn_scale = attn_scale(&cfg);
    cfg.sliding_window = Some(SlidingWindow {
        window: meta.dim("attention.sliding_window", MAX_CONTEXT)? as u32,
        global_every: Some(GLOBAL_EVERY),
    });
    cfg.attn_softcap = softcap(&meta, "attn_logit_softcapping")?;
    cfg.final_softcap = softcap(&meta, "final_logit_softcapping")?;
    require_block0(
        file,
        &["post_attention_norm.weight", "post_ffw_norm.weight"],
    )?;
    refuse_block0(file, &["attn_q_norm.weight", "attn_k_norm.weight"])?;
    Ok(cfg)
}

/// Layers of Gemma 2 27B, the one size whose query scalar is
/// d_model / n_heads rather than head_dim.
const LAYERS_27B: usize = 46;

/// Gemma 2's `query_pre_attn_scalar` as GGUF leaves it to be derived (by
/// llama.cpp too): from the layer count, which tells 27B apart.
pub fn query_scalar(n_layers: usize, d_model: usize, n_heads: usize, head_dim: usize) -> usize {
    match n_layers {
        LAYERS_27B => d_model / n_heads,
        _ => head_dim,
    }
}

/// 1/sqrt of the query scalar of the size the file is.
fn attn_scale(cfg: &ModelConfig) -> f32 {
    let scalar = query_scalar(cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.head_dim);
    1.0 / (scalar as f32).sqrt()
}

/// A soft-cap from `{arch}.{key}`: absent or 0 is none (llama.cpp's
/// converter writes none when the config has none).
fn softcap(meta: &Meta, key: &str) -> Result<Option<f32>, ModelError> {
    match meta.f32_or(key, 0.0)? {
        0.0 => Ok(None),
        c if c.is_finite() && c > 0.0 => Ok(Some(c)),
        c => Err(ModelError::Config(format!(
            "{}.{key} is {c}: a soft-cap must be finite and > 0",
            meta.arch
        ))),
    }
}
