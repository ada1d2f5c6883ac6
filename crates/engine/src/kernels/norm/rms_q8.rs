//! RMSNorm into f32 and into 8-bit blocks: the input of the decode
//! projections on CPU adapters (see `Q8Rows` and shaders/norm/rmsnorm_q8.wgsl).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::{check_elems, words};

/// Values per block of 8-bit x: each block has its own scale.
pub const Q8_BLOCK: usize = 32;

/// Rows of x in 8-bit blocks: per 32 values, 32 signed bytes q in `quants`
/// (8 words; byte i of word j is value 4j + i) and the pair (d, d * sum(q))
/// in `scales`, d rounded to f16 as llama.cpp stores it (q comes from the
/// unrounded d; beyond f16's range d stays f32), a value being d * q. Row r's blocks follow row r - 1's.
#[derive(Clone, Copy)]
pub struct Q8Rows<'a> {
    pub quants: &'a GpuBuffer,
    pub scales: &'a GpuBuffer,
}

impl Q8Rows<'_> {
    /// Words of `quants` and f32s of `scales` that `rows` rows of `dim` take.
    pub fn elems(rows: usize, dim: usize) -> (usize, usize) {
        (rows * dim / 4, rows * dim / Q8_BLOCK * 2)
    }

    /// Refuses buffers too small for `rows` rows of `dim`, or rows that are
    /// not whole blocks.
    pub(crate) fn check(
        &self,
        kernel: &'static str,
        rows: usize,
        dim: usize,
    ) -> Result<(), GpuError> {
        if dim % Q8_BLOCK != 0 {
            return Err(shape_err(
                kernel,
                format!("8-bit x rows of {dim} values are not whole {Q8_BLOCK}-value blocks"),
            ));
        }
        let (quants, scales) = Self::elems(rows, dim);
        check_elems(kernel, "8-bit x quants", self.quants, quants)?;
        check_elems(kernel, "8-bit x scales", self.scales, scales)
    }
}

/// What a decode step's projections read their normed input as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ActDtype {
    /// f32, as the norm computes it.
    #[default]
    F32,
    /// 8-bit blocks of 32 values with a scale each (`Q8Rows`), as llama.cpp's
    /// CPU backend rounds activations before its quantized dot products.
    /// Three loads per 32 values where f32 takes eight: lavapipe, whose
    /// storage loads run lane by lane, decodes faster, as SwiftShader does
    /// with integer dot products (on GPUs x is a small, cached read). Needs
    /// a model width that is a multiple of 32. Opt-in: prefill steps read f32 x, so a
    /// position's logits depend on whether it was prefilled or decoded, and
    /// reusing a cached prefix (whose last token is then re-run as a decode
    /// step) can change a sampled token. Prefill reading the rounded values
    /// would not fix that (see docs/kernels.md): rounding is discontinuous, and
    /// the forms' last-bit differences flip some q, which flips more.
    Q8,
}

impl ActDtype {
    pub fn name(self) -> &'static str {
        match self {
            ActDtype::F32 => "f32",
            ActDtype::Q8 => "q8",
        }
    }
}

impl std::str::FromStr for ActDtype {
    type Err = String;
    fn from_str(s: &str) -> Result<ActDtype, String> {
        match s {
            "f32" => Ok(ActDtype::F32),
            "q8" => Ok(ActDtype::Q8),
            _ => Err(format!("activation type '{s}': expected f32 or q8")),
        }
    }
}

kernel_params! {
    pub(crate) struct Params {
        rows: u32,
        /// elements per row, a multiple of 32
        dim: u32,
        /// first element of x, a multiple of 4
        x_offset: u32,
        /// first element of out, a multiple of 4
        out_offset: u32,
        eps: f32,
    }
}

const SOURCE: &str = include_str!("../../../../../shaders/norm/rmsnorm_q8.wgsl");
const K: &str = "rmsnorm_q8";

/// Normalises `rows` rows of `dim` elements of `x` (from `x_offset`) into
/// `out` (from `out_offset`) and into `q8` (from its start); offsets in f32
/// elements, multiples of 4, `dim` a multiple of 32. The weight is read as
/// vec4s: `dim` values (a multiple of 4 already). `out` is a buffer of its own.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_q8(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    weight: &GpuBuffer,
    out: &GpuBuffer,
    out_offset: usize,
    q8: &Q8Rows,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<(), GpuError> {
    if rows == 0 || dim == 0 {
        return Err(shape_err(K, format!("{rows} rows of {dim} elements")));
    }
    if x_offset % 4 != 0 || out_offset % 4 != 0 {
        return Err(shape_err(
            K,
            format!("offsets {x_offset} and {out_offset} must be multiples of 4"),
        ));
    }
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(shape_err(
            K,
            format!("eps {eps} is not a finite number >= 0"),
        ));
    }
    q8.check(K, rows, dim)?;
    let n = rows * dim;
    check_elems(K, "x", x, x_offset + n)?;
    check_elems(K, "weight", weight, dim)?;
    check_elems(K, "out", out, out_offset + n)?;
    let read = [x.id(), weight.id()];
    let written = [out.id(), q8.quants.id(), q8.scales.id()];
    let shared = written
        .iter()
        .any(|id| read.contains(id) || written.iter().filter(|&w| w == id).count() > 1);
    if shared {
        return Err(shape_err(
            K,
            "out, the 8-bit quants and their scales each need a buffer of their own",
        ));
    }
    // x's rows and the weight read; out's rows, the quants and scales written.
    let (quants, scales) = Q8Rows::elems(rows, dim);
    rec.moved(words(2 * n + dim + quants + scales));
    let params = Params {
        rows: rows as u32,
        dim: dim as u32,
        x_offset: x_offset as u32,
        out_offset: out_offset as u32,
        eps,
    };
    let spec = KernelSpec {
        name: K,
        sources: &[SOURCE],
        flags: &[],
        defines: &[],
        entry: "main",
        storage: &[
            Access::Read,
            Access::Read,
            Access::ReadWrite,
            Access::ReadWrite,
            Access::ReadWrite,
        ],
    };
    rec.dispatch(
        &spec,
        &params,
        &[weight, x, out, q8.quants, q8.scales],
        workgroups_for(rows as u32, 1),
    );
    Ok(())
}

/// The CPU form of the 8-bit blocks of one row of f32 values: (quant bytes,
/// (d, d * sum(q)) per block, d rounded to f16 as `Q8Rows` says), rounding
/// half away from zero.
pub fn quantize_row_q8(v: &[f32]) -> (Vec<i8>, Vec<(f32, f32)>) {
    let mut q = Vec::with_capacity(v.len());
    let mut scales = Vec::with_capacity(v.len() / Q8_BLOCK);
    for block in v.chunks(Q8_BLOCK) {
        let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        let start = q.len();
        q.extend(block.iter().map(|x| (x * inv).round() as i8));
        let sum: i32 = q[start..].iter().map(|&b| b as i32).sum();
        let d16 = if d <= 65504.0 {
            half::f16::from_f32(d).to_f32()
        } else {
            d
        };
        scales.push((d16, d16 * sum as f32));
    }
    (q, scales)
}

#[cfg(test)]
#[path = "rms_q8_tests.rs"]
mod tests;
