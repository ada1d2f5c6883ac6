//! Matrix multiply against a stored-format weight matrix:
//! `out[t, n] = sum_k x[t, k] * W[n, k]` for token rows `t < m`.
//!
//! Forms, chosen by `m` (`Form`): for one token row the vec4 matrix-vector
//! core (matvec.wgsl) where rows are whole vec4 steps; for up to
//! `GEMV_MAX_TOKENS` rows (or awkward one-row shapes) the unit
//! matrix-vector core (memory bound, so it streams each weight row once
//! with a whole workgroup); for more, a register-blocked form for prefill,
//! where each decoded weight serves several token rows. All decode inside
//! the kernel, and all record one dispatch per matrix part. Their sources
//! and shapes live in `matmul_variants`.

use crate::gpu::params::kernel_params;

use crate::gpu::{error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, Recorder};
pub use crate::kernels::matmul::sources::vec_core_step;
pub(crate) use crate::kernels::matmul::sources::{
    quant_vec_wgsl, vec_core_defines, vec_core_fits, vec_core_flags, COMMON_WGSL, GEMV_WGSL,
    MATVEC_STEP_F32, MATVEC_WGSL, MATVEC_X_F32, XQ_STORAGE, X_STORAGE,
};
pub(crate) use crate::kernels::matmul::tile_shape::{
    tiled_rows, tiled_token_tiles, tiled_tokens, EXPERT_TILE, TILE_M,
};
pub use crate::kernels::matmul::tile_shape::{RowForm, TileShape};
pub(crate) use crate::kernels::matmul::variants::{Operand, Variant};
pub use crate::kernels::matmul::vec_shape::{Reduce, VecShape, VEC_WORKGROUP};
use crate::kernels::weights::{MatrixPart, QuantMatrix, UNIT};
use crate::kernels::{check_elems, words};

/// Up to this many token rows go through the matrix-vector form.
pub const GEMV_MAX_TOKENS: usize = 4;

kernel_params! {
    /// The parameter block of every matmul core (shaders/matmul/matmul_params.wgsl).
    pub(crate) struct Params {
        /// token rows
        m: u32,
        /// input features: x row length, weight row elements
        k: u32,
        /// output features (weight rows) in this part
        rows: u32,
        /// bytes of one stored weight row
        row_bytes: u32,
        /// element of x where token row 0 starts
        x_offset: u32,
        /// element of out for token 0, this part's first row
        out_offset: u32,
        /// elements between token rows of out (the whole matrix's rows)
        out_stride: u32,
        /// k / 16: units with all 16 elements inside the row
        full_units: u32,
        /// ceil(k / 16); more than full_units only for F32/F16
        units: u32,
        /// Expert stacks only (moe_gemv.wgsl, moe_tiled.wgsl); 0 for a plain matrix.
        /// slots per x row: x row = slot / x_div
        pub(crate) x_div: u32,
        /// first expert held by this part
        pub(crate) first_expert: u32,
        /// experts held by this part; `rows` is per expert
        pub(crate) part_experts: u32,
        /// Fused linear layers only (linear_*.wgsl); 0 otherwise.
        /// RMSNorm epsilon of the norm prologue
        pub(crate) eps: f32,
        /// element of bias for this part's row 0
        pub(crate) bias_offset: u32,
        /// The part's layout (quant.wgsl).
        /// blocks per row
        blocks: u32,
        /// word where the aux region starts
        aux_base: u32,
        /// word where the d16 region starts
        d16_base: u32,
        /// The prefill vec4 core only (matmul_tiled_vec.wgsl); 0 otherwise.
        /// x's rows are a range of the weight rows from this chunk on (kernels::x_ranges)
        pub(crate) first_chunk: u32,
        /// The tiled cores only (matmul_tile.wgsl); 0 otherwise.
        /// token tiles per workgroup (1, 2, 4 or 8): a value, not a constant
        /// of the source, so that one pipeline serves every prompt length
        pub(crate) token_tiles: u32,
        /// The fused linear layer only: 1 adds W x to out (its Add
        /// epilogue), 0 stores it; a value rather than a variant, so that
        /// storing and adding projections share a pipeline.
        pub(crate) accumulate: u32,
        /// The fused linear layer's prefill form only (linear_tiled.wgsl):
        /// 0 stores or adds (`accumulate`); 1 + the gate's activation (SiLU
        /// 1, GELU-tanh 2) gates: W's rows are interleaved gate/up pairs
        /// and out takes act(gate) * up, one element a pair. A value too,
        /// so a model's gated and plain projections share a pipeline.
        pub(crate) glu: u32,
    }
}

impl Params {
    /// `rows` output rows of `w` (a part's, or one expert's), `m` token rows,
    /// reading the weights of `part`.
    pub(crate) fn new(
        w: &QuantMatrix,
        part: &MatrixPart,
        m: usize,
        rows: usize,
        x_offset: usize,
        out_offset: usize,
        out_stride: usize,
    ) -> Params {
        Params {
            m: m as u32,
            k: w.cols as u32,
            rows: rows as u32,
            row_bytes: w.row_bytes() as u32,
            x_offset: x_offset as u32,
            out_offset: out_offset as u32,
            out_stride: out_stride as u32,
            full_units: (w.cols / UNIT) as u32,
            units: w.cols.div_ceil(UNIT) as u32,
            x_div: 0,
            first_expert: 0,
            part_experts: 0,
            eps: 0.0,
            bias_offset: 0,
            blocks: w.blocks_per_row(),
            aux_base: part.bases.aux,
            d16_base: part.bases.d16,
            first_chunk: 0,
            token_tiles: 0,
            accumulate: 0,
            glu: 0,
        }
    }
}

impl Params {
    /// x's rows are `cols` columns of the weight rows from chunk
    /// `first_chunk` of the vec4 core (kernels::matmul::x_ranges).
    pub(crate) fn set_col_range(&mut self, first_chunk: usize, cols: usize) {
        self.first_chunk = first_chunk as u32;
        self.k = cols as u32;
    }
}

/// Checks a dispatch dimension against WebGPU's per-dimension limit.
/// `what` names the dispatch's rows; it is built only for the error.
pub(crate) fn check_groups(
    kernel: &'static str,
    groups: u32,
    what: impl FnOnce() -> String,
) -> Result<(), GpuError> {
    if groups > 65535 {
        return Err(shape_err(kernel, format!("{} exceed one dispatch", what())));
    }
    Ok(())
}

const STORAGE: &[Access] = &[Access::Weights, Access::Read, Access::ReadWrite];
/// The vec4 core binds the part a second time, as vec4s.
const VEC_STORAGE: &[Access] = &[
    Access::Weights,
    Access::Read,
    Access::ReadWrite,
    Access::Weights,
];

/// Which kernel computes a matmul; `matmul` picks by `m` and the adapter,
/// tests force each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Matrix-vector, this many output rows per workgroup (at most 16).
    Gemv(u32),
    /// The vec4 matrix-vector core, one token row.
    Vec(VecShape),
    /// The register-blocked form, its tile chosen by the adapter.
    Tiled,
    /// The register-blocked form with this tile (tests force each).
    #[cfg_attr(not(test), allow(dead_code))]
    TiledAs(TileShape),
}

/// `out[out_offset + t * w.rows + n] = sum_k x[x_offset + t * w.cols + k] * W[n, k]`
/// for `t < m`, `n < w.rows` (offsets in f32 elements).
pub fn matmul(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    w: &QuantMatrix,
    out: &GpuBuffer,
    out_offset: usize,
    m: usize,
) -> Result<(), GpuError> {
    let form = if m == 1 && vec_core_fits(w, x_offset) {
        Form::Vec(VecShape::choose(
            &rec.ctx().tuning,
            w.format(),
            w.cols,
            w.rows,
        ))
    } else if m <= GEMV_MAX_TOKENS {
        Form::Gemv(rec.ctx().tuning.gemv_rows_for(m))
    } else {
        Form::Tiled
    };
    matmul_form(rec, form, x, x_offset, w, out, out_offset, m)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_form(
    rec: &mut Recorder,
    form: Form,
    x: &GpuBuffer,
    x_offset: usize,
    w: &QuantMatrix,
    out: &GpuBuffer,
    out_offset: usize,
    m: usize,
) -> Result<(), GpuError> {
    check_elems("matmul", "x", x, x_offset + m * w.cols)?;
    check_elems("matmul", "out", out, out_offset + m * w.rows)?;
    if m == 0 {
        return Ok(());
    }
    // W whole, x's rows, out's rows.
    rec.moved(w.bytes() as u64 + words(m * (w.cols + w.rows)));
    match form {
        Form::Vec(shape) => {
            if m != 1 || !vec_core_fits(w, x_offset) {
                return Err(shape_err(
                    "matmul",
                    format!(
                        "the vec4 core takes one token row of whole steps on a vec4 (m = {m}, k = {}, x_offset = {x_offset})",
                        w.cols
                    ),
                ));
            }
            shape.check().map_err(|e| shape_err("matmul", e))?;
            let variant = Variant::vec(w, shape);
            let key = variant.key();
            for part in &w.parts {
                let p = Params::new(
                    w,
                    part,
                    1,
                    part.rows,
                    x_offset,
                    out_offset + part.first_row,
                    w.rows,
                );
                let groups = workgroups_for(part.rows as u32, shape.rows());
                let spec = || variant.spec(VEC_STORAGE);
                let buffers = [&*part.buffer, x, out, &part.buffer];
                rec.dispatch_variant(&key, spec, &p, &buffers, groups);
            }
        }
        Form::Gemv(rows_per_group) => {
            // Token rows in chunks of up to GEMV_MAX_TOKENS, one variant per
            // chunk size so the kernel's register arrays have fixed length.
            let mut t0 = 0;
            while t0 < m {
                let chunk = (m - t0).min(GEMV_MAX_TOKENS);
                let variant = Variant::gemv(w, Operand::Matrix, rows_per_group, chunk);
                let key = variant.key();
                for part in &w.parts {
                    let p = Params::new(
                        w,
                        part,
                        chunk,
                        part.rows,
                        x_offset + t0 * w.cols,
                        out_offset + t0 * w.rows + part.first_row,
                        w.rows,
                    );
                    let groups = workgroups_for(part.rows as u32, rows_per_group);
                    let spec = || variant.spec(STORAGE);
                    rec.dispatch_variant(&key, spec, &p, &[&part.buffer, x, out], groups);
                }
                t0 += chunk;
            }
        }
        Form::Tiled | Form::TiledAs(_) => {
            let tile = match form {
                Form::TiledAs(tile) => tile,
                _ => TileShape::choose(&rec.ctx().tuning, w.format(), w.cols, x_offset),
            };
            if !tile.fits(w, x_offset) {
                return Err(shape_err(
                    "matmul",
                    format!(
                        "tile {tile:?} does not take k = {} with x from {x_offset}",
                        w.cols
                    ),
                ));
            }
            let tt = tiled_token_tiles(m);
            let rows_per_group = tile.rows(tt);
            let variant = Variant::tiled(w, Operand::Matrix, tile);
            let key = variant.key();
            let token_groups = (m as u32).div_ceil(tt * tile.tm);
            check_groups("matmul", token_groups, || format!("{m} token rows"))?;
            for part in &w.parts {
                let row_groups = (part.rows as u32).div_ceil(rows_per_group);
                check_groups("matmul", row_groups, || {
                    format!("a part of {} rows", part.rows)
                })?;
                let mut p = Params::new(
                    w,
                    part,
                    m,
                    part.rows,
                    x_offset,
                    out_offset + part.first_row,
                    w.rows,
                );
                p.token_tiles = tt;
                // The chunked core binds the part again, as vec4s.
                let (storage, buffers) = if tile.vec {
                    (VEC_STORAGE, &[&*part.buffer, x, out, &part.buffer][..])
                } else {
                    (STORAGE, &[&*part.buffer, x, out][..])
                };
                rec.dispatch_variant(
                    &key,
                    || variant.spec(storage),
                    &p,
                    buffers,
                    [row_groups, token_groups, 1],
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "tiled_tests.rs"]
mod tests;
