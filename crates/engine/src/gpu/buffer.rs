//! GPU buffers with stable identities.
//!
//! Bind groups are cached by the identities of the buffers they bind, so a
//! decode step that binds the same buffers as the last one creates nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::context::GpuContext;
use super::counters::GpuCounters;
use super::error::GpuError;
use super::fault::scoped_oom;
use super::residency::Tracked;
use super::weight_store::{texture_row_bytes, WeightStore, TEXTURE_WIDTH};

static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// A storage buffer (or, for a weight part in a `WeightStore::Textures`
/// context, a texture) and its identity. Shared with `Arc` between the
/// model (weights), the pipeline (activations, KV cache) and the
/// bind-group cache.
#[derive(Debug)]
pub struct GpuBuffer {
    id: u64,
    label: String,
    memory: Memory,
    live: Tracked,
}

#[derive(Debug)]
enum Memory {
    Buffer(wgpu::Buffer),
    /// A weight part as `weight_store::WeightStore::Textures` lays it out.
    Texture {
        texture: wgpu::Texture,
        view: wgpu::TextureView,
    },
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
    /// Bytes it holds (a texture's: its texels').
    pub fn size(&self) -> u64 {
        match &self.memory {
            Memory::Buffer(b) => b.size(),
            Memory::Texture { texture, .. } => {
                let s = texture.size();
                s.width as u64 * s.height as u64 * 16
            }
        }
    }

    /// The wgpu buffer; `None` for a texture.
    pub fn raw(&self) -> Option<&wgpu::Buffer> {
        match &self.memory {
            Memory::Buffer(b) => Some(b),
            Memory::Texture { .. } => None,
        }
    }

    /// What a bind group binds: the whole buffer, or the texture's view.
    pub(crate) fn binding(&self) -> wgpu::BindingResource<'_> {
        match &self.memory {
            Memory::Buffer(b) => b.as_entire_binding(),
            Memory::Texture { view, .. } => wgpu::BindingResource::TextureView(view),
        }
    }
}

/// The size of the buffer `create_storage(size)` or `upload_bytes` of `size`
/// bytes makes: whole words, never empty (the memory preflight counts with it).
pub fn storage_size(size: u64) -> u64 {
    size.max(4).next_multiple_of(4)
}

/// Usage of every storage buffer: kernels read and write it (and read its
/// first bytes as a uniform: `Access::Uniform`), and it can be copied to
/// and from (uploads, readback, tests).
const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::UNIFORM)
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
    fn wrap(&self, label: &str, raw: wgpu::Buffer) -> BufferRef {
        self.wrap_memory(label, raw.size(), Memory::Buffer(raw))
    }

    #[allow(clippy::arc_with_non_send_sync)]
    fn wrap_memory(&self, label: &str, bytes: u64, memory: Memory) -> BufferRef {
        GpuCounters::add(&self.counters.buffers_created, 1);
        Arc::new(GpuBuffer {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            label: label.to_string(),
            live: self.residency.track(bytes),
            memory,
        })
    }

    /// A weight part of `bytes` as a texture (`WeightStore::Textures`):
    /// `TEXTURE_WIDTH` texels a row, as many rows as `part_bytes(size)`
    /// takes, zero past the data. `size` (at least `bytes.len()`) is the
    /// part's planned size with its padding.
    pub fn upload_weight_texture(
        &self,
        label: &str,
        bytes: &[u8],
        size: u64,
    ) -> Result<BufferRef, GpuError> {
        let row_bytes = texture_row_bytes();
        let total = WeightStore::Textures.part_bytes(size.max(bytes.len() as u64));
        let height = total / row_bytes;
        let max_side = self.limits.max_texture_dimension_2d as u64;
        if height > max_side {
            return Err(GpuError::BufferTooLarge {
                label: label.to_string(),
                size: total,
                limit_name: "max_texture_dimension_2d (rows of a weight texture)",
                limit: max_side * row_bytes,
            });
        }
        let extent = wgpu::Extent3d {
            width: TEXTURE_WIDTH,
            height: height as u32,
            depth_or_array_layers: 1,
        };
        let texture = scoped_oom(&self.device, label, total, || {
            self.device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: extent,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba32Uint,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            })
        })?;
        // Whole rows from the data, then the last partial row zero-padded
        // (the texture starts zeroed; rows past it stay so).
        let whole_rows = bytes.len() as u64 / row_bytes;
        let write = |first_row: u64, data: &[u8], rows: u64| {
            self.queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: first_row as u32,
                        z: 0,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                data,
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(row_bytes as u32),
                    rows_per_image: None,
                },
                wgpu::Extent3d {
                    width: TEXTURE_WIDTH,
                    height: rows as u32,
                    depth_or_array_layers: 1,
                },
            );
        };
        if whole_rows > 0 {
            write(0, &bytes[..(whole_rows * row_bytes) as usize], whole_rows);
        }
        let rest = &bytes[(whole_rows * row_bytes) as usize..];
        if !rest.is_empty() {
            let mut last = vec![0u8; row_bytes as usize];
            last[..rest.len()].copy_from_slice(rest);
            write(whole_rows, &last, 1);
        }
        let view = texture.create_view(&Default::default());
        Ok(self.wrap_memory(label, total, Memory::Texture { texture, view }))
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

    /// Overwrites part of a buffer; ordered before the next submit. A
    /// weight texture is written once, by `upload_weight_texture`: writing
    /// one later is a fault that the next submit or readback reports, as
    /// wgpu's own errors outside a step are.
    pub fn write(&self, buffer: &GpuBuffer, offset: u64, bytes: &[u8]) {
        match buffer.raw() {
            Some(raw) => self.queue.write_buffer(raw, offset, bytes),
            None => self.record_fault(GpuError::Validation {
                what: format!("writing {} bytes to '{}'", bytes.len(), buffer.label()),
                message: "it is a weight texture, written only at upload".into(),
            }),
        }
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
