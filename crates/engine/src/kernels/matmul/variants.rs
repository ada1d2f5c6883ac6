//! The kernel variants behind `matmul` (and the fused linear layer and the
//! expert matmuls, which record the same cores): a variant is a core (the
//! WGSL pieces of `sources`) in a shape (`VecShape` for the vec4
//! matrix-vector core in `vec_shape`, `TileShape` for the tiled form in
//! `tile_shape`), with the plain key that finds its pipeline.

use crate::gpu::{Access, OwnedSpec, VariantKey};
use crate::kernels::matmul::tile_shape::TileShape;
use crate::kernels::matmul::vec_shape::VecShape;
use crate::kernels::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};

use super::sources::{
    quant_vec_wgsl, vec_core_defines, vec_core_flags, COMMON_WGSL, GEMV_WGSL, MATVEC_MAIN,
    MATVEC_WGSL, MATVEC_X_F32, X_STORAGE,
};

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
            Operand::Matrix => include_str!("../../../../../shaders/matmul/matmul_gemv_main.wgsl"),
            Operand::Experts => include_str!("../../../../../shaders/matmul/moe_gemv.wgsl"),
        }
    }
    fn tiled_main(self) -> &'static str {
        match self {
            Operand::Matrix => include_str!("../../../../../shaders/matmul/matmul_tiled_main.wgsl"),
            Operand::Experts => include_str!("../../../../../shaders/matmul/moe_tiled.wgsl"),
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
    /// The register-blocked core; its token tiles per workgroup are a
    /// parameter (`Params::token_tiles`), so one variant serves every count.
    Tiled(TileShape),
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

    /// The register-blocked core (any number of token tiles per workgroup:
    /// the dispatch sets `Params::token_tiles`).
    pub(crate) fn tiled(w: &QuantMatrix, operand: Operand, tile: TileShape) -> Variant {
        Variant {
            fmt: w.format(),
            operand,
            shape: Shape::Tiled(tile),
        }
    }

    pub(crate) fn key(&self) -> VariantKey {
        let args = match self.shape {
            Shape::Gemv { rows, tokens } => [0, rows, tokens as u32, 0, 0, 0],
            Shape::Tiled(tile) => [
                1,
                tile.tn | tile.tm << 8 | tile.wg << 16,
                tile.x4 as u32,
                tile.vec as u32,
                tile.form.code(),
                0,
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
        let mut flags = Vec::new();
        let (name, sources) = match self.shape {
            Shape::Vec(v) => {
                defines = vec_core_defines(fmt, v, 1);
                defines.push(("X_DECL", X_STORAGE.into()));
                flags = vec_core_flags(fmt, v);
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
            Shape::Tiled(tile) => {
                defines.extend(tile.defines(fmt));
                let name = format!(
                    "{}_tiled_{}_m{}_n{}_x{}{}{}",
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
            flags,
            defines,
            entry: "main",
            storage: storage.into(),
        }
    }
}
