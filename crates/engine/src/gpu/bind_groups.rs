//! A dispatch's bind group: made the first time a pipeline binds those
//! buffers together, then found in the residency's cache (`residency.rs`,
//! which evicts it when one of its buffers drops).

use super::buffer::GpuBuffer;
use super::context::GpuContext;
use super::counters::GpuCounters;
use super::pipeline::{Access, CachedPipeline, MAX_STORAGE_BINDINGS, PARAMS_BYTES};

impl GpuContext {
    /// The bind group of `pipeline` over `buffers` (binding 0: the uniform
    /// arena), created the first time those buffers are bound together.
    pub(crate) fn bind_group(
        &self,
        pipeline: &CachedPipeline,
        buffers: &[&GpuBuffer],
        uniform: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        let mut ids = [0; MAX_STORAGE_BINDINGS];
        for (id, b) in ids.iter_mut().zip(buffers) {
            *id = b.id();
        }
        let key = (pipeline.id, ids);
        if let Some(group) = self.residency.cached_bind_group(&key) {
            return group;
        }
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: uniform,
                offset: 0,
                size: wgpu::BufferSize::new(PARAMS_BYTES),
            }),
        }];
        let max_uniform = self.limits.max_uniform_buffer_binding_size;
        for (i, b) in buffers.iter().enumerate() {
            let resource = match (pipeline.access.get(i), b.raw()) {
                // As many of its first bytes as a uniform binding holds:
                // the shader's array says how many it reads, and the kernel
                // chose the uniform only where they fit (a window: as many
                // bytes, from the offset each dispatch gives).
                (Some(Access::Uniform | Access::UniformWindow), Some(raw)) => {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: raw,
                        offset: 0,
                        size: wgpu::BufferSize::new(b.size().min(max_uniform)),
                    })
                }
                _ => b.binding(),
            };
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource,
            });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&pipeline.name),
            layout: &pipeline.layout,
            entries: &entries,
        });
        GpuCounters::add(&self.counters.bind_groups_created, 1);
        self.residency
            .cache_bind_group(key, buffers.len(), group.clone());
        group
    }
}
