//! Qwen3 and Qwen3-MoE: Qwen2's block without the q/k/v biases and with
//! RMSNorm on queries and keys per head (the `attn_q_norm` / `attn_k_norm`
//! tensors `llama::needs` takes when present, required here), RoPE over
//! half-split pairs, head_dim from `attention.key_length`. `qwen3moe`
//! replaces every MLP with a mixture of experts whose router weights are
//! renormalized over the chosen experts (Qwen3-MoE's `norm_topk_prob`).

use crate::format::gguf::GgufFile;
use crate::kernels::rope::RopeLayout;

use super::config::{Meta, ModelConfig, MoeConfig};
use super::llama::{base_config, refuse_rope_freqs, require_block0};
use super::ModelError;

/// `arch` is "qwen3" or "qwen3moe".
pub fn config(file: &GgufFile, arch: &str) -> Result<ModelConfig, ModelError> {
    let meta = Meta { file, arch };
    let mut cfg = base_config(&meta)?;
    cfg.rope.layout = RopeLayout::NeoX;
    refuse_rope_freqs(&cfg)?;
    require_block0(file, &["attn_q_norm.weight", "attn_k_norm.weight"])?;
    if arch == "qwen3moe" {
        cfg.moe = Some(MoeConfig::from_meta(&meta, cfg.ffn_dim, true)?);
    }
    Ok(cfg)
}
