//! What `engine.info()` reports: the adapter, the features granted and the
//! compute path in use, the limits that matter, the model's shape.

use serde::Serialize;
use wick::gpu::GpuContext;
use wick::Engine;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    pub version: &'static str,
    pub adapter: Adapter,
    pub features: Features,
    /// "f32": every kernel computes in f32 (f16 weights are unpacked with
    /// `unpack2x16float`), so the same kernels run with or without shader-f16.
    pub compute_path: &'static str,
    pub compute_path_note: String,
    /// How the KV cache stores K and V: "f16" (two to a 32-bit word, read
    /// with `unpack2x16float`, so no shader-f16 needed) or "f32".
    pub kv_cache: &'static str,
    /// What decode steps feed the projections after a norm: "f32" or "q8"
    /// (8-bit blocks; the `activations` load option).
    pub activations: &'static str,
    /// How a decode matrix-vector workgroup sums a row's lanes: "serial"
    /// (CPU adapters), "tree" (workgroup memory) or "subgroup".
    pub decode_gemv_reduce: &'static str,
    /// Where weight matrices live: "buffers" (storage buffers), or
    /// "textures" (natively on llvmpipe only; never in the browser).
    pub weight_store: &'static str,
    pub limits: Limits,
    /// What the engine holds on the GPU now, by its own count.
    pub gpu_memory: GpuMemory,
    /// The GGUF architectures this build runs (`general.architecture`).
    pub supported_architectures: &'static [&'static str],
    pub model: Model,
}

/// The engine's counters of live GPU resources (`GpuContext::live_memory`):
/// back to their value before the load once the engine is disposed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuMemory {
    pub live_bytes: u64,
    pub live_buffers: u64,
    pub live_bind_groups: u64,
}

impl GpuMemory {
    pub fn now(ctx: &GpuContext) -> GpuMemory {
        let live = ctx.live_memory();
        GpuMemory {
            live_bytes: live.bytes,
            live_buffers: live.buffers,
            live_bind_groups: live.bind_groups,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Adapter {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub is_software: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    pub shader_f16: bool,
    pub subgroups: bool,
    pub timestamp_query: bool,
    /// WGSL's `dot4I8Packed`: with `activations: "q8"`, decode's GEMVs over
    /// Q4_0 / Q4_1 / Q5_0 (and Q8_0 on GPUs) use integer dot products.
    pub packed_dot4: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// "adapter" (the largest it offers) or "default" (WebGPU's defaults):
    /// the `limits` load option.
    pub requested: &'static str,
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_compute_invocations_per_workgroup: u32,
    /// Bytes of device memory the adapter reports; `None` in the browser
    /// (WebGPU reports none), where the memory preflight checks the buffer
    /// limits only.
    pub device_memory: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub name: Option<String>,
    pub architecture: String,
    pub n_layers: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    /// Attention scores and output logits soft-capped at these (Gemma 2).
    pub attention_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// The sliding window of the local layers, where the model has them.
    pub sliding_window: Option<u32>,
    /// Per-pair RoPE frequency divisors in use: "none", "llama3"
    /// (`rope_freqs`), or LongRoPE's "long" or "short" set, chosen by the
    /// context length against the original one.
    pub rope_factors: &'static str,
    /// Layers without any position embedding (SmolLM3's NoPE layers).
    pub unrotated_layers: Vec<usize>,
    /// Mixture of experts: how many, and how many each token uses.
    pub experts: Option<Experts>,
    pub vocab_size: usize,
    pub context_train: usize,
    /// Positions the KV cache holds.
    pub context_length: usize,
    pub has_chat_template: bool,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    pub stop_ids: Vec<u32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Experts {
    pub count: usize,
    pub used: usize,
    pub ffn_dim: usize,
    pub shared_ffn_dim: Option<usize>,
}

pub fn collect(ctx: &GpuContext, engine: &Engine, has_chat_template: bool) -> Info {
    let a = &ctx.adapter;
    let f = ctx.features;
    let c = &engine.pipeline.model().config;
    let t = &engine.tokenizer;
    Info {
        version: env!("CARGO_PKG_VERSION"),
        adapter: Adapter {
            name: a.name.clone(),
            backend: a.backend.clone(),
            device_type: a.device_type.clone(),
            driver: a.driver.clone(),
            is_software: ctx.tuning.class.is_cpu(),
        },
        features: Features {
            shader_f16: f.shader_f16,
            subgroups: f.subgroups,
            timestamp_query: f.timestamp_query,
            packed_dot4: f.packed_dot4,
        },
        compute_path: "f32",
        compute_path_note: format!(
            "kernels compute in f32 and unpack f16/quantized weights in the shader; \
             shader-f16 is {} on this adapter and not required",
            if f.shader_f16 {
                "available"
            } else {
                "not available"
            }
        ),
        kv_cache: engine.pipeline.kv_dtype().name(),
        activations: engine.pipeline.act_dtype().name(),
        decode_gemv_reduce: ctx.tuning.gemv_reduce.name(),
        weight_store: ctx.weight_store.name(),
        limits: Limits {
            requested: ctx.device_limits.name(),
            max_buffer_size: ctx.limits.max_buffer_size,
            max_storage_buffer_binding_size: ctx.limits.max_storage_buffer_binding_size,
            max_compute_invocations_per_workgroup: ctx.limits.max_compute_invocations_per_workgroup,
            device_memory: ctx.device_memory,
        },
        gpu_memory: GpuMemory::now(ctx),
        supported_architectures: &wick::model::ARCHITECTURES,
        model: Model {
            name: engine
                .gguf
                .meta_str_opt("general.name")
                .ok()
                .flatten()
                .map(str::to_string),
            architecture: c.architecture.clone(),
            n_layers: c.n_layers,
            d_model: c.d_model,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            ffn_dim: c.ffn_dim,
            attention_softcap: c.attn_softcap,
            final_softcap: c.final_softcap,
            sliding_window: c.sliding_window.as_ref().map(|w| w.window),
            rope_factors: rope_factors(c, engine.pipeline.ctx_len()),
            unrotated_layers: (0..c.n_layers).filter(|&l| !c.rotates(l)).collect(),
            experts: c.moe.as_ref().map(|m| Experts {
                count: m.n_experts,
                used: m.top_k,
                ffn_dim: m.expert_ffn,
                shared_ffn_dim: m.shared_ffn,
            }),
            vocab_size: c.vocab_size,
            context_train: c.ctx_train,
            context_length: engine.pipeline.ctx_len(),
            has_chat_template,
            bos_id: t.bos_id(),
            eos_id: t.eos_id(),
            stop_ids: t.stop_ids(),
        },
    }
}

/// The name of the frequency divisors a context of `ctx_len` rotates with.
fn rope_factors(c: &wick::model::ModelConfig, ctx_len: usize) -> &'static str {
    use wick::model::config::FreqFactors;
    match c.rope.factors {
        FreqFactors::None => "none",
        FreqFactors::Fixed => "llama3",
        FreqFactors::LongShort if c.rope.long_factors_at(ctx_len) => "long",
        FreqFactors::LongShort => "short",
    }
}
