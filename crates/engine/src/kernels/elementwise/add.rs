//! Residual add, in place: `x[i] += y[i]`.
//!
//! In place because that is how a decoder uses it (the residual stream absorbs
//! each block's output), and it saves binding a third buffer.

use crate::gpu::params::kernel_params;

use crate::gpu::{workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder};
use crate::kernels::{check_elems, words};

kernel_params! {
    pub(crate) struct Params {
        /// elements to add
        n: u32,
        /// first element of a
        a_offset: u32,
        /// first element of b
        b_offset: u32,
        /// first element of out
        out_offset: u32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "add",
    sources: &[include_str!("../../../../../shaders/elementwise/add.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite],
};

/// `x[x_offset + i] += y[y_offset + i]` for `i < n` (offsets in f32 elements).
pub fn add_in_place(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    y: &GpuBuffer,
    y_offset: usize,
    n: usize,
) -> Result<(), GpuError> {
    check_elems("add", "x", x, x_offset + n)?;
    check_elems("add", "y", y, y_offset + n)?;
    // y read, x read and written.
    rec.moved(words(3 * n));
    let params = Params {
        n: n as u32,
        a_offset: x_offset as u32,
        b_offset: y_offset as u32,
        out_offset: x_offset as u32,
    };
    rec.dispatch(&SPEC, &params, &[y, x], workgroups_for(n as u32, 256));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_shape_err;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn add_matches_cpu_on_awkward_lengths() {
        let ctx = ctx();
        for (n, x_off, y_off) in [(1, 0, 0), (255, 3, 0), (257, 0, 7), (1000, 13, 29)] {
            let x = random_vec(n + x_off, 1);
            let y = random_vec(n + y_off, 2);
            let gx = ctx.upload_f32("x", &x).unwrap();
            let gy = ctx.upload_f32("y", &y).unwrap();
            let mut rec = Recorder::new(ctx);
            add_in_place(&mut rec, &gx, x_off, &gy, y_off, n).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, x_off, n)).unwrap();
            let want: Vec<f32> = (0..n).map(|i| x[x_off + i] + y[y_off + i]).collect();
            // One f32 add on each side: the results are bit-identical.
            assert_close(&got, &want, 0.0, "add");
        }
    }

    #[test]
    fn add_rejects_short_buffers() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 16).unwrap();
        let mut rec = Recorder::new(ctx);
        let err = add_in_place(&mut rec, &x, 0, &x, 0, 5).unwrap_err();
        assert_shape_err(&err, "add");
    }
}
