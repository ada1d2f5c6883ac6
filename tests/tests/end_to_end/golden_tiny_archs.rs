//! The architectures learned from tiny random-weight files
//! (../shared/models.md: a real tokenizer of each family and the
//! architecture's real metadata) against llama.cpp's logits at every
//! position of three prompts each, at the context llama.cpp ran each with:
//! prompt ids equal, each reference top-20 logit within
//! `wick_tests::TOLERANCE`, the argmax equal where llama.cpp's margin is
//! clear. What each file exercises, and how far llama.cpp's logits move
//! without it, is in ../shared/models.md: Gemma 2's two soft-caps and
//! every-other sliding window, Phi-3's fused tensors and LongRoPE (both
//! factor sets: its cases run at 512 positions, past the original 256, and
//! at 256), SmolLM3's NoPE layer, dense Qwen3's q/k norms.
//!
//! Random weights make these logits chaotic: a rounding anywhere can grow
//! through the layers. Two things follow.
//! - The comparison runs wick with 8-bit activations (`ActDtype::Q8`), the
//!   rounding llama.cpp's CPU backend applies to the input of every Q8_0
//!   dot product, against llama.cpp with the same KV cache type: its f16
//!   golden file with wick's f16 cache, and its f32 run over the same ids
//!   (`llamacpp_tiny_archs_f32kv.json`) with wick's f32 cache. With f32
//!   activations wick's logits are nearer the exact ones but farther from
//!   llama.cpp's (up to 1.7 on Phi-3 where the 8-bit path is within 0.4);
//!   that path is checked against the f64 CPU reference instead
//!   (`reference_tiny_archs.rs`).
//! - Where llama.cpp's own f16 and f32 runs are more than `TOLERANCE` apart
//!   at a position (Gemma 2 has one: 3.9), llama.cpp's logits there are no
//!   reference, and the position is skipped, as `route_ambiguous` skips
//!   MoE near-ties.
//!
//! Each file's distance to llama.cpp is logged beside llama.cpp's own
//! distance between its f16 and f32 KV caches on the same cases
//! (`llamacpp_tiny_archs_kv_distance.json`; both files come from
//! tests/fixtures/golden/tiny_archs/kv_distance.sh).

use wick::pipeline::{ActDtype, KvDtype};
use wick_tests::{check_cases_skipping, golden, workspace_root, GoldenCase, TOLERANCE};

const F16_GOLDEN: &str = "llamacpp_tiny_archs_public.json";
const F32_GOLDEN: &str = "llamacpp_tiny_archs_f32kv.json";
const KV_DISTANCE: &str = "llamacpp_tiny_archs_kv_distance.json";

/// Per case, per position: whether llama.cpp's f16 and f32 KV runs differ
/// by more than `TOLERANCE` on an id of both top-20s.
fn unstable(f16: &[GoldenCase], f32: &[GoldenCase]) -> Vec<Vec<bool>> {
    assert_eq!(f16.len(), f32.len());
    f16.iter()
        .zip(f32)
        .map(|(a, b)| {
            assert_eq!((&a.prompt, a.n_ctx), (&b.prompt, b.n_ctx), "the same cases");
            a.topk_per_position
                .iter()
                .zip(&b.topk_per_position)
                .map(|(ta, tb)| {
                    ta.iter().any(|&(id, la)| {
                        tb.iter()
                            .any(|&(jd, lb)| id == jd && (la - lb).abs() > TOLERANCE)
                    })
                })
                .collect()
        })
        .collect()
}

/// llama.cpp's (largest, mean) f16-vs-f32 KV distance for `model`.
fn llama_cpp_noise(model: &str) -> (f32, f32) {
    #[derive(serde::Deserialize)]
    struct Entry {
        model: String,
        max_abs: f32,
        mean_abs: f32,
    }
    let path = workspace_root()
        .join("tests/fixtures/golden")
        .join(KV_DISTANCE);
    let all: Vec<Entry> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let e = all.into_iter().find(|e| e.model == model).unwrap();
    (e.max_abs, e.mean_abs)
}

fn matches_llama_cpp(model: &str) {
    let f16 = golden(F16_GOLDEN, model).cases;
    let f32 = golden(F32_GOLDEN, model).cases;
    let skip = unstable(&f16, &f32);
    let (noise_max, noise_mean) = llama_cpp_noise(model);
    for (cases, kv) in [(&f16, KvDtype::F16), (&f32, KvDtype::F32)] {
        let mut contexts: Vec<usize> = cases.iter().map(|c| c.n_ctx.unwrap()).collect();
        contexts.sort();
        contexts.dedup();
        let (mut worst, mut mean, mut n) = (0.0f32, 0.0f32, 0);
        for ctx_len in contexts {
            let at: Vec<(&GoldenCase, Vec<bool>)> = cases
                .iter()
                .zip(&skip)
                .filter(|(c, _)| c.n_ctx == Some(ctx_len))
                .map(|(c, s)| (c, s.clone()))
                .collect();
            for (w, m) in check_cases_skipping(model, &at, ctx_len, kv, ActDtype::Q8, TOLERANCE) {
                (worst, mean, n) = (worst.max(w), mean + m, n + 1);
            }
        }
        eprintln!(
            "{model} kv {}: max {worst:.4} mean {:.4} from llama.cpp; llama.cpp f16 vs f32 KV: max {noise_max:.4} mean {noise_mean:.4}",
            kv.name(),
            mean / n as f32
        );
    }
}

#[test]
fn tiny_gemma2_matches_llama_cpp() {
    matches_llama_cpp("tiny-gemma2.q8_0.gguf");
}

#[test]
fn tiny_phi3_matches_llama_cpp_with_long_and_short_factors() {
    matches_llama_cpp("tiny-phi3.q8_0.gguf");
}

#[test]
fn tiny_smollm3_matches_llama_cpp() {
    matches_llama_cpp("tiny-smollm3.q8_0.gguf");
}

#[test]
fn tiny_qwen3_matches_llama_cpp() {
    matches_llama_cpp("tiny-qwen3.q8_0.gguf");
}
