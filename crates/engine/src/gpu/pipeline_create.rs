//! Making a kernel's pipeline on this context the first time a recorder
//! dispatches it (`pipeline_batch.rs` makes many side by side ahead of
//! time). The layout every kernel shares is explicit: see `pipeline.rs`.

use std::sync::Arc;

use super::context::GpuContext;
use super::counters::GpuCounters;
use super::error::GpuError;
use super::pipeline::{
    kernel_source, Access, CachedPipeline, CompileCheck, KernelSpec, OwnedSpec, VariantKey,
};
use super::weight_store::WeightStore;

impl GpuContext {
    /// The pipeline of a variant, building its spec only when the variant is new.
    pub(crate) fn variant_pipeline(
        &self,
        key: &VariantKey,
        make: impl FnOnce() -> OwnedSpec,
        params_wgsl: &str,
    ) -> Result<(Arc<CachedPipeline>, Option<CompileCheck>), GpuError> {
        if let Some(p) = self.pipelines.get_variant(key) {
            return Ok((p, None));
        }
        let owned = make();
        let (pipeline, check) = self.pipeline(&owned.spec(), params_wgsl)?;
        self.pipelines.insert(Some(*key), pipeline.clone());
        Ok((pipeline, check))
    }

    /// The cached pipeline for `spec`, created if needed (its WGSL led by
    /// `params_wgsl`, the dispatch's `KernelParams::WGSL`); a new pipeline
    /// comes with the future of its compile/validation errors. A spec whose
    /// WGSL does not assemble is the error, and nothing is cached.
    pub(crate) fn pipeline(
        &self,
        spec: &KernelSpec,
        params_wgsl: &str,
    ) -> Result<(Arc<CachedPipeline>, Option<CompileCheck>), GpuError> {
        if let Some(p) = self.pipelines.get(spec.name) {
            return Ok((p, None));
        }
        let source = kernel_source(params_wgsl, spec, self.weight_store)?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let created = Arc::new(create_from_source(
            self,
            spec.name,
            &source,
            spec.entry,
            spec.storage,
        ));
        let check: CompileCheck = Box::pin(scope.pop());
        GpuCounters::add(&self.counters.pipelines_created, 1);
        self.pipelines.insert(None, created.clone());
        Ok((created, Some(check)))
    }
}

/// A pipeline from its WGSL text (`kernel_source`), entry point and storage
/// bindings, with the explicit layout every kernel shares.
pub(crate) fn create_from_source(
    ctx: &GpuContext,
    name: &str,
    source: &str,
    entry: &str,
    storage: &[Access],
) -> CachedPipeline {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let device = &ctx.device;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(name),
        source: wgpu::ShaderSource::Wgsl(std::borrow::Cow::Borrowed(source)),
    });
    let entries = layout_entries(ctx, storage);
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(name),
        entries: &entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(name),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(name),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    });
    CachedPipeline {
        id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        name: name.to_string(),
        pipeline,
        layout,
        access: storage.to_vec(),
    }
}

/// The bind group layout every kernel has, for a kernel binding `storage`
/// from binding 1: binding 0 its parameter block.
pub(crate) fn layout_entries(
    ctx: &GpuContext,
    storage: &[Access],
) -> Vec<wgpu::BindGroupLayoutEntry> {
    let mut entries = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: None,
        },
        count: None,
    }];
    for (i, &access) in storage.iter().enumerate() {
        let texture = access == Access::Weights && ctx.weight_store == WeightStore::Textures;
        let ty = if texture {
            wgpu::BindingType::Texture {
                sample_type: wgpu::TextureSampleType::Uint,
                view_dimension: wgpu::TextureViewDimension::D2,
                multisampled: false,
            }
        } else if matches!(access, Access::Uniform | Access::UniformWindow) {
            wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: access == Access::UniformWindow,
                min_binding_size: None,
            }
        } else {
            wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: access != Access::ReadWrite,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            }
        };
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty,
            count: None,
        });
    }
    entries
}
