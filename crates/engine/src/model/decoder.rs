//! What every decoder-only transformer here shares: the weights of a block,
//! the scratch activations, and the recipe that records one forward step.
//!
//! embed → N × [norm → attention (q/k/v, biases, q/k-norm, RoPE, KV write,
//! causal GQA) → (post-norm) → residual → norm → gated MLP → (post-norm) →
//! residual] → final norm → output head. Architectures differ only in which
//! optional pieces they carry and in their config; they describe that in their
//! own file (`llama.rs`, ...) and reuse this code path, for one row or many.

use crate::gpu::{error::shape_err, BufferRef, GpuBuffer, GpuContext, GpuError, Recorder};
use crate::kernels::activation::gated_act;
use crate::kernels::add::add_in_place;
use crate::kernels::attention::{attention, AttentionArgs};
use crate::kernels::bias::add_bias;
use crate::kernels::embed::embed;
use crate::kernels::kv::{kv_write, KvLayout};
use crate::kernels::matmul::matmul;
use crate::kernels::rmsnorm::rms_norm;
use crate::kernels::rope::rope;
use crate::kernels::weights::QuantMatrix;

use super::config::ModelConfig;
use super::moe::{self, MoeActivations, MoeWeights};

pub struct AttentionWeights {
    pub q: QuantMatrix,
    pub k: QuantMatrix,
    pub v: QuantMatrix,
    pub o: QuantMatrix,
    pub q_bias: Option<BufferRef>,
    pub k_bias: Option<BufferRef>,
    pub v_bias: Option<BufferRef>,
    /// Per-head RMSNorm of queries and keys (Qwen3, Gemma 3).
    pub q_norm: Option<BufferRef>,
    pub k_norm: Option<BufferRef>,
}

pub struct MlpWeights {
    pub gate: QuantMatrix,
    pub up: QuantMatrix,
    pub down: QuantMatrix,
}

/// A block's MLP: one gated MLP, or a mixture of experts (`moe.rs`).
pub enum Mlp {
    Dense(MlpWeights),
    Moe(Box<MoeWeights>),
}

pub struct Block {
    pub attn_norm: BufferRef,
    pub attn: AttentionWeights,
    /// Norm of the attention output before the residual add (Gemma 3).
    pub post_attn_norm: Option<BufferRef>,
    pub mlp_norm: BufferRef,
    pub mlp: Mlp,
    pub post_mlp_norm: Option<BufferRef>,
}

pub struct Decoder {
    pub config: ModelConfig,
    pub token_embd: QuantMatrix,
    pub blocks: Vec<Block>,
    pub output_norm: BufferRef,
    /// `None`: the output head is the token embedding (tied).
    pub output: Option<QuantMatrix>,
}

/// Scratch activations for up to `max_rows` tokens per step, allocated once by
/// the pipeline and reused by every step.
pub struct Activations {
    pub max_rows: usize,
    pub max_logit_rows: usize,
    pub ids: BufferRef,
    pub x: BufferRef,
    pub h: BufferRef,
    pub q: BufferRef,
    pub k: BufferRef,
    pub v: BufferRef,
    pub attn: BufferRef,
    pub gate: BufferRef,
    pub up: BufferRef,
    pub logits: BufferRef,
    /// Scratch of the mixture-of-experts MLP, in models that have one.
    pub moe: Option<MoeActivations>,
}

impl Activations {
    pub fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        max_rows: usize,
        max_logit_rows: usize,
    ) -> Result<Activations, GpuError> {
        let f32s = |label: &str, n: usize| ctx.create_storage(label, 4 * n as u64);
        Ok(Activations {
            max_rows,
            max_logit_rows,
            ids: ctx.create_storage("ids", 4 * max_rows as u64)?,
            x: f32s("x", max_rows * cfg.d_model)?,
            h: f32s("h", max_rows * cfg.d_model.max(cfg.q_dim()))?,
            q: f32s("q", max_rows * cfg.q_dim())?,
            k: f32s("k", max_rows * cfg.kv_dim())?,
            v: f32s("v", max_rows * cfg.kv_dim())?,
            attn: f32s("attn", max_rows * cfg.q_dim())?,
            gate: f32s("gate", max_rows * cfg.dense_ffn())?,
            up: f32s("up", max_rows * cfg.dense_ffn())?,
            logits: f32s("logits", max_logit_rows * cfg.vocab_size)?,
            moe: cfg
                .moe
                .as_ref()
                .map(|moe| MoeActivations::new(ctx, cfg, moe, max_rows))
                .transpose()?,
        })
    }
}

/// Everything one recorded step needs besides the weights. `rows` tokens at
/// positions `pos0..pos0 + rows`, their ids already written to `act.ids`.
pub struct Forward<'r, 'c> {
    pub rec: &'r mut Recorder<'c>,
    pub act: &'r Activations,
    pub k_cache: &'r GpuBuffer,
    pub v_cache: &'r GpuBuffer,
    pub kv: KvLayout,
    pub rows: usize,
    pub pos0: u32,
}

impl Decoder {
    /// Token ids → embeddings in `act.x`.
    pub fn record_embed(&self, f: &mut Forward) -> Result<(), GpuError> {
        let a = f.act;
        embed(
            f.rec,
            &self.token_embd,
            &a.ids,
            0,
            &a.x,
            0,
            f.rows,
            self.config.embed_scale,
        )
    }

    /// All transformer blocks over `act.x`, in place.
    pub fn record_blocks(&self, f: &mut Forward) -> Result<(), GpuError> {
        for layer in 0..self.blocks.len() {
            self.record_attention(f, layer)?;
            self.record_mlp(f, layer)?;
        }
        Ok(())
    }

    fn record_attention(&self, f: &mut Forward, layer: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let block = &self.blocks[layer];
        let w = &block.attn;
        let (a, rows) = (f.act, f.rows);
        rms_norm(
            f.rec,
            &a.x,
            0,
            &block.attn_norm,
            &a.h,
            0,
            rows,
            cfg.d_model,
            cfg.rms_eps,
        )?;
        matmul(f.rec, &a.h, 0, &w.q, &a.q, 0, rows)?;
        matmul(f.rec, &a.h, 0, &w.k, &a.k, 0, rows)?;
        matmul(f.rec, &a.h, 0, &w.v, &a.v, 0, rows)?;
        for (bias, out, width) in [
            (&w.q_bias, &a.q, cfg.q_dim()),
            (&w.k_bias, &a.k, cfg.kv_dim()),
            (&w.v_bias, &a.v, cfg.kv_dim()),
        ] {
            if let Some(bias) = bias {
                add_bias(f.rec, out, 0, bias, rows, width)?;
            }
        }
        for (norm, x, heads) in [
            (&w.q_norm, &a.q, cfg.n_heads),
            (&w.k_norm, &a.k, cfg.n_kv_heads),
        ] {
            if let Some(norm) = norm {
                rms_norm(
                    f.rec,
                    x,
                    0,
                    norm,
                    x,
                    0,
                    rows * heads,
                    cfg.head_dim,
                    cfg.rms_eps,
                )?;
            }
        }
        let r = &cfg.rope;
        let theta = cfg.rope_theta_of(layer);
        for (x, heads) in [(&a.q, cfg.n_heads), (&a.k, cfg.n_kv_heads)] {
            rope(
                f.rec,
                x,
                0,
                rows,
                heads,
                cfg.head_dim,
                r.n_rot,
                f.pos0,
                theta,
                r.layout,
                r.freq_scale,
            )?;
        }
        let layer_offset = f.kv.layer_offset(layer);
        let kv = &f.kv;
        for (src, cache) in [(&a.k, f.k_cache), (&a.v, f.v_cache)] {
            kv_write(
                f.rec,
                src,
                0,
                cache,
                layer_offset,
                rows,
                f.pos0,
                kv.kv_heads,
                kv.head_dim,
                kv.ctx_len,
            )?;
        }
        let args = AttentionArgs {
            rows,
            pos0: f.pos0,
            q_heads: cfg.n_heads,
            kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            ctx_len: kv.ctx_len,
            scale: cfg.attn_scale,
            window: cfg.window_of(layer),
            softcap: None,
        };
        attention(
            f.rec,
            &a.q,
            0,
            f.k_cache,
            f.v_cache,
            layer_offset,
            &a.attn,
            0,
            &args,
        )?;
        matmul(f.rec, &a.attn, 0, &w.o, &a.h, 0, rows)?;
        self.residual(f, &a.h, block.post_attn_norm.as_ref())
    }

    fn record_mlp(&self, f: &mut Forward, layer: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let block = &self.blocks[layer];
        let (a, rows) = (f.act, f.rows);
        rms_norm(
            f.rec,
            &a.x,
            0,
            &block.mlp_norm,
            &a.h,
            0,
            rows,
            cfg.d_model,
            cfg.rms_eps,
        )?;
        match &block.mlp {
            Mlp::Dense(mlp) => {
                matmul(f.rec, &a.h, 0, &mlp.gate, &a.gate, 0, rows)?;
                matmul(f.rec, &a.h, 0, &mlp.up, &a.up, 0, rows)?;
                gated_act(
                    f.rec,
                    &a.gate,
                    0,
                    &a.up,
                    0,
                    &a.gate,
                    0,
                    rows * cfg.ffn_dim,
                    cfg.activation,
                )?;
                matmul(f.rec, &a.gate, 0, &mlp.down, &a.h, 0, rows)?;
            }
            Mlp::Moe(weights) => {
                let (Some(moe), Some(scratch)) = (&cfg.moe, &a.moe) else {
                    return Err(shape_err(
                        "moe",
                        "a mixture-of-experts block in a model without expert config or scratch",
                    ));
                };
                // Experts read the normed rows in h; their weighted sum,
                // recorded last, replaces them.
                moe::record(
                    f.rec,
                    cfg,
                    moe,
                    weights,
                    scratch,
                    &a.h,
                    (&a.gate, &a.up),
                    &a.h,
                    rows,
                )?;
            }
        }
        self.residual(f, &a.h, block.post_mlp_norm.as_ref())
    }

    /// x += norm?(y): the residual stream absorbs a sub-block's output.
    fn residual(
        &self,
        f: &mut Forward,
        y: &GpuBuffer,
        post_norm: Option<&BufferRef>,
    ) -> Result<(), GpuError> {
        let cfg = &self.config;
        let n = f.rows * cfg.d_model;
        if let Some(norm) = post_norm {
            rms_norm(f.rec, y, 0, norm, y, 0, f.rows, cfg.d_model, cfg.rms_eps)?;
        }
        add_in_place(f.rec, &f.act.x, 0, y, 0, n)
    }

    /// Final norm and output head for rows `first..first + n` of this step;
    /// logits land in `act.logits` rows 0..n.
    pub fn record_logits(&self, f: &mut Forward, first: usize, n: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let a = f.act;
        let off = first * cfg.d_model;
        rms_norm(
            f.rec,
            &a.x,
            off,
            &self.output_norm,
            &a.h,
            0,
            n,
            cfg.d_model,
            cfg.rms_eps,
        )?;
        let head = self.output.as_ref().unwrap_or(&self.token_embd);
        matmul(f.rec, &a.h, 0, head, &a.logits, 0, n)
    }
}
