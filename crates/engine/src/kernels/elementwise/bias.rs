//! Bias add over rows, in place: `x[r, c] += bias[c]` (Qwen2's q/k/v biases).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

kernel_params! {
    pub(crate) struct Params {
        /// rows of x
        rows: u32,
        /// elements per row, and of bias
        cols: u32,
        /// first element of x
        x_offset: u32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "bias",
    sources: &[include_str!("../../../../../shaders/elementwise/bias.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite],
};

/// Adds `bias` (`cols` elements) to each of `rows` rows of `x` (from
/// `x_offset`, in f32 elements). The bias may not live in x's buffer: WebGPU
/// forbids binding one buffer both read-only and writable in a dispatch.
pub fn add_bias(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    bias: &GpuBuffer,
    rows: usize,
    cols: usize,
) -> Result<(), GpuError> {
    if cols == 0 {
        return Err(shape_err("bias", "cols is 0"));
    }
    if bias.id() == x.id() {
        return Err(shape_err("bias", "the bias may not live in x's buffer"));
    }
    check_elems("bias", "x", x, x_offset + rows * cols)?;
    check_elems("bias", "bias", bias, cols)?;
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        x_offset: x_offset as u32,
    };
    rec.dispatch(
        &SPEC,
        &params,
        &[bias, x],
        workgroups_for((rows * cols) as u32, 256),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn add_bias_matches_cpu_on_awkward_shapes() {
        let ctx = ctx();
        for (case, (rows, cols)) in [(1, 1), (3, 7), (37, 64), (5, 257), (1, 2049)]
            .into_iter()
            .enumerate()
        {
            let off = case * 3 % 4;
            let x = random_vec(off + rows * cols + 1, 60 + case as u64);
            let b = random_vec(cols, 70 + case as u64);
            let gx = ctx.upload_f32("x", &x).unwrap();
            let gb = ctx.upload_f32("b", &b).unwrap();
            let mut rec = Recorder::new(ctx);
            add_bias(&mut rec, &gx, off, &gb, rows, cols).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, 0, x.len())).unwrap();
            let mut want = x.clone();
            for (i, v) in want[off..off + rows * cols].iter_mut().enumerate() {
                *v += b[i % cols];
            }
            // One f32 add on each side: bit-identical, and nothing outside
            // the rows changes.
            assert_close(&got, &want, 0.0, &format!("add_bias {rows}x{cols}"));
        }
    }

    #[test]
    fn add_bias_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let b = ctx.create_storage("b", 4 * 8).unwrap();
        let mut rec = Recorder::new(ctx);
        let cases: [(&GpuBuffer, usize, usize, usize); 4] = [
            (&b, 1, 8, 8),  // x too short by one element
            (&b, 0, 4, 16), // bias too short
            (&b, 0, 4, 0),  // no columns
            (&x, 0, 4, 8),  // bias in x's buffer
        ];
        for (i, (bias, off, rows, cols)) in cases.into_iter().enumerate() {
            let err = add_bias(&mut rec, &x, off, bias, rows, cols).unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: "bias", .. }),
                "case {i}: {err}"
            );
        }
    }
}
