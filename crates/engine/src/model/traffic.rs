//! How many weight bytes one decode step reads: the numerator of a roofline.
//! A decode step is memory bound, so tokens/s times these bytes against the
//! adapter's copy bandwidth says how close the engine gets to the memory's speed.

use super::decoder::{Block, Decoder, DenseMlp, GateUp, Mlp};
use super::moe::MlpWeights;
use super::moe::MoeWeights;
use crate::kernels::weights::ExpertStack;

impl Decoder {
    /// Stored bytes of every weight matrix one decode step (one token) reads:
    /// all blocks' matrices and the output head (the token embedding when
    /// tied). Left out, as negligible: the one embedding row the token reads
    /// (d_model values), and norm weights and biases (F32 vectors of d_model
    /// or so per block, under 0.1 % of a block's matrices). In a mixture of
    /// experts only the router, the `top_k` chosen experts and any shared
    /// expert are read.
    pub fn weight_bytes_per_token(&self) -> u64 {
        let top_k = self.config.moe.as_ref().map_or(0, |m| m.top_k);
        let blocks: u64 = self.blocks.iter().map(|b| block_bytes(b, top_k)).sum();
        let head = self.output.as_ref().unwrap_or(&self.token_embd);
        blocks + head.bytes() as u64
    }
}

fn block_bytes(b: &Block, top_k: usize) -> u64 {
    let a = &b.attn;
    let attn: u64 = a.qkv.iter().chain([&a.o]).map(|m| m.bytes() as u64).sum();
    attn + match &b.mlp {
        Mlp::Dense(mlp) => dense_bytes(mlp),
        Mlp::Moe(moe) => moe_bytes(moe, top_k),
    }
}

fn dense_bytes(m: &DenseMlp) -> u64 {
    let gate_up = match &m.gate_up {
        GateUp::Fused(w) => w.bytes(),
        GateUp::Split { gate, up } => gate.bytes() + up.bytes(),
    };
    (gate_up + m.down.bytes()) as u64
}

fn mlp_bytes(m: &MlpWeights) -> u64 {
    (m.gate.bytes() + m.up.bytes() + m.down.bytes()) as u64
}

fn moe_bytes(m: &MoeWeights, top_k: usize) -> u64 {
    // One expert's slab of a stack: the stack's bytes over its experts.
    let expert = |s: &ExpertStack| s.matrix.bytes() as u64 / s.experts as u64;
    let shared = m
        .shared
        .as_ref()
        .map_or(0, |s| s.gate_inp.bytes() as u64 + mlp_bytes(&s.mlp));
    m.router.bytes() as u64
        + top_k as u64 * (expert(&m.gate) + expert(&m.up) + expert(&m.down))
        + shared
}
