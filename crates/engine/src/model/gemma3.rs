//! Gemma 3: Llama's block with
//! - token embeddings scaled by sqrt(d_model);
//! - RMSNorm on queries and keys per head, and a second RMSNorm on the
//!   attention and MLP outputs before each residual add (the "post" norms);
//!   Gemma's norms compute x * (1 + w): llama.cpp's converter stores 1 + w,
//!   so the plain RMSNorm kernel applies them unchanged;
//! - a GELU(tanh)-gated MLP;
//! - head_dim 256, wider than d_model / n_heads, with scores scaled by
//!   1/sqrt(head_dim) (llama.cpp uses this for every size but 27B, where
//!   Gemma's query_pre_attn_scalar is d_model / n_heads);
//! - sliding-window attention (window from metadata) on five of every six
//!   layers, which use RoPE base 10000; every sixth layer attends globally
//!   with the model's RoPE base;
//! - RoPE over half-split pairs (NeoX) and a tied output head.
//!
//! Tensor names are Llama's; the q/k norms and post norms are the optional
//! tensors `llama::needs` takes, required here.

use crate::format::gguf::GgufFile;
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::rope::RopeLayout;

use super::bounds::MAX_CONTEXT;
use super::config::{Meta, ModelConfig, SlidingWindow};
use super::llama::{base_config, refuse_rope_freqs, require_block0};
use super::ModelError;

/// Gemma 3's local layers: one in six is global.
const SLIDING_WINDOW_PATTERN: usize = 6;
/// RoPE base of the sliding-window layers (not in the GGUF metadata; fixed by
/// the Gemma 3 architecture, as llama.cpp also hard-codes it).
const LOCAL_ROPE_BASE: f32 = 10_000.0;

pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let meta = Meta {
        file,
        arch: "gemma3",
    };
    let mut cfg = base_config(&meta)?;
    cfg.rope.layout = RopeLayout::NeoX;
    refuse_rope_freqs(&cfg)?;
    cfg.rope.local_theta = Some(LOCAL_ROPE_BASE);
    cfg.activation = Activation::GeluTanh;
    cfg.embed_scale = (cfg.d_model as f32).sqrt();
    cfg.attn_scale = 1.0 / (cfg.head_dim as f32).sqrt();
    cfg.sliding_window = Some(SlidingWindow {
        window: meta.dim("attention.sliding_window", MAX_CONTEXT)? as u32,
        global_every: Some(SLIDING_WINDOW_PATTERN),
    });
    require_block0(
        file,
        &[
            "attn_q_norm.weight",
            "attn_k_norm.weight",
            "post_attention_norm.weight",
            "post_ffw_norm.weight",
        ],
    )?;
    Ok(cfg)
}
