//! `wick info`: what the GPU adapter is and what it granted.

use std::path::Path;

use serde_json::json;
use wick::format::gguf::GgufFile;
use wick::format::gguf_split;
use wick::gpu::GpuContext;
use wick::pipeline::KvDtype;

use crate::map_file::map_file;
use crate::CliResult;

/// A GGUF model's header over its shards (headers only: no weights read):
/// its architecture, tensors, and how many files it is split into.
fn model_json(path: &Path) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let files = crate::split::model_files(path)?;
    let mut headers = Vec::with_capacity(files.len());
    for f in &files {
        let bytes = map_file(f)?;
        headers.push(GgufFile::parse(&bytes).map_err(|e| format!("'{}': {e}", f.display()))?);
    }
    let file = match headers.len() {
        1 => {
            gguf_split::check_alone(&headers[0])?;
            headers.remove(0)
        }
        _ => gguf_split::merge(&headers)?.file,
    };
    Ok(json!({
        "path": path.display().to_string(),
        "architecture": file.architecture().ok(),
        "tensors": file.tensors.len(),
        "shards": files.len(),
        "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
    }))
}

pub fn run(as_json: bool, model: Option<&Path>) -> CliResult {
    let ctx = pollster::block_on(GpuContext::new())?;
    let mut report = info_json(&ctx);
    if let Some(path) = model {
        report["model"] = model_json(path)?;
    }
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
        if let Some(m) = report.get("model") {
            println!(
                "model     {}: {}, {} tensors, {} shard{}",
                m["path"].as_str().unwrap_or_default(),
                m["architecture"].as_str().unwrap_or("unknown architecture"),
                m["tensors"],
                m["shards"],
                if m["shards"] == 1 { "" } else { "s" }
            );
        }
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
