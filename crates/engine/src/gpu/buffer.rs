//! GPU buffers with stable identities.
//!
//! Bind groups are cached by the identities of the buffers they bind, so a
//! decode step that binds the same buffers as the last one creates nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::context::{GpuContext, GpuCounters};
use super::error::GpuError;
use super::fault::scoped_oom;
use super::residency::Tracked;

static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// A storage buffer and its identity. Shared with `Arc` between the model
/// (weights), the pipeline (activations, KV cache) and the bind-group cache.
#[derive(Debug)]
pub struct GpuBuffer {
    id: u64,
    label: String,
    raw: wgpu::Buffer,
    live: Tracked,
}

impl Drop for GpuBuffer {
    /// Cached bind groups that bind this buffer would keep it alive in wgpu:
    /// they go with it.
    fn drop(&mut self) {
        self.live.residency().evict(self.id);
    }
}

pub type BufferRef = Arc<GpuBuffer>;

impl GpuBuffer {
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn size(&self) -> u64 {
        self.raw.size()
    }
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.raw
    }
}

/// The size of the buffer `create_storage(size)` or `upload_bytes` of `size`
/// bytes makes: whole words, never empty (the memory preflight counts with it).
pub fn storage_size(size: u64) -> u64 {
    size.max(4).next_multiple_of(4)
}

/// Usage of every storage buffer: kernels read and write it, and it can be
/// copied to and from (uploads, readback, tests).
const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl GpuContext {
    fn check_buffer_size(&self, label: &str, size: u64) -> Result<(), GpuError> {
        let checks = [
            (
                "max_storage_buffer_binding_size",
                self.limits.max_storage_buffer_binding_size,
            ),
            ("max_buffer_size", self.limits.max_buffer_size),
        ];
        for (limit_name, limit) in checks {
            if size > limit {
                return Err(GpuError::BufferTooLarge {
                    label: label.to_string(),
                    size,
                    limit_name,
                    limit,
                });
            }
        }
        Ok(())
    }

    // On wasm32 wgpu's buffers are neither Send nor Sync (the browser's GPU
    // objects live on one thread); the Arc shares ownership, not threads.
    #[allow(clippy::arc_with_non_send_sync)]
    fn wrap(&self, label: &str, raw: wgpu::Buffer) -> BufferRef {
        GpuCounters::add(&self.counters.buffers_created, 1);
        Arc::new(GpuBuffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            label: label.to_string(),
            live: self.residency.track(raw.size()),
            raw,
        })
    }

    /// A zero-filled storage buffer of at least `size` bytes (rounded up to 4,
    /// and never 0, so that any kernel may bind it).
    pub fn create_storage(&self, label: &str, size: u64) -> Result<BufferRef, GpuError> {
        let size = storage_size(size);
        self.check_buffer_size(label, size)?;
        let raw = scoped_oom(&self.device, label, size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: STORAGE_USAGE,
                mapped_at_creation: false,
            })
        })?;
        Ok(self.wrap(label, raw))
    }

    /// A storage buffer holding `bytes` (zero-padded to a multiple of 4).
    /// Made as wgpu's `create_buffer_init` makes it (created mapped and
    /// filled in place: no staging copy of the weights), but mapped only
    /// once the allocation is known to have happened: wgpu's own panics
    /// mapping a buffer the device could not allocate.
    pub fn upload_bytes(&self, label: &str, bytes: &[u8]) -> Result<BufferRef, GpuError> {
        let size = storage_size(bytes.len() as u64);
        self.check_buffer_size(label, size)?;
        let raw = scoped_oom(&self.device, label, size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: STORAGE_USAGE,
                mapped_at_creation: true,
            })
        })?;
        {
            // Where no scope answers at once (the browser), a buffer that
            // was not allocated shows here.
            let mut view =
                raw.slice(..)
                    .get_mapped_range_mut()
                    .map_err(|e| GpuError::OutOfMemory {
                        what: format!("mapping buffer '{label}' of {size} bytes"),
                        message: e.to_string(),
                    })?;
            let n = bytes.len();
            view.slice(..n).copy_from_slice(bytes);
            // At most 3 bytes of padding (and 4 for an empty upload).
            view.slice(n..)
                .copy_from_slice(&[0; 4][..size as usize - n]);
        }
        raw.unmap();
        Ok(self.wrap(label, raw))
    }

    pub fn upload_f32(&self, label: &str, values: &[f32]) -> Result<BufferRef, GpuError> {
        self.upload_bytes(label, bytemuck::cast_slice(values))
    }

    pub fn upload_u32(&self, label: &str, values: &[u32]) -> Result<BufferRef, GpuError> {
        self.upload_bytes(label, bytemuck::cast_slice(values))
    }

    /// Overwrites part of a buffer; ordered before the next submit.
    pub fn write(&self, buffer: &GpuBuffer, offset: u64, bytes: &[u8]) {
        self.queue.write_buffer(&buffer.raw, offset, bytes);
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::ctx;

    /// Uploads fill the buffer in place: the bytes, then zeros to the word.
    #[test]
    fn uploads_are_zero_padded_to_whole_words() {
        let ctx = ctx();
        for bytes in [&[][..], &[1, 2, 3, 4, 5][..], &[9; 8][..]] {
            let buf = ctx.upload_bytes("b", bytes).unwrap();
            let len = buf.size();
            assert_eq!(len, bytes.len().max(4).next_multiple_of(4) as u64);
            let got = pollster::block_on(ctx.read_bytes(&buf, 0, len)).unwrap();
            let mut want = bytes.to_vec();
            want.resize(len as usize, 0);
            assert_eq!(got, want);
        }
    }
}
