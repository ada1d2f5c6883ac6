//! Memory preflight: before the first upload, what the model will hold on
//! the GPU (weights in their GPU layout, KV cache, activations, readback and
//! sampler buffers; `footprint.rs`) against what the adapter offers: the
//! largest buffer and binding, and the device memory where the adapter
//! reports it (Vulkan natively; WebGPU reports none, and then only the
//! limits are checked). A model that cannot fit, or a context length beyond
//! the largest that fits, is refused with the numbers before a byte is
//! uploaded, instead of failing part way through the upload.

pub mod footprint;

use crate::format::quant::GgmlType;
use crate::gpu::GpuContext;
use crate::kernels::attention::kv::KvDtype;
use crate::model::loader::Need;
use crate::model::Plan;
use crate::pipeline::kv_cache::KvCache;
use crate::pipeline::PipelineOptions;
use crate::WickError;

pub use footprint::Footprint;

/// The default context when none is asked for: the model's training
/// context, capped here (as `Pipeline::new` caps it).
const DEFAULT_CTX_CAP: usize = 4096;

/// Where the memory a model may take comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    /// The adapter's largest device-local heap (Vulkan).
    Device,
    /// `PipelineOptions::memory_budget`.
    Budget,
}

/// Memory the model may take, where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub source: MemorySource,
    /// What the engine already holds on this context (other models, the
    /// uniform arena), taken off `bytes`.
    pub in_use: u64,
}

impl MemoryLimit {
    pub fn available(&self) -> u64 {
        self.bytes.saturating_sub(self.in_use)
    }
}

/// A model, or a context length, that does not fit the adapter: the
/// preflight's report, whose fields it derefs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoesNotFit(pub Report);

impl std::ops::Deref for DoesNotFit {
    type Target = Report;
    fn deref(&self) -> &Report {
        &self.0
    }
}

/// What the preflight settled: the context to allocate and its footprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    pub ctx_len: usize,
    pub footprint: Footprint,
    pub largest_ctx: usize,
}

/// Everything the preflight measured, whether the model fits or not: what
/// `check` decides from, and what a page's preflight reports before any
/// download (`engine::preflight`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub adapter: String,
    /// The context length to allocate: the one asked for, or by default the
    /// training context capped at 4096 and at the largest that fits.
    pub ctx_len: usize,
    pub kv_dtype: KvDtype,
    /// What that context needs, by category.
    pub needed: Footprint,
    /// Bytes of the K (or V) cache buffer, one binding.
    pub kv_buffer: u64,
    pub max_binding: u64,
    pub max_buffer: u64,
    /// `None`: the adapter reports no device memory (the browser) and no
    /// budget was given, so only the buffer limits are checked.
    pub memory: Option<MemoryLimit>,
    /// The largest context that fits (0: none, the weights alone do not).
    pub largest_ctx: usize,
    /// The largest context whose K (or V) cache fits one binding.
    pub largest_ctx_by_binding: usize,
}

impl Report {
    pub fn fits(&self) -> bool {
        self.ctx_len <= self.largest_ctx
    }

    /// The settled fit, or the refusal with the numbers.
    pub fn fit(&self) -> Result<Fit, WickError> {
        if self.fits() {
            return Ok(Fit {
                ctx_len: self.ctx_len,
                footprint: self.needed,
                largest_ctx: self.largest_ctx,
            });
        }
        Err(WickError::DoesNotFit(Box::new(DoesNotFit(self.clone()))))
    }
}

/// Checks that `plan` with `needs` (each need with its stored type) fits the
/// adapter under `opts`; returns the context length to allocate (the one
/// asked for, or by default the training context capped at 4096 and at the
/// largest that fits).
pub fn check(
    ctx: &GpuContext,
    plan: &Plan,
    needs: &[(GgmlType, &Need)],
    opts: &PipelineOptions,
) -> Result<Fit, WickError> {
    report(ctx, plan, needs, opts)?.fit()
}

/// Measures `plan` with `needs` against the adapter under `opts`. Errors
/// only where no context is measurable: a buffer over a limit whatever the
/// context (a weight row, an activation), or a context length of 0.
pub fn report(
    ctx: &GpuContext,
    plan: &Plan,
    needs: &[(GgmlType, &Need)],
    opts: &PipelineOptions,
) -> Result<Report, WickError> {
    let cfg = &plan.config;
    let weights = footprint::weights_bytes(ctx, &plan.fusions, needs)?;
    let memory = opts
        .memory_budget
        .map(|bytes| (bytes, MemorySource::Budget))
        .or(ctx.device_memory.map(|bytes| (bytes, MemorySource::Device)))
        .map(|(bytes, source)| MemoryLimit {
            bytes,
            source,
            in_use: ctx.live_memory().bytes,
        });
    let fits = |n: usize| {
        footprint::footprint(ctx, cfg, opts, weights, n)
            .is_ok_and(|f| memory.is_none_or(|m| f.total() <= m.available()))
    };
    let by_binding = KvCache::max_ctx_len(ctx, cfg, opts.kv_dtype);
    let largest_ctx = largest(by_binding, fits);
    let ctx_len = match opts.ctx_len {
        Some(n) => n,
        None => {
            let default = cfg.ctx_train.min(DEFAULT_CTX_CAP).min(by_binding.max(1));
            match largest_ctx {
                // Nothing fits: the refusal names the context it would take.
                0 => default,
                largest => default.min(largest),
            }
        }
    };
    if ctx_len == 0 {
        // As `Pipeline::new` refuses it, but before the upload.
        return Err(WickError::InvalidOption(
            "context length must be > 0".into(),
        ));
    }
    // Fails only for a buffer over a limit whatever the context (an
    // activation), or a context too large to size at all: refused as that
    // buffer, with its size and the limit.
    let needed = footprint::footprint(ctx, cfg, opts, weights, ctx_len)?;
    Ok(Report {
        adapter: ctx.adapter.name.clone(),
        ctx_len,
        kv_dtype: opts.kv_dtype,
        needed,
        kv_buffer: needed.kv_cache / 2,
        max_binding: ctx.max_binding_bytes(),
        max_buffer: ctx.limits.max_buffer_size,
        memory,
        largest_ctx,
        largest_ctx_by_binding: by_binding,
    })
}

/// The largest `n` in `1..=cap` with `fits(n)` (which holds up to some `n`
/// and not past it), or 0.
fn largest(cap: usize, fits: impl Fn(usize) -> bool) -> usize {
    if cap == 0 || !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1, cap); // fits(lo) holds
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Bytes as a person reads them: GiB, MiB or KiB with two decimals.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 3] = [
        ("GiB", (1u64 << 30) as f64),
        ("MiB", (1u64 << 20) as f64),
        ("KiB", 1024.0),
    ];
    match UNITS.iter().find(|(_, size)| bytes as f64 >= *size) {
        Some((unit, size)) => format!("{:.2} {unit}", bytes as f64 / size),
        None => format!("{bytes} B"),
    }
}

impl std::fmt::Display for DoesNotFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h = human_bytes;
        let n = &self.needed;
        write!(
            f,
            "the model does not fit the adapter '{}' with a context of {} positions: it needs {} \
             (weights {}, KV cache {} in {}, activations {}, readback {}, sampler {})",
            self.adapter,
            self.ctx_len,
            h(n.total()),
            h(n.weights),
            h(n.kv_cache),
            self.kv_dtype.name(),
            h(n.activations),
            h(n.readback),
            h(n.sampler),
        )?;
        match &self.memory {
            Some(m) => {
                let source = match m.source {
                    MemorySource::Device => "device memory (its largest device-local heap)",
                    MemorySource::Budget => "memory budget (the memory_budget option)",
                };
                write!(
                    f,
                    "; available: {} of {source}, {} already in use, leaves {}",
                    h(m.bytes),
                    h(m.in_use),
                    h(m.available())
                )?;
            }
            None => write!(f, "; the adapter reports no device memory size")?,
        }
        write!(
            f,
            "; one KV cache buffer takes {} of a {} max_storage_buffer_binding_size",
            h(self.kv_buffer),
            h(self.max_binding)
        )?;
        match self.largest_ctx {
            0 => write!(
                f,
                "; no context fits: the weights ({}) and fixed buffers alone are too large",
                h(n.weights)
            ),
            largest => write!(f, "; the largest context that fits is {largest} positions"),
        }
    }
}

impl std::error::Error for DoesNotFit {}

#[cfg(test)]
mod tests;
