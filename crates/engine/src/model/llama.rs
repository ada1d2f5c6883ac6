//! Llama (and SmolLM2, which is a Llama): pre-norm decoder blocks with RMSNorm,
//! grouped-query attention with RoPE, a SwiGLU MLP, and a tied or separate
//! output head. It is the plain case of `decoder`: no biases, no q/k norms, no
//! post-norms. Other architectures state how they differ from this file.

use crate::kernels::activation::Activation;
use crate::kernels::rope::RopeLayout;

use super::config::{Meta, ModelConfig, RopeConfig};
use super::decoder::{AttentionWeights, Block, Decoder, MlpWeights};
use super::loader::{Loader, Need};
use super::ModelError;

pub fn config(meta: &Meta) -> Result<ModelConfig, ModelError> {
    let d_model = meta.usize("embedding_length")?;
    let n_heads = meta.usize("attention.head_count")?;
    let n_kv_heads = meta.usize_or("attention.head_count_kv", n_heads)?;
    if n_heads == 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
        return Err(ModelError::Config(format!(
            "{n_heads} query heads cannot share {n_kv_heads} key/value heads"
        )));
    }
    let head_dim = meta.usize_or("attention.key_length", d_model / n_heads)?;
    let file = meta.file;
    let vocab_size =
        file.tensor("token_embd.weight")
            .and_then(|t| t.dims.get(1).copied())
            .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))? as usize;
    Ok(ModelConfig {
        architecture: meta.arch.to_string(),
        n_layers: meta.usize("block_count")?,
        d_model,
        n_heads,
        n_kv_heads,
        head_dim,
        ffn_dim: meta.usize("feed_forward_length")?,
        vocab_size,
        ctx_train: meta.usize_or("context_length", 2048)?,
        rms_eps: meta.f32_or("attention.layer_norm_rms_epsilon", 1e-5)?,
        rope: RopeConfig {
            // llama.cpp's converter permutes Llama's Q/K rows so that RoPE
            // rotates adjacent pairs.
            layout: RopeLayout::Interleaved,
            n_rot: meta.usize_or("rope.dimension_count", head_dim)?,
            theta: meta.f32_or("rope.freq_base", 10_000.0)?,
            local_theta: None,
            freq_scale: 1.0,
        },
        attn_scale: 1.0 / (head_dim as f32).sqrt(),
        sliding_window: None,
        activation: Activation::Silu,
        embed_scale: 1.0,
    })
}

/// The tensors of a decoder with Llama's naming (`blk.N.attn_q.weight`, ...),
/// the optional ones only where the file has them.
pub fn needs(cfg: &ModelConfig, loader: &Loader) -> Vec<Need> {
    let (d, q, kv, ffn) = (cfg.d_model, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
    let mut needs = vec![
        Need::matrix("token_embd.weight", cfg.vocab_size, d),
        Need::vector("output_norm.weight", d),
    ];
    if loader.has("output.weight") {
        needs.push(Need::matrix("output.weight", cfg.vocab_size, d));
    }
    for l in 0..cfg.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        needs.extend([
            Need::vector(n("attn_norm.weight"), d),
            Need::matrix(n("attn_q.weight"), q, d),
            Need::matrix(n("attn_k.weight"), kv, d),
            Need::matrix(n("attn_v.weight"), kv, d),
            Need::matrix(n("attn_output.weight"), d, q),
            Need::vector(n("ffn_norm.weight"), d),
            Need::matrix(n("ffn_gate.weight"), ffn, d),
            Need::matrix(n("ffn_up.weight"), ffn, d),
            Need::matrix(n("ffn_down.weight"), d, ffn),
        ]);
    }
    needs
}

/// Uploads a decoder's weights with Llama's tensor names. Optional tensors
/// (biases, q/k norms, post-norms, a separate output head) are taken when
/// present, so variations of Llama reuse this with their own config.
pub fn load_weights(cfg: ModelConfig, loader: &mut Loader) -> Result<Decoder, ModelError> {
    loader.check_all(&needs(&cfg, loader))?;
    let (d, q, kv, ffn) = (cfg.d_model, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
    let token_embd = loader.matrix("token_embd.weight", cfg.vocab_size, d)?;
    let mut blocks = Vec::with_capacity(cfg.n_layers);
    for l in 0..cfg.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        let attn = AttentionWeights {
            q: loader.matrix(&n("attn_q.weight"), q, d)?,
            k: loader.matrix(&n("attn_k.weight"), kv, d)?,
            v: loader.matrix(&n("attn_v.weight"), kv, d)?,
            o: loader.matrix(&n("attn_output.weight"), d, q)?,
            q_bias: loader.optional_vector(&n("attn_q.bias"), q)?,
            k_bias: loader.optional_vector(&n("attn_k.bias"), kv)?,
            v_bias: loader.optional_vector(&n("attn_v.bias"), kv)?,
            q_norm: loader.optional_vector(&n("attn_q_norm.weight"), cfg.head_dim)?,
            k_norm: loader.optional_vector(&n("attn_k_norm.weight"), cfg.head_dim)?,
        };
        blocks.push(Block {
            attn_norm: loader.vector(&n("attn_norm.weight"), d)?,
            attn,
            post_attn_norm: loader.optional_vector(&n("post_attention_norm.weight"), d)?,
            mlp_norm: loader.vector(&n("ffn_norm.weight"), d)?,
            mlp: MlpWeights {
                gate: loader.matrix(&n("ffn_gate.weight"), ffn, d)?,
                up: loader.matrix(&n("ffn_up.weight"), ffn, d)?,
                down: loader.matrix(&n("ffn_down.weight"), d, ffn)?,
            },
            post_mlp_norm: loader.optional_vector(&n("post_ffw_norm.weight"), d)?,
        });
    }
    let output = if loader.has("output.weight") {
        Some(loader.matrix("output.weight", cfg.vocab_size, d)?)
    } else {
        None
    };
    Ok(Decoder {
        output_norm: loader.vector("output_norm.weight", d)?,
        config: cfg,
        token_embd,
        blocks,
        output,
    })
}

pub fn load(loader: &mut Loader) -> Result<Decoder, ModelError> {
    let file = loader.file;
    if file.meta("llama.expert_count").is_some() {
        return Err(ModelError::UnsupportedArchitecture(
            "llama with experts (Mixtral-style mixture of experts)".into(),
        ));
    }
    let cfg = config(&Meta {
        file,
        arch: "llama",
    })?;
    load_weights(cfg, loader)
}
