//! Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Q4_K / Q6_K, q/k/v biases, untied Q6_K
//! head of 151936 x 1536, 1.1 GB) against llama.cpp's reference logits
//! (tests/fixtures/golden/llamacpp_qwen15_public.json, made by
//! tests/fixtures/golden/qwen15/make_golden.sh): prose, code and a
//! chat-templated prompt.

use wick::pipeline::{ActDtype, KvDtype};
use wick_tests::{
    check_case_except, compare_position, golden, gpu, load_engine_with, Positions, CLEAR_MARGIN,
    TOLERANCE,
};

const MODEL: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const FILE: &str = "llamacpp_qwen15_public.json";

/// Position 0 against the exact f64 forward pass (`f64_position0`, from
/// tests/fixtures/golden/qwen15/f64_position0.py), not against llama.cpp.
/// Qwen2.5's first position carries activations of magnitude ~4400 in the
/// residual stream, and llama.cpp rounds every quantized dot product's input to 8 bits:
/// there its logits are 10.9-15.3 from the exact ones on these prompts, so
/// they are no reference. wick keeps activations in f32 and measured
/// 0.0003-0.0011 from f64 here; 0.01 leaves room for another GPU's summation
/// order, while a quant decode or norm error moves logits by whole units.
/// (The f64 script itself, run on Qwen2.5-0.5B, whose first-position
/// activations stay under ~200, lands 0.24-0.34 from llama.cpp there: the
/// usual 8-bit-rounding gap, so it computes the same function.)
const F64_TOLERANCE: f32 = 0.01;

#[test]
fn qwen15_matches_llama_cpp() {
    // One load, an f16 KV cache as llama.cpp's: the file is 1.1 GB, and the
    // f32 cache is covered by the reference tests (see golden_paths).
    // f32 activations: position 0 is checked against the exact forward pass
    // (8-bit activations are covered on the smaller models too).
    let mut engine = load_engine_with(gpu(), MODEL, 64, KvDtype::F16, ActDtype::F32);
    // The untied Q6_K head (151936 x 1536, 191 MB) is over lavapipe's 128 MiB
    // storage-binding limit: it runs as row ranges in several bindings, so
    // these logits also check that split on a real model wherever the
    // adapter's limit is below the head's size.
    let head = engine
        .pipeline
        .model()
        .output
        .as_ref()
        .expect("untied head");
    let bytes = head.rows as u64 * head.dtype.row_bytes(head.cols as u64).unwrap();
    let limit = engine.pipeline.ctx().max_binding_bytes();
    eprintln!(
        "output head: {bytes} bytes in {} part(s), binding limit {limit}",
        head.parts.len()
    );
    assert_eq!(
        head.parts.len() > 1,
        bytes > limit,
        "head split iff over the limit"
    );
    for case in golden(FILE, MODEL).cases {
        let ids = engine
            .tokenizer
            .encode(&case.prompt, true, case.parse_special)
            .unwrap();
        assert_eq!(ids, case.prompt_ids, "ids of {:?}", case.prompt);
        let (worst, mean) = check_case_except(
            &mut engine,
            &case,
            TOLERANCE,
            CLEAR_MARGIN,
            &[true],
            Positions::Prefill,
        );

        let exact = case
            .f64_position0
            .as_ref()
            .expect("f64_position0 in the golden file");
        engine.pipeline.reset();
        let first = pollster::block_on(engine.pipeline.prefill(&ids[..1], 1)).unwrap();
        let d = compare_position(&first[0], exact);
        let vs_llama = compare_position(&first[0], &case.topk_per_position[0]);
        eprintln!(
            "{:?} ({} tokens): positions 1..: max |logit diff| {worst:.4}, mean {mean:.4}; \
             position 0: {:.4} from f64 ({:.2} from llama.cpp)",
            case.prompt.chars().take(40).collect::<String>(),
            ids.len(),
            d.max_abs,
            vs_llama.max_abs
        );
        assert!(
            d.max_abs <= F64_TOLERANCE,
            "{:?} position 0: a top-20 logit is {} from the f64 reference's (tolerance {F64_TOLERANCE})",
            case.prompt,
            d.max_abs
        );
        assert!(
            d.argmax_agrees,
            "{:?} position 0: argmax differs from f64's",
            case.prompt
        );
    }
}
