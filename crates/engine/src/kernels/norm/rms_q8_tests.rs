use super::*;
use crate::testutil::{assert_close, assert_shape_err, ctx, random_vec, reference_rms_norm};

struct Run {
    out: Vec<f32>,
    q: Vec<i8>,
    scales: Vec<(f32, f32)>,
}

#[allow(clippy::too_many_arguments)]
fn run(x: &[f32], x_off: usize, w: &[f32], out_off: usize, rows: usize, dim: usize) -> Run {
    let ctx = ctx();
    let gx = ctx.upload_f32("x", x).unwrap();
    let gw = ctx.upload_f32("w", w).unwrap();
    let out = ctx
        .create_storage("out", ((out_off + rows * dim) * 4) as u64)
        .unwrap();
    let (nq, ns) = Q8Rows::elems(rows, dim);
    let quants = ctx.create_storage("q", (nq * 4) as u64).unwrap();
    let scales = ctx.create_storage("d", (ns * 4) as u64).unwrap();
    let q8 = Q8Rows {
        quants: &quants,
        scales: &scales,
    };
    let mut rec = Recorder::new(ctx);
    rms_norm_q8(
        &mut rec, &gx, x_off, &gw, &out, out_off, &q8, rows, dim, 1e-6,
    )
    .unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let got = pollster::block_on(ctx.read_f32(&out, out_off, rows * dim)).unwrap();
    let words = pollster::block_on(ctx.read_u32(&quants, 0, nq)).unwrap();
    let d = pollster::block_on(ctx.read_f32(&scales, 0, ns)).unwrap();
    Run {
        out: got,
        q: words
            .iter()
            .flat_map(|w| w.to_le_bytes().map(|b| b as i8))
            .collect(),
        scales: d.chunks(2).map(|p| (p[0], p[1])).collect(),
    }
}

// The f32 rows: as rmsnorm.rs's test (f32 sums of squares, then two
// products), well under 1e-5 relative.
const TOL: f32 = 1e-5;

#[test]
fn rms_norm_q8_matches_cpu_blocks() {
    // 4096 has 128 blocks: two per lane of the 64-lane workgroup.
    let shapes = [(1, 32), (3, 576), (2, 896), (1, 4096), (5, 64)];
    for (case, (rows, dim)) in shapes.into_iter().enumerate() {
        let (x_off, out_off) = (4 * (case % 3), 8 * (case % 2));
        let mut x = random_vec(x_off + rows * dim, 40 + case as u64);
        // A block of zeros (d = 0) and a block with one large value.
        x[x_off..x_off + 32].fill(0.0);
        if rows * dim >= 96 {
            x[x_off + 70] = 40.0;
        }
        let w = random_vec(dim, 50 + case as u64);
        let got = run(&x, x_off, &w, out_off, rows, dim);
        let want = reference_rms_norm(&x[x_off..], &w, rows, dim, 1e-6);
        let what = format!("rms_norm_q8 {rows}x{dim}");
        assert_close(&got.out, &want, TOL, &what);

        let blocks = rows * dim / Q8_BLOCK;
        assert_eq!(
            (got.q.len(), got.scales.len()),
            (rows * dim, blocks),
            "{what}: lengths"
        );
        let (cpu_q, cpu_scales) = quantize_row_q8(&got.out);
        assert_eq!(got.scales[0], (0.0, 0.0), "{what}: a zero block has d = 0");
        for b in 0..blocks {
            let (d, s) = got.scales[b];
            let (cd, _) = cpu_scales[b];
            // d is max|v| / 127 of the very f32 values the CPU quantizes,
            // rounded to f16: the two f32 d may differ in their last bits
            // and so round one f16 step (2^-10 relative) apart.
            assert!(
                (d - cd).abs() <= cd / 1024.0,
                "{what} block {b}: d {d}, CPU {cd}"
            );
            let qs = &got.q[b * 32..(b + 1) * 32];
            let sum: i32 = qs.iter().map(|&q| q as i32).sum();
            assert!(
                (s - d * sum as f32).abs() <= 1e-6 * (d * 32.0 * 127.0),
                "{what} block {b}: sum"
            );
            for (i, &q) in qs.iter().enumerate() {
                let v = got.out[b * 32 + i];
                // Round to nearest by the unrounded d: a value is within half
                // a step of d * q, plus |q| <= 127 times d's f16 rounding
                // (2^-11 relative). Ties may round either way, one step
                // apart from the CPU.
                assert!(
                    (v - d * q as f32).abs() <= d * (0.5 + 127.0 / 2048.0) * (1.0 + 1e-3),
                    "{what} value {}",
                    b * 32 + i
                );
                assert!(
                    (q as i32 - cpu_q[b * 32 + i] as i32).abs() <= 1,
                    "{what} value {}",
                    b * 32 + i
                );
            }
            if d > 0.0 {
                assert_eq!(
                    qs.iter().map(|q| q.unsigned_abs()).max(),
                    Some(127),
                    "{what} block {b}: max |q|"
                );
            }
        }
    }
}

#[test]
fn rms_norm_q8_rejects_bad_shapes() {
    let ctx = ctx();
    let x = ctx.create_storage("x", 4 * 128).unwrap();
    let w = ctx.create_storage("w", 4 * 64).unwrap();
    let out = ctx.create_storage("out", 4 * 128).unwrap();
    let quants = ctx.create_storage("q", 4 * 32).unwrap();
    let scales = ctx.create_storage("d", 4 * 8).unwrap();
    let q8 = Q8Rows {
        quants: &quants,
        scales: &scales,
    };
    let alias = Q8Rows {
        quants: &out,
        scales: &scales,
    };
    let mut rec = Recorder::new(ctx);
    let cases: [(usize, usize, usize, usize, &Q8Rows); 7] = [
        (0, 0, 2, 48, &q8),    // rows not whole blocks
        (2, 0, 1, 64, &q8),    // x offset not a multiple of 4
        (0, 0, 3, 64, &q8),    // x, out and the 8-bit rows too short
        (64, 0, 2, 64, &q8),   // x too short from its offset
        (0, 0, 0, 64, &q8),    // no rows
        (0, 0, 1, 64, &alias), // quants in out's buffer
        (0, 4, 2, 64, &q8),    // out too short from its offset
    ];
    for (i, (x_off, out_off, rows, dim, q8)) in cases.into_iter().enumerate() {
        let err = rms_norm_q8(&mut rec, &x, x_off, &w, &out, out_off, q8, rows, dim, 1e-6)
            .expect_err(&format!("case {i}"));
        assert_shape_err(&err, K);
    }
    assert_eq!(rec.dispatches(), 0, "a refused call records nothing");
}
