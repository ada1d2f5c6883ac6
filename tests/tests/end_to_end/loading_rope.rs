//! Rope scaling through the load path: the tiny Llama 3 fixture's
//! `rope_freqs.weight` loaded and applied, linear scaling read from
//! metadata, and every scaling wick does not implement refused by name from
//! the header, before any weight is uploaded (YaRN end to end:
//! `reference_yarn.rs`).

use std::sync::Arc;

use wick::engine::ModelLoader;
use wick::format::gguf::GgufFile;
use wick::format::gguf_write::GgufWriter;
use wick::format::MetaValue;
use wick::gpu::GpuContext;
use wick::model::config::FreqFactors;
use wick::model::decoder::RopeFactors;
use wick::model::ModelError;
use wick::pipeline::PipelineOptions;
use wick::{Engine, WickError};
use wick_tests::model_path;

const LLAMA3: &str = "tiny-llama3.q8_0.gguf";

/// `file` rewritten with metadata `meta` set (added or replaced), tensor
/// `values` (name, f32 values) written as F32 in place of or after the
/// file's own.
fn edited(file: &str, meta: &[(&str, MetaValue)], values: Option<(&str, Vec<f32>)>) -> Vec<u8> {
    let bytes = std::fs::read(model_path(file)).unwrap();
    let gguf = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &gguf.metadata {
        if !meta.iter().any(|(name, _)| name == k) {
            w = w.meta(k, v.clone());
        }
    }
    for (k, v) in meta {
        w = w.meta(*k, v.clone());
    }
    for t in &gguf.tensors {
        if values.as_ref().is_some_and(|(name, _)| *name == t.name) {
            continue;
        }
        let data = gguf.tensor_bytes(&bytes, t).unwrap().to_vec();
        w = w.tensor(&t.name, &t.dims, t.dtype, data);
    }
    if let Some((name, v)) = values {
        w = w.tensor_f32(name, &[v.len() as u64], &v);
    }
    w.to_bytes()
}

/// Loads `bytes` on a context of its own; returns the result and how many
/// buffers the load created.
fn load(bytes: &[u8]) -> (Result<Engine, WickError>, u64) {
    let ctx = Arc::new(pollster::block_on(GpuContext::new()).unwrap());
    let opts = PipelineOptions {
        ctx_len: Some(64),
        ..Default::default()
    };
    let mut loader = ModelLoader::new(ctx.clone(), opts);
    let result = loader.push(bytes).and_then(|_| loader.finish());
    (result, ctx.counters.snapshot().buffers_created)
}

fn config_error(bytes: &[u8]) -> (String, u64) {
    match load(bytes) {
        (Err(WickError::Model(ModelError::Config(m))), buffers) => (m, buffers),
        (Err(other), _) => panic!("{other}"),
        (Ok(_), _) => panic!("loaded"),
    }
}

#[test]
fn llama3_frequency_factors_are_loaded_and_linear_scaling_read() {
    let (engine, _) = load(&std::fs::read(model_path(LLAMA3)).unwrap());
    let engine = engine.unwrap();
    let model = engine.pipeline.model();
    assert_eq!(model.config.rope.factors, FreqFactors::Fixed);
    assert!(matches!(model.rope_factors, RopeFactors::Fixed(_)));
    assert_eq!(model.config.rope.freq_scale, 1.0);

    let linear = [
        (
            "llama.rope.scaling.type",
            MetaValue::String("linear".into()),
        ),
        ("llama.rope.scaling.factor", MetaValue::F32(4.0)),
    ];
    let (engine, _) = load(&edited(LLAMA3, &linear, None));
    assert_eq!(
        engine.unwrap().pipeline.model().config.rope.freq_scale,
        0.25
    );
}

#[test]
fn scalings_wick_does_not_implement_are_refused_before_upload() {
    for (key, value) in [
        (
            "llama.rope.scaling.type",
            MetaValue::String("longrope".into()),
        ),
        (
            "llama.rope.scaling.type",
            MetaValue::String("dynamic".into()),
        ),
        // LongRoPE's per-pair factors, DeepSeek's mscale.
        ("llama.rope.scaling.long_factor", MetaValue::F32(1.5)),
        ("llama.rope.scaling.mscale_all_dim", MetaValue::F32(1.0)),
    ] {
        let (m, buffers) = config_error(&edited(LLAMA3, &[(key, value)], None));
        assert!(m.contains(key) && m.contains("not implemented"), "{m}");
        assert_eq!(
            buffers, 0,
            "{key}: refused from the header, nothing uploaded"
        );
    }
}

#[test]
fn bad_frequency_factors_are_refused() {
    let mut factors = vec![1.0f32; 32];
    factors[20] = 0.0;
    let (m, _) = config_error(&edited(LLAMA3, &[], Some(("rope_freqs.weight", factors))));
    assert!(m.contains("rope_freqs.weight"), "{m}");

    // Factors where llama.cpp does not apply them.
    let (m, buffers) = config_error(&edited(
        "tiny-qwen3moe.q8_0.gguf",
        &[],
        Some(("rope_freqs.weight", vec![1.0; 8])),
    ));
    assert!(m.contains("rope_freqs.weight in a qwen3moe file"), "{m}");
    assert_eq!(buffers, 0);

    // Too few: a shape error naming the tensor, before upload.
    let bytes = edited(LLAMA3, &[], Some(("rope_freqs.weight", vec![1.0; 31])));
    match load(&bytes) {
        (Err(WickError::Model(ModelError::TensorShape { name, .. })), 0) => {
            assert_eq!(name, "rope_freqs.weight")
        }
        (other, buffers) => panic!("{:?} after {buffers} buffers", other.err()),
    }
}
