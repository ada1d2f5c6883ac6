//! Phi-3 and Phi-3.5 (mini): Llama's block with
//! - q, k and v stored as one tensor (`attn_qkv`), and gate and up as one
//!   (`ffn_up`, 2 x ffn rows, gate first): both uploaded once in the
//!   layouts the fused kernels read (`fusion.rs`: q/k/v rows as they are,
//!   gate and up rows re-ordered into pairs), never split per step;
//! - half-split RoPE pairs (NeoX) and an untied output head;
//! - LongRoPE (Phi-3.5, Phi-3 128k): two sets of per-pair frequency
//!   divisors, `rope_factors_long` and `rope_factors_short`, the long ones
//!   taken where the context is longer than
//!   `{arch}.rope.scaling.original_context_length` (as llama.cpp chooses),
//!   and `{arch}.rope.scaling.attn_factor` on cos and sin
//!   (`rope_scaling.rs`);
//! - a sliding window on every layer where the metadata gives one
//!   (Phi-3-mini-4k: 2047), as Hugging Face's Phi-3 applies it. llama.cpp
//!   disables Phi-3's window, so the two differ past that many positions.

use crate::format::gguf::GgufFile;
use crate::kernels::rope::RopeLayout;

use super::bounds::MAX_CONTEXT;
use super::config::{FreqFactors, Meta, ModelConfig, SlidingWindow};
use super::fusion::{qkv_name, Fusion, Layout};
use super::llama::{self, base_config, refuse_rope_freqs};
use super::loader::Need;
use super::rope_scaling::{ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT};
use super::ModelError;

pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let meta = Meta { file, arch: "phi3" };
    let mut cfg = base_config(&meta)?;
    cfg.rope.layout = RopeLayout::NeoX;
    refuse_rope_freqs(&cfg)?;
    let long = file.tensor(ROPE_FACTORS_LONG).is_some();
    let short = file.tensor(ROPE_FACTORS_SHORT).is_some();
    cfg.rope.factors = match (long, short) {
        (true, true) => FreqFactors::LongShort,
        (false, false) => FreqFactors::None,
        _ => {
            return Err(ModelError::MissingTensor(
                if long {
                    ROPE_FACTORS_SHORT
                } else {
                    ROPE_FACTORS_LONG
                }
                .into(),
            ))
        }
    };
    if file.meta("phi3.attention.sliding_window").is_some() {
        cfg.sliding_window = Some(SlidingWindow {
            window: meta.dim("attention.sliding_window", MAX_CONTEXT)? as u32,
            global_every: None,
        });
    }
    Ok(cfg)
}

/// Llama's tensors, with the fused q/k/v and gate/up tensors in place of
/// the split ones.
pub fn needs(cfg: &ModelConfig, file: &GgufFile) -> Vec<Need> {
    const SPLIT: [&str; 5] = ["attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"];
    let split = |name: &str| {
        name.starts_with("blk.")
            && SPLIT
                .iter()
                .any(|s| name.ends_with(&format!(".{s}.weight")))
    };
    let mut needs: Vec<Need> = llama::needs(cfg, file)
        .into_iter()
        .filter(|n| !split(&n.name))
        .collect();
    let (d, qkv) = (cfg.d_model, cfg.q_dim() + 2 * cfg.kv_dim());
    for l in 0..cfg.n_layers {
        needs.push(Need::matrix(format!("blk.{l}.attn_qkv.weight"), qkv, d));
        needs.push(Need::matrix(
            format!("blk.{l}.ffn_up.weight"),
            2 * cfg.ffn_dim,
            d,
        ));
    }
    needs
}

/// Each block's fused tensors under the names `llama::build` takes: q/k/v
/// as one run, gate/up as interleaved pairs.
pub fn fusions(cfg: &ModelConfig) -> Vec<Fusion> {
    let mut out = Vec::new();
    for l in 0..cfg.n_layers {
        out.push(Fusion {
            name: qkv_name(l, "attn_q"),
            members: vec![format!("blk.{l}.attn_qkv.weight")],
            layout: Layout::Concat,
        });
        out.push(Fusion {
            name: format!("blk.{l}.ffn_gate_up.weight"),
            members: vec![format!("blk.{l}.ffn_up.weight")],
            layout: Layout::InterleaveHalves,
        });
    }
    out
}
