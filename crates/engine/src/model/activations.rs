//! The scratch activations of a forward step: every dense buffer a step
//! writes between its kernels, allocated once by the pipeline for its
//! largest step and counted by the memory preflight from the same shapes.

use crate::gpu::{BufferRef, GpuContext, GpuError};
use crate::kernels::attention::{split_scratch_elems, split_scratch_rows};
use crate::kernels::norm::rms_q8::{Q8Rows, Q8_BLOCK};

use super::config::ModelConfig;
use super::moe::MoeActivations;

/// Scratch activations for up to `max_rows` tokens per step, allocated once by
/// the pipeline and reused by every step.
pub struct Activations {
    pub max_rows: usize,
    pub max_logit_rows: usize,
    pub ids: BufferRef,
    pub x: BufferRef,
    /// Normed rows (prefill form) and projections stored before a post-norm.
    pub h: BufferRef,
    /// q, k and v of each row, side by side: `[rows][q_dim + 2 kv_dim]`.
    pub qkv: BufferRef,
    /// Rotated queries.
    pub q: BufferRef,
    pub attn: BufferRef,
    /// Partials of the split attention of the rows a step runs as decode
    /// (`decode_rows`).
    pub attn_split: BufferRef,
    /// The gated MLP's activations, `[rows][ffn]`.
    pub gate: BufferRef,
    /// Gate/up pairs (prefill form), or up alone: `[rows][2 ffn]`.
    pub up: BufferRef,
    pub logits: BufferRef,
    /// Normed rows in 8-bit blocks (`Q8Rows`: quants, then scales), what
    /// the projections of rows run as decode read when `q8_input` is on.
    pub h_q8: BufferRef,
    pub h_q8_scales: BufferRef,
    /// Whether decode steps feed their normed rows to the projections in
    /// 8-bit blocks (`ActDtype::Q8`).
    pub q8_input: bool,
    /// Scratch of the mixture-of-experts MLP, in models that have one.
    pub moe: Option<MoeActivations>,
}

impl Activations {
    /// Scratch for steps of up to `max_rows` rows, the logits of up to
    /// `max_logit_rows`, and up to `decode_rows` rows run as decode (a
    /// decode step's one, or a verifying pass's).
    pub fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        max_rows: usize,
        max_logit_rows: usize,
        decode_rows: usize,
        q8_input: bool,
    ) -> Result<Activations, GpuError> {
        let mut made = Vec::with_capacity(12);
        for (label, rows, width) in Self::shapes(cfg, max_rows, max_logit_rows, decode_rows) {
            made.push(ctx.create_storage(label, f32_bytes(ctx, label, &[rows, width])?)?);
        }
        let [ids, x, h, qkv, q, attn, attn_split, gate, up, logits, h_q8, h_q8_scales]: [BufferRef;
            12] = made.try_into().expect("one buffer per shape");
        Ok(Activations {
            max_rows,
            max_logit_rows,
            ids,
            x,
            h,
            qkv,
            q,
            attn,
            attn_split,
            gate,
            up,
            logits,
            h_q8,
            h_q8_scales,
            q8_input,
            moe: cfg
                .moe
                .as_ref()
                .map(|moe| MoeActivations::new(ctx, cfg, moe, max_rows))
                .transpose()?,
        })
    }

    /// Each dense buffer's label and shape in f32s (rows, width), in the
    /// order of the fields: what `new` allocates and the memory preflight
    /// counts.
    pub fn shapes(
        cfg: &ModelConfig,
        max_rows: usize,
        max_logit_rows: usize,
        decode_rows: usize,
    ) -> [(&'static str, usize, usize); 12] {
        let (q, kv, ffn) = (cfg.q_dim(), cfg.kv_dim(), cfg.dense_ffn());
        let decode_rows = decode_rows.max(1);
        let (q8_words, q8_scales) =
            Q8Rows::elems(decode_rows, cfg.d_model.next_multiple_of(Q8_BLOCK));
        [
            ("ids", max_rows, 1),
            ("x", max_rows, cfg.d_model),
            ("h", max_rows, cfg.d_model.max(q)),
            ("qkv", max_rows, q + 2 * kv),
            ("q", max_rows, q),
            ("attn", max_rows, q),
            (
                "attn_split",
                1,
                split_scratch_elems(
                    split_scratch_rows(decode_rows, cfg.n_heads, cfg.head_dim),
                    cfg.n_heads,
                    cfg.head_dim,
                ),
            ),
            ("gate", max_rows, ffn),
            ("up", max_rows, 2 * ffn),
            ("logits", max_logit_rows, cfg.vocab_size),
            ("h_q8", 1, q8_words),
            ("h_q8_scales", 1, q8_scales),
        ]
    }
}

/// Bytes of as many 32-bit values as `counts` multiply to. The model's
/// widths are bounded (`bounds::check`) but row and position counts are the
/// caller's: a product past u64 (or a count of values past a 32-bit usize
/// on wasm32) is refused as what it would be, a buffer over the adapter's
/// limit, never wrapped to a small size.
pub fn f32_bytes(ctx: &GpuContext, label: &str, counts: &[usize]) -> Result<u64, GpuError> {
    counts
        .iter()
        .try_fold(1usize, |n, &c| n.checked_mul(c))
        .and_then(|n| (n as u64).checked_mul(4))
        .ok_or_else(|| GpuError::BufferTooLarge {
            label: label.to_string(),
            size: u64::MAX,
            limit_name: "max_buffer_size",
            limit: ctx.limits.max_buffer_size,
        })
}
