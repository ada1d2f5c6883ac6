//! SmolLM2-135M-Instruct (Q4_1 + Q8_0) against llama.cpp's reference logits.

use wick_tests::{check_case, golden, load_engine, CLEAR_MARGIN, TOLERANCE};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

#[test]
fn prompt_ids_match_llama_cpp() {
    let engine = load_engine(MODEL, 64);
    for case in golden("llamacpp_public.json", MODEL).cases {
        let ids = engine.tokenize_prompt(&case.prompt).unwrap();
        assert_eq!(ids, case.prompt_ids, "{:?}", case.prompt);
    }
}

#[test]
fn short_prompts_match_llama_cpp_logits() {
    let mut engine = load_engine(MODEL, 64);
    for case in golden("llamacpp_public.json", MODEL).cases {
        let (worst, mean) = check_case(&mut engine, &case, TOLERANCE, CLEAR_MARGIN);
        eprintln!(
            "{:?}: max |logit diff| {worst:.4}, mean {mean:.4}",
            case.prompt
        );
    }
}

#[test]
fn long_prompt_matches_llama_cpp_logits() {
    let mut engine = load_engine(MODEL, 640);
    for case in golden("llamacpp_long_public.json", MODEL).cases {
        let ids = engine.tokenize_prompt(&case.prompt).unwrap();
        assert_eq!(ids, case.prompt_ids, "long prompt ids");
        let (worst, mean) = check_case(&mut engine, &case, TOLERANCE, CLEAR_MARGIN);
        eprintln!("long prompt: max |logit diff| {worst:.4}, mean {mean:.4}");
    }
}
