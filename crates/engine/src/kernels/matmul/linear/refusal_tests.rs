//! The fused linear layer refuses what it cannot run with a typed error
//! and records nothing.

use super::*;
use crate::format::quant::{quantize, GgmlType};
use crate::testutil::{assert_shape_err, ctx, random_vec};

/// One row of x through `w` into `out`, stored plainly.
fn one_row<'a>(x: &'a GpuBuffer, w: &'a QuantMatrix, out: &'a GpuBuffer) -> Linear<'a> {
    Linear {
        x,
        x_q8: None,
        x_offset: 0,
        norm: None,
        w,
        bias: None,
        out,
        out_offset: 0,
        out_stride: w.rows,
        epilogue: Epilogue::Store,
        m: 1,
        as_decode: false,
    }
}

#[test]
fn linear_refuses_bad_shapes() {
    let ctx = ctx();
    let bytes = quantize(GgmlType::Q8_0, &random_vec(5 * 64, 1)).unwrap();
    let w = QuantMatrix::upload(ctx, "w", GgmlType::Q8_0, 5, 64, &bytes).unwrap();
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let out = ctx.create_storage("out", 4 * 10).unwrap();
    let s = ctx.create_storage("s", 4 * 64 * 8).unwrap();
    let scratch = LinearScratch {
        normed: &s,
        ranges: None,
    };
    let base = || one_row(&x, &w, &out);
    let mut rec = Recorder::new(ctx);
    let bad = [
        Linear { m: 2, ..base() }, // x too short
        Linear {
            out_stride: 4,
            ..base()
        }, // stride below width
        Linear {
            out_offset: 6,
            ..base()
        }, // out too short
        Linear {
            epilogue: Epilogue::Glu(Activation::Silu),
            ..base()
        }, // odd rows
        Linear { out: &x, ..base() }, // out aliases x
        Linear { m: 0, ..base() },
    ];
    for op in &bad {
        assert_shape_err(&linear(&mut rec, op, &scratch).unwrap_err(), "linear");
    }
    assert_eq!(rec.dispatches(), 0, "nothing recorded for refused calls");
}

#[test]
fn linear_refuses_integer_dot_products_it_cannot_run() {
    // F16 weights have no integer step functions on any device: forcing
    // them is an error, not a quiet run of the f32 reader.
    let ctx = ctx();
    let bytes = quantize(GgmlType::F16, &random_vec(4 * 64, 2)).unwrap();
    let w = QuantMatrix::upload(ctx, "w", GgmlType::F16, 4, 64, &bytes).unwrap();
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let xq = ctx.create_storage("xq", 64).unwrap();
    let xd = ctx.create_storage("xd", 4 * 4).unwrap();
    let out = ctx.create_storage("out", 4 * 4).unwrap();
    let q8 = Q8Rows {
        quants: &xq,
        scales: &xd,
    };
    let op = Linear {
        x_q8: Some(q8),
        ..one_row(&x, &w, &out)
    };
    let scratch = LinearScratch {
        normed: &out,
        ranges: None,
    };
    let forced = Forced {
        dot4: Some(true),
        ..Forced::default()
    };
    let mut rec = Recorder::new(ctx);
    let err = linear_as(&mut rec, &op, &scratch, forced).unwrap_err();
    assert_shape_err(&err, "linear");
    assert!(err.to_string().contains("integer dot products"), "{err}");
    assert_eq!(rec.dispatches(), 0, "nothing recorded for a refused call");
}

#[test]
fn linear_refuses_a_ranges_scratch_it_reads_or_writes() {
    let ctx = ctx();
    let bytes = quantize(GgmlType::F16, &random_vec(4 * 64, 2)).unwrap();
    let w = QuantMatrix::upload(ctx, "w", GgmlType::F16, 4, 64, &bytes).unwrap();
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let out = ctx.create_storage("out", 4 * 4).unwrap();
    let normed = ctx.create_storage("normed", 4 * 64).unwrap();
    let op = one_row(&x, &w, &out);
    for taken in [&x, &out, &normed] {
        let scratch = LinearScratch {
            normed: &normed,
            ranges: Some(taken),
        };
        let mut rec = Recorder::new(ctx);
        let err = linear(&mut rec, &op, &scratch).unwrap_err();
        assert_shape_err(&err, "linear");
        assert!(err.to_string().contains("ranges scratch"), "{err}");
        assert_eq!(rec.dispatches(), 0, "nothing recorded for a refused call");
    }
}
