//! `wick info`: what the GPU adapter is and what it granted.

use serde_json::json;
use wick::gpu::GpuContext;
use wick::pipeline::KvDtype;

use crate::CliResult;

pub fn run(as_json: bool) -> CliResult {
    let ctx = pollster::block_on(GpuContext::new())?;
    let report = info_json(&ctx);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let a = &ctx.adapter;
        println!("adapter   {} ({}, {})", a.name, a.backend, a.device_type);
        println!("driver    {} {}", a.driver, a.driver_info);
        if ctx.tuning.class.is_cpu() {
            println!("note      software adapter: correct but slow");
        }
        println!("features  {}", report["features"]);
        println!("paths     {}", report["paths"]);
        println!("limits    {}", report["limits"]);
        println!("models    {}", wick::model::ARCHITECTURES.join(", "));
    }
    Ok(())
}

pub fn info_json(ctx: &GpuContext) -> serde_json::Value {
    let a = &ctx.adapter;
    let f = &ctx.features;
    let l = &ctx.limits;
    json!({
        "adapter": {
            "name": a.name,
            "backend": a.backend,
            "device_type": a.device_type,
            "driver": a.driver,
            "driver_info": a.driver_info,
            "software": ctx.tuning.class.is_cpu(),
            "class": ctx.tuning.class.name(),
        },
        "features": {
            "shader_f16": f.shader_f16,
            "subgroups": f.subgroups,
            "timestamp_query": f.timestamp_query,
            "packed_dot4": f.packed_dot4,
        },
        // Which kernels run: every kernel computes in f32 (f16 and quantized
        // weights are unpacked in the shader); the KV cache is f16 unless
        // `--kv-cache f32`, packed two to a word (core WGSL, no shader-f16).
        "paths": {
            "compute": "f32",
            "kv_cache_default": KvDtype::default().name(),
            "kv_cache_needs_shader_f16": false,
            "decode_attention": "split",
            "decode_gemv_reduce": ctx.tuning.gemv_reduce.name(),
            "prefill_attention": if ctx.tuning.attention_lanes { "lanes" } else { "workgroups" },
            // Weight matrices in storage buffers, or in textures (llvmpipe:
            // its storage loads cost a stall a word; docs/kernels.md). The
            // WICK_WEIGHT_STORE variable overrides it.
            "weight_store": ctx.weight_store.name(),
        },
        // The GGUF architectures (`general.architecture`) wick runs.
        "architectures": wick::model::ARCHITECTURES,
        "limits": {
            "max_storage_buffer_binding_size": l.max_storage_buffer_binding_size,
            "max_uniform_buffer_binding_size": l.max_uniform_buffer_binding_size,
            "max_buffer_size": l.max_buffer_size,
            "max_texture_dimension_2d": l.max_texture_dimension_2d,
            "max_compute_workgroup_storage_size": l.max_compute_workgroup_storage_size,
            "max_compute_invocations_per_workgroup": l.max_compute_invocations_per_workgroup,
            "max_compute_workgroups_per_dimension": l.max_compute_workgroups_per_dimension,
            "max_storage_buffers_per_shader_stage": l.max_storage_buffers_per_shader_stage,
            "min_uniform_buffer_offset_alignment": l.min_uniform_buffer_offset_alignment,
        },
    })
}
