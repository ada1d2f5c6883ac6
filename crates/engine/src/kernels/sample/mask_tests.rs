//! The allowed-token bitmask of constrained decoding on the GPU sampler:
//! ids equal the CPU reference's (`reference_masked`) on vocab sizes that
//! are not multiples of 32, and a disallowed token is never picked, however
//! high its logit, in every sampling mode.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::pipeline::sampling::{is_allowed, reference_masked, SamplingParams};
use crate::testutil::{assert_shape_err, ctx, random_vec};

/// Skipped comparisons: as in sample_tests.rs, a reference decision this
/// close to a boundary can go the other way with the GPU's f32 `exp`.
const MARGIN: f64 = 1e-6;

fn modes() -> Vec<SamplingParams> {
    let t = |temperature| SamplingParams {
        temperature,
        ..Default::default()
    };
    vec![
        t(0.0),
        t(1.0),
        SamplingParams { top_k: 3, ..t(1.0) },
        SamplingParams {
            top_p: 0.5,
            ..t(0.8)
        },
        SamplingParams {
            min_p: 0.3,
            repetition_penalty: 1.3,
            presence_penalty: 0.5,
            ..t(1.2)
        },
    ]
}

fn mask_of(vocab: usize, allowed: impl IntoIterator<Item = usize>) -> Vec<u32> {
    let mut words = vec![0u32; mask_words(vocab)];
    for i in allowed {
        words[i / 32] |= 1 << (i % 32);
    }
    words
}

/// Samples row `logits` once per uniform in `us`, each in its own submit
/// under `mask`; returns the ids.
fn run_gpu(params: &SamplingParams, logits: &[f32], mask: &[u32], us: &[f32]) -> Vec<u32> {
    let ctx = ctx();
    let vocab = logits.len();
    let history = [0u32, 1, 1];
    let mut state = SamplerState::new(ctx, params, vocab, &history, 1).unwrap();
    state.set_mask(ctx, mask).unwrap();
    let logits = ctx.upload_f32("logits", logits).unwrap();
    let out = ctx.create_storage("out_ids", 4).unwrap();
    let mut ids = Vec::new();
    for &u in us {
        state.write_history(ctx, &history);
        state.write_randoms(ctx, 0, &[u]).unwrap();
        let mut rec = Recorder::new(ctx);
        let target = SampleTarget {
            logits: &logits,
            logits_offset: 0,
            out_ids: &out,
            out_index: 0,
            step: 0,
            mask_row: 0,
        };
        sample(&mut rec, &state, &target).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        ids.push(pollster::block_on(ctx.read_u32(&out, 0, 1)).unwrap()[0]);
    }
    ids
}

/// Checks the GPU against the reference for every mode; returns how many
/// decisions were compared exactly.
fn check(logits: &[f32], mask: &[u32], seed: u64, what: &str) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let us: Vec<f32> = (0..4).map(|_| rng.gen()).collect();
    let mut compared = 0;
    for params in modes() {
        let ids = run_gpu(&params, logits, mask, &us);
        for (&id, &u) in ids.iter().zip(&us) {
            assert!(
                (id as usize) < logits.len() && is_allowed(mask, id),
                "{what}, {params:?}: picked disallowed {id}"
            );
            let want = reference_masked(&params, logits, &[0, 1, 1], u, mask);
            if want.margin >= MARGIN {
                assert_eq!(id, want.id, "{what}, {params:?}, u {u}");
                compared += 1;
            }
        }
    }
    compared
}

#[test]
fn masked_sampling_matches_reference_on_awkward_vocab_sizes() {
    let mut compared = 0;
    for (case, vocab) in [1usize, 31, 33, 257, 1000, 4099].into_iter().enumerate() {
        let logits = random_vec(vocab, 40 + case as u64);
        let mut order: Vec<usize> = (0..vocab).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        // One token, the worst: far outside every top-k / top-p / min-p cut.
        let worst = *order.last().unwrap();
        compared += check(&logits, &mask_of(vocab, [worst]), 1, "only the worst");
        // Every token but the best few: the cuts act on what the mask leaves.
        let rest = order.iter().copied().skip(3.min(vocab - 1));
        compared += check(&logits, &mask_of(vocab, rest), 2, "all but the top 3");
        // A sparse random set, always including the last id (the partial word).
        let mut rng = ChaCha8Rng::seed_from_u64(case as u64);
        let sparse = (0..vocab).filter(|&i| i == vocab - 1 || rng.gen_bool(0.1));
        compared += check(&logits, &mask_of(vocab, sparse), 3, "sparse");
    }
    assert!(compared > 250, "only {compared} compared exactly");
}

#[test]
fn bits_past_the_vocab_are_ignored() {
    // Vocab 33: word 1 holds token 32 and 31 bits of no token. With those
    // set and one real token allowed, the real token is the only pick.
    let vocab = 33;
    let logits = random_vec(vocab, 9);
    let mut mask = mask_of(vocab, [5]);
    mask[1] = !1; // every bit but token 32's
    for params in modes() {
        let ids = run_gpu(&params, &logits, &mask, &[0.0, 0.5, 0.999]);
        assert_eq!(ids, [5, 5, 5], "{params:?}");
    }
}

#[test]
fn mask_of_wrong_length_is_a_shape_error_and_configure_clears_it() {
    let ctx = ctx();
    let params = SamplingParams::default();
    let vocab = 70;
    let mut state = SamplerState::new(ctx, &params, vocab, &[], 1).unwrap();
    assert_shape_err(&state.set_mask(ctx, &[0; 2]).unwrap_err(), "sample");
    assert_shape_err(&state.set_mask(ctx, &[0; 4]).unwrap_err(), "sample");
    // The best token disallowed, then the mask turned off by configure.
    let logits: Vec<f32> = (0..vocab).map(|i| i as f32 / 10.0).collect();
    state.set_mask(ctx, &mask_of(vocab, 0..vocab - 1)).unwrap();
    let buf = ctx.upload_f32("logits", &logits).unwrap();
    let out = ctx.create_storage("out_ids", 4).unwrap();
    let pick = |state: &SamplerState| {
        state.write_randoms(ctx, 0, &[0.5]).unwrap();
        let mut rec = Recorder::new(ctx);
        let target = SampleTarget {
            logits: &buf,
            logits_offset: 0,
            out_ids: &out,
            out_index: 0,
            step: 0,
            mask_row: 0,
        };
        sample(&mut rec, state, &target).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        pollster::block_on(ctx.read_u32(&out, 0, 1)).unwrap()[0]
    };
    assert_eq!(pick(&state), vocab as u32 - 2);
    state.configure(ctx, &params, &[]).unwrap();
    assert_eq!(pick(&state), vocab as u32 - 1);
    state.set_mask(ctx, &mask_of(vocab, [3])).unwrap();
    assert_eq!(pick(&state), 3);
    state.clear_mask();
    assert_eq!(pick(&state), vocab as u32 - 1);
}

/// A verifying pass samples several rows in one submit, each under its own
/// mask (`set_masks`, `SampleTarget::mask_row`): every row's id is the
/// reference's under that row's mask, on a vocab that is not a multiple of
/// 32; a row past the masks uploaded, or more masks than the buffer holds,
/// is a shape error.
#[test]
fn several_rows_sample_under_a_mask_each() {
    let ctx = ctx();
    let vocab = 77;
    let rows = 3;
    let logits = random_vec(vocab * rows, 61);
    let masks: Vec<Vec<u32>> = vec![
        mask_of(vocab, [2, 40, 76]),
        mask_of(vocab, (0..vocab).filter(|i| i % 3 == 1)),
        mask_of(vocab, [76]),
    ];
    let words: Vec<u32> = masks.concat();
    let buf = ctx.upload_f32("logits", &logits).unwrap();
    let out = ctx.create_storage("out_ids", 4 * rows as u64).unwrap();
    let us = [0.3f32, 0.7, 0.5];
    for params in modes() {
        let mut state = SamplerState::with_capacity(ctx, vocab, rows, 64, MAX_BIAS, rows).unwrap();
        state.configure(ctx, &params, &[]).unwrap();
        state.set_masks(ctx, &words).unwrap();
        state.write_randoms(ctx, 0, &us).unwrap();
        let mut rec = Recorder::new(ctx);
        for j in 0..rows {
            let target = SampleTarget {
                logits: &buf,
                logits_offset: j * vocab,
                out_ids: &out,
                out_index: j,
                step: j,
                mask_row: j,
            };
            sample(&mut rec, &state, &target).unwrap();
        }
        pollster::block_on(rec.submit()).unwrap();
        let ids = pollster::block_on(ctx.read_u32(&out, 0, rows)).unwrap();
        for j in 0..rows {
            let row = &logits[j * vocab..(j + 1) * vocab];
            assert!(
                is_allowed(&masks[j], ids[j]),
                "{params:?}: row {j} picked {}",
                ids[j]
            );
            // The penalty window before row j: the rows sampled before it.
            let want = reference_masked(&params, row, &ids[..j], us[j], &masks[j]);
            if want.margin >= MARGIN {
                assert_eq!(ids[j], want.id, "{params:?}, row {j}");
            }
        }
        // A row past the masks uploaded.
        let target = SampleTarget {
            logits: &buf,
            logits_offset: 0,
            out_ids: &out,
            out_index: 0,
            step: 0,
            mask_row: rows,
        };
        let mut rec = Recorder::new(ctx);
        assert_shape_err(&sample(&mut rec, &state, &target).unwrap_err(), "sample");
        let too_many = [words.clone(), masks[0].clone()].concat();
        assert_shape_err(&state.set_masks(ctx, &too_many).unwrap_err(), "sample");
    }
}
