//! Tests of the mixture-of-experts kernels against CPU references.

use super::*;
use crate::format::quant::{dequantize, quantize, GgmlType};
use crate::kernels::weights::test_weights;
use crate::testutil::assert_shape_err;
use crate::testutil::{assert_close, assert_dot_close as check, ctx, random_vec, reference_matmul};

/// The router's contract on the CPU: experts by logit, descending, equal
/// logits by lower index; weights are softmax probabilities (f64 here),
/// renormalized over the chosen k when asked.
fn reference_route(logits: &[f32], n: usize, k: usize, normalize: bool) -> (Vec<u32>, Vec<f32>) {
    let mut ids = Vec::new();
    let mut weights = Vec::new();
    for row in logits.chunks(n) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let top = row.iter().fold(f32::MIN, |m, &v| m.max(v)) as f64;
        let denom: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
        let probs: Vec<f64> = order[..k]
            .iter()
            .map(|&e| (row[e] as f64 - top).exp() / denom)
            .collect();
        let chosen: f64 = probs.iter().sum();
        for (&e, &p) in order[..k].iter().zip(&probs) {
            ids.push(e as u32);
            weights.push(if normalize { p / chosen } else { p } as f32);
        }
    }
    (ids, weights)
}

/// Gate logits with many exact ties: values on a coarse grid.
fn tied_logits(len: usize, seed: u64) -> Vec<f32> {
    random_vec(len, seed)
        .into_iter()
        .map(|v| (v * 3.0).round() / 2.0)
        .collect()
}

struct Gpu {
    expert_of: crate::gpu::BufferRef,
    weight_of: crate::gpu::BufferRef,
}

fn routing_buffers(slots: usize) -> Gpu {
    let ctx = ctx();
    Gpu {
        expert_of: ctx.create_storage("expert_of", 4 * slots as u64).unwrap(),
        weight_of: ctx.create_storage("weight_of", 4 * slots as u64).unwrap(),
    }
}

fn routing<'a>(g: &'a Gpu, tokens: usize, top_k: usize, n_experts: usize) -> Routing<'a> {
    Routing {
        expert_of: &g.expert_of,
        weight_of: &g.weight_of,
        tokens,
        top_k,
        n_experts,
    }
}

#[test]
fn router_picks_the_cpu_references_experts_including_ties() {
    let ctx = ctx();
    for (tokens, n, k) in [(1, 8, 2), (37, 8, 2), (5, 60, 4), (33, 128, 8), (3, 3, 3)] {
        for normalize in [false, true] {
            let mut logits = tied_logits(tokens * n, (n * k) as u64);
            // One row where every logit ties, one with a single repeated max.
            logits[..n].iter_mut().for_each(|v| *v = 0.25);
            if tokens > 1 {
                logits[n..2 * n].iter_mut().for_each(|v| *v = -1.0);
                logits[n + n / 2] = 2.0;
                logits[2 * n - 1] = 2.0;
            }
            let off = 3;
            let mut padded = vec![9.0; off];
            padded.extend_from_slice(&logits);
            let gl = ctx.upload_f32("logits", &padded).unwrap();
            let g = routing_buffers(tokens * k);
            let r = routing(&g, tokens, k, n);
            let mut rec = Recorder::new(ctx);
            route(&mut rec, &gl, off, &r, normalize).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let ids = pollster::block_on(ctx.read_u32(&g.expert_of, 0, tokens * k)).unwrap();
            let w = pollster::block_on(ctx.read_f32(&g.weight_of, 0, tokens * k)).unwrap();
            let (want_ids, want_w) = reference_route(&logits, n, k, normalize);
            let what = format!("tokens={tokens} n={n} k={k} normalize={normalize}");
            assert_eq!(ids, want_ids, "{what}: experts");
            // exp and a sum of n terms in f32: a few ulps per term.
            assert_close(&w, &want_w, 1e-5, &format!("{what}: weights"));
        }
    }
}

#[test]
fn router_rejects_bad_shapes() {
    let ctx = ctx();
    let gl = ctx.upload_f32("logits", &[0.0; 16]).unwrap();
    let g = routing_buffers(8);
    let mut rec = Recorder::new(ctx);
    for (tokens, k, n) in [(2, 0, 8), (2, 9, 8), (3, 2, 8)] {
        let err = route(&mut rec, &gl, 0, &routing(&g, tokens, k, n), true).unwrap_err();
        assert_shape_err(&err, "moe_router");
    }
}

/// A random expert stack: its stored bytes and dequantized values.
fn random_stack(dtype: GgmlType, experts: usize, rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
    let n = experts * rows * cols;
    let bytes = quantize(dtype, &test_weights(n, 40 + experts as u64)).unwrap();
    let values = dequantize(dtype, &bytes, n).unwrap();
    (bytes, values)
}

/// `out[s][r] = sum_k x[row(s)][k] * W_{ids[s]}[r][k]` in f64, with the
/// scale `sum |x w|` that bounds the GPU's rounding: one plain matmul
/// reference per slot, over its expert's slab.
fn reference_expert_matmul(
    x: &[f32],
    w: &[f32],
    ids: &[u32],
    x_div: usize,
    rows: usize,
    cols: usize,
) -> (Vec<f32>, Vec<f64>) {
    let (mut out, mut scale) = (Vec::new(), Vec::new());
    for (s, &e) in ids.iter().enumerate() {
        let xr = &x[s / x_div * cols..][..cols];
        let slab = &w[e as usize * rows * cols..][..rows * cols];
        let (o, sc) = reference_matmul(xr, slab, 1, rows, cols);
        out.extend(o);
        scale.extend(sc);
    }
    (out, scale)
}

/// Runs `expert_matmul` in one form over given expert ids; returns the
/// slots x rows outputs.
#[allow(clippy::too_many_arguments)]
fn run_experts(
    stack: &ExpertStack,
    ids: &[u32],
    tokens: usize,
    top_k: usize,
    x: &[f32],
    input: ExpertInput,
    grouped: bool,
) -> Vec<f32> {
    let ctx = ctx();
    let slots = tokens * top_k;
    let g = routing_buffers(slots);
    ctx.write(&g.expert_of, 0, bytemuck::cast_slice(ids));
    let r = routing(&g, tokens, top_k, stack.experts);
    let gx = ctx.upload_f32("x", x).unwrap();
    let out = ctx
        .create_storage("out", 4 * (slots * stack.rows) as u64)
        .unwrap();
    let sorted = ctx.create_storage("sorted", 4 * slots as u64).unwrap();
    let tiles = ctx
        .create_storage("tiles", 4 * tiles_len(slots, stack.experts) as u64)
        .unwrap();
    let mut rec = Recorder::new(ctx);
    let form = if grouped {
        ExpertForm::Grouped(group_by_expert(&mut rec, &r, &sorted, &tiles).unwrap())
    } else {
        ExpertForm::Indexed
    };
    expert_matmul(&mut rec, form, &r, &gx, input, stack, &out).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    pollster::block_on(ctx.read_f32(&out, 0, slots * stack.rows)).unwrap()
}

/// Expert ids for `slots` slots: random, but each token's picks distinct,
/// and (`skewed`) most slots on expert 1 so that one expert's run spans
/// several tiles while others get none.
fn expert_ids(tokens: usize, top_k: usize, experts: usize, skewed: bool, seed: u64) -> Vec<u32> {
    let r = random_vec(tokens, seed);
    let mut ids = Vec::new();
    for (t, v) in r.iter().enumerate() {
        let first = if skewed && t % 5 != 0 {
            1
        } else {
            ((v + 1.0) * 0.5 * experts as f32) as usize % experts
        };
        ids.extend((0..top_k).map(|j| ((first + 3 * j) % experts) as u32));
    }
    ids
}

#[test]
fn expert_matmul_matches_cpu_in_both_forms_for_every_input_and_split() {
    let ctx = ctx();
    for (dtype, cols, rows, experts) in [
        (GgmlType::Q8_0, 96, 7, 8),
        (GgmlType::F16, 37, 33, 5),
        (GgmlType::Q4_K, 256, 19, 6),
        (GgmlType::F32, 64, 70, 3),
    ] {
        let (bytes, wv) = random_stack(dtype, experts, rows, cols);
        let whole = ExpertStack::upload(ctx, "w", dtype, experts, rows, cols, &bytes).unwrap();
        // Two experts per part: the last part holds one or two.
        let row_bytes = whole.matrix.row_bytes() as u64;
        let split = ExpertStack::upload_with_limit(
            ctx,
            "w",
            dtype,
            experts,
            rows,
            cols,
            &bytes,
            2 * rows as u64 * row_bytes
                + crate::kernels::weights::part_overhead(dtype, cols, ctx.weight_store),
        )
        .unwrap();
        assert_eq!(split.matrix.parts.len(), experts.div_ceil(2));
        for (tokens, top_k, skewed) in [(1, 2, false), (3, 3, false), (40, 2, true), (9, 1, false)]
        {
            let ids = expert_ids(tokens, top_k, experts, skewed, tokens as u64);
            for input in [ExpertInput::PerToken, ExpertInput::PerSlot] {
                let x_div = if input == ExpertInput::PerToken {
                    top_k
                } else {
                    1
                };
                let x = random_vec(tokens * top_k / x_div * cols, 9);
                let (want, scale) = reference_expert_matmul(&x, &wv, &ids, x_div, rows, cols);
                let what =
                    format!("{dtype} {experts}x{rows}x{cols} tokens={tokens} k={top_k} {input:?}");
                let mut results = Vec::new();
                for (stack, stack_name) in [(&whole, "whole"), (&split, "split")] {
                    for grouped in [false, true] {
                        let got = run_experts(stack, &ids, tokens, top_k, &x, input, grouped);
                        let form = if grouped { "grouped" } else { "indexed" };
                        check(
                            &got,
                            &want,
                            &scale,
                            cols,
                            &format!("{what} {stack_name} {form}"),
                        );
                        results.push(got);
                    }
                }
                // The two forms agree with each other as closely as two
                // results each within the reference's tolerance can.
                let scale2: Vec<f64> = scale.iter().map(|s| 2.0 * s).collect();
                check(
                    &results[1],
                    &results[0],
                    &scale2,
                    cols,
                    &format!("{what} grouped vs indexed"),
                );
                // A slot's row is computed the same way whatever part holds
                // its expert: splitting changes no bit.
                assert_eq!(results[0], results[2], "{what}: indexed, split vs whole");
                assert_eq!(results[1], results[3], "{what}: grouped, split vs whole");
            }
        }
    }
}

#[test]
fn grouping_sorts_slots_stably_by_expert_and_tiles_each_run() {
    let ctx = ctx();
    for (tokens, top_k, experts, skewed) in [(40, 2, 8, true), (7, 3, 60, false), (1, 1, 4, false)]
    {
        let ids = expert_ids(tokens, top_k, experts, skewed, 3);
        let slots = ids.len();
        let g = routing_buffers(slots);
        ctx.write(&g.expert_of, 0, bytemuck::cast_slice(&ids));
        let r = routing(&g, tokens, top_k, experts);
        let sorted = ctx.create_storage("sorted", 4 * slots as u64).unwrap();
        let tiles_buf = ctx
            .create_storage("tiles", 4 * tiles_len(slots, experts) as u64)
            .unwrap();
        let mut rec = Recorder::new(ctx);
        let groups = group_by_expert(&mut rec, &r, &sorted, &tiles_buf).unwrap();
        let (tile, max_tiles) = (tiled_tokens(groups.tt), groups.max_tiles as usize);
        pollster::block_on(rec.submit()).unwrap();
        let got_sorted = pollster::block_on(ctx.read_u32(&sorted, 0, slots)).unwrap();
        let got_tiles = pollster::block_on(ctx.read_u32(&tiles_buf, 0, 3 * max_tiles)).unwrap();
        let mut want_sorted: Vec<u32> = (0..slots as u32).collect();
        want_sorted.sort_by_key(|&s| ids[s as usize]); // stable
        assert_eq!(got_sorted, want_sorted, "tokens={tokens}: sorted slots");
        let mut want_tiles = Vec::new();
        let mut first = 0;
        for e in 0..experts as u32 {
            let count = ids.iter().filter(|&&i| i == e).count();
            for o in (0..count).step_by(tile) {
                want_tiles.extend([e, (first + o) as u32, tile.min(count - o) as u32]);
            }
            first += count;
        }
        assert!(want_tiles.len() <= 3 * max_tiles, "tile bound");
        want_tiles.resize(3 * max_tiles, 0);
        assert_eq!(got_tiles, want_tiles, "tokens={tokens}: tiles");
    }
}

#[test]
fn combine_weights_slots_in_pick_order_and_adds_the_gated_shared_expert() {
    let ctx = ctx();
    let (tokens, top_k, d) = (5, 3, 37);
    let slots = tokens * top_k;
    let y = random_vec(slots * d, 1);
    let w = random_vec(slots, 2);
    let sy = random_vec(tokens * d, 3);
    let sg: Vec<f32> = random_vec(tokens, 4).iter().map(|v| v * 30.0).collect();
    let g = routing_buffers(slots);
    ctx.write(&g.weight_of, 0, bytemuck::cast_slice(&w));
    let r = routing(&g, tokens, top_k, 8);
    let gy = ctx.upload_f32("y", &y).unwrap();
    let gsy = ctx.upload_f32("shared y", &sy).unwrap();
    let gsg = ctx.upload_f32("shared gate", &sg).unwrap();
    for with_shared in [false, true] {
        let out = ctx.create_storage("out", 4 * (tokens * d) as u64).unwrap();
        let shared = with_shared.then_some(SharedExpert {
            y: &gsy,
            gate: &gsg,
        });
        let mut rec = Recorder::new(ctx);
        combine(&mut rec, &r, &gy, d, shared, &out).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&out, 0, tokens * d)).unwrap();
        let want: Vec<f32> = (0..tokens * d)
            .map(|i| {
                let (t, c) = (i / d, i % d);
                let mut s = 0.0f32;
                for j in 0..top_k {
                    s += w[t * top_k + j] * y[(t * top_k + j) * d + c];
                }
                if with_shared {
                    s += sy[i] / (1.0 + (-sg[t]).exp());
                }
                s
            })
            .collect();
        // Same order of f32 operations; only exp may differ by an ulp or so.
        assert_close(&got, &want, 1e-6, &format!("combine shared={with_shared}"));
    }
}

#[test]
fn expert_matmul_rejects_mismatched_shapes() {
    let ctx = ctx();
    let (bytes, _) = random_stack(GgmlType::Q8_0, 4, 8, 32);
    let stack = ExpertStack::upload(ctx, "w", GgmlType::Q8_0, 4, 8, 32, &bytes).unwrap();
    let g = routing_buffers(4);
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let out = ctx.create_storage("out", 4 * 32).unwrap();
    let mut rec = Recorder::new(ctx);
    // Routed over 8 experts, the stack has 4.
    let err = expert_matmul(
        &mut rec,
        ExpertForm::Indexed,
        &routing(&g, 2, 2, 8),
        &x,
        ExpertInput::PerToken,
        &stack,
        &out,
    )
    .unwrap_err();
    assert!(err.to_string().contains("experts"), "{err}");
    // Out holds 32 elements, 4 slots x 8 rows need 32: fine; 3 tokens need 48.
    let g6 = routing_buffers(6);
    let err = expert_matmul(
        &mut rec,
        ExpertForm::Indexed,
        &routing(&g6, 3, 2, 4),
        &x,
        ExpertInput::PerToken,
        &stack,
        &out,
    )
    .unwrap_err();
    assert_shape_err(&err, "moe_matmul");
}
