//! SmolLM3: Llama's block (interleaved RoPE pairs, as llama.cpp's converter
//! permutes SmolLM3's q/k rows like Llama's), with no position embedding at
//! all on every fourth layer (3, 7, ...: "NoPE"). The layers' pattern is
//! not in the GGUF metadata; llama.cpp fixes the step at 4, as SmolLM3's
//! Hugging Face config (`no_rope_layer_interval`) does.

use crate::format::gguf::GgufFile;

use super::config::{Meta, ModelConfig};
use super::llama::{base_config, refuse_rope_freqs};
use super::ModelError;

/// Every `NO_ROPE_LAYER_STEP`-th layer (1-based) has no RoPE.
pub const NO_ROPE_LAYER_STEP: usize = 4;

pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let meta = Meta {
        file,
        arch: "smollm3",
    };
    let mut cfg = base_config(&meta)?;
    refuse_rope_freqs(&cfg)?;
    cfg.rope.skip_every = Some(NO_ROPE_LAYER_STEP);
    Ok(cfg)
}
