//! Bidirectional attention for encoders (BERT-style embedding models): each
//! query row sees every unpadded key of its own sequence, before and after
//! it, in a batch of sequences padded to one length. q, k and v are column
//! ranges of one projection's rows (no KV cache: an encoder reads its whole
//! input in one step). Grouped queries (several q heads to one k/v head) and
//! a symmetric sliding window (EmbeddingGemma's local layers: a query sees
//! the keys less than `window` positions away on either side, as
//! transformers' bidirectional Gemma 3 masks them) are options of the same
//! kernel. See shaders/attention/attention_bidir.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey,
};
use crate::kernels::check_elems;

/// The shape of one call. Columns and strides in f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BidirArgs {
    pub seqs: usize,
    /// Padded length of every sequence; `lens` holds each one's real length.
    pub seq_len: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads: divides `heads`; q head h reads k/v head
    /// `h / (heads / kv_heads)` (grouped-query attention).
    pub kv_heads: usize,
    /// A multiple of 4, at most `MAX_HEAD_DIM`.
    pub head_dim: usize,
    /// Elements between consecutive tokens' rows of `qkv` (a multiple of 4).
    pub row_stride: usize,
    /// First column of q, k and v in a row (multiples of 4); q is
    /// `heads * head_dim` wide, k and v `kv_heads * head_dim`.
    pub q_col: usize,
    pub k_col: usize,
    pub v_col: usize,
    pub scale: f32,
    /// Some(w): query i sees only keys j with |i - j| < w (w >= 1); None:
    /// every key of its sequence.
    pub window: Option<usize>,
}

/// Largest head the kernel keeps in registers (EmbeddingGemma's 256).
pub const MAX_HEAD_DIM: usize = 256;

kernel_params! {
    pub(crate) struct Params {
        /// sequences in the batch
        seqs: u32,
        /// padded length of each
        seq_len: u32,
        heads: u32,
        /// HD4 * 4
        head_dim: u32,
        /// elements between consecutive tokens' rows of qkv
        row_stride: u32,
        /// first column of q in a row (multiple of 4)
        q_col: u32,
        /// of k (multiple of 4)
        k_col: u32,
        /// of v (multiple of 4)
        v_col: u32,
        /// first element of out
        out_offset: u32,
        /// multiplies q.k, usually 1 / sqrt(head_dim)
        scale: f32,
        /// divides heads
        kv_heads: u32,
        /// 0: no window.
        window: u32,
    }
}

const K: &str = "attention_bidir";
const WGSL: &str = include_str!("../../../../../shaders/attention/attention_bidir.wgsl");

impl BidirArgs {
    fn check(
        &self,
        qkv: &GpuBuffer,
        lens: &GpuBuffer,
        out: &GpuBuffer,
        out_offset: usize,
    ) -> Result<(), GpuError> {
        let a = self;
        if a.seqs == 0 || a.seq_len == 0 || a.heads == 0 {
            return Err(shape_err(
                K,
                format!(
                    "empty batch ({} x {} tokens, {} heads)",
                    a.seqs, a.seq_len, a.heads
                ),
            ));
        }
        if a.kv_heads == 0 || a.heads % a.kv_heads != 0 {
            return Err(shape_err(
                K,
                format!(
                    "{} query heads do not split into groups over {} key/value heads",
                    a.heads, a.kv_heads
                ),
            ));
        }
        if a.window == Some(0) {
            return Err(shape_err(
                K,
                "sliding window 0 (a query must see at least itself)",
            ));
        }
        if a.head_dim == 0 || a.head_dim % 4 != 0 || a.head_dim > MAX_HEAD_DIM {
            return Err(shape_err(
                K,
                format!(
                    "head_dim {} is not a multiple of 4 in 4..={MAX_HEAD_DIM}",
                    a.head_dim
                ),
            ));
        }
        let width = a.heads * a.head_dim;
        let kv_width = a.kv_heads * a.head_dim;
        if a.row_stride % 4 != 0 {
            return Err(shape_err(
                K,
                format!("row stride {} is not a multiple of 4", a.row_stride),
            ));
        }
        for (what, col, w) in [
            ("q", a.q_col, width),
            ("k", a.k_col, kv_width),
            ("v", a.v_col, kv_width),
        ] {
            if col % 4 != 0 || col + w > a.row_stride {
                return Err(shape_err(
                    K,
                    format!("{what} columns {col}..{} do not fit a row of {} (or start off a multiple of 4)", col + w, a.row_stride),
                ));
            }
        }
        if !a.scale.is_finite() {
            return Err(shape_err(K, format!("scale {} is not finite", a.scale)));
        }
        if out.id() == qkv.id() || out.id() == lens.id() {
            return Err(shape_err(K, "out may not live in qkv's or lens' buffer"));
        }
        let tokens = a.seqs * a.seq_len;
        check_elems(K, "qkv", qkv, tokens * a.row_stride)?;
        check_elems(K, "lens", lens, a.seqs)?;
        check_elems(K, "out", out, out_offset + tokens * width)
    }
}

/// Attention of `args` into `out` from `out_offset`: rows `[seqs * seq_len]
/// [heads][head_dim]`, padded rows zero. `lens` holds each sequence's
/// length as u32, each in `1..=seq_len` (the caller writes it; the shader
/// clamps to `seq_len` so that a bad length cannot read past the batch).
pub fn attention_bidir(
    rec: &mut Recorder,
    args: &BidirArgs,
    qkv: &GpuBuffer,
    lens: &GpuBuffer,
    out: &GpuBuffer,
    out_offset: usize,
) -> Result<(), GpuError> {
    args.check(qkv, lens, out, out_offset)?;
    let hd4 = (args.head_dim / 4) as u32;
    let key = VariantKey {
        family: K,
        fmt: "f32",
        args: [hd4, 0, 0, 0, 0, 0],
    };
    let make = || OwnedSpec {
        name: format!("{K}_hd{}", hd4 * 4),
        sources: vec![WGSL],
        flags: Vec::new(),
        defines: unrolled(hd4),
        entry: "main",
        storage: [Access::Read, Access::Read, Access::ReadWrite][..].into(),
    };
    let params = Params {
        seqs: args.seqs as u32,
        seq_len: args.seq_len as u32,
        heads: args.heads as u32,
        head_dim: args.head_dim as u32,
        row_stride: args.row_stride as u32,
        q_col: args.q_col as u32,
        k_col: args.k_col as u32,
        v_col: args.v_col as u32,
        out_offset: out_offset as u32,
        scale: args.scale,
        kv_heads: args.kv_heads as u32,
        // A window of seq_len or more sees every key, as none does; capped
        // so that the shader's i + window cannot overflow.
        window: args.window.map_or(0, |w| w.min(args.seq_len)) as u32,
    };
    let invocations = (args.seqs * args.seq_len * args.heads) as u32;
    rec.dispatch_variant(
        &key,
        make,
        &params,
        &[qkv, lens, out],
        workgroups_for(invocations, 64),
    );
    Ok(())
}

/// The shader's per-vec4 statements, written out `hd4` times (see
/// shaders/attention/attention_bidir.wgsl: llvmpipe's cap on loop trips in all).
fn unrolled(hd4: u32) -> Vec<(&'static str, std::borrow::Cow<'static, str>)> {
    let lines = |f: &dyn Fn(u32) -> String| (0..hd4).map(f).collect::<Vec<_>>().join("\n    ");
    vec![
        ("HD4", hd4.to_string().into()),
        (
            "LOAD_Q",
            lines(&|i| format!("q[{i}] = qkv[qb + {i}u] * p.scale;")).into(),
        ),
        (
            "DOT_K",
            lines(&|i| format!("dot4 += q[{i}] * qkv[kb + {i}u];")).into(),
        ),
        (
            "ADD_V",
            lines(&|i| format!("acc[{i}] = acc[{i}] * alpha + wgt * qkv[vb + {i}u];")).into(),
        ),
        (
            "STORE",
            lines(&|i| {
                let b = 4 * i;
                format!(
                    "out[ob + {b}u] = acc[{i}].x / l; out[ob + {}u] = acc[{i}].y / l; out[ob + {}u] = acc[{i}].z / l; out[ob + {}u] = acc[{i}].w / l;",
                    b + 1,
                    b + 2,
                    b + 3
                )
            })
            .into(),
        ),
    ]
}

/// The f64 reference: `out[t][h][d]` for every token, padded rows zero.
pub fn attention_bidir_reference(a: &BidirArgs, qkv: &[f32], lens: &[u32]) -> Vec<f64> {
    let (hd, width) = (a.head_dim, a.heads * a.head_dim);
    let group = a.heads / a.kv_heads;
    let mut out = vec![0.0f64; a.seqs * a.seq_len * width];
    for s in 0..a.seqs {
        let len = lens[s] as usize;
        for i in 0..len {
            let t = s * a.seq_len + i;
            // Keys within the window, by the definition |i - j| < w.
            let seen: Vec<usize> = (0..len)
                .filter(|&j| a.window.is_none_or(|w| i.abs_diff(j) < w))
                .collect();
            for h in 0..a.heads {
                let kvh = h / group;
                let q = &qkv[t * a.row_stride + a.q_col + h * hd..][..hd];
                let scores: Vec<f64> = seen
                    .iter()
                    .map(|&j| {
                        let k =
                            &qkv[(s * a.seq_len + j) * a.row_stride + a.k_col + kvh * hd..][..hd];
                        a.scale as f64
                            * q.iter()
                                .zip(k)
                                .map(|(&x, &y)| x as f64 * y as f64)
                                .sum::<f64>()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for (&j, w) in seen.iter().zip(&weights) {
                    let v = &qkv[(s * a.seq_len + j) * a.row_stride + a.v_col + kvh * hd..][..hd];
                    for d in 0..hd {
                        out[(t * a.heads + h) * hd + d] += w / total * v[d] as f64;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "bidir_tests.rs"]
mod tests;
