//! Dense Qwen3 (q/k norms, half-split RoPE, no biases) end to end against
//! the f64 CPU reference. No dense Qwen3 file ships in a registry, so the
//! model is built here from the tiny-qwen3moe fixture: its attention, norms,
//! embeddings and tokenizer unchanged, its experts replaced by a dense
//! SwiGLU MLP of seeded random Q8_0 weights, under `qwen3` metadata.

use rand::{Rng, SeedableRng};
use wick::format::gguf::GgufFile;
use wick::format::gguf_write::GgufWriter;
use wick::format::quant::{quantize, GgmlType};
use wick::format::MetaValue;
use wick::pipeline::{ActDtype, KvDtype, PipelineOptions};
use wick::Engine;
use wick_tests::reference::RefLlama;
use wick_tests::{gpu, max_abs_diff, model_path};

const FFN: u64 = 128;

/// Seeded values in [-0.5, 0.5).
fn seeded(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-0.5f32..0.5)).collect()
}

fn dense_qwen3() -> Vec<u8> {
    let bytes = std::fs::read(model_path("tiny-qwen3moe.q8_0.gguf")).unwrap();
    let moe = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &moe.metadata {
        if k.contains("expert") {
            continue;
        }
        let v = if k == "general.architecture" {
            MetaValue::String("qwen3".into())
        } else {
            v.clone()
        };
        w = w.meta(k.replace("qwen3moe.", "qwen3."), v);
    }
    // The fixture's metadata already says 128 for a dense MLP.
    assert_eq!(moe.meta_u64("qwen3moe.feed_forward_length").unwrap(), FFN);
    for t in moe
        .tensors
        .iter()
        .filter(|t| !t.name.contains("ffn_gate_inp") && !t.name.contains("_exps"))
    {
        w = w.tensor(
            &t.name,
            &t.dims,
            t.dtype,
            moe.tensor_bytes(&bytes, t).unwrap().to_vec(),
        );
    }
    let d = 64u64;
    for l in 0..2u64 {
        for (i, (name, dims)) in [
            ("ffn_gate", [d, FFN]),
            ("ffn_up", [d, FFN]),
            ("ffn_down", [FFN, d]),
        ]
        .into_iter()
        .enumerate()
        {
            let values = seeded((dims[0] * dims[1]) as usize, 10 * l + i as u64);
            let q = quantize(GgmlType::Q8_0, &values).unwrap();
            w = w.tensor(format!("blk.{l}.{name}.weight"), &dims, GgmlType::Q8_0, q);
        }
    }
    w.to_bytes()
}

#[test]
fn dense_qwen3_matches_cpu_reference() {
    let bytes = dense_qwen3();
    let reference = RefLlama::load(&bytes);
    // The reference keeps K and V exact: the f32 cache.
    let opts = PipelineOptions {
        ctx_len: Some(32),
        kv_dtype: KvDtype::F32,
        act_dtype: ActDtype::F32,
        ..Default::default()
    };
    let mut engine = pollster::block_on(Engine::load(gpu(), &bytes, &opts, &mut |_| {})).unwrap();
    assert_eq!(engine.pipeline.model().config.architecture, "qwen3");
    let ids = engine
        .tokenize_prompt("The capital of France is Paris")
        .unwrap();
    let want = reference.forward(&ids);
    let got = pollster::block_on(engine.pipeline.prefill(&ids, ids.len())).unwrap();
    for (pos, (g, w)) in got.iter().zip(&want).enumerate() {
        let worst = max_abs_diff(g, w);
        // As in reference_moe.rs: f32 vs f64 accumulation is ~1e-5 here.
        assert!(worst < 1e-3, "position {pos}: max |GPU - CPU| = {worst}");
    }
}

#[test]
fn qwen3_without_qk_norms_is_refused() {
    let bytes = dense_qwen3();
    let file = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &file.metadata {
        w = w.meta(k, v.clone());
    }
    for t in file
        .tensors
        .iter()
        .filter(|t| !t.name.ends_with("attn_k_norm.weight"))
    {
        w = w.tensor(
            &t.name,
            &t.dims,
            t.dtype,
            file.tensor_bytes(&bytes, t).unwrap().to_vec(),
        );
    }
    let opts = PipelineOptions::default();
    let err = pollster::block_on(Engine::load(gpu(), &w.to_bytes(), &opts, &mut |_| {}))
        .err()
        .expect("loaded without k norms");
    assert!(
        err.to_string().contains("blk.0.attn_k_norm.weight"),
        "{err}"
    );
}
