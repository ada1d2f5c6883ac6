//! Loading a decoder from a Hugging Face checkpoint (`config.json`,
//! `tokenizer.json`, optionally `tokenizer_config.json`, `model.safetensors`
//! or the shards `model.safetensors.index.json` lists). The JS side
//! (`web/src/hf-folder.js`, `web/src/index.js`) fetches or reads the files;
//! every parse and check is the engine's (`wick::hf_folder::HfLoader`).
//!
//! The order a load goes through: the small files (`setFile`), the shard
//! names (`shards`), each shard's header from a prefix of it (`setHeader`,
//! which says when it needs more bytes), `begin`, then each shard's bytes
//! in order as they arrive (`push`, `endShard`), and `finish`. A shard is
//! never held whole: each tensor is converted and uploaded once its bytes
//! are in. Every error about a file names it (the `file` property of the
//! `ModelLoadError`).

use std::sync::Arc;

use wasm_bindgen::prelude::*;
use wick::format::{SafetensorsError, SafetensorsHeader, ShardIndex};
use wick::gpu::GpuContext;
use wick::hf_folder::{HfConfigFiles, HfLoader, HfTokenizer};
use wick::model::hf::{config, HfOptions, QUANTIZE_TYPES};
use wick::model::ModelError;
use wick::pipeline::PipelineOptions;
use wick::tokenizer::hf_config::HfTokenizerConfig;
use wick::tokenizer::Tokenizer;
use wick::WickError;

use crate::engine::WasmEngine;
use crate::field_err;
use crate::js_load_err_in;
use crate::loader::{Ahead, LoadOptions};
use crate::page_gpu::open_gpu;
use crate::{from_js, js_err};

const CONFIG: &str = "config.json";
const TOKENIZER: &str = "tokenizer.json";
const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

/// The files `setFile` takes.
const FILES: [&str; 4] = [CONFIG, TOKENIZER, TOKENIZER_CONFIG, INDEX];

/// A `ModelLoadError` about `file`.
fn err_in(file: &str, e: impl Into<WickError>) -> JsValue {
    js_load_err_in(Some(file), e.into())
}

/// Collects a checkpoint's files, then streams its shards into the GPU.
#[wasm_bindgen]
pub struct WasmHfLoader {
    ctx: Arc<GpuContext>,
    opts: PipelineOptions,
    hf_opts: HfOptions,
    small: Vec<(&'static str, Vec<u8>)>,
    /// Shard file names in stream order (`shards`), and their headers.
    names: Vec<String>,
    headers: Vec<Option<SafetensorsHeader>>,
    /// Set by `begin`; `None` again once finished or failed.
    loader: Option<HfLoader>,
    ahead: Ahead,
}

#[wasm_bindgen]
impl WasmHfLoader {
    /// Opens the GPU and starts a load. `options`: as `WasmLoader.create`'s,
    /// plus `quantize` ("q8_0": every matrix quantized as it is uploaded).
    pub async fn create(options: JsValue) -> Result<WasmHfLoader, JsValue> {
        let o: LoadOptions = from_js("load options", options)?;
        let quantize = match o.quantize.as_deref() {
            None => None,
            Some(name) => Some(
                QUANTIZE_TYPES
                    .into_iter()
                    .find(|q| q.name().eq_ignore_ascii_case(name))
                    .ok_or_else(|| {
                        let offered: Vec<&str> = QUANTIZE_TYPES.iter().map(|q| q.name()).collect();
                        field_err(
                            "quantize",
                            &format!("{name:?} is not offered (one of {offered:?})"),
                        )
                    })?,
            ),
        };
        let opts = o.pipeline()?;
        let ctx = open_gpu(o.limits()?).await?;
        Ok(WasmHfLoader {
            ctx,
            opts,
            hf_opts: HfOptions { quantize },
            small: Vec::new(),
            names: Vec::new(),
            headers: Vec::new(),
            loader: None,
            ahead: Ahead::new(o.compile_ahead()),
        })
    }

    /// One of the small files (`config.json`, `tokenizer.json`,
    /// `tokenizer_config.json`, `model.safetensors.index.json`), whole.
    /// Each must be JSON: one that is not is refused here, named.
    #[wasm_bindgen(js_name = setFile)]
    pub fn set_file(&mut self, name: &str, bytes: &[u8]) -> Result<(), JsValue> {
        let Some(&name) = FILES.iter().find(|&&f| f == name) else {
            return Err(js_err(format!("unknown checkpoint file '{name}'")));
        };
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .map_err(|e| err_in(name, ModelError::Config(format!("not valid JSON: {e}"))))?;
        self.small.retain(|(n, _)| *n != name);
        self.small.push((name, bytes.to_vec()));
        Ok(())
    }

    /// The safetensors files to stream, in order: the index's shards, or
    /// `model.safetensors` where no index was given.
    pub fn shards(&mut self) -> Result<Vec<String>, JsValue> {
        self.names = match self.file(INDEX) {
            Some(json) => {
                ShardIndex::parse(json)
                    .map_err(|e| err_in(INDEX, ModelError::from(e)))?
                    .shards
            }
            None => vec![SINGLE.to_string()],
        };
        self.headers = vec![None; self.names.len()];
        Ok(self.names.clone())
    }

    /// The header of shard `shard` from the first bytes of its file.
    /// Returns 0 once it is read, or how many bytes of the file (at least)
    /// it needs: call again with that many.
    #[wasm_bindgen(js_name = setHeader)]
    pub fn set_header(&mut self, shard: usize, prefix: &[u8]) -> Result<f64, JsValue> {
        let name = self.shard_name(shard)?;
        match SafetensorsHeader::parse(prefix) {
            Ok(h) => {
                self.headers[shard] = Some(h);
                Ok(0.0)
            }
            Err(SafetensorsError::NeedMoreHeader { needed_at_least })
                if (prefix.len() as u64) < needed_at_least =>
            {
                Ok(needed_at_least as f64)
            }
            Err(e) => Err(err_in(&name, ModelError::from(e))),
        }
    }

    /// Bytes of shard `shard` as its header describes it (its last
    /// tensor's end): a stream that ends before is a truncated file.
    #[wasm_bindgen(js_name = shardLength)]
    pub fn shard_length(&self, shard: usize) -> Result<f64, JsValue> {
        let header = self.headers.get(shard).and_then(Option::as_ref);
        let header = header.ok_or_else(|| js_err(format!("shard {shard} has no header yet")))?;
        Ok(header.file_len() as f64)
    }

    /// Checks the files against each other (config, tokenizer, index,
    /// every tensor of every header) and plans the load: nothing is
    /// uploaded yet. Every shard's header must be set.
    pub fn begin(&mut self) -> Result<(), JsValue> {
        let headers: Vec<SafetensorsHeader> = self
            .headers
            .iter()
            .zip(&self.names)
            .map(|(h, n)| {
                h.clone()
                    .ok_or_else(|| js_err(format!("{n}: no header read")))
            })
            .collect::<Result<_, _>>()?;
        if headers.is_empty() {
            return Err(js_err("call shards() and setHeader() first"));
        }
        let need = |name: &'static str| {
            self.file(name)
                .ok_or_else(|| err_in(name, ModelError::Config(format!("{name} is missing"))))
        };
        let config_json = need(CONFIG)?;
        let tokenizer_json = need(TOKENIZER)?;
        // Read here, in steps, so each error names its file.
        config::parse(config_json).map_err(|e| err_in(CONFIG, e))?;
        let mut tokenizer =
            Tokenizer::from_tokenizer_json(tokenizer_json).map_err(|e| err_in(TOKENIZER, e))?;
        let mut chat_template = None;
        if let Some(json) = self.file(TOKENIZER_CONFIG) {
            let cfg = HfTokenizerConfig::parse(json).map_err(|e| err_in(TOKENIZER_CONFIG, e))?;
            tokenizer = cfg
                .apply(tokenizer)
                .map_err(|e| err_in(TOKENIZER_CONFIG, e))?;
            chat_template = cfg.chat_template;
        }
        let files = HfConfigFiles {
            config: config_json,
            tokenizer: tokenizer_json,
            tokenizer_config: self.file(TOKENIZER_CONFIG),
            index: self.file(INDEX),
        };
        if let Some(index) = files.index {
            // Checked again by the loader; here so the error names the index.
            let parsed =
                ShardIndex::parse(index).map_err(|e| err_in(INDEX, ModelError::from(e)))?;
            parsed
                .check(&headers)
                .map_err(|e| err_in(INDEX, ModelError::from(e)))?;
        }
        let tokenizer = HfTokenizer {
            tokenizer,
            chat_template,
        };
        let loader = HfLoader::with_tokenizer(
            self.ctx.clone(),
            self.opts.clone(),
            &self.hf_opts,
            &files,
            &headers,
            tokenizer,
        )
        // What is left is about the tensors, which the message names.
        .map_err(|e| js_load_err_in(None, e))?;
        self.loader = Some(loader);
        self.small.clear();
        Ok(())
    }

    /// The next bytes of shard `shard` (shards in order, each from its
    /// first byte): every tensor they complete is converted and uploaded.
    pub fn push(&mut self, shard: usize, chunk: &[u8]) -> Result<(), JsValue> {
        let name = self.shard_name(shard)?;
        let loader = self.loader()?;
        if let Err(e) = loader.push(shard, chunk, &mut |_| {}) {
            self.loader = None;
            return Err(err_in(&name, e));
        }
        // The model's pipelines, once the header is in (the converted
        // stream's, from the checkpoint's).
        let Some(loader) = self.loader.as_mut() else {
            return Ok(());
        };
        let parsed = loader.header_parsed();
        if let Err(e) = self
            .ahead
            .after_push(&self.ctx, parsed, || loader.pipelines_ahead())
        {
            self.loader = None;
            return Err(js_load_err_in(None, e));
        }
        Ok(())
    }

    /// Shard `shard`'s stream ended: every tensor in it must have arrived.
    #[wasm_bindgen(js_name = endShard)]
    pub fn end_shard(&mut self, shard: usize) -> Result<(), JsValue> {
        let name = self.shard_name(shard)?;
        if let Err(e) = self.loader()?.end_shard(shard) {
            self.loader = None;
            return Err(err_in(&name, e));
        }
        Ok(())
    }

    /// Builds the engine once every shard was pushed; call `warmUp()` on it
    /// before the first generation.
    pub fn finish(&mut self) -> Result<WasmEngine, JsValue> {
        let loader = self
            .loader
            .take()
            .ok_or_else(|| js_err("this loader has not begun, or already finished or failed"))?;
        let engine = loader.finish().map_err(|e| js_load_err_in(None, e))?;
        WasmEngine::new(engine, self.ctx.clone(), self.ahead.take())
    }

    /// Abandons the load, freeing what was uploaded.
    pub fn abort(&mut self) {
        self.loader = None;
    }
}

impl WasmHfLoader {
    fn file(&self, name: &str) -> Option<&[u8]> {
        self.small
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.as_slice())
    }

    fn shard_name(&self, shard: usize) -> Result<String, JsValue> {
        self.names
            .get(shard)
            .cloned()
            .ok_or_else(|| js_err(format!("no shard {shard} (call shards() first)")))
    }

    fn loader(&mut self) -> Result<&mut HfLoader, JsValue> {
        self.loader
            .as_mut()
            .ok_or_else(|| js_err("this loader has not begun, or already finished or failed"))
    }
}
