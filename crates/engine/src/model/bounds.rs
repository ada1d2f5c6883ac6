//! The largest counts and dimensions wick accepts from a file's metadata, and
//! the checks a configuration passes before it sizes anything.
//!
//! Metadata is untrusted input: a crafted header could otherwise make the
//! loader allocate a name per layer for 2^40 layers, wrap a buffer-size
//! product to something small, or upload every weight only to fail at the
//! first attention dispatch. Each count is read through `Meta::dim`, which
//! refuses 0 and anything over its maximum naming the key; `check` then
//! refuses the combinations the kernels cannot run, and forms every product
//! that sizes a buffer with checked arithmetic. The maximums are several
//! times the largest published models' values (noted beside each); products
//! of them can still pass a 32-bit `usize` (wasm32), hence the checks.

use super::config::ModelConfig;
use super::ModelError;
use crate::kernels::attention;
use crate::kernels::rope::MAX_POSITION;

/// Transformer blocks (Llama 3.1 405B: 126).
pub const MAX_LAYERS: usize = 1024;
/// Width of the residual stream (Llama 3.1 405B: 16384).
pub const MAX_EMBEDDING: usize = 65_536;
/// Query heads, and key/value heads (Llama 3.1 405B: 128 / 8).
pub const MAX_HEADS: usize = 1024;
/// Elements per head: the attention kernel holds one vec4 of a head's output
/// per invocation of its 64-wide workgroup (Gemma 3: 256).
pub const MAX_HEAD_DIM: usize = attention::MAX_HEAD_DIM;
/// Width of an MLP, dense or one expert's (Llama 3.1 405B: 53248).
pub const MAX_FFN: usize = 262_144;
/// Vocabulary entries (Gemma 3: 262144).
pub const MAX_VOCAB: usize = 1 << 20;
/// Training context, and a sliding window: positions past 2^24 are not exact
/// in f32, where RoPE forms its angles (Llama 4 Scout: 10M).
pub const MAX_CONTEXT: usize = MAX_POSITION as usize;
/// Experts of a mixture: the grouping kernel keeps two u32 counters per
/// expert in workgroup memory, 16 KiB at 2048 (DeepSeek V3: 256).
pub const MAX_EXPERTS: usize = 2048;

/// What the vocabulary size is read from (its rows).
pub const VOCAB_KEY: &str = "token_embd.weight rows (the vocabulary)";

/// `1..=max`, or an error naming `key` and the value.
pub fn bounded(key: &str, value: u64, max: usize) -> Result<usize, ModelError> {
    match usize::try_from(value) {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(ModelError::OutOfBounds {
            key: key.to_string(),
            value,
            max: max as u64,
        }),
    }
}

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

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
