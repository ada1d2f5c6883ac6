//! The preflight counts what loading allocates, to the byte, and refuses
//! what does not fit from the header alone.

use std::sync::Arc;

use super::*;
use crate::engine::ModelLoader;
use crate::format::gguf::GgufFile;
use crate::format::quant::GgmlType;
use crate::gpu::GpuError;
use crate::model::loader::check_needs;
use crate::model::synthetic::{Arch, SyntheticModel, ARCHS, LLAMA_3_1_70B};

fn own_ctx() -> Arc<GpuContext> {
    Arc::new(pollster::block_on(GpuContext::new()).expect("a GPU adapter (lavapipe)"))
}

/// The preflight of a synthetic model's header, as the loader runs it.
fn preflight(
    ctx: &GpuContext,
    model: &SyntheticModel,
    opts: &PipelineOptions,
) -> Result<Fit, WickError> {
    let mut header = Vec::new();
    let _ = model.stream(|chunk| {
        header.extend_from_slice(chunk);
        Err(()) // the header is the first chunk
    });
    preflight_bytes(ctx, &header, opts)
}

/// The preflight of a file's header (`bytes` starts with it).
fn preflight_bytes(
    ctx: &GpuContext,
    bytes: &[u8],
    opts: &PipelineOptions,
) -> Result<Fit, WickError> {
    let file = GgufFile::parse_header(bytes).unwrap();
    let plan = Plan::for_file(&file).unwrap();
    let found = check_needs(&file, &plan.needs).unwrap();
    let typed: Vec<_> = found
        .iter()
        .map(|(info, need)| (info.dtype, need))
        .collect();
    check(ctx, &plan, &typed, opts)
}

fn small(name: &'static str, base: &Arch) -> Arch {
    Arch {
        name,
        n_layers: 2,
        d_model: 256,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        ffn_dim: 512,
        vocab_size: 300,
        ..base.clone()
    }
}

/// Loads each model and checks the live bytes grew by exactly the
/// footprint the preflight computed: weights in their GPU layout (fused,
/// split, padded), cache, scratch, staging and sampler.
#[test]
fn the_footprint_is_what_loading_allocates() {
    let ctx = own_ctx();
    let cases = [
        // Fused q/k/v with biases, fused gate/up, tied head, Q5_0 fallback.
        (
            small("qwen2-like", &ARCHS[1]),
            GgmlType::Q4_K,
            KvDtype::F16,
            48,
        ),
        // Untied head, F16 matrices (no repacking), an f32 cache.
        (
            small("llama-like", &ARCHS[3]),
            GgmlType::F16,
            KvDtype::F32,
            100,
        ),
        (
            small("llama-q8", &ARCHS[2]),
            GgmlType::Q8_0,
            KvDtype::F16,
            7,
        ),
    ];
    for (arch, quant, kv_dtype, ctx_len) in cases {
        let model = SyntheticModel::new(&arch, quant).unwrap();
        let opts = PipelineOptions {
            ctx_len: Some(ctx_len),
            kv_dtype,
            prefill_chunk: 5,
            tokens_per_submit: 3,
            ..Default::default()
        };
        let fit = preflight(&ctx, &model, &opts).unwrap();
        assert_eq!(fit.ctx_len, ctx_len);
        let before = ctx.live_memory().bytes;
        let mut loader = ModelLoader::new(ctx.clone(), opts.clone());
        model
            .stream(|chunk| loader.push(chunk).map(|_| ()))
            .unwrap();
        let engine = loader.finish().unwrap();
        let grown = ctx.live_memory().bytes - before;
        assert_eq!(
            grown,
            fit.footprint.total(),
            "{}: {:?}",
            arch.name,
            fit.footprint
        );
        drop(engine);
    }
}

/// Real files: mixtures of experts (stacks split by whole experts, a
/// shared expert, the MoE scratch), and the real models where present.
#[test]
fn real_files_allocate_their_footprint() {
    let ctx = own_ctx();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = [
        "tests/fixtures/models/tiny-qwen2moe.q8_0.gguf",
        "tests/fixtures/models/tiny-mixtral.q8_0.gguf",
        "tests/fixtures/models/tiny-qwen3moe.f16.gguf",
        "models/gemma-3-270m-q4_k_m.gguf",
        "models/SmolLM2-135M-Instruct.Q4_1.gguf",
    ];
    let mut checked = 0;
    for name in files {
        let Ok(bytes) = std::fs::read(root.join(name)) else {
            assert!(
                name.starts_with("models/"),
                "{name}: the fixture is in the repository"
            );
            continue;
        };
        let opts = PipelineOptions {
            ctx_len: Some(40),
            ..Default::default()
        };
        let fit = preflight_bytes(&ctx, &bytes, &opts).unwrap();
        let before = ctx.live_memory().bytes;
        let mut loader = ModelLoader::new(ctx.clone(), opts);
        loader.push(&bytes).unwrap();
        let engine = loader.finish().unwrap();
        let grown = ctx.live_memory().bytes - before;
        assert_eq!(grown, fit.footprint.total(), "{name}: {:?}", fit.footprint);
        drop(engine);
        checked += 1;
    }
    assert!(checked >= 3);
}

#[test]
fn a_70b_model_is_refused_from_its_header() {
    let ctx = own_ctx();
    let Some(memory) = ctx.device_memory else {
        eprintln!("the adapter reports no device memory: nothing to refuse against");
        return;
    };
    let model = SyntheticModel::new(&LLAMA_3_1_70B, GgmlType::Q4_0).unwrap();
    // Through the loader: the header alone is pushed, nothing is uploaded.
    let mut header = Vec::new();
    let _ = model.stream(|chunk| {
        header.extend_from_slice(chunk);
        Err(())
    });
    let mut loader = ModelLoader::new(ctx.clone(), PipelineOptions::default());
    let before = ctx.live_memory();
    let err = loader.push(&header).unwrap_err();
    assert_eq!(ctx.live_memory(), before, "nothing allocated");
    eprintln!("{err}");
    let WickError::DoesNotFit(refusal) = err else {
        panic!("not a DoesNotFit: {err}");
    };
    let n = refusal.needed;
    // 70.6e9 weights at 4.5 bits: about 37 GiB, over any lavapipe heap.
    assert!(n.weights > 36 << 30 && n.weights < 40 << 30, "{n:?}");
    assert!(n.total() > memory);
    assert_eq!(refusal.largest_ctx, 0);
    // The default context: 4096, or what fits one binding if less.
    let per_position = 80 * 1024 * 2; // layers x kv_dim x f16
    let default = (ctx.max_binding_bytes() / per_position).min(4096) as usize;
    assert_eq!(refusal.ctx_len, default);
    let m = refusal.memory.unwrap();
    assert_eq!((m.bytes, m.source), (memory, MemorySource::Device));
    let text = refusal.to_string();
    for part in ["weights", "KV cache", "no context fits", "device memory"] {
        assert!(text.contains(part), "{part}: {text}");
    }
}

#[test]
fn a_context_beyond_the_largest_that_fits_is_refused_with_it() {
    let ctx = own_ctx();
    let model = SyntheticModel::new(&small("ctx-test", &ARCHS[2]), GgmlType::Q8_0).unwrap();
    let base = PipelineOptions {
        memory_budget: Some(64 << 20),
        ..Default::default()
    };
    let fit = preflight(&ctx, &model, &base).unwrap();
    let largest = fit.largest_ctx;
    // 2 layers x 128 kv values x 2 (K, V) x 2 bytes = 1 KiB a position:
    // tens of thousands fit 64 MiB, and the binding bounds it too.
    assert!(largest > 10_000, "{largest}");
    assert_eq!(
        fit.ctx_len, 4096,
        "the default: the training context capped"
    );
    let at = |n: usize| {
        preflight(
            &ctx,
            &model,
            &PipelineOptions {
                ctx_len: Some(n),
                ..base.clone()
            },
        )
    };
    let exact = at(largest).unwrap();
    assert!(exact.footprint.total() <= (64 << 20) - ctx.live_memory().bytes);
    let err = at(largest + 1).unwrap_err();
    let WickError::DoesNotFit(refusal) = &err else {
        panic!("{err}");
    };
    assert_eq!(
        (refusal.ctx_len, refusal.largest_ctx),
        (largest + 1, largest)
    );
    assert!(refusal.needed.total() > refusal.memory.unwrap().available());
    assert!(
        err.to_string()
            .contains(&format!("largest context that fits is {largest} positions")),
        "{err}"
    );
    let err = at(0).unwrap_err();
    assert!(matches!(err, WickError::InvalidOption(_)), "{err}");
    // A context too large to size at all is refused as the buffer it
    // would take, never wrapped to a small one.
    let err = at(usize::MAX).unwrap_err();
    assert!(
        matches!(&err, WickError::Gpu(GpuError::BufferTooLarge { label, .. }) if label == "k cache"),
        "{err}"
    );
    // A budget that the weights alone pass: the default context shrinks
    // to what fits rather than failing.
    let tight = PipelineOptions {
        memory_budget: Some(
            fit.footprint.total() - fit.footprint.kv_cache / 2 + ctx.live_memory().bytes,
        ),
        ..Default::default()
    };
    let fit = preflight(&ctx, &model, &tight).unwrap();
    assert!(
        fit.ctx_len < 4096.min(largest) && fit.ctx_len > 0,
        "{fit:?}"
    );
    assert_eq!(fit.ctx_len, fit.largest_ctx);
}

#[test]
fn the_kv_binding_limit_bounds_the_context_without_a_budget() {
    let ctx = own_ctx();
    let model = SyntheticModel::new(&small("binding-test", &ARCHS[2]), GgmlType::Q8_0).unwrap();
    let opts = PipelineOptions {
        memory_budget: Some(u64::MAX),
        ..Default::default()
    };
    let fit = preflight(&ctx, &model, &opts).unwrap();
    let cfg_bytes_per_pos = 2 * 128 * 2; // layers x kv_dim x f16
    assert_eq!(
        fit.largest_ctx as u64,
        ctx.max_binding_bytes() / cfg_bytes_per_pos
    );
}

#[test]
fn largest_finds_the_last_fitting_value() {
    for cap in [0, 1, 2, 7, 1000] {
        for edge in [0, 1, 3, 999, 5000] {
            let want = edge.min(cap);
            assert_eq!(largest(cap, |n| n <= edge), want, "cap {cap} edge {edge}");
        }
    }
}

#[test]
fn bytes_read_as_units() {
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(1536), "1.50 KiB");
    assert_eq!(human_bytes(3 << 30), "3.00 GiB");
}

/// The preflight from headers alone (`engine::preflight_headers`, what the
/// page asks before a download) reports what the load decides: the same
/// fit for a model that fits, one file or split into shards, and the same
/// refusal, with every number, for one that does not.
#[test]
fn the_header_preflight_reports_what_the_load_decides() {
    use crate::format::gguf_split::SplitWriter;
    let ctx = own_ctx();
    let budget = PipelineOptions {
        memory_budget: Some(64 << 20),
        ..Default::default()
    };
    let model = SyntheticModel::new(&small("llama-like", &ARCHS[3]), GgmlType::Q8_0).unwrap();
    let mut file = Vec::new();
    model
        .stream(|chunk| {
            file.extend_from_slice(chunk);
            Ok::<_, ()>(())
        })
        .unwrap();
    let header = GgufFile::parse_header(&file).unwrap();
    let fit = preflight_bytes(&ctx, &file, &budget).unwrap();
    let report = crate::engine::preflight_headers(&ctx, vec![header.clone()], &budget).unwrap();
    assert!(report.fits());
    assert_eq!(report.fit().unwrap(), fit);
    assert_eq!(report.memory.map(|m| m.source), Some(MemorySource::Budget));
    assert_eq!(report.max_binding, ctx.max_binding_bytes());
    // Split in three: the shards' headers give the same report.
    let mut w = SplitWriter::new(&header, (file.len() / 3) as u64).unwrap();
    let mut shards = vec![Vec::new(); w.count()];
    w.push(&file, &mut |i, b: &[u8]| {
        shards[i].extend_from_slice(b);
        Ok::<_, ()>(())
    })
    .unwrap();
    w.finish().unwrap();
    assert!(shards.len() > 1);
    let headers = shards
        .iter()
        .map(|s| GgufFile::parse_header(s).unwrap())
        .collect();
    let split = crate::engine::preflight_headers(&ctx, headers, &budget).unwrap();
    assert_eq!(split, report);
    // One shard alone is not a model.
    let first = vec![GgufFile::parse_header(&shards[0]).unwrap()];
    assert!(crate::engine::preflight_headers(&ctx, first, &budget).is_err());
    // Too long a context for the budget: reported, not thrown, and its
    // refusal is the load's.
    let long = PipelineOptions {
        ctx_len: Some(report.largest_ctx + 1),
        ..budget
    };
    let report = crate::engine::preflight_headers(&ctx, vec![header], &long).unwrap();
    assert!(!report.fits());
    let load = preflight_bytes(&ctx, &file, &long).unwrap_err();
    assert_eq!(report.fit().unwrap_err().to_string(), load.to_string());
}
