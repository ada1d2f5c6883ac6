//! The page's GPU context: one device shared by every engine and embedder
//! the page loads, so a pipeline compiled for one load serves every later
//! one (creating pipelines is most of a load's time once the bytes are in).

use std::sync::Arc;

use wasm_bindgen::prelude::*;
use wick::gpu::{DeviceLimits, GpuContext, GpuError};

use crate::{js_coded, js_wick_err};

/// The message a page without WebGPU gets.
pub const NO_WEBGPU: &str = "WebGPU is not available in this browser: wick needs a browser with \
WebGPU enabled (Chrome/Edge 113+, or Firefox/Safari with WebGPU turned on) and a GPU adapter";

thread_local! {
    /// The page's GPU context, shared by every engine and embedder it loads:
    /// a pipeline compiled for one load serves every later one (creating
    /// pipelines is most of a load's time once the bytes are in), and the
    /// page holds one device rather than one per model. Replaced once lost
    /// or faulted; `releaseGpu()` drops it.
    static PAGE_GPU: std::cell::RefCell<Vec<Arc<GpuContext>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The page's GPU context with `limits`, opened on first use (a clear error
/// where the browser has no WebGPU), opened again where the last one was
/// lost or faulted (an uncaptured error sticks to a device: see
/// `check_alive`).
pub(crate) async fn open_gpu(limits: DeviceLimits) -> Result<Arc<GpuContext>, JsValue> {
    let held = PAGE_GPU.with(|g| {
        let mut g = g.borrow_mut();
        g.retain(|ctx| ctx.check_alive().is_ok());
        g.iter().find(|ctx| ctx.device_limits == limits).cloned()
    });
    if let Some(ctx) = held {
        return Ok(ctx);
    }
    let ctx = GpuContext::open(None, limits).await.map_err(|e| match e {
        GpuError::NoAdapter { .. } => js_coded(NO_WEBGPU, "webgpu_unavailable", &[]),
        e => js_wick_err(e),
    })?;
    // The engine's API takes an Arc; on wasm32 (one thread) wgpu's types are not Send.
    #[allow(clippy::arc_with_non_send_sync)]
    let ctx = Arc::new(ctx);
    PAGE_GPU.with(|g| g.borrow_mut().push(ctx.clone()));
    Ok(ctx)
}

/// Forgets the page's GPU context if it is `ctx` (a destroyed device), so
/// the next load opens a fresh one.
pub(crate) fn forget_gpu(ctx: &Arc<GpuContext>) {
    PAGE_GPU.with(|g| g.borrow_mut().retain(|held| !Arc::ptr_eq(held, ctx)));
}

/// Lets go of the page's GPU context: its compiled pipelines go, and the
/// device with them once no engine holds it. The next load opens a new one.
#[wasm_bindgen(js_name = releaseGpu)]
pub fn release_gpu() {
    PAGE_GPU.with(|g| g.borrow_mut().clear());
}
