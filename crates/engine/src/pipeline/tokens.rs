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
    /// Two, used in turn: one submit's ids can be mapped while the next
    /// submit copies its own.
    readbacks: [Readback; 2],
    next_readback: usize,
    len: usize,
    head: usize,
}

/// Where one submit's new ids will be read from.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    readback: usize,
    pub n: usize,
}

impl TokenRing {
    /// A ring for up to `max_steps` decode steps per submit.
    pub fn new(ctx: &GpuContext, max_steps: usize) -> Result<TokenRing, GpuError> {
        let len = max_steps + 1;
        let readback = || Readback::new(ctx, "token readback", 4 * max_steps as u64);
        Ok(TokenRing {
            buffer: ctx.create_storage("token ring", 4 * len as u64)?,
            readbacks: [readback(), readback()],
            next_readback: 0,
            len,
            head: 0,
        })
    }

    /// Most decode steps one submit may hold.
    pub fn max_steps(&self) -> usize {
        self.len - 1
    }

    /// Slot that step `s` of the submit being recorded embeds.
    pub fn input_slot(&self, s: usize) -> usize {
        (self.head + s) % self.len
    }

    /// Slot that step `s` of the submit being recorded samples into.
    pub fn output_slot(&self, s: usize) -> usize {
        (self.head + s + 1) % self.len
    }

    /// Starts a sequence: the prefill's token goes to `output_slot(0)`.
    pub fn reset(&mut self) {
        self.head = self.len - 1;
    }

    /// Writes `id` into the slot the next decode step embeds (after a
    /// verifying pass, whose kept token need not be its last row's).
    pub fn set_input(&self, ctx: &GpuContext, id: u32) {
        ctx.write(
            &self.buffer,
            4 * self.input_slot(0) as u64,
            bytemuck::bytes_of(&id),
        );
    }

    /// After recording `n` steps: records the copy of their ids (one or two
    /// ranges of the ring) into the next readback buffer and moves on to the
    /// next submit's slots. The copy runs in the same submit, before any
    /// later submit can reuse the slots.
    pub fn record_readback(&mut self, rec: &mut Recorder, n: usize) -> Result<Ticket, GpuError> {
        let readback = &self.readbacks[self.next_readback];
        let first = self.output_slot(0);
        let straight = n.min(self.len - first);
        let (first_bytes, rest) = (4 * straight as u64, n - straight);
        readback.record_copy_to(rec, &self.buffer, 4 * first as u64, first_bytes, 0)?;
        if rest > 0 {
            readback.record_copy_to(rec, &self.buffer, 0, 4 * rest as u64, first_bytes)?;
        }
        let ticket = Ticket {
            readback: self.next_readback,
            n,
        };
        self.next_readback = 1 - self.next_readback;
        self.head = (self.head + n) % self.len;
        Ok(ticket)
    }

    /// The ids a ticket's submit (`after`) produced, in order.
    pub async fn read(
        &self,
        ctx: &GpuContext,
        ticket: Ticket,
        after: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u32>, GpuError> {
        let bytes = self.readbacks[ticket.readback]
            .read_after(ctx, 4 * ticket.n as u64, after)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes[..4 * ticket.n]))
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
        let a = ring.record_readback(&mut rec, 3).unwrap();
        // head is now 3: the next submit's outputs wrap to slots 0, 1.
        assert_eq!(
            (ring.input_slot(0), ring.output_slot(0), ring.output_slot(1)),
            (3, 0, 1)
        );
        let b = ring.record_readback(&mut rec, 2).unwrap();
        let index = pollster::block_on(rec.submit_indexed()).unwrap().index;
        assert_eq!(
            pollster::block_on(ring.read(ctx, a, index.clone())).unwrap(),
            [11, 12, 13]
        );
        assert_eq!(
            pollster::block_on(ring.read(ctx, b, index)).unwrap(),
            [10, 11]
        );
        assert_eq!(ring.input_slot(0), 1);
        let mut rec = Recorder::new(ctx);
        assert!(
            ring.record_readback(&mut rec, 4).is_err(),
            "more than the ring holds"
        );
    }
}
