use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::pipeline::sampling::{reference, SamplingParams};
use crate::testutil::{assert_shape_err, ctx};

/// A comparison is skipped when the reference decision came within this
/// (relative) of going another way: the GPU's f32 `exp` differs from the
/// CPU's f64 one by ~1e-7 per weight, which moves masses far less.
const MARGIN: f64 = 1e-6;

/// `steps` rows of distinct logits in [-spread, spread): a shuffled grid plus
/// a jitter under half its spacing, so no two are equal.
fn distinct_rows(vocab: usize, steps: usize, seed: u64, spread: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(vocab * steps);
    for _ in 0..steps {
        let mut grid: Vec<usize> = (0..vocab).collect();
        grid.shuffle(&mut rng);
        let spacing = 2.0 * spread as f64 / vocab as f64;
        out.extend(grid.iter().map(|&g| {
            let jitter = rng.gen_range(0.0..0.4) * spacing;
            (-(spread as f64) + g as f64 * spacing + jitter) as f32
        }));
    }
    out
}

fn uniforms(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen::<f32>()).collect()
}

/// Runs `us.len()` samples in one submit, step s reading row s of `rows`,
/// writing out_ids[s + 1]; returns the ids and the history buffer after.
fn run_gpu(
    params: &SamplingParams,
    vocab: usize,
    rows: &[f32],
    prompt: &[u32],
    us: &[f32],
) -> (Vec<u32>, Vec<u32>) {
    let ctx = ctx();
    let state = SamplerState::new(ctx, params, vocab, prompt, us.len()).unwrap();
    state.write_randoms(ctx, 0, us).unwrap();
    let logits = ctx.upload_f32("logits", rows).unwrap();
    let out = ctx
        .create_storage("out_ids", 4 * (us.len() as u64 + 1))
        .unwrap();
    let mut rec = Recorder::new(ctx);
    for step in 0..us.len() {
        let target = SampleTarget {
            logits: &logits,
            logits_offset: (step * vocab) % (rows.len() - vocab + 1),
            out_ids: &out,
            out_index: step + 1,
            step,
            mask_row: 0,
        };
        sample(&mut rec, &state, &target).unwrap();
    }
    pollster::block_on(rec.submit()).unwrap();
    let ids = pollster::block_on(ctx.read_u32(&out, 1, us.len())).unwrap();
    let hist = pollster::block_on(ctx.read_u32(&state.history, 0, 2 + state.history_cap()));
    (ids, hist.unwrap())
}

/// What the kernel's ring append does, on the CPU.
fn ring_push(words: &mut [u32], id: u32) {
    let cap = words.len() - 2;
    if cap == 0 {
        return;
    }
    let slot = words[1] as usize % cap;
    words[2 + slot] = id;
    words[1] = ((slot + 1) % cap) as u32;
    words[0] = (words[0] + 1).min(cap as u32);
}

/// Samples on the GPU and checks every id against the CPU reference (given
/// the same history), and the history ring after. Returns the GPU ids and
/// how many comparisons were skipped as too close to call.
fn check(
    params: &SamplingParams,
    vocab: usize,
    rows: &[f32],
    prompt: &[u32],
    us: &[f32],
) -> (Vec<u32>, usize) {
    let what = format!("vocab {vocab}, {params:?}");
    let (ids, hist) = run_gpu(params, vocab, rows, prompt, us);
    let cap = params.penalty_last_n;
    let mut window: Vec<u32> = prompt.to_vec();
    let mut ring = history_words(cap, prompt);
    let mut skipped = 0;
    for (step, (&id, &u)) in ids.iter().zip(us).enumerate() {
        let off = (step * vocab) % (rows.len() - vocab + 1);
        let recent = &window[window.len().saturating_sub(cap)..];
        let want = reference(params, &rows[off..off + vocab], recent, u);
        if want.margin >= MARGIN {
            assert_eq!(id, want.id, "{what}: step {step}, u {u}");
        } else {
            skipped += 1;
            assert!((id as usize) < vocab, "{what}: step {step}: id {id}");
        }
        window.push(id); // the GPU's choice, so later steps stay comparable
        ring_push(&mut ring, id);
    }
    assert_eq!(hist, ring, "{what}: history ring after {} steps", us.len());
    (ids, skipped)
}

fn modes() -> Vec<(&'static str, SamplingParams)> {
    let t = |temperature| SamplingParams {
        temperature,
        ..Default::default()
    };
    vec![
        ("greedy", t(0.0)),
        ("temperature", t(0.8)),
        ("top-k", SamplingParams { top_k: 5, ..t(1.0) }),
        (
            "top-p",
            SamplingParams {
                top_p: 0.7,
                ..t(1.0)
            },
        ),
        (
            "min-p",
            SamplingParams {
                min_p: 0.2,
                ..t(1.3)
            },
        ),
        (
            "combined",
            SamplingParams {
                top_k: 40,
                top_p: 0.9,
                min_p: 0.05,
                ..t(0.7)
            },
        ),
    ]
}

#[test]
fn gpu_matches_cpu_across_vocab_sizes_and_modes() {
    let (mut compared, mut skipped) = (0, 0);
    for (case, vocab) in [1, 7, 255, 256, 257, 4099, 49152, 151936]
        .into_iter()
        .enumerate()
    {
        let steps = if vocab > 10000 { 3 } else { 6 };
        // Spread grows with the vocabulary, as real logits' tails do.
        let spread = if vocab > 1000 { 12.0 } else { 3.0 };
        let rows = distinct_rows(vocab, steps, 100 + case as u64, spread);
        for (m, (name, params)) in modes().into_iter().enumerate() {
            let us = uniforms(steps, 7 * case as u64 + m as u64);
            let (ids, s) = check(&params, vocab, &rows, &[], &us);
            skipped += s;
            compared += ids.len() - s;
            if name == "greedy" && vocab > 1 {
                // Greedy is the row's argmax whatever u is.
                for (step, &id) in ids.iter().enumerate() {
                    let row = &rows[step * vocab..(step + 1) * vocab];
                    assert_eq!(id, crate::pipeline::sampling::argmax(row), "vocab {vocab}");
                }
            }
        }
    }
    eprintln!("{compared} compared exactly, {skipped} too close to call");
    assert!(
        skipped * 20 <= compared,
        "{skipped} skipped, {compared} compared"
    );
}

#[test]
fn penalties_and_history_across_steps_in_one_submit() {
    let vocab = 4099;
    let rows = distinct_rows(vocab, 1, 5, 6.0);
    let mut by_logit: Vec<u32> = (0..vocab as u32).collect();
    by_logit.sort_by(|&a, &b| rows[b as usize].total_cmp(&rows[a as usize]));
    // A prompt whose window repeats the best tokens; a window of 6, so the
    // ring wraps within the 8 steps.
    let prompt = [
        by_logit[0],
        17,
        by_logit[0],
        by_logit[1],
        by_logit[0],
        99,
        by_logit[2],
    ];
    // Greedy with a huge presence penalty: each step's pick is banned in
    // effect for the next steps while it stays in the window.
    let greedy = SamplingParams {
        presence_penalty: 100.0,
        penalty_last_n: 6,
        ..Default::default()
    };
    let (ids, _) = check(&greedy, vocab, &rows, &prompt, &[0.5; 8]);
    // Steps read the history their predecessors appended: never a repeat
    // while the window still holds it.
    assert_eq!(
        &ids[..3],
        &by_logit[3..6],
        "window [.., 99, best 2]: best 3, 4, 5 next"
    );
    for (s, id) in ids.iter().enumerate() {
        let earlier = &ids[s.saturating_sub(5)..s];
        assert!(
            !earlier.contains(id),
            "step {s}: {id} repeated within the window: {ids:?}"
        );
    }
    // All three penalties, sampling, a wrapping window: compared step by step.
    let mixed = SamplingParams {
        temperature: 0.9,
        top_k: 50,
        top_p: 0.95,
        repetition_penalty: 1.3,
        frequency_penalty: 0.4,
        presence_penalty: 0.3,
        penalty_last_n: 5,
        ..Default::default()
    };
    let history: Vec<u32> = (0..12).map(|i| by_logit[i % 4]).collect();
    let (_, skipped) = check(&mixed, vocab, &rows, &history, &uniforms(10, 3));
    assert!(skipped <= 1);
}

#[test]
fn logit_bias_bans_and_boosts() {
    let vocab = 257;
    let rows = distinct_rows(vocab, 1, 9, 4.0);
    let best = crate::pipeline::sampling::argmax(&rows);
    let low = crate::pipeline::sampling::argmax(&rows.iter().map(|v| -v).collect::<Vec<_>>());
    let with = |logit_bias, temperature| SamplingParams {
        logit_bias,
        temperature,
        ..Default::default()
    };
    // Banning the argmax: greedy takes the runner-up, sampling never draws it.
    let ban = vec![(best, f32::NEG_INFINITY), (vocab as u32 + 5, 1.0)];
    let (ids, _) = check(&with(ban.clone(), 0.0), vocab, &rows, &[], &[0.5]);
    assert_ne!(ids[0], best);
    let (ids, _) = check(&with(ban, 3.0), vocab, &rows, &[], &uniforms(24, 4));
    assert!(!ids.contains(&best), "{ids:?}");
    // Boosting the lowest token past the best (in two pieces that add up).
    let boost = vec![(low, 5.0), (7, 0.25), (low, 4.0)];
    let (ids, _) = check(&with(boost.clone(), 0.0), vocab, &rows, &[], &[0.5]);
    assert_eq!(ids, [low]);
    check(&with(boost, 1.0), vocab, &rows, &[], &uniforms(8, 5));
}

#[test]
fn sampled_ids_respect_each_cut_and_vary() {
    let vocab = 1000;
    let rows = distinct_rows(vocab, 1, 21, 3.0);
    let mut order: Vec<usize> = (0..vocab).collect();
    order.sort_by(|&a, &b| rows[b].total_cmp(&rows[a]));
    let probs: Vec<f64> = {
        let e: Vec<f64> = rows
            .iter()
            .map(|&v| (v as f64 - rows[order[0]] as f64).exp())
            .collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    };
    // Nucleus of 0.5 by a plain sort: the smallest prefix reaching 0.5.
    let mut acc = 0.0;
    let nucleus = order.iter().take_while(|&&i| {
        let before = acc;
        acc += probs[i];
        before < 0.5
    });
    let nucleus: Vec<usize> = nucleus.copied().collect();
    let us = uniforms(64, 8);
    let base = SamplingParams {
        temperature: 1.0,
        ..Default::default()
    };
    let with = |top_k, top_p, min_p| SamplingParams {
        top_k,
        top_p,
        min_p,
        ..base.clone()
    };
    let cases: [(SamplingParams, &dyn Fn(usize) -> bool); 4] = [
        (base.clone(), &|_| true),
        (with(10, 1.0, 0.0), &|id| order[..10].contains(&id)),
        (with(0, 0.5, 0.0), &|id| nucleus.contains(&id)),
        (with(0, 1.0, 0.5), &|id| probs[id] >= 0.5 * probs[order[0]]),
    ];
    for (params, allowed) in cases {
        let (ids, _) = check(&params, vocab, &rows, &[], &us);
        assert!(
            ids.iter().all(|&id| allowed(id as usize)),
            "{params:?}: {ids:?}"
        );
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() >= 4, "{params:?}: only {distinct:?}");
    }
}

#[test]
fn ids_rise_with_u_and_ties_go_to_the_lowest_id() {
    let vocab = 300;
    let rows = distinct_rows(vocab, 1, 31, 2.0);
    // The draw walks the kept tokens in id order: ids never fall as u rises.
    let mut us = uniforms(40, 9);
    us.sort_by(f32::total_cmp);
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 0.8,
        ..Default::default()
    };
    let (ids, _) = check(&params, vocab, &rows, &[], &us);
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
    assert!(ids.first() != ids.last());
    // Exact ties for the max: the lowest id, greedy, on both sides.
    let mut tied = rows.clone();
    for i in [250, 40, 41, 299] {
        tied[i] = 9.0;
    }
    let (ids, _) = check(&SamplingParams::default(), vocab, &tied, &[], &[0.3]);
    assert_eq!(ids, [40]);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let ctx = ctx();
    let greedy = SamplingParams::default();
    let new = |p: &SamplingParams, vocab| SamplerState::new(ctx, p, vocab, &[], 2).err().unwrap();
    assert_shape_err(&new(&greedy, 0), "sample");
    for top_p in [0.0, 1.01, -0.5] {
        assert_shape_err(
            &new(
                &SamplingParams {
                    top_p,
                    ..Default::default()
                },
                10,
            ),
            "sample",
        );
    }
    let no_window = SamplingParams {
        repetition_penalty: 1.1,
        penalty_last_n: 0,
        ..Default::default()
    };
    assert_shape_err(&new(&no_window, 10), "sample");

    let state = SamplerState::new(ctx, &greedy, 10, &[1, 2], 2).unwrap();
    let logits = ctx.create_storage("logits", 4 * 10).unwrap();
    let out = ctx.create_storage("out", 4 * 3).unwrap();
    let target = |logits_offset, out_index, step| SampleTarget {
        logits: &logits,
        logits_offset,
        out_ids: &out,
        out_index,
        step,
        mask_row: 0,
    };
    let mut rec = Recorder::new(ctx);
    for (i, t) in [target(0, 3, 0), target(1, 0, 0), target(0, 0, 2)]
        .iter()
        .enumerate()
    {
        let e = sample(&mut rec, &state, t).err();
        assert!(e.is_some(), "case {i}");
        assert_shape_err(&e.unwrap(), "sample");
    }
    sample(&mut rec, &state, &target(0, 2, 1)).unwrap();
    assert_eq!(rec.dispatches(), 1, "one sample is one dispatch");
    pollster::block_on(rec.submit()).unwrap();
}

/// `cargo test --release -p wick --lib sample_timing -- --ignored --nocapture`
#[test]
#[ignore]
fn sample_timing() {
    let ctx = ctx();
    for vocab in [49152, 151936] {
        let rows = distinct_rows(vocab, 1, 1, 12.0);
        let logits = ctx.upload_f32("logits", &rows).unwrap();
        let out = ctx.create_storage("out", 4).unwrap();
        for (name, params) in modes() {
            let state = SamplerState::new(ctx, &params, vocab, &[], 1).unwrap();
            state.write_randoms(ctx, 0, &[0.4]).unwrap();
            let target = SampleTarget {
                logits: &logits,
                logits_offset: 0,
                out_ids: &out,
                out_index: 0,
                step: 0,
                mask_row: 0,
            };
            let mut times = Vec::new();
            for _ in 0..4 {
                let mut rec = Recorder::new(ctx);
                sample(&mut rec, &state, &target).unwrap();
                let start = std::time::Instant::now();
                pollster::block_on(rec.submit()).unwrap();
                ctx.wait_idle();
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
            eprintln!("vocab {vocab} {name}: {times:.1?} ms");
        }
    }
}
