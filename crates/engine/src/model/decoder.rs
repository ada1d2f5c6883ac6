//! A decoder-only transformer: its weights, and the recipe that records one
//! forward step (its scratch activations are `activations.rs`).
//!
//! embed → N × block (`block.rs`: norm and q/k/v projection (with bias) →
//! q/k-norm, RoPE, KV write → causal GQA → output projection and residual |
//! norm and gate/up with activation → down projection and residual) → norm
//! and output head. Each piece between arrows is one fused op
//! (`kernels::matmul::linear`, `kernels::rope::kv`): six dispatches a Llama
//! layer when decoding (Gemma 3's post-norms add one each; q/k/v stored in
//! two types take two projections). Architectures differ only in which
//! optional pieces they carry and in their config; they describe that in
//! their own file (`llama.rs`, ...) and reuse this code path, for one row or
//! many.

use crate::gpu::{error::shape_err, BufferRef, GpuBuffer, GpuError, Recorder};
use crate::kernels::attention::kv::KvLayout;
use crate::kernels::attention::{attention, AttentionArgs};
use crate::kernels::elementwise::add::add_in_place;
use crate::kernels::elementwise::softcap::softcap;
use crate::kernels::embed::embed;
use crate::kernels::matmul::linear::Epilogue;
use crate::kernels::norm::rms::{rms_norm, rms_norm_add};
use crate::kernels::norm::rms_q8::Q8Rows;
use crate::kernels::rope::kv::{rope_kv, RopeKv, Rotary};
use crate::kernels::weights::QuantMatrix;

use super::activations::Activations;
pub use super::block::{AttentionWeights, Block, DenseMlp, GateUp, Mlp};
use super::block::{BlockScratch, BlockShape, Layer, Rows};
use super::config::ModelConfig;
use super::moe::{self, MoeWeights};

pub struct Decoder {
    pub config: ModelConfig,
    pub token_embd: QuantMatrix,
    /// Per-pair divisors of the RoPE frequencies.
    pub rope_factors: RopeFactors,
    pub blocks: Vec<Block>,
    pub output_norm: BufferRef,
    /// `None`: the output head is the token embedding (tied).
    pub output: Option<QuantMatrix>,
}

/// The uploaded per-pair frequency divisors (`config::FreqFactors`).
pub enum RopeFactors {
    None,
    Fixed(BufferRef),
    LongShort { long: BufferRef, short: BufferRef },
}

impl RopeFactors {
    /// The divisors to rotate with: LongRoPE's long ones where `long`
    /// (`RopeConfig::long_factors_at`).
    pub fn chosen(&self, long: bool) -> Option<&GpuBuffer> {
        match self {
            RopeFactors::None => None,
            RopeFactors::Fixed(f) => Some(f),
            RopeFactors::LongShort { long: l, short } => match long {
                true => Some(l),
                false => Some(short),
            },
        }
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
    /// Each row computed as a decode step computes it (`InferenceStep::
    /// as_decode`).
    pub as_decode: bool,
}

impl Decoder {
    /// Token ids (`f.rows` of them in `ids` from `ids_offset`: the step's
    /// ids as written by the CPU, or tokens sampled on the GPU) → embeddings
    /// in `act.x`.
    pub fn record_embed(
        &self,
        f: &mut Forward,
        ids: &GpuBuffer,
        ids_offset: usize,
    ) -> Result<(), GpuError> {
        let a = f.act;
        embed(
            f.rec,
            &self.token_embd,
            ids,
            ids_offset,
            &a.x,
            0,
            f.rows,
            self.config.embed_scale,
        )
    }

    /// The shared block recipe over this step's scratch (`block.rs`).
    fn layer<'r>(&self, f: &Forward<'r, '_>) -> Layer<'r> {
        let (cfg, a) = (&self.config, f.act);
        Layer {
            shape: BlockShape {
                d_model: cfg.d_model,
                qkv_width: cfg.q_dim() + 2 * cfg.kv_dim(),
                ffn_dim: cfg.ffn_dim,
                eps: cfg.rms_eps,
                activation: cfg.activation,
            },
            scratch: BlockScratch {
                x: &a.x,
                h: &a.h,
                qkv: &a.qkv,
                gate: &a.gate,
                up: Some(&a.up),
                q8: a.q8_input.then_some(Q8Rows {
                    quants: &a.h_q8,
                    scales: &a.h_q8_scales,
                }),
            },
            rows: f.rows,
            as_decode: f.as_decode,
        }
    }

    /// All transformer blocks over `act.x`, in place. Each block:
    ///
    ///   x += [post-norm](W_o · attention(rope(W_qkv · norm(x))))
    ///   x += [post-norm](W_down · (act(W_gate · norm(x)) * W_up · norm(x)))
    ///
    /// (a mixture of experts in place of the second line where the block
    /// has one; q/k-norms, biases and post-norms where the model has them).
    pub fn record_blocks(&self, f: &mut Forward) -> Result<(), GpuError> {
        let layer = self.layer(f);
        for (i, block) in self.blocks.iter().enumerate() {
            layer.project_qkv(f.rec, block)?;
            self.rope_and_cache_kv(f, block, i)?;
            self.attend(f, i)?;
            let post_attn = block.post_attn_norm.as_deref();
            layer.project_residual(f.rec, &f.act.attn, &block.attn.o, post_attn)?;
            let post_mlp = block.post_mlp_norm.as_deref();
            match &block.mlp {
                Mlp::Dense(mlp) => layer.mlp(f.rec, &block.mlp_norm, mlp, post_mlp)?,
                Mlp::Moe(weights) => self.record_moe(f, &block.mlp_norm, weights, post_mlp)?,
            }
        }
        Ok(())
    }

    /// q/k-norms and RoPE on q (into `act.q`) and k; k and v written to
    /// the cache at the step's positions.
    fn rope_and_cache_kv(
        &self,
        f: &mut Forward,
        block: &Block,
        layer: usize,
    ) -> Result<(), GpuError> {
        let cfg = &self.config;
        let (w, a) = (&block.attn, f.act);
        let qk_norm = match (&w.q_norm, &w.k_norm) {
            (Some(q), Some(k)) => Some((&**q, &**k, cfg.rms_eps)),
            (None, None) => None,
            _ => {
                return Err(shape_err(
                    "rope_kv",
                    "a q norm without a k norm, or the reverse",
                ))
            }
        };
        let r = &cfg.rope;
        rope_kv(
            f.rec,
            &RopeKv {
                qkv: &a.qkv,
                qkv_offset: 0,
                q_heads: cfg.n_heads,
                q_out: &a.q,
                q_offset: 0,
                k_cache: f.k_cache,
                v_cache: f.v_cache,
                kv: f.kv,
                layer,
                qk_norm,
                rotary: cfg.rotates(layer).then(|| Rotary {
                    n_rot: r.n_rot,
                    theta: cfg.rope_theta_of(layer),
                    layout: r.layout,
                    freq_scale: cfg.rope_freq_scale_of(layer),
                    freq_factors: self.rope_factors.chosen(r.long_factors_at(f.kv.ctx_len)),
                    yarn: r.yarn,
                }),
                rows: f.rows,
                pos0: f.pos0,
            },
        )
    }

    /// `act.attn`: causal grouped-query attention of `act.q` over the
    /// cache's keys and values up to each row's position (a window on
    /// local layers).
    fn attend(&self, f: &mut Forward, layer: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let a = f.act;
        let args = AttentionArgs {
            rows: f.rows,
            pos0: f.pos0,
            q_heads: cfg.n_heads,
            kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            ctx_len: f.kv.ctx_len,
            scale: cfg.attn_scale,
            window: cfg.window_of(layer),
            softcap: cfg.attn_softcap,
            kv_dtype: f.kv.dtype,
            as_decode: f.as_decode,
        };
        let layer_offset = f.kv.layer_offset(layer);
        attention(
            f.rec,
            &a.q,
            0,
            f.k_cache,
            f.v_cache,
            layer_offset,
            &a.attn,
            0,
            &a.attn_split,
            &args,
        )
    }

    /// `x += [post-norm](experts(norm(x)))`: the weighted sum of the
    /// routed experts (and any shared one) in place of a dense MLP.
    fn record_moe(
        &self,
        f: &mut Forward,
        norm: &GpuBuffer,
        weights: &MoeWeights,
        post_norm: Option<&GpuBuffer>,
    ) -> Result<(), GpuError> {
        let (cfg, a, rows) = (&self.config, f.act, f.rows);
        let (Some(moe), Some(scratch)) = (&cfg.moe, &a.moe) else {
            return Err(shape_err(
                "moe",
                "a mixture-of-experts block in a model without expert config or scratch",
            ));
        };
        let d = cfg.d_model;
        rms_norm(f.rec, &a.x, 0, norm, &a.h, 0, rows, d, cfg.rms_eps)?;
        // Experts read the normed rows in h; their weighted sum, recorded
        // last, replaces them.
        let dense = (&a.gate, &a.up);
        let as_decode = f.as_decode;
        moe::record(
            f.rec, cfg, moe, weights, scratch, &a.h, dense, &a.h, rows, as_decode,
        )?;
        match post_norm {
            Some(norm) => rms_norm_add(f.rec, &a.h, 0, norm, &a.x, 0, rows, d, cfg.rms_eps),
            None => add_in_place(f.rec, &a.x, 0, &a.h, 0, rows * d),
        }
    }

    /// Final norm and output head for rows `first..first + n` of this step;
    /// logits land in `act.logits` rows 0..n.
    pub fn record_logits(&self, f: &mut Forward, first: usize, n: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let layer = self.layer(f);
        let head = self.output.as_ref().unwrap_or(&self.token_embd);
        let norm = (&*self.output_norm, cfg.rms_eps);
        let x = match n == 1 || f.as_decode {
            true => layer.norm_ahead(f.rec, first, n, Some(norm))?,
            false => layer.normed_rows(first, norm),
        };
        let out = Rows::whole(&f.act.logits, cfg.vocab_size);
        layer.project_rows(f.rec, &x, head, None, out, Epilogue::Store, n)?;
        match cfg.final_softcap {
            Some(cap) => softcap(f.rec, &f.act.logits, 0, n * cfg.vocab_size, cap),
            None => Ok(()),
        }
    }
}
