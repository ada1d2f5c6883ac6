//! Loading: streamed in chunks equals loaded whole, and every bad file is a
//! typed error naming the problem, found before any weight is uploaded.

use std::sync::Arc;

use wick::format::gguf::GgufFile;
use wick::format::gguf_write::GgufWriter;
use wick::format::quant::GgmlType;
use wick::format::MetaValue;
use wick::gpu::{GpuContext, WeightStore};
use wick::model::ModelError;
use wick::pipeline::PipelineOptions;
use wick::{engine::ModelLoader, WickError};
use wick_tests::{gpu, model_path};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn opts() -> PipelineOptions {
    PipelineOptions {
        ctx_len: Some(16),
        ..Default::default()
    }
}

fn load_in_chunks(bytes: &[u8], sizes: &[usize]) -> Result<wick::Engine, WickError> {
    load_in_chunks_on(gpu(), bytes, sizes)
}

fn load_in_chunks_on(
    ctx: Arc<GpuContext>,
    bytes: &[u8],
    sizes: &[usize],
) -> Result<wick::Engine, WickError> {
    let mut loader = ModelLoader::new(ctx, opts());
    let mut at = 0;
    let mut i = 0;
    while at < bytes.len() {
        let n = sizes[i % sizes.len()].min(bytes.len() - at);
        loader.push(&bytes[at..at + n])?;
        at += n;
        i += 1;
    }
    loader.finish()
}

#[test]
fn streamed_load_equals_whole_load() {
    let bytes = std::fs::read(model_path(MODEL)).unwrap();
    // Odd chunk sizes: the header and most tensors span several chunks.
    let mut streamed = load_in_chunks(&bytes, &[1, 4093, 65_537, 1 << 20, 7]).unwrap();
    let mut whole = load_in_chunks(&bytes, &[bytes.len()]).unwrap();
    let ids = whole.tokenize_prompt("Streaming works").unwrap();
    let a = pollster::block_on(whole.pipeline.prefill(&ids, 1)).unwrap();
    let b = pollster::block_on(streamed.pipeline.prefill(&ids, 1)).unwrap();
    assert_eq!(a, b);
}

/// In storage buffers (the browser's store; natively lavapipe keeps weights
/// in textures) a matrix that spans chunks is written as its rows arrive
/// (`MatrixUpload`), and a fused group's last member joined row by row with
/// the others (`FusedTail`): the same logits as the whole file, with chunks
/// that cut rows, blocks and words. tiny-qwen3 has fused q/k/v (a
/// concatenation) and gate/up (an interleaved pair); in 4 to 64 KiB chunks
/// every one of its matrices spans several (SmolLM2 takes a minute more on
/// lavapipe for nothing new).
#[test]
fn streamed_rows_in_buffers_equal_whole_load() {
    let ctx = Arc::new(
        pollster::block_on(GpuContext::with_weight_store(Some(WeightStore::Buffers))).unwrap(),
    );
    let bytes = std::fs::read(model_path("tiny-qwen3.q8_0.gguf")).unwrap();
    let mut whole = load_in_chunks_on(ctx.clone(), &bytes, &[bytes.len()]).unwrap();
    let ids = whole.tokenize_prompt("Streaming works").unwrap();
    let want = pollster::block_on(whole.pipeline.prefill(&ids, 1)).unwrap();
    drop(whole);
    for sizes in [&[1, 4093, 65_537, 1 << 20, 7][..], &[4093, 65_537, 7]] {
        let mut streamed = load_in_chunks_on(ctx.clone(), &bytes, sizes).unwrap();
        let got = pollster::block_on(streamed.pipeline.prefill(&ids, 1)).unwrap();
        assert_eq!(got, want, "chunks of {sizes:?}");
    }
    // Expert stacks stream too, in parts of whole experts.
    let bytes = std::fs::read(model_path("tiny-qwen3moe.q8_0.gguf")).unwrap();
    let mut whole = load_in_chunks_on(ctx.clone(), &bytes, &[bytes.len()]).unwrap();
    let want = pollster::block_on(whole.pipeline.prefill(&ids, 1)).unwrap();
    drop(whole);
    let mut streamed = load_in_chunks_on(ctx.clone(), &bytes, &[4093, 65_537, 7]).unwrap();
    let got = pollster::block_on(streamed.pipeline.prefill(&ids, 1)).unwrap();
    assert_eq!(got, want, "tiny-qwen3moe");
}

#[test]
fn truncated_file_is_a_typed_error() {
    let bytes = std::fs::read(model_path(MODEL)).unwrap();
    for cut in [10, 1000, bytes.len() / 2, bytes.len() - 1] {
        let err = load_in_chunks(&bytes[..cut], &[1 << 20])
            .err()
            .expect("truncated file loaded");
        assert!(
            matches!(err, WickError::Model(ModelError::Truncated(_))),
            "cut at {cut}: {err}"
        );
    }
}

/// A GGUF with SmolLM2's header (tokenizer included) but a changed
/// architecture or one tensor re-typed, and no real weights.
fn edited_header(arch: &str, retype: Option<(&str, GgmlType)>) -> Vec<u8> {
    let bytes = std::fs::read(model_path(MODEL)).unwrap();
    let gguf = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &gguf.metadata {
        let v = if k == "general.architecture" {
            MetaValue::String(arch.into())
        } else {
            v.clone()
        };
        let k = k.replace("llama.", &format!("{arch}."));
        w = w.meta(&k, v);
    }
    for t in &gguf.tensors {
        let dtype = match retype {
            Some((name, dtype)) if name == t.name => dtype,
            _ => t.dtype,
        };
        let n = dtype.row_bytes(t.n_elements).unwrap() as usize;
        w = w.tensor(&t.name, &t.dims, dtype, vec![0u8; n]);
    }
    w.to_bytes()
}

/// SmolLM2's header with its vocabulary cut to its first 100 tokens (the
/// embedding keeps its 49,152 rows): refused before anything uploads.
#[test]
fn a_vocabulary_shorter_than_the_embedding_is_refused() {
    let bytes = std::fs::read(model_path(MODEL)).unwrap();
    let gguf = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &gguf.metadata {
        let v = match v {
            MetaValue::Array(items) if k.starts_with("tokenizer.ggml.token") => {
                MetaValue::Array(items[..100].to_vec())
            }
            v => v.clone(),
        };
        w = w.meta(k, v);
    }
    for t in &gguf.tensors {
        let n = t.dtype.row_bytes(t.n_elements).unwrap() as usize;
        w = w.tensor(&t.name, &t.dims, t.dtype, vec![0u8; n]);
    }
    let bytes = w.to_bytes();
    let err = load_in_chunks(&bytes, &[bytes.len()]).err().unwrap();
    assert!(
        matches!(
            &err,
            WickError::Model(ModelError::VocabularyMismatch {
                tokens: 100,
                rows: 49152,
                ..
            })
        ),
        "{err}"
    );
}

#[test]
fn unknown_architecture_is_refused_by_name() {
    let bytes = edited_header("mamba", None);
    let err = load_in_chunks(&bytes, &[bytes.len()]).err().unwrap();
    assert!(
        matches!(&err, WickError::Model(ModelError::UnsupportedArchitecture(a)) if a == "mamba"),
        "{err}"
    );
}

#[test]
fn unsupported_quant_type_is_refused_by_tensor_name() {
    let bytes = edited_header("llama", Some(("blk.3.ffn_up.weight", GgmlType::Q5_1)));
    // A context of its own, so its counters see only this load.
    let ctx = std::sync::Arc::new(pollster::block_on(wick::gpu::GpuContext::new()).unwrap());
    let mut loader = ModelLoader::new(ctx.clone(), opts());
    let err = loader.push(&bytes).err().unwrap();
    match &err {
        WickError::Model(ModelError::UnsupportedQuant { tensor, dtype }) => {
            assert_eq!(
                (tensor.as_str(), dtype.as_str()),
                ("blk.3.ffn_up.weight", "Q5_1")
            );
        }
        other => panic!("{other}"),
    }
    // Refused from the header, before any tensor was uploaded.
    assert_eq!(ctx.counters.snapshot().buffers_created, 0);
}

const MOE: &str = "tiny-qwen2moe.q8_0.gguf";

/// The qwen2moe fixture with metadata values replaced, one tensor re-typed
/// or re-shaped (its bytes sized to match), or dropped.
fn edited_moe(
    meta: &[(&str, MetaValue)],
    tensor: Option<(&str, GgmlType, Vec<u64>)>,
    drop: Option<&str>,
) -> Vec<u8> {
    edited(MOE, meta, tensor, drop)
}

/// Model file `model` with metadata values replaced or added, one tensor
/// re-typed, re-shaped (its bytes sized to match; zeros) or added, or one
/// dropped.
fn edited(
    model: &str,
    meta: &[(&str, MetaValue)],
    tensor: Option<(&str, GgmlType, Vec<u64>)>,
    drop: Option<&str>,
) -> Vec<u8> {
    let bytes = std::fs::read(model_path(model)).unwrap();
    let gguf = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &gguf.metadata {
        let v = meta
            .iter()
            .find(|(name, _)| name == k)
            .map_or(v, |(_, new)| new);
        w = w.meta(k, v.clone());
    }
    for (k, v) in meta.iter().filter(|(k, _)| gguf.meta(k).is_none()) {
        w = w.meta(*k, v.clone());
    }
    if let Some((name, dtype, dims)) = tensor.as_ref().filter(|t| gguf.tensor(t.0).is_none()) {
        let elements: u64 = dims.iter().product();
        w = w.tensor(
            *name,
            dims,
            *dtype,
            vec![0u8; dtype.row_bytes(elements).unwrap() as usize],
        );
    }
    for t in gguf
        .tensors
        .iter()
        .filter(|t| Some(t.name.as_str()) != drop)
    {
        let (dtype, dims) = match &tensor {
            Some((name, dtype, dims)) if *name == t.name => (*dtype, dims.clone()),
            _ => (t.dtype, t.dims.clone()),
        };
        let data = if (dtype, &dims) == (t.dtype, &t.dims) {
            gguf.tensor_bytes(&bytes, t).unwrap().to_vec()
        } else {
            let elements: u64 = dims.iter().product();
            vec![0u8; dtype.row_bytes(elements).unwrap() as usize]
        };
        w = w.tensor(&t.name, &dims, dtype, data);
    }
    w.to_bytes()
}

fn moe_load_error(bytes: &[u8]) -> ModelError {
    match load_in_chunks(bytes, &[bytes.len()]).err().expect("loaded") {
        WickError::Model(e) => e,
        other => panic!("{other}"),
    }
}

#[test]
fn bad_mixture_of_experts_files_are_typed_errors() {
    // The fixture itself, rewritten unchanged, loads.
    let ok = edited_moe(&[], None, None);
    load_in_chunks(&ok, &[ok.len()]).unwrap();

    let err = moe_load_error(&edited_moe(
        &[("qwen2moe.expert_used_count", MetaValue::U32(9))],
        None,
        None,
    ));
    assert!(
        matches!(&err, ModelError::OutOfBounds { key, value: 9, max: 8 } if key == "qwen2moe.expert_used_count"),
        "{err}"
    );

    // A stack of 4 experts where the metadata says 8.
    let name = "blk.1.ffn_up_exps.weight";
    let err = moe_load_error(&edited_moe(
        &[],
        Some((name, GgmlType::Q8_0, vec![64, 32, 4])),
        None,
    ));
    assert!(
        matches!(&err, ModelError::TensorShape { name: n, .. } if n == name),
        "{err}"
    );

    let err = moe_load_error(&edited_moe(
        &[],
        Some((name, GgmlType::Q5_1, vec![64, 32, 8])),
        None,
    ));
    assert!(
        matches!(&err, ModelError::UnsupportedQuant { tensor, dtype } if tensor == name && dtype == "Q5_1"),
        "{err}"
    );

    let shared_gate = "blk.0.ffn_gate_inp_shexp.weight";
    let err = moe_load_error(&edited_moe(&[], None, Some(shared_gate)));
    assert!(
        matches!(&err, ModelError::MissingTensor(n) if n == shared_gate),
        "{err}"
    );
}

/// Gemma 2, Phi-3 and SmolLM3 files that say something wick does not run,
/// or lack what their architecture needs: refused by name before upload.
#[test]
fn bad_gemma2_and_phi3_files_are_typed_errors() {
    let load = |bytes: Vec<u8>| match load_in_chunks(&bytes, &[bytes.len()]) {
        Err(e) => e.to_string(),
        Ok(_) => "loaded".to_string(),
    };
    let gemma2 = "tiny-gemma2.q8_0.gguf";
    let phi3 = "tiny-phi3.q8_0.gguf";
    let cap = [("gemma2.attn_logit_softcapping", MetaValue::F32(-1.0))];
    let m = load(edited(gemma2, &cap, None, None));
    assert!(m.contains("gemma2.attn_logit_softcapping is -1"), "{m}");
    let cap = [("gemma2.final_logit_softcapping", MetaValue::F32(f32::NAN))];
    let m = load(edited(gemma2, &cap, None, None));
    assert!(m.contains("gemma2.final_logit_softcapping is NaN"), "{m}");
    // Gemma 2 has no q/k norms: one in the file would be read and ignored.
    let q_norm = ("blk.0.attn_q_norm.weight", GgmlType::F32, vec![64]);
    let m = load(edited(gemma2, &[], Some(q_norm), None));
    assert!(
        m.contains("'blk.0.attn_q_norm.weight' in a gemma2 file"),
        "{m}"
    );
    let m = load(edited(
        gemma2,
        &[],
        None,
        Some("blk.1.post_ffw_norm.weight"),
    ));
    assert!(m.contains("blk.1.post_ffw_norm.weight"), "{m}");
    // LongRoPE needs both factor sets; a divisor of 0 would make NaN angles.
    let m = load(edited(phi3, &[], None, Some("rope_factors_short.weight")));
    assert!(m.contains("rope_factors_short.weight"), "{m}");
    // Re-typed to F16, so written as zeros.
    let zero = ("rope_factors_long.weight", GgmlType::F16, vec![32]);
    let m = load(edited(phi3, &[], Some(zero), None));
    assert!(m.contains("rope_factors_long.weight holds a value"), "{m}");
    // Gate and up in one tensor of 2 x ffn rows.
    let half = ("blk.0.ffn_up.weight", GgmlType::Q8_0, vec![256, 512]);
    let m = load(edited(phi3, &[], Some(half), None));
    assert!(
        m.contains("blk.0.ffn_up.weight") && m.contains("1024"),
        "{m}"
    );
    let m = load(edited(phi3, &[], None, Some("blk.1.attn_qkv.weight")));
    assert!(m.contains("blk.1.attn_qkv.weight"), "{m}");
}
