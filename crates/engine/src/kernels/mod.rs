//! The kernels, by family: each op checks shapes, then records a dispatch of
//! its WGSL. Every kernel takes a row count: a single sequence is a batch of
//! one.
//!
//! - `matmul`: weight matrices times activations, the decoder's bulk: the
//!   matrix-vector core of decode, the tiled core of prefill, and the fused
//!   op (`linear`) that wraps either with a norm prologue and an epilogue;
//! - `attention`: causal attention over the KV cache (and its layout), and
//!   the encoders' bidirectional attention;
//! - `rope`: rotary positions, with q/k norms and the KV write fused
//!   (`rope::kv`), scaling (`rope::yarn`), the encoders' form;
//! - `norm`: RMSNorm (and its 8-bit activation rows), per-head norms,
//!   LayerNorm;
//! - `elementwise`: gated activations, residual adds, biases, GELU;
//! - `moe`: routing and the expert matrices;
//! - `sample`: sampling on the GPU;
//! - `embed` (token rows) and `encoder` (encoder embeddings, pooling);
//! - `weights`: matrices in their GPU layout, made at upload;
//! - `bench`: what `wick bench-kernels` times.

pub mod attention;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod elementwise;
pub mod embed;
pub mod encoder;
pub mod matmul;
pub mod moe;
pub mod norm;
pub mod rope;
pub mod sample;
pub mod weights;

#[cfg(test)]
mod params_tests;

use crate::gpu::{error::shape_err, GpuBuffer, GpuError};

/// Bytes of `n` 32-bit values, as ops count what they move
/// (`Recorder::moved`).
pub(crate) fn words(n: usize) -> u64 {
    4 * n as u64
}

/// Checks that `buffer` holds at least `elems` 32-bit elements.
pub(crate) fn check_elems(
    kernel: &'static str,
    what: &str,
    buffer: &GpuBuffer,
    elems: usize,
) -> Result<(), GpuError> {
    let have = buffer.size() / 4;
    if (elems as u64) > have {
        return Err(shape_err(
            kernel,
            format!(
                "{what} ('{}') holds {have} elements, the call needs {elems}",
                buffer.label()
            ),
        ));
    }
    if elems > u32::MAX as usize {
        return Err(shape_err(
            kernel,
            format!("{what}: {elems} elements overflow u32 indexing"),
        ));
    }
    Ok(())
}
