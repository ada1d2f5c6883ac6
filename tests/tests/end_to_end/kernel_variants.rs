//! Every kernel variant the engine can ask an adapter to compile, on every
//! adapter class, is whole WGSL: it assembles (`wick::gpu::wgsl`: every
//! `#if` flag given and every block closed, no `{{NAME}}` placeholder left
//! unreplaced, no flag or define given that its text does not use), and
//! naga (wgpu's WGSL front end) parses and validates it. The adapter
//! here is lavapipe, which compiles only its own class's variants; this
//! test assembles the others' (GPUs with and without subgroups, llvmpipe,
//! other CPU adapters) from the same models by giving a context another
//! class's tuning, and checks them without a device of that class.
//!
//! The variants are those the warm-up prepares (`Pipeline::kernel_sources`:
//! every prefill width and the decode step) for models that cover each
//! architecture (llama, qwen2, qwen3, gemma3, the three mixtures of
//! experts), each weight format (synthetic models in the formats no real
//! file here holds), both activation types and both KV cache types. Each
//! load also checks that the pipeline built from the header alone over
//! stand-in weights (`ModelLoader::stand_in_pipeline`, which the page
//! creates its pipelines from while the weights download) names exactly
//! the loaded model's kernels.

use std::sync::Arc;

use wick::engine::ModelLoader;
use wick::gpu::{AdapterClass, GpuContext, Tuning, WeightStore};
use wick::kernels::attention::kv::KvDtype;
use wick::kernels::norm::rms_q8::ActDtype;
use wick::model::synthetic::{Arch, SyntheticModel, ARCHS, QUANTS};
use wick::pipeline::PipelineOptions;
use wick::Engine;
use wick_tests::model_path;

/// The classes, and whether each grants subgroups here.
const CLASSES: [(AdapterClass, bool); 4] = [
    (AdapterClass::Gpu, true),
    (AdapterClass::Gpu, false),
    (AdapterClass::Llvmpipe, true),
    (AdapterClass::OtherCpu, false),
];

/// The model files: each architecture, and the formats they store.
const FILES: [&str; 8] = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-0.5b-instruct-awq.gguf",
    "tiny-qwen3.q8_0.gguf",
    "tiny-qwen3moe.q8_0.gguf",
    "tiny-qwen3moe.f16.gguf",
    "tiny-qwen2moe.q8_0.gguf",
    "tiny-mixtral.q8_0.gguf",
];

/// A context on this adapter that assembles `class`'s variants.
fn context_of(class: AdapterClass, subgroups: bool) -> Arc<GpuContext> {
    let mut ctx = pollster::block_on(GpuContext::new()).expect("a GPU adapter");
    ctx.tuning = Tuning::for_class(class, subgroups);
    ctx.features.subgroups = subgroups;
    ctx.features.subgroup_min_size = if subgroups { 32 } else { 0 };
    ctx.features.packed_dot4 = true;
    ctx.weight_store = match ctx.tuning.weights_in_textures {
        true => WeightStore::Textures,
        false => WeightStore::Buffers,
    };
    Arc::new(ctx)
}

fn options(act_dtype: ActDtype, kv_dtype: KvDtype) -> PipelineOptions {
    PipelineOptions {
        ctx_len: Some(64),
        kv_dtype,
        act_dtype,
        warm_up: false,
        ..Default::default()
    }
}

fn load_file(ctx: &Arc<GpuContext>, file: &str, opts: &PipelineOptions) -> Engine {
    let bytes = std::fs::read(model_path(file)).unwrap();
    let mut loader = ModelLoader::new(ctx.clone(), opts.clone());
    loader
        .push(&bytes)
        .unwrap_or_else(|e| panic!("loading {file}: {e}"));
    finish_checking_stand_ins(loader, file)
}

/// Finishes `loader`, first checking that the kernels its stand-in
/// pipeline names (what a page creates while the weights download) are
/// exactly the loaded engine's, each with the same WGSL.
fn finish_checking_stand_ins(loader: ModelLoader, what: &str) -> Engine {
    let ahead = loader
        .stand_in_pipeline()
        .and_then(|p| Ok(p.kernel_sources()?))
        .unwrap_or_else(|e| panic!("{what}: the stand-in pipeline: {e}"));
    let engine = loader
        .finish()
        .unwrap_or_else(|e| panic!("loading {what}: {e}"));
    let loaded = engine.pipeline.kernel_sources().unwrap();
    let names = |k: &[(String, String)]| k.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ahead), names(&loaded), "{what}: kernels named ahead");
    assert!(
        ahead == loaded,
        "{what}: a kernel's WGSL differs from ahead"
    );
    engine
}

fn load_synthetic(
    ctx: &Arc<GpuContext>,
    arch: &Arch,
    quant: wick::format::quant::GgmlType,
    opts: &PipelineOptions,
) -> Engine {
    let model = SyntheticModel::new(arch, quant).unwrap();
    let mut loader = ModelLoader::new(ctx.clone(), opts.clone());
    model
        .stream(|chunk| loader.push(chunk).map(|_| ()))
        .unwrap();
    finish_checking_stand_ins(loader, &format!("synthetic {}", arch.name))
}

/// Checks each of `engine`'s kernels; returns how many were new.
fn check_sources(
    engine: &Engine,
    what: &str,
    seen: &mut std::collections::HashSet<String>,
) -> usize {
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    );
    let mut new = 0;
    // An error here is the first kernel that does not assemble, by name.
    let sources = engine
        .pipeline
        .kernel_sources()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (name, source) in sources {
        if !seen.insert(source.clone()) {
            continue;
        }
        new += 1;
        // Assembly checks this; a second look, outside comments (a comment
        // may name the placeholders it explains), and for directives.
        for line in source.lines() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(at) = code.find("{{") {
                panic!("{what}: kernel {name} keeps a placeholder: {}", &code[at..]);
            }
            if code.trim_start().starts_with('#') {
                panic!("{what}: kernel {name} keeps a directive: {line}");
            }
        }
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| {
            panic!(
                "{what}: kernel {name} does not parse:\n{}",
                e.emit_to_string(&source)
            )
        });
        if let Err(e) = validator.validate(&module) {
            panic!(
                "{what}: kernel {name} does not validate:\n{}",
                e.emit_to_string(&source)
            );
        }
    }
    new
}

#[test]
fn every_kernel_variant_of_every_adapter_class_is_valid_wgsl() {
    // A small llama of the synthetic kind, in the formats the files above
    // do not store (and those they do: the shapes differ).
    let tiny = Arch {
        name: "variants-test",
        n_layers: 2,
        d_model: 256,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        ffn_dim: 512,
        vocab_size: 300,
        tied: false,
        ..ARCHS[1].clone()
    };
    let mut seen = std::collections::HashSet::new();
    for (class, subgroups) in CLASSES {
        let ctx = context_of(class, subgroups);
        let mut count = 0;
        for act in [ActDtype::F32, ActDtype::Q8] {
            let kv = if act == ActDtype::F32 {
                KvDtype::F16
            } else {
                KvDtype::F32
            };
            let opts = options(act, kv);
            for file in FILES {
                let engine = load_file(&ctx, file, &opts);
                count += check_sources(
                    &engine,
                    &format!("{class:?} (subgroups {subgroups}), {act:?}, {file}"),
                    &mut seen,
                );
            }
            for (name, quant) in QUANTS {
                let engine = load_synthetic(&ctx, &tiny, quant, &opts);
                count += check_sources(
                    &engine,
                    &format!("{class:?} (subgroups {subgroups}), {act:?}, synthetic {name}"),
                    &mut seen,
                );
            }
        }
        eprintln!("{class:?}, subgroups {subgroups}: {count} kernel variants checked");
        assert!(count > 20, "{class:?}: only {count} variants");
    }
}
