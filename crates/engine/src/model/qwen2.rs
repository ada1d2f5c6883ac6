//! Qwen2 / Qwen2.5: Llama with biases on the q/k/v projections, RoPE over
//! half-split pairs (NeoX; the converter does not permute Qwen's weights),
//! and usually an untied output head. Tensor names are Llama's; the biases
//! and `output.weight` are the optional tensors `llama::needs` takes when the
//! file has them.

use crate::format::gguf::GgufFile;
use crate::kernels::rope::RopeLayout;

use super::config::{Meta, ModelConfig};
use super::llama::base_config;
use super::ModelError;

pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let mut cfg = base_config(&Meta {
        file,
        arch: "qwen2",
    })?;
    cfg.rope.layout = RopeLayout::NeoX;
    for bias in ["attn_q.bias", "attn_k.bias", "attn_v.bias"] {
        if file.tensor(&format!("blk.0.{bias}")).is_none() {
            return Err(ModelError::MissingTensor(format!("blk.0.{bias}")));
        }
    }
    Ok(cfg)
}
