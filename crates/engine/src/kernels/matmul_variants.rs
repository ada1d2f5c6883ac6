//! The kernel variants behind `matmul` (and the fused linear layer and the
//! expert matmuls, which record the same cores): which WGSL sources make
//! each core, the shapes a core can take (`TileShape` for the tiled form,
//! `VecShape` for the vec4 matrix-vector core) and how each adapter class
//! picks them, and the plain keys that find a variant's pipeline.

use std::borrow::Cow;

use super::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};
use crate::gpu::{context::AdapterSummary, Access, OwnedSpec, VariantKey};

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
/// `tn` rows of `fmt`: X_LOADS reads the chunk's x for the TM tokens,
/// ROW_SUMS declares the sums, ROW_STEPS decodes each row's chunk and adds
/// its dot products with the tokens' x, ROW_STORES leaves the sums in the
/// array `acc` that `emit_tile` reads (see `RowForm`).
fn row_code(fmt: GpuFormat, tn: u32, form: RowForm) -> [(&'static str, Cow<'static, str>); 4] {
    let decode = |r: &str| {
        format!(
            "decode_chunk_{}(w_row0 + min(row0 + {r}, p.rows - 1u), c)",
            fmt.fmt
        )
    };
    let loop_loads = "        var xs: array<array<vec4<f32>, CV>, TM>;\n        for (var t = 0u; t < TM; t++) {\n            // Tokens and rows past the end repeat the last; never written.\n            let base = x_base(min(tok0 + t, n_tok - 1u)) / 4u + xc;\n            for (var i = 0u; i < CV; i++) {\n                xs[t][i] = x[base + i];\n            }\n        }\n";
    if form == RowForm::Loop {
        let steps = format!(
            "        for (var r = 0u; r < TN; r++) {{\n            let ws = {};\n            for (var t = 0u; t < TM; t++) {{\n                acc[t * TN + r] += dot_chunk(ws, &xs, t);\n            }}\n        }}\n",
            decode("r")
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
    let cv = (fmt.vec_step() / 4).min(8);
    let mut loads = String::new();
    if form == RowForm::Flat {
        for t in 0..TILE_M {
            // Tokens and rows past the end repeat the last; never written.
            loads +=
                &format!("        let xb{t} = x_base(min(tok0 + {t}u, n_tok - 1u)) / 4u + xc;\n");
            for i in 0..cv {
                loads += &format!("        let x{t}_{i} = x[xb{t} + {i}u];\n");
            }
        }
    } else {
        loads += loop_loads;
    }
    let mut sums = String::new();
    let mut steps = String::new();
    let mut stores = String::from("    var acc: array<f32, TM * TN>;\n");
    for r in 0..tn {
        sums += &format!("    var acc_{r} = vec4<f32>(0.0);\n");
        if form == RowForm::Flat {
            let dots = |t: u32| {
                (0..cv)
                    .map(|i| format!("dot(w{r}[{i}], x{t}_{i})"))
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            steps += &format!("        let w{r} = {};\n", decode(&format!("{r}u")));
            steps += &format!(
                "        acc_{r} += vec4<f32>({}, {}, {}, {});\n",
                dots(0),
                dots(1),
                dots(2),
                dots(3)
            );
        } else {
            steps += &format!(
                "        acc_{r} += dot_tokens({}, &xs);\n",
                decode(&format!("{r}u"))
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
    pub reduce: Reduce,
}

/// How the vec4 core turns a row's `lanes` partial sums into one, after
/// they meet in workgroup memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The lane that stores the row adds them one by one: CPU adapters,
    /// whose groups are 8 lanes and whose barriers cost more than the adds.
    Serial = 0,
    /// A tree in workgroup memory, log2(lanes) barriers: GPUs without
    /// subgroups (the browser, while WebGPU does not expose them there).
    Tree = 1,
    /// Each subgroup sums whole rows with `subgroupAdd`, one barrier: GPUs
    /// with subgroups. Which rows a subgroup takes comes from its own ids,
    /// so nothing assumes how invocations map to subgroups.
    Subgroup = 2,
}

impl Reduce {
    /// The adapter's reduction: see the variants.
    pub fn choose(software: bool, subgroups: bool) -> Reduce {
        match (software, subgroups) {
            (true, _) => Reduce::Serial,
            (false, true) => Reduce::Subgroup,
            (false, false) => Reduce::Tree,
        }
    }

    /// As `wick info` and the JS `info()` name it.
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Serial => "serial",
            Reduce::Tree => "tree",
            Reduce::Subgroup => "subgroup",
        }
    }

    /// The REDUCE define of matvec.wgsl.
    pub(crate) fn code(self) -> u32 {
        self as u32
    }
}

impl VecShape {
    /// The shape for `fmt` rows of `k` elements. CPU adapters: a group per
    /// SIMD batch (8 lanes), each lane's x values serving as many rows as
    /// its step has x vec4s (8, or 16 for the K-quants' 64-element steps),
    /// since x is re-read per group through slow per-lane loads; contiguous
    /// steps per lane. GPUs: as many lanes as the row has steps (8 to 64),
    /// about 4 rows a workgroup, interleaved steps. `bench-kernels --sweep`
    /// times the alternatives. `subgroups`: whether the device has them
    /// (`Reduce::choose`).
    pub(crate) fn choose(software: bool, subgroups: bool, fmt: GpuFormat, k: usize) -> VecShape {
        let reduce = Reduce::choose(software, subgroups);
        if software {
            let group_rows = if fmt.vec_step() == 64 { 16 } else { 8 };
            return VecShape {
                lanes: 8,
                group_rows,
                chunked: true,
                reduce,
            };
        }
        let steps = (k / fmt.vec_step() as usize).max(1) as u32;
        let lanes = steps.next_power_of_two().clamp(8, 64);
        VecShape {
            lanes,
            group_rows: (4 * lanes / 64).max(1),
            chunked: false,
            reduce,
        }
    }

    /// Output rows of one workgroup.
    pub fn rows(&self) -> u32 {
        self.group_rows * 64 / self.lanes
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
/// The vec4 core's x reader for f32 x (through the entry point's x_vec).
pub(crate) const MATVEC_X_F32: &str = include_str!("../../../../shaders/matvec_x_f32.wgsl");
/// The step functions of the vec4 core for `fmt` (one file per step length).
pub(crate) fn quant_vec_wgsl(fmt: GpuFormat) -> &'static str {
    match fmt.vec_step() {
        16 => include_str!("../../../../shaders/quant_vec16.wgsl"),
        32 => include_str!("../../../../shaders/quant_vec32.wgsl"),
        _ => include_str!("../../../../shaders/quant_vec64.wgsl"),
    }
}
const MATVEC_MAIN: &str = include_str!("../../../../shaders/matvec_main.wgsl");

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
        ("REDUCE", shape.reduce.code().to_string().into()),
        ("SG", subgroup_lines(shape.reduce == Reduce::Subgroup)),
    ]);
    defines
}

/// The SG define: keeps (`""`) or comments out (`"//"`) the lines that use
/// subgroups, which a device without them must not see.
pub(crate) fn subgroup_lines(on: bool) -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed(if on { "" } else { "//" })
}
pub(crate) const GEMV_WGSL: &str = include_str!("../../../../shaders/matmul_gemv.wgsl");
pub(crate) const TILED_WGSL: &str = concat!(
    include_str!("../../../../shaders/matmul_tile.wgsl"),
    include_str!("../../../../shaders/matmul_tiled.wgsl")
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
            Shape::Tiled { tt, tile } => [
                1,
                tt,
                tile.tn,
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
                0,
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
                    "{}_vec_{}_l{}_r{}_c{}_s{}",
                    op.prefix(),
                    fmt.fmt,
                    v.lanes,
                    v.group_rows,
                    v.chunked as u8,
                    v.reduce.code()
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
                    "{}_tiled_{}_m{TILE_M}_n{}_t{tt}_x{}{}{}",
                    op.prefix(),
                    fmt.fmt,
                    tile.tn,
                    if tile.x4 { 4 } else { 1 },
                    if tile.vec { "_vec" } else { "" },
                    match tile.form {
                        RowForm::Loop => "",
                        RowForm::Unrolled => "_unrolled",
                        RowForm::Flat => "_flat",
                    }
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
