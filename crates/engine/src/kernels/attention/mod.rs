//! Causal grouped-query attention over the KV cache (see `kv.rs` for its
//! layout): one kernel for prefill chunks and decode steps, where only `rows`
//! differs. One workgroup of 64 invocations per (query row, query head); keys
//! are split across the invocations in tiles of up to 512, with an online
//! (flash-style) softmax and two barriers per tile. The design is described
//! in `shaders/attention/attention.wgsl`. On CPU adapters, many rows (prefill) run one
//! invocation per (row, KV head, up to 8 of its query heads) with no
//! barriers instead (`shaders/attention/attention_lanes.wgsl`): there every
//! workgroup's barriers cost more than the keys of a prompt-length row, and
//! each lane's load of K and V costs the same whether one head uses it or
//! eight.
//!
//! Masking, for the query row at absolute position `p = pos0 + row`:
//! - causal: keys at positions `0 ..= p` are visible (earlier chunks from the
//!   cache and this chunk's rows up to and including its own);
//! - sliding window `W` (Gemma 3's local layers): additionally, a key at `k` is
//!   masked when `p - k >= W`, so the visible keys are `max(0, p - W + 1) ..= p`,
//!   the last `W` positions including itself. This is exactly llama.cpp's
//!   `LLAMA_SWA_TYPE_STANDARD` (`is_masked_swa`: masked when `p1 - p0 >= n_swa`,
//!   p0 the key's position, p1 the query's), which Gemma 3 uses, and matches
//!   HF transformers' `kv_idx > q_idx - sliding_window`.
//!
//! Scores are `scale * q.k`, then, with a softcap `c`, `c * tanh(s / c)`.

pub mod bidir;
pub mod kv;

use crate::gpu::params::kernel_params;
use std::borrow::Cow;

use crate::gpu::tuning::SplitTarget;
use crate::gpu::{error::shape_err, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey};
use crate::kernels::attention::kv::KvDtype;
use crate::kernels::{check_elems, words};

/// The shape and options of one attention call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionArgs {
    /// Query tokens in this step: the prompt chunk length, or 1 for decode.
    pub rows: usize,
    /// Absolute position of the first query row; row `r` sees keys `0 ..= pos0 + r`.
    pub pos0: u32,
    pub q_heads: usize,
    /// `q_heads % kv_heads == 0`; query head `h` reads KV head `h / (q_heads / kv_heads)`.
    pub kv_heads: usize,
    /// A multiple of 4 (K and V are read as vec4s), at most 256 (SmolLM2 64,
    /// Qwen 128, Gemma 3 256, tiny test models 16).
    pub head_dim: usize,
    /// Positions in the cache's layer slice.
    pub ctx_len: usize,
    /// Usually `1 / sqrt(head_dim)`; Gemma uses `query_pre_attn_scalar^-0.5`.
    pub scale: f32,
    /// Sliding window: the last `window` positions, the row's own included.
    pub window: Option<u32>,
    /// Logit softcap (Gemma 2); `None` for the models we run.
    pub softcap: Option<f32>,
    /// How the cache stores K and V.
    pub kv_dtype: KvDtype,
    /// Each row attended as a decode step at its position attends (the
    /// split form, each row cut by its own plan): a verifying pass's rows
    /// then give what decode steps give, bit for bit. Otherwise several
    /// rows take the form fastest for many (prefill).
    pub as_decode: bool,
}

impl AttentionArgs {
    /// What the step reads and writes: q's rows, the keys and values the
    /// rows see (from the first row's window start to the last row's
    /// position), the output rows (a split form's partials, scratch between
    /// its own two passes, left out).
    pub fn bytes_moved(&self) -> u64 {
        let last = self.pos0 as usize + self.rows;
        let first = self
            .window
            .map_or(0, |w| (self.pos0 as usize + 1).saturating_sub(w as usize));
        let kv_row = (self.kv_heads * self.head_dim) as u64 * self.kv_dtype.bytes_per_elem();
        let q_rows = words(2 * self.rows * self.q_heads * self.head_dim);
        q_rows + 2 * (last - first) as u64 * kv_row
    }
}

kernel_params! {
    pub(crate) struct Params {
        /// query rows (dispatch y)
        rows: u32,
        /// absolute position of row 0
        pos0: u32,
        /// query heads (dispatch x)
        q_heads: u32,
        kv_heads: u32,
        /// multiple of 4, <= 4 * WG
        head_dim: u32,
        /// q_heads / kv_heads: head h reads kv head h / group
        group: u32,
        /// sliding window in positions; 0 = none
        window: u32,
        /// 1: s = softcap * tanh(s / softcap)
        use_softcap: u32,
        /// multiplies q.k (before the softcap)
        scale: f32,
        softcap: f32,
        /// first element of q
        q_offset: u32,
        /// first element of this layer's slice of k_cache / v_cache; multiple of 4
        kv_offset: u32,
        /// first element of out
        out_offset: u32,
        /// split form: a row's splits are about this many (`SplitPlan`)
        wanted: u32,
        /// split form: the fewest keys of a split, but for a row with fewer
        min_span: u32,
        /// split form: the most splits of any row (the partials' stride)
        splits: u32,
    }
}

/// Invocations per workgroup in the shader (`WG`).
const WG: usize = 64;
/// Largest head_dim: one vec4 of the output per invocation.
pub const MAX_HEAD_DIM: usize = 4 * WG;

const KERNEL: &str = "attention";
const COMMON_WGSL: &str = include_str!("../../../../../shaders/attention/attention_common.wgsl");
/// q, k_cache, v_cache, out: every form.
const STORAGE: &[Access] = &[Access::Read, Access::Read, Access::Read, Access::ReadWrite];
/// The split form's two kernels add the per-split partials.
const SPLIT_STORAGE: &[Access] = &[
    Access::Read,
    Access::Read,
    Access::Read,
    Access::ReadWrite,
    Access::ReadWrite,
];

type Defines = Vec<(&'static str, Cow<'static, str>)>;
mod lanes;
use lanes::{lanes_defines, lanes_heads, LANES_MAX_KEYS, LANES_WG};

/// How the kernels read the cache's words (attention_common.wgsl).
fn kv_defines(dtype: KvDtype) -> Defines {
    let (word, unpack) = match dtype {
        KvDtype::F32 => ("vec4<f32>", ""),
        KvDtype::F16 => ("vec2<u32>", "unpack_f16x4"),
    };
    vec![("KV_WORD", word.into()), ("KV_UNPACK", unpack.into())]
}

/// Records one of the attention kernels (`family` is also its file's
/// name), in the variant for the cache's element type and `extra` defines
/// keyed by `arg`.
#[allow(clippy::too_many_arguments)]
fn dispatch_kernel(
    rec: &mut Recorder,
    family: &'static str,
    source: &'static str,
    dtype: KvDtype,
    arg: u32,
    extra: impl FnOnce() -> Defines,
    params: &Params,
    buffers: &[&GpuBuffer],
    workgroups: [u32; 3],
) {
    let key = VariantKey {
        family,
        fmt: dtype.name(),
        args: [arg, 0, 0, 0, 0, 0],
    };
    let storage = match buffers.len() {
        4 => STORAGE,
        _ => SPLIT_STORAGE,
    };
    let make = || {
        let mut defines = kv_defines(dtype);
        defines.extend(extra());
        OwnedSpec {
            name: format!("{family}_{}_{arg}", dtype.name()),
            sources: vec![COMMON_WGSL, source],
            flags: Vec::new(),
            defines,
            entry: "main",
            storage: storage.into(),
        }
    };
    rec.dispatch_variant(&key, make, params, buffers, workgroups);
}

/// Which attention kernel runs; `attention` picks by adapter and rows, tests
/// force each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttentionForm {
    /// A workgroup per (head, row), keys split across its invocations.
    Workgroups,
    /// An invocation per (row, KV head, up to 8 of its query heads), keys
    /// in turn.
    Lanes,
    /// Workgroups per (KV head, span of keys, row), then a merge
    /// (`attention_split.wgsl`), cut as `target` says.
    Split { target: SplitTarget },
}

/// Most keys one split scores (`SPAN` in attention_split.wgsl: its scores
/// sit in workgroup memory, 4 heads x 256 keys x 4 bytes).
pub const SPLIT_SPAN: usize = 256;
/// Most query heads one split workgroup serves (`HG`).
const SPLIT_HEADS: usize = 4;
/// Most splits of a row; rows that see more than `SPLIT_SPAN * MAX_SPLITS`
/// keys take the workgroup form. Bounds the scratch a decode step needs.
pub const MAX_SPLITS: usize = 256;
/// The split form's cuts on CPU adapters and on GPUs (`Tuning::attention_split`).
#[cfg(test)]
pub(crate) fn split_targets() -> [SplitTarget; 2] {
    use crate::gpu::{AdapterClass, Tuning};
    [AdapterClass::OtherCpu, AdapterClass::Gpu].map(|c| Tuning::for_class(c, false).attention_split)
}

/// How the split form cuts a row: `splits` spans of `span` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SplitPlan {
    pub span: usize,
    pub splits: usize,
}

/// Splits a row aims for: enough workgroups (`target.workgroups`) over the
/// call's KV heads and their query heads' chunks.
fn wanted_splits(a: &AttentionArgs, target: SplitTarget) -> usize {
    let per_split = a.kv_heads * (a.q_heads / a.kv_heads).div_ceil(SPLIT_HEADS);
    target.workgroups.div_ceil(per_split).max(1)
}

/// The split form's cut of row `row` of `a` (each row cut by its own keys,
/// as a decode step at its position is; attention_split.wgsl computes the
/// same), or `None` when it sees too many keys.
pub(crate) fn split_plan_of_row(
    a: &AttentionArgs,
    target: SplitTarget,
    row: usize,
) -> Option<SplitPlan> {
    // The row's own key and those before it, or a full window.
    let last = a.pos0 as usize + row + 1;
    let keys = a.window.map_or(last, |w| last.min(w as usize));
    if keys > SPLIT_SPAN * MAX_SPLITS {
        return None;
    }
    let span = keys
        .div_ceil(wanted_splits(a, target))
        .clamp(target.min_span, SPLIT_SPAN)
        .min(keys.max(1));
    Some(SplitPlan {
        span,
        splits: keys.div_ceil(span).max(1),
    })
}

/// The split form's cut of `a`'s last row (which sees the most keys), or
/// `None` when it sees too many.
pub(crate) fn split_plan(a: &AttentionArgs, target: SplitTarget) -> Option<SplitPlan> {
    split_plan_of_row(a, target, a.rows.max(1) - 1)
}

/// The most splits of any row of `a` (`None`: a row sees too many keys).
fn most_splits(a: &AttentionArgs, target: SplitTarget) -> Option<usize> {
    (0..a.rows.max(1))
        .map(|row| split_plan_of_row(a, target, row).map(|p| p.splits))
        .try_fold(1, |most, splits| splits.map(|s| most.max(s)))
}

/// f32 elements of the split form's scratch for `rows` rows: partial
/// outputs and (max, sum) pairs of every split. The pipeline allocates it
/// for the rows its steps attend as decode (one, or a verifying pass's, as
/// many as `SPLIT_SCRATCH_BYTES` holds: the form runs its rows in slices
/// that fit the scratch it is given).
pub fn split_scratch_elems(rows: usize, q_heads: usize, head_dim: usize) -> usize {
    rows * q_heads * MAX_SPLITS * (head_dim + 2)
}

/// The most bytes the pipeline gives the split form's scratch beyond one
/// row's: rows past what it holds run in further slices.
pub const SPLIT_SCRATCH_BYTES: usize = 32 << 20;

/// Rows of split scratch a pipeline allocates for steps attending up to
/// `rows` rows as decode: all of them where `SPLIT_SCRATCH_BYTES` holds
/// them, else as many as it does, at least one.
pub fn split_scratch_rows(rows: usize, q_heads: usize, head_dim: usize) -> usize {
    let row_bytes = 4 * split_scratch_elems(1, q_heads, head_dim);
    rows.min(SPLIT_SCRATCH_BYTES / row_bytes.max(1)).max(1)
}

fn check_args(a: &AttentionArgs) -> Result<(), GpuError> {
    let err = |m: String| Err(shape_err(KERNEL, m));
    if a.q_heads == 0 || a.kv_heads == 0 || a.q_heads % a.kv_heads != 0 {
        return err(format!(
            "q_heads {} must be a positive multiple of kv_heads {}",
            a.q_heads, a.kv_heads
        ));
    }
    // K and V are read as vec4s: a head's row is whole vec4s.
    if a.head_dim == 0 || a.head_dim % 4 != 0 || a.head_dim > MAX_HEAD_DIM {
        return err(format!(
            "head_dim {} must be a multiple of 4 in 4..={MAX_HEAD_DIM}",
            a.head_dim
        ));
    }
    if a.pos0 as usize + a.rows > a.ctx_len {
        return err(format!(
            "query positions {}..{} exceed the context length {}",
            a.pos0,
            a.pos0 as usize + a.rows,
            a.ctx_len
        ));
    }
    if a.rows > 65535 || a.q_heads > 65535 {
        return err(format!(
            "rows {} and q_heads {} must be <= 65535 (dispatch limit)",
            a.rows, a.q_heads
        ));
    }
    if a.window == Some(0) {
        return err("a sliding window of 0 positions hides every key".into());
    }
    if !a.scale.is_finite() {
        return err(format!("scale {} is not finite", a.scale));
    }
    if let Some(c) = a.softcap {
        if !(c.is_finite() && c > 0.0) {
            return err(format!("softcap {c} must be finite and > 0"));
        }
    }
    Ok(())
}

/// Records attention for `args.rows` query rows: `out[row][h] =
/// softmax_k(scale * q[row][h] . K[k][h / group]) . V[k][h / group]` over the
/// visible keys `k` of the layer slice of `k_cache`/`v_cache` at element
/// `layer_offset`. `q` and `out` are `[rows][q_heads][head_dim]` at their
/// element offsets; the rows' own keys must already be in the cache
/// (`kv::kv_write` earlier in the same step). `layer_offset` must be a
/// multiple of 4, as every `KvLayout::layer_offset` is. `split_scratch`
/// holds the split form's partials, which decode steps (one row, or rows
/// `as_decode`) take: it must have `split_scratch_elems(rows, ..)`
/// elements (a shape error if not).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    rec: &mut Recorder,
    q: &GpuBuffer,
    q_offset: usize,
    k_cache: &GpuBuffer,
    v_cache: &GpuBuffer,
    layer_offset: usize,
    out: &GpuBuffer,
    out_offset: usize,
    split_scratch: &GpuBuffer,
    args: &AttentionArgs,
) -> Result<(), GpuError> {
    rec.moved(args.bytes_moved());
    let tuning = rec.ctx().tuning;
    let longest_row = args.pos0 as usize + args.rows;
    let target = tuning.attention_split;
    let decode = args.rows == 1 || args.as_decode;
    let form = if decode && split_plan(args, target).is_some() {
        AttentionForm::Split { target }
    } else if tuning.attention_lanes && args.rows > 1 && longest_row <= LANES_MAX_KEYS {
        AttentionForm::Lanes
    } else {
        AttentionForm::Workgroups
    };
    attention_form(
        rec,
        form,
        q,
        q_offset,
        k_cache,
        v_cache,
        layer_offset,
        out,
        out_offset,
        split_scratch,
        args,
    )
}

/// `attention` in the given form.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_form(
    rec: &mut Recorder,
    form: AttentionForm,
    q: &GpuBuffer,
    q_offset: usize,
    k_cache: &GpuBuffer,
    v_cache: &GpuBuffer,
    layer_offset: usize,
    out: &GpuBuffer,
    out_offset: usize,
    split_scratch: &GpuBuffer,
    args: &AttentionArgs,
) -> Result<(), GpuError> {
    check_args(args)?;
    let a = args;
    if layer_offset % 4 != 0 {
        return Err(shape_err(
            KERNEL,
            format!("layer_offset {layer_offset} must be a multiple of 4 (K/V are read as vec4)"),
        ));
    }
    let qo_elems = a.rows * a.q_heads * a.head_dim;
    let layer_elems = a.ctx_len * a.kv_heads * a.head_dim;
    check_elems(KERNEL, "q", q, q_offset + qo_elems)?;
    let kv_words = a.kv_dtype.words(layer_offset + layer_elems);
    check_elems(KERNEL, "k_cache", k_cache, kv_words)?;
    check_elems(KERNEL, "v_cache", v_cache, kv_words)?;
    check_elems(KERNEL, "out", out, out_offset + qo_elems)?;
    if a.rows == 0 {
        return Ok(());
    }
    let mut params = Params {
        rows: a.rows as u32,
        pos0: a.pos0,
        q_heads: a.q_heads as u32,
        kv_heads: a.kv_heads as u32,
        head_dim: a.head_dim as u32,
        group: (a.q_heads / a.kv_heads) as u32,
        window: a.window.unwrap_or(0),
        use_softcap: a.softcap.is_some() as u32,
        scale: a.scale,
        softcap: a.softcap.unwrap_or(1.0),
        q_offset: q_offset as u32,
        kv_offset: layer_offset as u32,
        out_offset: out_offset as u32,
        wanted: 0,
        min_span: 0,
        splits: 0,
    };
    let buffers = [q, k_cache, v_cache, out];
    let dtype = a.kv_dtype;
    match form {
        AttentionForm::Workgroups => dispatch_kernel(
            rec,
            "attention",
            include_str!("../../../../../shaders/attention/attention.wgsl"),
            dtype,
            0,
            Vec::new,
            &params,
            &buffers,
            [a.q_heads as u32, a.rows as u32, 1],
        ),
        AttentionForm::Lanes => {
            let d4 = a.head_dim / 4;
            let hl = lanes_heads(a.q_heads / a.kv_heads, d4);
            let lanes = (a.rows * a.q_heads / hl) as u32;
            if lanes.div_ceil(LANES_WG) > 65535 {
                return Err(shape_err(
                    KERNEL,
                    format!("{} rows x {} heads exceed one dispatch", a.rows, a.q_heads),
                ));
            }
            let (d4, hl) = (d4 as u32, hl as u32);
            dispatch_kernel(
                rec,
                "attention_lanes",
                include_str!("../../../../../shaders/attention/attention_lanes.wgsl"),
                dtype,
                d4 | hl << 16,
                || lanes_defines(d4, hl),
                &params,
                &buffers,
                [lanes.div_ceil(LANES_WG), 1, 1],
            );
        }
        AttentionForm::Split { target } => {
            let Some(splits) = most_splits(a, target) else {
                return Err(shape_err(
                    KERNEL,
                    format!(
                        "rows up to position {} see more than {} keys, the split form's most",
                        a.pos0 as usize + a.rows,
                        SPLIT_SPAN * MAX_SPLITS
                    ),
                ));
            };
            // The partials of one row; the rows run in slices of as many
            // as the scratch holds (each row cut by its own plan, so a
            // slice gives the bits the whole would).
            let per_row = a.q_heads * splits * (a.head_dim + 2);
            check_elems(KERNEL, "split_scratch", split_scratch, per_row)?;
            let fit = (split_scratch.size() / 4 / per_row as u64).min(a.rows as u64) as usize;
            params.wanted = wanted_splits(a, target) as u32;
            params.min_span = target.min_span as u32;
            params.splits = splits as u32;
            let buffers = [q, k_cache, v_cache, out, split_scratch];
            let chunks = (a.q_heads / a.kv_heads).div_ceil(SPLIT_HEADS);
            let x = (a.kv_heads * chunks) as u32;
            let row_elems = a.q_heads * a.head_dim;
            for first in (0..a.rows).step_by(fit) {
                let rows = fit.min(a.rows - first);
                let slice = Params {
                    rows: rows as u32,
                    pos0: a.pos0 + first as u32,
                    q_offset: (q_offset + first * row_elems) as u32,
                    out_offset: (out_offset + first * row_elems) as u32,
                    ..params
                };
                dispatch_kernel(
                    rec,
                    "attention_split",
                    include_str!("../../../../../shaders/attention/attention_split.wgsl"),
                    dtype,
                    0,
                    Vec::new,
                    &slice,
                    &buffers,
                    [x, splits as u32, rows as u32],
                );
                if splits > 1 {
                    let lanes = (rows * row_elems / 4) as u32;
                    dispatch_kernel(
                        rec,
                        "attention_merge",
                        include_str!("../../../../../shaders/attention/attention_merge.wgsl"),
                        dtype,
                        0,
                        Vec::new,
                        &slice,
                        &buffers,
                        [lanes.div_ceil(64), 1, 1],
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
