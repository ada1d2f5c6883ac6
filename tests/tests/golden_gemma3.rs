//! Gemma 3 270M (Q4_K / Q5_0 / Q6_K / Q8_0; q/k norms, post norms, GELU,
//! sliding-window attention) against llama.cpp's reference logits, including
//! a 600+ token prompt that crosses the 512-token window.

use wick_tests::{check_case, golden, load_engine, CLEAR_MARGIN, TOLERANCE};

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

#[test]
fn gemma3_short_prompts_match_llama_cpp() {
    let mut engine = load_engine(MODEL, 64);
    for case in golden("llamacpp_public.json", MODEL).cases {
        let ids = engine.tokenize_prompt(&case.prompt).unwrap();
        assert_eq!(ids, case.prompt_ids, "{:?}", case.prompt);
        let (worst, mean) = check_case(&mut engine, &case, TOLERANCE, CLEAR_MARGIN);
        eprintln!(
            "{:?}: max |logit diff| {worst:.4}, mean {mean:.4}",
            case.prompt
        );
    }
}

#[test]
fn gemma3_long_prompt_across_the_sliding_window_matches_llama_cpp() {
    let mut engine = load_engine(MODEL, 640);
    for case in golden("llamacpp_long_public.json", MODEL).cases {
        let ids = engine.tokenize_prompt(&case.prompt).unwrap();
        assert_eq!(ids, case.prompt_ids, "long prompt ids");
        assert!(ids.len() > 512, "the long prompt must cross the window");
        let (worst, mean) = check_case(&mut engine, &case, TOLERANCE, CLEAR_MARGIN);
        eprintln!("long prompt: max |logit diff| {worst:.4}, mean {mean:.4}");
    }
}
