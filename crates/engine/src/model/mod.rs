//! Models: configuration from metadata, weights uploaded once, and the
//! per-architecture recipe that records a forward pass.
//!
//! A model is stateless: the pipeline owns the KV cache, scratch buffers and
//! positions and hands them in through `Forward`.

pub mod config;
pub mod decoder;
pub mod llama;
pub mod loader;

use crate::format::gguf::{GgufError, GgufFile};
use crate::format::quant::QuantError;
use crate::gpu::GpuError;

pub use config::ModelConfig;
pub use decoder::{Decoder, Forward};
pub use loader::LoadProgress;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unsupported architecture '{0}' (wick runs: llama)")]
    UnsupportedArchitecture(String),
    #[error("tensor '{0}' is missing from the model file")]
    MissingTensor(String),
    #[error("tensor '{name}' has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("tensor '{tensor}' is stored as {dtype}, which wick's GPU kernels do not support")]
    UnsupportedQuant { tensor: String, dtype: String },
    #[error("invalid model metadata: {0}")]
    Config(String),
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Quant(#[from] QuantError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Reads the architecture from metadata and builds that architecture's model.
/// Refuses an unknown architecture by name before anything is uploaded.
pub fn load(
    ctx: &crate::gpu::GpuContext,
    file: &GgufFile,
    bytes: &[u8],
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<Decoder, ModelError> {
    let arch = file.architecture()?.to_string();
    let mut loader = loader::Loader::new(ctx, file, bytes, progress);
    match arch.as_str() {
        "llama" => llama::load(&mut loader),
        other => Err(ModelError::UnsupportedArchitecture(other.to_string())),
    }
}
