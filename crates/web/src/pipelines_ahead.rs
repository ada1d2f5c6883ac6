//! A model's pipelines created while its weights download.
//!
//! Creating a pipeline through wgpu calls `createComputePipeline`, which
//! the browser's GPU process compiles on its own thread, one after another:
//! on SwiftShader that is seconds for a model's kernels, and every
//! `writeBuffer` of the upload queues behind them. So once a load has the
//! model's header, it asks for the same pipelines with
//! `createComputePipelineAsync` (compiled off that thread), from the same
//! WGSL, entry point and bind group layout as the engine will create them
//! (`ModelLoader::pipelines_ahead`, `PendingPipeline::layout_entries`),
//! and the upload goes on meanwhile. Dawn (Chromium's WebGPU) keeps one
//! pipeline per identical descriptor, so the warm-up's own creation of
//! each then finds it compiled. Where the browser does not (Firefox),
//! this would compile everything twice: the page asks for it only in
//! Chromium (`compileAhead`, set by `web/src/index.js`).

use wasm_bindgen::prelude::*;
use wick::gpu::{GpuContext, PendingPipeline};

/// The pipelines asked for, compiling.
#[derive(Default)]
pub(crate) struct PipelinesAhead {
    compiles: Vec<js_sys::Promise>,
}

impl PipelinesAhead {
    /// Asks the page's device for each of `pending`, without waiting.
    pub fn create(ctx: &GpuContext, pending: &[PendingPipeline]) -> PipelinesAhead {
        #[cfg(target_arch = "wasm32")]
        if let Some(device) = ctx.device.as_webgpu() {
            use wasm_bindgen::JsCast;
            let device: &AsyncDevice = device.unchecked_ref();
            let compiles = pending
                .iter()
                .filter_map(|p| create_async(device, ctx, p))
                .collect();
            return PipelinesAhead { compiles };
        }
        let _ = (ctx, pending);
        PipelinesAhead::default()
    }

    /// Waits for every compile; resolves to how many succeeded. One that
    /// failed is not an error here: the warm-up creates it again and
    /// reports its error by kernel name.
    pub async fn settle(self) -> usize {
        let mut compiled = 0;
        for compile in self.compiles {
            if wasm_bindgen_futures::JsFuture::from(compile).await.is_ok() {
                compiled += 1;
            }
        }
        compiled
    }
}

#[wasm_bindgen]
extern "C" {
    /// A GPUDevice, as far as creating a pipeline asynchronously goes.
    type AsyncDevice;
    #[wasm_bindgen(method, js_name = createShaderModule)]
    fn create_shader_module(this: &AsyncDevice, descriptor: &js_sys::Object) -> JsValue;
    #[wasm_bindgen(method, js_name = createBindGroupLayout)]
    fn create_bind_group_layout(this: &AsyncDevice, descriptor: &js_sys::Object) -> JsValue;
    #[wasm_bindgen(method, js_name = createPipelineLayout)]
    fn create_pipeline_layout(this: &AsyncDevice, descriptor: &js_sys::Object) -> JsValue;
    #[wasm_bindgen(method, js_name = createComputePipelineAsync)]
    fn create_compute_pipeline_async(
        this: &AsyncDevice,
        descriptor: &js_sys::Object,
    ) -> js_sys::Promise;
}

/// `p`'s pipeline, with the descriptors wgpu's WebGPU backend gives
/// `createComputePipeline` (labels included); `None` for a layout this
/// does not map (none of the engine's kernels has one).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn create_async(
    device: &AsyncDevice,
    ctx: &GpuContext,
    p: &PendingPipeline,
) -> Option<js_sys::Promise> {
    let entries = js_sys::Array::new();
    for e in p.layout_entries(ctx) {
        entries.push(&layout_entry(&e)?.into());
    }
    let label = JsValue::from_str(p.name());
    let module = device.create_shader_module(&object(&[
        ("label", label.clone()),
        ("code", p.source().into()),
    ]));
    let group = device.create_bind_group_layout(&object(&[
        ("label", label.clone()),
        ("entries", entries.into()),
    ]));
    let layout = device.create_pipeline_layout(&object(&[
        ("label", label.clone()),
        ("bindGroupLayouts", js_sys::Array::of1(&group).into()),
    ]));
    let stage = object(&[("module", module), ("entryPoint", p.entry().into())]);
    Some(device.create_compute_pipeline_async(&object(&[
        ("label", label),
        ("layout", layout),
        ("compute", stage.into()),
    ])))
}

/// A bind group layout entry as wgpu's WebGPU backend writes it.
fn layout_entry(e: &wgpu::BindGroupLayoutEntry) -> Option<js_sys::Object> {
    let mut fields = vec![
        ("binding", JsValue::from(e.binding)),
        ("visibility", JsValue::from(e.visibility.bits())),
    ];
    match e.ty {
        wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset,
            min_binding_size,
        } => {
            let ty = match ty {
                wgpu::BufferBindingType::Uniform => "uniform",
                wgpu::BufferBindingType::Storage { read_only: false } => "storage",
                wgpu::BufferBindingType::Storage { read_only: true } => "read-only-storage",
            };
            let mut buffer = vec![
                ("type", JsValue::from_str(ty)),
                ("hasDynamicOffset", has_dynamic_offset.into()),
            ];
            if let Some(size) = min_binding_size {
                buffer.push(("minBindingSize", (size.get() as f64).into()));
            }
            fields.push(("buffer", object(&buffer).into()));
        }
        wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Uint,
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled,
        } => {
            let texture = object(&[
                ("sampleType", "uint".into()),
                ("viewDimension", "2d".into()),
                ("multisampled", multisampled.into()),
            ]);
            fields.push(("texture", texture.into()));
        }
        _ => return None,
    }
    Some(object(&fields))
}

fn object(fields: &[(&str, JsValue)]) -> js_sys::Object {
    let o = js_sys::Object::new();
    for (name, value) in fields {
        // Setting a property of a fresh plain object cannot fail.
        let _ = js_sys::Reflect::set(&o, &JsValue::from_str(name), value);
    }
    o
}
