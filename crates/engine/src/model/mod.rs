//! Models: configuration from metadata, weights uploaded once, and the
//! per-architecture recipe that records a forward pass.
//!
//! A model is stateless: the pipeline owns the KV cache, scratch buffers and
//! positions and hands them in through `Forward`.

pub mod activations;
pub mod block;
pub mod bounds;
pub mod config;
pub mod config_check;
pub mod decoder;
pub mod fusion;
pub mod gemma2;
pub mod gemma3;
pub mod hf;
pub mod llama;
pub mod loader;
pub mod moe;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
pub mod rope_scaling;
pub mod smollm3;
pub mod synthetic;
mod traffic;

use crate::format::gguf::{GgufError, GgufFile};
use crate::format::quant::QuantError;
use crate::format::safetensors::SafetensorsError;
use crate::gpu::GpuError;

pub use config::ModelConfig;
pub use decoder::{Decoder, Forward};
pub use loader::{LoadProgress, TensorStore};

/// The GGUF architectures wick runs (`general.architecture`); `llama`
/// with or without experts (Mixtral).
pub const ARCHITECTURES: [&str; 9] = [
    "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", "smollm3",
];

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(
        "unsupported architecture '{0}' (wick runs: {runs})",
        runs = ARCHITECTURES.join(", ")
    )]
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
    #[error("the model file is incomplete: {0}")]
    Truncated(String),
    #[error("invalid model metadata: {0}")]
    Config(String),
    /// A count or dimension outside `1..=max` (see `bounds.rs`), refused
    /// before it sizes anything.
    #[error("metadata `{key}` is {value}: wick accepts 1..={max}")]
    OutOfBounds { key: String, value: u64, max: u64 },
    /// A GGUF whose vocabulary and embedding disagree (llama.cpp requires
    /// them equal): ids past the vocabulary would index rows no token has.
    #[error(
        "the tokenizer has {tokens} tokens but '{tensor}' has {rows} rows: a GGUF's vocabulary and embedding must match"
    )]
    VocabularyMismatch {
        tokens: usize,
        tensor: String,
        rows: usize,
    },
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Safetensors(#[from] SafetensorsError),
    #[error(transparent)]
    Quant(#[from] QuantError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// What loading a file will build: the architecture's config and the
/// tensors it needs, decided from the header alone.
#[derive(Clone)]
pub struct Plan {
    pub config: ModelConfig,
    pub needs: Vec<loader::Need>,
    /// Needed tensors uploaded joined (see `fusion.rs`).
    pub fusions: Vec<fusion::Fusion>,
}

impl Plan {
    /// Reads the architecture from metadata and asks that architecture for its
    /// config and tensors. An unknown architecture is refused by name before
    /// anything is uploaded.
    pub fn for_file(file: &GgufFile) -> Result<Plan, ModelError> {
        let arch = file.architecture()?;
        let config = match arch {
            "llama" => llama::config(file)?,
            "qwen2" | "qwen2moe" => qwen2::config(file, arch)?,
            "qwen3" | "qwen3moe" => qwen3::config(file, arch)?,
            "gemma2" => gemma2::config(file)?,
            "gemma3" => gemma3::config(file)?,
            "phi3" => phi3::config(file)?,
            "smollm3" => smollm3::config(file)?,
            other => return Err(ModelError::UnsupportedArchitecture(other.to_string())),
        };
        // Before `needs` lists a tensor per layer and anything is sized.
        config_check::check(&config)?;
        // Every architecture here names its tensors as Llama does; Phi-3
        // stores some of them fused.
        let (needs, fusions) = match arch {
            "phi3" => (phi3::needs(&config, file), phi3::fusions(&config)),
            _ => (
                llama::needs(&config, file),
                fusion::decoder_fusions(file, config.n_layers, config.moe.is_none()),
            ),
        };
        Ok(Plan {
            config,
            needs,
            fusions,
        })
    }

    /// Builds the model from its uploaded tensors.
    pub fn build(self, store: &mut TensorStore) -> Result<Decoder, ModelError> {
        llama::build(self.config, store)
    }
}
