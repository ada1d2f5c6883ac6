//! What can go wrong driving the model: the layers below's errors, a
//! request that does not fit the context, an option out of range.

use crate::constrain::ConstrainError;
use crate::gpu::GpuError;
use crate::model::ModelError;
use crate::pipeline::sampling::SamplingError;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error(transparent)]
    Constrain(#[from] ConstrainError),
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
}
