//! What every decoder-only transformer here shares: the weights of a block
//! and the recipe that records one forward step (its scratch activations
//! are `activations.rs`).
//!
//! embed → N × [attention: norm and q/k/v projection (with bias) → q/k-norm,
//! RoPE, KV write → causal GQA → output projection and residual | MLP: norm
//! and gate/up with activation → down projection and residual] → norm and
//! output head. Each piece between arrows is one fused op (`kernels::matmul::linear`,
//! `kernels::rope::kv`): six dispatches a Llama layer when decoding (Gemma 3's
//! post-norms add one each; q/k/v stored in two types take two projections).
//! Architectures differ only in which optional pieces they carry and in their
//! config; they describe that in their own file (`llama.rs`, ...) and reuse
//! this code path, for one row or many.

use crate::gpu::{error::shape_err, BufferRef, GpuBuffer, GpuError, Recorder};
use crate::kernels::attention::kv::KvLayout;
use crate::kernels::attention::{attention, AttentionArgs};
use crate::kernels::elementwise::activation::gated_act;
use crate::kernels::elementwise::add::add_in_place;
use crate::kernels::embed::embed;
use crate::kernels::matmul::linear::{
    linear, norm_before_projection, Epilogue, Linear, LinearScratch,
};
use crate::kernels::norm::rms::{rms_norm, rms_norm_add};
use crate::kernels::norm::rms_q8::{rms_norm_q8, Q8Rows};
use crate::kernels::rope::kv::{rope_kv, RopeKv, Rotary};
use crate::kernels::weights::QuantMatrix;

use super::activations::Activations;
use super::config::ModelConfig;
use super::moe::{self, MoeWeights};

pub struct AttentionWeights {
    /// The q, k and v projections in that order, as matrices whose rows
    /// follow on (one when all three share a storage type; see `fusion.rs`).
    pub qkv: Vec<QuantMatrix>,
    /// q, k and v biases joined (Qwen2).
    pub qkv_bias: Option<BufferRef>,
    pub o: QuantMatrix,
    /// Per-head RMSNorm of queries and keys (Qwen3, Gemma 3).
    pub q_norm: Option<BufferRef>,
    pub k_norm: Option<BufferRef>,
}

/// A dense MLP's gate and up projections.
pub enum GateUp {
    /// One matrix, rows interleaved (gate 0, up 0, gate 1, ...).
    Fused(QuantMatrix),
    /// Stored in different types: two matrices.
    Split { gate: QuantMatrix, up: QuantMatrix },
}

pub struct DenseMlp {
    pub gate_up: GateUp,
    pub down: QuantMatrix,
}

/// A block's MLP: one gated MLP, or a mixture of experts (`moe.rs`).
pub enum Mlp {
    Dense(DenseMlp),
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
    /// Per-pair divisors of the RoPE frequencies (`rope_freqs.weight`).
    pub rope_freqs: Option<BufferRef>,
    pub blocks: Vec<Block>,
    pub output_norm: BufferRef,
    /// `None`: the output head is the token embedding (tied).
    pub output: Option<QuantMatrix>,
}

/// A projection's input: x from an offset with the norm it still needs
/// (folded into the projection), or a row normed ahead, possibly also in
/// 8-bit blocks.
struct Input<'a> {
    x: &'a GpuBuffer,
    x_offset: usize,
    x_q8: Option<Q8Rows<'a>>,
    norm: Option<(&'a GpuBuffer, f32)>,
}

impl<'a> Input<'a> {
    fn fused(x: &'a GpuBuffer, norm: Option<(&'a GpuBuffer, f32)>) -> Input<'a> {
        Input {
            x,
            x_offset: 0,
            x_q8: None,
            norm,
        }
    }

    fn at(self, x_offset: usize) -> Input<'a> {
        Input { x_offset, ..self }
    }
}

/// Where a projection writes: the step's rows of a matrix in `buffer`,
/// `stride` elements apart, its outputs from column `col` of each.
#[derive(Clone, Copy)]
struct Rows<'a> {
    buffer: &'a GpuBuffer,
    col: usize,
    stride: usize,
}

impl<'a> Rows<'a> {
    /// Rows of `width` elements, the whole row written.
    fn whole(buffer: &'a GpuBuffer, width: usize) -> Rows<'a> {
        Rows {
            buffer,
            col: 0,
            stride: width,
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

    /// All transformer blocks over `act.x`, in place. Each block:
    ///
    ///   x += [post-norm](W_o · attention(rope(W_qkv · norm(x))))
    ///   x += [post-norm](W_down · (act(W_gate · norm(x)) * W_up · norm(x)))
    ///
    /// (a mixture of experts in place of the second line where the block
    /// has one; q/k-norms, biases and post-norms where the model has them).
    pub fn record_blocks(&self, f: &mut Forward) -> Result<(), GpuError> {
        for layer in 0..self.blocks.len() {
            let block = &self.blocks[layer];
            self.project_qkv(f, block)?;
            self.rope_and_cache_kv(f, block, layer)?;
            self.attend(f, layer)?;
            let attn_out = &f.act.attn;
            self.project_residual(f, attn_out, &block.attn.o, block.post_attn_norm.as_ref())?;
            self.record_mlp(f, block)?;
        }
        Ok(())
    }

    /// `act.qkv = W_qkv · norm(x) (+ bias)`: q, k and v side by side in each row.
    fn project_qkv(&self, f: &mut Forward, block: &Block) -> Result<(), GpuError> {
        let cfg = &self.config;
        let (w, a) = (&block.attn, f.act);
        let norm = Some((&*block.attn_norm, cfg.rms_eps));
        // The norm goes ahead only for 8-bit x: software adapters otherwise
        // run q/k/v with the norm folded in (see norm_ahead).
        let input = match f.rows == 1 && a.q8_input {
            true => self.norm_ahead(f.rec, a, 0, norm)?,
            false => Input::fused(&a.x, norm),
        };
        let row = cfg.q_dim() + 2 * cfg.kv_dim();
        let mut col = 0;
        for m in &w.qkv {
            let bias = w.qkv_bias.as_ref().map(|b| (&**b, col));
            let out = Rows {
                buffer: &a.qkv,
                col,
                stride: row,
            };
            self.project(f, &input, m, bias, out, Epilogue::Store)?;
            col += m.rows;
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
                rotary: Rotary {
                    n_rot: r.n_rot,
                    theta: cfg.rope_theta_of(layer),
                    layout: r.layout,
                    freq_scale: cfg.rope_freq_scale_of(layer),
                    freq_factors: self.rope_freqs.as_deref(),
                    yarn: r.yarn,
                },
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
            softcap: None,
            kv_dtype: f.kv.dtype,
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

    /// `x += [post-norm](W_down · (act(W_gate · norm(x)) * W_up · norm(x)))`,
    /// or the experts' weighted sum in place of the MLP.
    fn record_mlp(&self, f: &mut Forward, block: &Block) -> Result<(), GpuError> {
        let cfg = &self.config;
        let (a, rows) = (f.act, f.rows);
        let norm = Some((&*block.mlp_norm, cfg.rms_eps));
        match &block.mlp {
            Mlp::Dense(mlp) => {
                let ffn = Rows::whole(&a.gate, cfg.ffn_dim);
                let x = match rows == 1 {
                    true => self.norm_ahead(f.rec, a, 0, norm)?,
                    false => Input::fused(&a.x, norm),
                };
                match &mlp.gate_up {
                    GateUp::Fused(w) => {
                        self.project(f, &x, w, None, ffn, Epilogue::Glu(cfg.activation))?
                    }
                    GateUp::Split { gate, up } => {
                        self.project(f, &x, gate, None, ffn, Epilogue::Store)?;
                        let up_out = Rows::whole(&a.up, cfg.ffn_dim);
                        self.project(f, &x, up, None, up_out, Epilogue::Store)?;
                        let n = rows * cfg.ffn_dim;
                        gated_act(f.rec, &a.gate, 0, &a.up, 0, &a.gate, 0, n, cfg.activation)?;
                    }
                }
                self.project_residual(f, &a.gate, &mlp.down, block.post_mlp_norm.as_ref())
            }
            Mlp::Moe(weights) => {
                let (Some(moe), Some(scratch)) = (&cfg.moe, &a.moe) else {
                    return Err(shape_err(
                        "moe",
                        "a mixture-of-experts block in a model without expert config or scratch",
                    ));
                };
                let d = cfg.d_model;
                rms_norm(
                    f.rec,
                    &a.x,
                    0,
                    &block.mlp_norm,
                    &a.h,
                    0,
                    rows,
                    d,
                    cfg.rms_eps,
                )?;
                // Experts read the normed rows in h; their weighted sum,
                // recorded last, replaces them.
                let dense = (&a.gate, &a.up);
                moe::record(f.rec, cfg, moe, weights, scratch, &a.h, dense, &a.h, rows)?;
                match &block.post_mlp_norm {
                    Some(norm) => rms_norm_add(f.rec, &a.h, 0, norm, &a.x, 0, rows, d, cfg.rms_eps),
                    None => add_in_place(f.rec, &a.x, 0, &a.h, 0, rows * d),
                }
            }
        }
    }

    /// The input of a one-row projection after a norm (`row` of the
    /// step): with 8-bit input (`act.q8_input`) the norm writes the row in
    /// 8-bit blocks into `act.h`, which the projections read instead;
    /// otherwise the norm is folded into the projection or run ahead into
    /// `act.h`, as the adapter's tuning says (`norm_before_projection`).
    fn norm_ahead<'a>(
        &self,
        rec: &mut Recorder,
        a: &'a Activations,
        row: usize,
        norm: Option<(&'a GpuBuffer, f32)>,
    ) -> Result<Input<'a>, GpuError> {
        let d = self.config.d_model;
        let Some((weight, eps)) = norm else {
            return Ok(Input::fused(&a.x, None).at(row * d));
        };
        if a.q8_input {
            let q8 = Q8Rows {
                quants: &a.h_q8,
                scales: &a.h_q8_scales,
            };
            rms_norm_q8(rec, &a.x, row * d, weight, &a.h, 0, &q8, 1, d, eps)?;
            return Ok(Input {
                x: &a.h,
                x_offset: 0,
                x_q8: Some(q8),
                norm: None,
            });
        }
        let (x, x_offset, norm) = norm_before_projection(rec, &a.x, row * d, weight, eps, &a.h, d)?;
        Ok(Input::fused(x, norm).at(x_offset))
    }

    /// One fused projection of this step's rows into `out`.
    fn project(
        &self,
        f: &mut Forward,
        x: &Input,
        w: &QuantMatrix,
        bias: Option<(&GpuBuffer, usize)>,
        out: Rows,
        epilogue: Epilogue,
    ) -> Result<(), GpuError> {
        let op = Linear {
            x: x.x,
            x_q8: x.x_q8,
            x_offset: x.x_offset,
            norm: x.norm,
            w,
            bias,
            out: out.buffer,
            out_offset: out.col,
            out_stride: out.stride,
            epilogue,
            m: f.rows,
        };
        self.run_linear(f, &op)
    }

    /// Records `op` with the step's scratch.
    fn run_linear(&self, f: &mut Forward, op: &Linear) -> Result<(), GpuError> {
        let a = f.act;
        // The dense MLP's up buffer is free but while a split gate/up
        // writes it (and read by the gating after): x's rows in ranges of
        // columns go there (kernels::matmul::linear).
        let up_free = op.x.id() != a.up.id() && op.out.id() != a.up.id();
        let scratch = LinearScratch {
            normed: &a.h,
            ranges: up_free.then_some(&*a.up),
        };
        linear(f.rec, op, &scratch)
    }

    /// x += W y, or x += norm(W y) with a post-norm (Gemma 3).
    fn project_residual(
        &self,
        f: &mut Forward,
        y: &GpuBuffer,
        w: &QuantMatrix,
        post_norm: Option<&BufferRef>,
    ) -> Result<(), GpuError> {
        let (cfg, a) = (&self.config, f.act);
        let d = cfg.d_model;
        match post_norm {
            None => self.project(
                f,
                &Input::fused(y, None),
                w,
                None,
                Rows::whole(&a.x, d),
                Epilogue::Add,
            ),
            Some(norm) => {
                let y = Input::fused(y, None);
                self.project(f, &y, w, None, Rows::whole(&a.h, d), Epilogue::Store)?;
                rms_norm_add(f.rec, &a.h, 0, norm, &a.x, 0, f.rows, d, cfg.rms_eps)
            }
        }
    }

    /// Final norm and output head for rows `first..first + n` of this step;
    /// logits land in `act.logits` rows 0..n.
    pub fn record_logits(&self, f: &mut Forward, first: usize, n: usize) -> Result<(), GpuError> {
        let cfg = &self.config;
        let a = f.act;
        let head = self.output.as_ref().unwrap_or(&self.token_embd);
        let norm = Some((&*self.output_norm, cfg.rms_eps));
        let x = match n == 1 {
            true => self.norm_ahead(f.rec, a, first, norm)?,
            false => Input::fused(&a.x, norm).at(first * cfg.d_model),
        };
        let op = Linear {
            x: x.x,
            x_q8: x.x_q8,
            x_offset: x.x_offset,
            norm: x.norm,
            w: head,
            bias: None,
            out: &a.logits,
            out_offset: 0,
            out_stride: cfg.vocab_size,
            epilogue: Epilogue::Store,
            m: n,
        };
        self.run_linear(f, &op)
    }
}
