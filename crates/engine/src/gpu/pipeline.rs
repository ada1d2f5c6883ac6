//! Compute pipelines, built once per kernel variant and cached by name.
//!
//! Every kernel has the same binding shape: binding 0 is its parameter block
//! (a uniform with a dynamic offset into the step's uniform arena), bindings
//! 1.. are storage buffers, read-only or read-write as its spec says, but
//! for weight parts, which are buffers or textures as the context keeps
//! them (`weight_store.rs`). Explicit
//! layouts (not `layout: None`) keep a binding that a variant happens not to
//! use from silently vanishing from the layout.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::context::{GpuContext, GpuCounters};
use super::error::GpuError;
use super::weight_store::WeightStore;
use super::wgsl::{assemble, Define, Flag};

/// How a kernel uses one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    ReadWrite,
    /// A weight part, read through `w_word` / `w_vec4`: a read-only storage
    /// buffer or a texture, as the context's `WeightStore` keeps weights.
    Weights,
    /// A buffer read as a uniform: its first bytes, as many as one uniform
    /// binding holds (the WGSL array's length says how many it reads).
    Uniform,
    /// A buffer read as a uniform through a window of as many bytes as
    /// `Uniform` binds, which each dispatch places with a dynamic offset
    /// (`Recorder::dispatch_variant_windowed`).
    UniformWindow,
}

/// One kernel variant: its WGSL (the concatenation of `sources`, its
/// `#if NAME` blocks resolved by `flags` and every `{{NAME}}` replaced by
/// its define: `gpu::wgsl`), entry point and storage bindings.
pub struct KernelSpec<'a> {
    /// Unique per variant: it is the cache key.
    pub name: &'a str,
    pub sources: &'a [&'static str],
    /// What each `#if NAME` of the sources tests.
    pub flags: &'a [Flag<'a>],
    /// The values of the sources' `{{NAME}}` placeholders.
    pub defines: &'a [Define<'a>],
    pub entry: &'a str,
    pub storage: &'a [Access],
}

/// A kernel variant named by plain values, so that finding its pipeline in
/// the steady state costs a hash lookup and no allocation: `family` and
/// `fmt` name the kernel and weight format, `args` whatever else selects the
/// variant (rows per workgroup, tokens, flags). Its `OwnedSpec` is built only
/// the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VariantKey {
    pub family: &'static str,
    pub fmt: &'static str,
    pub args: [u32; 6],
}

/// A `KernelSpec` that owns its generated parts.
pub struct OwnedSpec {
    pub name: String,
    pub sources: Vec<&'static str>,
    pub flags: Vec<Flag<'static>>,
    pub defines: Vec<Define<'static>>,
    pub entry: &'static str,
    pub storage: Cow<'static, [Access]>,
}

impl OwnedSpec {
    pub fn spec(&self) -> KernelSpec<'_> {
        KernelSpec {
            name: &self.name,
            sources: &self.sources,
            flags: &self.flags,
            defines: &self.defines,
            entry: self.entry,
            storage: &self.storage,
        }
    }
}

/// Most storage bindings a kernel has (WebGPU guarantees 8 per stage).
pub const MAX_STORAGE_BINDINGS: usize = 8;

/// Size of one kernel's parameter block in the uniform arena.
pub const PARAMS_BYTES: u64 = 256;

pub struct CachedPipeline {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
    /// How each binding from 1 is bound (a uniform binds a range).
    pub(crate) access: Vec<Access>,
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    pipelines: Mutex<HashMap<String, Arc<CachedPipeline>>>,
    variants: Mutex<HashMap<VariantKey, Arc<CachedPipeline>>>,
}

/// A pipeline that was just created, with the future of its compile errors.
pub(crate) type CompileCheck =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<wgpu::Error>>>>;

impl PipelineCache {
    /// Whether a pipeline of that name exists.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.pipelines.lock().unwrap().contains_key(name)
    }

    /// Whether that variant's pipeline exists.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn contains_variant(&self, key: &VariantKey) -> bool {
        self.variants.lock().unwrap().contains_key(key)
    }

    /// Caches a pipeline made elsewhere (`pipeline_batch`) by its name and,
    /// for a variant, its key, as `get_variant` would have.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn insert(&self, key: Option<VariantKey>, pipeline: Arc<CachedPipeline>) {
        if let Some(key) = key {
            self.variants.lock().unwrap().insert(key, pipeline.clone());
        }
        self.pipelines
            .lock()
            .unwrap()
            .insert(pipeline.name.clone(), pipeline);
    }

    pub(crate) fn forget(&self, name: &str) {
        self.pipelines.lock().unwrap().remove(name);
        self.variants.lock().unwrap().retain(|_, p| p.name != name);
    }

    /// The pipeline of a variant, building its spec only when the variant is new.
    pub(crate) fn get_variant(
        &self,
        ctx: &GpuContext,
        key: &VariantKey,
        make: impl FnOnce() -> OwnedSpec,
        params_wgsl: &str,
    ) -> Result<(Arc<CachedPipeline>, Option<CompileCheck>), GpuError> {
        if let Some(p) = self.variants.lock().unwrap().get(key) {
            return Ok((p.clone(), None));
        }
        let owned = make();
        let (pipeline, check) = self.get_or_create(ctx, &owned.spec(), params_wgsl)?;
        self.variants.lock().unwrap().insert(*key, pipeline.clone());
        Ok((pipeline, check))
    }

    /// Returns the cached pipeline for `spec`, creating it if needed (its
    /// WGSL led by `params_wgsl`, the dispatch's `KernelParams::WGSL`); a new
    /// pipeline comes with the future of its compile/validation errors. A
    /// spec whose WGSL does not assemble is the error, and nothing is cached.
    pub(crate) fn get_or_create(
        &self,
        ctx: &GpuContext,
        spec: &KernelSpec,
        params_wgsl: &str,
    ) -> Result<(Arc<CachedPipeline>, Option<CompileCheck>), GpuError> {
        if let Some(p) = self.pipelines.lock().unwrap().get(spec.name) {
            return Ok((p.clone(), None));
        }
        let source = kernel_source(params_wgsl, spec, ctx.weight_store)?;
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let created = Arc::new(create_from_source(
            ctx,
            spec.name,
            &source,
            spec.entry,
            spec.storage,
        ));
        let check: CompileCheck = Box::pin(scope.pop());
        GpuCounters::add(&ctx.counters.pipelines_created, 1);
        self.pipelines
            .lock()
            .unwrap()
            .insert(spec.name.to_string(), created.clone());
        Ok((created, Some(check)))
    }
}

/// The WGSL text of a spec as the adapter compiles it: its parameter
/// block's struct (`params_wgsl`, from `KernelParams::WGSL`), then the
/// sources joined, with `store`'s weight readers declared, then assembled
/// by its flags and defines (`gpu::wgsl`).
pub fn kernel_source(
    params_wgsl: &str,
    spec: &KernelSpec,
    store: WeightStore,
) -> Result<String, GpuError> {
    let mut text = String::from(params_wgsl);
    text.push('\n');
    text.push_str(&spec.sources.join("\n"));
    let text = store.declare(&text);
    assemble(&text, spec.flags, spec.defines).map_err(|source| GpuError::Assembly {
        kernel: spec.name.to_string(),
        source,
    })
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
        source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(source)),
    });
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

/// Shape of a 1-D dispatch: enough workgroups of `group` invocations to cover
/// `n` items, spread over x and y when x alone would pass the 65535 limit.
pub fn workgroups_for(n: u32, group: u32) -> [u32; 3] {
    let groups = n.div_ceil(group).max(1);
    if groups <= 65535 {
        [groups, 1, 1]
    } else {
        let y = groups.div_ceil(65535);
        [groups.div_ceil(y), y, 1]
    }
}
