//! GPU time per kernel family from timestamp queries (`wick bench --profile`).
//!
//! While a context profiles, every recorder gives each dispatch its own
//! compute pass with timestamps written at its start and end, resolves them
//! after the submit, waits for them and adds each dispatch's time to its
//! kernel family (the variant family or the kernel name). A pass per
//! dispatch costs something itself, so a profiled step is slower than an
//! unprofiled one: read the shares, not the sum. Native only: the browser
//! has no blocking wait.

use super::context::GpuContext;
use super::error::GpuError;
use super::profile::Profile;
use super::residency::Tracked;

/// Dispatches timed per submit; later ones in the same submit go untimed
/// (and are counted as such). WebGPU caps a query set at 4096 queries.
const MAX_TIMED: usize = 2048;

/// The timestamps of one recorder's dispatches.
pub(crate) struct StepTimer {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// The two buffers, counted as live while the timer lives.
    _live: [Tracked; 2],
    names: Vec<String>,
    untimed: u64,
}

impl StepTimer {
    pub(crate) fn new(ctx: &GpuContext) -> StepTimer {
        let queries = 2 * MAX_TIMED as u64;
        let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count: queries as u32,
        });
        let buffer = |label, usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: queries * 8,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let track = || ctx.residency.track(queries * 8);
        StepTimer {
            set,
            resolve: buffer("profile resolve", U::QUERY_RESOLVE | U::COPY_SRC),
            read: buffer("profile read", U::MAP_READ | U::COPY_DST),
            _live: [track(), track()],
            names: Vec::new(),
            untimed: 0,
        }
    }

    /// The timestamp writes for the pass of the next dispatch, of kernel
    /// family `name`; `None` once the query set is full.
    pub(crate) fn writes(&mut self, name: &str) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        if self.names.len() == MAX_TIMED {
            self.untimed += 1;
            return None;
        }
        let i = 2 * self.names.len() as u32;
        self.names.push(name.to_string());
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(i),
            end_of_pass_write_index: Some(i + 1),
        })
    }

    /// Records the copy of the timestamps to a readable buffer.
    pub(crate) fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        let n = 2 * self.names.len() as u32;
        if n > 0 {
            encoder.resolve_query_set(&self.set, 0..n, &self.resolve, 0);
            encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, n as u64 * 8);
        }
    }

    /// Waits for `submission` and adds its dispatches' times to the
    /// context's profile.
    pub(crate) fn collect(self, ctx: &GpuContext, submission: wgpu::SubmissionIndex) {
        let n = self.names.len();
        let mut times = vec![0u64; 2 * n];
        let mut read = true;
        if n > 0 {
            let slice = self.read.slice(..(2 * n as u64 * 8));
            slice.map_async(wgpu::MapMode::Read, |_| {});
            ctx.wait_for(Some(submission));
            match slice.get_mapped_range() {
                Ok(view) => times.copy_from_slice(bytemuck::cast_slice(&view)),
                Err(_) => read = false,
            }
            self.read.unmap();
        }
        let tick = ctx.queue.get_timestamp_period() as f64 * 1e-9;
        let mut guard = ctx.profile.lock().unwrap_or_else(|e| e.into_inner());
        let Some(profile) = guard.as_mut() else {
            return;
        };
        profile.untimed_dispatches += self.untimed;
        if !read {
            profile.unread_submits += 1;
            return;
        }
        for (name, t) in self.names.into_iter().zip(times.chunks_exact(2)) {
            let family = profile.by_family.entry(name).or_default();
            family.seconds += t[1].saturating_sub(t[0]) as f64 * tick;
            family.dispatches += 1;
        }
    }
}

impl GpuContext {
    /// Starts profiling every step recorded from now on (see the module).
    pub fn start_profile(&self) -> Result<(), GpuError> {
        if cfg!(target_arch = "wasm32") || !self.features.timestamp_query {
            return Err(GpuError::Unsupported {
                what: "a kernel profile needs timestamp queries, which this adapter does not grant"
                    .into(),
            });
        }
        *self.profile.lock().unwrap_or_else(|e| e.into_inner()) = Some(Profile::default());
        Ok(())
    }

    /// Whether steps are being profiled.
    pub(crate) fn profiling(&self) -> bool {
        self.profile.lock().map(|p| p.is_some()).unwrap_or(false)
    }

    /// Stops profiling and returns what was measured.
    pub fn finish_profile(&self) -> Option<Profile> {
        self.profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
