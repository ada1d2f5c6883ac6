//! How the fused linear layer's prefill form reads x where weights are
//! textures (llvmpipe): through uniform windows (`kernels::matmul::x_window`), a
//! dispatch per slice of token rows, one token tile a workgroup.
//!
//! The tile takes WIDE_TILE_M token rows an invocation where a window holds
//! two such tiles (each decoded weight chunk then serves twice the tokens).
//! Rows too long for that, in a projection that may be summed in parts (not
//! gated), are first copied into ranges of columns (`kernels::matmul::x_ranges`)
//! whose rows do fit: each range is a matmul over its columns of the
//! weights, the first with the op's epilogue, the others adding into out.
//! Failing both, TILE_M token rows an invocation where a window holds
//! `MIN_WINDOW_TOKENS`; else no window (the storage-x core).
//!
//! The choice depends on the matrix and the adapter's window, never on the
//! chunk's token count: a range's partial sums and the storage-x core add
//! a row's products in another order than one windowed pass, so a plan
//! chosen by token count would give a position other logits in a chunk of
//! 4 tokens than in one of 16 (a conversation's reused prefix, or
//! logprobs prefilled after a generation, against one prefill of it all).

use crate::gpu::weight_store::WeightStore;
use crate::gpu::{GpuBuffer, Recorder};
use crate::kernels::matmul::tile_shape::{CHUNK_VEC4S, WIDE_TILE_M};
use crate::kernels::matmul::tiled::TileShape;
use crate::kernels::matmul::x_ranges::{col_ranges, ColRange};
use crate::kernels::matmul::x_window::{XRows, XSlice};
use crate::kernels::weights::QuantMatrix;

/// Fewer token rows than this a window would have each dispatch of a long
/// chunk read the whole matrix for a handful of tokens:
/// the storage-x core, which takes the chunk in one dispatch, does better;
/// two tiles (1536- and 2048-wide rows) ran 1.2-1.4x faster through windows
/// than storage x.
const MIN_WINDOW_TOKENS: usize = 8;
/// Token rows a window must hold for the wide tile: two of its tiles.
const WIDE_WINDOW_TOKENS: usize = 2 * WIDE_TILE_M as usize;

/// x's rows as the windowed tiled core reads them.
pub(super) struct XWindow {
    pub window_bytes: u64,
    pub tile: TileShape,
    /// Whether x's rows are first copied into `ranges` (into the scratch
    /// given to `plan`); else one range of every column, read from x.
    pub copied: bool,
    /// Each range of columns with the slices of token rows its dispatches
    /// take (slices of the copied buffer where `copied`).
    pub ranges: Vec<(ColRange, Vec<XSlice>)>,
}

/// What `plan` reads and may use.
pub(super) struct WindowInput<'a> {
    pub w: &'a QuantMatrix,
    pub x: &'a GpuBuffer,
    pub x_offset: usize,
    pub m: usize,
    /// The tile the adapter takes without a window (`TileShape::choose`).
    pub tile: TileShape,
    /// Scratch for x's rows in ranges (at least m * k f32s), where the op
    /// may be summed in parts.
    pub ranges_scratch: Option<&'a GpuBuffer>,
}

/// How the op reads x through windows, or `None` for the storage-x core.
pub(super) fn plan(rec: &Recorder, input: &WindowInput) -> Option<XWindow> {
    let ctx = rec.ctx();
    if ctx.weight_store != WeightStore::Textures || !input.tile.vec {
        return None;
    }
    let (w, m) = (input.w, input.m);
    let rows = w.parts.iter().map(|p| p.rows).max().unwrap_or(0);
    let align = ctx.limits.min_uniform_buffer_offset_alignment as u64;
    // Whether the adapter's largest window holds `least` rows of `cols`
    // f32s (a smaller buffer is one window over all its rows).
    let window_limit = ctx.limits.max_uniform_buffer_binding_size / 16 * 16;
    let holds = |cols: usize, least: usize| window_limit / (4 * cols as u64).max(1) >= least as u64;
    // The slices of a range's rows in `buf` from `x_offset`.
    let slices = |buf: &GpuBuffer, x_offset: usize, cols: usize, tile: &TileShape| {
        let window_bytes = rec.uniform_window(buf) / 16 * 16;
        let slices = XRows {
            buffer_bytes: buf.size(),
            window_bytes,
            align,
            x_offset,
            k: cols,
            m,
            tile_tokens: tile.tm as usize,
        }
        .slices()?;
        Some((window_bytes, slices))
    };
    let whole = |tile: TileShape, least: usize| {
        if !holds(w.cols, least) {
            return None;
        }
        let (window_bytes, s) = slices(input.x, input.x_offset, w.cols, &tile)?;
        let every = ColRange {
            first_col: 0,
            cols: w.cols,
        };
        Some(XWindow {
            window_bytes,
            tile,
            copied: false,
            ranges: vec![(every, s)],
        })
    };
    let in_ranges = |tile: TileShape| {
        let scratch = input.ranges_scratch?;
        if scratch.size() < 4 * (m * w.cols) as u64 {
            return None;
        }
        let window_bytes = rec.uniform_window(scratch) / 16 * 16;
        // Ranges whose columns are whole chunks of the vec4 core and whole
        // blocks, so that a range's chunk c is the row's chunk first + c;
        // as wide as the adapter's window allows, whatever the scratch's size.
        let fmt = w.format();
        let granule = (fmt.vec_step() as usize).max(fmt.qk as usize);
        let most = window_limit as usize / 4 / WIDE_WINDOW_TOKENS;
        let ranges = col_ranges(w.cols, most, granule)?;
        let mut with_slices = Vec::with_capacity(ranges.len());
        for r in ranges {
            let (_, s) = slices(scratch, r.offset(m), r.cols, &tile)?;
            with_slices.push((r, s));
        }
        Some(XWindow {
            window_bytes,
            tile,
            copied: true,
            ranges: with_slices,
        })
    };
    // A GPU made to keep weights in textures: workgroups of 64 there.
    let lanes = ctx.tuning.cpu_lanes.unwrap_or(64);
    let share_x = ctx.features.subgroup_min_size >= CHUNK_VEC4S;
    let wide = input.tile.windowed(rows, true, lanes, share_x);
    if wide.tm == WIDE_TILE_M {
        if let Some(plan) = whole(wide, WIDE_WINDOW_TOKENS).or_else(|| in_ranges(wide)) {
            return Some(plan);
        }
    }
    whole(
        input.tile.windowed(rows, false, lanes, share_x),
        MIN_WINDOW_TOKENS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::quant::{quantize, GgmlType};
    use crate::kernels::matmul::tile_shape::TILE_M;
    use crate::kernels::weights::test_weights;
    use crate::testutil::ctx;

    /// A plan's token rows an invocation, whether it copies x into ranges,
    /// and its ranges' widths.
    type Planned = Option<(u32, bool, Vec<usize>)>;

    /// The plan for a `rows` x `k` matrix of `dtype` over `m` token rows,
    /// with a ranges scratch or not.
    fn plan_for(dtype: GgmlType, rows: usize, k: usize, m: usize, scratch: bool) -> Planned {
        let ctx = ctx();
        let bytes = quantize(dtype, &test_weights(rows * k, 1)).unwrap();
        let w = QuantMatrix::upload(ctx, "w", dtype, rows, k, &bytes).unwrap();
        let x = ctx.create_storage("x", (4 * m * k) as u64).unwrap();
        let ranges = ctx.create_storage("ranges", (4 * m * k) as u64).unwrap();
        let input = WindowInput {
            w: &w,
            x: &x,
            x_offset: 0,
            m,
            tile: TileShape::choose(&ctx.tuning, w.format(), k, 0),
            ranges_scratch: scratch.then_some(&*ranges),
        };
        let rec = Recorder::new(ctx);
        let plan = plan(&rec, &input)?;
        let widths = plan.ranges.iter().map(|(r, _)| r.cols).collect();
        Some((plan.tile.tm, plan.copied, widths))
    }

    #[test]
    fn rows_take_the_wide_tile_whole_in_ranges_or_narrow() {
        let textures = ctx().weight_store == WeightStore::Textures;
        let wide = WIDE_TILE_M;
        // (dtype, k, scratch) -> (tm, copied, range widths) where weights
        // are textures: 896 columns, 18 rows a 64 KiB window: wide, whole;
        // 2560 (6 a window): in ranges where a scratch is given, else
        // narrow tiles (8 need 2048 columns at most) or none;
        // 4864 without a scratch (3 a window): storage x.
        let cases: [(GgmlType, usize, bool, Planned); 5] = [
            (GgmlType::Q5_0, 896, true, Some((wide, false, vec![896]))),
            (
                GgmlType::Q6_K,
                2560,
                true,
                Some((wide, true, vec![1024, 1024, 512])),
            ),
            (
                GgmlType::Q8_0,
                4864,
                true,
                Some((wide, true, vec![992, 992, 992, 992, 896])),
            ),
            (
                GgmlType::Q8_0,
                2048,
                false,
                Some((TILE_M, false, vec![2048])),
            ),
            (GgmlType::Q8_0, 4864, false, None),
        ];
        for (dtype, k, scratch, want) in cases {
            let want = if textures { want } else { None };
            // The same plan for a chunk of any token count (2 token rows
            // fit one window of every width here, 9 some, 64 none), so a
            // position's sums do not depend on how its prompt was cut.
            for m in [64, 2, 9] {
                let got = plan_for(dtype, 256, k, m, scratch);
                assert_eq!(got, want, "{dtype} k {k} scratch {scratch} m {m}");
            }
        }
    }
}
