//! Qwen2.5-Coder-0.5B-Instruct (Q4_K / Q5_0 / Q6_K / Q8_0; q/k/v biases,
//! untied head, 151936-token vocabulary) against llama.cpp's reference logits.

use wick_tests::{check_case, golden, load_engine, CLEAR_MARGIN, TOLERANCE};

const MODEL: &str = "qwen2.5-coder-0.5b-instruct-awq.gguf";

#[test]
fn qwen2_matches_llama_cpp() {
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
