//! The BERT encoder's forward pass over a padded batch, recorded as one
//! step: embed (word + position + token type, LayerNorm), then per block
//! the post-norm residual recipe
//!
//!   h = LN(h + W_o attn(W_qkv h + b_qkv) + b_o)
//!   h = LN(h + W_down gelu(W_up h + b_up) + b_down)
//!
//! nomic-bert runs the same recipe with rotary q/k instead of the position
//! table, no biases, and SwiGLU: `W_down (silu(W_gate h) * W_up h)`.
//!
//! then pooling into one row a sequence. A single input is a batch of one;
//! many inputs of mixed lengths are padded to the longest, and attention
//! masks the padded keys, so every input's rows are what they would be alone.

use crate::gpu::{BufferRef, GpuBuffer, GpuContext, GpuError, Recorder};
use crate::kernels::attention::bidir::{attention_bidir, BidirArgs};
use crate::kernels::elementwise::activation::Activation;
use crate::kernels::elementwise::gelu::gelu_erf;
use crate::kernels::embed::embed;
use crate::kernels::encoder::embed::{encoder_embed, EmbedTables};
use crate::kernels::encoder::pool::{pool, PoolMode};
use crate::kernels::matmul::linear::{linear, Epilogue, Linear, LinearScratch};
use crate::kernels::norm::layer::layer_norm;
use crate::kernels::rope::bidir::{rope_bidir, RopeBidir};
use crate::kernels::rope::RopeLayout;

use super::bert_config::{BertConfig, Ffn, Positions};
use super::bert_weights::{BertWeights, Dense, InputTables};

/// One batch's buffers: written, run, read back, then dropped.
pub struct Batch {
    pub seqs: usize,
    pub seq_len: usize,
    /// `[seqs * seq_len]` token ids, padding included.
    ids: BufferRef,
    /// `[seqs]` unpadded lengths.
    lens: BufferRef,
    /// The hidden rows, `[tokens][dim]`.
    hidden: BufferRef,
    /// q, k and v, `[tokens][3 * dim]`.
    qkv: BufferRef,
    /// Attention's output, `[tokens][dim]`.
    attn: BufferRef,
    /// The MLP's inner rows, `[tokens][ffn]`.
    inner: BufferRef,
    /// The pooled rows, `[seqs][dim]`.
    pub pooled: BufferRef,
}

impl Batch {
    /// Buffers for `inputs` (token ids, each non-empty), padded with id 0.
    pub fn new(ctx: &GpuContext, cfg: &BertConfig, inputs: &[Vec<u32>]) -> Result<Batch, GpuError> {
        let seqs = inputs.len();
        let (seq_len, ids, lens) = upload_padded(ctx, inputs)?;
        let tokens = seqs * seq_len;
        let f32s = |label: &str, n: usize| ctx.create_storage(label, (n * 4) as u64);
        Ok(Batch {
            seqs,
            seq_len,
            ids,
            lens,
            hidden: f32s("embed hidden", tokens * cfg.dim)?,
            qkv: f32s("embed qkv", tokens * 3 * cfg.dim)?,
            attn: f32s("embed attn", tokens * cfg.dim)?,
            inner: f32s("embed inner", tokens * cfg.ffn)?,
            pooled: f32s("embed pooled", seqs * cfg.dim)?,
        })
    }

    fn tokens(&self) -> usize {
        self.seqs * self.seq_len
    }
}

/// A batch's inputs on the GPU: `(seq_len, ids, lens)`, the ids
/// `[inputs * seq_len]` padded with id 0 to the longest input (`seq_len`),
/// and each input's unpadded length.
pub(super) fn upload_padded(
    ctx: &GpuContext,
    inputs: &[Vec<u32>],
) -> Result<(usize, BufferRef, BufferRef), GpuError> {
    let seq_len = inputs.iter().map(Vec::len).max().unwrap_or(1);
    let mut ids = vec![0u32; inputs.len() * seq_len];
    for (s, input) in inputs.iter().enumerate() {
        ids[s * seq_len..][..input.len()].copy_from_slice(input);
    }
    let lens: Vec<u32> = inputs.iter().map(|i| i.len() as u32).collect();
    Ok((
        seq_len,
        ctx.upload_u32("embed ids", &ids)?,
        ctx.upload_u32("embed lens", &lens)?,
    ))
}

/// Records the whole forward pass of `batch` into `rec`, ending with the
/// pooled rows in `batch.pooled`.
pub fn record_forward(
    rec: &mut Recorder,
    cfg: &BertConfig,
    w: &BertWeights,
    batch: &Batch,
    pooling: PoolMode,
) -> Result<(), GpuError> {
    let (d, m) = (cfg.dim, batch.tokens());
    match &w.input {
        InputTables::Summed {
            word,
            position,
            token_type,
        } => {
            let tables = EmbedTables {
                word,
                vocab: cfg.vocab,
                position,
                positions: cfg.max_positions,
                token_type,
                types: cfg.token_types,
                dim: d,
            };
            encoder_embed(rec, &tables, &batch.ids, m, batch.seq_len, 0, &batch.hidden)?;
        }
        InputTables::Gathered(table) => embed(rec, table, &batch.ids, 0, &batch.hidden, 0, m, 1.0)?,
    }
    let ln = |rec: &mut Recorder, norm: &super::bert_weights::Norm| {
        layer_norm(
            rec,
            &batch.hidden,
            0,
            &norm.weight,
            &norm.bias,
            m,
            d,
            cfg.norm_eps,
        )
    };
    ln(rec, &w.embed_norm)?;
    let args = BidirArgs {
        seqs: batch.seqs,
        seq_len: batch.seq_len,
        heads: cfg.heads,
        head_dim: cfg.head_dim,
        row_stride: 3 * d,
        q_col: 0,
        k_col: d,
        v_col: 2 * d,
        scale: 1.0 / (cfg.head_dim as f32).sqrt(),
        kv_heads: cfg.heads,
        window: None,
    };
    for layer in &w.layers {
        project(
            rec,
            &layer.qkv,
            &batch.hidden,
            &batch.qkv,
            Epilogue::Store,
            m,
        )?;
        if let Positions::Rotary { theta, n_rot } = cfg.positions {
            // q's heads and k's heads lie side by side from column 0.
            let rot = RopeBidir {
                rows: m,
                seq_len: batch.seq_len,
                heads: 2 * cfg.heads,
                head_dim: cfg.head_dim,
                n_rot,
                row_stride: 3 * d,
                col: 0,
                theta,
                layout: RopeLayout::NeoX,
            };
            rope_bidir(rec, &rot, &batch.qkv)?;
        }
        attention_bidir(rec, &args, &batch.qkv, &batch.lens, &batch.attn, 0)?;
        project(
            rec,
            &layer.attn_out,
            &batch.attn,
            &batch.hidden,
            Epilogue::Add,
            m,
        )?;
        ln(rec, &layer.attn_norm)?;
        match cfg.ffn_kind {
            Ffn::SwiGlu => project(
                rec,
                &layer.up,
                &batch.hidden,
                &batch.inner,
                Epilogue::Glu(Activation::Silu),
                m,
            )?,
            Ffn::Gelu => {
                project(
                    rec,
                    &layer.up,
                    &batch.hidden,
                    &batch.inner,
                    Epilogue::Store,
                    m,
                )?;
                gelu_erf(rec, &batch.inner, 0, m * cfg.ffn)?;
            }
        }
        project(
            rec,
            &layer.down,
            &batch.inner,
            &batch.hidden,
            Epilogue::Add,
            m,
        )?;
        ln(rec, &layer.ffn_norm)?;
    }
    pool(
        rec,
        &batch.hidden,
        &batch.lens,
        &batch.pooled,
        batch.seqs,
        batch.seq_len,
        d,
        pooling,
    )
}

/// `out (=|+=) W x (+ b)`, or gated, over `m` rows.
fn project(
    rec: &mut Recorder,
    dense: &Dense,
    x: &GpuBuffer,
    out: &GpuBuffer,
    epilogue: Epilogue,
    m: usize,
) -> Result<(), GpuError> {
    linear(
        rec,
        &Linear {
            x,
            x_q8: None,
            x_offset: 0,
            norm: None,
            w: &dense.w,
            bias: dense.bias.as_ref().map(|b| (&**b, 0)),
            out,
            out_offset: 0,
            out_stride: match epilogue {
                Epilogue::Glu(_) => dense.w.rows / 2,
                _ => dense.w.rows,
            },
            epilogue,
            m,
            as_decode: false,
        },
        // The normed-rows scratch is read only by a norm, which none has.
        &LinearScratch {
            normed: x,
            ranges: None,
        },
    )
}
