//! The kernel variants behind `matmul` (and the fused linear layer and the
//! expert matmuls, which record the same cores): which WGSL sources make
//! each core, the shapes a core can take (`VecShape` for the vec4
//! matrix-vector core here, `TileShape` for the tiled form in `tile_shape`)
//! and how each adapter class picks them, and the plain keys that find a
//! variant's pipeline.

use super::tile_shape::{TileShape, TILE_M};
use super::weights::{GpuFormat, QuantMatrix, QUANT_WGSL};
use crate::gpu::{context::AdapterSummary, Access, OwnedSpec, VariantKey};

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

/// How the vec4 core (matvec.wgsl) spreads a workgroup's `workgroup`
/// invocations: groups of `lanes` lanes, each over `group_rows` rows, taking
/// contiguous runs of steps (`chunked`) or interleaved ones. `workgroup` is
/// a multiple of `lanes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecShape {
    pub lanes: u32,
    pub group_rows: u32,
    pub chunked: bool,
    pub reduce: Reduce,
    pub workgroup: u32,
}

/// Invocations of a vec4-core workgroup on a GPU.
pub const VEC_WORKGROUP: u32 = 64;

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

/// A CPU adapter's SIMD batch, about the vec4 core's lanes per group there
/// (`cpu_group_lanes`; on llvmpipe, for matrices with rows to spare, its
/// workgroup of one-lane groups: `VecShape::for_class`; None on GPUs):
/// llvmpipe runs 8 lanes at a time (AVX2), other CPU adapters (SwiftShader)
/// 4; in headless Chromium SmolLM2 decoded 1.9-2.3 tok/s with groups of 4
/// lanes against 1.4-1.9 with 8 and 1.2-1.5 with 16.
pub(crate) fn cpu_lanes(adapter: &AdapterSummary) -> Option<u32> {
    match (adapter.is_software, adapter.is_llvmpipe()) {
        (false, _) => None,
        (true, true) => Some(8),
        (true, false) => Some(4),
    }
}

/// Lanes of a group on a CPU adapter whose SIMD batch is `batch` lanes,
/// for rows of `steps` steps. A batch runs its loop until its busiest lane
/// is done, so lanes that get fewer steps (or none) still cost a full
/// run: 576-element rows are 18 blocks, which 8 lanes take as 3, 3, 3, 3,
/// 3, 3, 0, 0 (a quarter of the batch idle), and 6 lanes as 3 each. So the
/// count between batch / 2 and 2 x batch that wastes the fewest lane-steps
/// (lanes x ceil(steps / lanes)); of equals, the largest up to `batch`
/// (the shape measured best when nothing is wasted), else the smallest.
pub(crate) fn cpu_group_lanes(batch: u32, steps: u32) -> u32 {
    let batch = batch.max(2);
    (batch / 2..=2 * batch)
        .min_by_key(|&lanes| {
            let slots = lanes * steps.div_ceil(lanes);
            let distance = if lanes <= batch {
                (0, batch - lanes)
            } else {
                (1, lanes - batch)
            };
            (slots, distance)
        })
        .unwrap_or(batch)
}

/// Rows a group and groups a workgroup on a CPU adapter whose SIMD batch is
/// `batch` lanes. Each lane loads its x once per step for all its group's
/// rows, and x goes through the same slow per-lane loads as the weights, so
/// more rows a group read less x per weight: on lavapipe (8-lane batches)
/// 16 rows a group ran faster than 8 for every 32-element format
/// (`bench-kernels`, 576- to 2048-column shapes). Four such groups make 64
/// rows a workgroup, so a 576-row matrix still spreads over 9 workgroups
/// (the adapter's threads share them out whole).
/// SwiftShader's (4-lane batches) stay as measured in the page: 8 rows (16
/// for the K-quants' 64-element steps), 16 groups.
fn cpu_group_rows(batch: u32, fmt: GpuFormat) -> (u32, u32) {
    if batch >= 8 {
        (16, 4)
    } else {
        let rows = if fmt.vec_step() == 64 { 16 } else { 8 };
        (rows, VEC_WORKGROUP / batch.max(1))
    }
}

/// Rows one lane takes on llvmpipe when each lane takes whole rows
/// (`VecShape::for_class`), in workgroups of one SIMD batch: two scale
/// tiles (`layout::SCALE_TILE`), whose scales the lane loads a tile at once
/// (`matvec_tile`).
const LLVMPIPE_LANE_ROWS: u32 = 16;
/// The fewest such workgroups a matrix must give for llvmpipe to take that
/// shape. 896-row matrices (7 of them) ran no faster that way than in lane
/// groups of 64 rows a workgroup, which they keep; llvmpipe deals whole
/// workgroups to its threads (one a core), so 7 on two threads leave one
/// idle for the last, which is the likely reason.
const LLVMPIPE_MIN_WORKGROUPS: usize = 8;

impl VecShape {
    /// The shape for `fmt` rows of `k` elements, in a matrix of `rows` rows,
    /// on `adapter` (`for_class` with its CPU lanes). `subgroups`: whether
    /// the device has them.
    pub(crate) fn choose(
        adapter: &AdapterSummary,
        subgroups: bool,
        fmt: GpuFormat,
        k: usize,
        rows: usize,
    ) -> VecShape {
        Self::for_class(cpu_lanes(adapter), subgroups, fmt, k, rows)
    }

    /// The shape for `fmt` rows of `k` elements in a matrix of `rows` rows.
    /// llvmpipe (`cpu_lanes` Some(8)), where the matrix gives at least
    /// `LLVMPIPE_MIN_WORKGROUPS` workgroups of a batch of lanes over 16 rows
    /// each: one lane a group, over whole rows and every step. A batch's
    /// lanes then run the same trip count (none idles on a short share of
    /// steps), load the same x at the same time, and need no sum across
    /// lanes; `bench-kernels` timed Qwen2.5's 1152x896 q/k/v GEMVs 1.2x and
    /// its 151936x896 Q8_0 head 1.3x faster than with lane groups. Smaller
    /// matrices take that shape over one scale tile (8 rows a lane) in the
    /// formats with tiles, whose lanes load a step's scales a tile at once
    /// (`matvec_tile`): 1.1-1.2x faster than lane groups at 576x1536 and
    /// 896x896, as fast at 576x576. Without tiles (F32, F16, K-quants) 16
    /// rows a lane ran no faster than lane groups at 896 rows (7 such
    /// workgroups), so those keep lane groups. Other CPU adapters, and
    /// llvmpipe's small matrices without tiles: groups of about a batch of
    /// lanes (`cpu_group_lanes`) over contiguous steps, their rows and count
    /// from `cpu_group_rows`. GPUs (None): as many lanes as the row has
    /// steps (8 to 64), about 4 rows a workgroup of 64, interleaved steps.
    /// `bench-kernels --sweep` times the alternatives. `subgroups`: whether
    /// the device has them (`Reduce::choose`).
    pub(crate) fn for_class(
        cpu_lanes: Option<u32>,
        subgroups: bool,
        fmt: GpuFormat,
        k: usize,
        rows: usize,
    ) -> VecShape {
        let reduce = Reduce::choose(cpu_lanes.is_some(), subgroups);
        let steps = (k / fmt.vec_step() as usize).max(1) as u32;
        match cpu_lanes {
            Some(batch) if batch >= 8 => {
                let rows_to_spare =
                    rows.div_ceil((batch * LLVMPIPE_LANE_ROWS) as usize) >= LLVMPIPE_MIN_WORKGROUPS;
                let group_rows = match (rows_to_spare, fmt.scale_tile > 1) {
                    (true, _) => LLVMPIPE_LANE_ROWS,
                    (false, true) => fmt.scale_tile,
                    (false, false) => {
                        return Self::cpu_groups(batch, fmt, steps, reduce);
                    }
                };
                VecShape {
                    lanes: 1,
                    group_rows,
                    chunked: true,
                    reduce,
                    workgroup: batch,
                }
            }
            Some(batch) => Self::cpu_groups(batch, fmt, steps, reduce),
            None => {
                let lanes = steps.next_power_of_two().clamp(8, 64);
                VecShape {
                    lanes,
                    group_rows: (4 * lanes / 64).max(1),
                    chunked: false,
                    reduce,
                    workgroup: VEC_WORKGROUP,
                }
            }
        }
    }

    /// Groups of about a CPU adapter's `batch` of lanes over contiguous
    /// steps (`cpu_group_lanes`), their rows and count from `cpu_group_rows`.
    fn cpu_groups(batch: u32, fmt: GpuFormat, steps: u32, reduce: Reduce) -> VecShape {
        let lanes = cpu_group_lanes(batch, steps);
        let (group_rows, groups) = cpu_group_rows(batch, fmt);
        VecShape {
            lanes,
            group_rows,
            chunked: true,
            reduce,
            workgroup: lanes * groups,
        }
    }

    /// Why the core cannot run this shape, if it cannot: the workgroup must
    /// be whole groups within WebGPU's 256 invocations, and every reduction
    /// but the serial one halves the lanes each level (the tree over row
    /// sums, and with subgroups the fused norm's tree over the lanes' sums
    /// of squares), so it needs a power of two.
    pub fn check(&self) -> Result<(), String> {
        let lanes_fit = self.lanes > 0 && self.workgroup % self.lanes == 0;
        if !lanes_fit || self.group_rows == 0 || self.workgroup > 256 {
            return Err(format!(
                "vec4 core shape {self:?}: a workgroup of at most 256 invocations, whole groups of lanes, rows in each"
            ));
        }
        if self.reduce != Reduce::Serial && !self.lanes.is_power_of_two() {
            return Err(format!(
                "vec4 core shape {self:?}: the {} reduction needs a power-of-two lane count",
                self.reduce.name()
            ));
        }
        Ok(())
    }

    /// Output rows of one workgroup.
    pub fn rows(&self) -> u32 {
        self.group_rows * self.workgroup / self.lanes
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
    include_str!("../../../../shaders/matvec.wgsl"),
    include_str!("../../../../shaders/matvec_tile.wgsl")
);
/// The vec4 core's x reader for f32 x (through the entry point's x_vec),
/// with the f32 step type that it and linear_x_q8.wgsl share.
pub(crate) const MATVEC_X_F32: &str = concat!(
    include_str!("../../../../shaders/matvec_step_f32.wgsl"),
    include_str!("../../../../shaders/matvec_x_f32.wgsl")
);
/// The f32 step type alone (for linear_x_q8.wgsl).
pub(crate) const MATVEC_STEP_F32: &str = include_str!("../../../../shaders/matvec_step_f32.wgsl");
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
        ("WG", shape.workgroup.to_string().into()),
        ("GROUP_ROWS", shape.group_rows.to_string().into()),
        ("STEP", fmt.vec_step().to_string().into()),
        (
            "CHUNKED",
            if shape.chunked { "true" } else { "false" }.into(),
        ),
        ("REDUCE", shape.reduce.code().to_string().into()),
        ("SG", subgroup_lines(shape.reduce == Reduce::Subgroup)),
    ]);
    defines.extend(super::matvec_tile::defines(fmt, shape));
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
                    "{}_tiled_{}_m{TILE_M}_n{}_t{tt}_x{}{}{}",
                    op.prefix(),
                    fmt.fmt,
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
            storage,
        }
    }
}
