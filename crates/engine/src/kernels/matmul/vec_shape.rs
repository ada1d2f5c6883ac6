//! The shapes of the vec4 matrix-vector core (shaders/matmul/matvec.wgsl): how a
//! workgroup's invocations spread over rows and steps, how a row's lane
//! sums become one, and which shape each adapter class takes, by
//! measurement.

use crate::gpu::Tuning;
use crate::kernels::weights::GpuFormat;

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

pub use crate::gpu::tuning::Reduce;

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
    pub(crate) fn choose(tuning: &Tuning, fmt: GpuFormat, k: usize, rows: usize) -> VecShape {
        Self::for_class(tuning.cpu_lanes, tuning.gemv_reduce, fmt, k, rows)
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
    /// `bench-kernels --sweep` times the alternatives. `reduce`: the
    /// adapter's (`Tuning::gemv_reduce`).
    pub(crate) fn for_class(
        cpu_lanes: Option<u32>,
        reduce: Reduce,
        fmt: GpuFormat,
        k: usize,
        rows: usize,
    ) -> VecShape {
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
