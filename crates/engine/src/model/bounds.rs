//! The largest counts and dimensions wick accepts from a file's metadata, and
//! the checks a configuration passes before it sizes anything.
//!
//! Metadata is untrusted input: a crafted header could otherwise make the
//! loader allocate a name per layer for 2^40 layers, wrap a buffer-size
//! product to something small, or upload every weight only to fail at the
//! first attention dispatch. Each count is read through `Meta::dim`, which
//! refuses 0 and anything over its maximum naming the key; `config_check`
//! then refuses the combinations the kernels cannot run, and forms every
//! product that sizes a buffer with checked arithmetic. The maximums are several
//! times the largest published models' values (noted beside each); products
//! of them can still pass a 32-bit `usize` (wasm32), hence the checks.

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

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
