//! LayerNorm with weight and bias over rows, in place (BERT's post-norm
//! blocks and its embedding norm): `x[r] = (x[r] - mean) / sqrt(var + eps) *
//! w + b`, the variance the biased one (divided by `cols`), as PyTorch's
//! `nn.LayerNorm`. See shaders/norm/layer_norm.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

kernel_params! {
    pub(crate) struct Params {
        /// rows of x (dispatch x and y, see below)
        rows: u32,
        /// elements per row, and of w and b
        cols: u32,
        /// first element of x
        x_offset: u32,
        eps: f32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "layer_norm",
    sources: &[include_str!("../../../../../shaders/norm/layer_norm.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::Read, Access::ReadWrite],
};

/// Normalises `rows` rows of `cols` elements of `x` (from `x_offset`, in f32
/// elements) in place, then scales by `weight` and adds `bias` (`cols` each,
/// in buffers other than x's).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    weight: &GpuBuffer,
    bias: &GpuBuffer,
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(), GpuError> {
    const K: &str = "layer_norm";
    if rows == 0 || cols == 0 {
        return Err(shape_err(K, format!("empty rows ({rows} x {cols})")));
    }
    if weight.id() == x.id() || bias.id() == x.id() {
        return Err(shape_err(K, "weight and bias may not live in x's buffer"));
    }
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(shape_err(
            K,
            format!("eps {eps} is not a finite number >= 0"),
        ));
    }
    check_elems(K, "x", x, x_offset + rows * cols)?;
    check_elems(K, "weight", weight, cols)?;
    check_elems(K, "bias", bias, cols)?;
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        x_offset: x_offset as u32,
        eps,
    };
    rec.dispatch(
        &SPEC,
        &params,
        &[weight, bias, x],
        workgroups_for(rows as u32, 1),
    );
    Ok(())
}

/// The f64 reference: each row of `x` (`cols` wide) normalised in place.
pub fn layer_norm_reference(x: &mut [f64], weight: &[f32], bias: &[f32], cols: usize, eps: f64) {
    for row in x.chunks_mut(cols) {
        let mean = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for (c, v) in row.iter_mut().enumerate() {
            *v = (*v - mean) * inv * weight[c] as f64 + bias[c] as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn layer_norm_matches_f64_reference_on_awkward_shapes() {
        let ctx = ctx();
        // Column counts below, at and past the workgroup size, odd ones, and
        // rows with a large mean against their spread (the two-pass variance).
        for (case, (rows, cols, shift)) in [
            (1, 1, 0.0),
            (3, 7, 0.0),
            (5, 63, 100.0),
            (2, 384, 0.0),
            (4, 1000, 30.0),
        ]
        .into_iter()
        .enumerate()
        {
            let off = case * 5 % 7;
            let mut x = random_vec(off + rows * cols + 3, 80 + case as u64);
            x.iter_mut().for_each(|v| *v = *v * 3.0 + shift);
            let w = random_vec(cols, 90 + case as u64);
            let b = random_vec(cols, 100 + case as u64);
            let (gx, gw, gb) = (
                ctx.upload_f32("x", &x).unwrap(),
                ctx.upload_f32("w", &w).unwrap(),
                ctx.upload_f32("b", &b).unwrap(),
            );
            let mut rec = Recorder::new(ctx);
            layer_norm(&mut rec, &gx, off, &gw, &gb, rows, cols, 1e-5).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, 0, x.len())).unwrap();
            let mut rows64: Vec<f64> = x[off..off + rows * cols]
                .iter()
                .map(|&v| v as f64)
                .collect();
            layer_norm_reference(&mut rows64, &w, &b, cols, 1e-5);
            let mut want = x.clone();
            for (dst, v) in want[off..].iter_mut().zip(&rows64) {
                *dst = *v as f32;
            }
            // Outputs are O(1) (|w|, |b| < 1 over unit-variance rows); f32
            // sums of up to 1000 values and one sqrt leave errors near 1e-6.
            // A wrong mean, variance or column (weight, bias) is off by >1e-2.
            assert_close(&got, &want, 2e-5, &format!("layer_norm {rows}x{cols}"));
        }
    }

    #[test]
    fn layer_norm_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let w = ctx.create_storage("w", 4 * 8).unwrap();
        let mut rec = Recorder::new(ctx);
        let cases: [(&GpuBuffer, usize, usize, usize, f32); 5] = [
            (&w, 1, 8, 8, 1e-5),     // x too short by one element
            (&w, 0, 4, 16, 1e-5),    // weight too short
            (&w, 0, 0, 8, 1e-5),     // no rows
            (&x, 0, 4, 8, 1e-5),     // weight in x's buffer
            (&w, 0, 4, 8, f32::NAN), // eps
        ];
        for (i, (weight, off, rows, cols, eps)) in cases.into_iter().enumerate() {
            let err = layer_norm(&mut rec, &x, off, weight, &w, rows, cols, eps).unwrap_err();
            assert!(
                matches!(
                    err,
                    GpuError::Shape {
                        kernel: "layer_norm",
                        ..
                    }
                ),
                "case {i}: {err}"
            );
        }
    }
}
