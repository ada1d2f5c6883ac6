//! Qwen2 / Qwen2.5: Llama with biases on the q/k/v projections, RoPE over
//! half-split pairs (NeoX; the converter does not permute Qwen's weights),
//! and usually an untied output head. Tensor names are Llama's; the biases
//! and `output.weight` are the optional tensors `llama::needs` takes when the
//! file has them.
//!
//! Qwen2-MoE (`qwen2moe`) replaces every MLP with a mixture of experts whose
//! router weights stay softmax probabilities over all experts (no
//! renormalization over the chosen ones), plus an always-on shared expert
//! (`expert_shared_feed_forward_length` wide) scaled by a sigmoid gate.

use crate::format::gguf::GgufFile;
use crate::kernels::rope::RopeLayout;

use super::bounds::MAX_FFN;
use super::config::{Meta, ModelConfig, MoeConfig};
use super::llama::{base_config, refuse_rope_freqs, require_block0};
use super::ModelError;

/// `arch` is "qwen2" or "qwen2moe".
pub fn config(file: &GgufFile, arch: &str) -> Result<ModelConfig, ModelError> {
    let meta = Meta { file, arch };
    let mut cfg = base_config(&meta)?;
    cfg.rope.layout = RopeLayout::NeoX;
    refuse_rope_freqs(&cfg)?;
    require_block0(file, &["attn_q.bias", "attn_k.bias", "attn_v.bias"])?;
    if arch == "qwen2moe" {
        let mut moe = MoeConfig::from_meta(&meta, cfg.ffn_dim, false)?;
        moe.shared_ffn = Some(meta.dim("expert_shared_feed_forward_length", MAX_FFN)?);
        cfg.moe = Some(moe);
    }
    Ok(cfg)
}
