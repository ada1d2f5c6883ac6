//! The engine's error type: every failure a caller can see, typed and named.

use crate::constrain::ConstrainError;
use crate::format::gguf::GgufError;
use crate::gpu::GpuError;
use crate::model::ModelError;
use crate::pipeline::sampling::SamplingError;
use crate::tokenizer::chat_template::ChatTemplateError;
use crate::tokenizer::TokenizerError;
use crate::tools::ToolError;

#[derive(Debug, thiserror::Error)]
pub enum WickError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Gguf(#[from] GgufError),
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
    Embed(#[from] crate::embedding::EmbedError),
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
