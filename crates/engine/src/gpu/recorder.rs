//! The command recorder: the one way kernels reach the GPU.
//!
//! A step (one prefill chunk or one decode step, for one sequence or a batch)
//! is recorded into one command encoder and submitted once. Each dispatch's
//! parameters go into the next slot of a uniform arena, a single buffer written
//! with one `queue.write_buffer` just before the submit, and are bound through a
//! dynamic offset. Bind groups are therefore keyed by (pipeline, buffers) alone,
//! and a decode step that binds what the last one bound creates nothing.
//!
//! All recording happens inside a validation error scope: a binding of the
//! wrong size, a shader that fails to compile or any other GPU validation error
//! comes back from `submit` as a typed error, never as a panic.

use std::sync::{Arc, MutexGuard};

use super::buffer::GpuBuffer;
use super::context::GpuContext;
use super::counters::GpuCounters;
use super::error::GpuError;
use super::params::KernelParams;
use super::pipeline::{
    CachedPipeline, CompileCheck, KernelSpec, OwnedSpec, VariantKey, MAX_STORAGE_BINDINGS,
    PARAMS_BYTES,
};
use super::pipeline_batch::PendingSet;
use super::profile_timer::StepTimer;
use super::uniform_arena::UniformArena;

/// What `submit_indexed` submitted.
#[derive(Default)]
pub struct Submitted {
    /// None for a compile-only recorder.
    pub index: Option<wgpu::SubmissionIndex>,
    /// Seconds inside the driver's submit call. Software adapters (lavapipe)
    /// run the whole submission there, so callers timing the CPU's share of
    /// a step leave it out.
    pub driver_seconds: f64,
}

pub struct Recorder<'c> {
    ctx: &'c GpuContext,
    arena: MutexGuard<'c, UniformArena>,
    encoder: wgpu::CommandEncoder,
    pass: Option<wgpu::ComputePass<'static>>,
    slots: usize,
    dispatches: u64,
    /// Bytes the dispatches read and write, as their ops count them.
    bytes_moved: u64,
    scope: Option<wgpu::ErrorScopeGuard>,
    compile_checks: Vec<(String, CompileCheck)>,
    first_error: Option<GpuError>,
    /// Creates pipelines and bind groups but records and submits no work.
    compile_only: bool,
    /// Set by `collect_pipelines`: dispatches only note the pipelines they
    /// would create.
    collecting: Option<PendingSet>,
    /// Timestamps per dispatch, while the context profiles.
    timer: Option<StepTimer>,
}

impl<'c> Recorder<'c> {
    /// Starts a step. Only one recorder records at a time per context (the
    /// engine is single-threaded, on the web and natively).
    pub fn new(ctx: &'c GpuContext) -> Recorder<'c> {
        let mut arena = ctx.arena.lock().unwrap_or_else(|e| e.into_inner());
        arena.staging.clear();
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let encoder = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("step"),
            });
        Recorder {
            ctx,
            arena,
            encoder,
            pass: None,
            slots: 0,
            dispatches: 0,
            bytes_moved: 0,
            scope: Some(scope),
            compile_checks: Vec::new(),
            first_error: None,
            compile_only: false,
            collecting: None,
            timer: ctx.profiling().then(|| StepTimer::new(ctx)),
        }
    }

    /// A recorder that only prepares: every dispatch creates its pipeline
    /// and bind group as a real one would, but nothing is recorded, and
    /// `submit` submits nothing (it still reports compile and validation
    /// errors). Loading a model records its steps through one, so the first
    /// generation compiles nothing.
    pub fn compile_only(ctx: &'c GpuContext) -> Recorder<'c> {
        Recorder {
            compile_only: true,
            timer: None,
            ..Recorder::new(ctx)
        }
    }

    /// A recorder that only notes which pipelines the dispatches recorded
    /// into it need and the context lacks (`into_pending`): nothing is
    /// created, recorded or submitted. Loading creates those on several
    /// threads (`gpu::pipeline_batch`) before preparing its steps, or in
    /// the browser while the weights download.
    pub(crate) fn collect_pipelines(ctx: &'c GpuContext) -> Recorder<'c> {
        Recorder {
            collecting: Some(PendingSet::default()),
            ..Recorder::compile_only(ctx)
        }
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    /// As `collect_pipelines`, noting the pipelines the context has
    /// already created too.
    pub(crate) fn collect_all_pipelines(ctx: &'c GpuContext) -> Recorder<'c> {
        Recorder {
            collecting: Some(PendingSet::with_cached()),
            ..Recorder::compile_only(ctx)
        }
    }

    /// What a `collect_pipelines` recorder noted (empty for any other), or
    /// the first error met while noting it (a kernel whose WGSL does not
    /// assemble).
    pub(crate) fn into_pending(mut self) -> Result<PendingSet, GpuError> {
        match self.first_error.take() {
            Some(e) => Err(e),
            None => Ok(self.collecting.take().unwrap_or_default()),
        }
    }

    pub fn ctx(&self) -> &'c GpuContext {
        self.ctx
    }

    /// Dispatches recorded so far in this step.
    pub fn dispatches(&self) -> u64 {
        self.dispatches
    }

    /// Counts `bytes` of device memory an op's dispatches read or write:
    /// each tensor it binds, once, over the range its shapes say it
    /// touches (a matrix-vector product: the whole matrix, x and out). Ops
    /// call it after their checks; it sums into `GpuCounters::bytes_moved`
    /// at the submit.
    pub fn moved(&mut self, bytes: u64) {
        self.bytes_moved += bytes;
    }

    /// Records one dispatch of `spec` with parameter block `params` (at most
    /// 256 bytes; its `KernelParams::WGSL` is the kernel's `Params` struct)
    /// and storage buffers bound at 1.. in order.
    pub fn dispatch<P: KernelParams>(
        &mut self,
        spec: &KernelSpec,
        params: &P,
        buffers: &[&GpuBuffer],
        workgroups: [u32; 3],
    ) {
        debug_assert_eq!(
            buffers.len(),
            spec.storage.len(),
            "{}: binding count",
            spec.name
        );
        let ctx = self.ctx;
        if let Some(pending) = &mut self.collecting {
            // As dispatch_with: an empty dispatch needs no pipeline.
            if !workgroups.contains(&0) {
                if let Err(e) = pending.add_spec(ctx, spec, P::WGSL) {
                    self.first_error.get_or_insert(e);
                }
            }
            return;
        }
        self.dispatch_with(params, buffers, workgroups, None, spec.name, || {
            ctx.pipeline(spec, P::WGSL)
        });
    }

    /// As `dispatch`, for a generated variant: `make` builds its spec only
    /// the first time `key` is seen, so the steady state allocates nothing.
    pub fn dispatch_variant<P: KernelParams>(
        &mut self,
        key: &VariantKey,
        make: impl FnOnce() -> OwnedSpec,
        params: &P,
        buffers: &[&GpuBuffer],
        workgroups: [u32; 3],
    ) {
        self.dispatch_variant_windowed(key, make, params, buffers, workgroups, None);
    }

    /// As `dispatch_variant`, placing the variant's one `UniformWindow`
    /// binding `window_offset` bytes into its buffer (a multiple of the
    /// adapter's `min_uniform_buffer_offset_alignment`, the window inside
    /// the buffer: `uniform_window` gives its size).
    pub fn dispatch_variant_windowed<P: KernelParams>(
        &mut self,
        key: &VariantKey,
        make: impl FnOnce() -> OwnedSpec,
        params: &P,
        buffers: &[&GpuBuffer],
        workgroups: [u32; 3],
        window_offset: Option<u32>,
    ) {
        let ctx = self.ctx;
        if let Some(pending) = &mut self.collecting {
            if !workgroups.contains(&0) {
                if let Err(e) = pending.add_variant(ctx, key, make, P::WGSL) {
                    self.first_error.get_or_insert(e);
                }
            }
            return;
        }
        self.dispatch_with(
            params,
            buffers,
            workgroups,
            window_offset,
            key.family,
            || ctx.variant_pipeline(key, make, P::WGSL),
        );
    }

    /// Bytes of `buffer` a `UniformWindow` binding shows at once.
    pub fn uniform_window(&self, buffer: &GpuBuffer) -> u64 {
        buffer
            .size()
            .min(self.ctx.limits.max_uniform_buffer_binding_size)
    }

    fn dispatch_with<P: bytemuck::Pod>(
        &mut self,
        params: &P,
        buffers: &[&GpuBuffer],
        workgroups: [u32; 3],
        window_offset: Option<u32>,
        name: &str,
        pipeline: impl FnOnce() -> Result<(Arc<CachedPipeline>, Option<CompileCheck>), GpuError>,
    ) {
        let bytes = bytemuck::bytes_of(params);
        assert!(
            bytes.len() as u64 <= PARAMS_BYTES,
            "{name}: params over 256 bytes"
        );
        assert!(
            buffers.len() <= MAX_STORAGE_BINDINGS,
            "{name}: more storage bindings than a bind group key holds"
        );
        if self.slots == self.arena.capacity {
            self.first_error.get_or_insert(GpuError::UniformArenaFull {
                needed: self.slots + 1,
                capacity: self.arena.capacity,
            });
            return;
        }
        if workgroups.contains(&0) {
            return; // nothing to do; an empty dispatch is legal but wasteful
        }
        let offset = self.slots as u64 * self.arena.stride;
        self.arena.staging.resize(offset as usize, 0);
        self.arena.staging.extend_from_slice(bytes);
        self.slots += 1;

        let (pipeline, check) = match pipeline() {
            Ok(made) => made,
            Err(e) => {
                // Reported by `submit`, as a compile error is.
                self.first_error.get_or_insert(e);
                return;
            }
        };
        if let Some(check) = check {
            self.compile_checks.push((pipeline.name.clone(), check));
        }
        let group = self.ctx.bind_group(&pipeline, buffers, &self.arena.buffer);
        if self.compile_only {
            return;
        }
        if let Some(timer) = &mut self.timer {
            // A pass of its own, timed at both ends.
            self.pass = None;
            self.pass = Some(
                self.encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(name),
                        timestamp_writes: timer.writes(name),
                    })
                    .forget_lifetime(),
            );
        }
        let pass = self.pass.get_or_insert_with(|| {
            self.encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("step"),
                    timestamp_writes: None,
                })
                .forget_lifetime()
        });
        pass.set_pipeline(&pipeline.pipeline);
        match window_offset {
            Some(window) => pass.set_bind_group(0, &group, &[offset as u32, window]),
            None => pass.set_bind_group(0, &group, &[offset as u32]),
        }
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
        self.dispatches += 1;
    }

    /// Records a buffer-to-buffer copy (ends the open compute pass).
    pub fn copy_buffer(
        &mut self,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        len: u64,
    ) {
        if self.compile_only {
            return;
        }
        self.pass = None;
        self.encoder
            .copy_buffer_to_buffer(src, src_offset, dst, dst_offset, len);
    }

    /// Finishes the step: writes the parameter blocks, submits the one command
    /// buffer, and reports any validation or shader-compile error raised while
    /// recording.
    pub async fn submit(self) -> Result<(), GpuError> {
        self.submit_indexed().await.map(|_| ())
    }

    /// As `submit`, saying which submission it made, so that a reader can
    /// wait for it and not for any made after it.
    pub async fn submit_indexed(mut self) -> Result<Submitted, GpuError> {
        self.ctx.check_alive()?;
        self.pass = None;
        if let Some(timer) = &self.timer {
            timer.resolve(&mut self.encoder);
        }
        let ctx = self.ctx;
        if !self.arena.staging.is_empty() && !self.compile_only {
            ctx.queue
                .write_buffer(&self.arena.buffer, 0, &self.arena.staging);
        }
        let encoder = std::mem::replace(
            &mut self.encoder,
            ctx.device.create_command_encoder(&Default::default()),
        );
        let commands = encoder.finish();
        for (name, check) in self.compile_checks.drain(..) {
            if let Some(e) = check.await {
                ctx.pipelines.forget(&name);
                self.first_error.get_or_insert(GpuError::ShaderCompile {
                    kernel: name,
                    message: e.to_string(),
                });
            }
        }
        let scope = self.scope.take().expect("scope popped once");
        if let Some(e) = self.first_error.take() {
            drop(scope.pop());
            return Err(e);
        }
        if self.compile_only {
            return match scope.pop().await {
                Some(e) => Err(GpuError::Validation {
                    what: "preparing a step".into(),
                    message: e.to_string(),
                }),
                None => Ok(Submitted::default()),
            };
        }
        let driver = web_time::Instant::now();
        let index = ctx.queue.submit([commands]);
        let driver_seconds = driver.elapsed().as_secs_f64();
        if let Some(e) = scope.pop().await {
            // A lost device fails validation too; say the cause.
            ctx.lost_cause()?;
            return Err(GpuError::Validation {
                what: "a step".into(),
                message: e.to_string(),
            });
        }
        GpuCounters::add(&ctx.counters.submits, 1);
        GpuCounters::add(&ctx.counters.dispatches, self.dispatches);
        GpuCounters::add(&ctx.counters.bytes_moved, self.bytes_moved);
        if let Some(timer) = self.timer.take() {
            timer.collect(ctx, index.clone());
        }
        Ok(Submitted {
            index: Some(index),
            driver_seconds,
        })
    }
}
