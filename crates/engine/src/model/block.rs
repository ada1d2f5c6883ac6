//! A transformer block: its weights, and the parts of its recipe that the
//! causal decoder (`decoder.rs`) and the bidirectional encoder
//! (EmbeddingGemma, `embedding/gemma.rs`) share. Between the two only the
//! attention core differs (RoPE into a KV cache and causal attention, or
//! RoPE in place and attention over a padded batch):
//!
//!   qkv = W_qkv · norm(x) (+ bias)                  `Layer::project_qkv`
//!   attn = attention(rope(q, k), v)                 the caller's core
//!   x += [post-norm](W_o · attn)                    `Layer::project_residual`
//!   x += [post-norm](W_down · (act(W_gate · norm(x)) * W_up · norm(x)))
//!                                                   `Layer::mlp`
//!
//! Each line is one fused op (`kernels::matmul::linear`: the norm as its
//! prologue, the residual add or the gating as its epilogue), but where a
//! post-norm, split storage types or the adapter's tuning ask for more.

use crate::gpu::{error::shape_err, BufferRef, GpuBuffer, GpuError, Recorder};
use crate::kernels::elementwise::activation::{gated_act, Activation};
use crate::kernels::matmul::linear::{
    linear, norm_before_projection, Epilogue, Linear, LinearScratch,
};
use crate::kernels::norm::rms::rms_norm_add;
use crate::kernels::norm::rms_q8::{rms_norm_q8, Q8Rows};
use crate::kernels::weights::QuantMatrix;

use super::moe::MoeWeights;

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

/// The sizes and constants a block's recipe reads.
#[derive(Clone, Copy, Debug)]
pub struct BlockShape {
    pub d_model: usize,
    /// A qkv row: q's heads, then k's and v's.
    pub qkv_width: usize,
    pub ffn_dim: usize,
    pub eps: f32,
    pub activation: Activation,
}

/// The buffers a step's blocks write between their kernels, `rows` rows
/// each.
#[derive(Clone, Copy)]
pub struct BlockScratch<'a> {
    /// The residual stream, `[rows][d_model]`.
    pub x: &'a GpuBuffer,
    /// Normed rows, and a projection before its post-norm: `[rows][d_model]`
    /// (at least `[rows][cols]` of every normed projection).
    pub h: &'a GpuBuffer,
    /// `[rows][qkv_width]`.
    pub qkv: &'a GpuBuffer,
    /// The gated MLP's rows, `[rows][ffn_dim]`.
    pub gate: &'a GpuBuffer,
    /// Up's rows where gate and up are stored apart (`[rows][ffn_dim]`),
    /// also lent to the projections for x's rows in ranges of columns
    /// (`LinearScratch::ranges`: `[rows][2 ffn_dim]`).
    pub up: Option<&'a GpuBuffer>,
    /// Normed rows in 8-bit blocks (one, or a verifying pass's), where
    /// decode steps feed the projections so (`ActDtype::Q8`).
    pub q8: Option<Q8Rows<'a>>,
}

/// A projection's input: x from an offset with the norm it still needs
/// (folded into the projection), or a row normed ahead, possibly also in
/// 8-bit blocks.
pub struct Input<'a> {
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
pub struct Rows<'a> {
    pub buffer: &'a GpuBuffer,
    pub col: usize,
    pub stride: usize,
}

impl<'a> Rows<'a> {
    /// Rows of `width` elements, the whole row written.
    pub fn whole(buffer: &'a GpuBuffer, width: usize) -> Rows<'a> {
        Rows {
            buffer,
            col: 0,
            stride: width,
        }
    }
}

/// One step's blocks: `rows` token rows through `scratch`.
#[derive(Clone, Copy)]
pub struct Layer<'a> {
    pub shape: BlockShape,
    pub scratch: BlockScratch<'a>,
    pub rows: usize,
    /// Each row computed as a decode step computes it (`InferenceStep::
    /// as_decode`): the matrix-vector projections, their inputs normed
    /// ahead as decode norms them.
    pub as_decode: bool,
}

impl<'a> Layer<'a> {
    /// Whether the projections take the matrix-vector form: one row, or
    /// rows as decode.
    fn matrix_vector(&self) -> bool {
        self.rows == 1 || self.as_decode
    }

    /// `qkv = W_qkv · norm(x) (+ bias)`: q, k and v side by side in each row.
    pub fn project_qkv(&self, rec: &mut Recorder, block: &'a Block) -> Result<(), GpuError> {
        let (w, s) = (&block.attn, &self.scratch);
        let norm = Some((&*block.attn_norm, self.shape.eps));
        // The norm goes ahead only for 8-bit x: CPU adapters otherwise run
        // q/k/v with the norm folded in (see `norm_ahead`).
        let input = match self.matrix_vector() && s.q8.is_some() {
            true => self.norm_ahead(rec, 0, self.rows, norm)?,
            false => Input::fused(s.x, norm),
        };
        let mut col = 0;
        for m in &w.qkv {
            let bias = w.qkv_bias.as_ref().map(|b| (&**b, col));
            let out = Rows {
                buffer: s.qkv,
                col,
                stride: self.shape.qkv_width,
            };
            self.project(rec, &input, m, bias, out, Epilogue::Store)?;
            col += m.rows;
        }
        Ok(())
    }

    /// `x += W y`, or `x += norm(W y)` with a post-norm (Gemma 3).
    pub fn project_residual(
        &self,
        rec: &mut Recorder,
        y: &GpuBuffer,
        w: &QuantMatrix,
        post_norm: Option<&GpuBuffer>,
    ) -> Result<(), GpuError> {
        let (s, d) = (&self.scratch, self.shape.d_model);
        let y = Input::fused(y, None);
        match post_norm {
            None => self.project(rec, &y, w, None, Rows::whole(s.x, d), Epilogue::Add),
            Some(norm) => {
                self.project(rec, &y, w, None, Rows::whole(s.h, d), Epilogue::Store)?;
                rms_norm_add(rec, s.h, 0, norm, s.x, 0, self.rows, d, self.shape.eps)
            }
        }
    }

    /// `x += [post-norm](W_down · (act(W_gate · norm(x)) * W_up · norm(x)))`.
    pub fn mlp(
        &self,
        rec: &mut Recorder,
        norm: &'a GpuBuffer,
        mlp: &DenseMlp,
        post_norm: Option<&GpuBuffer>,
    ) -> Result<(), GpuError> {
        let (s, shape) = (&self.scratch, &self.shape);
        let ffn = Rows::whole(s.gate, shape.ffn_dim);
        let norm = Some((norm, shape.eps));
        let x = match self.matrix_vector() {
            true => self.norm_ahead(rec, 0, self.rows, norm)?,
            false => Input::fused(s.x, norm),
        };
        match &mlp.gate_up {
            GateUp::Fused(w) => {
                self.project(rec, &x, w, None, ffn, Epilogue::Glu(shape.activation))?
            }
            GateUp::Split { gate, up } => {
                let Some(up_rows) = s.up else {
                    return Err(shape_err(
                        "mlp",
                        "gate and up stored apart need an up buffer",
                    ));
                };
                self.project(rec, &x, gate, None, ffn, Epilogue::Store)?;
                let up_out = Rows::whole(up_rows, shape.ffn_dim);
                self.project(rec, &x, up, None, up_out, Epilogue::Store)?;
                let n = self.rows * shape.ffn_dim;
                gated_act(rec, s.gate, 0, up_rows, 0, s.gate, 0, n, shape.activation)?;
            }
        }
        self.project_residual(rec, s.gate, &mlp.down, post_norm)
    }

    /// The input of a matrix-vector projection after a norm (`rows` rows
    /// of the step from `first`): with 8-bit input (`scratch.q8`) the norm
    /// writes the rows in 8-bit blocks, which the projections read instead;
    /// otherwise the norm is folded into the projection or run ahead into
    /// `scratch.h`, as the adapter's tuning says (`norm_before_projection`).
    pub fn norm_ahead(
        &self,
        rec: &mut Recorder,
        first: usize,
        rows: usize,
        norm: Option<(&'a GpuBuffer, f32)>,
    ) -> Result<Input<'a>, GpuError> {
        let (s, d) = (&self.scratch, self.shape.d_model);
        let Some((weight, eps)) = norm else {
            return Ok(Input::fused(s.x, None).at(first * d));
        };
        if let Some(q8) = s.q8 {
            rms_norm_q8(rec, s.x, first * d, weight, s.h, 0, &q8, rows, d, eps)?;
            return Ok(Input {
                x: s.h,
                x_offset: 0,
                x_q8: Some(q8),
                norm: None,
            });
        }
        let (x, x_offset, norm) =
            norm_before_projection(rec, s.x, first * d, weight, eps, s.h, rows, d)?;
        Ok(Input::fused(x, norm).at(x_offset))
    }

    /// The input of rows `first..` of x with `norm` folded in.
    pub fn normed_rows(&self, first: usize, norm: (&'a GpuBuffer, f32)) -> Input<'a> {
        Input::fused(self.scratch.x, Some(norm)).at(first * self.shape.d_model)
    }

    /// One fused projection of the step's rows into `out`.
    pub fn project(
        &self,
        rec: &mut Recorder,
        x: &Input,
        w: &QuantMatrix,
        bias: Option<(&GpuBuffer, usize)>,
        out: Rows,
        epilogue: Epilogue,
    ) -> Result<(), GpuError> {
        self.project_rows(rec, x, w, bias, out, epilogue, self.rows)
    }

    /// `project` over `m` rows (the logits of fewer rows than the step's).
    #[allow(clippy::too_many_arguments)]
    pub fn project_rows(
        &self,
        rec: &mut Recorder,
        x: &Input,
        w: &QuantMatrix,
        bias: Option<(&GpuBuffer, usize)>,
        out: Rows,
        epilogue: Epilogue,
        m: usize,
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
            m,
            as_decode: self.as_decode && m > 1,
        };
        let s = &self.scratch;
        // The up buffer is free but while a split gate/up writes it (and
        // the gating reads it after): x's rows in ranges of columns may go
        // there (kernels::matmul::linear).
        let up_free =
            s.up.filter(|up| op.x.id() != up.id() && op.out.id() != up.id());
        let scratch = LinearScratch {
            normed: s.h,
            ranges: up_free,
        };
        linear(rec, &op, &scratch)
    }
}
