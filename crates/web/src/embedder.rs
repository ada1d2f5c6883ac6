//! Text embeddings in the browser: a Hugging Face / sentence-transformers
//! folder's files in, `wick::embedding::Embedder` out. The JS side
//! (`web/src/embeddings.js`) fetches or reads the files; every parse is the
//! engine's.
//!
//! `Embedder::load_hf` takes each safetensors file as one slice (it reads
//! the tensors by name, in any order), so the chunks of `model.safetensors`,
//! or of each shard a `model.safetensors.index.json` lists, are appended
//! into one buffer per file in wasm memory (sized from the file's length up
//! front): never a whole file in one JS buffer, but the files are held once
//! in wasm memory until the upload ends.
//! Encoders are small (all-MiniLM-L6-v2: 90 MB), far under wasm32's 4 GiB.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use js_sys::{Array, Float32Array};
use wasm_bindgen::prelude::*;
use wick::embedding::{
    pooling_path, EmbedError, EmbedFiles, EmbedOptions, Embedder, SentenceFiles,
};
use wick::format::ShardIndex;
use wick::gpu::GpuContext;
use wick::WickError;

use crate::page_gpu::open_gpu;
use crate::{js_coded, js_err, js_load_err, js_wick_err, to_js};

/// The folder's files that `setFile` takes; the Pooling module's
/// `config.json` arrives as "pooling".
const FILES: [&str; 6] = [
    "config.json",
    "tokenizer.json",
    "modules.json",
    "pooling",
    "sentence_bert_config.json",
    INDEX,
];

const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

fn load_err(message: String) -> JsValue {
    js_coded(&message, "model_load", &[])
}

/// One safetensors file as it arrives.
#[derive(Default)]
struct Shard {
    name: String,
    bytes: Vec<u8>,
    /// The file's length where the source announced it.
    len: Option<usize>,
}

/// Collects a folder's files, then builds a [`WasmEmbedder`].
#[wasm_bindgen]
pub struct WasmEmbedLoader {
    ctx: Arc<GpuContext>,
    small: Vec<(String, Vec<u8>)>,
    shards: Vec<Shard>,
}

#[wasm_bindgen]
impl WasmEmbedLoader {
    /// Opens the GPU (a clear error where the browser has no WebGPU).
    pub async fn create() -> Result<WasmEmbedLoader, JsValue> {
        let ctx = open_gpu(wick::gpu::DeviceLimits::Adapter).await?;
        Ok(WasmEmbedLoader {
            ctx,
            small: Vec::new(),
            shards: Vec::new(),
        })
    }

    /// The folder of the Pooling module that `modules.json` names (where
    /// its `config.json` is), or `undefined` where it names none.
    #[wasm_bindgen(js_name = poolingPath)]
    pub fn pooling_path(modules_json: &[u8]) -> Result<Option<String>, JsValue> {
        pooling_path(modules_json).map_err(|e| load_err(format!("modules.json: {e}")))
    }

    /// One of the small files (`FILES`), whole. Each must be JSON: a file
    /// that is not is refused here, named, before anything reads it.
    #[wasm_bindgen(js_name = setFile)]
    pub fn set_file(&mut self, name: &str, bytes: &[u8]) -> Result<(), JsValue> {
        if !FILES.contains(&name) {
            return Err(js_err(format!("unknown embedding model file '{name}'")));
        }
        let shown = if name == "pooling" {
            "the Pooling module's config.json"
        } else {
            name
        };
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .map_err(|e| load_err(format!("{shown} is not valid JSON: {e}")))?;
        self.small.retain(|(n, _)| n != name);
        self.small.push((name.to_string(), bytes.to_vec()));
        Ok(())
    }

    /// The safetensors files to push, in order: the shards the index
    /// (`model.safetensors.index.json`, given with `setFile`) lists, or
    /// `model.safetensors` alone.
    pub fn shards(&mut self) -> Result<Vec<String>, JsValue> {
        let names = match self.file(INDEX) {
            Some(json) => {
                ShardIndex::parse(json)
                    .map_err(|e| load_err(format!("{INDEX}: {e}")))?
                    .shards
            }
            None => vec![SINGLE.to_string()],
        };
        self.shards = names
            .iter()
            .map(|name| Shard {
                name: name.clone(),
                ..Default::default()
            })
            .collect();
        Ok(names)
    }

    /// The next bytes of safetensors file `shard` (of `shards()`), in
    /// order; `total`: the file's length where the source knows it (the
    /// buffer is then sized once). Returns how many bytes of it are in.
    #[wasm_bindgen(js_name = pushWeights)]
    pub fn push_weights(
        &mut self,
        shard: usize,
        chunk: &[u8],
        total: Option<f64>,
    ) -> Result<f64, JsValue> {
        let s = self
            .shards
            .get_mut(shard)
            .ok_or_else(|| js_err(format!("no safetensors file {shard} (call shards() first)")))?;
        let name = &s.name;
        if s.len.is_none() {
            if let Some(t) = total.filter(|&t| t > 0.0) {
                if !(t.is_finite() && t <= u32::MAX as f64) {
                    return Err(load_err(format!(
                        "{name}: {t} bytes do not fit WebAssembly memory"
                    )));
                }
                let len = t as usize;
                s.bytes
                    .try_reserve_exact(len)
                    .map_err(|_| load_err(format!("{name}: no memory for its {len} bytes")))?;
                s.len = Some(len);
            }
        }
        let len = s.len.unwrap_or(usize::MAX);
        if s.bytes.len() + chunk.len() > len {
            return Err(load_err(format!(
                "{name}: more bytes than its announced length of {len}"
            )));
        }
        s.bytes
            .try_reserve(chunk.len())
            .map_err(|_| load_err(format!("{name}: out of WebAssembly memory")))?;
        s.bytes.extend_from_slice(chunk);
        Ok(s.bytes.len() as f64)
    }

    /// Checks the config and every tensor, uploads the weights, and frees
    /// the loader's copy of them.
    pub fn finish(&mut self) -> Result<WasmEmbedder, JsValue> {
        let shards = std::mem::take(&mut self.shards);
        if shards.is_empty() {
            return Err(load_err(format!("{SINGLE} is missing")));
        }
        for s in &shards {
            if s.bytes.is_empty() {
                return Err(load_err(format!("{} is missing or empty", s.name)));
            }
            if let Some(len) = s.len.filter(|&l| l != s.bytes.len()) {
                return Err(load_err(format!(
                    "{}: {} of its {len} bytes arrived",
                    s.name,
                    s.bytes.len()
                )));
            }
        }
        let need = |name: &str| {
            self.file(name)
                .ok_or_else(|| load_err(format!("{name} is missing")))
        };
        let slices: Vec<&[u8]> = shards.iter().map(|s| s.bytes.as_slice()).collect();
        let files = EmbedFiles {
            config: need("config.json")?,
            tokenizer: need("tokenizer.json")?,
            shards: &slices,
            index: self.file(INDEX),
            sentence: SentenceFiles {
                modules: self.file("modules.json"),
                pooling: self.file("pooling"),
                // Dense modules (EmbeddingGemma's) are not loaded here yet: a
                // folder with them is refused by name when its modules.json
                // is parsed.
                dense: &[],
                sentence_bert: self.file("sentence_bert_config.json"),
            },
        };
        let embedder = Embedder::load_hf(self.ctx.clone(), &files).map_err(js_load_err)?;
        self.small.clear();
        Ok(WasmEmbedder {
            inner: Rc::new(RefCell::new(Some(Rc::new(embedder)))),
        })
    }
}

impl WasmEmbedLoader {
    fn file(&self, name: &str) -> Option<&[u8]> {
        self.small
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
    }
}

/// A loaded encoder.
#[wasm_bindgen]
pub struct WasmEmbedder {
    /// `None` once disposed; a running `embed` holds its own `Rc`.
    inner: Rc<RefCell<Option<Rc<Embedder>>>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedInfo {
    dimensions: usize,
    max_tokens: usize,
    vocab_size: usize,
    layers: usize,
    pooling: String,
    normalize: bool,
}

#[wasm_bindgen]
impl WasmEmbedder {
    /// `{ dimensions, maxTokens, vocabSize, layers, pooling, normalize }`.
    pub fn info(&self) -> Result<JsValue, JsValue> {
        let e = self.embedder()?;
        let s = e.sentence_config();
        to_js(&EmbedInfo {
            dimensions: e.dim(),
            max_tokens: e.max_tokens(),
            vocab_size: e.vocab(),
            layers: e.layers(),
            pooling: format!("{:?}", s.pooling).to_lowercase(),
            normalize: s.normalize,
        })
    }

    /// Embeds `texts` (an array of strings) in order: `{ vectors, tokens }`,
    /// `vectors` one Float32Array of `texts.length * dimensions` values,
    /// `tokens` each input's token count (special tokens included).
    pub async fn embed(&self, texts: Array) -> Result<JsValue, JsValue> {
        let embedder = self.embedder()?;
        let texts: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                t.as_string()
                    .ok_or_else(|| js_err(format!("input {i} is not a string")))
            })
            .collect::<Result<_, _>>()?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let out = embedder
            .embed(&refs, EmbedOptions::default())
            .await
            .map_err(embed_err)?;
        let flat: Vec<f32> = out.iter().flat_map(|e| e.vector.iter().copied()).collect();
        let tokens: Vec<usize> = out.iter().map(|e| e.tokens).collect();
        let result = js_sys::Object::new();
        let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&result, &JsValue::from_str(k), v);
        set("vectors", &Float32Array::from(flat.as_slice()).into())?;
        set("tokens", &to_js(&tokens)?)?;
        Ok(result.into())
    }

    /// Frees the GPU memory (once a running `embed` ends).
    pub fn dispose(&self) {
        self.inner.borrow_mut().take();
    }

    fn embedder(&self) -> Result<Rc<Embedder>, JsValue> {
        self.inner
            .borrow()
            .clone()
            .ok_or_else(|| js_err("this embedding engine was disposed"))
    }
}

/// An input past the model's length is `context_window_exceeded` with the
/// numbers and the input's index; the rest as every engine error.
fn embed_err(e: impl Into<WickError>) -> JsValue {
    match e.into() {
        WickError::Embed(EmbedError::InputTooLong { index, tokens, max }) => {
            let message = EmbedError::InputTooLong { index, tokens, max }.to_string();
            js_coded(
                &message,
                "context_window_exceeded",
                &[
                    ("promptTokens", tokens),
                    ("contextLength", max),
                    ("inputIndex", index),
                ],
            )
        }
        e => js_wick_err(e),
    }
}
