//! tiny-llama3 (random weights, the real Llama 3 tokenizer, Llama 3.2's
//! rope scaling stored as `rope_freqs.weight`) against llama.cpp's logits,
//! with the shared tolerances (`wick_tests::TOLERANCE`, 1.25).
//!
//! Its weights are random, so what this checks is the tokenizer (llama-bpe,
//! 128256 tokens) and the rope frequency factors: at the long prompt's last
//! positions (2,300+) the factors (up to 32) make the low frequencies least
//! like plain RoPE. Measured on lavapipe: wick's largest top-20 logit
//! difference from llama.cpp is 0.18, 0.34 and 0.49 over the three prompts
//! (the golden README puts llama.cpp's own 8-bit activation rounding at
//! ~0.5 on this file); with the factors ignored the long prompt's is 4.13
//! (mean 1.70 against 0.06), so the tolerance tells the two apart.

use wick_tests::check_golden_file;

#[test]
fn llama3_rope_scaling_matches_llama_cpp() {
    // The long prompt is 2,315 tokens, and 8 more are teacher-forced.
    check_golden_file("tiny-llama3.q8_0.gguf", "llamacpp_llama3_public.json", 2400);
}
