//! EmbeddingGemma's encoder (Gemma 3 with bidirectional attention, as
//! transformers' `Gemma3TextModel` runs it for sentence-transformers): its
//! tensors checked and uploaded, and its forward pass over a padded batch
//! recorded as one step:
//!
//!   h = embed(ids) * sqrt(dim)
//!   per layer:  a = W_qkv rms(h)            (q | k | v in one row)
//!               q, k = rms_head(q), rms_head(k); rotary on q and k
//!               h += rms(W_o attn(a))       (local layers: a window)
//!               h += rms(W_down (gelu_tanh(W_gate rms(h)) * W_up rms(h)))
//!   h = rms(h); mean (or the configured) pooling
//!
//! Every RMSNorm multiplies by `1 + weight` (Gemma's convention; the 1 is
//! added here at load, as llama.cpp's converter adds it to GGUF weights).
//! A layer is the decoder's `Block`, recorded by the same recipe
//! (`model::block`: the q/k/v projection with the norm folded in, the
//! output projection and post-norm into the residual, the gated MLP); only
//! the attention core is the encoder's own, for a padded batch (head_norm,
//! rope_bidir, attention_bidir with grouped queries and windows), and the
//! pooling after.

use crate::format::quant::GgmlType;
use crate::gpu::{error::shape_err, BufferRef, GpuContext, GpuError, Recorder};
use crate::kernels::attention::bidir::{attention_bidir, BidirArgs};
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::embed::embed;
use crate::kernels::encoder::pool::{pool, PoolMode};
use crate::kernels::norm::head::{head_norm, HeadNorm};
use crate::kernels::norm::rms::rms_norm;
use crate::kernels::rope::bidir::{rope_bidir, RopeBidir};
use crate::kernels::rope::RopeLayout;
use crate::kernels::weights::QuantMatrix;
use crate::model::block::{
    AttentionWeights, Block, BlockScratch, BlockShape, DenseMlp, GateUp, Layer, Mlp,
};
use crate::model::ModelError;

use super::bert_weights::{Reader, Shard};
use super::forward::upload_padded;
use super::gemma_config::GemmaConfig;

pub struct GemmaWeights {
    embed: QuantMatrix,
    /// RMSNorm weights `1 + weight` as stored; q, k and v rows in one
    /// matrix; gate and up rows interleaved (gate 0, up 0, gate 1, ...), as
    /// the linear kernel's gated epilogue reads them.
    layers: Vec<Block>,
    final_norm: BufferRef,
}

impl GemmaWeights {
    /// Checks and uploads every tensor of the encoder `cfg` describes; a
    /// tensor it does not read is refused by name.
    pub fn upload(
        ctx: &GpuContext,
        cfg: &GemmaConfig,
        shards: &[Shard],
    ) -> Result<GemmaWeights, ModelError> {
        // Checkpoints saved from a task model put the encoder under "model.".
        let has = |name: &str| shards.iter().any(|(h, _)| h.tensor(name).is_some());
        let prefix = if !has("embed_tokens.weight") && has("model.embed_tokens.weight") {
            "model."
        } else {
            ""
        };
        let r = Reader { shards, prefix };
        // Names read, to refuse any other tensor at the end.
        let read = std::cell::RefCell::new(Vec::new());
        let f32s = |name: &str, shape: &[usize]| {
            read.borrow_mut().push(format!("{prefix}{name}"));
            r.f32s(name, shape)
        };
        let (d, hd, ffn) = (cfg.dim, cfg.head_dim, cfg.ffn);
        let (q_rows, kv_rows) = (cfg.heads * hd, cfg.kv_heads * hd);
        let matrix = |label: &str, rows: usize, cols: usize, w: &[f32]| {
            QuantMatrix::upload(
                ctx,
                label,
                GgmlType::F32,
                rows,
                cols,
                bytemuck::cast_slice(w),
            )
        };
        let norm = |name: &str, n: usize| -> Result<BufferRef, ModelError> {
            let w: Vec<f32> = f32s(name, &[n])?.iter().map(|w| 1.0 + w).collect();
            Ok(ctx.upload_f32(name, &w)?)
        };
        let mut layers = Vec::with_capacity(cfg.layers.len());
        for i in 0..cfg.layers.len() {
            let l = |s: &str| format!("layers.{i}.{s}");
            let input_norm = norm(&l("input_layernorm.weight"), d)?;
            let post_attn_norm = norm(&l("post_attention_layernorm.weight"), d)?;
            let pre_ffn_norm = norm(&l("pre_feedforward_layernorm.weight"), d)?;
            let post_ffn_norm = norm(&l("post_feedforward_layernorm.weight"), d)?;
            let q_norm = norm(&l("self_attn.q_norm.weight"), hd)?;
            let k_norm = norm(&l("self_attn.k_norm.weight"), hd)?;
            let mut qkv = f32s(&l("self_attn.q_proj.weight"), &[q_rows, d])?;
            qkv.extend(f32s(&l("self_attn.k_proj.weight"), &[kv_rows, d])?);
            qkv.extend(f32s(&l("self_attn.v_proj.weight"), &[kv_rows, d])?);
            let o = f32s(&l("self_attn.o_proj.weight"), &[d, q_rows])?;
            let gate = f32s(&l("mlp.gate_proj.weight"), &[ffn, d])?;
            let up = f32s(&l("mlp.up_proj.weight"), &[ffn, d])?;
            let mut gate_up = Vec::with_capacity(2 * ffn * d);
            for (g, u) in gate.chunks_exact(d).zip(up.chunks_exact(d)) {
                gate_up.extend_from_slice(g);
                gate_up.extend_from_slice(u);
            }
            let down = f32s(&l("mlp.down_proj.weight"), &[d, ffn])?;
            layers.push(Block {
                attn_norm: input_norm,
                attn: AttentionWeights {
                    qkv: vec![matrix(&l("self_attn.qkv"), q_rows + 2 * kv_rows, d, &qkv)?],
                    qkv_bias: None,
                    o: matrix(&l("self_attn.o_proj"), d, q_rows, &o)?,
                    q_norm: Some(q_norm),
                    k_norm: Some(k_norm),
                },
                post_attn_norm: Some(post_attn_norm),
                mlp_norm: pre_ffn_norm,
                mlp: Mlp::Dense(DenseMlp {
                    gate_up: GateUp::Fused(matrix(&l("mlp.gate_up"), 2 * ffn, d, &gate_up)?),
                    down: matrix(&l("mlp.down_proj"), d, ffn, &down)?,
                }),
                post_mlp_norm: Some(post_ffn_norm),
            });
        }
        let final_norm = norm("norm.weight", d)?;
        let table = f32s("embed_tokens.weight", &[cfg.vocab, d])?;
        let embed = matrix("embed_tokens", cfg.vocab, d, &table)?;
        let read = read.into_inner();
        let all = shards.iter().flat_map(|(h, _)| &h.tensors);
        if let Some(t) = all.into_iter().find(|t| !read.contains(&t.name)) {
            return Err(ModelError::Config(format!(
                "tensor '{}', which wick's Gemma encoder does not read (a bias or a layer it does not implement)",
                t.name
            )));
        }
        Ok(GemmaWeights {
            embed,
            layers,
            final_norm,
        })
    }
}

/// One batch's buffers: written, run, read back, then dropped.
pub struct GemmaBatch {
    pub seqs: usize,
    pub seq_len: usize,
    /// `[seqs * seq_len]` token ids, padding included.
    ids: BufferRef,
    /// `[seqs]` unpadded lengths.
    pub lens: BufferRef,
    /// The residual stream, `[tokens][dim]`.
    hidden: BufferRef,
    /// q | k | v, `[tokens][(heads + 2 kv_heads) head_dim]`.
    qkv: BufferRef,
    /// Attention's output, `[tokens][heads head_dim]`.
    attn: BufferRef,
    /// Normed rows, and a projection's output before its post-norm,
    /// `[tokens][dim]`.
    sub: BufferRef,
    /// The MLP's gated rows, `[tokens][ffn]`.
    inner: BufferRef,
    /// The pooled rows, `[seqs][dim]`.
    pub pooled: BufferRef,
}

impl GemmaBatch {
    /// Buffers for `inputs` (token ids, each non-empty), padded with id 0.
    pub fn new(
        ctx: &GpuContext,
        cfg: &GemmaConfig,
        inputs: &[Vec<u32>],
    ) -> Result<GemmaBatch, GpuError> {
        let seqs = inputs.len();
        let (seq_len, ids, lens) = upload_padded(ctx, inputs)?;
        let tokens = seqs * seq_len;
        let f32s = |label: &str, n: usize| ctx.create_storage(label, (n * 4) as u64);
        let (d, q) = (cfg.dim, cfg.heads * cfg.head_dim);
        Ok(GemmaBatch {
            seqs,
            seq_len,
            ids,
            lens,
            hidden: f32s("embed hidden", tokens * d)?,
            qkv: f32s("embed qkv", tokens * (q + 2 * cfg.kv_heads * cfg.head_dim))?,
            attn: f32s("embed attn", tokens * q)?,
            sub: f32s("embed sub-block", tokens * d)?,
            inner: f32s("embed inner", tokens * cfg.ffn)?,
            pooled: f32s("embed pooled", seqs * d)?,
        })
    }
}

/// Records the whole forward pass of `batch` into `rec`, ending with the
/// pooled rows in `batch.pooled`.
pub fn record_gemma(
    rec: &mut Recorder,
    cfg: &GemmaConfig,
    w: &GemmaWeights,
    b: &GemmaBatch,
    pooling: PoolMode,
) -> Result<(), GpuError> {
    let (d, hd, m) = (cfg.dim, cfg.head_dim, b.seqs * b.seq_len);
    let (q_width, kv_width) = (cfg.heads * hd, cfg.kv_heads * hd);
    let stride = q_width + 2 * kv_width;
    // transformers multiplies by sqrt(hidden_size) as an f32 tensor.
    let embed_scale = (d as f32).sqrt();
    embed(rec, &w.embed, &b.ids, 0, &b.hidden, 0, m, embed_scale)?;
    let layer = Layer {
        shape: BlockShape {
            d_model: d,
            qkv_width: stride,
            ffn_dim: cfg.ffn,
            eps: cfg.norm_eps,
            activation: Activation::GeluTanh,
        },
        scratch: BlockScratch {
            x: &b.hidden,
            h: &b.sub,
            qkv: &b.qkv,
            gate: &b.inner,
            up: None,
            q8: None,
        },
        rows: m,
        as_decode: false,
    };
    for (layer_cfg, block) in cfg.layers.iter().zip(&w.layers) {
        let (Some(q_norm), Some(k_norm), Mlp::Dense(mlp)) =
            (&block.attn.q_norm, &block.attn.k_norm, &block.mlp)
        else {
            return Err(shape_err(
                "gemma encoder",
                "a layer without q/k norms or with experts",
            ));
        };
        layer.project_qkv(rec, block)?;
        let heads = |heads, col| HeadNorm {
            rows: m,
            heads,
            head_dim: hd,
            row_stride: stride,
            col,
            eps: cfg.norm_eps,
        };
        head_norm(rec, &heads(cfg.heads, 0), q_norm, &b.qkv)?;
        head_norm(rec, &heads(cfg.kv_heads, q_width), k_norm, &b.qkv)?;
        // q's heads and k's heads lie side by side from column 0.
        let rot = RopeBidir {
            rows: m,
            seq_len: b.seq_len,
            heads: cfg.heads + cfg.kv_heads,
            head_dim: hd,
            n_rot: hd,
            row_stride: stride,
            col: 0,
            theta: layer_cfg.rope_theta,
            layout: RopeLayout::NeoX,
        };
        rope_bidir(rec, &rot, &b.qkv)?;
        let args = BidirArgs {
            seqs: b.seqs,
            seq_len: b.seq_len,
            heads: cfg.heads,
            kv_heads: cfg.kv_heads,
            head_dim: hd,
            row_stride: stride,
            q_col: 0,
            k_col: q_width,
            v_col: q_width + kv_width,
            scale: cfg.attn_scale,
            window: layer_cfg.window,
        };
        attention_bidir(rec, &args, &b.qkv, &b.lens, &b.attn, 0)?;
        let post_attn = block.post_attn_norm.as_deref();
        layer.project_residual(rec, &b.attn, &block.attn.o, post_attn)?;
        layer.mlp(rec, &block.mlp_norm, mlp, block.post_mlp_norm.as_deref())?;
    }
    rms_norm(
        rec,
        &b.hidden,
        0,
        &w.final_norm,
        &b.hidden,
        0,
        m,
        d,
        cfg.norm_eps,
    )?;
    pool(
        rec, &b.hidden, &b.lens, &b.pooled, b.seqs, b.seq_len, d, pooling,
    )
}
