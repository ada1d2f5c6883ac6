//! Tests of the fused linear layer against an f64 CPU reference: every
//! format, awkward shapes, both forms, every prologue / epilogue combination,
//! matrices split into parts, and strided output rows.

use super::*;
use crate::format::quant::{dequantize, quantize, GgmlType};
use crate::kernels::norm::rms_q8::quantize_row_q8;
use crate::kernels::weights::{test_weights, GPU_DTYPES};
use crate::testutil::{ctx, random_vec, vec_reductions};

const SENTINEL: f32 = 7777.0;

fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

fn gelu_tanh(v: f64) -> f64 {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    0.5 * v * (1.0 + u.tanh())
}

struct Case {
    k: usize,
    n: usize,
    m: usize,
    norm: bool,
    bias: bool,
    epilogue: Epilogue,
}

/// The reference: each output and the scale `sum |x w|` bounding its error.
fn reference(
    c: &Case,
    x: &[f32],
    norm_w: &[f32],
    w: &[f32],
    bias: &[f32],
    prev: &[f32],
) -> (Vec<f64>, Vec<f64>) {
    let (k, n) = (c.k, c.n);
    let width = if matches!(c.epilogue, Epilogue::Glu(_)) {
        n / 2
    } else {
        n
    };
    let (mut out, mut scale) = (Vec::new(), Vec::new());
    for t in 0..c.m {
        let row = &x[t * k..(t + 1) * k];
        let xs: Vec<f64> = if c.norm {
            let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / k as f64;
            let s = 1.0 / (ms + 1e-5).sqrt();
            row.iter()
                .zip(norm_w)
                .map(|(&v, &g)| v as f64 * s * g as f64)
                .collect()
        } else {
            row.iter().map(|&v| v as f64).collect()
        };
        let dot = |r: usize| -> (f64, f64) {
            let wr = &w[r * k..(r + 1) * k];
            let s = xs.iter().zip(wr).map(|(a, &b)| a * b as f64).sum();
            let a = xs.iter().zip(wr).map(|(a, &b)| (a * b as f64).abs()).sum();
            (s, a)
        };
        for j in 0..width {
            let (v, a) = match c.epilogue {
                Epilogue::Glu(act) => {
                    let ((g, ga), (u, ua)) = (dot(2 * j), dot(2 * j + 1));
                    let f = match act {
                        Activation::Silu => silu(g),
                        Activation::GeluTanh => gelu_tanh(g),
                    };
                    (f * u, (ga + 1.0) * (ua + 1.0))
                }
                _ => {
                    let (s, a) = dot(j);
                    let b = if c.bias { bias[j] as f64 } else { 0.0 };
                    let base = if c.epilogue == Epilogue::Add {
                        prev[t * width + j] as f64
                    } else {
                        0.0
                    };
                    (s + b + base, a + b.abs() + base.abs())
                }
            };
            out.push(v);
            scale.push(a);
        }
    }
    (out, scale)
}

/// Runs `c` with out rows `stride` apart (the extra columns must keep their
/// sentinels) and x rows from element 3 (the unit matrix-vector core) or 4
/// (a vec4: the vec4 core where the row length allows).
fn run(c: &Case, dtype: GgmlType, part_rows: Option<usize>, stride_pad: usize, seed: u64) {
    run_at(
        c,
        dtype,
        part_rows,
        stride_pad,
        seed,
        3,
        None,
        X8::None,
        None,
    )
}

/// How a test hands x to the layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum X8 {
    /// f32 only.
    None,
    /// In 8-bit blocks too, turned to f32 in registers.
    Float,
    /// In 8-bit blocks too, in integer dot products (only where
    /// `q8_dot4_fits`: `x8_readers`).
    Dot4,
}

/// The 8-bit x readers to test `dtype` with on this adapter.
fn x8_readers(dtype: GgmlType) -> Vec<X8> {
    let mut readers = vec![X8::Float];
    if q8_dot4_fits(&ctx().features, dtype) {
        readers.push(X8::Dot4);
    }
    readers
}

#[allow(clippy::too_many_arguments)]
fn run_at(
    c: &Case,
    dtype: GgmlType,
    part_rows: Option<usize>,
    stride_pad: usize,
    seed: u64,
    x_offset: usize,
    vec_shape: Option<VecShape>,
    x8: X8,
    as_decode: Option<usize>,
) {
    let q8 = x8 != X8::None;
    let ctx = ctx();
    let (k, n, m) = (c.k, c.n, c.m);
    let bytes = quantize(dtype, &test_weights(n * k, seed)).unwrap();
    let wv = dequantize(dtype, &bytes, n * k).unwrap();
    let limit = part_rows.map_or(ctx.max_binding_bytes(), |r| {
        (r * dtype.row_bytes(k as u64).unwrap() as usize) as u64
            + crate::kernels::weights::part_overhead(dtype, k, ctx.weight_store)
    });
    let w = QuantMatrix::upload_with_limit(ctx, "w", dtype, n, k, &bytes, limit).unwrap();
    if let Some(r) = part_rows {
        assert_eq!(w.parts.len(), n.div_ceil(r), "the matrix is split as asked");
    }
    let x = random_vec(m * k, seed + 1)
        .iter()
        .map(|v| v * 3.0)
        .collect::<Vec<_>>();
    let norm_w: Vec<f32> = random_vec(k, seed + 2)
        .iter()
        .map(|v| 1.0 + 0.5 * v)
        .collect();
    let bias = random_vec(n + 3, seed + 3);
    let width = if matches!(c.epilogue, Epilogue::Glu(_)) {
        n / 2
    } else {
        n
    };
    let stride = width + stride_pad;
    let out_off = 5;
    let prev = random_vec(m * width, seed + 4);
    let mut out_init = vec![SENTINEL; out_off + m * stride + 2];
    for t in 0..m {
        out_init[out_off + t * stride..out_off + t * stride + width]
            .copy_from_slice(&prev[t * width..(t + 1) * width]);
    }
    let gx = ctx
        .upload_f32("x", &[vec![0.25; x_offset], x.clone()].concat())
        .unwrap();
    // With 8-bit x (one row) the reference takes the values the blocks hold,
    // while the f32 x keeps the exact ones: a kernel reading the f32 x
    // instead would be off by up to d / 2 a value, far past the tolerance.
    // F32/F16 weights read the f32 x even then, so their reference keeps it.
    let quantized = dtype.block_elements() > 1;
    let (qx, x) = if q8 {
        assert!(
            (m == 1 || as_decode.is_some()) && !c.norm && x_offset == 0,
            "8-bit x: the matrix-vector form, no norm"
        );
        assert_eq!(k % 32, 0, "8-bit x: rows of whole blocks");
        let (q, d) = quantize_row_q8(&x);
        let words: Vec<u32> = q
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]))
            .collect();
        let pairs: Vec<f32> = d.iter().flat_map(|&(d, s)| [d, s]).collect();
        let values = match quantized {
            true => q
                .iter()
                .enumerate()
                .map(|(i, &v)| d[i / 32].0 * v as f32)
                .collect(),
            false => x,
        };
        let bufs = (
            ctx.upload_u32("xq", &words).unwrap(),
            ctx.upload_f32("xd", &pairs).unwrap(),
        );
        (Some(bufs), values)
    } else {
        (None, x)
    };
    let mut padded = norm_w.clone();
    padded.resize(k.next_multiple_of(4), 0.0);
    let gnorm = ctx.upload_f32("norm", &padded).unwrap();
    let gbias = ctx.upload_f32("bias", &bias).unwrap();
    let gout = ctx.upload_f32("out", &out_init).unwrap();
    let normed = ctx.create_storage("normed", (4 * m * k) as u64).unwrap();
    let ranges = ctx.create_storage("x ranges", (4 * m * k) as u64).unwrap();
    let op = Linear {
        x: &gx,
        x_q8: qx
            .as_ref()
            .map(|(quants, scales)| Q8Rows { quants, scales }),
        x_offset,
        norm: c.norm.then_some((&*gnorm, 1e-5)),
        w: &w,
        bias: c.bias.then_some((&*gbias, 2)),
        out: &gout,
        out_offset: out_off,
        out_stride: stride,
        epilogue: c.epilogue,
        m,
        as_decode: as_decode.is_some(),
    };
    let mut rec = Recorder::new(ctx);
    let scratch = LinearScratch {
        normed: &normed,
        ranges: Some(&ranges),
    };
    let forced = Forced {
        vec_shape,
        dot4: Some(x8 == X8::Dot4),
        tokens: as_decode,
    };
    linear_as(&mut rec, &op, &scratch, forced).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let got = pollster::block_on(ctx.read_f32(&gout, 0, out_init.len())).unwrap();
    if as_decode.is_some() {
        // Each row as its own one-row op (a decode step): the same bits.
        let one = ctx.upload_f32("out one row", &out_init).unwrap();
        let row_q8: Vec<_> = (0..m)
            .map(|t| {
                qx.as_ref().map(|(quants, scales)| {
                    let words = pollster::block_on(ctx.read_u32(quants, t * k / 4, k / 4)).unwrap();
                    let pairs =
                        pollster::block_on(ctx.read_f32(scales, t * k / 16, k / 16)).unwrap();
                    (
                        ctx.upload_u32("xq row", &words).unwrap(),
                        ctx.upload_f32("xd row", &pairs).unwrap(),
                    )
                })
            })
            .collect();
        let mut rec = Recorder::new(ctx);
        for (t, q) in row_q8.iter().enumerate() {
            let row = Linear {
                // 8-bit x: the row's own blocks from 0 (quantized weights
                // read only those).
                x_offset: if q.is_some() { 0 } else { x_offset + t * k },
                x_q8: q.as_ref().map(|(quants, scales)| Q8Rows { quants, scales }),
                out: &one,
                out_offset: out_off + t * stride,
                m: 1,
                as_decode: false,
                ..op
            };
            linear_as(&mut rec, &row, &scratch, forced).unwrap();
        }
        pollster::block_on(rec.submit()).unwrap();
        let rows = pollster::block_on(ctx.read_f32(&one, 0, out_init.len())).unwrap();
        for (i, (a, b)) in got.iter().zip(&rows).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{dtype} k {k} n {n} m {m} {:?} {vec_shape:?} {x8:?} {as_decode:?} tokens: out[{i}] {a} as decode, {b} a row at a time",
                c.epilogue
            );
        }
    }
    let (want, scale) = reference(c, &x, &norm_w, &wv, &bias[2..], &prev);
    let what = format!(
        "{dtype} k {k} n {n} m {m} norm {} bias {} {:?} parts {part_rows:?} stride {stride} x at {x_offset} {vec_shape:?} {x8:?} as decode {as_decode:?}",
        c.norm, c.bias, c.epilogue
    );
    // As assert_dot_close (testutil): f32 sums of k products, plus the norm's
    // rounding and, when gating, the activation's: 8 sqrt(k) eps of the scale.
    let tol = 8.0 * (k as f64).sqrt() * f32::EPSILON as f64;
    assert_eq!(want.len(), m * width, "{what}: reference length");
    for (i, v) in got.iter().enumerate() {
        let (t, j) = (
            (i.max(out_off) - out_off) / stride,
            (i.max(out_off) - out_off) % stride,
        );
        if i < out_off || t >= m || j >= width {
            assert_eq!(*v, SENTINEL, "{what}: wrote outside its output at {i}");
            continue;
        }
        let (w_, s) = (want[t * width + j], scale[t * width + j]);
        let err = (*v as f64 - w_).abs();
        assert!(
            err <= tol * s + 1e-6,
            "{what}: out[{t}][{j}] = {v}, want {w_} (err {err:e}, allowed {:e})",
            tol * s
        );
    }
}

fn shapes(dtype: GgmlType) -> [(usize, usize); 3] {
    match dtype.block_elements() {
        1 => [(37, 14), (100, 66), (53, 300)],
        32 => [(32, 2), (96, 66), (160, 300)],
        _ => [(256, 2), (768, 66), (256, 300)],
    }
}

const EPILOGUES: [Epilogue; 4] = [
    Epilogue::Store,
    Epilogue::Add,
    Epilogue::Glu(Activation::Silu),
    Epilogue::Glu(Activation::GeluTanh),
];

#[test]
fn linear_matches_reference_for_every_dtype_form_and_epilogue() {
    for (d, dtype) in GPU_DTYPES.into_iter().enumerate() {
        for (s, (k, n)) in shapes(dtype).into_iter().enumerate().skip(d % 2).step_by(2) {
            for (e, epilogue) in EPILOGUES.into_iter().enumerate() {
                // One row (the matrix-vector forms) and several, 3 or 6
                // in turn (each pipeline is a compile of its own).
                for m in [1, [3, 6][(d + e) % 2]] {
                    let glu = matches!(epilogue, Epilogue::Glu(_));
                    let case = Case {
                        k,
                        n,
                        m,
                        norm: (s + e + m) % 2 == 0,
                        bias: !glu && (d + m) % 2 == 1,
                        epilogue,
                    };
                    run(&case, dtype, None, 0, (d * 100 + s * 10 + e) as u64);
                }
            }
        }
    }
}

/// A decode shape the vec4 core takes: over 64 steps a row, so lanes take
/// one or two steps each; whole 32-value blocks, as 8-bit x needs.
fn vec_shape(dtype: GgmlType) -> (usize, usize) {
    match dtype.block_elements() {
        1 => (1056, 18),
        32 => (2080, 18),
        _ => (4352, 10),
    }
}

/// Each pipeline this test builds is a compile of its own (seconds each on
/// lavapipe with a cold shader cache, as on a fresh CI machine), so it
/// covers every pair of dtype and vec shape, and of dtype and epilogue,
/// rather than the whole product: each dtype meets each shape once, with
/// the norm on every other shape (and the 8-bit readers where it is off),
/// and the epilogue turns with the dtype and the shape so that each dtype
/// and each shape meets every epilogue. The shape and the reduction are
/// where a kernel goes wrong for one dtype or one epilogue, and those pairs
/// all run.
#[test]
fn linear_vec_core_matches_reference_for_every_dtype_and_epilogue() {
    for (d, dtype) in GPU_DTYPES.into_iter().enumerate() {
        let (k, n) = vec_shape(dtype);
        let shapes = vec_shapes(dtype, k, n);
        // At least as many rows as epilogues, so each dtype meets them all.
        for s in 0..shapes.len().max(EPILOGUES.len()) {
            let shape = shapes[s % shapes.len()];
            // The norm's parity shifts with d / 2, so that across
            // dtypes each epilogue meets it both on and off.
            let norm = (d / 2 + s) % 2 == 1;
            let e = (d + s) % EPILOGUES.len();
            let epilogue = EPILOGUES[e];
            let glu = matches!(epilogue, Epilogue::Glu(_));
            let case = Case {
                k,
                n,
                m: 1,
                norm,
                bias: !glu && (d + e) % 2 == 1,
                epilogue,
            };
            let seed = (d * 10 + e) as u64;
            run_at(&case, dtype, None, 0, seed, 4, shape, X8::None, None);
            if !norm {
                for x8 in x8_readers(dtype) {
                    run_at(&case, dtype, None, 0, seed, 0, shape, x8, None);
                }
            }
        }
    }
    // Split parts and strided rows on the vec4 core.
    let case = Case {
        k: 96,
        n: 70,
        m: 1,
        norm: true,
        bias: true,
        epilogue: Epilogue::Add,
    };
    for shape in vec_shapes(GgmlType::Q8_0, case.k, case.n) {
        run_at(
            &case,
            GgmlType::Q8_0,
            Some(6),
            11,
            5,
            4,
            shape,
            X8::None,
            None,
        );
        let case = Case {
            norm: false,
            ..case
        };
        for x8 in x8_readers(GgmlType::Q8_0) {
            run_at(&case, GgmlType::Q8_0, Some(6), 11, 5, 0, shape, x8, None);
        }
    }
}

/// The adapter's vec4 core shape (`None`), then the CPU adapters' (8 and 4
/// lane batches) and the GPUs' shapes with each reduction this adapter runs
/// that can run them: the norm, bias and epilogues read the reduced sums, so
/// each reduction meets each of them. llvmpipe's shape both for `n` rows
/// and for a large matrix (16 rows a lane, more than `n` has).
fn vec_shapes(dtype: GgmlType, k: usize, n: usize) -> Vec<Option<VecShape>> {
    let fmt = crate::kernels::weights::GpuFormat::of(dtype).unwrap();
    let mut shapes = vec![None];
    let classes = [(Some(8), n), (Some(8), 1 << 20), (Some(4), n), (None, n)];
    for (cpu_lanes, rows) in classes {
        for reduce in vec_reductions() {
            let shape = VecShape::for_class(
                cpu_lanes,
                crate::kernels::matmul::vec_shape::Reduce::choose(cpu_lanes.is_some(), false),
                fmt,
                k,
                rows,
            );
            let shape = VecShape { reduce, ..shape };
            if shape.check().is_ok() && !shapes.contains(&Some(shape)) {
                shapes.push(Some(shape));
            }
        }
    }
    shapes
}

#[test]
fn linear_norm_bias_split_parts_and_strided_rows() {
    let dtype = GgmlType::Q8_0;
    for m in [1, 2, 5, 33] {
        for epilogue in EPILOGUES {
            let glu = matches!(epilogue, Epilogue::Glu(_));
            let case = Case {
                k: 96,
                n: 70,
                m,
                norm: true,
                bias: !glu,
                epilogue,
            };
            // Parts of 6 rows: whole gate/up pairs, and more parts than a workgroup's rows.
            run(&case, dtype, Some(6), 0, 7 + m as u64);
            if !glu {
                run(&case, dtype, Some(6), 11, 8 + m as u64);
            }
        }
    }
}

/// Prompt chunks whose x is longer than a uniform binding: where weights
/// live in textures (lavapipe) the prefill form reads x through windows,
/// a dispatch per slice of tokens (kernels::matmul::x_window), each slice's rows
/// from an aligned window offset; elsewhere this is the storage-x path
/// again. x from element 4, so no slice starts on the buffer's start;
/// parts of 6 rows, so slices and parts multiply; whole matrices of 70,
/// 192 and 200 rows, which take 16, 24 and 32 rows an invocation
/// (`TileShape::windowed`; 200 leave most of the last batch idle).
#[test]
fn linear_prefill_over_more_x_than_one_uniform_window() {
    let cases = [
        (GgmlType::F32, Epilogue::Add, false, 70),
        (GgmlType::Q4_1, Epilogue::Glu(Activation::Silu), true, 70),
        (GgmlType::Q4_K, Epilogue::Store, false, 192),
        (GgmlType::Q6_K, Epilogue::Store, true, 70),
        (
            GgmlType::Q5_0,
            Epilogue::Glu(Activation::GeluTanh),
            false,
            200,
        ),
        (GgmlType::Q8_0, Epilogue::Add, true, 192),
    ];
    for (i, (dtype, epilogue, norm, n)) in cases.into_iter().enumerate() {
        let case = Case {
            k: 256,
            n,
            m: 70,
            norm,
            bias: epilogue == Epilogue::Store,
            epilogue,
        };
        // More bytes of x than a 64 KiB uniform binding (lavapipe's) holds.
        assert!(4 * (4 + case.m * case.k) > 65536);
        let parts = (i % 2 == 0 && n == 70).then_some(6);
        run_at(
            &case,
            dtype,
            parts,
            3,
            40 + i as u64,
            4,
            None,
            X8::None,
            None,
        );
    }
}

/// Rows too long for a uniform window to hold two wide tiles (over 1024
/// f32 in lavapipe's 64 KiB): where weights live in textures the prefill
/// form copies x's rows into ranges of columns (kernels::matmul::x_ranges) and sums
/// the ranges' matmuls into out, the first with the bias and the op's
/// epilogue; elsewhere this is the storage-x path again. 2560 columns make
/// ranges of 1024, 1024 and 512 (whole K-quant blocks) or as even as
/// 32-element blocks allow; 37 rows, so windows of 16 leave a partial
/// tile; a norm first (the copy reads the normed rows), parts of 6 rows.
#[test]
fn linear_prefill_sums_ranges_of_rows_too_long_for_a_window() {
    let cases = [
        (GgmlType::F32, Epilogue::Store, false),
        (GgmlType::Q8_0, Epilogue::Add, true),
        (GgmlType::Q5_0, Epilogue::Store, false),
        (GgmlType::Q4_K, Epilogue::Add, false),
        (GgmlType::Q6_K, Epilogue::Store, true),
    ];
    for (i, (dtype, epilogue, norm)) in cases.into_iter().enumerate() {
        let case = Case {
            k: 2560,
            n: 70,
            // Chunks of many tiles, and one of fewer tokens than a tile
            // (ranges are taken whatever the chunk's length).
            m: if i % 2 == 0 { 37 } else { 3 },
            norm,
            bias: epilogue == Epilogue::Store,
            epilogue,
        };
        assert!(4 * 16 * case.k > 65536, "rows too long for 16 a window");
        let parts = (i % 2 == 1).then_some(6);
        run_at(
            &case,
            dtype,
            parts,
            5,
            60 + i as u64,
            4,
            None,
            X8::None,
            None,
        );
    }
}

/// A verifying pass's projections (`Linear::as_decode`): several token
/// rows in the matrix-vector form give, bit for bit, what each row gives
/// as a one-row op (a decode step), and match the reference. Every format
/// on the adapter's vec4 shape and a GPU's, each x reader (f32 from an
/// offset, with and without the folded norm; 8-bit blocks, to f32 and in
/// integer dot products), 1, 3 and 8 token rows a pipeline over 2, 5 and
/// 9 rows (a pass longer than a pipeline's rows runs in slices, the last
/// one short), split parts, strided and added-into output rows; and the
/// unit core (F32 rows of 37, not whole vec4 steps).
#[test]
fn rows_as_decode_equal_one_row_ops_bit_for_bit() {
    let mut case_no = 0u64;
    for (d, dtype) in GPU_DTYPES.into_iter().enumerate() {
        let (k, n) = match dtype.block_elements() {
            1 => (96, 40),
            32 => (128, 40),
            _ => (512, 40),
        };
        let fmt = crate::kernels::weights::GpuFormat::of(dtype).unwrap();
        let gpu = VecShape::for_class(
            None,
            crate::kernels::matmul::vec_shape::Reduce::choose(false, false),
            fmt,
            k,
            n,
        );
        for (s, shape) in [None, Some(gpu)].into_iter().enumerate() {
            let (tokens, m) = [(8, 9), (3, 5), (1, 2)][(d + s) % 3];
            let epilogue = EPILOGUES[(d + 2 * s) % EPILOGUES.len()];
            let glu = matches!(epilogue, Epilogue::Glu(_));
            let norm = (d + s) % 2 == 0;
            let case = Case {
                k,
                n,
                m,
                norm,
                bias: !glu && d % 2 == 1,
                epilogue,
            };
            case_no += 1;
            let parts = (d % 3 == 0).then_some(8);
            run_at(
                &case,
                dtype,
                parts,
                3,
                300 + case_no,
                4,
                shape,
                X8::None,
                Some(tokens),
            );
            if !norm && dtype.block_elements() > 1 {
                for x8 in x8_readers(dtype) {
                    run_at(
                        &case,
                        dtype,
                        None,
                        0,
                        400 + case_no,
                        0,
                        shape,
                        x8,
                        Some(tokens),
                    );
                }
            }
        }
    }
    // The unit core: rows that are not whole vec4 steps.
    for (i, norm) in [false, true].into_iter().enumerate() {
        let case = Case {
            k: 37,
            n: 22,
            m: 5,
            norm,
            bias: !norm,
            epilogue: [Epilogue::Add, Epilogue::Glu(Activation::Silu)][i],
        };
        run_at(
            &case,
            GgmlType::F32,
            None,
            2,
            500 + i as u64,
            3,
            None,
            X8::None,
            Some(4),
        );
    }
}
