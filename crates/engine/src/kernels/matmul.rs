//! Matrix multiply against a stored-format weight matrix:
//! `out[t, n] = sum_k x[t, k] * W[n, k]` for token rows `t < m`.
//!
//! Two forms, chosen by `m`: a matrix-vector form for decode (up to
//! `GEMV_MAX_TOKENS` rows; memory bound, so it streams each weight row once
//! with a whole workgroup) and a register-blocked form for prefill, where each
//! decoded weight serves several token rows. Both decode inside the kernel
//! with quant.wgsl, and both record one dispatch per matrix part.

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use super::weights::{GpuFormat, MatrixPart, QuantMatrix, QUANT_WGSL, UNIT};
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey,
};

/// Up to this many token rows go through the matrix-vector form.
pub const GEMV_MAX_TOKENS: usize = 4;
/// Tile of the prefill form per invocation: token rows x output rows. Each
/// decoded weight unit serves TILE_M tokens, each x unit `TileShape::tn`
/// rows (TILE_N on GPUs and for experts); live registers ~ 16 * TILE_M (x)
/// + 16 (weights) + TILE_M * tn (sums).
pub(crate) const TILE_M: u32 = 4;
pub(crate) const TILE_N: u32 = 8;

/// The prefill form's output rows per invocation and how it reads x and
/// the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub tn: u32,
    /// x as vec4s (x_offset and k multiples of 4).
    pub x4: bool,
    /// Weights in whole-vec4 chunks (matmul_tiled_vec.wgsl; needs x4 and
    /// rows of whole vec4-core steps), else in 16-weight units.
    pub vec: bool,
}

impl TileShape {
    /// For `k`-element rows of x from `x_offset`. CPU adapters read x
    /// through slow per-lane loads, so each x unit serves 32 rows there (on
    /// lavapipe SmolLM2's 64-token prefill ran 24 tok/s at 8 rows, 28-31 with
    /// vec4 x, 38-40 at 16 rows and 45-47 at 32; 64 gained nothing more);
    /// GPUs keep 8, which leaves enough workgroups for small matrices.
    /// The chunked core reads 2-3x fewer words of weights per multiply on a
    /// CPU adapter; GPUs keep the unit core, whose fewer live registers
    /// (x for TM tokens is 4 vec4s a token there, 8 here) suit them better
    /// until it is measured on one.
    pub(crate) fn choose(software: bool, fmt: GpuFormat, k: usize, x_offset: usize) -> TileShape {
        let x4 = k % 4 == 0 && x_offset % 4 == 0;
        TileShape {
            tn: if software { 32 } else { TILE_N },
            x4,
            vec: software && x4 && k % fmt.vec_step() as usize == 0,
        }
    }

    /// Whether this tile can read `w` with x rows from `x_offset`.
    pub(crate) fn fits(&self, w: &QuantMatrix, x_offset: usize) -> bool {
        let aligned = w.cols % 4 == 0 && x_offset % 4 == 0;
        (!self.x4 || aligned) && (!self.vec || (self.x4 && vec_core_fits(w, x_offset)))
    }

    /// Output rows of a workgroup with `tt` token tiles.
    pub(crate) fn rows(&self, tt: u32) -> u32 {
        64 / tt * self.tn
    }

    /// The sources before the entry point, for format `fmt`.
    pub(crate) fn core_wgsl(&self, fmt: GpuFormat) -> [&'static str; 3] {
        match (self.vec, self.x4) {
            (true, _) => [QUANT_WGSL, TILED_VEC_WGSL, quant_vec_wgsl(fmt)],
            (false, true) => [QUANT_WGSL, COMMON_X4_WGSL, TILED_WGSL],
            (false, false) => [QUANT_WGSL, COMMON_WGSL, TILED_WGSL],
        }
    }
}

const TILED_VEC_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../shaders/vec_consts.wgsl"),
    include_str!("../../../../shaders/matmul_tiled_vec.wgsl")
);

/// The expert stacks' tile (their x rows are gathered per slot).
pub(crate) const EXPERT_TILE: TileShape = TileShape {
    tn: TILE_N,
    x4: false,
    vec: false,
};

/// Output rows per GEMV workgroup. GPUs get 4: enough workgroups to fill
/// them even for 896-row matrices, and x reused from registers 4 times.
/// CPU adapters pay a large fixed cost per workgroup (on lavapipe probably
/// the two barriers: workgroup-memory zeroing and the reduction): 2048 x 2048
/// Q8_0 GEMVs ran 2-2.7x faster with 16 rows than with 2 there. The
/// reduction's shared array (rows * tokens * 64 f32) stays within 8 KiB,
/// half of WebGPU's default 16 KiB.
pub(crate) fn gemv_rows(software: bool, tokens: usize) -> u32 {
    match (software, tokens) {
        (false, _) => 4,
        (true, 1 | 2) => 16,
        (true, _) => 8,
    }
}

/// How the vec4 core (matvec.wgsl) spreads a workgroup's 64 lanes: groups
/// of `lanes` lanes, each over `group_rows` rows, taking contiguous runs of
/// steps (`chunked`) or interleaved ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecShape {
    pub lanes: u32,
    pub group_rows: u32,
    pub chunked: bool,
}

impl VecShape {
    /// The shape for `fmt` rows of `k` elements. CPU adapters: a group per
    /// SIMD batch (8 lanes), each lane's x values serving as many rows as
    /// its step has x vec4s (8, or 16 for the K-quants' 64-element steps),
    /// since x is re-read per group through slow per-lane loads; contiguous
    /// steps per lane. GPUs: as many lanes as the row has steps (8 to 64),
    /// about 4 rows a workgroup, interleaved steps. `bench-kernels --sweep`
    /// times the alternatives.
    pub(crate) fn choose(software: bool, fmt: GpuFormat, k: usize) -> VecShape {
        if software {
            let group_rows = if fmt.vec_step() == 64 { 16 } else { 8 };
            return VecShape {
                lanes: 8,
                group_rows,
                chunked: true,
            };
        }
        let steps = (k / fmt.vec_step() as usize).max(1) as u32;
        let lanes = steps.next_power_of_two().clamp(8, 64);
        VecShape {
            lanes,
            group_rows: (4 * lanes / 64).max(1),
            chunked: false,
        }
    }

    /// Output rows of one workgroup.
    pub fn rows(&self) -> u32 {
        self.group_rows * 64 / self.lanes
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct Params {
    m: u32,
    k: u32,
    rows: u32,
    row_bytes: u32,
    x_offset: u32,
    out_offset: u32,
    out_stride: u32,
    full_units: u32,
    units: u32,
    pub(crate) x_div: u32,
    pub(crate) first_expert: u32,
    pub(crate) part_experts: u32,
    pub(crate) eps: f32,
    pub(crate) bias_offset: u32,
    blocks: u32,
    aux_base: u32,
    d16_base: u32,
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
            blocks: (w.cols / w.dtype.block_elements()) as u32,
            aux_base: part.bases.aux,
            d16_base: part.bases.d16,
        }
    }
}

pub(crate) const COMMON_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../shaders/matmul_x_scalar.wgsl"),
    include_str!("../../../../shaders/matmul_common.wgsl")
);
/// As COMMON_WGSL, reading x as vec4s (`TileShape::x4`).
pub(crate) const COMMON_X4_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../shaders/matmul_x_vec4.wgsl"),
    include_str!("../../../../shaders/matmul_common.wgsl")
);
pub(crate) const MATVEC_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../shaders/vec_consts.wgsl"),
    include_str!("../../../../shaders/matvec.wgsl")
);
/// The step functions of the vec4 core for `fmt` (one file per step length).
pub(crate) fn quant_vec_wgsl(fmt: GpuFormat) -> &'static str {
    match fmt.vec_step() {
        16 => include_str!("../../../../shaders/quant_vec16.wgsl"),
        32 => include_str!("../../../../shaders/quant_vec32.wgsl"),
        _ => include_str!("../../../../shaders/quant_vec64.wgsl"),
    }
}
const MATVEC_MAIN: &str = include_str!("../../../../shaders/matvec_main.wgsl");

/// Whether the vec4 matrix-vector core (matvec.wgsl) takes `w` with x rows
/// starting at `x_offset`: whole steps per row and x rows on a vec4. Every
/// quantized format's rows are whole steps; F32/F16 rows need k % 16 == 0.
pub(crate) fn vec_core_fits(w: &QuantMatrix, x_offset: usize) -> bool {
    w.cols % w.format().vec_step() as usize == 0 && x_offset % 4 == 0
}

/// The defines of the vec4 core in `shape`.
pub(crate) fn vec_core_defines(
    fmt: GpuFormat,
    shape: VecShape,
) -> Vec<(&'static str, std::borrow::Cow<'static, str>)> {
    let mut defines = fmt.defines();
    defines.extend([
        ("LANES", shape.lanes.to_string().into()),
        ("GROUP_ROWS", shape.group_rows.to_string().into()),
        ("STEP", fmt.vec_step().to_string().into()),
        (
            "CHUNKED",
            if shape.chunked { "true" } else { "false" }.into(),
        ),
    ]);
    defines
}
pub(crate) const GEMV_WGSL: &str = include_str!("../../../../shaders/matmul_gemv.wgsl");
pub(crate) const TILED_WGSL: &str = include_str!("../../../../shaders/matmul_tiled.wgsl");

/// What a matmul kernel multiplies: a plain matrix, or an expert stack whose
/// rows each slot picks by the router's choice (see `kernels::moe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    Matrix,
    Experts,
}

impl Operand {
    fn gemv_main(self) -> &'static str {
        match self {
            Operand::Matrix => include_str!("../../../../shaders/matmul_gemv_main.wgsl"),
            Operand::Experts => include_str!("../../../../shaders/moe_gemv.wgsl"),
        }
    }
    fn tiled_main(self) -> &'static str {
        match self {
            Operand::Matrix => include_str!("../../../../shaders/matmul_tiled_main.wgsl"),
            Operand::Experts => include_str!("../../../../shaders/moe_tiled.wgsl"),
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Operand::Matrix => "matmul",
            Operand::Experts => "moe_matmul",
        }
    }
}

/// One variant of a matmul kernel: which core, entry point and shape. Its
/// key finds the pipeline without allocating; its spec is built only the
/// first time (`Recorder::dispatch_variant`).
#[derive(Clone, Copy)]
pub(crate) struct Variant {
    fmt: GpuFormat,
    operand: Operand,
    shape: Shape,
}

#[derive(Clone, Copy)]
enum Shape {
    /// `rows` output rows and `tokens` token rows per workgroup.
    Gemv { rows: u32, tokens: usize },
    /// `tt` token tiles per workgroup.
    Tiled { tt: u32, tile: TileShape },
    /// The vec4 core (one token row).
    Vec(VecShape),
}

impl Variant {
    /// The matrix-vector core with `rows` output rows and `tokens` token rows
    /// per workgroup.
    pub(crate) fn gemv(w: &QuantMatrix, operand: Operand, rows: u32, tokens: usize) -> Variant {
        let shape = Shape::Gemv { rows, tokens };
        Variant {
            fmt: w.format(),
            operand,
            shape,
        }
    }

    /// The vec4 matrix-vector core (one token row) over a plain matrix.
    pub(crate) fn vec(w: &QuantMatrix, shape: VecShape) -> Variant {
        Variant {
            fmt: w.format(),
            operand: Operand::Matrix,
            shape: Shape::Vec(shape),
        }
    }

    /// The register-blocked core with `tt` token tiles per workgroup.
    pub(crate) fn tiled(w: &QuantMatrix, operand: Operand, tt: u32, tile: TileShape) -> Variant {
        Variant {
            fmt: w.format(),
            operand,
            shape: Shape::Tiled { tt, tile },
        }
    }

    pub(crate) fn key(&self) -> VariantKey {
        let args = match self.shape {
            Shape::Gemv { rows, tokens } => [0, rows, tokens as u32, 0, 0, 0],
            Shape::Tiled { tt, tile } => [1, tt, tile.tn, tile.x4 as u32, tile.vec as u32, 0],
            Shape::Vec(v) => [2, v.lanes, v.group_rows, v.chunked as u32, 0, 0],
        };
        VariantKey {
            family: self.operand.prefix(),
            fmt: self.fmt.fmt,
            args,
        }
    }

    pub(crate) fn spec(&self, storage: &'static [Access]) -> OwnedSpec {
        let (fmt, op) = (self.fmt, self.operand);
        let mut defines = fmt.defines();
        let (name, sources) = match self.shape {
            Shape::Vec(v) => {
                defines = vec_core_defines(fmt, v);
                let name = format!(
                    "{}_vec_{}_l{}_r{}_c{}",
                    op.prefix(),
                    fmt.fmt,
                    v.lanes,
                    v.group_rows,
                    v.chunked as u8
                );
                (
                    name,
                    vec![QUANT_WGSL, MATVEC_WGSL, quant_vec_wgsl(fmt), MATVEC_MAIN],
                )
            }
            Shape::Gemv { rows, tokens } => {
                defines.push(("ROWS", rows.to_string().into()));
                defines.push(("TOKENS", tokens.to_string().into()));
                let name = format!("{}_gemv_{}_r{rows}_t{tokens}", op.prefix(), fmt.fmt);
                (
                    name,
                    vec![QUANT_WGSL, COMMON_WGSL, GEMV_WGSL, op.gemv_main()],
                )
            }
            Shape::Tiled { tt, tile } => {
                defines.push(("TM", TILE_M.to_string().into()));
                defines.push(("TN", tile.tn.to_string().into()));
                defines.push(("TT", tt.to_string().into()));
                defines.push(("STEP", fmt.vec_step().to_string().into()));
                let name = format!(
                    "{}_tiled_{}_m{TILE_M}_n{}_t{tt}_x{}{}",
                    op.prefix(),
                    fmt.fmt,
                    tile.tn,
                    if tile.x4 { 4 } else { 1 },
                    if tile.vec { "_vec" } else { "" }
                );
                let mut sources = tile.core_wgsl(fmt).to_vec();
                sources.push(op.tiled_main());
                (name, sources)
            }
        };
        OwnedSpec {
            name,
            sources,
            defines,
            entry: "main",
            storage,
        }
    }
}

/// Token tiles per workgroup of the tiled form for `m` token rows (enough
/// for m, at most 8), and the output rows a workgroup then covers.
pub(crate) fn tiled_shape(m: usize) -> (u32, u32) {
    let tt = (m as u32).div_ceil(TILE_M).next_power_of_two().min(8);
    (tt, tiled_rows(tt))
}

/// Output rows one workgroup of the expert stacks' tiled form covers with
/// `tt` token tiles.
pub(crate) fn tiled_rows(tt: u32) -> u32 {
    EXPERT_TILE.rows(tt)
}

/// Tokens one workgroup of the tiled form takes with `tt` token tiles.
pub(crate) fn tiled_tokens(tt: u32) -> usize {
    (tt * TILE_M) as usize
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

const STORAGE: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite];
/// The vec4 core binds the part a second time, as vec4s.
const VEC_STORAGE: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite, Access::Read];

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
    let software = rec.ctx().adapter.is_software;
    let form = if m == 1 && vec_core_fits(w, x_offset) {
        Form::Vec(VecShape::choose(software, w.format(), w.cols))
    } else if m <= GEMV_MAX_TOKENS {
        Form::Gemv(gemv_rows(software, m))
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
                _ => TileShape::choose(rec.ctx().adapter.is_software, w.format(), w.cols, x_offset),
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
            let (tt, _) = tiled_shape(m);
            let rows_per_group = tile.rows(tt);
            let variant = Variant::tiled(w, Operand::Matrix, tt, tile);
            let key = variant.key();
            let token_groups = (m as u32).div_ceil(tt * TILE_M);
            check_groups("matmul", token_groups, || format!("{m} token rows"))?;
            for part in &w.parts {
                let row_groups = (part.rows as u32).div_ceil(rows_per_group);
                check_groups("matmul", row_groups, || {
                    format!("a part of {} rows", part.rows)
                })?;
                let p = Params::new(
                    w,
                    part,
                    m,
                    part.rows,
                    x_offset,
                    out_offset + part.first_row,
                    w.rows,
                );
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
#[path = "matmul_tests.rs"]
mod tests;
