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
//! all of it (linear_gemv.wgsl; `linear_gemv.rs` picks its core and x
//! reader). Several rows (prefill): the register-blocked matmul with every
//! epilogue (linear_tiled.wgsl: a tile's rows are whole gate/up pairs), plus
//! a norm dispatch into scratch before it: a tile sees only part of a row,
//! so it cannot normalise it. Where weights are textures (llvmpipe) it reads
//! x through uniform windows, a dispatch per slice of tokens (`x_window`).
//! The prefill form takes 2 token tiles a workgroup for chunks of up to 8
//! rows, 4 up to 16 and 8 for longer ones (`prefill_token_tiles`): a prompt
//! of any length needs the same three pipelines, which loading compiles once
//! (a pipeline costs up to a second to compile in a software WebGPU), while a
//! short chunk does not pay for up to 4x the workgroups it needs (tiles past
//! its last token return at once, but each workgroup has a fixed cost).

use std::borrow::Cow;

use super::activation::{act_name, Activation};
use super::check_elems;
use super::matmul::{check_groups, Params, TileShape, VecShape, TILE_M};
use super::rmsnorm::rms_norm;
use super::rmsnorm_q8::Q8Rows;
use super::weights::QuantMatrix;
use super::x_window::{XRows, XSlice};
use crate::gpu::weight_store::WeightStore;
use crate::gpu::{error::shape_err, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey};

/// Token tiles per workgroup of the prefill form for `m` rows (see the
/// module comment).
pub(crate) fn prefill_token_tiles(m: usize) -> u32 {
    match m.div_ceil(TILE_M as usize) {
        0..=2 => 2,
        3..=4 => 4,
        _ => 8,
    }
}

const TILED_MAIN: &str = include_str!("../../../../shaders/linear_tiled.wgsl");
/// The gate activations, for the gating epilogue of both forms.
const ACT_WGSL: &str = include_str!("../../../../shaders/act_fns.wgsl");

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
    fn code(self) -> u32 {
        match self {
            Epilogue::Store => 0,
            Epilogue::Add => 1,
            Epilogue::Glu(_) => 2,
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
    /// CPU adapters). Decode only (`m == 1`), without `norm`, x from offset
    /// 0; F32/F16 weights and the other cores read x.
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
}

/// Scratch the prefill form needs: `m * w.cols` f32 for the normed x.
pub struct LinearScratch<'a> {
    pub normed: &'a GpuBuffer,
}

impl Linear<'_> {
    /// Output features: W's rows, or half of them when gating.
    fn out_width(&self) -> usize {
        match self.epilogue {
            Epilogue::Glu(_) => self.w.rows / 2,
            _ => self.w.rows,
        }
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
            if m != 1 || self.norm.is_some() || self.x_offset != 0 {
                return Err(shape_err(
                    K,
                    "8-bit x is for one token row from offset 0, without a norm",
                ));
            }
            q8.check(K, 1, w.cols)?;
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
    if op.m == 1 {
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
    record_tiled(rec, op, x, x_offset)
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

/// A define that keeps (`""`) or comments out (`"//"`) the lines it prefixes.
fn on(yes: bool) -> Cow<'static, str> {
    Cow::Borrowed(if yes { "" } else { "//" })
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
}

/// The register-blocked form over `op.w`, x from `x_offset` of `x` (the
/// op's, or its normed rows), with the op's epilogue.
fn record_tiled(
    rec: &mut Recorder,
    op: &Linear,
    x: &GpuBuffer,
    x_offset: usize,
) -> Result<(), GpuError> {
    let (w, m) = (op.w, op.m);
    let bias = op.bias;
    let glu = match op.epilogue {
        Epilogue::Glu(act) => Some(act),
        _ => None,
    };
    let add = op.epilogue == Epilogue::Add;
    let mut tt = prefill_token_tiles(m);
    let mut tile = TileShape::choose(&rec.ctx().adapter, w.format(), w.cols, x_offset);
    let window = x_window(rec, w, x, x_offset, m, &tile);
    if window.is_some() {
        tt = 1;
        let rows = w.parts.iter().map(|p| p.rows).max().unwrap_or(0);
        tile = tile.windowed(rows);
    }
    let window_vec4s = window.as_ref().map_or(0, |w| (w.window_bytes / 16) as u32);
    if glu.is_some() && tile.tn % 2 == 1 {
        // linear_tiled.wgsl pairs a tile's rows: each must hold whole pairs.
        return Err(shape_err(
            "linear",
            format!("a tile of {} rows cannot gate row pairs", tile.tn),
        ));
    }
    let rows_per_group = tile.rows(tt);
    let fmt = w.format();
    let has_bias = bias.is_some();
    let key = VariantKey {
        family: "linear_tiled",
        fmt: fmt.fmt,
        args: [
            tt,
            has_bias as u32,
            match glu {
                Some(act) => 2 + act as u32,
                None => add as u32,
            },
            tile.tn,
            tile.x4 as u32 | window_vec4s << 1,
            tile.vec as u32 | tile.form.code() << 1,
        ],
    };
    let make = || {
        let mut defines = fmt.defines();
        defines.extend(tile.defines(fmt, tt));
        defines.extend([
            ("BIAS_BINDING", if tile.vec { "5" } else { "4" }.into()),
            ("BIAS", on(has_bias)),
            ("ADD", on(add)),
            ("GLU", on(glu.is_some())),
            ("NO_GLU", on(glu.is_none())),
            ("ACT", act_name(glu.unwrap_or(Activation::Silu)).into()),
            ("OUT_SCALE", if glu.is_some() { "2" } else { "1" }.into()),
        ]);
        let mut storage = storage(tile.vec, has_bias as usize).to_vec();
        if window_vec4s > 0 {
            defines.retain(|(name, _)| *name != "X_DECL");
            defines.push((
                "X_DECL",
                format!("var<uniform> x: array<vec4<f32>, {window_vec4s}>;").into(),
            ));
            storage[1] = Access::UniformWindow;
        }
        let act: &[&'static str] = if glu.is_some() { &[ACT_WGSL] } else { &[] };
        OwnedSpec {
            name: format!("{key:?}"),
            sources: [&tile.core_wgsl(fmt)[..], act, &[TILED_MAIN]].concat(),
            defines,
            entry: "main",
            storage: storage.into(),
        }
    };
    // Without a window, one slice of every token row from x's own offset.
    let whole = [XSlice {
        first: 0,
        tokens: m,
        offset: 0,
        x_offset,
    }];
    let slices = window.as_ref().map_or(&whole[..], |w| &w.slices);
    for part in &w.parts {
        let row_groups = (part.rows as u32).div_ceil(rows_per_group);
        check_groups("linear", row_groups, || {
            format!("a part of {} rows", part.rows)
        })?;
        let part_out = op.out_offset + part.first_row / if glu.is_some() { 2 } else { 1 };
        for slice in slices {
            let token_groups = (slice.tokens as u32).div_ceil(tt * TILE_M);
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
                make,
                &p,
                &buffers[..n],
                [row_groups, token_groups, 1],
                window.as_ref().map(|_| slice.offset as u32),
            );
        }
    }
    Ok(())
}

/// x's rows as the windowed tiled core reads them.
struct XWindow {
    window_bytes: u64,
    slices: Vec<XSlice>,
}

/// Fewer token rows than this a window (where the prompt chunk has more)
/// would have each dispatch read the whole matrix for a handful of tokens:
/// the storage-x core, which takes the chunk in one dispatch, does better
/// (Qwen2.5's 4864-wide rows, 3 a window); two tiles (1536- and 2048-wide
/// rows) ran 1.2-1.4x faster through windows than storage x.
const MIN_WINDOW_TOKENS: usize = 2 * TILE_M as usize;

/// Whether the tiled core reads x through a uniform window (see
/// `x_window`): where weights live in textures (llvmpipe), for the vec4
/// tiled core, when every token row fits a window and a window holds
/// enough of them (`MIN_WINDOW_TOKENS`).
fn x_window(
    rec: &Recorder,
    w: &QuantMatrix,
    x: &GpuBuffer,
    x_offset: usize,
    m: usize,
    tile: &TileShape,
) -> Option<XWindow> {
    let ctx = rec.ctx();
    if ctx.weight_store != WeightStore::Textures || !tile.vec {
        return None;
    }
    let window_bytes = rec.uniform_window(x) / 16 * 16;
    let rows = XRows {
        buffer_bytes: x.size(),
        window_bytes,
        align: ctx.limits.min_uniform_buffer_offset_alignment as u64,
        x_offset,
        k: w.cols,
        m,
        tile_tokens: TILE_M as usize,
    };
    let slices = rows.slices()?;
    if slices[0].tokens < m.min(MIN_WINDOW_TOKENS) {
        return None;
    }
    Some(XWindow {
        window_bytes,
        slices,
    })
}

#[path = "linear_gemv.rs"]
mod gemv;
pub use gemv::{q8_dot4, q8_dot4_fits};

#[cfg(test)]
#[path = "linear_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "linear_refusal_tests.rs"]
mod refusal_tests;
