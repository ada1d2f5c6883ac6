//! The first stage of a step: token ids onto the GPU, then their embeddings.

use crate::gpu::{GpuContext, GpuError};
use crate::model::{Decoder, Forward};

/// Writes the step's ids into the preallocated ids buffer (ordered before the
/// step's submit) and records the embedding gather.
pub fn record(
    ctx: &GpuContext,
    model: &Decoder,
    f: &mut Forward,
    ids: &[u32],
) -> Result<(), GpuError> {
    debug_assert_eq!(ids.len(), f.rows);
    ctx.write(&f.act.ids, 0, bytemuck::cast_slice(ids));
    model.record_embed(f, &f.act.ids, 0)
}
