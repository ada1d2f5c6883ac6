//! wick in the browser: thin wasm-bindgen bindings over the engine.
//!
//! No engine logic lives here. The JavaScript wrapper (`web/src/index.js`)
//! drives these types:
//!
//! - [`WasmLoader`]: opens the GPU, takes a GGUF file's bytes chunk by chunk
//!   (each tensor is uploaded once its bytes are in), then builds a
//!   [`WasmEngine`];
//! - [`WasmHfLoader`]: the same from a Hugging Face checkpoint's files
//!   (config, tokenizer, index, then each safetensors shard chunk by chunk);
//! - [`WasmEngine`]: info, tokenize/decode, chat templates, and
//!   [`WasmEngine::start`] which prefills a prompt and returns a
//!   [`WasmGeneration`];
//! - [`WasmGeneration`]: one token (and its text) per `next()` call, so a JS
//!   async iterator yields between tokens; `cancel()` stops it;
//! - [`chat_request`](chat::chat_request) / [`WasmChatReply`]: OpenAI's
//!   chat.completions request checked, and its reply built from a
//!   generation's steps (the engine's `completion::openai`);
//! - [`WasmEmbedLoader`] / [`WasmEmbedder`]: an encoder (sentence-transformers
//!   folder) and its embeddings;
//! - [`WasmPreflight`]: a model's headers, then the memory preflight on the
//!   page's GPU, before its weights are downloaded.
//!
//! Every error reaches JavaScript as an `Error` whose message names the
//! problem. A panic cannot be caught on wasm32 (it aborts the module), so the
//! panic hook logs it and calls the handler set with [`set_panic_handler`],
//! which lets the wrapper reject every pending promise instead of hanging.

use wick::gpu::GpuError;
use wick::model::ModelError;
use wick::WickError;

mod chat;
mod embedder;
mod engine;
mod generation;
mod hf_loader;
mod info;
mod loader;
mod logprobs;
mod page_gpu;
mod pipelines_ahead;
mod preflight;
mod shared;
mod tool_calls;

pub use chat::WasmChatReply;
pub use embedder::{WasmEmbedLoader, WasmEmbedder};
pub use engine::WasmEngine;
pub use generation::WasmGeneration;
pub use hf_loader::WasmHfLoader;
pub use loader::WasmLoader;
pub use preflight::WasmPreflight;

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

thread_local! {
    static PANIC_HANDLER: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        let msg = info.to_string();
        PANIC_HANDLER.with(|h| {
            if let Ok(h) = h.try_borrow() {
                if let Some(f) = h.as_ref() {
                    let _ = f.call1(&JsValue::NULL, &JsValue::from_str(&msg));
                }
            }
        });
    }));
}

/// Sets the function called with the message when the module panics (after
/// which it must not be used again).
#[wasm_bindgen(js_name = setPanicHandler)]
pub fn set_panic_handler(handler: Option<js_sys::Function>) {
    PANIC_HANDLER.with(|h| *h.borrow_mut() = handler);
}

/// Panics on purpose: the browser tests check that a panic rejects pending
/// promises instead of leaving them hanging. Not part of the JS API.
#[wasm_bindgen(js_name = __testPanic)]
pub fn test_panic(message: &str) {
    panic!("{message}");
}

/// The engine's count of live GPU memory summed over every engine of this
/// page: `{ liveBytes, liveBuffers, liveBindGroups }`. After `dispose()` of
/// every engine it is back to 0 (the page's GPU context, kept for the next
/// load, holds no counted buffer).
#[wasm_bindgen(js_name = liveGpuMemory)]
pub fn live_gpu_memory() -> Result<JsValue, JsValue> {
    let live = wick::gpu::residency::live_memory_everywhere();
    to_js(&serde_json::json!({
        "liveBytes": live.bytes,
        "liveBuffers": live.buffers,
        "liveBindGroups": live.bind_groups,
    }))
}

/// The version of the wick crate this module was built from.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// An engine error as a JS `Error` with the error's message.
pub(crate) fn js_err(e: impl std::fmt::Display) -> JsValue {
    JsError::new(&e.to_string()).into()
}

/// A JS `Error` with a `code` (and numeric details) that `web/src/errors.js`
/// turns into its typed class.
pub(crate) fn js_coded(message: &str, code: &str, details: &[(&str, usize)]) -> JsValue {
    let e: JsValue = JsError::new(message).into();
    let set = |k: &str, v: JsValue| js_sys::Reflect::set(&e, &JsValue::from_str(k), &v);
    // Setting a property on a fresh Error object cannot fail.
    let _ = set("code", JsValue::from_str(code));
    for &(k, v) in details {
        let _ = set(k, JsValue::from_f64(v as f64));
    }
    e
}

/// An engine error, tagged with the code of its typed JS class where it has
/// one: no adapter or device (`webgpu_unavailable`), a lost device
/// (`device_lost`), GPU memory exhausted (`out_of_memory`), a GPU
/// validation error (`gpu_validation`), a prompt past the context
/// (`context_window_exceeded`, with the numbers); others keep the plain
/// `Error` with the message.
pub(crate) fn js_wick_err(e: impl Into<WickError>) -> JsValue {
    let e: WickError = e.into();
    let message = e.to_string();
    match e {
        WickError::Gpu(GpuError::NoAdapter { .. } | GpuError::RequestDevice { .. }) => {
            js_coded(&message, "webgpu_unavailable", &[])
        }
        WickError::Gpu(GpuError::DeviceLost { .. }) => js_coded(&message, "device_lost", &[]),
        WickError::Gpu(GpuError::OutOfMemory { .. }) => js_coded(&message, "out_of_memory", &[]),
        WickError::Gpu(GpuError::Validation { .. }) => js_coded(&message, "gpu_validation", &[]),
        WickError::ContextOverflow {
            tokens,
            used,
            ctx_len,
        } => js_coded(
            &message,
            "context_window_exceeded",
            &[
                ("promptTokens", tokens + used),
                ("cachedTokens", used),
                ("contextLength", ctx_len),
            ],
        ),
        _ => js_err(message),
    }
}

/// A load that failed: the typed `ModelLoadError`, or where the GPU and not
/// the file is the cause `WebGPUUnavailableError`, `OutOfMemoryError` or
/// `GpuValidationError`.
pub(crate) fn js_load_err(e: impl Into<WickError>) -> JsValue {
    js_load_err_in(None, e.into())
}

/// `js_load_err` for a model of several files: a `ModelLoadError` about
/// one of them names it in its message and in its `file` property.
pub(crate) fn js_load_err_in(file: Option<&str>, e: WickError) -> JsValue {
    // The loader reports GPU failures inside its own error type.
    let e = match e {
        WickError::Model(ModelError::Gpu(g)) => WickError::Gpu(g),
        e => e,
    };
    match e {
        WickError::Gpu(
            GpuError::NoAdapter { .. }
            | GpuError::RequestDevice { .. }
            | GpuError::OutOfMemory { .. }
            | GpuError::Validation { .. },
        ) => js_wick_err(e),
        e => {
            let Some(file) = file else {
                return js_coded(&format!("loading the model failed: {e}"), "model_load", &[]);
            };
            let e = e.to_string();
            // Some messages (the index's) start with the file already.
            let message = if e.starts_with(file) {
                format!("loading the model failed: {e}")
            } else {
                format!("loading the model failed: {file}: {e}")
            };
            let err = js_coded(&message, "model_load", &[]);
            // Setting a property on a fresh Error object cannot fail.
            let _ = js_sys::Reflect::set(&err, &JsValue::from_str("file"), &file.into());
            err
        }
    }
}

/// Options from a JS object (`undefined`/`null` give the defaults).
pub(crate) fn from_js<T: serde::de::DeserializeOwned + Default>(
    what: &str,
    v: JsValue,
) -> Result<T, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(T::default());
    }
    serde_wasm_bindgen::from_value(v).map_err(|e| js_err(format!("invalid {what}: {e}")))
}

pub(crate) fn to_js<T: serde::Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_err)
}

/// An `InvalidRequestError` naming the request field (errors.js writes the
/// message as `field: why`).
pub(crate) fn field_err(field: &str, why: &str) -> JsValue {
    coded_field_err(field, why, "invalid_request")
}

/// An error with `code` naming the request field (`invalid_request`,
/// `unsupported_field`).
pub(crate) fn coded_field_err(field: &str, why: &str, code: &str) -> JsValue {
    let e = js_coded(why, code, &[]);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&e, &JsValue::from_str("field"), &JsValue::from_str(field));
    e
}
