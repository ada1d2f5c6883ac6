//! Reading results back from the GPU.
//!
//! A `Readback` owns a preallocated map-readable staging buffer, so the decode
//! loop reads the sampled token (or a logits row) without creating a buffer per
//! token. `GpuContext::read_*` are the convenient, allocating forms for tests.

use super::buffer::GpuBuffer;
use super::context::GpuContext;
use super::counters::GpuCounters;
use super::error::GpuError;
use super::recorder::Recorder;
use super::residency::Tracked;

pub struct Readback {
    staging: wgpu::Buffer,
    _live: Tracked,
}

/// The size of the staging buffer `Readback::new` makes for `capacity`
/// bytes (the memory preflight counts with it).
pub fn readback_size(capacity: u64) -> u64 {
    capacity.max(4).next_multiple_of(4)
}

impl Readback {
    pub fn new(ctx: &GpuContext, label: &str, capacity: u64) -> Readback {
        GpuCounters::add(&ctx.counters.buffers_created, 1);
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: readback_size(capacity),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Readback {
            _live: ctx.residency.track(staging.size()),
            staging,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.staging.size()
    }

    /// Records a copy of `len` bytes of `src` at `offset` into the staging
    /// buffer; read it with `read` after the recorder is submitted.
    pub fn record_copy(
        &self,
        rec: &mut Recorder,
        src: &GpuBuffer,
        offset: u64,
        len: u64,
    ) -> Result<(), GpuError> {
        self.record_copy_to(rec, src, offset, len, 0)
    }

    /// As `record_copy`, into the staging buffer at `dst_offset`.
    pub fn record_copy_to(
        &self,
        rec: &mut Recorder,
        src: &GpuBuffer,
        offset: u64,
        len: u64,
        dst_offset: u64,
    ) -> Result<(), GpuError> {
        let fits = dst_offset + len <= self.capacity() && offset + len <= src.size();
        if !fits || (len | offset | dst_offset) % 4 != 0 {
            return Err(GpuError::Readback(format!(
                "copy of {len} bytes at {offset} from '{}' ({} bytes) into a {}-byte readback",
                src.label(),
                src.size(),
                self.capacity()
            )));
        }
        let Some(raw) = src.raw() else {
            return Err(GpuError::Readback(format!(
                "'{}' is a weight texture, which is never read back",
                src.label()
            )));
        };
        rec.copy_buffer(raw, offset, &self.staging, dst_offset, len);
        Ok(())
    }

    /// Maps the staging buffer and copies out its first `len` bytes.
    pub async fn read(&self, ctx: &GpuContext, len: u64) -> Result<Vec<u8>, GpuError> {
        self.read_after(ctx, len, None).await
    }

    /// As `read`, waiting natively only for submission `after` (the one that
    /// filled the buffer), not for work submitted since.
    pub async fn read_after(
        &self,
        ctx: &GpuContext,
        len: u64,
        after: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>, GpuError> {
        let slice = self.staging.slice(0..len.max(4));
        let (sender, receiver) = futures_channel::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |result| {
            let _ = sender.send(result);
        });
        ctx.wait_for(after);
        // A mapping fails when the device is gone: report that cause.
        let failed = |message: String| match ctx.lost_cause() {
            Err(lost) => lost,
            Ok(()) => GpuError::Readback(message),
        };
        receiver
            .await
            .map_err(|_| failed("map callback dropped".into()))?
            .map_err(|e| failed(e.to_string()))?;
        let bytes = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            view[..len as usize].to_vec()
        };
        self.staging.unmap();
        GpuCounters::add(&ctx.counters.bytes_read_back, len);
        Ok(bytes)
    }
}

impl GpuContext {
    /// Reads `len` bytes of `src` at `offset` (allocates a staging buffer:
    /// for tests and one-off reads, not for the decode loop).
    pub async fn read_bytes(
        &self,
        src: &GpuBuffer,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, GpuError> {
        let readback = Readback::new(self, "readback", len);
        let mut rec = Recorder::new(self);
        readback.record_copy(&mut rec, src, offset, len)?;
        rec.submit().await?;
        readback.read(self, len).await
    }

    /// Reads `count` f32 values starting at element `first`.
    pub async fn read_f32(
        &self,
        src: &GpuBuffer,
        first: usize,
        count: usize,
    ) -> Result<Vec<f32>, GpuError> {
        let bytes = self
            .read_bytes(src, first as u64 * 4, count as u64 * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    pub async fn read_u32(
        &self,
        src: &GpuBuffer,
        first: usize,
        count: usize,
    ) -> Result<Vec<u32>, GpuError> {
        let bytes = self
            .read_bytes(src, first as u64 * 4, count as u64 * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
