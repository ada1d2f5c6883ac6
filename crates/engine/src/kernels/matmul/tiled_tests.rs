//! Tests of `matmul` against a CPU reference built on the CPU dequantizer.

use super::*;
use crate::format::quant::{dequantize, quantize, GgmlType};
use crate::kernels::weights::{test_weights, GPU_DTYPES};
use crate::testutil::{assert_dot_close as check, ctx, random_vec, reference_matmul as reference};
use crate::testutil::{assert_shape_err, vec_reductions};

/// Guard value around the output: a kernel writing outside its range shows.
const SENTINEL: f32 = 7777.0;

/// Runs one matmul with the given offsets; returns the m * rows results and
/// checks the sentinels before and after them.
#[allow(clippy::too_many_arguments)]
fn run(w: &QuantMatrix, x: &[f32], m: usize, form: Form, x_off: usize, out_off: usize) -> Vec<f32> {
    let ctx = ctx();
    let mut xs = vec![0.5f32; x_off];
    xs.extend_from_slice(x);
    let gx = ctx.upload_f32("x", &xs).unwrap();
    let out_len = out_off + m * w.rows + 3;
    let gout = ctx.upload_f32("out", &vec![SENTINEL; out_len]).unwrap();
    let mut rec = Recorder::new(ctx);
    matmul_form(&mut rec, form, &gx, x_off, w, &gout, out_off, m).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let all = pollster::block_on(ctx.read_f32(&gout, 0, out_len)).unwrap();
    let guards = all[..out_off].iter().chain(&all[out_off + m * w.rows..]);
    assert!(
        guards.into_iter().all(|&v| v == SENTINEL),
        "matmul wrote outside its output"
    );
    all[out_off..out_off + m * w.rows].to_vec()
}

/// Awkward shapes per format: k a whole number of blocks but not of 64 (or
/// 512), or for F32/F16 not of the 16-weight unit; n not a multiple of any
/// tile. The last has just over 64 vec4-core steps a row, so some lanes take
/// two steps and others one (and for F32/F16 it is the one the vec4 core
/// takes).
fn shapes(dtype: GgmlType) -> [(usize, usize); 5] {
    match dtype.block_elements() {
        1 => [(7, 1), (37, 7), (100, 67), (53, 300), (1040, 9)],
        32 => [(32, 1), (96, 7), (160, 67), (96, 300), (2080, 9)],
        _ => [(256, 1), (768, 7), (256, 67), (768, 300), (4352, 9)],
    }
}

fn random_matrix(dtype: GgmlType, n: usize, k: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let bytes = quantize(dtype, &test_weights(n * k, seed)).unwrap();
    let values = dequantize(dtype, &bytes, n * k).unwrap();
    (bytes, values)
}

#[test]
fn matmul_matches_cpu_for_every_dtype_shape_and_form() {
    let ctx = ctx();
    for (d, dtype) in GPU_DTYPES.into_iter().enumerate() {
        for (i, (k, n)) in shapes(dtype).into_iter().enumerate() {
            let (bytes, wv) = random_matrix(dtype, n, k, 100 + i as u64);
            let w = QuantMatrix::upload(ctx, "w", dtype, n, k, &bytes).unwrap();
            for (mi, m) in [1, 2, 5, 17, 70].into_iter().enumerate() {
                let x = random_vec(m * k, 7 + m as u64);
                let (want, scale) = reference(&x, &wv, m, n, k);
                let what = format!("{dtype} k={k} n={n} m={m}");
                // Both GEMV workgroup heights: the GPU's and lavapipe's.
                let gemv = run(&w, &x, m, Form::Gemv(4), 3, 5);
                check(&gemv, &want, &scale, k, &format!("{what} gemv"));
                let gemv16 = run(&w, &x, m, Form::Gemv(16), 0, 0);
                check(&gemv16, &want, &scale, k, &format!("{what} gemv16"));
                if m == 1 && vec_core_fits(&w, 4) {
                    // The vec4 core: a lane a row group (as `bench-kernels
                    // --sweep` times it), lane groups from one SIMD batch to
                    // the whole workgroup, both lane orders, up to 256 rows a
                    // workgroup (more rows than lanes), groups of lanes that
                    // are no power of two in workgroups that are not 64 (as
                    // CPU adapters take them), every reduction that can run
                    // the shape. Each pipeline is a compile of its own
                    // (seconds each on lavapipe with a cold shader cache), so
                    // each shape runs on every third dtype, turning with
                    // the dtype: every shape meets a 32-element format and
                    // others, and every dtype meets shapes of each kind.
                    let mut v = 0;
                    for (lanes, group_rows, chunked, workgroup) in [
                        (1, 4, true, 64),
                        (1, 8, true, 8),
                        (1, 16, true, 8),
                        (64, 4, false, 64),
                        (16, 1, false, 64),
                        (8, 8, true, 64),
                        (8, 16, true, 64),
                        (32, 3, true, 64),
                        (6, 16, true, 24),
                        (5, 8, true, 40),
                        (7, 3, false, 56),
                    ] {
                        for reduce in vec_reductions() {
                            let shape = VecShape {
                                lanes,
                                group_rows,
                                chunked,
                                reduce,
                                workgroup,
                            };
                            if shape.check().is_err() {
                                continue;
                            }
                            v += 1;
                            if (v + d) % 3 != 0 {
                                continue;
                            }
                            let vec = run(&w, &x, m, Form::Vec(shape), 4, 5);
                            check(&vec, &want, &scale, k, &format!("{what} {shape:?}"));
                        }
                    }
                }
                let tiled = run(&w, &x, m, Form::Tiled, 0, 1);
                check(&tiled, &want, &scale, k, &format!("{what} tiled"));
                // Every tile: the GPUs' and the CPU adapters' widths, x as
                // scalars from an odd offset and as vec4s where rows allow.
                // And the chunked core where rows are whole steps. Each tile
                // runs at a third of the (shape, m) pairs, turning with both,
                // so that it meets every shape and every m of each dtype,
                // on every other dtype (a compile each): each tile meets
                // F32 or F16, 32-element formats and a K-quant.
                let tiles = [
                    (8, false, false, RowForm::Loop),
                    (32, false, false, RowForm::Loop),
                    (8, true, false, RowForm::Loop),
                    (32, true, false, RowForm::Loop),
                    (8, true, true, RowForm::Loop),
                    (32, true, true, RowForm::Loop),
                    (8, true, true, RowForm::Unrolled),
                    (32, true, true, RowForm::Unrolled),
                    (8, true, true, RowForm::Flat),
                    (16, true, true, RowForm::Flat),
                    (32, true, true, RowForm::Flat),
                ];
                for (t, (tn, x4, vec, form)) in tiles.into_iter().enumerate() {
                    if (t + i + mi) % 3 != 0 || (t + d) % 2 != 0 {
                        continue;
                    }
                    let tile = TileShape {
                        tn,
                        tm: TILE_M,
                        x4,
                        vec,
                        form,
                        wg: 64,
                        x_share: false,
                    };
                    let x_off = if x4 { 4 } else { 1 };
                    if !tile.fits(&w, x_off) {
                        continue;
                    }
                    let got = run(&w, &x, m, Form::TiledAs(tile), x_off, 2);
                    check(&got, &want, &scale, k, &format!("{what} {tile:?}"));
                }
                // The two forms agree as closely as two results each within
                // the tolerance of the f64 reference can.
                let scale2: Vec<f64> = scale.iter().map(|s| 2.0 * s).collect();
                check(&tiled, &gemv, &scale2, k, &format!("{what} gemv vs tiled"));
            }
        }
    }
}

#[test]
fn matmul_over_split_parts_matches_unsplit() {
    let ctx = ctx();
    for dtype in [GgmlType::F16, GgmlType::Q8_0, GgmlType::Q6_K] {
        let (k, n) = match dtype.block_elements() {
            256 => (256, 67),
            32 => (96, 67),
            _ => (112, 67),
        };
        let (bytes, _) = random_matrix(dtype, n, k, 11);
        let whole = QuantMatrix::upload(ctx, "w", dtype, n, k, &bytes).unwrap();
        let row_bytes = whole.row_bytes() as u64;
        // 10 rows per part: 7 parts, the last of 7 rows.
        let split = QuantMatrix::upload_with_limit(
            ctx,
            "w",
            dtype,
            n,
            k,
            &bytes,
            10 * row_bytes + crate::kernels::weights::part_overhead(dtype, k, ctx.weight_store),
        )
        .unwrap();
        assert_eq!(split.parts.len(), 7);
        for (m, form) in [
            (1, Form::Gemv(4)),
            (
                1,
                Form::Vec(VecShape {
                    lanes: 6,
                    group_rows: 16,
                    chunked: true,
                    reduce: Reduce::Serial,
                    workgroup: 24,
                }),
            ),
            (3, Form::Gemv(16)),
            (17, Form::Tiled),
        ] {
            let x = random_vec(m * k, 3);
            // Each output row is computed the same way whatever part holds
            // it, so the results are bit-identical.
            assert_eq!(
                run(&split, &x, m, form, 4, 4),
                run(&whole, &x, m, form, 4, 4),
                "{dtype} m={m}"
            );
        }
        // And `matmul` itself picks a form and covers every part.
        let x = random_vec(9 * k, 4);
        let gx = ctx.upload_f32("x", &x).unwrap();
        let gout = ctx.create_storage("out", (9 * n * 4) as u64).unwrap();
        let mut rec = Recorder::new(ctx);
        matmul(&mut rec, &gx, 0, &split, &gout, 0, 9).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gout, 0, 9 * n)).unwrap();
        assert_eq!(
            got,
            run(&whole, &x, 9, Form::Tiled, 0, 0),
            "{dtype} matmul m=9"
        );
    }
}

#[test]
fn matmul_rejects_short_buffers() {
    let ctx = ctx();
    let (bytes, _) = random_matrix(GgmlType::Q8_0, 4, 64, 1);
    let w = QuantMatrix::upload(ctx, "w", GgmlType::Q8_0, 4, 64, &bytes).unwrap();
    let x = ctx.create_storage("x", 64 * 4).unwrap();
    let out = ctx.create_storage("out", 8 * 4).unwrap();
    let mut rec = Recorder::new(ctx);
    let err = matmul(&mut rec, &x, 1, &w, &out, 0, 1).unwrap_err();
    assert_shape_err(&err, "matmul");
    let err = matmul(&mut rec, &x, 0, &w, &out, 0, 3).unwrap_err();
    assert_shape_err(&err, "matmul");
}

#[test]
fn long_rows_stay_within_the_loop_budget() {
    // llvmpipe ends an invocation's loops after 65535 trips in all, silently:
    // every form over an 8B model's widest rows (14336) must still sum the
    // whole row there.
    let ctx = ctx();
    let (k, n) = (14336, 9);
    for dtype in [GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F16] {
        let (bytes, wv) = random_matrix(dtype, n, k, 41);
        let w = QuantMatrix::upload(ctx, "w", dtype, n, k, &bytes).unwrap();
        for m in [1, 5, 33] {
            let x = random_vec(m * k, 42 + m as u64);
            let (want, scale) = reference(&x, &wv, m, n, k);
            let mut forms = vec![Form::Gemv(16), Form::Tiled];
            for (tn, x4, vec, form) in [
                (32, false, false, RowForm::Loop),
                (32, true, true, RowForm::Loop),
                (32, true, true, RowForm::Unrolled),
                (32, true, true, RowForm::Flat),
                (8, true, false, RowForm::Loop),
            ] {
                forms.push(Form::TiledAs(TileShape {
                    tn,
                    tm: TILE_M,
                    x4,
                    vec,
                    form,
                    wg: 64,
                    x_share: false,
                }));
            }
            if m == 1 {
                for (lanes, group_rows, chunked, workgroup) in [
                    (1, 8, true, 8),
                    (1, 16, true, 8),
                    (8, 16, true, 64),
                    (64, 4, false, 64),
                    (6, 16, true, 24),
                ] {
                    for reduce in vec_reductions() {
                        let shape = VecShape {
                            lanes,
                            group_rows,
                            chunked,
                            reduce,
                            workgroup,
                        };
                        if shape.check().is_ok() {
                            forms.push(Form::Vec(shape));
                        }
                    }
                }
            }
            for form in forms {
                let got = run(&w, &x, m, form, 0, 0);
                check(
                    &got,
                    &want,
                    &scale,
                    k,
                    &format!("{dtype} k={k} m={m} {form:?}"),
                );
            }
        }
    }
}

#[test]
fn cpu_groups_waste_the_fewest_lane_steps() {
    use crate::kernels::matmul::vec_shape::cpu_group_lanes;
    let slots = |lanes: u32, steps: u32| lanes * steps.div_ceil(lanes);
    for batch in [4u32, 8] {
        for steps in 1..=300 {
            let lanes = cpu_group_lanes(batch, steps);
            let range = batch / 2..=2 * batch;
            assert!(
                range.contains(&lanes),
                "batch {batch} steps {steps}: {lanes}"
            );
            let fewest = range.map(|l| slots(l, steps)).min().unwrap();
            assert_eq!(
                slots(lanes, steps),
                fewest,
                "batch {batch} steps {steps}: {lanes}"
            );
        }
    }
    // The doc's example: 576-element rows of 32-element blocks.
    assert_eq!(cpu_group_lanes(8, 18), 6);
    // Nothing wasted at a batch: the batch it is.
    assert_eq!(cpu_group_lanes(8, 48), 8);
    assert_eq!(cpu_group_lanes(4, 48), 4);
}

/// llvmpipe takes one lane a group (whole rows) only where the matrix still
/// gives each of its threads several workgroups; SwiftShader and GPUs never.
#[test]
fn llvmpipe_takes_whole_rows_a_lane_for_matrices_with_rows_to_spare() {
    let format = |dtype| crate::kernels::weights::GpuFormat::of(dtype).unwrap();
    let shape = |cpu, dtype, rows| {
        VecShape::for_class(
            cpu,
            Reduce::choose(cpu.is_some(), false),
            format(dtype),
            1024,
            rows,
        )
    };
    // 8 workgroups of 8 lanes x 16 rows need more than 896 rows; smaller
    // matrices take one lane a scale tile in the formats that have tiles.
    for (rows, whole_rows) in [
        (151936, true),
        (1152, true),
        (897, true),
        (896, false),
        (128, false),
    ] {
        for dtype in [
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::F16,
        ] {
            let tiled = format(dtype).scale_tile > 1;
            let s = shape(Some(8), dtype, rows);
            let want = match (whole_rows, tiled) {
                (true, _) => Some(16),
                (false, true) => Some(format(dtype).scale_tile),
                (false, false) => None,
            };
            assert_eq!(
                (s.lanes == 1).then_some(s.group_rows),
                want,
                "llvmpipe, {dtype}, {rows} rows: {s:?}"
            );
            assert!(s.check().is_ok(), "{s:?}");
            assert_ne!(
                shape(Some(4), dtype, rows).lanes,
                1,
                "SwiftShader, {rows} rows"
            );
            assert_ne!(shape(None, dtype, rows).lanes, 1, "GPU, {rows} rows");
        }
    }
}

#[test]
fn vec_shapes_that_cannot_run_are_refused_by_name() {
    let shape = |lanes, reduce, workgroup| VecShape {
        lanes,
        group_rows: 4,
        chunked: true,
        reduce,
        workgroup,
    };
    assert!(shape(6, Reduce::Serial, 24).check().is_ok());
    assert!(shape(8, Reduce::Tree, 64).check().is_ok());
    for reduce in [Reduce::Tree, Reduce::Subgroup] {
        let err = shape(6, reduce, 48).check().unwrap_err();
        assert!(err.contains("power-of-two"), "{err}");
    }
    for (lanes, workgroup) in [(6, 64), (0, 64), (8, 512)] {
        let err = shape(lanes, Reduce::Serial, workgroup).check().unwrap_err();
        assert!(err.contains("whole groups"), "{err}");
    }
    // The matmul refuses such a shape with a typed error, not a wrong sum.
    let ctx = ctx();
    let (bytes, _) = random_matrix(GgmlType::Q8_0, 8, 64, 3);
    let w = QuantMatrix::upload(ctx, "w", GgmlType::Q8_0, 8, 64, &bytes).unwrap();
    let x = ctx.upload_f32("x", &[0.5; 64]).unwrap();
    let y = ctx.create_storage("y", 8 * 4).unwrap();
    let mut rec = Recorder::new(ctx);
    let bad = Form::Vec(shape(6, Reduce::Tree, 48));
    let err = matmul_form(&mut rec, bad, &x, 0, &w, &y, 0, 1).unwrap_err();
    assert_shape_err(&err, "matmul");
    assert!(err.to_string().contains("power-of-two"), "{err}");
}
