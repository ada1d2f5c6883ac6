//! Sampled tokens stay on the GPU: a ring of token ids that the sampler
//! writes and the next step's embedding reads, so several decode steps run in
//! one submit and only the new ids (4 bytes each) are read back.
//!
//! Slot `head` holds the input token of the next decode step; step `s` of a
//! submit embeds slot `head + s` and samples into slot `head + s + 1` (mod the
//! ring's length). After the submit, the `n` new ids are read back and `head`
//! moves on by `n`.

use crate::gpu::{BufferRef, GpuContext, GpuError, Readback, Recorder};

pub struct TokenRing {
    pub buffer: BufferRef,
    readback: Readback,
    len: usize,
    head: usize,
}

impl TokenRing {
    /// A ring for up to `max_steps` decode steps per submit.
    pub fn new(ctx: &GpuContext, max_steps: usize) -> Result<TokenRing, GpuError> {
        let len = max_steps + 1;
        Ok(TokenRing {
            buffer: ctx.create_storage("token ring", 4 * len as u64)?,
            readback: Readback::new(ctx, "token readback", 4 * max_steps as u64),
            len,
            head: 0,
        })
    }

    /// Most decode steps one submit may hold.
    pub fn max_steps(&self) -> usize {
        self.len - 1
    }

    /// Slot that step `s` of the next submit embeds.
    pub fn input_slot(&self, s: usize) -> usize {
        (self.head + s) % self.len
    }

    /// Slot that step `s` of the next submit samples into.
    pub fn output_slot(&self, s: usize) -> usize {
        (self.head + s + 1) % self.len
    }

    /// Starts a sequence: the prefill's token goes to `output_slot(0)`.
    pub fn reset(&mut self) {
        self.head = self.len - 1;
    }

    /// Records the copy of the `n` ids the submit's steps produce (one or
    /// two ranges of the ring) into the readback buffer.
    pub fn record_readback(&self, rec: &mut Recorder, n: usize) -> Result<(), GpuError> {
        let first = self.output_slot(0);
        let straight = n.min(self.len - first);
        let (first_bytes, rest) = (4 * straight as u64, n - straight);
        self.readback
            .record_copy_to(rec, &self.buffer, 4 * first as u64, first_bytes, 0)?;
        if rest > 0 {
            self.readback
                .record_copy_to(rec, &self.buffer, 0, 4 * rest as u64, first_bytes)?;
        }
        Ok(())
    }

    /// After the submit: the `n` new ids, in order; the last becomes the next input.
    pub async fn read(&mut self, ctx: &GpuContext, n: usize) -> Result<Vec<u32>, GpuError> {
        let bytes = self.readback.read(ctx, 4 * n as u64).await?;
        self.head = (self.head + n) % self.len;
        Ok(bytemuck::pod_collect_to_vec(&bytes[..4 * n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slots_wrap_and_reads_follow_the_head() {
        let ctx = crate::testutil::ctx();
        let mut ring = TokenRing::new(ctx, 3).unwrap();
        ctx.write(&ring.buffer, 0, bytemuck::cast_slice(&[10u32, 11, 12, 13]));
        assert_eq!((ring.input_slot(0), ring.output_slot(0)), (0, 1));
        let mut rec = Recorder::new(ctx);
        ring.record_readback(&mut rec, 3).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        assert_eq!(pollster::block_on(ring.read(ctx, 3)).unwrap(), [11, 12, 13]);
        // head is now 3: outputs wrap to slots 0, 1.
        assert_eq!(
            (ring.input_slot(0), ring.output_slot(0), ring.output_slot(1)),
            (3, 0, 1)
        );
        let mut rec = Recorder::new(ctx);
        ring.record_readback(&mut rec, 2).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        assert_eq!(pollster::block_on(ring.read(ctx, 2)).unwrap(), [10, 11]);
        assert_eq!(ring.input_slot(0), 1);
        let mut rec = Recorder::new(ctx);
        assert!(
            ring.record_readback(&mut rec, 4).is_err(),
            "more than the ring holds"
        );
    }
}
