//! wick: large language models on the GPU through WebGPU, natively and in the
//! browser. See DESIGN.md for the architecture.

pub mod gpu;
pub mod kernels;

#[cfg(test)]
pub(crate) mod testutil;
