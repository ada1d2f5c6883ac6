//! `rope` against an f64 reference: plain, linear position scaling, and
//! per-pair frequency factors (Llama 3.1 / 3.2's `rope_freqs`); YaRN in
//! `rope_yarn_tests.rs`.

use super::*;
use crate::testutil::{ctx, random_vec};

/// One call's arguments, but for x.
#[derive(Clone, Debug)]
struct Case {
    rows: usize,
    heads: usize,
    head_dim: usize,
    n_rot: usize,
    pos0: u32,
    base: f32,
    layout: RopeLayout,
    freq_scale: f32,
    /// `n_rot / 2` divisors of the frequencies, or none.
    factors: Option<Vec<f32>>,
    yarn: Yarn,
}

/// YaRN's ramp ends and magnitude for `c`, worked out in f64 from
/// llama.cpp's formulas (`ggml_rope_yarn_corr_dims`, `rope_yarn`).
fn yarn_reference(c: &Case) -> ([f64; 2], f64) {
    let y = &c.yarn;
    let (n_rot, base) = (c.n_rot as f64, c.base as f64);
    let dim = |beta: f32| {
        let turns = y.n_ctx_orig as f64 / (2.0 * std::f64::consts::PI * beta as f64);
        n_rot * turns.ln() / (2.0 * base.ln())
    };
    let ends = [
        dim(y.beta_fast).floor().max(0.0),
        dim(y.beta_slow).ceil().min(n_rot - 1.0),
    ];
    let mut mscale = y.attn_factor as f64;
    if y.ext_factor != 0.0 {
        mscale *= 1.0 + 0.1 * (1.0 / c.freq_scale as f64).ln();
    }
    (ends, mscale)
}

/// The slow reference, in f64: angles and rotations exact but for the
/// final rounding to f32. Pair i turns by theta = pos * base^(-2i / n_rot) /
/// factor_i times freq_scale, blended with theta itself by YaRN's ramp, and
/// cos and sin carry YaRN's magnitude (llama.cpp's `rope_yarn`).
fn reference(x: &[f32], c: &Case) -> Vec<f32> {
    let mut out = x.to_vec();
    let half = c.n_rot / 2;
    let ([low, high], mscale) = yarn_reference(c);
    let ext = c.yarn.ext_factor as f64;
    for t in 0..c.rows {
        let pos = (c.pos0 as usize + t) as f64;
        for h in 0..c.heads {
            let head = (t * c.heads + h) * c.head_dim;
            for i in 0..half {
                let factor = c.factors.as_ref().map_or(1.0, |f| f[i] as f64);
                let freq = (c.base as f64).powf(-2.0 * i as f64 / c.n_rot as f64) / factor;
                let theta = pos * freq;
                let mut angle = theta * c.freq_scale as f64;
                if ext != 0.0 {
                    let y = (i as f64 - low) / (high - low).max(0.001);
                    let mix = (1.0 - y.clamp(0.0, 1.0)) * ext;
                    angle = angle * (1.0 - mix) + theta * mix;
                }
                let (sin, cos) = angle.sin_cos();
                let (sin, cos) = (sin * mscale, cos * mscale);
                let (a, b) = match c.layout {
                    RopeLayout::Interleaved => (head + 2 * i, head + 2 * i + 1),
                    RopeLayout::NeoX => (head + i, head + i + half),
                };
                let (x0, x1) = (x[a] as f64, x[b] as f64);
                out[a] = (x0 * cos - x1 * sin) as f32;
                out[b] = (x0 * sin + x1 * cos) as f32;
            }
        }
    }
    out
}

/// Llama 3's frequency factors as Meta's reference code and llama.cpp's
/// converter compute them (for `rope_freqs.weight`): wavelengths shorter
/// than `original_ctx / high` keep their frequency, longer than
/// `original_ctx / low` are divided by `factor`, and those between blend.
pub(crate) fn llama3_factors(
    n_rot: usize,
    base: f64,
    factor: f64,
    low: f64,
    high: f64,
) -> Vec<f32> {
    let original_ctx = 8192.0;
    (0..n_rot / 2)
        .map(|i| {
            let freq = base.powf(-2.0 * i as f64 / n_rot as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < original_ctx / high {
                1.0
            } else if wavelen > original_ctx / low {
                factor as f32
            } else {
                let smooth = (original_ctx / wavelen - low) / (high - low);
                (1.0 / ((1.0 - smooth) / factor + smooth)) as f32
            }
        })
        .collect()
}

/// Error bound for inputs in [-1, 1) at positions up to `max_pos`.
/// The angle pos * freq / factor * freq_scale is formed in f32: the step
/// rounds once, i * step once (relative error 2^-24 each, which exp2 turns
/// into ln2 * 2 * e ULP of freq for exponent e), exp2 adds 3 + 2e ULP
/// (WGSL's bound), the division by a factor 2.5 ULP (WGSL's bound), the two
/// products one ULP together: relative error 2^-e * (6.5 + 3.4e) ULP of pos,
/// at most 6.5 * 2^-24 * pos radians (a factor of 1 or more only shrinks
/// the angle). The reduction to [-pi, pi] adds about 2^-24 * pi. A rotation
/// error of d radians moves an output by at most d * |(x0, x1)| <= d *
/// sqrt(2). sin and cos get an allowance of 2^-16: WGSL only promises
/// 2^-11, but every implementation we run on (lavapipe's libm-grade code,
/// NVIDIA, Apple) is far closer, and 2^-11 would hide errors the test is
/// here to catch. Measured on lavapipe: 1.9e-4 at position 3000 (bound
/// 1.7e-3), 5.2e-5 at 600, under 1e-6 below 20: the f32 rounding of the
/// angle dominates, as it does in llama.cpp, which also forms angles in f32.
fn tolerance(max_pos: u32) -> f32 {
    let ulp = 2f32.powi(-24);
    let angle = 6.5 * ulp * max_pos as f32 + 4.0 * ulp;
    std::f32::consts::SQRT_2 * (angle + 2f32.powi(-16))
}

/// The kernel's output for `c`, and `x` as it went in (with `off` elements
/// before it, which must come back untouched).
fn run_kernel(c: &Case) -> (Vec<f32>, Vec<f32>) {
    let ctx = ctx();
    let off = 3;
    let n = c.rows * c.heads * c.head_dim;
    let x = random_vec(off + n, c.pos0 as u64 + n as u64);
    let gx = ctx.upload_f32("x", &x).unwrap();
    let factors = c.factors.as_ref().map(|f| ctx.upload_f32("ff", f).unwrap());
    let rot = Rotary {
        n_rot: c.n_rot,
        theta: c.base,
        layout: c.layout,
        freq_scale: c.freq_scale,
        freq_factors: factors.as_deref(),
        yarn: c.yarn,
    };
    let mut rec = Recorder::new(ctx);
    rope(
        &mut rec, &gx, off, c.rows, c.heads, c.head_dim, c.pos0, &rot,
    )
    .unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let got = pollster::block_on(ctx.read_f32(&gx, 0, off + n)).unwrap();
    assert_eq!(
        &got[..off],
        &x[..off],
        "elements before x_offset are untouched"
    );
    (got[off..].to_vec(), x[off..].to_vec())
}

/// Largest |kernel - reference| for `c`, asserted within the tolerance.
fn run_case(c: &Case) -> f32 {
    let (got, x) = run_kernel(c);
    let want = reference(&x, c);
    // The magnitude scales every error with the output; YaRN's blend of two
    // angles rounds three more times (two products and a sum, relative
    // 2^-24 each), which a quarter more allowance covers.
    let yarn = match c.yarn.ext_factor != 0.0 {
        true => 1.25 * yarn_reference(c).1 as f32,
        false => c.yarn.attn_factor,
    };
    let tol = tolerance(c.pos0 + c.rows as u32) * yarn;
    let mut worst = 0.0f32;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= tol,
            "{c:?}: index {i}: got {g}, want {w} (|err| {err}, tol {tol})"
        );
        worst = worst.max(err);
    }
    worst
}

fn case(
    (rows, heads, head_dim, n_rot, pos0): (usize, usize, usize, usize, u32),
    base: f32,
    layout: RopeLayout,
    freq_scale: f32,
    factors: Option<Vec<f32>>,
) -> Case {
    Case {
        rows,
        heads,
        head_dim,
        n_rot,
        pos0,
        base,
        layout,
        freq_scale,
        factors,
        yarn: Yarn::NONE,
    }
}

#[test]
fn rope_matches_f64_reference() {
    use RopeLayout::{Interleaved, NeoX};
    // ((rows, heads, head_dim, n_rot, pos0), base, layout)
    let cases = [
        ((1, 1, 2, 2, 0), 10000.0, Interleaved),
        ((3, 2, 64, 64, 5), 10000.0, Interleaved),
        ((3, 2, 64, 64, 5), 10000.0, NeoX),
        ((5, 3, 64, 32, 17), 10000.0, NeoX), // partial rotation
        ((5, 3, 64, 32, 17), 10000.0, Interleaved),
        ((4, 2, 128, 128, 600), 1e6, NeoX),
        ((3, 2, 128, 128, 3000), 1e6, NeoX),
        ((2, 1, 256, 256, 4093), 1e6, Interleaved),
        ((37, 1, 6, 6, 0), 10000.0, NeoX),
    ];
    for (shape, base, layout) in cases {
        run_case(&case(shape, base, layout, 1.0, None));
    }
}

/// `rope.scaling.type` linear: every angle times 1 / factor, which is the
/// position divided by the factor.
#[test]
fn rope_linear_scaling_matches_f64_reference() {
    use RopeLayout::{Interleaved, NeoX};
    for (shape, base, layout, scale) in [
        ((2, 3, 128, 96, 600), 500000.0, Interleaved, 0.25),
        ((3, 2, 64, 64, 2047), 10000.0, NeoX, 0.125),
        ((7, 1, 10, 10, 31), 10000.0, NeoX, 0.5),
    ] {
        run_case(&case(shape, base, layout, scale, None));
    }
}

/// Llama 3.2's factors (factor 32, low 1, high 4, as in its config.json and
/// the tiny-llama3 fixture) and Llama 3.1's (factor 8), at the positions of
/// a long prompt, where they matter most; then arbitrary positive factors
/// on an awkward shape, with linear scaling on top.
#[test]
fn rope_frequency_factors_match_f64_reference() {
    use RopeLayout::{Interleaved, NeoX};
    let llama32 = llama3_factors(64, 500000.0, 32.0, 1.0, 4.0);
    let llama31 = llama3_factors(128, 500000.0, 8.0, 1.0, 4.0);
    assert!(llama32[0] == 1.0 && llama32[31] == 32.0 && llama32[16] > 1.0);
    let odd: Vec<f32> = random_vec(7, 5)
        .iter()
        .map(|v| 1.0 + 20.0 * v.abs())
        .collect();
    let cases = [
        case(
            (4, 2, 64, 64, 2300),
            500000.0,
            Interleaved,
            1.0,
            Some(llama32.clone()),
        ),
        case((3, 3, 64, 64, 0), 500000.0, NeoX, 1.0, Some(llama32)),
        case(
            (2, 2, 128, 128, 3000),
            500000.0,
            Interleaved,
            1.0,
            Some(llama31),
        ),
        case((9, 3, 18, 14, 41), 10000.0, NeoX, 0.5, Some(odd)),
    ];
    for c in cases {
        let worst = run_case(&c);
        // The factors change the answer: without them the kernel would be
        // far outside the tolerance (except at position 0, where every
        // angle is 0).
        if c.pos0 > 0 {
            let plain = Case {
                factors: None,
                ..c.clone()
            };
            let (got, x) = run_kernel(&plain);
            let want = reference(&x, &c);
            let moved = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f32::max);
            assert!(
                moved > 100.0 * worst.max(1e-4),
                "{c:?}: factors moved nothing ({moved})"
            );
        }
    }
}

#[test]
fn rope_rejects_bad_shapes() {
    let ctx = ctx();
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let short = ctx.create_storage("ff", 4 * 15).unwrap();
    let mut rec = Recorder::new(ctx);
    let rot = |n_rot: usize, theta: f32| Rotary {
        n_rot,
        theta,
        layout: RopeLayout::NeoX,
        freq_scale: 1.0,
        freq_factors: None,
        yarn: Yarn::NONE,
    };
    // (x_offset, rows, heads, head_dim, pos0, rotation)
    let cases = [
        (1, 1, 1, 64, 0, rot(64, 1e4)),       // x too short by one element
        (0, 1, 1, 64, 0, rot(63, 1e4)),       // odd n_rot
        (0, 1, 1, 32, 0, rot(64, 1e4)),       // n_rot > head_dim
        (0, 1, 1, 32, 0, rot(0, 1e4)),        // n_rot 0
        (0, 1, 0, 32, 0, rot(32, 1e4)),       // no heads
        (0, 1, 1, 32, 0, rot(32, -1.0)),      // bad base
        (0, 2, 1, 32, 1 << 24, rot(32, 1e4)), // positions past 2^24
        (
            0,
            1,
            1,
            32,
            0,
            Rotary {
                freq_scale: f32::NAN,
                ..rot(32, 1e4)
            },
        ),
        // 15 factors for 16 pairs
        (
            0,
            1,
            1,
            32,
            0,
            Rotary {
                freq_factors: Some(&short),
                ..rot(32, 1e4)
            },
        ),
    ];
    for (i, (off, rows, heads, hd, pos0, r)) in cases.into_iter().enumerate() {
        let err = rope(&mut rec, &x, off, rows, heads, hd, pos0, &r).unwrap_err();
        assert!(
            matches!(err, GpuError::Shape { kernel: "rope", .. }),
            "case {i}: {err}"
        );
    }
    assert_eq!(rec.dispatches(), 0);
}
mod yarn;
