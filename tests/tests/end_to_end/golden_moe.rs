//! The tiny random-weight mixture-of-experts models (tests/fixtures/models,
//! see ../shared/models.md) against llama.cpp's reference logits: qwen3moe
//! (q/k norms, normalized top-2 of 8, Q8_0 and F16), qwen2moe (q/k/v biases,
//! unnormalized weights, sigmoid-gated shared expert, untied head) and a
//! Mixtral-style llama. Their logits are chaotic, so a wrong expert choice or
//! weight shows as a large difference; tolerances in `wick_tests::TOLERANCE`,
//! and positions where the router sits within llama.cpp's rounding noise of a
//! tie are left out (`wick_tests::route_ambiguous` says why and how).

use wick_tests::check_golden_moe;

const FILE: &str = "llamacpp_public.json";

#[test]
fn qwen3moe_q8_0_matches_llama_cpp() {
    check_golden_moe("tiny-qwen3moe.q8_0.gguf", FILE, 64);
}

#[test]
fn qwen3moe_f16_matches_llama_cpp() {
    check_golden_moe("tiny-qwen3moe.f16.gguf", FILE, 64);
}

#[test]
fn qwen2moe_matches_llama_cpp() {
    check_golden_moe("tiny-qwen2moe.q8_0.gguf", FILE, 64);
}

#[test]
fn mixtral_style_llama_matches_llama_cpp() {
    check_golden_moe("tiny-mixtral.q8_0.gguf", FILE, 64);
}
