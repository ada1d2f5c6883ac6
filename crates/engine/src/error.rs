//! The engine's error type: every failure a caller can see, typed and named.

use crate::constrain::ConstrainError;
use crate::format::gguf::GgufError;
use crate::format::gguf_split::SplitError;
use crate::gpu::GpuError;
use crate::model::ModelError;
use crate::pipeline::sampling::SamplingError;
use crate::pipeline::PipelineError;
use crate::tokenizer::chat_template::ChatTemplateError;
use crate::tokenizer::TokenizerError;
use crate::tools::ToolError;

#[derive(Debug, thiserror::Error)]
pub enum WickError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A split model's shards that are not one model (`format::gguf_split`).
    #[error(transparent)]
    Split(#[from] SplitError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    ChatTemplate(#[from] ChatTemplateError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error(transparent)]
    Constrain(#[from] ConstrainError),
    #[error(transparent)]
    Embed(crate::embedding::EmbedError),
    #[error(transparent)]
    Tools(#[from] ToolError),
    #[error(
        "{tokens} tokens do not fit the context of {ctx_len} (positions already used: {used})"
    )]
    ContextOverflow {
        tokens: usize,
        used: usize,
        ctx_len: usize,
    },
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The memory preflight's refusal, before any upload (`preflight/`).
    #[error(transparent)]
    DoesNotFit(Box<crate::preflight::DoesNotFit>),
}

/// The pipeline's errors are the engine's, variant for variant: a caller
/// matches `WickError::Gpu` whichever layer met the GPU's failure.
impl From<PipelineError> for WickError {
    fn from(e: PipelineError) -> WickError {
        match e {
            PipelineError::Gpu(e) => WickError::Gpu(e),
            PipelineError::Model(e) => WickError::Model(e),
            PipelineError::Sampling(e) => WickError::Sampling(e),
            PipelineError::Constrain(e) => WickError::Constrain(e),
            PipelineError::ContextOverflow {
                tokens,
                used,
                ctx_len,
            } => WickError::ContextOverflow {
                tokens,
                used,
                ctx_len,
            },
            PipelineError::InvalidOption(s) => WickError::InvalidOption(s),
        }
    }
}

/// The encoders' errors likewise: the GPU's and the model files' as the
/// engine's own variants, the rest as `Embed`.
impl From<crate::embedding::EmbedError> for WickError {
    fn from(e: crate::embedding::EmbedError) -> WickError {
        use crate::embedding::EmbedError;
        match e {
            EmbedError::Gpu(e) => WickError::Gpu(e),
            EmbedError::Model(e) => WickError::Model(e),
            e => WickError::Embed(e),
        }
    }
}
