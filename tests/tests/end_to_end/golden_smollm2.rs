//! SmolLM2-135M-Instruct (Q4_1 + Q8_0, llama) against llama.cpp's reference
//! logits; tolerances in `wick_tests::TOLERANCE`.

use wick_tests::{check_golden_file, check_long_golden_file};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

#[test]
fn smollm2_short_prompts_match_llama_cpp() {
    check_golden_file(MODEL, "llamacpp_public.json", 64);
}

#[test]
fn smollm2_long_prompt_matches_llama_cpp() {
    check_long_golden_file(MODEL, "llamacpp_long_public.json", 640);
}
