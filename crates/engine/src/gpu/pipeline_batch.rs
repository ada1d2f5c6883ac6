//! Creating a model's pipelines on several threads at load (native).
//!
//! A driver does real work in `vkCreateComputePipelines`: lavapipe turns
//! the SPIR-V into NIR and optimises it there (over ten seconds for
//! SmolLM2's set on a 2-core machine, warm shader cache or not), GPU
//! drivers compile to their ISA. Done as the
//! warm-up's recording meets each kernel, that work is one thread's; wgpu's
//! device takes pipeline creation from any thread, so loading first
//! collects the pipelines its steps will use (`Recorder::collect_pipelines`)
//! and creates them here side by side. The browser keeps creating them one
//! by one as it records: wasm has no threads here.

use std::collections::HashSet;

use super::context::GpuContext;
use super::error::GpuError;
use super::pipeline::{kernel_source, Access, KernelSpec, OwnedSpec, VariantKey};
use super::pipeline_create::layout_entries;
#[cfg(not(target_arch = "wasm32"))]
use {
    super::counters::GpuCounters, super::pipeline::CachedPipeline,
    super::pipeline_create::create_from_source, std::sync::Arc,
};

/// A pipeline to create, owning all it needs, so any thread can make it.
pub struct PendingPipeline {
    name: String,
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    key: Option<VariantKey>,
    source: String,
    entry: String,
    storage: Vec<Access>,
}

impl PendingPipeline {
    /// The kernel's name (its label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its WGSL, as the context compiles it.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// Its bind group layout's entries, as the context creates them on
    /// `ctx` (`gpu::pipeline_create`): a pipeline made elsewhere from the
    /// same source, entry and layout is the same pipeline.
    pub fn layout_entries(&self, ctx: &GpuContext) -> Vec<wgpu::BindGroupLayoutEntry> {
        layout_entries(ctx, &self.storage)
    }

    fn of(
        ctx: &GpuContext,
        spec: &KernelSpec,
        key: Option<VariantKey>,
        params_wgsl: &str,
    ) -> Result<PendingPipeline, GpuError> {
        Ok(PendingPipeline {
            name: spec.name.to_string(),
            key,
            source: kernel_source(params_wgsl, spec, ctx.weight_store)?,
            entry: spec.entry.to_string(),
            storage: spec.storage.to_vec(),
        })
    }
}

/// The pipelines a recording would have created, each once.
#[derive(Default)]
pub(crate) struct PendingSet {
    list: Vec<PendingPipeline>,
    names: HashSet<String>,
    keys: HashSet<VariantKey>,
    /// Notes pipelines the cache holds too (`Pipeline::kernel_sources`).
    with_cached: bool,
}

impl PendingSet {
    /// A set that notes the pipelines the cache holds too.
    pub(crate) fn with_cached() -> PendingSet {
        PendingSet {
            with_cached: true,
            ..PendingSet::default()
        }
    }

    /// `spec`, unless `ctx` caches it or it is already pending; its WGSL is
    /// assembled now, and a kernel that does not assemble is the error.
    pub(crate) fn add_spec(
        &mut self,
        ctx: &GpuContext,
        spec: &KernelSpec,
        params_wgsl: &str,
    ) -> Result<(), GpuError> {
        if (self.with_cached || !ctx.pipelines.contains(spec.name))
            && !self.names.contains(spec.name)
        {
            let pending = PendingPipeline::of(ctx, spec, None, params_wgsl)?;
            self.names.insert(spec.name.to_string());
            self.list.push(pending);
        }
        Ok(())
    }

    /// The variant `key` (its spec built only when it is new), unless
    /// `ctx` caches it or it is already pending; as `add_spec`.
    pub(crate) fn add_variant(
        &mut self,
        ctx: &GpuContext,
        key: &VariantKey,
        make: impl FnOnce() -> OwnedSpec,
        params_wgsl: &str,
    ) -> Result<(), GpuError> {
        if (!self.with_cached && ctx.pipelines.contains_variant(key)) || !self.keys.insert(*key) {
            return Ok(());
        }
        let owned = make();
        let spec = owned.spec();
        // Another key may make the same kernel: `get_variant` then finds
        // it by name when recording.
        if self.names.contains(spec.name) {
            return Ok(());
        }
        let pending = PendingPipeline::of(ctx, &spec, Some(*key), params_wgsl)?;
        self.names.insert(spec.name.to_string());
        self.list.push(pending);
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn into_list(self) -> Vec<PendingPipeline> {
        self.list
    }

    /// Each pending pipeline's name and WGSL.
    pub(crate) fn into_sources(self) -> Vec<(String, String)> {
        self.list.into_iter().map(|p| (p.name, p.source)).collect()
    }
}

/// Creates `pending` on up to `threads` threads (at least one) and caches
/// each. Every one is attempted; the first that fails to compile or
/// validate is the error, and it is not cached (the recording that needs
/// it meets the same error again, by name).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn create_all(
    ctx: &GpuContext,
    pending: Vec<PendingPipeline>,
    threads: usize,
) -> Result<(), GpuError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<GpuError>> = Mutex::new(None);
    let work = || {
        // Error scopes are per thread: each worker opens its own.
        while let Some(p) = pending.get(next.fetch_add(1, Ordering::Relaxed)) {
            match create_checked(ctx, p) {
                Ok(pipeline) => ctx.pipelines.insert(p.key, Arc::new(pipeline)),
                Err(e) => {
                    let mut first = first_error.lock().unwrap_or_else(|e| e.into_inner());
                    first.get_or_insert(e);
                }
            }
        }
    };
    let threads = threads.clamp(1, pending.len().max(1));
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One pipeline, its compile and validation errors checked at once (the
/// native error scope's future is ready when popped).
#[cfg(not(target_arch = "wasm32"))]
fn create_checked(ctx: &GpuContext, p: &PendingPipeline) -> Result<CachedPipeline, GpuError> {
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let pipeline = create_from_source(ctx, &p.name, &p.source, &p.entry, &p.storage);
    GpuCounters::add(&ctx.counters.pipelines_created, 1);
    match pollster::block_on(scope.pop()) {
        Some(e) => Err(GpuError::ShaderCompile {
            kernel: p.name.clone(),
            message: e.to_string(),
        }),
        None => Ok(pipeline),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::gpu::params::{kernel_params, KernelParams};
    use crate::gpu::wgsl::WgslAssemblyError;
    use crate::gpu::{Access, Recorder};
    use crate::testutil::ctx;

    kernel_params! {
        /// The test kernel's block, which its WGSL does not read.
        struct Unused {
            unused: u32,
        }
    }
    const NONE: Unused = Unused { unused: 0 };

    const STORE: &str = "@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1) fn main() { o[0] = {{V}}; }";
    const STORAGE: &[Access] = &[Access::ReadWrite];

    fn spec<'a>(name: &'a str, defines: &'a [(&'a str, Cow<'a, str>)]) -> KernelSpec<'a> {
        KernelSpec {
            name,
            sources: &[STORE],
            flags: &[],
            defines,
            entry: "main",
            storage: STORAGE,
        }
    }

    /// A recording notes each missing pipeline once; `create_all` makes
    /// them on several threads and caches them by name and variant key, so
    /// recording for real creates none; a kernel that does not compile is
    /// the error, by name, and the others are still made.
    #[test]
    fn pending_pipelines_are_made_side_by_side_and_cached() {
        let ctx = ctx();
        let (one, two) = ([("V", Cow::from("1.0"))], [("V", Cow::from("2.0"))]);
        let bad = [("V", Cow::from("not_a_value"))];
        let key = VariantKey {
            family: "batch test variant",
            fmt: "f32",
            args: [7, 0, 0, 0, 0, 0],
        };
        let make = || OwnedSpec {
            name: "batch test variant 7".to_string(),
            sources: vec![STORE],
            flags: Vec::new(),
            defines: vec![("V", Cow::from("7.0"))],
            entry: "main",
            storage: STORAGE.into(),
        };
        let out = ctx.create_storage("batch test out", 4).unwrap();
        let mut rec = Recorder::collect_pipelines(ctx);
        for s in [spec("batch test one", &one), spec("batch test two", &two)] {
            rec.dispatch(&s, &NONE, &[&out], [1, 1, 1]);
        }
        rec.dispatch(&spec("batch test one", &one), &NONE, &[&out], [1, 1, 1]);
        rec.dispatch_variant(&key, make, &NONE, &[&out], [1, 1, 1]);
        rec.dispatch_variant(&key, make, &NONE, &[&out], [1, 1, 1]);
        // An empty dispatch runs nothing and needs no pipeline.
        rec.dispatch(&spec("batch test empty", &two), &NONE, &[&out], [0, 1, 1]);
        let mut pending = rec.into_pending().unwrap();
        assert_eq!(pending.len(), 3);
        pending
            .add_spec(ctx, &spec("batch test bad", &bad), Unused::WGSL)
            .unwrap();
        assert_eq!(pending.len(), 4);
        let err = create_all(ctx, pending.into_list(), 3).unwrap_err();
        assert!(
            matches!(&err, GpuError::ShaderCompile { kernel, .. } if kernel == "batch test bad"),
            "{err}"
        );
        for name in ["batch test one", "batch test two", "batch test variant 7"] {
            assert!(ctx.pipelines.contains(name), "{name} not cached");
        }
        assert!(!ctx.pipelines.contains("batch test bad"));
        assert!(!ctx.pipelines.contains("batch test empty"));
        assert!(ctx.pipelines.contains_variant(&key));
        // Cached now: a second collection notes nothing.
        let mut again = PendingSet::default();
        again
            .add_spec(ctx, &spec("batch test two", &two), Unused::WGSL)
            .unwrap();
        again.add_variant(ctx, &key, make, Unused::WGSL).unwrap();
        assert_eq!(again.len(), 0);
        let mut rec = Recorder::new(ctx);
        rec.dispatch(&spec("batch test one", &one), &NONE, &[&out], [1, 1, 1]);
        rec.dispatch_variant(&key, make, &NONE, &[&out], [1, 1, 1]);
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&out, 0, 1)).unwrap();
        assert_eq!(got, [7.0]);
    }

    /// A spec whose WGSL does not assemble (here a define for a placeholder
    /// its source lacks) is a typed error by name, whether the pipelines
    /// are collected or recorded, and no pipeline of it is made.
    #[test]
    fn a_kernel_that_does_not_assemble_is_an_error_not_a_pipeline() {
        let ctx = ctx();
        let defines = [("V", Cow::from("1.0")), ("W", Cow::from("2.0"))];
        let bad = spec("batch test unassembled", &defines);
        let out = ctx.create_storage("batch test unassembled out", 4).unwrap();
        let is_ours = |e: &GpuError| {
            matches!(e, GpuError::Assembly { kernel, source: WgslAssemblyError::UnusedDefine { name } }
                if kernel == "batch test unassembled" && name == "W")
        };
        let mut rec = Recorder::collect_pipelines(ctx);
        rec.dispatch(&bad, &NONE, &[&out], [1, 1, 1]);
        let err = rec.into_pending().err().expect("an assembly error");
        assert!(is_ours(&err), "{err}");
        let mut rec = Recorder::new(ctx);
        rec.dispatch(&bad, &NONE, &[&out], [1, 1, 1]);
        let err = pollster::block_on(rec.submit()).expect_err("an assembly error");
        assert!(is_ours(&err), "{err}");
        assert!(!ctx.pipelines.contains("batch test unassembled"));
    }

    #[test]
    fn an_empty_batch_is_nothing_to_do() {
        create_all(ctx(), Vec::new(), 4).unwrap();
    }
}
