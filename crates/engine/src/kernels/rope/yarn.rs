//! YaRN's part of a rotation, as ggml's `rope_yarn` computes it: the angle
//! of pair `i` blends the interpolated angle (`freq_scale * theta`) with the
//! extrapolated one (`theta`) along a ramp over the pairs, and cos and sin
//! are multiplied by a magnitude scale.
//!
//! With `ext_factor` 0 (no YaRN) the angle is the interpolated one and the
//! scale is `attn_factor` alone: linear scaling and plain RoPE are the
//! special cases `Yarn::NONE` gives.

/// llama.cpp's YaRN parameters, as its context resolves them
/// (`model::rope_scaling` reads them from metadata).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// How much of the extrapolated angle the ramp mixes in: 1 for YaRN, 0
    /// for none (which also leaves the magnitude alone).
    pub ext_factor: f32,
    /// Multiplies cos and sin (llama.cpp's `attn_factor`).
    pub attn_factor: f32,
    /// Pairs that turn more than `beta_fast` times over the original
    /// context keep the extrapolated angle...
    pub beta_fast: f32,
    /// ...and those that turn fewer than `beta_slow` times the
    /// interpolated one.
    pub beta_slow: f32,
    /// The context the model was trained at before extension.
    pub n_ctx_orig: u32,
}

impl Yarn {
    /// No YaRN: llama.cpp's defaults with `ext_factor` 0.
    pub const NONE: Yarn = Yarn {
        ext_factor: 0.0,
        attn_factor: 1.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
        n_ctx_orig: 0,
    };

    /// The ramp's first and last pair, `ggml_rope_yarn_corr_dims`: the pair
    /// that turns `beta` times over the original context is
    /// `n_rot * ln(n_ctx_orig / (2 pi beta)) / (2 ln base)`. In f32 as ggml
    /// computes it, because the floor and ceil make it a step function: an
    /// f64 value could land on the other side of an integer.
    pub fn corr_dims(&self, n_rot: usize, base: f32) -> [f32; 2] {
        let dim = |beta: f32| {
            let turns = self.n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI);
            n_rot as f32 * turns.ln() / (2.0 * base.ln())
        };
        let start = dim(self.beta_fast).floor();
        let end = dim(self.beta_slow).ceil();
        [start.max(0.0), end.min(n_rot as f32 - 1.0)]
    }

    /// The factor on cos and sin at a linear scale of `freq_scale`:
    /// `attn_factor`, times `1 + 0.1 ln(1 / freq_scale)` when YaRN is on
    /// (ggml's `rope_yarn`, in f32 like it).
    pub fn mscale(&self, freq_scale: f32) -> f32 {
        match self.ext_factor != 0.0 {
            true => self.attn_factor * (1.0 + 0.1 * (1.0 / freq_scale).ln()),
            false => self.attn_factor,
        }
    }
}

impl Default for Yarn {
    fn default() -> Yarn {
        Yarn::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values llama.cpp's formula gives for common models, worked by hand
    /// in f64: Qwen 2.5 (n_rot 128, base 1e6, 32768 original) puts the
    /// ramp between pairs 23.6 -> 23 and 39.7 -> 40; Llama 2 with YaRN (n_rot
    /// 128, base 1e4, 4096) between 20.9 -> 20 and 45.03 -> 46.
    #[test]
    fn corr_dims_match_hand_worked_values() {
        let yarn = |n_ctx_orig| Yarn {
            ext_factor: 1.0,
            n_ctx_orig,
            ..Yarn::NONE
        };
        assert_eq!(yarn(32768).corr_dims(128, 1e6), [23.0, 40.0]);
        assert_eq!(yarn(4096).corr_dims(128, 1e4), [20.0, 46.0]);
        // A short original context: the start clamps at 0; a long one with
        // few pairs: the end clamps at n_rot - 1.
        assert_eq!(yarn(64).corr_dims(64, 1e4)[0], 0.0);
        assert_eq!(yarn(1 << 30).corr_dims(8, 10.0)[1], 7.0);
    }

    #[test]
    fn mscale_is_attn_factor_without_yarn() {
        assert_eq!(Yarn::NONE.mscale(0.25), 1.0);
        let yarn = Yarn {
            ext_factor: 1.0,
            attn_factor: 0.5,
            ..Yarn::NONE
        };
        let want = 0.5 * (1.0 + 0.1 * 4f64.ln());
        assert!((yarn.mscale(0.25) as f64 - want).abs() < 1e-6);
        assert_eq!(yarn.mscale(1.0), 0.5);
    }
}
