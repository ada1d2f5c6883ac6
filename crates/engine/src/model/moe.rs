//! The mixture-of-experts MLP of a block (qwen3moe, qwen2moe, Mixtral-style
//! llama): its tensors, its scratch buffers, and the recipe that records it.
//!
//! norm → router logits (matmul) → `route` (softmax, top-k, weights) →
//! gate/up expert matmuls → gated activation → down expert matmul →
//! `combine` (router-weighted sum per token, plus the sigmoid-gated shared
//! expert where there is one) → residual. Steps of up to `GEMV_MAX_TOKENS`
//! rows (decode) run the indexed expert form; longer ones (prefill) group
//! slots by expert first. Routing never leaves the GPU.

use crate::gpu::{BufferRef, GpuBuffer, GpuContext, GpuError, Recorder};
use crate::kernels::elementwise::activation::gated_act;
use crate::kernels::matmul::tiled::{matmul, GEMV_MAX_TOKENS};
use crate::kernels::moe::{
    combine, expert_matmul, group_by_expert, route, tiles_len, ExpertForm, ExpertInput, Routing,
    SharedExpert,
};
use crate::kernels::weights::{ExpertStack, QuantMatrix};

/// Three separate matrices of a gated MLP (qwen2moe's shared expert).
pub struct MlpWeights {
    pub gate: QuantMatrix,
    pub up: QuantMatrix,
    pub down: QuantMatrix,
}

use super::config::{ModelConfig, MoeConfig};
use super::loader::{Need, TensorStore};
use super::ModelError;

pub struct MoeWeights {
    /// `ffn_gate_inp`: n_experts x d_model, the router's logits.
    pub router: QuantMatrix,
    pub gate: ExpertStack,
    pub up: ExpertStack,
    pub down: ExpertStack,
    pub shared: Option<SharedExpertWeights>,
}

/// qwen2moe's always-on expert: a dense gated MLP whose output is scaled by
/// sigmoid(x · gate_inp).
pub struct SharedExpertWeights {
    /// `ffn_gate_inp_shexp`: one row of d_model.
    pub gate_inp: QuantMatrix,
    pub mlp: MlpWeights,
}

/// Tensors of block `l`'s mixture of experts, llama.cpp's names.
pub fn needs(cfg: &ModelConfig, moe: &MoeConfig, l: usize) -> Vec<Need> {
    let (d, e, f) = (cfg.d_model, moe.n_experts, moe.expert_ffn);
    let n = |s: &str| format!("blk.{l}.{s}");
    let mut needs = vec![
        Need::matrix(n("ffn_gate_inp.weight"), e, d),
        Need::experts(n("ffn_gate_exps.weight"), e, f, d),
        Need::experts(n("ffn_up_exps.weight"), e, f, d),
        Need::experts(n("ffn_down_exps.weight"), e, d, f),
    ];
    if let Some(sf) = moe.shared_ffn {
        needs.extend([
            Need::matrix(n("ffn_gate_inp_shexp.weight"), 1, d),
            Need::matrix(n("ffn_gate_shexp.weight"), sf, d),
            Need::matrix(n("ffn_up_shexp.weight"), sf, d),
            Need::matrix(n("ffn_down_shexp.weight"), d, sf),
        ]);
    }
    needs
}

/// Takes block `l`'s expert tensors out of the store.
pub fn take(store: &mut TensorStore, moe: &MoeConfig, l: usize) -> Result<MoeWeights, ModelError> {
    let n = |s: &str| format!("blk.{l}.{s}");
    let shared = match moe.shared_ffn {
        None => None,
        Some(_) => Some(SharedExpertWeights {
            gate_inp: store.matrix(&n("ffn_gate_inp_shexp.weight"))?,
            mlp: MlpWeights {
                gate: store.matrix(&n("ffn_gate_shexp.weight"))?,
                up: store.matrix(&n("ffn_up_shexp.weight"))?,
                down: store.matrix(&n("ffn_down_shexp.weight"))?,
            },
        }),
    };
    Ok(MoeWeights {
        router: store.matrix(&n("ffn_gate_inp.weight"))?,
        gate: store.experts(&n("ffn_gate_exps.weight"))?,
        up: store.experts(&n("ffn_up_exps.weight"))?,
        down: store.experts(&n("ffn_down_exps.weight"))?,
        shared,
    })
}

/// Scratch for a mixture-of-experts MLP over up to `max_rows` tokens
/// (`slots = max_rows * top_k` routed rows).
pub struct MoeActivations {
    pub router_logits: BufferRef,
    pub expert_of: BufferRef,
    pub weight_of: BufferRef,
    pub sorted: BufferRef,
    pub tiles: BufferRef,
    /// Per slot: expert gate (then activation) and up, `expert_ffn` wide.
    pub gate: BufferRef,
    pub up: BufferRef,
    /// Per slot: the expert's down projection, d_model wide.
    pub down: BufferRef,
    /// Per token: the shared expert's output and gate logit.
    pub shared_y: BufferRef,
    pub shared_gate: BufferRef,
}

impl MoeActivations {
    pub fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        moe: &MoeConfig,
        max_rows: usize,
    ) -> Result<MoeActivations, GpuError> {
        let mut made = Vec::with_capacity(10);
        for (label, words) in Self::shapes(cfg, moe, max_rows) {
            made.push(ctx.create_storage(label, 4 * words as u64)?);
        }
        let [router_logits, expert_of, weight_of, sorted, tiles, gate, up, down, shared_y, shared_gate]: [BufferRef; 10] =
            made.try_into().expect("one buffer per shape");
        Ok(MoeActivations {
            router_logits,
            expert_of,
            weight_of,
            sorted,
            tiles,
            gate,
            up,
            down,
            shared_y,
            shared_gate,
        })
    }

    /// Each buffer's label and length in 32-bit words, in the order of the
    /// fields: what `new` allocates and the memory preflight counts.
    pub fn shapes(
        cfg: &ModelConfig,
        moe: &MoeConfig,
        max_rows: usize,
    ) -> [(&'static str, usize); 10] {
        let slots = max_rows * moe.top_k;
        let shared_rows = if moe.shared_ffn.is_some() {
            max_rows
        } else {
            0
        };
        [
            ("router logits", max_rows * moe.n_experts),
            ("expert_of", slots),
            ("weight_of", slots),
            ("sorted slots", slots),
            ("expert tiles", tiles_len(slots, moe.n_experts)),
            ("expert gate", slots * moe.expert_ffn),
            ("expert up", slots * moe.expert_ffn),
            ("expert down", slots * cfg.d_model),
            ("shared expert", shared_rows * cfg.d_model),
            ("shared expert gate", shared_rows),
        ]
    }
}

/// `out = x · Wᵀ` for `rows` token rows: one matmul, or with `as_decode`
/// one a row, each what a decode step's one-row matmul sums.
#[allow(clippy::too_many_arguments)]
fn rows_matmul(
    rec: &mut Recorder,
    x: &GpuBuffer,
    w: &QuantMatrix,
    out: &GpuBuffer,
    rows: usize,
    as_decode: bool,
) -> Result<(), GpuError> {
    if !as_decode || rows == 1 {
        return matmul(rec, x, 0, w, out, 0, rows);
    }
    for r in 0..rows {
        matmul(rec, x, r * w.cols, w, out, r * w.rows, 1)?;
    }
    Ok(())
}

/// Records the mixture of experts over the normed rows `h` (token-major,
/// `rows` of d_model); the result lands in `out` (rows of d_model). `dense`
/// holds scratch for the shared expert's MLP (`dense_ffn` wide per row).
/// `as_decode`: each row summed as a decode step sums it (a verifying
/// pass's rows: the experts a slot at a time, the router and the shared
/// expert a row at a time).
#[allow(clippy::too_many_arguments)]
pub fn record(
    rec: &mut Recorder,
    cfg: &ModelConfig,
    moe: &MoeConfig,
    w: &MoeWeights,
    act: &MoeActivations,
    h: &BufferRef,
    dense: (&BufferRef, &BufferRef),
    out: &BufferRef,
    rows: usize,
    as_decode: bool,
) -> Result<(), GpuError> {
    let routing = Routing {
        expert_of: &act.expert_of,
        weight_of: &act.weight_of,
        tokens: rows,
        top_k: moe.top_k,
        n_experts: moe.n_experts,
    };
    rows_matmul(rec, h, &w.router, &act.router_logits, rows, as_decode)?;
    route(rec, &act.router_logits, 0, &routing, moe.normalize_weights)?;
    let form = if rows <= GEMV_MAX_TOKENS || as_decode {
        ExpertForm::Indexed
    } else {
        ExpertForm::Grouped(group_by_expert(rec, &routing, &act.sorted, &act.tiles)?)
    };
    let slots = routing.slots();
    expert_matmul(
        rec,
        form,
        &routing,
        h,
        ExpertInput::PerToken,
        &w.gate,
        &act.gate,
    )?;
    expert_matmul(
        rec,
        form,
        &routing,
        h,
        ExpertInput::PerToken,
        &w.up,
        &act.up,
    )?;
    gated_act(
        rec,
        &act.gate,
        0,
        &act.up,
        0,
        &act.gate,
        0,
        slots * moe.expert_ffn,
        cfg.activation,
    )?;
    expert_matmul(
        rec,
        form,
        &routing,
        &act.gate,
        ExpertInput::PerSlot,
        &w.down,
        &act.down,
    )?;
    let shared = match &w.shared {
        None => None,
        Some(s) => {
            let (gate, up) = dense;
            let width = s.mlp.gate.rows;
            rows_matmul(rec, h, &s.mlp.gate, gate, rows, as_decode)?;
            rows_matmul(rec, h, &s.mlp.up, up, rows, as_decode)?;
            gated_act(rec, gate, 0, up, 0, gate, 0, rows * width, cfg.activation)?;
            rows_matmul(rec, gate, &s.mlp.down, &act.shared_y, rows, as_decode)?;
            rows_matmul(rec, h, &s.gate_inp, &act.shared_gate, rows, as_decode)?;
            Some(SharedExpert {
                y: &act.shared_y,
                gate: &act.shared_gate,
            })
        }
    };
    combine(rec, &routing, &act.down, cfg.d_model, shared, out)
}
