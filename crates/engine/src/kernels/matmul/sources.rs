//! The WGSL pieces the matmul cores are assembled from (the unit core's
//! common part, the vec4 matrix-vector core, the GEMV and tiled cores, each
//! format's decoder) and the defines that shape the vec4 core: what both
//! the variants (`variants`) and the tile shapes (`tile_shape`) read.

use crate::gpu::wgsl::{Define, Flag};
use crate::kernels::matmul::vec_shape::{Reduce, VecShape};
use crate::kernels::weights::{GpuFormat, QuantMatrix};

pub(crate) const COMMON_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul/matmul_params.wgsl"),
    include_str!("../../../../../shaders/matmul/matmul_x_scalar.wgsl"),
    include_str!("../../../../../shaders/matmul/matmul_common.wgsl")
);
/// As COMMON_WGSL, reading x as vec4s (`TileShape::x4`).
pub(crate) const COMMON_X4_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul/matmul_params.wgsl"),
    include_str!("../../../../../shaders/matmul/matmul_x_vec4.wgsl"),
    include_str!("../../../../../shaders/matmul/matmul_common.wgsl")
);
pub(crate) const MATVEC_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul/matmul_params.wgsl"),
    include_str!("../../../../../shaders/matmul/vec_consts.wgsl"),
    include_str!("../../../../../shaders/matmul/matvec.wgsl"),
    include_str!("../../../../../shaders/matmul/matvec_tile.wgsl")
);
/// The vec4 core's x reader for f32 x (through the entry point's x_vec),
/// with the f32 step type that it and linear_x_q8.wgsl share.
pub(crate) const MATVEC_X_F32: &str = concat!(
    include_str!("../../../../../shaders/matmul/matvec_step_f32.wgsl"),
    include_str!("../../../../../shaders/matmul/matvec_x_f32.wgsl")
);
/// The f32 step type alone (for linear_x_q8.wgsl).
pub(crate) const MATVEC_STEP_F32: &str =
    include_str!("../../../../../shaders/matmul/matvec_step_f32.wgsl");
/// The step functions of the vec4 core for `fmt` (one file per step length).
pub(crate) fn quant_vec_wgsl(fmt: GpuFormat) -> &'static str {
    match fmt.vec_step() {
        16 => include_str!("../../../../../shaders/matmul/quant_vec16.wgsl"),
        32 => include_str!("../../../../../shaders/matmul/quant_vec32.wgsl"),
        _ => include_str!("../../../../../shaders/matmul/quant_vec64.wgsl"),
    }
}
pub(crate) const MATVEC_MAIN: &str = include_str!("../../../../../shaders/matmul/matvec_main.wgsl");

/// Elements per step of the vec4 cores for `dtype` (rows must be whole
/// steps), or `None` for a type no kernel decodes.
pub fn vec_core_step(dtype: crate::format::quant::GgmlType) -> Option<usize> {
    GpuFormat::of(dtype).map(|f| f.vec_step() as usize)
}

/// Whether the vec4 matrix-vector core (matvec.wgsl) takes `w` with x rows
/// starting at `x_offset`: whole steps per row and x rows on a vec4. Every
/// quantized format's rows are whole steps; F32/F16 rows need k % 16 == 0.
pub(crate) fn vec_core_fits(w: &QuantMatrix, x_offset: usize) -> bool {
    w.cols % w.format().vec_step() as usize == 0 && x_offset % 4 == 0
}

/// x of the vec4 core (X_DECL, matvec_x_f32.wgsl) in a storage buffer, f32.
pub(crate) const X_STORAGE: &str = "var<storage, read> x: array<vec4<f32>>;";
/// The same for 8-bit x (XQ_DECL, linear_x_q8*.wgsl).
pub(crate) const XQ_STORAGE: &str = "var<storage, read> xq: array<vec4<u32>>;";

/// The defines of the vec4 core in `shape` over `tokens` token rows; the
/// caller adds its x reader's declaration (X_DECL for f32 x, XQ_DECL for
/// 8-bit x).
pub(crate) fn vec_core_defines(
    fmt: GpuFormat,
    shape: VecShape,
    tokens: u32,
) -> Vec<Define<'static>> {
    let mut defines = fmt.defines();
    defines.extend([
        ("LANES", shape.lanes.to_string().into()),
        ("WG", shape.workgroup.to_string().into()),
        ("GROUP_ROWS", shape.group_rows.to_string().into()),
        ("STEP", fmt.vec_step().to_string().into()),
        (
            "CHUNKED",
            if shape.chunked { "true" } else { "false" }.into(),
        ),
        ("REDUCE", shape.reduce.code().to_string().into()),
        ("TOKENS", tokens.to_string().into()),
    ]);
    defines.extend(crate::kernels::matmul::matvec_tile::defines(
        fmt, shape, tokens,
    ));
    defines
}

/// The flags of the vec4 core in `shape`: SG keeps the lines that use
/// subgroups (which a device without them must not see), TILE the x
/// readers' `dot_x_scaled` for the one-lane tile reader (`matvec_tile`).
pub(crate) fn vec_core_flags(fmt: GpuFormat, shape: VecShape) -> Vec<Flag<'static>> {
    vec![
        ("SG", shape.reduce == Reduce::Subgroup),
        (
            "TILE",
            crate::kernels::matmul::matvec_tile::tiles(fmt, shape),
        ),
    ]
}
pub(crate) const GEMV_WGSL: &str = include_str!("../../../../../shaders/matmul/matmul_gemv.wgsl");
pub(crate) const TILED_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul/matmul_tile.wgsl"),
    include_str!("../../../../../shaders/matmul/matmul_tiled.wgsl")
);
