//! GELU in its exact form, in place: `x = 0.5 x (1 + erf(x / sqrt 2))`
//! (BERT's `hidden_act: "gelu"`, PyTorch's default `nn.GELU()`). See
//! shaders/elementwise/gelu.wgsl for the erf it computes.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

kernel_params! {
    pub(crate) struct Params {
        /// elements
        n: u32,
        /// first element of x
        x_offset: u32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "gelu_erf",
    sources: &[include_str!("../../../../../shaders/elementwise/gelu.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

/// Applies GELU to `n` elements of `x` from `x_offset` (f32 elements).
pub fn gelu_erf(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    n: usize,
) -> Result<(), GpuError> {
    if n == 0 {
        return Err(shape_err("gelu_erf", "no elements"));
    }
    check_elems("gelu_erf", "x", x, x_offset + n)?;
    let params = Params {
        n: n as u32,
        x_offset: x_offset as u32,
    };
    rec.dispatch(&SPEC, &params, &[x], workgroups_for(n as u32, 256));
    Ok(())
}

/// erf in f64 (the reference): its Maclaurin series below |v| = 2.5 (the
/// largest term is about 500, so cancellation costs 3 of f64's digits), and
/// above, 1 - erfc by erfc's continued fraction (Abramowitz and Stegun
/// 7.1.14), 80 levels deep, far past convergence there.
pub fn erf_reference(v: f64) -> f64 {
    let a = v.abs();
    if a < 2.5 {
        // erf(v) = 2/sqrt(pi) * sum_n (-1)^n v^(2n+1) / (n! (2n+1))
        let (mut term, mut sum) = (v, v);
        for n in 1..200u32 {
            term *= -v * v / n as f64;
            sum += term / (2 * n + 1) as f64;
            if term.abs() < 1e-18 {
                break;
            }
        }
        return sum * 2.0 / std::f64::consts::PI.sqrt();
    }
    // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...))))
    let mut f = a;
    for k in (1..=80).rev() {
        f = a + (k as f64 / 2.0) / f;
    }
    let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / f;
    (1.0 - erfc).copysign(v)
}

/// The f64 reference of one element.
pub fn gelu_erf_reference(x: f64) -> f64 {
    0.5 * x * (1.0 + erf_reference(x / std::f64::consts::SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn erf_reference_matches_known_values() {
        // erf(0.5), erf(1), erf(2), erf(3) to 15 digits (tables of erf).
        for (v, want) in [
            (0.5, 0.520499877813047),
            (1.0, 0.842700792949715),
            (2.0, 0.995322265018953),
            (3.0, 0.999977909503001),
        ] {
            assert!(
                (erf_reference(v) - want).abs() < 1e-13,
                "erf({v}) = {}",
                erf_reference(v)
            );
            assert!((erf_reference(-v) + want).abs() < 1e-13);
        }
    }

    #[test]
    fn gelu_matches_f64_reference_on_awkward_shapes() {
        let ctx = ctx();
        for (case, n) in [1usize, 7, 255, 257, 1536 * 3 + 5].into_iter().enumerate() {
            let off = case * 3 % 5;
            // Values across [-8, 8): both tails and the bend near 0.
            let mut x = random_vec(off + n + 2, 110 + case as u64);
            x.iter_mut().for_each(|v| *v *= 8.0);
            let gx = ctx.upload_f32("x", &x).unwrap();
            let mut rec = Recorder::new(ctx);
            gelu_erf(&mut rec, &gx, off, n).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&gx, 0, x.len())).unwrap();
            let mut want = x.clone();
            for v in &mut want[off..off + n] {
                *v = gelu_erf_reference(*v as f64) as f32;
            }
            // erf's approximation is within 1.5e-7 absolute, times 0.5 |x| <= 4,
            // plus f32 rounding: 1e-6 (relative for |x| > 1). The tanh form of
            // GELU differs from this one by up to 5e-4: a test that fails on it.
            assert_close(&got, &want, 1e-6, &format!("gelu_erf n={n}"));
        }
    }

    #[test]
    fn gelu_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 16).unwrap();
        let mut rec = Recorder::new(ctx);
        for (i, (off, n)) in [(0usize, 17usize), (1, 16), (0, 0)].into_iter().enumerate() {
            let err = gelu_erf(&mut rec, &x, off, n).unwrap_err();
            assert!(
                matches!(
                    err,
                    GpuError::Shape {
                        kernel: "gelu_erf",
                        ..
                    }
                ),
                "case {i}: {err}"
            );
        }
    }
}
