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
    /// (kernels::x_window) for `rows` output rows, on a CPU adapter whose
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

    /// The defines of the tiled cores for `fmt` with `tt` token tiles.
    pub(crate) fn defines(
        &self,
        fmt: GpuFormat,
        tt: u32,
    ) -> Vec<(&'static str, Cow<'static, str>)> {
        let mut defines = vec![
            ("TM", self.tm.to_string().into()),
            ("TN", self.tn.to_string().into()),
            ("TT", tt.to_string().into()),
            ("WG", self.wg.to_string().into()),
            ("STEP", fmt.vec_step().to_string().into()),
            // x in a storage buffer; kernels::linear may read it through a window.
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
            ("X_LANE", if self.x_share { "" } else { "//" }.into()),
        ];
        if self.vec {
            defines.extend(row_code(fmt, self.tn, self.tm, self.form, self.x_share));
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
/// multiply and an add per weight. `x_share`: X_LOADS takes x through the
/// subgroup (`TileShape::x_share`; not in the flat form).
fn row_code(
    fmt: GpuFormat,
    tn: u32,
    tm: u32,
    form: RowForm,
    x_share: bool,
) -> [(&'static str, Cow<'static, str>); 6] {
    let scaled = fmt.is_quantized();
    let chunk = |part: &str, r: &str| {
        format!(
            "chunk_{part}_{}(w_row0 + min(row0 + {r}, p.rows - 1u), wc)",
            fmt.fmt
        )
    };
    // x: the chunk's two runs of CV / 2 vec4s from xc.x and xc.y.
    let mut loop_loads = String::from("        var xs: array<array<vec4<f32>, CV>, TM>;\n        for (var t = 0u; t < TM; t++) {\n            // Tokens and rows past the end repeat the last; never written.\n            let base = x_base(min(tok0 + t, n_tok - 1u)) / 4u;\n            for (var i = 0u; i < CV / 2u; i++) {\n                xs[t][i] = x[base + xc.x + i];\n                xs[t][i + CV / 2u] = x[base + xc.y + i];\n            }\n        }\n");
    // vec_consts.wgsl's CV: the chunk's vec4s.
    let cv = (fmt.vec_step() / 4).min(CHUNK_VEC4S);
    if x_share {
        loop_loads = shared_x_loads(tm, cv);
    }
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
            ("CHUNK_LOOP", CHUNK_LOOP.into()),
            ("CHUNK_LOOP_END", "    }".into()),
        ];
    }
    // Each row's token sums are vec4s, one per group of four tokens.
    assert!(
        tm % 4 == 0,
        "the written-out forms take tokens in fours, not {tm}"
    );
    let groups = tm / 4;
    let mut loads = String::new();
    if form == RowForm::Flat {
        for t in 0..tm {
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
            // Each group's tokens' x sums over each run.
            loads += "        let one = vec4<f32>(1.0);\n";
            for g in 0..groups {
                for (run, vecs) in [(0, 0..cv / 2), (1, cv / 2..cv)] {
                    let token_sums = (4 * g..4 * g + 4)
                        .map(|t| {
                            let terms = vecs.clone().map(|i| format!("x{t}_{i}"));
                            format!("dot({}, one)", terms.collect::<Vec<_>>().join(" + "))
                        })
                        .collect::<Vec<_>>();
                    loads += &format!(
                        "        let sums{run}_{g} = vec4<f32>({});\n",
                        token_sums.join(", ")
                    );
                }
            }
        }
    } else {
        if scaled {
            for g in 0..groups {
                let t0 = 4 * g;
                loop_loads += &format!(
                    "        let sums0_{g} = run_sums(&xs, 0u, {t0}u);\n        let sums1_{g} = run_sums(&xs, CV / 2u, {t0}u);\n"
                );
            }
        }
        loads += &loop_loads;
    }
    let mut sums = String::new();
    let mut steps = String::new();
    let mut stores = String::from("    var acc: array<f32, TM * TN>;\n");
    let unrolled = form == RowForm::Unrolled;
    let tiles = unrolled.then(|| scale_tiles(fmt, tn)).flatten();
    if let Some((loads, _)) = &tiles {
        steps += loads;
    }
    // K-quant blocks are 8 chunks with one aux4 (and Q6_K one d16): loaded
    // once a block, a loop over its chunks inside.
    let block_scales = unrolled && fmt.qk == 256 && fmt.is_quantized();
    let (mut chunk_loop, mut loop_end) = (String::from(CHUNK_LOOP), String::from("    }"));
    if block_scales {
        chunk_loop = "    for (var c0 = 0u; c0 < chunks; c0 += 8u) {\n".into();
        for r in 0..tn {
            chunk_loop += &format!(
                "        let blk{r} = (w_row0 + min(row0 + {r}u, p.rows - 1u)) * p.blocks + (p.first_chunk + c0) / 8u;\n        let sc{r} = aux4(blk{r});\n"
            );
            if fmt.has_d16 {
                chunk_loop += &format!("        let dd{r} = d16(blk{r});\n");
            }
        }
        chunk_loop += "    for (var c = c0; c < c0 + 8u; c++) {";
        loop_end += "\n    }";
    }
    for r in 0..tn {
        let row = format!("{r}u");
        let at = format!("w_row0 + min(row0 + {r}u, p.rows - 1u), wc");
        match &tiles {
            Some((_, scales)) => {
                let (d, aux) = &scales[r as usize];
                let f = fmt.fmt;
                steps += &format!("        let w{r} = chunk_q_given_{f}({at}, {aux});\n");
                steps += &format!("        let ab{r} = chunk_ab_given_{f}({d}, {aux});\n");
            }
            None if block_scales => {
                let (f, d) = (
                    fmt.fmt,
                    if fmt.has_d16 {
                        format!("dd{r}")
                    } else {
                        "0.0".into()
                    },
                );
                steps += &format!("        let w{r} = {};\n", chunk("q", &row));
                steps += &format!("        let ab{r} = chunk_ab_given_{f}(sc{r}, {d}, wc);\n");
            }
            None => {
                steps += &format!("        let w{r} = {};\n", chunk("q", &row));
                if scaled {
                    steps += &format!("        let ab{r} = {};\n", chunk("ab", &row));
                }
            }
        }
        for g in 0..groups {
            let (acc, t0) = (format!("acc_{r}_{g}"), 4 * g);
            sums += &format!("    var {acc} = vec4<f32>(0.0);\n");
            let step = match (form, scaled) {
                (RowForm::Flat, _) => {
                    // Token t's dot product of row r's chunk over run `vecs`.
                    let dots = |t: u32, vecs: std::ops::Range<u32>| {
                        vecs.map(|i| format!("dot(w{r}[{i}], x{t}_{i})"))
                            .collect::<Vec<_>>()
                            .join(" + ")
                    };
                    let tokens = |vecs: std::ops::Range<u32>| {
                        let per_token = (t0..t0 + 4).map(|t| dots(t, vecs.clone()));
                        format!("vec4<f32>({})", per_token.collect::<Vec<_>>().join(", "))
                    };
                    match scaled {
                        true => format!(
                            "ab{r}.x * {} + ab{r}.y * sums0_{g} + ab{r}.z * {} + ab{r}.w * sums1_{g}",
                            tokens(0..cv / 2),
                            tokens(cv / 2..cv)
                        ),
                        false => tokens(0..cv),
                    }
                }
                (_, true) => {
                    format!("dot_tokens_scaled(w{r}, ab{r}, &xs, sums0_{g}, sums1_{g}, {t0}u)")
                }
                (_, false) => format!("dot_tokens(w{r}, &xs, {t0}u)"),
            };
            steps += &format!("        {acc} += {step};\n");
            for t in 0..4 {
                stores += &format!("    acc[{}u * TN + {r}u] = {acc}[{t}];\n", t0 + t);
            }
        }
    }
    [
        ("X_LOADS", loads.into()),
        ("ROW_SUMS", sums.into()),
        ("ROW_STEPS", steps.into()),
        ("ROW_STORES", stores.into()),
        ("CHUNK_LOOP", chunk_loop.into()),
        ("CHUNK_LOOP_END", loop_end.into()),
    ]
}

/// X_LOADS where the subgroup shares x (`TileShape::x_share`): lane
/// `x_lane` loads vec4 x_lane % CV of the chunk for each of the TM tokens
/// (the first run's CV / 2 vec4s from xc.x, the second's from xc.y), and
/// each of the chunk's `cv` vec4s comes from the lane that loaded it.
fn shared_x_loads(tm: u32, cv: u32) -> String {
    let mut code = String::from(
        "        var xs: array<array<vec4<f32>, CV>, TM>;\n        let own = x_lane % CV;\n        let own_at = select(xc.y + own - CV / 2u, xc.x + own, own < CV / 2u);\n",
    );
    for t in 0..tm {
        // Tokens past the end repeat the last; never written.
        code += &format!(
            "        let xv{t} = x[x_base(min(tok0 + {t}u, n_tok - 1u)) / 4u + own_at];\n"
        );
        for i in 0..cv {
            code += &format!("        xs[{t}][{i}] = subgroupBroadcast(xv{t}, {i}u);\n");
        }
    }
    code
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

/// The chunk loop of matmul_tiled_vec.wgsl's `tiled`, as most formats take it.
const CHUNK_LOOP: &str = "    for (var c = 0u; c < chunks; c++) {";

/// Where `tn` rows are whole scale tiles of `fmt` (the 32-element formats'
/// 8 rows, `kernels::layout`): the loads of each tile's scales for a chunk,
/// a vec4 of its 8 d16 and two of its aux words, and each row's (d, aux)
/// expressions out of them. A row at a time read each word through a load
/// of its own, on llvmpipe a texel fetch a word.
fn scale_tiles(fmt: GpuFormat, tn: u32) -> Option<(String, Vec<(String, String)>)> {
    const LANES: [&str; 4] = ["x", "y", "z", "w"];
    let tile = fmt.scale_tile;
    if tile != 8 || tn % tile != 0 || !fmt.is_quantized() {
        return None;
    }
    let aux = fmt.aux_words == 1;
    let mut loads = String::new();
    for t in 0..tn / tile {
        // Rows past the part read the last tile's scales; their sums are dropped.
        loads += &format!(
            "        let slot{t} = ((w_row0 + min(row0 + {}u, p.rows - 1u)) / SCALE_TILE * p.blocks + wc) * SCALE_TILE;\n",
            t * tile
        );
        if fmt.has_d16 {
            loads += &format!("        let d{t} = w_vec4((p.d16_base + slot{t} / 2u) / 4u);\n");
        }
        if aux {
            for v in 0..2 {
                loads += &format!(
                    "        let aux{t}_{v} = w_vec4((p.aux_base + slot{t}) / 4u + {v}u);\n"
                );
            }
        }
    }
    let scales = (0..tn as usize)
        .map(|r| {
            let (t, i) = (r / tile as usize, r % tile as usize);
            // Row i's f16 is half i % 2 of word i / 2 of the tile's d16.
            let d = match fmt.has_d16 {
                true => format!("unpack2x16float(d{t}.{}).{}", LANES[i / 2], LANES[i % 2]),
                false => "0.0".into(),
            };
            let a = match aux {
                true => format!("aux{t}_{}.{}", i / 4, LANES[i % 4]),
                false => "0u".into(),
            };
            (d, a)
        })
        .collect();
    Some((loads, scales))
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
#[path = "tile_shape_tests.rs"]
mod tests;
