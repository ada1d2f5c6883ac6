//! Generation behaviour on a real model: greedy equals the argmax of the
//! teacher-forced logits, a fixed seed reproduces, and bad input is refused.

use wick::pipeline::sampling::{argmax, SamplingParams};
use wick::pipeline::stopping::StopCriteria;
use wick::WickError;
use wick_tests::{load_engine, load_engine_on};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn generate(
    engine: &mut wick::Engine,
    prompt: &[u32],
    sampling: &SamplingParams,
    n: usize,
) -> Vec<u32> {
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: n,
    };
    pollster::block_on(
        engine
            .pipeline
            .generate(prompt, sampling, &stop, &mut |_| true),
    )
    .unwrap()
    .ids
}

#[test]
fn greedy_generation_equals_argmax_of_logits() {
    let mut engine = load_engine(MODEL, 64);
    let prompt = engine.tokenize_prompt("The capital of France is").unwrap();
    let generated = generate(&mut engine, &prompt, &SamplingParams::default(), 6);
    let mut ids = prompt.clone();
    ids.extend_from_slice(&generated);
    engine.pipeline.reset();
    let rows = pollster::block_on(
        engine
            .pipeline
            .prefill(&ids[..ids.len() - 1], generated.len()),
    )
    .unwrap();
    let argmaxes: Vec<u32> = rows.iter().map(|r| argmax(r)).collect();
    assert_eq!(argmaxes, generated);
}

#[test]
fn seeded_sampling_is_reproducible() {
    let mut engine = load_engine(MODEL, 64);
    let prompt = engine.tokenize_prompt("Once upon a time").unwrap();
    let params = SamplingParams {
        temperature: 0.9,
        top_k: 40,
        top_p: 0.95,
        seed: 7,
        ..Default::default()
    };
    let a = generate(&mut engine, &prompt, &params, 8);
    let b = generate(&mut engine, &prompt, &params, 8);
    assert_eq!(a, b);
}

#[test]
fn prompt_over_the_context_is_a_typed_error() {
    let mut engine = load_engine(MODEL, 16);
    let prompt: Vec<u32> = (0..17).map(|i| 100 + i).collect();
    let err = pollster::block_on(engine.pipeline.prefill(&prompt, 1)).unwrap_err();
    assert!(
        matches!(
            err,
            WickError::ContextOverflow {
                tokens: 17,
                ctx_len: 16,
                ..
            }
        ),
        "{err}"
    );
}

/// One submit, nothing created, and only the sampled row's logits read back,
/// also for a mixture of experts, whose routing stays on the GPU.
#[test]
fn a_decode_step_is_one_submit_and_allocates_nothing() {
    for model in [MODEL, "tiny-qwen3moe.q8_0.gguf", "tiny-qwen2moe.q8_0.gguf"] {
        check_decode_step(model);
    }
}

fn check_decode_step(model: &str) {
    let own_ctx = std::sync::Arc::new(pollster::block_on(wick::gpu::GpuContext::new()).unwrap());
    let mut engine = load_engine_on(own_ctx, model, 32);
    let prompt = engine.tokenize_prompt("Hello").unwrap();
    pollster::block_on(engine.pipeline.prefill(&prompt, 1)).unwrap();
    // The first decode step compiles nothing new but may create bind groups
    // for the one-row shapes; measure the steady state after it.
    pollster::block_on(engine.pipeline.decode(42)).unwrap();
    let ctx = engine.pipeline.ctx().clone();
    let before = ctx.counters.snapshot();
    pollster::block_on(engine.pipeline.decode(43)).unwrap();
    let step = ctx.counters.snapshot().since(before);
    assert_eq!(step.submits, 1, "{model}: {step:?}");
    assert_eq!(step.buffers_created, 0, "{model}: {step:?}");
    assert_eq!(step.bind_groups_created, 0, "{model}: {step:?}");
    assert_eq!(step.pipelines_created, 0, "{model}: {step:?}");
    let vocab = engine.pipeline.model().config.vocab_size as u64;
    assert_eq!(step.bytes_read_back, 4 * vocab, "{model}: {step:?}");
}
