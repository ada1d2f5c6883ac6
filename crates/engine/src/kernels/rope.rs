//! Rotary position embedding, in place on `x` laid out `[rows][heads][head_dim]`.
//!
//! The first row's position comes through the parameter block, so decode steps
//! at successive positions record the same dispatch with a new uniform.
//! Which pair layout an architecture wants, see `RopeLayout`.

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};

/// Which elements of a head rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    /// Adjacent pairs `(2i, 2i + 1)`: ggml's `GGML_ROPE_TYPE_NORM`. Correct for
    /// llama-architecture GGUFs because llama.cpp's converter permutes the
    /// Q/K weight rows from Hugging Face's half-split order into this one.
    Interleaved,
    /// Half-split pairs `(i, i + n_rot / 2)`: `GGML_ROPE_TYPE_NEOX`, used by
    /// qwen2, qwen3 and gemma3 (their weights are not permuted).
    NeoX,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    rows: u32,
    heads: u32,
    head_dim: u32,
    n_rot: u32,
    x_offset: u32,
    pos0: u32,
    neox: u32,
    log2_base_step: f32,
    freq_scale: f32,
}

const SPEC: KernelSpec = KernelSpec {
    name: "rope",
    sources: &[include_str!("../../../../shaders/rope.wgsl")],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

/// Positions past 2^24 are not exact in f32, and the angles would be wrong.
pub const MAX_POSITION: u64 = 1 << 24;

/// Rotates the first `n_rot` elements of every head of `rows` tokens in place:
/// token `t` is at position `pos0 + t`, pair `i` turns by
/// `pos * theta_base^(-2i / n_rot) * freq_scale` radians.
#[allow(clippy::too_many_arguments)]
pub fn rope(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    rows: usize,
    heads: usize,
    head_dim: usize,
    n_rot: usize,
    pos0: u32,
    theta_base: f32,
    layout: RopeLayout,
    freq_scale: f32,
) -> Result<(), GpuError> {
    const K: &str = "rope";
    if heads == 0 || head_dim == 0 {
        return Err(shape_err(
            K,
            format!("heads {heads} and head_dim {head_dim} must be > 0"),
        ));
    }
    if n_rot == 0 || n_rot % 2 != 0 || n_rot > head_dim {
        return Err(shape_err(
            K,
            format!("n_rot {n_rot} must be even, > 0 and <= head_dim {head_dim}"),
        ));
    }
    if !(theta_base > 0.0 && theta_base.is_finite() && freq_scale.is_finite()) {
        return Err(shape_err(
            K,
            format!(
                "theta_base {theta_base} must be finite and > 0, freq_scale {freq_scale} finite"
            ),
        ));
    }
    if pos0 as u64 + rows as u64 > MAX_POSITION {
        return Err(shape_err(
            K,
            format!(
                "positions {pos0}..{} pass 2^24, where f32 loses integers",
                pos0 as u64 + rows as u64
            ),
        ));
    }
    check_elems(K, "x", x, x_offset + rows * heads * head_dim)?;
    let params = Params {
        rows: rows as u32,
        heads: heads as u32,
        head_dim: head_dim as u32,
        n_rot: n_rot as u32,
        x_offset: x_offset as u32,
        pos0,
        neox: (layout == RopeLayout::NeoX) as u32,
        // In f64, so the only rounding is the one to f32.
        log2_base_step: (2.0 * (theta_base as f64).log2() / n_rot as f64) as f32,
        freq_scale,
    };
    let pairs = (rows * heads * (n_rot / 2)) as u32;
    rec.dispatch(&SPEC, &params, &[x], workgroups_for(pairs, 256));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, random_vec};

    /// One call's arguments, but for x.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        rows: usize,
        heads: usize,
        head_dim: usize,
        n_rot: usize,
        pos0: u32,
        base: f32,
        layout: RopeLayout,
        freq_scale: f32,
    }

    /// The slow reference, in f64: angles and rotations exact but for the
    /// final rounding to f32.
    fn reference(x: &[f32], c: &Case) -> Vec<f32> {
        let mut out = x.to_vec();
        let half = c.n_rot / 2;
        for t in 0..c.rows {
            let pos = (c.pos0 as usize + t) as f64;
            for h in 0..c.heads {
                let head = (t * c.heads + h) * c.head_dim;
                for i in 0..half {
                    let freq = (c.base as f64).powf(-2.0 * i as f64 / c.n_rot as f64);
                    let angle = pos * freq * c.freq_scale as f64;
                    let (a, b) = match c.layout {
                        RopeLayout::Interleaved => (head + 2 * i, head + 2 * i + 1),
                        RopeLayout::NeoX => (head + i, head + i + half),
                    };
                    let (x0, x1) = (x[a] as f64, x[b] as f64);
                    out[a] = (x0 * angle.cos() - x1 * angle.sin()) as f32;
                    out[b] = (x0 * angle.sin() + x1 * angle.cos()) as f32;
                }
            }
        }
        out
    }

    /// Error bound for inputs in [-1, 1) at positions up to `max_pos`.
    /// The angle pos * freq * freq_scale is formed in f32: the step rounds
    /// once, i * step once (relative error 2^-24 each, which exp2 turns into
    /// ln2 * 2 * e ULP of freq for exponent e), exp2 adds 3 + 2e ULP (WGSL's
    /// bound), the two products one ULP together: relative error
    /// 2^-e * (4 + 3.4e) ULP of pos, at most 4.1 * 2^-24 * pos radians. The
    /// reduction to [-pi, pi] adds about 2^-24 * pi. A rotation error of d
    /// radians moves an output by at most d * |(x0, x1)| <= d * sqrt(2). sin
    /// and cos get an allowance of 2^-16: WGSL only promises 2^-11, but every
    /// implementation we run on (lavapipe's libm-grade code, NVIDIA, Apple) is
    /// far closer, and 2^-11 would hide errors the test is here to catch.
    /// Measured on lavapipe: 1.9e-4 at position 3000 (bound 1.1e-3), 5.2e-5
    /// at 600, under 1e-6 below 20: the f32 rounding of the angle dominates,
    /// as it does in llama.cpp, which also forms angles in f32.
    fn tolerance(max_pos: u32) -> f32 {
        let ulp = 2f32.powi(-24);
        let angle = 4.1 * ulp * max_pos as f32 + 4.0 * ulp;
        std::f32::consts::SQRT_2 * (angle + 2f32.powi(-16))
    }

    fn run_case(c: Case) {
        let ctx = ctx();
        let off = 3;
        let n = c.rows * c.heads * c.head_dim;
        let x = random_vec(off + n, c.pos0 as u64 + n as u64);
        let gx = ctx.upload_f32("x", &x).unwrap();
        let mut rec = Recorder::new(ctx);
        let (rows, heads, hd, n_rot) = (c.rows, c.heads, c.head_dim, c.n_rot);
        rope(
            &mut rec,
            &gx,
            off,
            rows,
            heads,
            hd,
            n_rot,
            c.pos0,
            c.base,
            c.layout,
            c.freq_scale,
        )
        .unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gx, 0, off + n)).unwrap();
        assert_eq!(
            &got[..off],
            &x[..off],
            "elements before x_offset are untouched"
        );
        let want = reference(&x[off..], &c);
        let tol = tolerance(c.pos0 + c.rows as u32);
        for (i, (g, w)) in got[off..].iter().zip(&want).enumerate() {
            let err = (g - w).abs();
            assert!(
                err <= tol,
                "{c:?}: index {i}: got {g}, want {w} (|err| {err}, tol {tol})"
            );
        }
    }

    #[test]
    fn rope_matches_f64_reference() {
        use RopeLayout::{Interleaved, NeoX};
        // (rows, heads, head_dim, n_rot, pos0, base, layout, freq_scale)
        let cases = [
            (1, 1, 2, 2, 0, 10000.0, Interleaved, 1.0),
            (3, 2, 64, 64, 5, 10000.0, Interleaved, 1.0),
            (3, 2, 64, 64, 5, 10000.0, NeoX, 1.0),
            (5, 3, 64, 32, 17, 10000.0, NeoX, 1.0), // partial rotation
            (5, 3, 64, 32, 17, 10000.0, Interleaved, 1.0),
            (4, 2, 128, 128, 600, 1e6, NeoX, 1.0),
            (2, 3, 128, 96, 600, 500000.0, Interleaved, 0.25),
            (3, 2, 128, 128, 3000, 1e6, NeoX, 1.0),
            (2, 1, 256, 256, 4093, 1e6, Interleaved, 1.0),
            (37, 1, 6, 6, 0, 10000.0, NeoX, 1.0),
        ];
        for (rows, heads, head_dim, n_rot, pos0, base, layout, freq_scale) in cases {
            run_case(Case {
                rows,
                heads,
                head_dim,
                n_rot,
                pos0,
                base,
                layout,
                freq_scale,
            });
        }
    }

    #[test]
    fn rope_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        let l = RopeLayout::NeoX;
        // (x_offset, rows, heads, head_dim, n_rot, pos0, base)
        let cases = [
            (1, 1, 1, 64, 64, 0, 1e4),       // x too short by one element
            (0, 1, 1, 64, 63, 0, 1e4),       // odd n_rot
            (0, 1, 1, 32, 64, 0, 1e4),       // n_rot > head_dim
            (0, 1, 1, 32, 0, 0, 1e4),        // n_rot 0
            (0, 1, 0, 32, 32, 0, 1e4),       // no heads
            (0, 1, 1, 32, 32, 0, -1.0),      // bad base
            (0, 2, 1, 32, 32, 1 << 24, 1e4), // positions past 2^24
        ];
        for (i, (off, rows, heads, hd, n_rot, pos0, base)) in cases.into_iter().enumerate() {
            let err = rope(
                &mut rec, &x, off, rows, heads, hd, n_rot, pos0, base, l, 1.0,
            )
            .unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: "rope", .. }),
                "case {i}: {err}"
            );
        }
    }
}
