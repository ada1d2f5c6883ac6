//! One Rust file per WGSL kernel family: each checks shapes, then records a
//! dispatch. Every kernel takes a row count: a single sequence is a batch of one.

pub mod activation;
pub mod add;
pub mod attention;
pub mod attention_bidir;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod bias;
pub mod embed;
pub mod encoder_embed;
pub mod gelu;
pub mod head_norm;
pub mod kv;
pub mod layer_norm;
pub mod layout;
pub mod linear;
#[cfg(not(target_arch = "wasm32"))]
pub mod load_probe;
pub mod matmul;
pub(crate) mod matmul_variants;
pub(crate) mod matvec_tile;
pub mod moe;
pub mod pool;
pub mod rmsnorm;
pub mod rmsnorm_q8;
pub mod rope;
pub mod rope_bidir;
pub mod rope_kv;
pub mod rope_yarn;
pub mod sample;
pub mod softmax;
pub(crate) mod tile_shape;
pub(crate) mod vec_shape;
pub mod weights;
pub(crate) mod x_ranges;
pub(crate) mod x_window;

use crate::gpu::{error::shape_err, GpuBuffer, GpuError};

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

#[cfg(test)]
mod weight_store_tests;
