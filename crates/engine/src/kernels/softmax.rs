//! Softmax over rows, in place and numerically stable (the row's max is
//! subtracted before exponentiating).
//!
//! Masking: entries `<= -1e30`, `-inf` included, are masked: they come out 0
//! and take no part in the max or the sum. A row with every entry masked comes
//! out all zeros (not NaN): a caller that must tell "nothing allowed" apart
//! checks for that. Inputs must not be `+inf` or NaN.

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use super::rmsnorm::lanes_for;
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    x_offset: u32,
    lanes: u32,
}

const SPEC: KernelSpec = KernelSpec {
    name: "softmax",
    sources: &[include_str!("../../../../shaders/softmax.wgsl")],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

/// Replaces each of `rows` rows of `cols` elements of `x` (from `x_offset`,
/// in f32 elements) by its softmax.
pub fn softmax(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    rows: usize,
    cols: usize,
) -> Result<(), GpuError> {
    if cols == 0 {
        return Err(shape_err("softmax", "cols is 0"));
    }
    check_elems("softmax", "x", x, x_offset + rows * cols)?;
    let lanes = lanes_for(cols);
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        x_offset: x_offset as u32,
        lanes,
    };
    rec.dispatch(
        &SPEC,
        &params,
        &[x],
        workgroups_for(rows as u32, 256 / lanes),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, random_vec};

    /// The slow reference, in f64, with the same masking rule.
    fn reference(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let masked = |v: f32| v <= -1e30;
        let mut out = Vec::with_capacity(rows * cols);
        for row in x.chunks(cols).take(rows) {
            let max = row
                .iter()
                .filter(|&&v| !masked(v))
                .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let sum: f64 = row
                .iter()
                .filter(|&&v| !masked(v))
                .map(|&v| (v as f64 - max).exp())
                .sum();
            out.extend(row.iter().map(|&v| {
                if masked(v) {
                    0.0
                } else {
                    ((v as f64 - max).exp() / sum) as f32
                }
            }));
        }
        out
    }

    // Checked relative to each probability (a row of 151936 has them all
    // near 1e-5, where an absolute tolerance would accept anything). WGSL's
    // exp is good to 3 + 2|x| ULP; with inputs spread over [-8, 8),
    // |x - max| <= 16: 35 ULP = 2.1e-6 relative per term. The online rescaling
    // multiplies a partial sum by at most log2(lanes) + cols/lanes such
    // factors, each ~2 ULP off, and f32 summation adds ~log2(n) ULP: under
    // 1e-5 relative in the sum for these sizes, so 2e-5 on each probability.
    // (lavapipe's exp is far better: it measures under 5e-8.)
    const TOL: f32 = 2e-5;

    fn assert_probs(got: &[f32], want: &[f32], what: &str) {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            // Masked entries must be exactly 0; the 1e-30 floor only covers
            // probabilities that underflow.
            let ok = if w == 0.0 {
                g == 0.0
            } else {
                (g - w).abs() <= TOL * w + 1e-30
            };
            assert!(ok, "{what}: index {i}: got {g}, want {w}");
        }
    }

    fn check(rows: usize, cols: usize, x_off: usize, x: &[f32]) {
        let ctx = ctx();
        let gx = ctx.upload_f32("x", x).unwrap();
        let mut rec = Recorder::new(ctx);
        softmax(&mut rec, &gx, x_off, rows, cols).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gx, 0, x.len())).unwrap();
        assert_eq!(
            &got[..x_off],
            &x[..x_off],
            "elements before x_offset are untouched"
        );
        let n = rows * cols;
        assert_eq!(
            &got[x_off + n..],
            &x[x_off + n..],
            "elements after the rows are untouched"
        );
        let want = reference(&x[x_off..], rows, cols);
        assert_probs(
            &got[x_off..x_off + n],
            &want,
            &format!("softmax {rows}x{cols}"),
        );
    }

    #[test]
    fn softmax_matches_cpu_on_awkward_shapes() {
        let shapes = [(1, 1), (3, 7), (37, 64), (5, 257), (2, 2049), (1, 151936)];
        for (case, (rows, cols)) in shapes.into_iter().enumerate() {
            let x_off = case * 7 % 5;
            // Spread to [-8, 8) so the exps span e^16 and the max matters.
            let x: Vec<f32> = random_vec(x_off + rows * cols + 2, 40 + case as u64)
                .into_iter()
                .map(|v| 8.0 * v)
                .collect();
            check(rows, cols, x_off, &x);
        }
    }

    #[test]
    fn softmax_handles_masked_entries() {
        let (rows, cols) = (4, 37);
        let mut x: Vec<f32> = random_vec(rows * cols, 50)
            .into_iter()
            .map(|v| 4.0 * v)
            .collect();
        // Row 0: a causal-style mask of -inf past column 10.
        for v in &mut x[11..cols] {
            *v = f32::NEG_INFINITY;
        }
        // Row 1: every entry masked (-inf and -FLT_MAX): zeros, not NaN.
        for (c, v) in x[cols..2 * cols].iter_mut().enumerate() {
            *v = if c % 2 == 0 {
                f32::NEG_INFINITY
            } else {
                f32::MIN
            };
        }
        // Row 2: one surviving entry gets probability 1.
        for (c, v) in x[2 * cols..3 * cols].iter_mut().enumerate() {
            if c != 30 {
                *v = -1e30;
            }
        }
        // Row 3: large logits, where a softmax without max subtraction overflows.
        for v in &mut x[3 * cols..] {
            *v += 1000.0;
        }
        check(rows, cols, 0, &x);
    }

    #[test]
    fn softmax_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        for (i, (off, rows, cols)) in [(1, 8, 8), (0, 1, 65), (0, 1, 0)].into_iter().enumerate() {
            let err = softmax(&mut rec, &x, off, rows, cols).unwrap_err();
            assert!(
                matches!(
                    err,
                    GpuError::Shape {
                        kernel: "softmax",
                        ..
                    }
                ),
                "case {i}: {err}"
            );
        }
    }
}
