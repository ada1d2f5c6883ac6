//! The checkpoint's shards in, the GGUF file out, tensor by tensor.
//!
//! Shards arrive in order, each in chunks of any size. A tensor that passes
//! through unchanged is forwarded as its bytes arrive (no copy); one that is
//! converted is held until whole, converted, then sent. Bytes the GGUF file
//! does not carry (safetensors headers, tensors not loaded) are skipped, and
//! each tensor is followed by the padding GGUF's alignment asks for. The
//! tensors made from `config.json` go first, with the header.

use crate::format::gguf_write::ALIGNMENT;
use crate::model::ModelError;

use super::HfCheckpoint;

pub struct HfStream {
    ckpt: HfCheckpoint,
    header_sent: bool,
    /// The shard now arriving, and how many of its bytes have.
    shard: usize,
    pos: u64,
    /// The next tensor to finish.
    next: usize,
    /// Bytes of `jobs[next]` taken so far: held in `pending` for a
    /// conversion, or already forwarded when it passes through.
    pending: Vec<u8>,
    forwarded: u64,
}

/// Where the GGUF bytes go: the engine's `ModelLoader::push`, in practice,
/// whose error (`E`) a failure here becomes.
pub type Sink<'s, E> = dyn FnMut(&[u8]) -> Result<(), E> + 's;

impl HfStream {
    pub(super) fn new(ckpt: HfCheckpoint) -> HfStream {
        HfStream {
            ckpt,
            header_sent: false,
            shard: 0,
            pos: 0,
            next: 0,
            pending: Vec::new(),
            forwarded: 0,
        }
    }

    pub fn checkpoint(&self) -> &HfCheckpoint {
        &self.ckpt
    }

    /// Takes the next `chunk` of shard `shard` (shards in order, each from
    /// its first byte) and sends every GGUF byte it completes to `sink`.
    pub fn push<E: From<ModelError>>(
        &mut self,
        shard: usize,
        chunk: &[u8],
        sink: &mut Sink<E>,
    ) -> Result<(), E> {
        if !self.header_sent {
            sink(&self.ckpt.header)?;
            if !self.ckpt.inline.is_empty() {
                sink(&self.ckpt.inline)?;
            }
            self.header_sent = true;
        }
        if shard != self.shard {
            if shard < self.shard {
                return Err(ModelError::Config(format!(
                    "shard {shard} arrived after shard {}: shards stream in order",
                    self.shard
                ))
                .into());
            }
            self.unfinished_before(shard)?;
            (self.shard, self.pos) = (shard, 0);
        }
        let offset = self.pos;
        let end = offset + chunk.len() as u64;
        self.pos = end;
        while let Some(job) = self.ckpt.jobs.get(self.next) {
            let empty = job.start == job.end;
            if job.shard != shard || job.start > end || (job.start == end && !empty) {
                break;
            }
            let identity = job.conversion.is_identity();
            let taken = if identity {
                self.forwarded
            } else {
                self.pending.len() as u64
            };
            let from = (job.start + taken).max(offset);
            let to = job.end.min(end);
            if from < to {
                let part = &chunk[(from - offset) as usize..(to - offset) as usize];
                if identity {
                    sink(part)?;
                    self.forwarded += part.len() as u64;
                } else {
                    self.pending.extend_from_slice(part);
                }
            }
            if to < job.end {
                break; // the chunk ends inside this tensor
            }
            let sent = if identity {
                job.end - job.start
            } else {
                let out = job
                    .conversion
                    .apply(&job.hf_name, &self.pending, job.rows)?;
                sink(&out)?;
                self.pending = Vec::new();
                out.len() as u64
            };
            let pad = (sent.next_multiple_of(ALIGNMENT) - sent) as usize;
            if pad > 0 {
                sink(&[0u8; ALIGNMENT as usize][..pad])?;
            }
            self.next += 1;
            self.forwarded = 0;
        }
        Ok(())
    }

    /// Checks every tensor has arrived.
    pub fn finish(&self) -> Result<(), ModelError> {
        self.unfinished_before(usize::MAX)
    }

    /// Fails naming the first tensor of a shard before `shard` that has not
    /// arrived whole.
    pub fn unfinished_before(&self, shard: usize) -> Result<(), ModelError> {
        match self.ckpt.jobs.get(self.next) {
            Some(job) if job.shard < shard => Err(ModelError::Truncated(format!(
                "shard {} ended after {} bytes; tensor `{}` needs bytes up to {}",
                job.shard,
                if job.shard == self.shard { self.pos } else { 0 },
                job.hf_name,
                job.end
            ))),
            _ => Ok(()),
        }
    }
}
