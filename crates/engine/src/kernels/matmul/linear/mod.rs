//! The fused linear layer: a projection with what a transformer block does
//! around it, in as few dispatches as the form allows.
//!
//! `out = epilogue(W · prologue(x))` for `m` token rows, where the prologue is
//! an optional RMSNorm of each x row and the epilogue stores (with an
//! optional bias), adds into `out` (the residual stream absorbing the
//! projection), or gates (`act(gate) * up`, over a gate/up matrix whose rows
//! are interleaved pairs, see `Epilogue::Glu`).
//!
//! Decode (one token row): one matrix-vector dispatch per matrix part does
//! all of it (linear_gemv.wgsl; `gemv.rs` picks its core and x reader). A
//! verifying pass's rows (`Linear::as_decode`) take the same form, each
//! row summed as decode sums it. Several rows (prefill): the register-blocked matmul with every
//! epilogue (linear_tiled.wgsl: a tile's rows are whole gate/up pairs), plus
//! a norm dispatch into scratch before it: a tile sees only part of a row,
//! so it cannot normalise it. Where weights are textures (llvmpipe) it reads
//! x through uniform windows, a dispatch per slice of tokens, rows too long
//! for a window first copied into ranges of columns (`window::plan`).
//! The prefill form takes 2 token tiles a workgroup for chunks of up to 8
//! rows, 4 up to 16 and 8 for longer ones (`prefill_token_tiles`): a prompt
//! of any length needs the same three pipelines, which loading compiles once
//! (a pipeline costs up to a second to compile in a software WebGPU), while a
//! short chunk does not pay for up to 4x the workgroups it needs (tiles past
//! its last token return at once, but each workgroup has a fixed cost).

use crate::gpu::{error::shape_err, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey};
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::matmul::tiled::{check_groups, Params, TileShape, VecShape, TILE_M};
use crate::kernels::matmul::x_ranges::{copy_ranges, ColRange};
use crate::kernels::matmul::x_window::XSlice;
use crate::kernels::norm::rms::rms_norm;
use crate::kernels::norm::rms_q8::Q8Rows;
use crate::kernels::weights::QuantMatrix;
use crate::kernels::{check_elems, words};

/// Token tiles per workgroup of the prefill form for `m` rows (see the
/// module comment).
pub(crate) fn prefill_token_tiles(m: usize) -> u32 {
    match m.div_ceil(TILE_M as usize) {
        0..=2 => 2,
        3..=4 => 4,
        _ => 8,
    }
}

const TILED_MAIN: &str = include_str!("../../../../../../shaders/matmul/linear_tiled.wgsl");
/// The gate activations, for the gating epilogue of both forms.
const ACT_WGSL: &str = include_str!("../../../../../../shaders/elementwise/act_fns.wgsl");

/// What happens to `W · x` on its way to `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `out = W x (+ bias)`.
    Store,
    /// `out += W x (+ bias)`.
    Add,
    /// `out[i] = act(gate_i · x) * (up_i · x)`, W's rows interleaved as
    /// (gate 0, up 0, gate 1, up 1, ...); `out` rows are `W.rows / 2` wide.
    Glu(Activation),
}

impl Epilogue {
    /// `Params::accumulate`: 1 adds.
    fn accumulate(self) -> u32 {
        (self == Epilogue::Add) as u32
    }

    /// `Params::glu`: 0 ungated, else 1 + the gate's activation.
    fn glu(self) -> u32 {
        match self {
            Epilogue::Glu(act) => 1 + act as u32,
            _ => 0,
        }
    }
}

/// One fused projection of `m` token rows. Offsets and strides in f32 elements.
pub struct Linear<'a> {
    pub x: &'a GpuBuffer,
    pub x_offset: usize,
    /// RMSNorm of each x row first: its weight (`w.cols` values, zero-padded
    /// to a multiple of 4) and epsilon.
    pub norm: Option<(&'a GpuBuffer, f32)>,
    /// x's row again, in 8-bit blocks (`rms_norm_q8` writes both): the
    /// matrix-vector vec4 core reads these instead for quantized weights,
    /// three loads per 32 values where f32 takes eight (what bounds it on
    /// CPU adapters). The matrix-vector form only (one row, or `as_decode`),
    /// `m` rows of them, without `norm`, x from offset 0; F32/F16 weights
    /// and the other cores read x.
    pub x_q8: Option<Q8Rows<'a>>,
    pub w: &'a QuantMatrix,
    /// Added to each output row: the buffer and the element of W's row 0.
    pub bias: Option<(&'a GpuBuffer, usize)>,
    pub out: &'a GpuBuffer,
    pub out_offset: usize,
    /// Elements between token rows of `out` (at least the output width).
    pub out_stride: usize,
    pub epilogue: Epilogue,
    pub m: usize,
    /// Each token row summed as a one-row op sums it (the matrix-vector
    /// form, `AS_DECODE_TOKENS` rows a dispatch): row t's outputs equal,
    /// bit for bit, those of a one-row op on row t, so a verifying pass's
    /// rows give what decode steps give. Otherwise several rows take the
    /// form fastest for many (prefill).
    pub as_decode: bool,
}

/// Scratch the prefill form needs: `m * w.cols` f32 for the normed x.
pub struct LinearScratch<'a> {
    pub normed: &'a GpuBuffer,
    /// Where x's rows may be copied in ranges of columns (`m * w.cols` f32,
    /// neither x, the normed rows nor out): llvmpipe reads rows too long
    /// for its uniform windows so (see `window::plan`). Without it (or
    /// with less room) such rows take the storage-x core.
    pub ranges: Option<&'a GpuBuffer>,
}

impl Linear<'_> {
    /// Output features: W's rows, or half of them when gating.
    fn out_width(&self) -> usize {
        match self.epilogue {
            Epilogue::Glu(_) => self.w.rows / 2,
            _ => self.w.rows,
        }
    }

    /// What the projection reads and writes: W whole, x's rows (or their
    /// 8-bit blocks), the norm weight and the bias, out's rows (read too
    /// when the projection adds into them). In the prefill form the norm
    /// runs as an op of its own first (`rms_norm`, which counts itself).
    fn bytes_moved(&self) -> u64 {
        let (m, k) = (self.m, self.w.cols);
        let x = match &self.x_q8 {
            Some(_) => {
                let (quants, scales) = Q8Rows::elems(m, k);
                words(quants + scales)
            }
            None => words(m * k),
        };
        let norm = self.norm.map_or(0, |_| words(k));
        let bias = self.bias.map_or(0, |_| words(self.w.rows));
        let out_passes = if self.epilogue == Epilogue::Add { 2 } else { 1 };
        let out = words(out_passes * m * self.out_width());
        self.w.bytes() as u64 + x + norm + bias + out
    }

    fn check(&self) -> Result<(), GpuError> {
        const K: &str = "linear";
        let (w, m) = (self.w, self.m);
        if m == 0 {
            return Err(shape_err(K, "no token rows"));
        }
        check_elems(K, "x", self.x, self.x_offset + m * w.cols)?;
        let width = self.out_width();
        if self.out_stride < width {
            return Err(shape_err(
                K,
                format!(
                    "out stride {} is below the {width} outputs",
                    self.out_stride
                ),
            ));
        }
        check_elems(
            K,
            "out",
            self.out,
            self.out_offset + (m - 1) * self.out_stride + width,
        )?;
        if self.out.id() == self.x.id() {
            return Err(shape_err(K, "out may not live in x's buffer"));
        }
        if let Some((norm, eps)) = self.norm {
            // Read as vec4: zero-padded to whole vec4s (TensorStore pads every vector).
            check_elems(
                K,
                "norm weight (padded to a multiple of 4)",
                norm,
                w.cols.next_multiple_of(4),
            )?;
            if !(eps >= 0.0 && eps.is_finite()) {
                return Err(shape_err(
                    K,
                    format!("eps {eps} is not a finite number >= 0"),
                ));
            }
        }
        if let Some(q8) = &self.x_q8 {
            if (m != 1 && !self.as_decode) || self.norm.is_some() || self.x_offset != 0 {
                return Err(shape_err(
                    K,
                    "8-bit x is for the matrix-vector form (one token row, or rows as decode sums them) from offset 0, without a norm",
                ));
            }
            q8.check(K, m, w.cols)?;
        }
        if let Some((bias, offset)) = self.bias {
            check_elems(K, "bias", bias, offset + w.rows)?;
            if matches!(self.epilogue, Epilogue::Glu(_)) {
                return Err(shape_err(K, "a gated projection takes no bias"));
            }
        }
        if let Epilogue::Glu(_) = self.epilogue {
            let odd = w.rows % 2 == 1 || w.parts.iter().any(|p| p.first_row % 2 == 1);
            if odd {
                return Err(shape_err(
                    K,
                    format!(
                        "gating needs whole gate/up row pairs in every part ({} rows)",
                        w.rows
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The x of a matrix-vector projection (one row, or `rows` as decode)
/// after an RMSNorm of each row's `dim` elements of `x` from `x_offset`
/// (`weight`, `eps`): the norm folded into the projection
/// (`Linear::norm`), or, where the adapter's tuning says
/// (`Tuning::norm_apart`: CPU adapters, where the folded form ran wide
/// projections slower than the dispatch it saves), run ahead into `scratch`
/// from element 0. Returns the projection's x, its offset and its norm.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn norm_before_projection<'a>(
    rec: &mut Recorder,
    x: &'a GpuBuffer,
    x_offset: usize,
    weight: &'a GpuBuffer,
    eps: f32,
    scratch: &'a GpuBuffer,
    rows: usize,
    dim: usize,
) -> Result<(&'a GpuBuffer, usize, Option<(&'a GpuBuffer, f32)>), GpuError> {
    if rec.ctx().tuning.norm_apart {
        rms_norm(rec, x, x_offset, weight, scratch, 0, rows, dim, eps)?;
        return Ok((scratch, 0, None));
    }
    Ok((x, x_offset, Some((weight, eps))))
}

/// Records `op`: one dispatch per matrix part, and in the prefill form
/// (m > 1) a norm dispatch before them where the op has a norm.
pub fn linear(rec: &mut Recorder, op: &Linear, scratch: &LinearScratch) -> Result<(), GpuError> {
    linear_as(rec, op, scratch, Forced::default())
}

/// `linear`, with what `forced` fixes instead of the adapter's choice
/// (tests run every shape and x reader on any adapter).
pub(crate) fn linear_as(
    rec: &mut Recorder,
    op: &Linear,
    scratch: &LinearScratch,
    forced: Forced,
) -> Result<(), GpuError> {
    op.check()?;
    rec.moved(op.bytes_moved());
    if let Some(ranges) = scratch.ranges {
        // The copy into ranges would overwrite what the op reads or writes.
        let taken = [op.x.id(), op.out.id(), scratch.normed.id()];
        if taken.contains(&ranges.id()) {
            return Err(shape_err(
                "linear",
                "the ranges scratch may not be x, out or the normed scratch",
            ));
        }
    }
    if op.m == 1 || op.as_decode {
        return gemv::record(rec, op, forced);
    }
    let (x, x_offset) = match op.norm {
        Some((norm, eps)) => {
            let k = op.w.cols;
            check_elems("linear", "normed scratch", scratch.normed, op.m * k)?;
            rms_norm(
                rec,
                op.x,
                op.x_offset,
                norm,
                scratch.normed,
                0,
                op.m,
                k,
                eps,
            )?;
            (scratch.normed, 0)
        }
        None => (op.x, op.x_offset),
    };
    record_tiled(rec, op, x, x_offset, scratch.ranges)
}

/// Bindings: w, x, out, for a vec4 core the part again (as vec4s), then
/// `extra` read-only ones.
fn storage(vec_core: bool, extra: usize) -> &'static [Access] {
    const W: Access = Access::Weights;
    const R: Access = Access::Read;
    const RW: Access = Access::ReadWrite;
    if vec_core {
        &[W, R, RW, W, R, R, R][..4 + extra]
    } else {
        &[W, R, RW, R, R, R][..3 + extra]
    }
}

/// What tests and benchmarks fix instead of the adapter's choice.
#[derive(Clone, Copy, Default)]
pub(crate) struct Forced {
    /// The vec4 core's shape, where that core takes the op.
    pub vec_shape: Option<VecShape>,
    /// Integer dot products for 8-bit x (`Some(true)` is an error where not
    /// `q8_dot4_fits`; 8-bit x always takes the vec4 core, as `Linear::check`
    /// admits it only from offset 0 of rows whose blocks are whole steps).
    pub dot4: Option<bool>,
    /// Token rows a matrix-vector pipeline sums at once for several rows
    /// `as_decode` (`Tuning::as_decode_tokens`), 1..=`AS_DECODE_TOKENS`.
    pub tokens: Option<usize>,
}

/// The register-blocked form over `op.w`, x from `x_offset` of `x` (the
/// op's, or its normed rows), with the op's epilogue; through uniform
/// windows where the adapter reads them cheaply (`window::plan`).
fn record_tiled(
    rec: &mut Recorder,
    op: &Linear,
    x: &GpuBuffer,
    x_offset: usize,
    ranges_scratch: Option<&GpuBuffer>,
) -> Result<(), GpuError> {
    let (w, m) = (op.w, op.m);
    let glu = match op.epilogue {
        Epilogue::Glu(act) => Some(act),
        _ => None,
    };
    let input = window::WindowInput {
        w,
        x,
        x_offset,
        m,
        tile: TileShape::choose(&rec.ctx().tuning, w.format(), w.cols, x_offset),
        // A gated projection cannot be summed in parts.
        ranges_scratch: ranges_scratch.filter(|_| glu.is_none()),
    };
    let plan = window::plan(rec, &input);
    let (tt, tile) = match &plan {
        Some(plan) => (1, plan.tile),
        None => (prefill_token_tiles(m), input.tile),
    };
    if glu.is_some() && tile.tn % 2 == 1 {
        // linear_tiled.wgsl pairs a tile's rows: each must hold whole pairs.
        return Err(shape_err(
            "linear",
            format!("a tile of {} rows cannot gate row pairs", tile.tn),
        ));
    }
    // Without a window, one slice of every token row from x's own offset.
    let every = ColRange {
        first_col: 0,
        cols: w.cols,
    };
    let whole = [(
        every,
        vec![XSlice {
            first: 0,
            tokens: m,
            offset: 0,
            x_offset,
        }],
    )];
    let ranges = plan.as_ref().map_or(&whole[..], |p| &p.ranges[..]);
    let mut x = x;
    if let (Some(plan), Some(scratch)) = (&plan, ranges_scratch) {
        if plan.copied {
            let width = ranges[0].0.cols;
            copy_ranges(rec, x, x_offset, m, w.cols, width, scratch)?;
            x = scratch;
        }
    }
    let window_vec4s = plan.as_ref().map_or(0, |p| (p.window_bytes / 16) as u32);
    let rows_per_group = tile.rows(tt);
    // Elements of the vec4 core's chunk (vec_consts.wgsl's 4 * CV).
    let chunk_elems = (w.format().vec_step() as usize).min(32);
    for part in &w.parts {
        let row_groups = (part.rows as u32).div_ceil(rows_per_group);
        check_groups("linear", row_groups, || {
            format!("a part of {} rows", part.rows)
        })?;
        let part_out = op.out_offset + part.first_row / if glu.is_some() { 2 } else { 1 };
        for (i, (range, slices)) in ranges.iter().enumerate() {
            // The first range has the op's epilogue and bias; the others add.
            let (epilogue, bias) = match i {
                0 => (op.epilogue, op.bias),
                _ => (Epilogue::Add, None),
            };
            let variant = TiledVariant {
                tile,
                window_vec4s,
                has_bias: bias.is_some(),
            };
            let key = variant.key(w);
            for slice in slices {
                let token_groups = (slice.tokens as u32).div_ceil(tt * tile.tm);
                check_groups("linear", token_groups, || format!("{m} token rows"))?;
                let mut p = Params::new(
                    w,
                    part,
                    slice.tokens,
                    part.rows,
                    slice.x_offset,
                    part_out + slice.first * op.out_stride,
                    op.out_stride,
                );
                p.set_col_range(range.first_col / chunk_elems, range.cols);
                p.token_tiles = tt;
                p.accumulate = epilogue.accumulate();
                p.glu = epilogue.glu();
                let mut buffers: [&GpuBuffer; 5] = [&part.buffer, x, op.out, op.out, op.out];
                let mut n = 3;
                if tile.vec {
                    buffers[n] = &part.buffer;
                    n += 1;
                }
                if let Some((bias_buf, offset)) = bias {
                    p.bias_offset = (offset + part.first_row) as u32;
                    buffers[n] = bias_buf;
                    n += 1;
                }
                rec.dispatch_variant_windowed(
                    &key,
                    || variant.spec(w),
                    &p,
                    &buffers[..n],
                    [row_groups, token_groups, 1],
                    plan.as_ref().map(|_| slice.offset as u32),
                );
            }
        }
    }
    Ok(())
}

/// One pipeline of the tiled core: `tile` (with any number of token tiles a
/// workgroup: `Params::token_tiles`), x through a window of `window_vec4s`
/// (0: storage x), bias or not. Every epilogue shares it
/// (`Params::accumulate`, `Params::glu`).
struct TiledVariant {
    tile: TileShape,
    window_vec4s: u32,
    has_bias: bool,
}

impl TiledVariant {
    fn key(&self, w: &QuantMatrix) -> VariantKey {
        let tile = &self.tile;
        VariantKey {
            family: "linear_tiled",
            fmt: w.format().fmt,
            args: [
                0,
                self.has_bias as u32,
                0,
                tile.tn | tile.tm << 8 | tile.wg << 16,
                tile.x4 as u32 | self.window_vec4s << 1,
                tile.vec as u32 | tile.form.code() << 1 | (tile.x_share as u32) << 3,
            ],
        }
    }

    fn spec(&self, w: &QuantMatrix) -> OwnedSpec {
        let (tile, fmt) = (&self.tile, w.format());
        let mut defines = fmt.defines();
        defines.extend(tile.defines(fmt));
        let mut flags = tile.flags();
        flags.push(("BIAS", self.has_bias));
        defines.push(("BIAS_BINDING", if tile.vec { "5" } else { "4" }.into()));
        let mut storage = storage(tile.vec, self.has_bias as usize).to_vec();
        if self.window_vec4s > 0 {
            defines.retain(|(name, _)| *name != "X_DECL");
            let decl = format!("var<uniform> x: array<vec4<f32>, {}>;", self.window_vec4s);
            defines.push(("X_DECL", decl.into()));
            storage[1] = Access::UniformWindow;
        }
        OwnedSpec {
            name: format!("{:?}", self.key(w)),
            sources: [&tile.core_wgsl(fmt)[..], &[ACT_WGSL, TILED_MAIN]].concat(),
            flags,
            defines,
            entry: "main",
            storage: storage.into(),
        }
    }
}
mod gemv;
mod window;
pub use gemv::{q8_dot4, q8_dot4_fits, AS_DECODE_TOKENS};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod refusal_tests;
