//! Gemma 3 270M (Q4_K / Q5_0 / Q6_K / Q8_0; q/k norms, post norms, GELU,
//! sliding-window attention) against llama.cpp's reference logits, including
//! a 600+ token prompt that crosses the 512-token window.

use wick_tests::{check_golden_file, check_long_golden_file, golden};

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

#[test]
fn gemma3_short_prompts_match_llama_cpp() {
    check_golden_file(MODEL, "llamacpp_public.json", 64);
}

#[test]
fn gemma3_long_prompt_across_the_sliding_window_matches_llama_cpp() {
    let long = golden("llamacpp_long_public.json", MODEL);
    assert!(
        long.cases.iter().all(|c| c.prompt_ids.len() > 512),
        "the long prompt must cross the window"
    );
    check_long_golden_file(MODEL, "llamacpp_long_public.json", 640);
}
