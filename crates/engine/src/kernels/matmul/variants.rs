//! The kernel variants behind `matmul` (and the fused linear layer and the
//! expert matmuls, which record the same cores): which WGSL sources make
//! each core, the shapes a core can take (`VecShape` for the vec4
//! matrix-vector core in `vec_shape`, `TileShape` for the tiled form in
//! `tile_shape`, each with how each adapter class picks it), and the plain
//! keys that find a variant's pipeline.

use crate::gpu::{Access, OwnedSpec, VariantKey};
use crate::kernels::matmul::tile_shape::TileShape;
use crate::kernels::matmul::vec_shape::{Reduce, VecShape};
use crate::kernels::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};

pub(crate) const COMMON_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../../shaders/matmul_x_scalar.wgsl"),
    include_str!("../../../../../shaders/matmul_common.wgsl")
);
/// As COMMON_WGSL, reading x as vec4s (`TileShape::x4`).
pub(crate) const COMMON_X4_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../../shaders/matmul_x_vec4.wgsl"),
    include_str!("../../../../../shaders/matmul_common.wgsl")
);
pub(crate) const MATVEC_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../../shaders/vec_consts.wgsl"),
    include_str!("../../../../../shaders/matvec.wgsl"),
    include_str!("../../../../../shaders/matvec_tile.wgsl")
);
/// The vec4 core's x reader for f32 x (through the entry point's x_vec),
/// with the f32 step type that it and linear_x_q8.wgsl share.
pub(crate) const MATVEC_X_F32: &str = concat!(
    include_str!("../../../../../shaders/matvec_step_f32.wgsl"),
    include_str!("../../../../../shaders/matvec_x_f32.wgsl")
);
/// The f32 step type alone (for linear_x_q8.wgsl).
pub(crate) const MATVEC_STEP_F32: &str =
    include_str!("../../../../../shaders/matvec_step_f32.wgsl");
/// The step functions of the vec4 core for `fmt` (one file per step length).
pub(crate) fn quant_vec_wgsl(fmt: GpuFormat) -> &'static str {
    match fmt.vec_step() {
        16 => include_str!("../../../../../shaders/quant_vec16.wgsl"),
        32 => include_str!("../../../../../shaders/quant_vec32.wgsl"),
        _ => include_str!("../../../../../shaders/quant_vec64.wgsl"),
    }
}
const MATVEC_MAIN: &str = include_str!("../../../../../shaders/matvec_main.wgsl");

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

/// The defines of the vec4 core in `shape`, x in a storage buffer.
pub(crate) fn vec_core_defines(
    fmt: GpuFormat,
    shape: VecShape,
) -> Vec<(&'static str, std::borrow::Cow<'static, str>)> {
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
        ("SG", subgroup_lines(shape.reduce == Reduce::Subgroup)),
        ("X_DECL", X_STORAGE.into()),
        ("XQ_DECL", XQ_STORAGE.into()),
    ]);
    defines.extend(crate::kernels::matmul::matvec_tile::defines(fmt, shape));
    defines
}

/// The SG define: keeps (`""`) or comments out (`"//"`) the lines that use
/// subgroups, which a device without them must not see.
pub(crate) fn subgroup_lines(on: bool) -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed(if on { "" } else { "//" })
}
pub(crate) const GEMV_WGSL: &str = include_str!("../../../../../shaders/matmul_gemv.wgsl");
pub(crate) const TILED_WGSL: &str = concat!(
    include_str!("../../../../../shaders/matmul_tile.wgsl"),
    include_str!("../../../../../shaders/matmul_tiled.wgsl")
);

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
            Operand::Matrix => include_str!("../../../../../shaders/matmul_gemv_main.wgsl"),
            Operand::Experts => include_str!("../../../../../shaders/moe_gemv.wgsl"),
        }
    }
    fn tiled_main(self) -> &'static str {
        match self {
            Operand::Matrix => include_str!("../../../../../shaders/matmul_tiled_main.wgsl"),
            Operand::Experts => include_str!("../../../../../shaders/moe_tiled.wgsl"),
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
            Shape::Tiled { tt, tile } => [
                1,
                tt,
                tile.tn | tile.tm << 8 | tile.wg << 16,
                tile.x4 as u32,
                tile.vec as u32,
                tile.form.code(),
            ],
            Shape::Vec(v) => [
                2,
                v.lanes,
                v.group_rows,
                v.chunked as u32,
                v.reduce.code(),
                v.workgroup,
            ],
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
                    "{}_vec_{}_l{}_r{}_c{}_s{}_w{}",
                    op.prefix(),
                    fmt.fmt,
                    v.lanes,
                    v.group_rows,
                    v.chunked as u8,
                    v.reduce.code(),
                    v.workgroup
                );
                (
                    name,
                    vec![
                        QUANT_WGSL,
                        MATVEC_WGSL,
                        quant_vec_wgsl(fmt),
                        MATVEC_X_F32,
                        MATVEC_MAIN,
                    ],
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
                defines.extend(tile.defines(fmt, tt));
                let name = format!(
                    "{}_tiled_{}_m{}_n{}_t{tt}_x{}{}{}",
                    op.prefix(),
                    fmt.fmt,
                    tile.tm,
                    tile.tn,
                    if tile.x4 { 4 } else { 1 },
                    if tile.vec { "_vec" } else { "" },
                    tile.form.suffix()
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
            storage: storage.into(),
        }
    }
}
