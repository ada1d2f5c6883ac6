//! What can go wrong embedding text: the model's files, the GPU, or a
//! request the model cannot serve as given.

use crate::gpu::GpuError;
use crate::model::ModelError;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("no inputs to embed")]
    NoInputs,
    #[error(
        "input {index} is {tokens} tokens long (special tokens included); the model reads at most {max} (truncation was not asked for)"
    )]
    InputTooLong {
        index: usize,
        tokens: usize,
        max: usize,
    },
    #[error("input {index}: token id {id} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { index: usize, id: u32, vocab: usize },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("sentence-transformers config: {0}")]
    SentenceConfig(String),
}
