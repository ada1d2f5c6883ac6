//! Qwen2.5-Coder-0.5B-Instruct (Q4_K / Q5_0 / Q6_K / Q8_0; q/k/v biases,
//! untied head, 151936-token vocabulary) against llama.cpp's reference logits.

use wick_tests::check_golden_file;

#[test]
fn qwen2_matches_llama_cpp() {
    check_golden_file(
        "qwen2.5-coder-0.5b-instruct-awq.gguf",
        "llamacpp_public.json",
        64,
    );
}
