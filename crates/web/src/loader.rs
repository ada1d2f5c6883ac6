//! Loading a model: open the GPU, feed the GGUF file's bytes in order, build.

use std::sync::Arc;

use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wick::engine::ModelLoader;
use wick::gpu::{DeviceLimits, GpuContext, PendingPipeline};
use wick::model::LoadProgress;
use wick::pipeline::PipelineOptions;
use wick::WickError;

use crate::engine::WasmEngine;
use crate::field_err;
use crate::page_gpu::open_gpu;
use crate::pipelines_ahead::PipelinesAhead;
use crate::{from_js, js_err, js_load_err, to_js};

/// The page's default prompt tokens per prefill step, below the native
/// default (`PipelineOptions`): a chunk is one submit, and while it runs the
/// browser's GPU process does nothing else (on SwiftShader a 32-token chunk
/// of a 0.5B model already takes tens of seconds).
const PAGE_PREFILL_CHUNK: usize = 32;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct LoadOptions {
    /// KV cache positions (default: the model's context, capped by the GPU and 4096).
    context_length: Option<usize>,
    /// Most prompt tokens per prefill step (default `PAGE_PREFILL_CHUNK`).
    prefill_chunk: Option<usize>,
    /// Decode steps per GPU submit when generating.
    tokens_per_submit: Option<usize>,
    /// How the KV cache stores K and V: "f16" (default) or "f32".
    kv_cache: Option<String>,
    /// What decode steps feed the projections after a norm: "f32" (the
    /// default) or "q8" (8-bit blocks).
    activations: Option<String>,
    /// Quantize a Hugging Face checkpoint's matrices at load ("q8_0").
    pub quantize: Option<String>,
    /// The device limits asked for: "adapter" (the default: the largest the
    /// adapter offers) or "default" (WebGPU's defaults, as a phone grants).
    limits: Option<String>,
    /// GPU memory the model may take, in bytes: the memory preflight's
    /// budget (WebGPU reports no device memory, so by default only the
    /// buffer limits are checked).
    memory_budget: Option<u64>,
    /// Whether the load asks for its pipelines as soon as the header is
    /// in, to compile while the weights download (`pipelines_ahead`; set
    /// by `web/src/index.js` where the browser keeps one pipeline per
    /// descriptor and the load warms up).
    compile_ahead: Option<bool>,
}

impl LoadOptions {
    /// Whether the load creates its pipelines while the weights download.
    pub fn compile_ahead(&self) -> bool {
        self.compile_ahead.unwrap_or(false)
    }

    /// The device limits these options ask for.
    pub fn limits(&self) -> Result<DeviceLimits, JsValue> {
        match &self.limits {
            None => Ok(DeviceLimits::Adapter),
            Some(l) => l.parse().map_err(|e: String| field_err("limits", &e)),
        }
    }

    /// The pipeline's settings these options ask for.
    pub fn pipeline(&self) -> Result<PipelineOptions, JsValue> {
        if self.memory_budget == Some(0) {
            return Err(field_err("memoryBudget", "must be a number of bytes > 0"));
        }
        let mut opts = PipelineOptions {
            ctx_len: self.context_length,
            prefill_chunk: self.prefill_chunk.unwrap_or(PAGE_PREFILL_CHUNK),
            memory_budget: self.memory_budget,
            ..Default::default()
        };
        if let Some(n) = self.tokens_per_submit {
            opts.tokens_per_submit = n;
        }
        if let Some(kv) = &self.kv_cache {
            opts.kv_dtype = kv
                .parse()
                .map_err(|e: String| js_err(format!("kvCache: {e}")))?;
        }
        if let Some(act) = &self.activations {
            opts.act_dtype = act
                .parse()
                .map_err(|e: String| js_err(format!("activations: {e}")))?;
        }
        Ok(opts)
    }
}

/// A GGUF load's options checked (`quantize` is for checkpoints only) and
/// the page's GPU context with the limits they ask for.
pub(crate) async fn open_for_gguf(
    options: JsValue,
) -> Result<(Arc<GpuContext>, PipelineOptions, Ahead), JsValue> {
    let o: LoadOptions = from_js("load options", options)?;
    if o.quantize.is_some() {
        return Err(field_err(
            "quantize",
            "applies to Hugging Face checkpoints only: a GGUF file is loaded in its own types",
        ));
    }
    let opts = o.pipeline()?;
    let ahead = Ahead::new(o.compile_ahead());
    Ok((open_gpu(o.limits()?).await?, opts, ahead))
}

/// The pipelines a load asks for once its header is in, so that they
/// compile while the weights download (`pipelines_ahead.rs`); the warm-up
/// settles them.
pub(crate) struct Ahead {
    wanted: bool,
    created: Option<PipelinesAhead>,
}

impl Ahead {
    pub fn new(wanted: bool) -> Ahead {
        Ahead {
            wanted,
            created: None,
        }
    }

    /// Asks for them once `header_parsed`, the first time; `pending`
    /// names them.
    pub fn after_push(
        &mut self,
        ctx: &GpuContext,
        header_parsed: bool,
        pending: impl FnOnce() -> Result<Vec<PendingPipeline>, WickError>,
    ) -> Result<(), WickError> {
        if self.wanted && header_parsed {
            self.wanted = false;
            self.created = Some(PipelinesAhead::create(ctx, &pending()?));
        }
        Ok(())
    }

    /// What was created, for the engine's warm-up.
    pub fn take(&mut self) -> Option<PipelinesAhead> {
        self.created.take()
    }
}

/// `{ loaded, total, headerParsed }`: bytes consumed, and the data end once
/// every header is known (0 before).
fn progress(p: LoadProgress) -> Result<JsValue, JsValue> {
    to_js(&Progress {
        loaded: p.loaded,
        total: p.total,
        header_parsed: p.total > 0,
    })
}

#[derive(serde::Serialize)]
struct Progress {
    loaded: u64,
    total: u64,
    #[serde(rename = "headerParsed")]
    header_parsed: bool,
}

/// Takes a GGUF file's bytes in order (`push`), then builds the engine (`finish`).
#[wasm_bindgen]
pub struct WasmLoader {
    inner: Option<ModelLoader>,
    ctx: Arc<GpuContext>,
    ahead: Ahead,
}

#[wasm_bindgen]
impl WasmLoader {
    /// Opens the GPU (a clear error where the browser has no WebGPU) and starts
    /// a load. `options`: `{ contextLength?, prefillChunk?, tokensPerSubmit?, kvCache?, activations?, limits?, memoryBudget? }`.
    pub async fn create(options: JsValue) -> Result<WasmLoader, JsValue> {
        let (ctx, opts, ahead) = open_for_gguf(options).await?;
        Ok(WasmLoader {
            inner: Some(ModelLoader::new(ctx.clone(), opts)),
            ctx,
            ahead,
        })
    }

    /// Opens the GPU and starts loading a model split into `shards` files
    /// (llama.cpp's `gguf-split`): every shard's header first (`pushHeader`),
    /// then each shard's bytes from its start, in order (`pushShard`).
    #[wasm_bindgen(js_name = createSplit)]
    pub async fn create_split(options: JsValue, shards: usize) -> Result<WasmLoader, JsValue> {
        let (ctx, opts, ahead) = open_for_gguf(options).await?;
        Ok(WasmLoader {
            inner: Some(ModelLoader::split(ctx.clone(), opts, shards)),
            ctx,
            ahead,
        })
    }

    /// Feeds bytes from the start of shard `shard`; true once its header is
    /// complete (stop reading it then). When the last header completes the
    /// shards are checked to be one model, and planned as one.
    #[wasm_bindgen(js_name = pushHeader)]
    pub fn push_header(&mut self, shard: usize, chunk: &[u8]) -> Result<bool, JsValue> {
        let done = self.loader()?.push_header(shard, chunk);
        let done = self.kept(done)?;
        self.create_ahead()?;
        Ok(done)
    }

    /// Feeds the next bytes of shard `shard` (from its start, once every
    /// header is in); returns `{ loaded, total, headerParsed }` over all shards.
    #[wasm_bindgen(js_name = pushShard)]
    pub fn push_shard(&mut self, shard: usize, chunk: &[u8]) -> Result<JsValue, JsValue> {
        let p = self.loader()?.push_shard(shard, chunk, &mut |_| {});
        progress(self.kept(p)?)
    }

    /// Asks for the model's pipelines once its header is in.
    fn create_ahead(&mut self) -> Result<(), JsValue> {
        let Some(loader) = self.inner.as_mut() else {
            return Ok(());
        };
        let parsed = loader.header_parsed();
        let made = self
            .ahead
            .after_push(&self.ctx, parsed, || loader.pipelines_ahead());
        self.kept(made)
    }

    /// Feeds the next bytes of the file; returns `{ loaded, total, headerParsed }`
    /// (bytes of the file consumed, the file's data end once the header is known).
    pub fn push(&mut self, chunk: &[u8]) -> Result<JsValue, JsValue> {
        let p = self.loader()?.push(chunk);
        let p = self.kept(p)?;
        self.create_ahead()?;
        progress(p)
    }

    /// Builds the engine once the whole file (every shard) was pushed; call
    /// `warmUp()` on it before the first generation.
    pub fn finish(&mut self) -> Result<WasmEngine, JsValue> {
        let loader = self
            .inner
            .take()
            .ok_or_else(|| js_err("this loader already finished or failed"))?;
        let engine = loader.finish().map_err(js_load_err)?;
        WasmEngine::new(engine, self.ctx.clone(), self.ahead.take())
    }

    /// Abandons the load, freeing what was uploaded.
    pub fn abort(&mut self) {
        self.inner = None;
    }

    /// `result` as JS; a failed load is over, so its loader (and what it
    /// uploaded) goes.
    fn kept<T>(&mut self, result: Result<T, WickError>) -> Result<T, JsValue> {
        result.map_err(|e| {
            self.inner = None;
            js_load_err(e)
        })
    }

    fn loader(&mut self) -> Result<&mut ModelLoader, JsValue> {
        self.inner
            .as_mut()
            .ok_or_else(|| js_err("this loader already finished or failed"))
    }
}
