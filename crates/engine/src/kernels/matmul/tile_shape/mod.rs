//! The tiled (prefill) form's shape: how many token and output rows an
//! invocation computes, how it reads x and the weights, how each adapter
//! class picks that (`TileShape::choose`); the per-row code of the chunked
//! core that the shape generates is `tile_code.rs` (`row_code`).

use std::borrow::Cow;

use crate::gpu::wgsl::Flag;
use crate::gpu::Tuning;
use crate::kernels::matmul::sources::{
    quant_vec_wgsl, vec_core_fits, COMMON_WGSL, COMMON_X4_WGSL, TILED_WGSL, X_STORAGE,
};
use crate::kernels::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};
use code::row_code;
mod code;

/// Tile of the prefill form per invocation: token rows x output rows. Each
/// decoded weight unit serves TILE_M tokens (`TileShape::tm`), each x unit
/// `TileShape::tn` rows (TILE_N on GPUs and for experts); live registers
/// ~ 16 * TILE_M (x) + 16 (weights) + TILE_M * tn (sums).
pub(crate) const TILE_M: u32 = 4;
/// Token rows an invocation of the windowed core on lavapipe
/// (`TileShape::windowed`): each decoded weight chunk (a texel fetch of
/// quants, one of scales, the unpacking) serves twice the tokens.
pub(crate) const WIDE_TILE_M: u32 = 8;
pub(crate) const TILE_N: u32 = 8;
/// Rows an invocation of the windowed core may take, most preferred first
/// (`TileShape::windowed`): the more rows, the more each x vec4 loaded
/// serves. Multiples of a 32-element format's scale tile (8 rows), and
/// even (gate/up pairs).
const WINDOW_TNS: [u32; 3] = [32, 24, 16];
/// The most vec4s of x a chunk of the chunked core takes (vec_consts.wgsl's
/// CV): a subgroup shares x (`TileShape::x_share`) where it has as many lanes.
pub(crate) const CHUNK_VEC4S: u32 = 8;

/// The prefill form's output rows per invocation and how it reads x and
/// the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub tn: u32,
    /// Token rows per invocation: TILE_M, or WIDE_TILE_M (`windowed`).
    pub tm: u32,
    /// x as vec4s (x_offset and k multiples of 4).
    pub x4: bool,
    /// Weights in whole-vec4 chunks (matmul_tiled_vec.wgsl; needs x4 and
    /// rows of whole vec4-core steps), else in 16-weight units.
    pub vec: bool,
    /// How the chunked core's per-row code is written (`row_code`).
    pub form: RowForm,
    /// Invocations a workgroup.
    pub wg: u32,
    /// x's chunk shared through the subgroup (`TileShape::windowed`): each
    /// lane loads one of its vec4s for each token and `subgroupBroadcast`
    /// hands every vec4 to every lane. Needs a workgroup's invocations to
    /// share their token rows (one token tile a workgroup) and subgroups
    /// of at least CHUNK_VEC4S lanes, all active (no early exit for rows
    /// past the matrix: they compute its last row, never written).
    pub x_share: bool,
}

pub use crate::gpu::tuning::RowForm;

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
    /// Rows written out (`RowForm`): on lavapipe (llvmpipe) 64-token
    /// prefills ran 1.1-1.2x faster so, most likely because llvmpipe keeps
    /// an array indexed by a loop variable in scratch memory that it reads a
    /// lane at a time. Other CPU adapters (SwiftShader in the browsers)
    /// get the flat form, which indexes no array by a variable: there the
    /// rows alone written out gained nothing, the flat form made prefill
    /// about 4x faster, and 16 rows beat 8 and 32 (which also compiled much
    /// longer). On lavapipe flat and written-out rows measured alike.
    pub(crate) fn choose(tuning: &Tuning, fmt: GpuFormat, k: usize, x_offset: usize) -> TileShape {
        let x4 = k % 4 == 0 && x_offset % 4 == 0;
        let (tn, form, vec) = match tuning.chunked_tile {
            Some((tn, form)) if x4 && k % fmt.vec_step() as usize == 0 => (tn, form, true),
            _ => (tuning.tile_rows, RowForm::Loop, false),
        };
        TileShape {
            tn,
            tm: TILE_M,
            x4,
            vec,
            form,
            wg: 64,
            x_share: false,
        }
    }

    /// The shape of the core that reads x through a uniform window
    /// (kernels::matmul::x_window) for `rows` output rows, on a CPU adapter whose
    /// SIMD batch is `lanes` invocations: one token tile a workgroup (TT =
    /// 1), so x's address does not depend on the invocation, and one batch
    /// a workgroup, so a dispatch's workgroups (row batches times the
    /// window's token tiles) spread over the CPU's threads evenly; in
    /// workgroups of 64 a 576-row matrix was one workgroup of 4.5 batches a
    /// token tile, 3 workgroups for two threads.
    /// Rows an invocation: of `WINDOW_TNS`, the one whose batches of
    /// `lanes * tn` rows pad the matrix's rows least, the first of equals:
    /// 576 rows take 24 (3 whole batches; 32 leave a quarter of the last
    /// idle), 896 take 16, 3072 take 32. By rows alone, so a prompt of any
    /// length takes the pipelines loading compiled.
    /// `wide`: WIDE_TILE_M token rows an invocation, where the form writes
    /// its rows out (`RowForm::Unrolled`, lavapipe's); else TILE_M.
    /// `share_x`: the adapter's subgroups have at least CHUNK_VEC4S lanes,
    /// so they share x (`x_share`) where the form loads x in a loop (all
    /// but `RowForm::Flat`). On llvmpipe an invocation's load of x from a
    /// uniform window is a load per lane of each of a vec4's words, the
    /// same address eight times over; shared, a lane loads one vec4 and a
    /// broadcast is a register shuffle: 64-token matmuls ran 1.2-1.3x the
    /// multiply-adds a second.
    pub(crate) fn windowed(self, rows: usize, wide: bool, lanes: u32, share_x: bool) -> TileShape {
        let tn = window_tn(rows, lanes as usize);
        let tm = match wide && self.form == RowForm::Unrolled {
            true => WIDE_TILE_M,
            false => TILE_M,
        };
        TileShape {
            tn,
            tm,
            wg: lanes,
            x_share: share_x && self.form != RowForm::Flat,
            ..self
        }
    }

    /// Whether this tile can read `w` with x rows from `x_offset`.
    pub(crate) fn fits(&self, w: &QuantMatrix, x_offset: usize) -> bool {
        let aligned = w.cols % 4 == 0 && x_offset % 4 == 0;
        (!self.x4 || aligned) && (!self.vec || (self.x4 && vec_core_fits(w, x_offset)))
    }

    /// Output rows of a workgroup with `tt` token tiles.
    pub(crate) fn rows(&self, tt: u32) -> u32 {
        self.wg / tt * self.tn
    }

    /// The defines of the tiled cores for `fmt` (the token tiles per
    /// workgroup are a parameter, `Params::token_tiles`).
    pub(crate) fn defines(&self, fmt: GpuFormat) -> Vec<(&'static str, Cow<'static, str>)> {
        let mut defines = vec![
            ("TM", self.tm.to_string().into()),
            ("TN", self.tn.to_string().into()),
            ("WG", self.wg.to_string().into()),
        ];
        if self.vec {
            defines.extend([
                ("STEP", fmt.vec_step().to_string().into()),
                // x in a storage buffer; kernels::matmul::linear may read it
                // through a window.
                ("X_DECL", X_STORAGE.into()),
                // Sharing x, every lane runs the chunk loop (see `x_share`).
                (
                    "ROW_EXIT",
                    if self.x_share {
                        ""
                    } else {
                        "row0 >= p.rows || "
                    }
                    .into(),
                ),
            ]);
            defines.extend(row_code(fmt, self.tn, self.tm, self.form, self.x_share));
        }
        defines
    }

    /// The flags of an entry point that hands the core its subgroup lane
    /// (linear_tiled.wgsl): X_LANE keeps it where the shape shares x
    /// (`x_share`).
    pub(crate) fn flags(&self) -> Vec<Flag<'static>> {
        vec![("X_LANE", self.x_share)]
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

/// Rows an invocation of the windowed core for `rows` rows in batches of
/// `lanes` invocations (`TileShape::windowed`).
fn window_tn(rows: usize, lanes: usize) -> u32 {
    let padded = |tn: u32| rows.div_ceil(lanes * tn as usize) * lanes * tn as usize;
    // min_by_key keeps the first of equals: the most rows.
    WINDOW_TNS
        .into_iter()
        .min_by_key(|&tn| padded(tn))
        .unwrap_or(TILE_N)
}

const TILED_VEC_WGSL: &str = concat!(
    include_str!("../../../../../../shaders/matmul/matmul_params.wgsl"),
    include_str!("../../../../../../shaders/matmul/vec_consts.wgsl"),
    include_str!("../../../../../../shaders/matmul/matmul_tile.wgsl"),
    include_str!("../../../../../../shaders/matmul/matmul_tiled_vec.wgsl")
);

/// The expert stacks' tile (their x rows are gathered per slot).
pub(crate) const EXPERT_TILE: TileShape = TileShape {
    tn: TILE_N,
    tm: TILE_M,
    x4: false,
    vec: false,
    form: RowForm::Loop,
    wg: 64,
    x_share: false,
};

/// Token tiles per workgroup of the tiled form for `m` token rows: enough
/// for m, at most 8.
pub(crate) fn tiled_token_tiles(m: usize) -> u32 {
    (m as u32).div_ceil(TILE_M).next_power_of_two().min(8)
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

#[cfg(test)]
mod tests;
