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

/// Inside block N (`model.layers.N.` / `blk.N.`), every architecture here.
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
    // Llama and Qwen2 name the MLP's pre-norm after the attention it follows;
    // Gemma 3 (below) uses this name for the attention's post-norm.
    ("post_attention_layernorm.weight", "ffn_norm.weight"),
];

/// Gemma 3's block: norms on both sides of attention and MLP, q/k norms.
const GEMMA3_BLOCK: [(&str, &str); 5] = [
    (
        "post_attention_layernorm.weight",
        "post_attention_norm.weight",
    ),
    ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
    ("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
    ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    ("self_attn.k_norm.weight", "attn_k_norm.weight"),
];

/// Tensors some checkpoints carry that the model recomputes.
const IGNORED_SUFFIXES: [&str; 1] = ["self_attn.rotary_emb.inv_freq"];

const HF_BLOCK: &str = "model.layers.";
const GGUF_BLOCK: &str = "blk.";

/// A block tensor's table for `arch`: Gemma 3's entries first, so they win.
fn block_pairs(arch: &str) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    let gemma: &[(&str, &str)] = if arch == "gemma3" { &GEMMA3_BLOCK } else { &[] };
    gemma.iter().chain(BLOCK.iter())
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
    match block_pairs(arch).find(|(h, _)| *h == rest) {
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
        .find(|(_, g)| *g == rest)
        .map(|(h, _)| format!("{HF_BLOCK}{layer}.{h}"))
}

/// Whether the GGUF tensor is a norm's weight (Gemma stores these as w for
/// x * (1 + w); GGUF stores 1 + w).
pub fn is_norm(gguf: &str) -> bool {
    gguf.ends_with("norm.weight")
}
