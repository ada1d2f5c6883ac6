//! Rotary position embedding, in place on `x` laid out `[rows][heads][head_dim]`.
//!
//! The first row's position comes through the parameter block, so decode steps
//! at successive positions record the same dispatch with a new uniform.
//! Which pair layout an architecture wants, see `RopeLayout`.

pub mod bidir;
pub mod kv;
pub mod yarn;

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;
pub use crate::kernels::rope::yarn::Yarn;

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

/// How positions become angles: pair `i` (of `n_rot / 2`) of a token at
/// position `pos` turns by `pos * theta^(-2i / n_rot) / factor_i * freq_scale`
/// radians, blended with the unscaled angle where YaRN asks for it, and cos
/// and sin carry YaRN's magnitude scale: llama.cpp's `ggml_rope_ext`.
#[derive(Clone, Copy)]
pub struct Rotary<'a> {
    /// Rotated elements of each head (even; the rest pass through).
    pub n_rot: usize,
    /// The frequency base.
    pub theta: f32,
    pub layout: RopeLayout,
    /// Linear position scaling (`1 / rope.scaling.factor`): multiplies
    /// every angle. 1.0 without scaling.
    pub freq_scale: f32,
    /// Per-pair divisors of the frequency (`rope_freqs.weight`, Llama 3.1 /
    /// 3.2's scaling, which llama.cpp's converter stores as a tensor):
    /// `n_rot / 2` positive values. `None`: all 1.
    pub freq_factors: Option<&'a GpuBuffer>,
    /// YaRN's ramp and magnitude (`Yarn::NONE` without it).
    pub yarn: Yarn,
}

impl Rotary<'_> {
    /// `2 * log2(theta) / n_rot`, in f64 so the only rounding is the one
    /// to f32.
    pub(crate) fn log2_base_step(&self) -> f32 {
        (2.0 * (self.theta as f64).log2() / self.n_rot as f64) as f32
    }

    /// Checks the rotation against a head of `head_dim` elements.
    pub(crate) fn check(&self, kernel: &'static str, head_dim: usize) -> Result<(), GpuError> {
        let n_rot = self.n_rot;
        if n_rot == 0 || n_rot % 2 != 0 || n_rot > head_dim {
            return Err(shape_err(
                kernel,
                format!("n_rot {n_rot} must be even, > 0 and <= head_dim {head_dim}"),
            ));
        }
        let (theta, scale) = (self.theta, self.freq_scale);
        if !(theta > 0.0 && theta.is_finite() && scale.is_finite()) {
            return Err(shape_err(
                kernel,
                format!("theta {theta} must be finite and > 0, freq_scale {scale} finite"),
            ));
        }
        if let Some(f) = self.freq_factors {
            check_elems(kernel, "freq_factors", f, n_rot / 2)?;
        }
        let (low, high, mscale) = self.yarn_params();
        let ext = self.yarn.ext_factor;
        if !(mscale.is_finite() && ext.is_finite() && low.is_finite() && high.is_finite()) {
            return Err(shape_err(
                kernel,
                format!(
                    "YaRN ext_factor {ext}, ramp {low}..{high}, magnitude {mscale} must be finite"
                ),
            ));
        }
        Ok(())
    }

    /// The ramp's first and last pair (0 when YaRN is off: the kernels do
    /// not read them, and a file without YaRN has no original context, whose
    /// ramp would be infinite) and the factor on cos and sin.
    pub(crate) fn yarn_params(&self) -> (f32, f32, f32) {
        let mscale = self.yarn.mscale(self.freq_scale);
        if self.yarn.ext_factor == 0.0 {
            return (0.0, 0.0, mscale);
        }
        let [low, high] = self.yarn.corr_dims(self.n_rot, self.theta);
        (low, high, mscale)
    }
}

kernel_params! {
    pub(crate) struct Params {
        /// tokens
        rows: u32,
        /// heads per token
        heads: u32,
        /// elements per head
        head_dim: u32,
        /// rotated elements per head: even, <= head_dim
        n_rot: u32,
        /// first element of x
        x_offset: u32,
        /// position of row 0; a uniform, so a decode step re-records nothing
        pos0: u32,
        /// 0: interleaved pairs, 1: neox pairs
        neox: u32,
        /// 2 * log2(base) / n_rot, computed in f64 on the CPU
        log2_base_step: f32,
        /// multiplies every angle (1.0 without position scaling)
        freq_scale: f32,
        /// YaRN's share of the unscaled angle; 0: off
        ext_factor: f32,
        /// YaRN's ramp: pairs <= corr_low unscaled...
        corr_low: f32,
        /// ...pairs >= corr_high scaled
        corr_high: f32,
        /// multiplies cos and sin
        mscale: f32,
    }
}

const SOURCE: &str = include_str!("../../../../../shaders/rope/rope.wgsl");

const PLAIN: KernelSpec = KernelSpec {
    name: "rope",
    sources: &[SOURCE],
    flags: &[("FREQ_FACTORS", false)],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

const FACTORS: KernelSpec = KernelSpec {
    name: "rope_freq_factors",
    sources: &[SOURCE],
    flags: &[("FREQ_FACTORS", true)],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite, Access::Read],
};

/// Positions past 2^24 are not exact in f32, and the angles would be wrong.
pub const MAX_POSITION: u64 = 1 << 24;

/// Rotates the first `rot.n_rot` elements of every head of `rows` tokens in
/// place: token `t` is at position `pos0 + t`, pairs turn as `Rotary` says.
#[allow(clippy::too_many_arguments)]
pub fn rope(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    rows: usize,
    heads: usize,
    head_dim: usize,
    pos0: u32,
    rot: &Rotary,
) -> Result<(), GpuError> {
    const K: &str = "rope";
    if heads == 0 || head_dim == 0 {
        return Err(shape_err(
            K,
            format!("heads {heads} and head_dim {head_dim} must be > 0"),
        ));
    }
    rot.check(K, head_dim)?;
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
    let (corr_low, corr_high, mscale) = rot.yarn_params();
    let params = Params {
        rows: rows as u32,
        heads: heads as u32,
        head_dim: head_dim as u32,
        n_rot: rot.n_rot as u32,
        x_offset: x_offset as u32,
        pos0,
        neox: (rot.layout == RopeLayout::NeoX) as u32,
        log2_base_step: rot.log2_base_step(),
        freq_scale: rot.freq_scale,
        ext_factor: rot.yarn.ext_factor,
        corr_low,
        corr_high,
        mscale,
    };
    let pairs = (rows * heads * (rot.n_rot / 2)) as u32;
    let groups = workgroups_for(pairs, 256);
    match rot.freq_factors {
        None => rec.dispatch(&PLAIN, &params, &[x], groups),
        Some(f) => rec.dispatch(&FACTORS, &params, &[x, f], groups),
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
