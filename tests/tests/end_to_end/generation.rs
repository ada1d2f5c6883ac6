//! Generation behaviour on a real model: greedy equals the argmax of the
//! teacher-forced logits, a fixed seed reproduces, and bad input is refused.

use wick::pipeline::sampling::{argmax, reference, Sampler, SamplingParams};
use wick::pipeline::stopping::FinishReason;
use wick::pipeline::stopping::StopCriteria;
use wick::pipeline::{PipelineError, PipelineOptions, MAX_LOGIT_ROWS};
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
            .generate(prompt, sampling, &stop, None, &mut |_| true),
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

fn sampling_params() -> SamplingParams {
    SamplingParams {
        temperature: 0.9,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.02,
        repetition_penalty: 1.1,
        seed: 11,
        ..Default::default()
    }
}

fn engine_with(tokens_per_submit: usize) -> wick::Engine {
    engine_opts(PipelineOptions {
        ctx_len: Some(64),
        tokens_per_submit,
        ..Default::default()
    })
}

fn engine_opts(opts: PipelineOptions) -> wick::Engine {
    let path = wick_tests::model_path(MODEL);
    let bytes = std::fs::read(path).unwrap();
    pollster::block_on(wick::Engine::load(
        wick_tests::gpu(),
        &bytes,
        &opts,
        &mut |_| {},
    ))
    .unwrap()
}

/// The GPU sampler, fed the CPU sampler's random numbers, picks what the CPU
/// reference picks from the teacher-forced logits of the same positions.
#[test]
fn gpu_sampled_generation_equals_cpu_reference_sampler() {
    let mut engine = load_engine(MODEL, 64);
    let prompt = engine.tokenize_prompt("Once upon a time").unwrap();
    let params = sampling_params();
    let generated = generate(&mut engine, &prompt, &params, 10);
    assert_eq!(generated.len(), 10);
    let mut ids = prompt.clone();
    ids.extend_from_slice(&generated);
    engine.pipeline.reset();
    let rows = pollster::block_on(engine.pipeline.prefill(&ids[..ids.len() - 1], 10)).unwrap();
    assert_eq!(rows.len(), 10);
    let mut cpu = Sampler::new(params.clone()).unwrap();
    cpu.accept(&prompt);
    let mut compared = 0;
    for (i, row) in rows.iter().enumerate() {
        let u = cpu.next_uniform();
        let history: Vec<u32> = cpu.history().collect();
        let d = reference(&params, row, &history, u);
        // Decode and teacher-forced prefill logits differ by rounding (the
        // GEMV and the tiled matmul sum in other orders: ~1e-5 in logits,
        // so ~1e-5 / temperature relative in probability masses); a decision
        // within 1e-4 of its boundary may go either way.
        eprintln!("position {i}: {d:?}, generated {}", generated[i]);
        if d.margin > 1e-4 {
            assert_eq!(d.id, generated[i], "position {i}: {d:?}");
            compared += 1;
        }
        cpu.accept(&[generated[i]]);
    }
    assert!(compared >= 7, "only {compared} of 10 decisions were clear");
    assert!(
        generated.iter().any(|&t| t != generated[0]),
        "{generated:?}"
    );
}

/// Tokens per submit changes how the work is cut, not what is generated;
/// tokens sampled past a stop token are never returned and their positions
/// are given back.
#[test]
fn tokens_per_submit_and_stops_keep_the_tokens_exact() {
    let params = sampling_params();
    let mut runs = Vec::new();
    for tps in [1, 3, 4] {
        let mut engine = engine_with(tps);
        let prompt = engine.tokenize_prompt("Once upon a time").unwrap();
        runs.push(generate(&mut engine, &prompt, &params, 9));
        // Stop on the third token: the submit that sampled it ran past it.
        let stop = StopCriteria {
            stop_ids: vec![runs[0][2]],
            max_tokens: 9,
        };
        let first_stop = runs[0].iter().position(|&t| t == runs[0][2]).unwrap();
        let mut streamed = Vec::new();
        let out =
            pollster::block_on(
                engine
                    .pipeline
                    .generate(&prompt, &params, &stop, None, &mut |t| {
                        streamed.push(t);
                        true
                    }),
            )
            .unwrap();
        assert_eq!(out.finish_reason, FinishReason::Stop, "tps {tps}");
        assert_eq!(out.ids, runs[0][..=first_stop], "tps {tps}");
        assert_eq!(streamed, out.ids, "tps {tps}");
        // K/V holds the prompt and every returned token but the stop token.
        assert_eq!(
            engine.pipeline.position(),
            prompt.len() + first_stop,
            "tps {tps}"
        );
        assert_eq!(out.stats.tokens_per_submit, tps);
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0], runs[2]);
}

#[test]
fn sampled_decode_reads_back_ids_only() {
    let own_ctx = std::sync::Arc::new(pollster::block_on(wick::gpu::GpuContext::new()).unwrap());
    let mut engine = load_engine_on(own_ctx, MODEL, 64);
    let prompt = engine.tokenize_prompt("Hello").unwrap();
    let tps = engine.pipeline.tokens_per_submit();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: 1 + 3 * tps,
    };
    for params in [SamplingParams::default(), sampling_params()] {
        let out = pollster::block_on(engine.pipeline.generate(
            &prompt,
            &params,
            &stop,
            None,
            &mut |_| true,
        ))
        .unwrap();
        let c = out.stats.decode_counters;
        assert_eq!(out.stats.decode_steps, 3 * tps);
        assert_eq!(c.submits, 3, "{c:?}");
        assert_eq!(c.bytes_read_back, 4 * 3 * tps as u64, "{c:?}");
        assert_eq!(c.buffers_created, 0, "{c:?}");
        // A step reads every weight, and besides them only a few rows of
        // activations, the cache up to 64 positions and one logits row: on
        // SmolLM2 (about 80 MB of weights) a few megabytes, under 10 %.
        let weights = engine.pipeline.model().weight_bytes_per_token() as f64;
        let moved = c.bytes_moved as f64 / out.stats.decode_steps as f64;
        assert!(
            moved >= weights && moved < 1.1 * weights,
            "{moved} bytes moved a step, {weights} of weights"
        );
    }
}

/// A step returns at most `MAX_LOGIT_ROWS` rows of logits, whatever its
/// chunk: asking for more cuts the prompt into chunks of that many tokens,
/// and every row comes back, equal to those of a prompt cut into 8s.
#[test]
fn more_logit_rows_than_a_step_holds_come_back_whole() {
    let text = "The quick brown fox jumps over the lazy dog, and then it runs away. ".repeat(6);
    let mut rows_by_chunk = Vec::new();
    for chunk in [64, 8] {
        let mut engine = engine_opts(PipelineOptions {
            ctx_len: Some(128),
            prefill_chunk: chunk,
            ..Default::default()
        });
        let ids = engine.tokenize_prompt(&text).unwrap();
        let last = MAX_LOGIT_ROWS + 9;
        assert!(ids.len() > last && ids.len() <= 128, "{} tokens", ids.len());
        let rows = pollster::block_on(engine.pipeline.prefill(&ids, last)).unwrap();
        assert_eq!(rows.len(), last, "chunk {chunk}");
        rows_by_chunk.push(rows);
    }
    let (a, b) = (&rows_by_chunk[0], &rows_by_chunk[1]);
    for (i, (ra, rb)) in a.iter().zip(b).enumerate() {
        assert_eq!(ra.len(), rb.len());
        // The two cuts run the same kernels on other row counts: the tiled
        // matmul and attention sum each output in the same order, so only
        // the last bits may move (prefill against decode, which sums in
        // other orders, differs by under 0.005 on this model).
        let worst = ra
            .iter()
            .zip(rb)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(worst < 0.01, "row {i}: |logit diff| {worst}");
    }
}

#[test]
fn prompt_over_the_context_is_a_typed_error() {
    let mut engine = load_engine(MODEL, 16);
    let prompt: Vec<u32> = (0..17).map(|i| 100 + i).collect();
    let err = pollster::block_on(engine.pipeline.prefill(&prompt, 1)).unwrap_err();
    assert!(
        matches!(
            err,
            PipelineError::ContextOverflow {
                tokens: 17,
                ctx_len: 16,
                ..
            }
        ),
        "{err}"
    );
    // The engine's error is the same variant, not a wrapper around it.
    assert!(matches!(
        WickError::from(err),
        WickError::ContextOverflow { tokens: 17, .. }
    ));
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

/// The warm-up prepares every kernel a prompt and its sampled decode use
/// (natively their pipelines are made side by side first): prefilling and
/// decoding afterwards creates no pipeline. Its own context, so other tests'
/// compiles do not count.
#[test]
fn after_the_warm_up_a_generation_creates_no_pipeline() {
    let ctx = std::sync::Arc::new(pollster::block_on(wick::gpu::GpuContext::new()).unwrap());
    let bytes = std::fs::read(wick_tests::model_path(MODEL)).unwrap();
    // A 16-position context: the warm-up then prepares prefill chunks of
    // up to 16 rows, the fewest kernels that still hold the prompt below.
    let opts = PipelineOptions {
        ctx_len: Some(16),
        warm_up: true,
        ..Default::default()
    };
    let mut engine =
        pollster::block_on(wick::Engine::load(ctx.clone(), &bytes, &opts, &mut |_| {})).unwrap();
    let after_load = ctx.counters.snapshot();
    assert!(after_load.pipelines_created > 0, "{after_load:?}");
    // A prompt longer than one row class, then sampled decode steps.
    let prompt: Vec<u32> = (0..11).map(|i| 100 + i).collect();
    pollster::block_on(engine.pipeline.prefill(&prompt, 1)).unwrap();
    for token in [42, 43, 44] {
        pollster::block_on(engine.pipeline.decode(token)).unwrap();
    }
    let generation = ctx.counters.snapshot().since(after_load);
    assert_eq!(generation.pipelines_created, 0, "{generation:?}");
}
