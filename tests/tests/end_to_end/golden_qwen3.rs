//! Dense Qwen3 (per-head q/k RMSNorm, GQA, tied output, Qwen's tokenizer) on
//! its tiny random-weight file (`tiny-qwen3.q8_0.gguf`, ../shared/models.md)
//! against llama.cpp's logits at every position of three prompts
//! (`llamacpp_tiny_archs_public.json`, made with a 256-token context): the
//! prompt ids equal, each reference top-20 logit within
//! `wick_tests::TOLERANCE`, the argmax equal where llama.cpp's margin is
//! clear. Until now dense Qwen3 was checked only against wick's own f64
//! reference (`reference_qwen3.rs`).

use wick_tests::check_golden_file;

#[test]
fn tiny_qwen3_matches_llama_cpp() {
    check_golden_file(
        "tiny-qwen3.q8_0.gguf",
        "llamacpp_tiny_archs_public.json",
        256,
    );
}
