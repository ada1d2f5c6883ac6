//! RMSNorm over rows: `out[r, i] = x[r, i] / sqrt(mean_i(x[r]^2) + eps) * weight[i]`.
//!
//! One kernel serves the block norms (rows = tokens, dim = hidden) and the
//! per-head q/k norms of Qwen3 and Gemma 3 (rows = tokens * heads, dim =
//! head_dim, weight of length head_dim). Gemma multiplies by `1 + weight`, but
//! llama.cpp's converter already adds the 1 to Gemma's norm weights when it
//! writes the GGUF, so plain RMSNorm is right for GGUF weights.
//!
//! In place (out in x's buffer at the same offset) is supported: x is then
//! bound once, read_write (see shaders/norm/rmsnorm.wgsl for why).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::{check_elems, words};

kernel_params! {
    pub(crate) struct Params {
        /// rows to normalise
        rows: u32,
        /// elements per row (and of weight)
        dim: u32,
        /// first element of x
        x_offset: u32,
        /// first element of out
        out_offset: u32,
        /// invocations per row: a power of two in 32..=256
        lanes: u32,
        /// added to the mean square
        eps: f32,
    }
}

const SOURCE: &str = include_str!("../../../../../shaders/norm/rmsnorm.wgsl");

const K: &str = "rmsnorm";

/// Invocations per row for rows of `len` elements: about four elements per
/// lane, at least 32 (so short rows still read a coalesced block) and at most
/// the 256 of a workgroup. Shared with softmax, which splits rows the same way.
pub(crate) fn lanes_for(len: usize) -> u32 {
    (len.div_ceil(4).next_power_of_two() as u32).clamp(32, 256)
}

/// Invocations per row of the norm on `rec`'s adapter. CPU adapters take
/// 32 whatever the row: their workgroups run each barrier as a switch
/// between lane batches, and 32 lanes a row (8 rows a workgroup) need 6
/// barriers where 256 need 9 for one row; a 64-row prefill's norm ran about
/// twice as fast on lavapipe so.
fn norm_lanes(rec: &Recorder, dim: usize) -> u32 {
    rec.ctx()
        .tuning
        .norm_lanes
        .unwrap_or_else(|| lanes_for(dim))
}

/// Whether element ranges `[a, a + n)` and `[b, b + n)` of one buffer overlap.
pub(crate) fn overlaps(a: usize, b: usize, n: usize) -> bool {
    n > 0 && a < b + n && b < a + n
}

/// Normalises `rows` rows of `dim` elements of `x` (from `x_offset`) into
/// `out` (from `out_offset`); offsets in f32 elements. `out` may be `x` at the
/// same offset (in place), or any range of another buffer; a partly
/// overlapping range of x's own buffer is refused, as is `out` in the weight's
/// buffer.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    weight: &GpuBuffer,
    out: &GpuBuffer,
    out_offset: usize,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<(), GpuError> {
    let lanes = norm_lanes(rec, dim);
    rms_norm_lanes(
        rec, lanes, x, x_offset, weight, out, out_offset, rows, dim, eps,
    )
}

/// `rms_norm` with `lanes` invocations a row (a power of two in 32..=256).
#[allow(clippy::too_many_arguments)]
fn rms_norm_lanes(
    rec: &mut Recorder,
    lanes: u32,
    x: &GpuBuffer,
    x_offset: usize,
    weight: &GpuBuffer,
    out: &GpuBuffer,
    out_offset: usize,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<(), GpuError> {
    let (params, groups) = checked(x, x_offset, weight, out, out_offset, rows, dim, eps, lanes)?;
    // x and out's rows, the weight.
    rec.moved(words(2 * rows * dim + dim));
    let n = rows * dim;
    if out.id() == weight.id() {
        return Err(shape_err(K, "out may not live in the weight's buffer"));
    }
    let in_place = out.id() == x.id();
    if in_place && out_offset != x_offset && overlaps(x_offset, out_offset, n) {
        return Err(shape_err(
            K,
            format!("out [{out_offset}, +{n}) partly overlaps x [{x_offset}, +{n}) in one buffer"),
        ));
    }
    if in_place {
        let defines = [
            ("X_ACCESS", "read_write".into()),
            ("OUT", "x".into()),
            ("PLUS", "".into()),
        ];
        let spec = KernelSpec {
            name: "rmsnorm_inplace",
            sources: &[SOURCE],
            flags: &[("SEPARATE_OUT", false)],
            defines: &defines,
            entry: "main",
            storage: &[Access::Read, Access::ReadWrite],
        };
        rec.dispatch(&spec, &params, &[weight, x], groups);
    } else {
        let defines = [
            ("X_ACCESS", "read".into()),
            ("OUT", "dst".into()),
            ("PLUS", "".into()),
        ];
        let spec = KernelSpec {
            name: "rmsnorm",
            sources: &[SOURCE],
            flags: &[("SEPARATE_OUT", true)],
            defines: &defines,
            entry: "main",
            storage: &[Access::Read, Access::Read, Access::ReadWrite],
        };
        rec.dispatch(&spec, &params, &[weight, x, out], groups);
    }
    Ok(())
}

/// `x[r, i] += y[r, i] / sqrt(mean_i(y[r]^2) + eps) * weight[i]` over `rows`
/// rows of `dim` (offsets in f32 elements); x, y and the weight in three buffers.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_add(
    rec: &mut Recorder,
    y: &GpuBuffer,
    y_offset: usize,
    weight: &GpuBuffer,
    x: &GpuBuffer,
    x_offset: usize,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<(), GpuError> {
    let lanes = norm_lanes(rec, dim);
    let (params, groups) = checked(y, y_offset, weight, x, x_offset, rows, dim, eps, lanes)?;
    if x.id() == y.id() || x.id() == weight.id() {
        return Err(shape_err(K, "x must be a buffer of its own"));
    }
    // y's rows, x's read and written, the weight.
    rec.moved(words(3 * rows * dim + dim));
    use std::borrow::Cow::Borrowed;
    const DEFINES: &[(&str, std::borrow::Cow<str>)] = &[
        ("X_ACCESS", Borrowed("read")),
        ("OUT", Borrowed("dst")),
        ("PLUS", Borrowed("dst[out_base + i] + ")),
    ];
    let spec = KernelSpec {
        name: "rmsnorm_add",
        sources: &[SOURCE],
        flags: &[("SEPARATE_OUT", true)],
        defines: DEFINES,
        entry: "main",
        storage: &[Access::Read, Access::Read, Access::ReadWrite],
    };
    rec.dispatch(&spec, &params, &[weight, y, x], groups);
    Ok(())
}

/// The checks both norms share (sizes, dim, eps), then their parameters and
/// dispatch shape: `rows` rows of `dim` read from `x` and written to `out`,
/// `lanes` invocations a row.
#[allow(clippy::too_many_arguments)]
fn checked(
    x: &GpuBuffer,
    x_offset: usize,
    weight: &GpuBuffer,
    out: &GpuBuffer,
    out_offset: usize,
    rows: usize,
    dim: usize,
    eps: f32,
    lanes: u32,
) -> Result<(Params, [u32; 3]), GpuError> {
    if dim == 0 {
        return Err(shape_err(K, "dim is 0"));
    }
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(shape_err(
            K,
            format!("eps {eps} is not a finite number >= 0"),
        ));
    }
    let n = rows * dim;
    check_elems(K, "x", x, x_offset + n)?;
    check_elems(K, "weight", weight, dim)?;
    check_elems(K, "out", out, out_offset + n)?;
    let params = Params {
        rows: rows as u32,
        dim: dim as u32,
        x_offset: x_offset as u32,
        out_offset: out_offset as u32,
        lanes,
        eps,
    };
    Ok((params, workgroups_for(rows as u32, 256 / lanes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec, reference_rms_norm as reference};

    // The GPU sums squares in f32, each lane over at most dim/lanes <= 65
    // elements (2049 over 32 lanes) then a tree of log2(lanes) <= 8 levels:
    // relative error at most ~73 * 2^-24 = 4.4e-6 (all terms are >= 0, so no
    // cancellation). The square root halves it, inverseSqrt adds 2 ULP and
    // the two products one ULP each: under 2.5e-6 relative. 1e-5 (relative,
    // absolute below 1) leaves margin.
    const TOL: f32 = 1e-5;

    #[test]
    fn rms_norm_matches_cpu_on_awkward_shapes() {
        let ctx = ctx();
        let shapes = [
            (1, 1),
            (3, 7),
            (37, 64),
            (5, 63),
            (3, 257),
            (2, 576),
            (1, 2049),
            (300, 128),
        ];
        for (case, (rows, dim)) in shapes.into_iter().enumerate() {
            let (x_off, out_off) = (case * 3 % 11, case % 5);
            let x = random_vec(x_off + rows * dim, 10 + case as u64);
            let w = random_vec(dim, 20 + case as u64);
            let gx = ctx.upload_f32("x", &x).unwrap();
            let gw = ctx.upload_f32("w", &w).unwrap();
            let gout = ctx
                .create_storage("out", (out_off + rows * dim) as u64 * 4)
                .unwrap();
            let want = reference(&x[x_off..], &w, rows, dim, 1e-6);
            // Both adapter classes' lanes a row: a CPU adapter's 32, a GPU's.
            for lanes in [32, lanes_for(dim)] {
                let mut rec = Recorder::new(ctx);
                rms_norm_lanes(
                    &mut rec, lanes, &gx, x_off, &gw, &gout, out_off, rows, dim, 1e-6,
                )
                .unwrap();
                pollster::block_on(rec.submit()).unwrap();
                let got = pollster::block_on(ctx.read_f32(&gout, out_off, rows * dim)).unwrap();
                let what = format!("rms_norm {rows}x{dim}, {lanes} lanes");
                assert_close(&got, &want, TOL, &what);
            }
        }
    }

    #[test]
    fn rms_norm_add_adds_the_normed_rows() {
        let ctx = ctx();
        for (rows, dim) in [(1, 5), (3, 640), (7, 257)] {
            let y = random_vec(2 + rows * dim, 30 + dim as u64);
            let x = random_vec(1 + rows * dim, 31 + dim as u64);
            let w = random_vec(dim, 32);
            let (gy, gx, gw) = (
                ctx.upload_f32("y", &y).unwrap(),
                ctx.upload_f32("x", &x).unwrap(),
                ctx.upload_f32("w", &w).unwrap(),
            );
            let mut rec = Recorder::new(ctx);
            rms_norm_add(&mut rec, &gy, 2, &gw, &gx, 1, rows, dim, 1e-6).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, 0, 1 + rows * dim)).unwrap();
            let normed = reference(&y[2..], &w, rows, dim, 1e-6);
            let want: Vec<f32> = std::iter::once(x[0])
                .chain(x[1..].iter().zip(&normed).map(|(a, b)| a + b))
                .collect();
            assert_close(&got, &want, TOL, &format!("rms_norm_add {rows}x{dim}"));
            let mut rec = Recorder::new(ctx);
            let err = rms_norm_add(&mut rec, &gx, 0, &gw, &gx, 0, 1, 5, 1e-6).unwrap_err();
            crate::testutil::assert_shape_err(&err, "rmsnorm");
        }
    }

    #[test]
    fn rms_norm_in_place_and_within_one_buffer() {
        let ctx = ctx();
        // Per-head q norm shape: many short rows, in place at an offset.
        let (rows, dim, off) = (37, 64, 5);
        let x = random_vec(off + rows * dim, 30);
        let w = random_vec(dim, 31);
        let gx = ctx.upload_f32("x", &x).unwrap();
        let gw = ctx.upload_f32("w", &w).unwrap();
        let mut rec = Recorder::new(ctx);
        rms_norm(&mut rec, &gx, off, &gw, &gx, off, rows, dim, 1e-5).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gx, 0, off + rows * dim)).unwrap();
        assert_eq!(
            &got[..off],
            &x[..off],
            "elements before the rows are untouched"
        );
        let want = reference(&x[off..], &w, rows, dim, 1e-5);
        assert_close(&got[off..], &want, TOL, "rms_norm in place");

        // Out in another, disjoint range of x's buffer.
        let (rows, dim) = (3, 257);
        let x = random_vec(2 * rows * dim, 32);
        let w = random_vec(dim, 33);
        let gx = ctx.upload_f32("x", &x).unwrap();
        let gw = ctx.upload_f32("w", &w).unwrap();
        let mut rec = Recorder::new(ctx);
        rms_norm(&mut rec, &gx, 0, &gw, &gx, rows * dim, rows, dim, 1e-5).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gx, 0, 2 * rows * dim)).unwrap();
        assert_eq!(
            &got[..rows * dim],
            &x[..rows * dim],
            "the input is untouched"
        );
        let want = reference(&x, &w, rows, dim, 1e-5);
        assert_close(&got[rows * dim..], &want, TOL, "rms_norm into x's buffer");
    }

    #[test]
    fn rms_norm_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let w = ctx.create_storage("w", 4 * 8).unwrap();
        let out = ctx.create_storage("out", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        let cases: [(&GpuBuffer, usize, &GpuBuffer, usize, usize, usize); 6] = [
            (&x, 1, &out, 0, 8, 8),  // x too short by one element
            (&x, 0, &out, 1, 8, 8),  // out too short
            (&x, 0, &out, 0, 4, 16), // weight too short
            (&x, 0, &out, 0, 1, 0),  // empty rows
            (&x, 0, &x, 8, 4, 8),    // in x's buffer, partly overlapping
            (&x, 0, &w, 0, 1, 8),    // out in the weight's buffer
        ];
        for (i, (xb, x_off, ob, o_off, rows, dim)) in cases.into_iter().enumerate() {
            let err = rms_norm(&mut rec, xb, x_off, &w, ob, o_off, rows, dim, 1e-5).unwrap_err();
            assert!(
                matches!(
                    err,
                    GpuError::Shape {
                        kernel: "rmsnorm",
                        ..
                    }
                ),
                "case {i}: {err}"
            );
        }
    }
}
