//! wick: large language models on the GPU through WebGPU, natively and in the
//! browser. See docs/ARCHITECTURE.md for the architecture.

pub mod completion;
pub mod constrain;
pub mod embedding;
pub mod engine;
pub mod error;
pub mod format;
pub mod gpu;
pub mod hf_folder;
pub mod kernels;
pub mod model;
pub mod pipeline;
pub mod preflight;
pub mod tokenizer;
pub mod tools;

pub use engine::Engine;
pub use error::WickError;

#[cfg(test)]
pub(crate) mod testutil;
