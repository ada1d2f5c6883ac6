//! Attention against a plain f64 softmax-attention reference, on caches filled
//! by `kv_write` whose unused slots hold NaN (so a read past the visible keys
//! poisons the output and fails the comparison).

use super::*;
use crate::kernels::attention::kv::{kv_write, KvDtype, KvLayout};
use crate::testutil::assert_shape_err;
use crate::testutil::{assert_close, ctx, random_vec};

/// The slow, obvious reference: for every row and head, scores over the
/// visible keys in f64, softmax by max-subtraction, weighted sum of V.
fn reference(
    q: &[f32],
    kc: &[f32],
    vc: &[f32],
    layer_offset: usize,
    a: &AttentionArgs,
) -> Vec<f32> {
    let (hd, group) = (a.head_dim, a.q_heads / a.kv_heads);
    let mut out = vec![0f32; a.rows * a.q_heads * hd];
    for row in 0..a.rows {
        let p = a.pos0 as usize + row;
        for h in 0..a.q_heads {
            let qv = &q[(row * a.q_heads + h) * hd..][..hd];
            let at = |k: usize| layer_offset + (k * a.kv_heads + h / group) * hd;
            let visible: Vec<usize> = (0..=p)
                .filter(|&k| a.window.is_none_or(|w| p - k < w as usize))
                .collect();
            let scores: Vec<f64> = visible
                .iter()
                .map(|&k| {
                    let dot: f64 = (0..hd).map(|d| qv[d] as f64 * kc[at(k) + d] as f64).sum();
                    let s = dot * a.scale as f64;
                    a.softcap.map_or(s, |c| c as f64 * (s / c as f64).tanh())
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = w.iter().sum();
            for d in 0..hd {
                let o: f64 = visible
                    .iter()
                    .zip(&w)
                    .map(|(&k, w)| w * vc[at(k) + d] as f64)
                    .sum();
                out[(row * a.q_heads + h) * hd + d] = (o / sum) as f32;
            }
        }
    }
    out
}

/// Fills positions `0 .. pos0 + rows` of layer 1 of NaN-filled K/V caches
/// (an earlier step writes `0 .. pos0`, this step the chunk), runs attention
/// in the chunk's step, and returns (gpu, reference).
fn run(a: &AttentionArgs, q: &[f32], k_rows: &[f32], v_rows: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let ctx = ctx();
    let l = KvLayout {
        layers: 2,
        ctx_len: a.ctx_len,
        kv_heads: a.kv_heads,
        head_dim: a.head_dim,
        dtype: a.kv_dtype,
    };
    let (row, layer_off, pos0) = (l.row_elems(), l.layer_offset(1), a.pos0 as usize);
    let used = (pos0 + a.rows) * row;
    // The reference reads what the cache holds: for an f16 cache, K and V
    // rounded to f16.
    let stored = |x: &f32| match a.kv_dtype {
        KvDtype::F32 => *x,
        KvDtype::F16 => half::f16::from_f32(*x).to_f32(),
    };
    let mut kc = vec![f32::NAN; l.elements()];
    let mut vc = kc.clone();
    for (cache, rows) in [(&mut kc, k_rows), (&mut vc, v_rows)] {
        let dst = &mut cache[layer_off..layer_off + used];
        for (d, x) in dst.iter_mut().zip(&rows[..used]) {
            *d = stored(x);
        }
    }

    // All-ones words: NaN as f32 and as both f16 halves.
    let nan_words = vec![f32::from_bits(u32::MAX); l.bytes() as usize / 4];
    let gk = ctx.upload_f32("k_cache", &nan_words).unwrap();
    let gv = ctx.upload_f32("v_cache", &nan_words).unwrap();
    let gks = ctx.upload_f32("k_rows", k_rows).unwrap();
    let gvs = ctx.upload_f32("v_rows", v_rows).unwrap();
    let (q_off, out_off) = (3, 5); // awkward offsets into shared buffers
    let mut qbuf = vec![0.5f32; q_off];
    qbuf.extend_from_slice(q);
    let gq = ctx.upload_f32("q", &qbuf).unwrap();
    let gout = ctx
        .create_storage("out", ((out_off + q.len()) * 4) as u64)
        .unwrap();
    let write = |rec: &mut Recorder, rows: usize, at: usize| {
        for (src, cache) in [(&gks, &gk), (&gvs, &gv)] {
            kv_write(rec, src, at * row, cache, &l, layer_off, rows, at as u32).unwrap();
        }
    };
    if pos0 > 0 {
        let mut rec = Recorder::new(ctx);
        write(&mut rec, pos0, 0);
        pollster::block_on(rec.submit()).unwrap();
    }
    let mut rec = Recorder::new(ctx);
    write(&mut rec, a.rows, pos0);
    pollster::block_on(rec.submit()).unwrap();
    // Every form; the caller checks the workgroup form against the
    // reference, and the others must agree with it to 1e-5 (other f32
    // orders of the same sums). The split form runs cut for a CPU adapter
    // and for a GPU (more, shorter splits).
    let scratch_elems = split_scratch_elems(a.rows, a.q_heads, a.head_dim);
    let scratch = ctx
        .create_storage("split", 4 * scratch_elems as u64)
        .unwrap();
    let forms = [
        AttentionForm::Workgroups,
        AttentionForm::Lanes,
        AttentionForm::Split {
            target: split_targets()[0],
        },
        AttentionForm::Split {
            target: split_targets()[1],
        },
    ];
    let mut results = Vec::new();
    for form in forms {
        let mut rec = Recorder::new(ctx);
        let (k, v) = (&*gk, &*gv);
        attention_form(
            &mut rec, form, &gq, q_off, k, v, layer_off, &gout, out_off, &scratch, a,
        )
        .unwrap();
        pollster::block_on(rec.submit()).unwrap();
        results.push(pollster::block_on(ctx.read_f32(&gout, out_off, q.len())).unwrap());
    }
    // The split form cuts each row as a decode step at its position: row
    // by row (one-row calls, as decode steps make) it gives the same bits.
    if a.rows > 1 {
        for (form, whole) in forms.iter().zip(&results).skip(2) {
            let mut rec = Recorder::new(ctx);
            for r in 0..a.rows {
                let one = AttentionArgs {
                    rows: 1,
                    pos0: a.pos0 + r as u32,
                    ..*a
                };
                let at = r * a.q_heads * a.head_dim;
                let (k, v) = (&*gk, &*gv);
                let (q_at, out_at) = (q_off + at, out_off + at);
                attention_form(
                    &mut rec, *form, &gq, q_at, k, v, layer_off, &gout, out_at, &scratch, &one,
                )
                .unwrap();
            }
            pollster::block_on(rec.submit()).unwrap();
            let rows = pollster::block_on(ctx.read_f32(&gout, out_off, q.len())).unwrap();
            // And in slices: a scratch of two rows' partials.
            let two = ctx
                .create_storage(
                    "split",
                    8 * split_scratch_elems(1, a.q_heads, a.head_dim) as u64,
                )
                .unwrap();
            let mut rec = Recorder::new(ctx);
            let (k, v) = (&*gk, &*gv);
            attention_form(
                &mut rec, *form, &gq, q_off, k, v, layer_off, &gout, out_off, &two, a,
            )
            .unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let sliced = pollster::block_on(ctx.read_f32(&gout, out_off, q.len())).unwrap();
            for (i, ((x, y), z)) in whole.iter().zip(&rows).zip(&sliced).enumerate() {
                assert_eq!(
                    (x.to_bits(), z.to_bits()),
                    (y.to_bits(), y.to_bits()),
                    "{form:?} at {i}: {x} for the rows at once, {z} two rows at a time, {y} row by row ({a:?})"
                );
            }
        }
    }
    let got = results[0].clone();
    for (form, other) in forms.iter().zip(&results).skip(1) {
        assert_eq!(other.len(), got.len());
        for (i, (x, y)) in other.iter().zip(&got).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "{form:?} differs at {i}: {x} vs {y} ({a:?})"
            );
        }
    }
    (got, reference(q, &kc, &vc, layer_off, a))
}

fn args(
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    rows: usize,
    pos0: u32,
    ctx_len: usize,
) -> AttentionArgs {
    AttentionArgs {
        rows,
        pos0,
        q_heads,
        kv_heads,
        head_dim,
        ctx_len,
        scale: 1.0 / (head_dim as f32).sqrt(),
        window: None,
        softcap: None,
        kv_dtype: KvDtype::F32,
        as_decode: false,
    }
}

/// Random q, K and V through `run`, on an f32 cache and on an f16 one:
/// (gpu, reference) of each, in that order.
fn random_cases(a: &AttentionArgs, seed: u64) -> Vec<(Vec<f32>, Vec<f32>)> {
    let used = (a.pos0 as usize + a.rows) * a.kv_heads * a.head_dim;
    let q = random_vec(a.rows * a.q_heads * a.head_dim, seed);
    let (k, v) = (random_vec(used, seed + 1), random_vec(used, seed + 2));
    [KvDtype::F32, KvDtype::F16]
        .into_iter()
        .map(|kv_dtype| run(&AttentionArgs { kv_dtype, ..*a }, &q, &k, &v))
        .collect()
}

// Tolerance: the output is a convex combination of V (|v| < 1), so an error
// ds in the scores moves it by at most 2 max|ds|. The GPU's f32 score is a
// sum of head_dim products of |q k| < 1 scaled by 1/sqrt(head_dim) (|s| < 16,
// typically < 3): its rounding error is a few ulps of the partial sums, and
// each exp and running sum adds about one ulp. The largest error seen over
// these cases is 1.8e-7; 1e-5 leaves 50x margin and still catches a masking,
// indexing or rescaling mistake, which moves outputs by 1e-3 or more.
const TOL: f32 = 1e-5;

#[test]
fn matches_reference_across_shapes() {
    // (q_heads, kv_heads, head_dim, rows, pos0, ctx_len): GQA ratios 1, 3, 7,
    // 4 (Gemma 3 1B: 4/1 at 256), 12, 8 and 11; decode (rows 1) and prefill
    // chunks at pos0 0 and > 0; ctx_len beyond the used positions (NaN there).
    let cases = [
        (3, 3, 16, 1, 0, 4),
        (3, 3, 16, 5, 0, 9),
        (9, 3, 64, 5, 0, 8),
        (9, 3, 64, 33, 40, 80),
        (9, 3, 64, 1, 40, 50),
        (14, 2, 128, 33, 40, 77),
        (14, 2, 128, 1, 72, 77),
        (4, 1, 256, 5, 40, 50),
        (4, 1, 256, 1, 0, 3),
        (2, 1, 100, 5, 70, 80),     // head_dim not a multiple of 64 (or of 16)
        (2, 1, 64, 4, 1100, 1110),  // 3 tiles of up to 512 keys
        (3, 3, 16, 40, 1000, 1050), // a chunk whose rows straddle a tile end
        (4, 1, 256, 3, 600, 610),   // long rows of a wide head (the lane form's loops)
        (12, 1, 16, 5, 3, 10),      // the lane form holds 6 heads an invocation
        (16, 2, 16, 6, 0, 8),       // 8 heads an invocation, 2 invocations a KV head
        (11, 1, 16, 4, 2, 8),       // a prime group: one head an invocation
    ];
    for (i, &(qh, kvh, hd, rows, pos0, ctx_len)) in cases.iter().enumerate() {
        let a = args(qh, kvh, hd, rows, pos0, ctx_len);
        for (got, want) in random_cases(&a, 100 + i as u64 * 10) {
            assert_close(&got, &want, TOL, &format!("attention {a:?}"));
        }
    }
}

#[test]
fn sliding_window_and_softcap_match_reference() {
    for (i, (rows, pos0, window, softcap)) in [
        (5, 35, 8, None),
        (1, 39, 8, None),
        (1, 3, 8, None),
        (33, 7, 20, Some(2.0)),
        (3, 70, 100, None),
        (4, 1100, 700, None), // window start inside the first tile; 2 tiles
    ]
    .into_iter()
    .enumerate()
    {
        let mut a = args(4, 2, 64, rows, pos0, pos0 as usize + rows + 6);
        a.window = Some(window);
        a.softcap = softcap;
        a.scale = 0.5; // sharper scores, so the softcap bends them
        for (got, want) in random_cases(&a, 300 + i as u64) {
            assert_close(&got, &want, TOL, &format!("window {a:?}"));
        }
    }
}

#[test]
fn sliding_window_masks_exactly_the_llama_cpp_keys() {
    // q = 0 makes every visible key weigh the same; V[k] is the one-hot of k.
    // So out[d] = 1/W exactly where key d is visible, 0 where masked: a key
    // at k is visible from position p iff p - k < W (llama.cpp masks p - k >= W).
    let (w, hd, pos0, rows) = (8u32, 64, 35u32, 5);
    for (pos0, rows) in [(pos0, rows), (3, 1)] {
        let mut a = args(2, 1, hd, rows, pos0, 48);
        a.window = Some(w);
        let used = pos0 as usize + rows;
        let v: Vec<f32> = (0..used * hd)
            .map(|i| (i % hd == i / hd) as u32 as f32)
            .collect();
        let k = random_vec(used * hd, 7);
        let (got, _) = run(&a, &vec![0.0; rows * 2 * hd], &k, &v);
        for (r, out) in got.chunks(hd).enumerate() {
            let p = pos0 as usize + r / 2;
            let seen = (0..=p).filter(|k| p - k < w as usize).count() as f32;
            let want: Vec<f32> = (0..hd)
                .map(|d| {
                    if d <= p && p - d < w as usize {
                        1.0 / seen
                    } else {
                        0.0
                    }
                })
                .collect();
            // Equal weights exp(0) = 1 and one-hot values: exact arithmetic.
            assert_close(out, &want, 0.0, &format!("window mask at position {p}"));
        }
    }
}

#[test]
fn long_rising_scores_rescale_across_tiles() {
    // Scores rise with position (K[k] = k / 200 in every dim, q = 1): the
    // running max grows on every tile of 512 keys, so the sums so far are
    // rescaled by exp(old max - new max) each time. Up to 1202 keys = 3 tiles.
    let mut a = args(2, 1, 64, 3, 1199, 1210);
    a.scale = 1.0 / 8.0;
    let used = 1202 * 64;
    let k: Vec<f32> = (0..used).map(|i| (i / 64) as f32 / 200.0).collect();
    let (got, want) = run(&a, &vec![1.0; 3 * 2 * 64], &k, &random_vec(used, 9));
    // Scores reach 48 and carry rounding errors of a few ulps of 48 (~1e-5);
    // outputs move by up to twice that. Largest error seen: 1.1e-6.
    assert_close(&got, &want, 1e-4, "rising scores");
}

#[test]
fn prefill_chunk_equals_decoding_row_by_row() {
    // A 20-row chunk at 500 (its rows straddle the tile end at 512) against
    // 20 decode steps, each writing its own K/V row then attending, on caches
    // that start as NaN: the pipeline's two ways through the same positions.
    let ctx = ctx();
    let (qh, kvh, hd, rows, pos0, ctx_len) = (9, 3, 64, 20, 500usize, 530);
    let a = args(qh, kvh, hd, rows, pos0 as u32, ctx_len);
    let kv_row = kvh * hd;
    let gks = ctx
        .upload_f32("k_rows", &random_vec((pos0 + rows) * kv_row, 21))
        .unwrap();
    let gvs = ctx
        .upload_f32("v_rows", &random_vec((pos0 + rows) * kv_row, 22))
        .unwrap();
    let nan = vec![f32::NAN; ctx_len * kv_row];
    let cache = |name| ctx.upload_f32(name, &nan).unwrap();
    let (chunk_k, chunk_v, step_k, step_v) = (cache("ck"), cache("cv"), cache("sk"), cache("sv"));
    let l = KvLayout {
        layers: 1,
        ctx_len,
        kv_heads: kvh,
        head_dim: hd,
        dtype: KvDtype::F32,
    };
    let write = |rec: &mut Recorder, n: usize, at: usize, k: &GpuBuffer, v: &GpuBuffer| {
        for (src, dst) in [(&gks, k), (&gvs, v)] {
            kv_write(rec, src, at * kv_row, dst, &l, 0, n, at as u32).unwrap();
        }
    };
    let n = rows * qh * hd;
    let gq = ctx.upload_f32("q", &random_vec(n, 23)).unwrap();
    let chunk_out = ctx.create_storage("chunk", n as u64 * 4).unwrap();
    let step_out = ctx.create_storage("steps", n as u64 * 4).unwrap();

    let mut rec = Recorder::new(ctx);
    write(&mut rec, pos0, 0, &chunk_k, &chunk_v); // the earlier prompt
    write(&mut rec, pos0, 0, &step_k, &step_v);
    pollster::block_on(rec.submit()).unwrap();
    let mut rec = Recorder::new(ctx);
    write(&mut rec, rows, pos0, &chunk_k, &chunk_v);
    // The workgroup form, whatever the adapter: its chunks and steps run the
    // same operations in the same order (the lane form is checked against
    // it in `run`).
    let wg = AttentionForm::Workgroups;
    let (ck, cv) = (&*chunk_k, &*chunk_v);
    let scratch = ctx.create_storage("split", 4).unwrap();
    attention_form(&mut rec, wg, &gq, 0, ck, cv, 0, &chunk_out, 0, &scratch, &a).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let q_row = qh * hd;
    for r in 0..rows {
        let step = AttentionArgs {
            rows: 1,
            pos0: (pos0 + r) as u32,
            ..a
        };
        let mut rec = Recorder::new(ctx);
        write(&mut rec, 1, pos0 + r, &step_k, &step_v);
        let (q_off, out) = (r * q_row, &step_out);
        let (k, v) = (&*step_k, &*step_v);
        attention_form(
            &mut rec, wg, &gq, q_off, k, v, 0, out, q_off, &scratch, &step,
        )
        .unwrap();
        pollster::block_on(rec.submit()).unwrap();
    }
    let chunk = pollster::block_on(ctx.read_f32(&chunk_out, 0, n)).unwrap();
    let steps = pollster::block_on(ctx.read_f32(&step_out, 0, n)).unwrap();
    // Same workgroup shape, same tiles, same operation order: bit-identical.
    assert_close(&chunk, &steps, 0.0, "chunk vs steps");
}

#[test]
fn rejects_bad_shapes() {
    let ctx = ctx();
    let buf = ctx.create_storage("buf", 4 * 4096).unwrap();
    let small = ctx.create_storage("small", 4 * 100).unwrap();
    let mut rec = Recorder::new(ctx);
    let base = args(4, 2, 16, 2, 0, 8);
    let with = |f: fn(&mut AttentionArgs)| {
        let mut a = base;
        f(&mut a);
        a
    };
    // (args, q, k_cache, layer_offset, what the message must name)
    let cases = [
        (
            with(|a| a.q_heads = 9),
            &buf,
            &buf,
            0,
            "multiple of kv_heads",
        ),
        (
            with(|a| a.kv_heads = 0),
            &buf,
            &buf,
            0,
            "multiple of kv_heads",
        ),
        (with(|a| a.pos0 = 7), &buf, &buf, 0, "context length 8"),
        (with(|a| a.head_dim = 300), &buf, &buf, 0, "head_dim 300"),
        (with(|a| a.head_dim = 18), &buf, &buf, 0, "head_dim 18"),
        (with(|a| a.window = Some(0)), &buf, &buf, 0, "window"),
        (with(|a| a.softcap = Some(0.0)), &buf, &buf, 0, "softcap"),
        (with(|a| a.rows = 4), &small, &buf, 0, "q ('small')"),
        (base, &buf, &small, 0, "k_cache ('small')"),
        (base, &buf, &buf, 2, "layer_offset 2"),
    ];
    for (a, q, k, layer_offset, needle) in cases {
        let err = attention(&mut rec, q, 0, k, &buf, layer_offset, &buf, 0, &buf, &a).unwrap_err();
        assert_shape_err(&err, "attention");
        assert!(
            err.to_string().contains(needle),
            "{err} (wanted '{needle}')"
        );
    }
    // Zero rows is a valid empty step.
    let empty = AttentionArgs { rows: 0, ..base };
    attention(&mut rec, &buf, 0, &buf, &buf, 0, &buf, 0, &buf, &empty).unwrap();
    assert_eq!(rec.dispatches(), 0);
    // The split form names a scratch too small for its partials.
    let split = AttentionForm::Split {
        target: split_targets()[1],
    };
    let long = AttentionArgs {
        rows: 1,
        pos0: 450,
        ctx_len: 500,
        head_dim: 4,
        ..base
    };
    let err = attention_form(
        &mut rec, split, &buf, 0, &buf, &buf, 0, &buf, 0, &small, &long,
    )
    .unwrap_err();
    assert!(err.to_string().contains("split_scratch"), "{err}");
}

#[test]
fn split_decode_equals_single_pass_at_span_edges() {
    // Decode rows whose context is 1, 511, 512, 513 and 4096 positions (the
    // split's span is up to 256 keys and at least 32 on GPUs, 256 on CPU
    // adapters: these land on, just under and just over whole spans), GQA groups of 3, 7 (two head chunks
    // of the split) and 4, and sliding windows cut inside and at a span
    // edge. `run` checks every form against the workgroup form to 1e-5 and
    // that against the f64 reference.
    let cases = [
        (9, 3, 64, 1, None),
        (9, 3, 64, 511, None),
        (14, 2, 128, 512, None),
        (4, 1, 256, 513, None),
        (9, 3, 64, 4096, None),
        (4, 1, 256, 4096, Some(512)),
        (14, 2, 64, 4096, Some(1000)),
        (4, 2, 64, 513, Some(256)),
    ];
    for (i, &(qh, kvh, hd, context, window)) in cases.iter().enumerate() {
        let mut a = args(qh, kvh, hd, 1, context - 1, context as usize + 3);
        a.window = window;
        for (got, want) in random_cases(&a, 500 + i as u64) {
            assert_close(&got, &want, TOL, &format!("split decode {a:?}"));
        }
    }
}

#[test]
fn split_plans_cover_every_visible_key() {
    // span * splits reaches the visible keys and no split is empty (a decode
    // row), spans stay within the shader's bound, and rows beyond the most
    // keys the splits hold are refused.
    for keys in [1usize, 2, 31, 32, 33, 255, 256, 257, 4096, 65536] {
        for target in split_targets() {
            for (qh, kvh) in [(9, 3), (14, 2), (32, 8), (4, 1)] {
                let a = args(qh, kvh, 64, 1, keys as u32 - 1, keys);
                let plan = split_plan(&a, target).unwrap();
                assert!(
                    plan.span <= SPLIT_SPAN && plan.splits <= MAX_SPLITS,
                    "{plan:?}"
                );
                assert!(plan.span * plan.splits >= keys, "{keys}: {plan:?}");
                assert!(plan.span * (plan.splits - 1) < keys, "{keys}: {plan:?}");
            }
        }
    }
    let too_long = args(4, 1, 64, 1, (SPLIT_SPAN * MAX_SPLITS) as u32, 70000);
    assert_eq!(split_plan(&too_long, split_targets()[1]), None);
}

/// The CPU adapters' split takes whole spans (`Tuning::attention_split`
/// writes the span out).
#[test]
fn cpu_splits_take_whole_spans() {
    assert_eq!(split_targets()[0].min_span, SPLIT_SPAN);
}
