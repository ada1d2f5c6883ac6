//! The output head and reading its logits back.

use crate::gpu::{GpuContext, GpuError, Readback};
use crate::model::{Decoder, Forward};

/// Reads logit rows back through one preallocated staging buffer.
pub struct LogitsReader {
    readback: Readback,
    vocab: usize,
}

impl LogitsReader {
    pub fn new(ctx: &GpuContext, vocab: usize, max_rows: usize) -> LogitsReader {
        LogitsReader {
            readback: Readback::new(ctx, "logits readback", (4 * vocab * max_rows) as u64),
            vocab,
        }
    }

    /// Records the final norm and head for rows `first..first + n` of the step
    /// and the copy of their logits into the staging buffer.
    pub fn record(
        &self,
        model: &Decoder,
        f: &mut Forward,
        first: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        model.record_logits(f, first, n)?;
        let bytes = (4 * self.vocab * n) as u64;
        self.readback.record_copy(f.rec, &f.act.logits, 0, bytes)
    }

    /// After the step's submit: `n` rows of `vocab` logits.
    pub async fn read(&self, ctx: &GpuContext, n: usize) -> Result<Vec<Vec<f32>>, GpuError> {
        let bytes = self.readback.read(ctx, (4 * self.vocab * n) as u64).await?;
        let all: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(all.chunks(self.vocab).map(<[f32]>::to_vec).collect())
    }
}
