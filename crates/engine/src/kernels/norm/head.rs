//! Per-head RMSNorm in place on strided rows: the q and k norms of an
//! encoder whose q, k and v are column ranges of one projection's rows
//! (EmbeddingGemma). The decoder's `rms_norm` normalises contiguous rows, and
//! its fused `rope_kv` writes into a KV cache; neither fits rows where a
//! token's q heads, k head and v head lie side by side with different norm
//! weights. See shaders/norm/head_norm.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

/// Which heads of which rows. Columns in f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadNorm {
    pub rows: usize,
    /// Normalised heads per row, contiguous from `col`.
    pub heads: usize,
    pub head_dim: usize,
    pub row_stride: usize,
    pub col: usize,
    pub eps: f32,
}

kernel_params! {
    pub(crate) struct Params {
        rows: u32,
        /// normalised heads per row, contiguous from col
        heads: u32,
        head_dim: u32,
        /// elements between rows
        row_stride: u32,
        /// first column of the first head
        col: u32,
        eps: f32,
    }
}

const K: &str = "head_norm";
const SPEC: KernelSpec = KernelSpec {
    name: K,
    sources: &[include_str!("../../../../../shaders/norm/head_norm.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite],
};

/// Normalises `a.heads` heads of every row of `x` in place, each scaled by
/// `weight` (`a.head_dim` values).
pub fn head_norm(
    rec: &mut Recorder,
    a: &HeadNorm,
    weight: &GpuBuffer,
    x: &GpuBuffer,
) -> Result<(), GpuError> {
    if a.rows == 0 || a.heads == 0 || a.head_dim == 0 {
        return Err(shape_err(
            K,
            format!(
                "empty call ({} rows of {} heads of {})",
                a.rows, a.heads, a.head_dim
            ),
        ));
    }
    if a.col + a.heads * a.head_dim > a.row_stride {
        return Err(shape_err(
            K,
            format!(
                "{} heads of {} from column {} pass the row stride {}",
                a.heads, a.head_dim, a.col, a.row_stride
            ),
        ));
    }
    if !(a.eps >= 0.0 && a.eps.is_finite()) {
        return Err(shape_err(
            K,
            format!("eps {} is not a finite number >= 0", a.eps),
        ));
    }
    if x.id() == weight.id() {
        return Err(shape_err(K, "x may not live in the weight's buffer"));
    }
    check_elems(K, "weight", weight, a.head_dim)?;
    check_elems(K, "x", x, a.rows * a.row_stride)?;
    let params = Params {
        rows: a.rows as u32,
        heads: a.heads as u32,
        head_dim: a.head_dim as u32,
        row_stride: a.row_stride as u32,
        col: a.col as u32,
        eps: a.eps,
    };
    let invocations = (a.rows * a.heads) as u32;
    rec.dispatch(
        &SPEC,
        &params,
        &[weight, x],
        workgroups_for(invocations, 64),
    );
    Ok(())
}

/// The f64 reference: `x` with the heads normalised, rounded once to f32.
pub fn head_norm_reference(a: &HeadNorm, weight: &[f32], x: &[f32]) -> Vec<f32> {
    let mut out = x.to_vec();
    for r in 0..a.rows {
        for h in 0..a.heads {
            let base = r * a.row_stride + a.col + h * a.head_dim;
            let head = &x[base..][..a.head_dim];
            let mean_sq =
                head.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / a.head_dim as f64;
            let scale = 1.0 / (mean_sq + a.eps as f64).sqrt();
            for (d, &v) in head.iter().enumerate() {
                out[base + d] = (v as f64 * scale * weight[d] as f64) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    fn run(a: &HeadNorm, seed: u64) {
        let ctx = ctx();
        let x = random_vec(a.rows * a.row_stride, seed);
        let weight: Vec<f32> = random_vec(a.head_dim, seed + 100)
            .iter()
            .map(|w| 1.0 + w)
            .collect();
        let gx = ctx.upload_f32("x", &x).unwrap();
        let gw = ctx.upload_f32("weight", &weight).unwrap();
        let mut rec = Recorder::new(ctx);
        head_norm(&mut rec, a, &gw, &gx).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gx, 0, x.len())).unwrap();
        // Normalised values are O(1) (weights in [0, 2], inputs in [-1, 1]);
        // f32 sums of <= 256 squares and one inverse square root stay within
        // ~1e-6 of f64. Columns outside the heads must come back untouched
        // (the reference copies them), which a wrong stride or column breaks.
        assert_close(
            &got,
            &head_norm_reference(a, &weight, &x),
            1e-5,
            &format!("{a:?}"),
        );
    }

    #[test]
    fn head_norm_matches_reference_on_awkward_shapes() {
        let shape = |rows, heads, head_dim, row_stride, col| HeadNorm {
            rows,
            heads,
            head_dim,
            row_stride,
            col,
            eps: 1e-6,
        };
        run(&shape(1, 1, 1, 1, 0), 1);
        // EmbeddingGemma's rows: 3 q heads of 256 at column 0, then the k
        // head at column 768, in rows of 1280 (v after them).
        run(&shape(7, 3, 256, 1280, 0), 2);
        run(&shape(7, 1, 256, 1280, 768), 3);
        // Odd sizes, slack on both sides of the heads, a large eps.
        run(&shape(13, 2, 7, 23, 5), 4);
        run(
            &HeadNorm {
                eps: 0.5,
                ..shape(3, 4, 12, 50, 2)
            },
            5,
        );
        // More rows than one dimension of workgroups holds (2-D dispatch).
        run(&shape(70_000, 1, 4, 4, 0), 6);
    }

    #[test]
    fn head_norm_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 2 * 16).unwrap();
        let w = ctx.create_storage("w", 4 * 8).unwrap();
        let good = HeadNorm {
            rows: 2,
            heads: 2,
            head_dim: 8,
            row_stride: 16,
            col: 0,
            eps: 1e-6,
        };
        let mut rec = Recorder::new(ctx);
        head_norm(&mut rec, &good, &w, &x).unwrap();
        for (i, a) in [
            HeadNorm { rows: 0, ..good },
            HeadNorm { col: 4, ..good },
            HeadNorm { rows: 3, ..good },
            HeadNorm {
                head_dim: 9,
                row_stride: 18,
                ..good
            },
            HeadNorm {
                eps: f32::NAN,
                ..good
            },
        ]
        .iter()
        .enumerate()
        {
            let err = head_norm(&mut rec, a, &w, &x).unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: K, .. }),
                "case {i}: {err}"
            );
        }
        assert!(head_norm(&mut rec, &good, &x, &x).is_err(), "x as weight");
    }
}
