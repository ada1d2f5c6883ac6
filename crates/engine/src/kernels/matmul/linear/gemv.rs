//! The fused linear layer's matrix-vector form (decode: one token row; a
//! verifying pass: several, each summed as decode sums it): which core and
//! which x reader a projection runs on, and its dispatches. One dispatch
//! per matrix part (and slice of token rows) does the whole layer
//! (linear_gemv.wgsl): norm prologue, epilogue, bias.

use super::{Epilogue, Forced, Linear, ACT_WGSL};
use crate::format::quant::GgmlType;
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuContext, GpuError, GpuFeatures,
    OwnedSpec, Recorder, VariantKey, WeightStore,
};
use crate::kernels::elementwise::activation::{act_name, Activation};
use crate::kernels::matmul::tiled::{
    quant_vec_wgsl, vec_core_defines, vec_core_fits, vec_core_flags, Params, VecShape, COMMON_WGSL,
    GEMV_WGSL, MATVEC_STEP_F32, MATVEC_WGSL, MATVEC_X_F32, XQ_STORAGE, X_STORAGE,
};
use crate::kernels::weights::{GpuFormat, QUANT_WGSL};

const GEMV_MAIN: &str = include_str!("../../../../../../shaders/matmul/linear_gemv.wgsl");
const X_UNIT: &str = include_str!("../../../../../../shaders/matmul/linear_x_unit.wgsl");
const X_VEC: &str = include_str!("../../../../../../shaders/matmul/linear_x_vec.wgsl");
const X_Q8: &str = include_str!("../../../../../../shaders/matmul/linear_x_q8.wgsl");
const X_Q8_DOT4: &str = include_str!("../../../../../../shaders/matmul/linear_x_q8_dot4.wgsl");

/// The integer step functions of linear_x_q8_dot4.wgsl for `fmt`'s step length.
fn quant_dot4_wgsl(fmt: GpuFormat) -> &'static str {
    match fmt.vec_step() {
        32 => include_str!("../../../../../../shaders/matmul/quant_dot4_32.wgsl"),
        _ => include_str!("../../../../../../shaders/matmul/quant_dot4_64.wgsl"),
    }
}

/// Which matrix-vector core a decode projection runs on, with its output
/// rows per workgroup.
#[derive(Clone, Copy, Debug)]
enum GemvCore {
    /// Units of 16 weights (matmul_gemv.wgsl): any row length and x offset.
    Unit { rows: u32 },
    /// Whole-vec4 steps (matvec.wgsl): see `vec_core_fits`.
    Vec(VecShape),
}

/// Whether the decode GEMV can dot 8-bit x with `dtype`'s quants in integer
/// dot products (`linear_x_q8_dot4.wgsl`): every quantized GPU format, on a
/// device whose WGSL has `dot4I8Packed`.
pub fn q8_dot4_fits(features: &GpuFeatures, dtype: GgmlType) -> bool {
    features.packed_dot4 && GpuFormat::of(dtype).is_some() && dtype.block_elements() > 1
}

/// Whether it does, given 8-bit x, on this adapter: on CPU adapters for the
/// nibble formats Q4_0, Q4_1 and Q5_0 only, whose bytes then go straight
/// into the dot products instead of each becoming an f32 first: their GEMVs
/// ran 1.1-1.2x (Q5_0 1.05-1.1x) faster on lavapipe (`wick bench-kernels`,
/// the `x q8` / `x q8 dot4` rows), while Q8_0's ran no faster and the
/// K-quants' (a sub-block's scale per 16 or 32 products) no faster or
/// slower. GPUs take it for every format, as llama.cpp's quantized GEMVs
/// do (not measured here).
pub fn q8_dot4(ctx: &GpuContext, dtype: GgmlType) -> bool {
    let nibbles = matches!(dtype, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0);
    q8_dot4_fits(&ctx.features, dtype) && (nibbles || ctx.tuning.dot4_every_format)
}

/// Most token rows one matrix-vector pipeline takes (a verifying pass of
/// the default 7 drafts in one dispatch); more run a slice a dispatch.
pub const AS_DECODE_TOKENS: usize = 8;

/// x (and the norm's weights) as uniform arrays: how many vec4s each.
#[derive(Clone, Copy, Debug)]
struct UniformX {
    /// x's array: up to the row's end (f32 x), or the row's 8-bit quants.
    x_vec4s: u32,
    /// The norm weights' array (0 without a norm).
    norm_vec4s: u32,
}

/// Whether the vec4 core reads x (and the norm's weights) from uniform
/// bindings: where weights live in textures (llvmpipe, `WeightStore`), for
/// the same reason (a uniform load takes no per-lane loop there; docs/kernels.md,
/// "What bounds the GEMV on lavapipe"), when the row from the buffer's
/// start fits one uniform binding: one token row (decode).
fn x_uniform(ctx: &GpuContext, op: &Linear, q8: bool) -> Option<UniformX> {
    // Several rows read x from storage: a uniform array's length is the
    // shader's, and one pipeline serves passes of every length.
    if ctx.weight_store != WeightStore::Textures || op.m > 1 {
        return None;
    }
    let k = op.w.cols as u64;
    let x_bytes = if q8 { k } else { 4 * (op.x_offset as u64 + k) };
    let norm_bytes = op.norm.map_or(0, |_| 4 * k.next_multiple_of(4));
    let max = ctx.limits.max_uniform_buffer_binding_size;
    if x_bytes.max(norm_bytes) > max || x_bytes % 16 != 0 {
        return None;
    }
    Some(UniformX {
        x_vec4s: (x_bytes / 16) as u32,
        norm_vec4s: (norm_bytes / 16) as u32,
    })
}

/// Bindings from 1: w, x, out, for the vec4 core the part again (as
/// vec4s), with 8-bit x its scales, then the norm's weights and the bias.
fn bindings(vec_core: bool, uniform: bool, q8: bool, norm: bool, bias: bool) -> Vec<Access> {
    let x = if uniform {
        Access::Uniform
    } else {
        Access::Read
    };
    let mut list = vec![Access::Weights, x, Access::ReadWrite];
    if vec_core {
        list.push(Access::Weights);
    }
    if q8 {
        list.push(Access::Read);
    }
    if norm {
        list.push(x);
    }
    if bias {
        list.push(Access::Read);
    }
    list
}

/// Records `op` (one token row) in the matrix-vector form, on the core and
/// x reader the adapter takes, or those `forced` names.
pub(super) fn record(rec: &mut Recorder, op: &Linear, forced: Forced) -> Result<(), GpuError> {
    let core = if vec_core_fits(op.w, op.x_offset) {
        GemvCore::Vec(match forced.vec_shape {
            Some(shape) => {
                shape.check().map_err(|e| shape_err("linear", e))?;
                shape
            }
            None => VecShape::choose(&rec.ctx().tuning, op.w.format(), op.w.cols, op.w.rows),
        })
    } else {
        GemvCore::Unit {
            rows: rec.ctx().tuning.gemv_rows_for(1),
        }
    };
    let fits = q8_dot4_fits(&rec.ctx().features, op.w.dtype);
    let dot4 = match forced.dot4 {
        Some(true) if op.x_q8.is_some() && !fits => {
            return Err(shape_err(
                "linear",
                format!(
                    "integer dot products for 8-bit x: {} on this device (dot4I8Packed: {})",
                    op.w.dtype,
                    rec.ctx().features.packed_dot4
                ),
            ))
        }
        Some(on) => on,
        None => q8_dot4(rec.ctx(), op.w.dtype),
    };
    record_gemv(rec, op, core, dot4, forced.tokens);
    Ok(())
}

/// Token rows the pipeline of `core` takes for an op of `m` rows: one for
/// one (decode), else the adapter's `Tuning::as_decode_tokens` (or what
/// `forced` names), fewer where the workgroup memory holds fewer rows'
/// sums (each row's lane sums, and with a norm the lanes' sums of squares,
/// per token row): one pipeline for every pass, which runs its rows a
/// slice of that many a dispatch (`Params::m` the slice's rows).
fn tokens_per_dispatch(
    ctx: &GpuContext,
    core: GemvCore,
    norm: bool,
    m: usize,
    forced: Option<usize>,
) -> usize {
    if m == 1 {
        return 1;
    }
    let (sums, workgroup) = match core {
        GemvCore::Unit { rows } => (rows * 64, 64),
        GemvCore::Vec(v) => (v.rows() * v.lanes, v.workgroup),
    };
    let per_token = 4 * (sums + norm as u32 * workgroup) as usize;
    let room = ctx.limits.max_compute_workgroup_storage_size as usize / per_token.max(1);
    let wanted = forced.unwrap_or(ctx.tuning.as_decode_tokens as usize);
    wanted.min(room).clamp(1, AS_DECODE_TOKENS)
}

/// The matrix-vector form: `op.m` token rows on `core`, each summed as a
/// one-row op sums it (a slice of rows a dispatch, `tokens_per_dispatch`).
/// `dot4`: 8-bit x (if given) in integer dot products.
fn record_gemv(
    rec: &mut Recorder,
    op: &Linear,
    core: GemvCore,
    dot4: bool,
    forced_tokens: Option<usize>,
) {
    let w = op.w;
    let (norm, bias) = (op.norm.is_some(), op.bias.is_some());
    let glu = matches!(op.epilogue, Epilogue::Glu(_));
    let act = match op.epilogue {
        Epilogue::Glu(a) => a,
        _ => Activation::Silu,
    };
    let fmt = w.format();
    // Store and add share a pipeline (`Params::accumulate`); glu is its
    // own here, a constant of the decode kernel (the prefill form, whose
    // kernel is the costly one to compile, shares one: `Params::glu`).
    let code = if glu { 2 } else { 0 };
    // The vec4 core binds the part again (as vec4s) after out.
    let (rows_per_group, vec_shape) = match core {
        GemvCore::Unit { rows } => (rows, None),
        GemvCore::Vec(v) => (v.rows(), Some(v)),
    };
    // Only the vec4 core reads 8-bit x, and only for quantized weights, as
    // llama.cpp rounds activations only for those (F16 rows dot f16 x
    // there, F32 rows f32 x). It binds their scales first.
    let q8 = op
        .x_q8
        .filter(|_| vec_shape.is_some() && w.dtype.block_elements() > 1);
    let dot4 = dot4 && q8.is_some();
    let first_extra = 4 + vec_shape.is_some() as usize + q8.is_some() as usize;
    let uniform = vec_shape.and_then(|_| x_uniform(rec.ctx(), op, q8.is_some()));
    let tokens = tokens_per_dispatch(rec.ctx(), core, norm, op.m, forced_tokens);
    // Lanes 0 is the unit core; rows, lanes, workgroup size, the lane
    // order and the token rows fix the rest.
    let (lanes, chunked, reduce) = vec_shape.map_or((0, 0, 0), |v| {
        (
            v.lanes | v.workgroup << 16,
            v.chunked as u32,
            v.reduce as u32,
        )
    });
    let key = VariantKey {
        family: "linear_gemv",
        fmt: fmt.fmt,
        args: [
            rows_per_group,
            norm as u32
                | (bias as u32) << 1
                | chunked << 2
                | (q8.is_some() as u32) << 3
                | (dot4 as u32) << 4,
            code,
            act as u32 | uniform.map_or(0, |u| u.x_vec4s << 8),
            lanes,
            reduce | uniform.map_or(0, |u| u.norm_vec4s << 8) | (tokens as u32) << 24,
        ],
    };
    let make = || {
        let (mut defines, mut flags, sources) = match core {
            GemvCore::Unit { rows } => {
                let mut d = fmt.defines();
                d.extend([
                    ("ROWS", rows.to_string().into()),
                    ("TOKENS", tokens.to_string().into()),
                ]);
                (
                    d,
                    vec![("SG", false)],
                    vec![
                        QUANT_WGSL,
                        COMMON_WGSL,
                        GEMV_WGSL,
                        X_UNIT,
                        ACT_WGSL,
                        GEMV_MAIN,
                    ],
                )
            }
            GemvCore::Vec(v) => {
                let mut d = vec_core_defines(fmt, v, tokens as u32);
                let x_reader: &[&'static str] = match (q8, dot4) {
                    (Some(_), true) => &[X_Q8_DOT4, quant_dot4_wgsl(fmt)],
                    (Some(_), false) => &[MATVEC_STEP_F32, X_Q8],
                    (None, _) => &[MATVEC_X_F32, X_VEC],
                };
                // The x reader's declaration: 8-bit x and its scales, or f32
                // x; in a storage buffer or a uniform of the row's size.
                if q8.is_some() {
                    let xq = match uniform {
                        Some(u) => format!("var<uniform> xq: array<vec4<u32>, {}>;", u.x_vec4s),
                        None => XQ_STORAGE.to_string(),
                    };
                    d.extend([
                        ("XQ_DECL", xq.into()),
                        ("XD_BINDING", (first_extra - 1).to_string().into()),
                    ]);
                } else {
                    let x = match uniform {
                        Some(u) => format!("var<uniform> x: array<vec4<f32>, {}>;", u.x_vec4s),
                        None => X_STORAGE.to_string(),
                    };
                    d.push(("X_DECL", x.into()));
                }
                let mut sources = vec![QUANT_WGSL, MATVEC_WGSL, quant_vec_wgsl(fmt)];
                sources.extend(x_reader);
                sources.extend([ACT_WGSL, GEMV_MAIN]);
                (d, vec_core_flags(fmt, v), sources)
            }
        };
        flags.extend([("NORM", norm), ("BIAS", bias)]);
        defines.extend([
            ("NORM_BINDING", first_extra.to_string().into()),
            (
                "BIAS_BINDING",
                (first_extra + norm as usize).to_string().into(),
            ),
            ("EPILOGUE", code.to_string().into()),
            ("ACT", act_name(act).into()),
            (
                "NORM_DECL",
                match uniform {
                    Some(u) => {
                        format!("var<uniform> norm_w: array<vec4<f32>, {}>;", u.norm_vec4s).into()
                    }
                    None => "var<storage, read> norm_w: array<vec4<f32>>;".into(),
                },
            ),
        ]);
        OwnedSpec {
            name: format!("{key:?}"),
            sources,
            flags,
            defines,
            entry: "main",
            storage: bindings(
                vec_shape.is_some(),
                uniform.is_some(),
                q8.is_some(),
                norm,
                bias,
            )
            .into(),
        }
    };
    for (part, first) in w
        .parts
        .iter()
        .flat_map(|part| (0..op.m).step_by(tokens).map(move |first| (part, first)))
    {
        let out_row0 = if glu {
            part.first_row / 2
        } else {
            part.first_row
        };
        let out_offset = op.out_offset + first * op.out_stride + out_row0;
        let mut p = Params::new(
            w,
            part,
            tokens.min(op.m - first),
            part.rows,
            op.x_offset + first * w.cols,
            out_offset,
            op.out_stride,
        );
        p.accumulate = op.epilogue.accumulate();
        let x = q8.map_or(op.x, |q| q.quants);
        let mut buffers: [&GpuBuffer; 6] = [&part.buffer, x, op.out, op.out, op.out, op.out];
        let mut n = 3;
        if vec_shape.is_some() {
            buffers[n] = &part.buffer;
            n += 1;
        }
        if let Some(q) = q8 {
            buffers[n] = q.scales;
            n += 1;
        }
        if let Some((norm_w, eps)) = op.norm {
            p.eps = eps;
            buffers[n] = norm_w;
            n += 1;
        }
        if let Some((bias_buf, offset)) = op.bias {
            p.bias_offset = (offset + part.first_row) as u32;
            buffers[n] = bias_buf;
            n += 1;
        }
        let groups = workgroups_for(part.rows as u32, rows_per_group);
        rec.dispatch_variant(&key, make, &p, &buffers[..n], groups);
    }
}
