//! Llama (and SmolLM2, which is a Llama): pre-norm decoder blocks with RMSNorm,
//! grouped-query attention with RoPE, a SwiGLU MLP, and a tied or separate
//! output head. It is the plain case of `decoder`: no biases, no q/k norms, no
//! post-norms. Other architectures state how they differ from this file.

use crate::format::gguf::GgufFile;
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::rope::RopeLayout;
use crate::kernels::weights::QuantMatrix;

use super::bounds::{
    bounded, MAX_CONTEXT, MAX_EMBEDDING, MAX_FFN, MAX_HEADS, MAX_HEAD_DIM, MAX_LAYERS, MAX_VOCAB,
    VOCAB_KEY,
};
use super::config::{FreqFactors, Meta, ModelConfig, MoeConfig, RopeConfig};
use super::decoder::{AttentionWeights, Block, Decoder, DenseMlp, GateUp, Mlp, RopeFactors};
use super::fusion;
use super::loader::{Need, TensorStore};
use super::moe;
use super::rope_scaling::{self, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS};
use super::ModelError;

/// A `llama` file with `expert_count` is Mixtral-style: every MLP is a
/// mixture of `feed_forward_length`-wide experts, router weights renormalized
/// over the chosen experts (Mixtral takes the softmax of the top-k logits,
/// which is the same thing).
pub fn config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let meta = Meta {
        file,
        arch: "llama",
    };
    let mut cfg = base_config(&meta)?;
    if file.meta("llama.expert_count").is_some() {
        cfg.moe = Some(MoeConfig::from_meta(&meta, cfg.ffn_dim, true)?);
    }
    Ok(cfg)
}

/// The metadata every Llama-like architecture shares, under its own prefix.
pub fn base_config(meta: &Meta) -> Result<ModelConfig, ModelError> {
    let d_model = meta.dim("embedding_length", MAX_EMBEDDING)?;
    let n_heads = meta.dim("attention.head_count", MAX_HEADS)?;
    let n_kv_heads = meta.dim_or("attention.head_count_kv", n_heads, MAX_HEADS)?;
    if n_heads % n_kv_heads != 0 {
        return Err(ModelError::Config(format!(
            "{n_heads} query heads cannot share {n_kv_heads} key/value heads evenly"
        )));
    }
    let head_dim = meta.dim_or("attention.key_length", d_model / n_heads, MAX_HEAD_DIM)?;
    // The kernels give values the keys' width; a file that says otherwise
    // is refused rather than read with the wrong stride.
    let value_length = meta.dim_or("attention.value_length", head_dim, MAX_HEAD_DIM)?;
    if value_length != head_dim {
        return Err(ModelError::Config(format!(
            "{}.attention.value_length {value_length} differs from the key length {head_dim}",
            meta.arch
        )));
    }
    let vocab_rows = meta
        .file
        .tensor("token_embd.weight")
        .and_then(|t| t.dims.get(1).copied())
        .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
    let vocab_size = bounded(VOCAB_KEY, vocab_rows, MAX_VOCAB)?;
    let ctx_train = meta.dim_or("context_length", 2048, MAX_CONTEXT)?;
    let scaling = rope_scaling::read(meta, ctx_train)?;
    Ok(ModelConfig {
        architecture: meta.arch.to_string(),
        n_layers: meta.dim("block_count", MAX_LAYERS)?,
        d_model,
        n_heads,
        n_kv_heads,
        head_dim,
        ffn_dim: meta.dim("feed_forward_length", MAX_FFN)?,
        vocab_size,
        ctx_train,
        rms_eps: meta.f32_or("attention.layer_norm_rms_epsilon", 1e-5)?,
        rope: RopeConfig {
            // llama.cpp's converter permutes Llama's Q/K rows so that RoPE
            // rotates adjacent pairs.
            layout: RopeLayout::Interleaved,
            n_rot: meta.dim_or("rope.dimension_count", head_dim, MAX_HEAD_DIM)?,
            theta: meta.f32_or("rope.freq_base", 10_000.0)?,
            local_theta: None,
            freq_scale: scaling.freq_scale,
            yarn: scaling.yarn,
            factors: match meta.file.tensor(ROPE_FREQS) {
                Some(_) => FreqFactors::Fixed,
                None => FreqFactors::None,
            },
            skip_every: None,
        },
        attn_scale: 1.0 / (head_dim as f32).sqrt(),
        sliding_window: None,
        activation: Activation::Silu,
        embed_scale: 1.0,
        attn_softcap: None,
        final_softcap: None,
        moe: None,
    })
}

/// llama.cpp applies `rope_freqs.weight` to Llama only; in another
/// architecture it would be a tensor read and ignored.
pub fn refuse_rope_freqs(cfg: &ModelConfig) -> Result<(), ModelError> {
    match cfg.rope.factors == FreqFactors::Fixed {
        true => Err(ModelError::Config(format!(
            "{ROPE_FREQS} in a {} file: rope frequency factors are a Llama 3 scaling",
            cfg.architecture
        ))),
        false => Ok(()),
    }
}

/// Fails naming the first of `tensors` that block 0 lacks: the optional
/// tensors an architecture requires (biases, q/k norms).
pub fn require_block0(file: &GgufFile, tensors: &[&str]) -> Result<(), ModelError> {
    for t in tensors {
        let name = format!("blk.0.{t}");
        if file.tensor(&name).is_none() {
            return Err(ModelError::MissingTensor(name));
        }
    }
    Ok(())
}

/// Fails naming the first of `tensors` that block 0 has but the
/// architecture does not use (it would be loaded and ignored).
pub fn refuse_block0(file: &GgufFile, tensors: &[&str]) -> Result<(), ModelError> {
    for t in tensors {
        let name = format!("blk.0.{t}");
        if file.tensor(&name).is_some() {
            return Err(ModelError::Config(format!(
                "'{name}' in a {} file: the architecture has no such tensor",
                file.architecture()?
            )));
        }
    }
    Ok(())
}

/// The tensors of a decoder with Llama's naming (`blk.N.attn_q.weight`, ...),
/// with expert tensors in place of the MLP's in a mixture of experts.
/// The optional ones (biases, q/k norms, post-norms, a separate output head)
/// are needed where the file has them (a block's in every block where block
/// 0 has them), so variations of Llama reuse this.
pub fn needs(cfg: &ModelConfig, file: &GgufFile) -> Vec<Need> {
    let (d, q, kv, ffn, hd) = (
        cfg.d_model,
        cfg.q_dim(),
        cfg.kv_dim(),
        cfg.ffn_dim,
        cfg.head_dim,
    );
    let mut needs = vec![
        Need::matrix("token_embd.weight", cfg.vocab_size, d),
        Need::vector("output_norm.weight", d),
    ];
    let pairs = cfg.rope.n_rot / 2;
    match cfg.rope.factors {
        FreqFactors::None => {}
        FreqFactors::Fixed => needs.push(Need::vector(ROPE_FREQS, pairs)),
        FreqFactors::LongShort => needs.extend([
            Need::vector(ROPE_FACTORS_LONG, pairs),
            Need::vector(ROPE_FACTORS_SHORT, pairs),
        ]),
    }
    let optional = [Need::matrix("output.weight", cfg.vocab_size, d)];
    needs.extend(
        optional
            .into_iter()
            .filter(|n| file.tensor(&n.name).is_some()),
    );
    for l in 0..cfg.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        needs.extend([
            Need::vector(n("attn_norm.weight"), d),
            Need::matrix(n("attn_q.weight"), q, d),
            Need::matrix(n("attn_k.weight"), kv, d),
            Need::matrix(n("attn_v.weight"), kv, d),
            Need::matrix(n("attn_output.weight"), d, q),
            Need::vector(n("ffn_norm.weight"), d),
        ]);
        match &cfg.moe {
            Some(moe_cfg) => needs.extend(moe::needs(cfg, moe_cfg, l)),
            None => needs.extend([
                Need::matrix(n("ffn_gate.weight"), ffn, d),
                Need::matrix(n("ffn_up.weight"), ffn, d),
                Need::matrix(n("ffn_down.weight"), d, ffn),
            ]),
        }
        let optional = [
            Need::vector(n("attn_q.bias"), q),
            Need::vector(n("attn_k.bias"), kv),
            Need::vector(n("attn_v.bias"), kv),
            Need::vector(n("attn_q_norm.weight"), hd),
            Need::vector(n("attn_k_norm.weight"), hd),
            Need::vector(n("post_attention_norm.weight"), d),
            Need::vector(n("post_ffw_norm.weight"), d),
        ];
        // All layers or none: one a layer lacks is missing, not skipped.
        needs.extend(optional.into_iter().filter(|n| {
            let block0 = n.name.replacen(&format!("blk.{l}."), "blk.0.", 1);
            file.tensor(&block0).is_some()
        }));
    }
    needs
}

/// Builds the decoder from the uploaded tensors named as in `needs`.
pub fn build(cfg: ModelConfig, store: &mut TensorStore) -> Result<Decoder, ModelError> {
    let mut blocks = Vec::with_capacity(cfg.n_layers);
    for l in 0..cfg.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        let attn = AttentionWeights {
            qkv: take_qkv(store, &cfg, l)?,
            qkv_bias: take_qkv_bias(store, l)?,
            o: store.matrix(&n("attn_output.weight"))?,
            q_norm: store.optional_vector(&n("attn_q_norm.weight")),
            k_norm: store.optional_vector(&n("attn_k_norm.weight")),
        };
        blocks.push(Block {
            attn_norm: store.vector(&n("attn_norm.weight"))?,
            attn,
            post_attn_norm: store.optional_vector(&n("post_attention_norm.weight")),
            mlp_norm: store.vector(&n("ffn_norm.weight"))?,
            mlp: match &cfg.moe {
                Some(moe_cfg) => Mlp::Moe(Box::new(moe::take(store, moe_cfg, l)?)),
                None => Mlp::Dense(DenseMlp {
                    gate_up: match store.optional_matrix(&n("ffn_gate_up.weight")) {
                        Some(fused) => GateUp::Fused(fused),
                        None => GateUp::Split {
                            gate: store.matrix(&n("ffn_gate.weight"))?,
                            up: store.matrix(&n("ffn_up.weight"))?,
                        },
                    },
                    down: store.matrix(&n("ffn_down.weight"))?,
                }),
            },
            post_mlp_norm: store.optional_vector(&n("post_ffw_norm.weight")),
        });
    }
    let rope_factors = match cfg.rope.factors {
        FreqFactors::None => RopeFactors::None,
        FreqFactors::Fixed => RopeFactors::Fixed(store.vector(ROPE_FREQS)?),
        FreqFactors::LongShort => RopeFactors::LongShort {
            long: store.vector(ROPE_FACTORS_LONG)?,
            short: store.vector(ROPE_FACTORS_SHORT)?,
        },
    };
    Ok(Decoder {
        token_embd: store.matrix("token_embd.weight")?,
        rope_factors,
        output_norm: store.vector("output_norm.weight")?,
        output: store.optional_matrix("output.weight"),
        config: cfg,
        blocks,
    })
}

/// Block `l`'s q, k and v projections as uploaded: joined in runs of one
/// storage type (`fusion::qkv_runs`), else one matrix each.
fn take_qkv(
    store: &mut TensorStore,
    cfg: &ModelConfig,
    l: usize,
) -> Result<Vec<QuantMatrix>, ModelError> {
    let members = [
        ("attn_q", cfg.q_dim()),
        ("attn_k", cfg.kv_dim()),
        ("attn_v", cfg.kv_dim()),
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while i < members.len() {
        let (first, _) = members[i];
        match store.optional_matrix(&fusion::qkv_name(l, first)) {
            Some(m) => {
                // The run covers as many members as its rows add up to.
                let mut rows = 0;
                while rows < m.rows && i < members.len() {
                    rows += members[i].1;
                    i += 1;
                }
                out.push(m);
            }
            None => {
                out.push(store.matrix(&format!("blk.{l}.{first}.weight"))?);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// The joined q/k/v bias of block `l`, if the file has biases: all three or
/// none (a lone bias would otherwise be dropped without a word).
fn take_qkv_bias(
    store: &mut TensorStore,
    l: usize,
) -> Result<Option<crate::gpu::BufferRef>, ModelError> {
    let joined = store.optional_vector(&format!("blk.{l}.attn_qkv.bias"));
    for s in ["attn_q", "attn_k", "attn_v"] {
        let name = format!("blk.{l}.{s}.bias");
        if store.optional_vector(&name).is_some() {
            return Err(ModelError::Config(format!(
                "'{name}' without its q/k/v siblings: wick needs all three biases or none"
            )));
        }
    }
    Ok(joined)
}
