//! The per-step parameter storage every recorder writes its dispatches'
//! parameter blocks into.

use std::sync::Arc;

use super::pipeline::PARAMS_BYTES;
use super::residency::{Residency, Tracked};

/// The per-step parameter storage: a uniform buffer of fixed slots and its CPU
/// mirror. One exists per context; a recorder holds it while it records.
pub(crate) struct UniformArena {
    pub(crate) buffer: wgpu::Buffer,
    _live: Tracked,
    pub(crate) stride: u64,
    pub(crate) capacity: usize,
    pub(crate) staging: Vec<u8>,
}

/// Slots per step: a decode step of a 30-layer model uses ~20 per layer.
const ARENA_SLOTS: usize = 8192;

impl UniformArena {
    pub(crate) fn new(
        device: &wgpu::Device,
        limits: &wgpu::Limits,
        residency: &Arc<Residency>,
    ) -> UniformArena {
        let stride = PARAMS_BYTES.max(limits.min_uniform_buffer_offset_alignment as u64);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("uniform arena"),
            size: stride * ARENA_SLOTS as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        UniformArena {
            _live: residency.track(buffer.size()),
            buffer,
            stride,
            capacity: ARENA_SLOTS,
            staging: Vec::with_capacity(stride as usize * 64),
        }
    }
}
