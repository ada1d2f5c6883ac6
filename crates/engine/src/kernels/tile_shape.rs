//! The tiled (prefill) form's shape: how many token and output rows an
//! invocation computes, how it reads x and the weights, how each adapter
//! class picks that (`TileShape::choose`), and the per-row code of the
//! chunked core that the shape generates (`row_code`).

use std::borrow::Cow;

use super::matmul_variants::{
    quant_vec_wgsl, vec_core_fits, COMMON_WGSL, COMMON_X4_WGSL, TILED_WGSL, X_STORAGE,
};
use super::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};
use crate::gpu::context::AdapterSummary;

/// Tile of the prefill form per invocation: token rows x output rows. Each
/// decoded weight unit serves TILE_M tokens, each x unit `TileShape::tn`
/// rows (TILE_N on GPUs and for experts); live registers ~ 16 * TILE_M (x)
/// + 16 (weights) + TILE_M * tn (sums).
pub(crate) const TILE_M: u32 = 4;
pub(crate) const TILE_N: u32 = 8;
/// Row groups a windowed dispatch should have at least (`windowed`): with
/// a window's 4 or more token tiles, a few workgroups per CPU thread, so
/// that no thread idles while another finishes.
const WINDOW_ROW_GROUPS: usize = 2;

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
    /// How the chunked core's per-row code is written (`row_code`).
    pub form: RowForm,
}

/// The chunked tiled core's per-row code (`row_code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowForm {
    /// A loop over the rows adding into one array.
    Loop,
    /// The rows written out one by one, each row's token sums a vec4 of
    /// its own; x and the decoded chunk still loop over their vec4s.
    Unrolled,
    /// Everything written out: x's vec4s named one by one and each row's
    /// dot products spelled out, so no function-local array is indexed by
    /// a variable.
    Flat,
}

impl RowForm {
    pub(crate) fn code(self) -> u32 {
        self as u32
    }

    /// The pipeline name's mark of the form.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            RowForm::Loop => "",
            RowForm::Unrolled => "_unrolled",
            RowForm::Flat => "_flat",
        }
    }
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
    /// Rows written out (`RowForm`): on lavapipe (llvmpipe) 64-token
    /// prefills ran 1.1-1.2x faster so, most likely because llvmpipe keeps
    /// an array indexed by a loop variable in scratch memory that it reads a
    /// lane at a time. Other CPU adapters (SwiftShader in the browsers)
    /// get the flat form, which indexes no array by a variable: there the
    /// rows alone written out gained nothing, the flat form made prefill
    /// about 4x faster, and 16 rows beat 8 and 32 (which also compiled much
    /// longer). On lavapipe flat and written-out rows measured alike.
    pub(crate) fn choose(
        adapter: &AdapterSummary,
        fmt: GpuFormat,
        k: usize,
        x_offset: usize,
    ) -> TileShape {
        let software = adapter.is_software;
        let x4 = k % 4 == 0 && x_offset % 4 == 0;
        let vec = software && x4 && k % fmt.vec_step() as usize == 0;
        let (tn, form) = match (software, vec, adapter.is_llvmpipe()) {
            (false, ..) => (TILE_N, RowForm::Loop),
            (true, false, _) => (32, RowForm::Loop),
            (true, true, true) => (32, RowForm::Unrolled),
            (true, true, false) => (16, RowForm::Flat),
        };
        TileShape { tn, x4, vec, form }
    }

    /// The shape of the core that reads x through a uniform window
    /// (kernels::x_window) for `rows` output rows: one token tile a
    /// workgroup (TT = 1), so x's address does not depend on the lane. A
    /// window holds at least 4 token tiles of a long prompt, so the rows
    /// must give a dispatch at least `WINDOW_ROW_GROUPS` workgroups more:
    /// the most rows an invocation (from 32, what the storage-x core takes
    /// on lavapipe, down to 4) that leaves that many. By rows alone, so a
    /// prompt of any length takes the pipelines loading compiled.
    pub(crate) fn windowed(self, rows: usize) -> TileShape {
        let enough = |tn: u32| rows.div_ceil(64 * tn as usize) >= WINDOW_ROW_GROUPS;
        let tn = [32, 16, 8].into_iter().find(|&tn| enough(tn)).unwrap_or(4);
        TileShape { tn, ..self }
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

    /// The defines of the tiled cores for `fmt` with `tt` token tiles.
    pub(crate) fn defines(
        &self,
        fmt: GpuFormat,
        tt: u32,
    ) -> Vec<(&'static str, Cow<'static, str>)> {
        let mut defines = vec![
            ("TM", TILE_M.to_string().into()),
            ("TN", self.tn.to_string().into()),
            ("TT", tt.to_string().into()),
            ("STEP", fmt.vec_step().to_string().into()),
            // x in a storage buffer; kernels::linear may read it through a window.
            ("X_DECL", X_STORAGE.into()),
        ];
        if self.vec {
            defines.extend(row_code(fmt, self.tn, self.form));
        }
        defines
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

/// The chunked tiled core's (matmul_tiled_vec.wgsl) per-chunk code for
/// `tn` rows of `fmt`: X_LOADS reads the chunk's x for the TM tokens (and,
/// for quantized formats, their sums over each run), ROW_SUMS declares the
/// sums, ROW_STEPS decodes each row's chunk and adds its dot products with
/// the tokens' x, ROW_STORES leaves the sums in the array `acc` that
/// `emit_tile` reads (see `RowForm`). A quantized chunk's dot products are
/// taken with its quants and scaled after (chunk_ab_FMT), which saves a
/// multiply and an add per weight.
fn row_code(fmt: GpuFormat, tn: u32, form: RowForm) -> [(&'static str, Cow<'static, str>); 4] {
    let scaled = fmt.is_quantized();
    let chunk = |part: &str, r: &str| {
        format!(
            "chunk_{part}_{}(w_row0 + min(row0 + {r}, p.rows - 1u), c)",
            fmt.fmt
        )
    };
    // x: the chunk's two runs of CV / 2 vec4s from xc.x and xc.y.
    let mut loop_loads = String::from("        var xs: array<array<vec4<f32>, CV>, TM>;\n        for (var t = 0u; t < TM; t++) {\n            // Tokens and rows past the end repeat the last; never written.\n            let base = x_base(min(tok0 + t, n_tok - 1u)) / 4u;\n            for (var i = 0u; i < CV / 2u; i++) {\n                xs[t][i] = x[base + xc.x + i];\n                xs[t][i + CV / 2u] = x[base + xc.y + i];\n            }\n        }\n");
    if form == RowForm::Loop {
        let step = if scaled {
            format!(
                "acc[t * TN + r] += dot_chunk_scaled(ws, {}, &xs, t);",
                chunk("ab", "r")
            )
        } else {
            "acc[t * TN + r] += dot_chunk(ws, &xs, t);".to_string()
        };
        let steps = format!(
            "        for (var r = 0u; r < TN; r++) {{\n            let ws = {};\n            for (var t = 0u; t < TM; t++) {{\n                {step}\n            }}\n        }}\n",
            chunk("q", "r")
        );
        return [
            ("X_LOADS", loop_loads.into()),
            ("ROW_SUMS", "    var acc: array<f32, TM * TN>;".into()),
            ("ROW_STEPS", steps.into()),
            ("ROW_STORES", "".into()),
        ];
    }
    // Each row's four token sums are one vec4.
    const _: () = assert!(TILE_M == 4);
    // vec_consts.wgsl's CV: the chunk's vec4s.
    let cv = (fmt.vec_step() / 4).min(8);
    let mut loads = String::new();
    if form == RowForm::Flat {
        for t in 0..TILE_M {
            // Tokens and rows past the end repeat the last; never written.
            loads += &format!("        let xb{t} = x_base(min(tok0 + {t}u, n_tok - 1u)) / 4u;\n");
            for i in 0..cv {
                let (run, at) = if i < cv / 2 {
                    ("x", i)
                } else {
                    ("y", i - cv / 2)
                };
                loads += &format!("        let x{t}_{i} = x[xb{t} + xc.{run} + {at}u];\n");
            }
        }
        if scaled {
            // The tokens' x sums over each run.
            for (run, vecs) in [(0, 0..cv / 2), (1, cv / 2..cv)] {
                let token_sums = (0..TILE_M)
                    .map(|t| {
                        let terms = vecs.clone().map(|i| format!("x{t}_{i}"));
                        format!("dot({}, one)", terms.collect::<Vec<_>>().join(" + "))
                    })
                    .collect::<Vec<_>>();
                loads += &format!(
                    "        let sums{run} = vec4<f32>({});\n",
                    token_sums.join(", ")
                );
            }
            loads = format!("        let one = vec4<f32>(1.0);\n{loads}");
        }
    } else {
        if scaled {
            loop_loads += "        let sums0 = run_sums(&xs, 0u);\n        let sums1 = run_sums(&xs, CV / 2u);\n";
        }
        loads += &loop_loads;
    }
    let mut sums = String::new();
    let mut steps = String::new();
    let mut stores = String::from("    var acc: array<f32, TM * TN>;\n");
    for r in 0..tn {
        sums += &format!("    var acc_{r} = vec4<f32>(0.0);\n");
        let row = format!("{r}u");
        if form == RowForm::Flat {
            // Token t's dot product of row r's chunk over run `vecs`.
            let dots = |t: u32, vecs: std::ops::Range<u32>| {
                vecs.map(|i| format!("dot(w{r}[{i}], x{t}_{i})"))
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            let tokens = |vecs: std::ops::Range<u32>| {
                let per_token = (0..TILE_M).map(|t| dots(t, vecs.clone()));
                format!("vec4<f32>({})", per_token.collect::<Vec<_>>().join(", "))
            };
            steps += &format!("        let w{r} = {};\n", chunk("q", &row));
            if scaled {
                steps += &format!("        let ab{r} = {};\n", chunk("ab", &row));
                steps += &format!(
                    "        acc_{r} += ab{r}.x * {} + ab{r}.y * sums0 + ab{r}.z * {} + ab{r}.w * sums1;\n",
                    tokens(0..cv / 2),
                    tokens(cv / 2..cv)
                );
            } else {
                steps += &format!("        acc_{r} += {};\n", tokens(0..cv));
            }
        } else if scaled {
            steps += &format!(
                "        acc_{r} += dot_tokens_scaled({}, {}, &xs, sums0, sums1);\n",
                chunk("q", &row),
                chunk("ab", &row)
            );
        } else {
            steps += &format!(
                "        acc_{r} += dot_tokens({}, &xs);\n",
                chunk("q", &row)
            );
        }
        for t in 0..TILE_M {
            stores += &format!("    acc[{t}u * TN + {r}u] = acc_{r}[{t}];\n");
        }
    }
    [
        ("X_LOADS", loads.into()),
        ("ROW_SUMS", sums.into()),
        ("ROW_STEPS", steps.into()),
        ("ROW_STORES", stores.into()),
    ]
}

const TILED_VEC_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_params.wgsl"),
    include_str!("../../../../shaders/vec_consts.wgsl"),
    include_str!("../../../../shaders/matmul_tile.wgsl"),
    include_str!("../../../../shaders/matmul_tiled_vec.wgsl")
);

/// The expert stacks' tile (their x rows are gathered per slot).
pub(crate) const EXPERT_TILE: TileShape = TileShape {
    tn: TILE_N,
    x4: false,
    vec: false,
    form: RowForm::Loop,
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
