//! The checks a configuration passes before it sizes anything: the bounds
//! of `bounds.rs` again (a config may come from elsewhere than metadata),
//! the combinations the kernels cannot run, and every product that sizes a
//! buffer, formed with checked arithmetic.

use super::bounds::*;
use super::config::ModelConfig;
use super::ModelError;

/// `a * b`, or an error naming what the product is.
fn product(what: &str, a: usize, b: usize) -> Result<usize, ModelError> {
    a.checked_mul(b)
        .ok_or_else(|| ModelError::Config(format!("{what}: {a} x {b} overflows")))
}

/// What the kernels and buffer sizes need of a configuration beyond each
/// count's own bound, checked before any tensor is listed or uploaded.
pub fn check(cfg: &ModelConfig) -> Result<(), ModelError> {
    let arch = &cfg.architecture;
    let hd = cfg.head_dim;
    // The bounds `Meta::dim` applied, again: a config may come from elsewhere
    // (a test, a future architecture reading a key some other way).
    let dims = [
        ("block_count", cfg.n_layers, MAX_LAYERS),
        ("embedding_length", cfg.d_model, MAX_EMBEDDING),
        ("attention.head_count", cfg.n_heads, MAX_HEADS),
        ("attention.head_count_kv", cfg.n_kv_heads, MAX_HEADS),
        ("attention.key_length", hd, MAX_HEAD_DIM),
        ("feed_forward_length", cfg.ffn_dim, MAX_FFN),
        ("context_length", cfg.ctx_train, MAX_CONTEXT),
    ];
    for (key, value, max) in dims {
        bounded(&format!("{arch}.{key}"), value as u64, max)?;
    }
    bounded(VOCAB_KEY, cfg.vocab_size as u64, MAX_VOCAB)?;
    if hd % 4 != 0 {
        return Err(ModelError::Config(format!(
            "{arch}.attention.key_length {hd}: the attention kernel reads heads as vec4s, \
             so head_dim must be a multiple of 4"
        )));
    }
    if cfg.n_heads % cfg.n_kv_heads != 0 {
        return Err(ModelError::Config(format!(
            "{} query heads cannot share {} key/value heads evenly",
            cfg.n_heads, cfg.n_kv_heads
        )));
    }
    let n_rot = cfg.rope.n_rot;
    if n_rot == 0 || n_rot % 2 != 0 || n_rot > hd {
        return Err(ModelError::Config(format!(
            "{arch}.rope.dimension_count {n_rot}: it must be even and in 2..=head_dim {hd}"
        )));
    }
    if let Some(moe) = &cfg.moe {
        bounded(
            &format!("{arch}.expert_count"),
            moe.n_experts as u64,
            MAX_EXPERTS,
        )?;
        bounded(
            &format!("{arch}.expert_used_count"),
            moe.top_k as u64,
            moe.n_experts,
        )?;
        let ffn = format!("{arch}.expert_feed_forward_length");
        bounded(&ffn, moe.expert_ffn as u64, MAX_FFN)?;
        if let Some(shared) = moe.shared_ffn {
            let key = format!("{arch}.expert_shared_feed_forward_length");
            bounded(&key, shared as u64, MAX_FFN)?;
        }
    }
    // Every product that sizes a buffer or a tensor, checked once here so
    // the plain `q_dim()` / `kv_dim()` that follow cannot wrap.
    let q_dim = product("query width (heads x head_dim)", cfg.n_heads, hd)?;
    let kv_dim = product("key/value width (kv heads x head_dim)", cfg.n_kv_heads, hd)?;
    let qkv = q_dim
        .checked_add(2 * kv_dim)
        .ok_or_else(|| ModelError::Config("q/k/v width overflows".into()))?;
    let widest = qkv.max(cfg.d_model).max(cfg.ffn_dim).max(cfg.vocab_size);
    product("largest matrix (its width x d_model)", widest, cfg.d_model)?;
    let per_layer = product("KV cache row (kv width x 4 bytes)", kv_dim, 4)?;
    product(
        "KV cache per position (layers x row bytes)",
        cfg.n_layers,
        per_layer,
    )?;
    Ok(())
}
