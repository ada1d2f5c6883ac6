//! The memory preflight from a page, before a download: the JS side feeds
//! the start of each file (range requests, growing until the header is
//! whole), then `run` opens the page's GPU with the load's options and asks
//! the engine what the model would hold and whether it fits
//! (`wick::engine::preflight_headers`, the load's own checks and sums).

use serde::Serialize;
use wasm_bindgen::prelude::*;
use wick::format::gguf::{GgufError, GgufFile};
use wick::format::gguf_split::SplitError;
use wick::gpu::GpuError;
use wick::preflight::{MemorySource, Report};
use wick::WickError;

use crate::loader::open_for_gguf;
use crate::{js_err, js_load_err, to_js};

/// The headers of a model's files (one, or every shard of a split model),
/// gathered from their first bytes; then the preflight.
#[wasm_bindgen]
pub struct WasmPreflight {
    /// Each file's first bytes so far, until its header parses.
    starts: Vec<Vec<u8>>,
    headers: Vec<Option<GgufFile>>,
}

#[wasm_bindgen]
impl WasmPreflight {
    /// A preflight of a model in `files` files (1, or a split model's shards).
    #[wasm_bindgen(constructor)]
    pub fn new(files: usize) -> WasmPreflight {
        WasmPreflight {
            starts: vec![Vec::new(); files],
            headers: vec![None; files],
        }
    }

    /// Feeds the next bytes from the start of file `file`: 0 once its header
    /// is whole (its later bytes are not needed), else how many bytes from
    /// the start the header needs at least (what to ask for next).
    #[wasm_bindgen(js_name = pushHeader)]
    pub fn push_header(&mut self, file: usize, chunk: &[u8]) -> Result<f64, JsValue> {
        let count = self.headers.len();
        if file >= count {
            return Err(js_load_err(SplitError::NoSuchShard { shard: file, count }));
        }
        if self.headers[file].is_some() {
            return Ok(0.0);
        }
        let start = &mut self.starts[file];
        start.extend_from_slice(chunk);
        let named = |detail: GgufError| -> WickError {
            match count {
                1 => detail.into(),
                _ => SplitError::Header {
                    shard: file,
                    detail,
                }
                .into(),
            }
        };
        match GgufFile::parse_header(start) {
            Ok(h) => {
                self.headers[file] = Some(h);
                self.starts[file] = Vec::new();
                Ok(0.0)
            }
            Err(GgufError::NeedMoreHeader { needed_at_least }) => {
                Ok(needed_at_least.max(start.len() as u64 + 1) as f64)
            }
            Err(e) => Err(js_load_err(named(e))),
        }
    }

    /// Opens the page's GPU with `options` (the load's: `contextLength`,
    /// `kvCache`, `limits`, `memoryBudget` ...) and returns what the model
    /// would hold and whether it fits (see `Preflight`). A file that is not
    /// a model wick runs is a ModelLoadError, as its load would be.
    pub async fn run(&mut self, options: JsValue) -> Result<JsValue, JsValue> {
        if let Some(file) = self.headers.iter().position(Option::is_none) {
            return Err(js_err(format!(
                "file {} of {}: its header was not pushed whole",
                file + 1,
                self.headers.len()
            )));
        }
        let (ctx, opts, _) = open_for_gguf(options).await?;
        let headers = self.headers.iter_mut().filter_map(Option::take).collect();
        let out = match wick::engine::preflight_headers(&ctx, headers, &opts) {
            Ok(report) => Preflight::of(&report, &ctx, opts.memory_budget),
            // A buffer over a limit whatever the context (a weight row, an
            // activation): no size is measurable.
            Err(e @ WickError::Gpu(GpuError::BufferTooLarge { .. })) => {
                Preflight::refused("buffer_too_large", e.to_string(), &ctx, opts.memory_budget)
            }
            Err(e) => return Err(js_load_err(e)),
        };
        to_js(&out)
    }
}

/// What `preflight()` resolves to in JS.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Preflight {
    fits: bool,
    /// Why not, where it does not fit.
    reason: Option<Reason>,
    /// The context the load would allocate (asked for, or the default).
    context_length: Option<usize>,
    /// The largest context that fits (0: none, the weights alone do not).
    largest_context: Option<usize>,
    /// The largest context whose K (or V) cache fits one binding.
    largest_context_by_binding: Option<usize>,
    kv_cache: Option<&'static str>,
    bytes: Option<Bytes>,
    /// One K (or V) cache buffer: the binding the context is bound by.
    kv_buffer_bytes: Option<u64>,
    limits: Limits,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Reason {
    /// "context_too_large" (a smaller context fits: `largestContext`),
    /// "model_too_large" (no context fits), "buffer_too_large" (one buffer
    /// is over a binding or buffer limit whatever the context).
    code: &'static str,
    message: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bytes {
    weights: u64,
    kv_cache: u64,
    activations: u64,
    readback: u64,
    sampler: u64,
    total: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    /// "adapter" or "default": the `limits` option.
    requested: &'static str,
    adapter: String,
    max_buffer_size: u64,
    max_storage_buffer_binding_size: u64,
    /// Bytes of device memory the adapter reports (none in the browser).
    device_memory: Option<u64>,
    /// The `memoryBudget` option.
    memory_budget: Option<u64>,
    /// The memory checked against: the budget, else the device memory,
    /// less what the page's engines already hold; null: only the buffer
    /// limits were checked.
    available: Option<u64>,
    /// What the page's engines already hold on this GPU.
    in_use: u64,
}

impl Preflight {
    fn of(r: &Report, ctx: &wick::gpu::GpuContext, memory_budget: Option<u64>) -> Preflight {
        let n = r.needed;
        let reason = match r.fit() {
            Ok(_) => None,
            Err(e) => Some(Reason {
                code: if r.largest_ctx > 0 {
                    "context_too_large"
                } else {
                    "model_too_large"
                },
                message: e.to_string(),
            }),
        };
        let device_memory = r
            .memory
            .filter(|m| m.source == MemorySource::Device)
            .map(|m| m.bytes);
        Preflight {
            fits: reason.is_none(),
            reason,
            context_length: Some(r.ctx_len),
            largest_context: Some(r.largest_ctx),
            largest_context_by_binding: Some(r.largest_ctx_by_binding),
            kv_cache: Some(r.kv_dtype.name()),
            bytes: Some(Bytes {
                weights: n.weights,
                kv_cache: n.kv_cache,
                activations: n.activations,
                readback: n.readback,
                sampler: n.sampler,
                total: n.total(),
            }),
            kv_buffer_bytes: Some(r.kv_buffer),
            limits: Limits {
                requested: ctx.device_limits.name(),
                adapter: r.adapter.clone(),
                max_buffer_size: r.max_buffer,
                max_storage_buffer_binding_size: r.max_binding,
                device_memory,
                memory_budget,
                available: r.memory.map(|m| m.available()),
                in_use: r.memory.map_or(ctx.live_memory().bytes, |m| m.in_use),
            },
        }
    }

    fn refused(
        code: &'static str,
        message: String,
        ctx: &wick::gpu::GpuContext,
        memory_budget: Option<u64>,
    ) -> Preflight {
        Preflight {
            fits: false,
            reason: Some(Reason { code, message }),
            context_length: None,
            largest_context: None,
            largest_context_by_binding: None,
            kv_cache: None,
            bytes: None,
            kv_buffer_bytes: None,
            limits: Limits {
                requested: ctx.device_limits.name(),
                adapter: ctx.adapter.name.clone(),
                max_buffer_size: ctx.limits.max_buffer_size,
                max_storage_buffer_binding_size: ctx.max_binding_bytes(),
                device_memory: ctx.device_memory,
                memory_budget,
                available: None,
                in_use: ctx.live_memory().bytes,
            },
        }
    }
}
