//! `rope` with YaRN against the f64 reference of `rope_tests.rs`: heads of
//! 64 and 128, odd token counts, positions past the original context, the
//! ramp's both ends inside the pairs, and a partial ext_factor.

use super::*;

/// YaRN as llama.cpp resolves it for a file extended `1 / freq_scale`
/// times from `n_ctx_orig`, with `attn_factor` already folded in.
fn yarn(n_ctx_orig: u32, attn_factor: f32) -> Yarn {
    Yarn {
        ext_factor: 1.0,
        attn_factor,
        beta_fast: 32.0,
        beta_slow: 1.0,
        n_ctx_orig,
    }
}

fn yarn_case(
    shape: (usize, usize, usize, usize, u32),
    base: f32,
    layout: RopeLayout,
    freq_scale: f32,
    y: Yarn,
) -> Case {
    Case {
        yarn: y,
        ..case(shape, base, layout, freq_scale, None)
    }
}

#[test]
fn rope_yarn_matches_f64_reference() {
    use RopeLayout::{Interleaved, NeoX};
    let cases = [
        // Qwen 2.5's rope (base 1e6, 128 rotated) extended 4x from 4096,
        // at positions past the original context.
        yarn_case((3, 2, 128, 128, 5000), 1e6, NeoX, 0.25, yarn(4096, 1.0)),
        // A head of 64, an odd token count, a short original context.
        yarn_case((7, 3, 64, 64, 33), 1e4, Interleaved, 0.125, yarn(32, 1.0)),
        // Partial rotation, attn_factor not 1, half the extrapolation.
        yarn_case(
            (5, 1, 64, 48, 100),
            5e5,
            NeoX,
            0.5,
            Yarn {
                ext_factor: 0.5,
                ..yarn(64, 0.8)
            },
        ),
        // No linear factor: the blend of two equal angles, mscale 1.
        yarn_case((3, 2, 64, 64, 70), 1e4, Interleaved, 1.0, yarn(64, 1.0)),
        // attn_factor alone (linear scaling with rope.scaling.attn_factor).
        yarn_case(
            (2, 2, 128, 128, 900),
            1e4,
            NeoX,
            0.5,
            Yarn {
                attn_factor: 1.5,
                ..Yarn::NONE
            },
        ),
    ];
    for c in cases {
        let ([low, high], _) = yarn_reference(&c);
        let worst = run_case(&c);
        // YaRN changes the answer (but where freq_scale is 1 and the
        // magnitude 1): the same call without it is far outside the bound.
        if c.freq_scale != 1.0 {
            let (got, x) = run_kernel(&Case {
                yarn: Yarn::NONE,
                ..c.clone()
            });
            let want = reference(&x, &c);
            let moved = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f32::max);
            assert!(
                moved > 100.0 * worst.max(1e-4),
                "{c:?}: YaRN moved nothing ({moved}); ramp {low}..{high}"
            );
        }
    }
}

/// The ramp's ends are pairs inside the rotation for the real cases above,
/// so both the extrapolated and the interpolated ends are exercised.
#[test]
fn yarn_ramps_fall_inside_the_pairs() {
    let c = yarn_case(
        (1, 1, 128, 128, 0),
        1e6,
        RopeLayout::NeoX,
        0.25,
        yarn(4096, 1.0),
    );
    let ([low, high], mscale) = yarn_reference(&c);
    assert!(0.0 < low && low < high && high < 63.0, "{low}..{high}");
    assert!((mscale - (1.0 + 0.1 * 4f64.ln())).abs() < 1e-12);
    assert_eq!(c.yarn.corr_dims(128, 1e6), [low as f32, high as f32]);
}

#[test]
fn rope_rejects_a_yarn_it_cannot_compute() {
    let ctx = ctx();
    let x = ctx.create_storage("x", 4 * 64).unwrap();
    let mut rec = Recorder::new(ctx);
    for y in [
        Yarn {
            attn_factor: f32::NAN,
            ..yarn(64, 1.0)
        },
        Yarn {
            ext_factor: f32::INFINITY,
            ..yarn(64, 1.0)
        },
        // No original context: the ramp's ends are -inf..inf.
        yarn(0, 1.0),
    ] {
        let rot = Rotary {
            n_rot: 64,
            theta: 1e4,
            layout: RopeLayout::NeoX,
            freq_scale: 0.5,
            freq_factors: None,
            yarn: y,
        };
        let err = rope(&mut rec, &x, 0, 1, 1, 64, 0, &rot).unwrap_err();
        assert!(
            matches!(err, GpuError::Shape { kernel: "rope", .. }),
            "{y:?}: {err}"
        );
    }
    assert_eq!(rec.dispatches(), 0);
}
