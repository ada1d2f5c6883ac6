//! Hugging Face tensor names and GGUF's, both ways: the one place they meet.
//! The model code asks for GGUF names (`blk.N.attn_q.weight`); a Hugging
//! Face checkpoint has `model.layers.N.self_attn.q_proj.weight`. The reverse
//! direction lets errors about a checkpoint name its own tensors.

/// Outside the blocks, every architecture here.
const GLOBAL: [(&str, &str); 3] = [
    ("model.embed_tokens.weight", "token_embd.weight"),
    ("model.norm.weight", "output_norm.weight"),
    ("lm_head.weight", "output.weight"),
];

/// Inside block N (`model.layers.N.` / `blk.N.`), every architecture here
/// (Phi-3's fused tensors take the place of its split ones).
const BLOCK: [(&str, &str); 12] = [
    ("input_layernorm.weight", "attn_norm.weight"),
    ("self_attn.q_proj.weight", "attn_q.weight"),
    ("self_attn.k_proj.weight", "attn_k.weight"),
    ("self_attn.v_proj.weight", "attn_v.weight"),
    ("self_attn.q_proj.bias", "attn_q.bias"),
    ("self_attn.k_proj.bias", "attn_k.bias"),
    ("self_attn.v_proj.bias", "attn_v.bias"),
    ("self_attn.o_proj.weight", "attn_output.weight"),
    ("mlp.gate_proj.weight", "ffn_gate.weight"),
    ("mlp.up_proj.weight", "ffn_up.weight"),
    ("mlp.down_proj.weight", "ffn_down.weight"),
    // Llama, Qwen2, Phi-3 and SmolLM3 name the MLP's pre-norm after the
    // attention it follows; Gemma (below) uses this name for the attention's
    // post-norm.
    ("post_attention_layernorm.weight", "ffn_norm.weight"),
];

/// Gemma 2's and 3's blocks: norms on both sides of attention and MLP.
const GEMMA_BLOCK: [(&str, &str); 3] = [
    (
        "post_attention_layernorm.weight",
        "post_attention_norm.weight",
    ),
    ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
    ("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
];

/// Gemma 3 adds per-head q/k norms.
const GEMMA3_QK_NORMS: [(&str, &str); 2] = [
    ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    ("self_attn.k_norm.weight", "attn_k_norm.weight"),
];

/// Phi-3 stores q, k and v as one tensor (rows q, k, v) and gate and up as
/// one (gate rows first), under GGUF names the converter keeps as they are.
const PHI3_BLOCK: [(&str, &str); 2] = [
    ("self_attn.qkv_proj.weight", "attn_qkv.weight"),
    ("mlp.gate_up_proj.weight", "ffn_up.weight"),
];

/// The split tensors Phi-3's fused ones replace (weights and biases).
const PHI3_SPLIT: [&str; 5] = ["attn_q.", "attn_k.", "attn_v.", "ffn_gate.", "ffn_up."];

/// Tensors some checkpoints carry that the model recomputes.
const IGNORED_SUFFIXES: [&str; 1] = ["self_attn.rotary_emb.inv_freq"];

const HF_BLOCK: &str = "model.layers.";
const GGUF_BLOCK: &str = "blk.";

/// A block tensor's table for `arch`: the architecture's own entries
/// first, so they win over the common ones.
fn block_pairs(arch: &str) -> Vec<(&'static str, &'static str)> {
    let own: &[&[(&str, &str)]] = match arch {
        "gemma3" => &[&GEMMA_BLOCK, &GEMMA3_QK_NORMS],
        "gemma2" => &[&GEMMA_BLOCK],
        "phi3" => &[&PHI3_BLOCK],
        _ => &[],
    };
    let split = |g: &str| arch == "phi3" && PHI3_SPLIT.iter().any(|s| g.starts_with(s));
    own.iter()
        .flat_map(|t| t.iter())
        .chain(BLOCK.iter().filter(|(_, g)| !split(g)))
        .copied()
        .collect()
}

/// `prefix` + `N.` + rest: the block number and the rest.
fn split_block<'n>(name: &'n str, prefix: &str) -> Option<(usize, &'n str)> {
    let rest = name.strip_prefix(prefix)?;
    let (n, rest) = rest.split_once('.')?;
    // "01" is not block 1: only the canonical spelling maps.
    if n.len() > 1 && n.starts_with('0') {
        return None;
    }
    Some((n.parse().ok()?, rest))
}

/// What a checkpoint tensor is to wick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mapped {
    /// The tensor the model code knows as this GGUF name, in block `layer` (if any).
    Tensor { gguf: String, layer: Option<usize> },
    /// Present in some checkpoints, recomputed by the model: not loaded.
    Ignored,
    /// Not a tensor of this architecture.
    Unknown,
}

/// The GGUF name of Hugging Face tensor `hf` in architecture `arch`.
pub fn to_gguf(arch: &str, hf: &str) -> Mapped {
    if let Some(&(_, gguf)) = GLOBAL.iter().find(|(h, _)| *h == hf) {
        return Mapped::Tensor {
            gguf: gguf.to_string(),
            layer: None,
        };
    }
    let Some((layer, rest)) = split_block(hf, HF_BLOCK) else {
        return Mapped::Unknown;
    };
    if IGNORED_SUFFIXES.contains(&rest) {
        return Mapped::Ignored;
    }
    match block_pairs(arch).into_iter().find(|(h, _)| *h == rest) {
        Some((_, g)) => Mapped::Tensor {
            gguf: format!("{GGUF_BLOCK}{layer}.{g}"),
            layer: Some(layer),
        },
        None => Mapped::Unknown,
    }
}

/// The Hugging Face name of the tensor wick calls `gguf` in `arch`, for
/// errors about a checkpoint (`None` for names of no checkpoint tensor).
pub fn to_hf(arch: &str, gguf: &str) -> Option<String> {
    if let Some(&(hf, _)) = GLOBAL.iter().find(|(_, g)| *g == gguf) {
        return Some(hf.to_string());
    }
    let (layer, rest) = split_block(gguf, GGUF_BLOCK)?;
    block_pairs(arch)
        .into_iter()
        .find(|(_, g)| *g == rest)
        .map(|(h, _)| format!("{HF_BLOCK}{layer}.{h}"))
}

/// Whether the GGUF tensor is a norm's weight (Gemma stores these as w for
/// x * (1 + w); GGUF stores 1 + w).
pub fn is_norm(gguf: &str) -> bool {
    gguf.ends_with("norm.weight")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gguf(arch: &str, hf: &str) -> Option<String> {
        match to_gguf(arch, hf) {
            Mapped::Tensor { gguf, .. } => Some(gguf),
            _ => None,
        }
    }

    #[test]
    fn each_architecture_maps_its_own_block_tensors() {
        let l = |s: &str| format!("model.layers.1.{s}");
        for arch in ["gemma2", "gemma3"] {
            assert_eq!(
                gguf(arch, &l("post_attention_layernorm.weight")).as_deref(),
                Some("blk.1.post_attention_norm.weight")
            );
            assert_eq!(
                gguf(arch, &l("pre_feedforward_layernorm.weight")).as_deref(),
                Some("blk.1.ffn_norm.weight")
            );
        }
        assert_eq!(gguf("gemma2", &l("self_attn.q_norm.weight")), None);
        assert_eq!(
            gguf("phi3", &l("self_attn.qkv_proj.weight")).as_deref(),
            Some("blk.1.attn_qkv.weight")
        );
        assert_eq!(
            gguf("phi3", &l("mlp.gate_up_proj.weight")).as_deref(),
            Some("blk.1.ffn_up.weight")
        );
        // Phi-3's split tensors are not part of it, nor fused ones of Llama.
        assert_eq!(gguf("phi3", &l("mlp.up_proj.weight")), None);
        assert_eq!(gguf("phi3", &l("self_attn.q_proj.weight")), None);
        assert_eq!(gguf("llama", &l("self_attn.qkv_proj.weight")), None);
        assert_eq!(
            gguf("smollm3", &l("post_attention_layernorm.weight")).as_deref(),
            Some("blk.1.ffn_norm.weight")
        );
        assert_eq!(
            to_hf("phi3", "blk.0.ffn_up.weight").as_deref(),
            Some("model.layers.0.mlp.gate_up_proj.weight")
        );
        assert_eq!(
            to_hf("llama", "blk.0.ffn_up.weight").as_deref(),
            Some("model.layers.0.mlp.up_proj.weight")
        );
        assert_eq!(to_hf("phi3", "rope_factors_long.weight"), None);
    }
}
