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
    /// for a variant, its key.
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

    /// The cached pipeline of that name.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<CachedPipeline>> {
        self.pipelines.lock().unwrap().get(name).cloned()
    }

    /// The cached pipeline of that variant.
    pub(crate) fn get_variant(&self, key: &VariantKey) -> Option<Arc<CachedPipeline>> {
        self.variants.lock().unwrap().get(key).cloned()
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
