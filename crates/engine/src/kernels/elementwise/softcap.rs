//! Soft-capping in place: `x[i] = cap * tanh(x[i] / cap)`, which bends
//! values smoothly into `(-cap, cap)`: Gemma 2's final logits (cap 30). Its
//! attention scores are capped inside the attention kernel
//! (`AttentionArgs::softcap`).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::{check_elems, words};

kernel_params! {
    pub(crate) struct Params {
        /// elements to cap
        n: u32,
        /// first element of x
        x_offset: u32,
        /// finite, > 0
        cap: f32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "softcap",
    sources: &[include_str!(
        "../../../../../shaders/elementwise/softcap.wgsl"
    )],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

/// `x[x_offset + i] = cap * tanh(x[x_offset + i] / cap)` for `i < n`.
pub fn softcap(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    n: usize,
    cap: f32,
) -> Result<(), GpuError> {
    const K: &str = "softcap";
    if !(cap.is_finite() && cap > 0.0) {
        return Err(shape_err(K, format!("cap {cap} must be finite and > 0")));
    }
    check_elems(K, "x", x, x_offset + n)?;
    rec.moved(words(2 * n));
    let params = Params {
        n: n as u32,
        x_offset: x_offset as u32,
        cap,
    };
    rec.dispatch(&SPEC, &params, &[x], workgroups_for(n as u32, 256));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, assert_shape_err, ctx, random_vec};

    #[test]
    fn softcap_matches_cpu_on_awkward_lengths() {
        let ctx = ctx();
        for (n, off, cap) in [(1, 0, 30.0), (257, 5, 1.5), (70_001, 3, 0.25)] {
            // Values far past the cap too, where tanh saturates.
            let x: Vec<f32> = random_vec(n + off, 3)
                .iter()
                .enumerate()
                .map(|(i, v)| v * if i % 7 == 0 { 1e4 } else { 40.0 })
                .collect();
            let gx = ctx.upload_f32("x", &x).unwrap();
            let mut rec = Recorder::new(ctx);
            softcap(&mut rec, &gx, off, n, cap).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, 0, n + off)).unwrap();
            let want: Vec<f32> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| match i < off {
                    true => v,
                    false => (cap as f64 * (v as f64 / cap as f64).tanh()) as f32,
                })
                .collect();
            // The GPU's tanh in f32 against f64's: a few ulps of the cap.
            assert_close(&got, &want, 1e-5, &format!("softcap n {n} cap {cap}"));
            assert!(got[off..].iter().all(|v| v.abs() <= cap), "within the cap");
        }
    }

    #[test]
    fn softcap_refuses_bad_caps_and_short_buffers() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 16).unwrap();
        let mut rec = Recorder::new(ctx);
        for (n, cap) in [(5, 1.0), (4, 0.0), (4, f32::NAN), (4, -2.0)] {
            let err = softcap(&mut rec, &x, 0, n, cap).unwrap_err();
            assert_shape_err(&err, "softcap");
        }
    }
}
