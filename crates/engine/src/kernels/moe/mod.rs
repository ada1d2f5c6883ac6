//! Mixture-of-experts kernels: the router, and expert matmuls that read its
//! choices on the GPU, so a step never waits on the CPU to learn which
//! experts a token picked.
//!
//! A step of `tokens` rows routes each token to `top_k` experts: routed
//! *slot* `s = t * top_k + j` is token t's j-th pick. `route` writes
//! `expert_of[s]` and `weight_of[s]`; expert matmuls then compute one output
//! row per slot, in one of two forms over the same weights:
//! - `ExpertForm::Indexed` (decode, a few tokens): one matrix-vector
//!   workgroup column per slot that reads its expert id and streams that
//!   expert's slab of the stack;
//! - `ExpertForm::Grouped` (prefill): `group_by_expert` sorts slots by expert
//!   (count, prefix sum, stable scatter) and tiles each expert's run, and the
//!   register-blocked kernel runs each tile's expert over its gathered slots,
//!   so a weight decoded once serves every token routed to it.
//!
//! `combine` then sums each token's slots weighted by the router (plus a
//! gated shared expert where the model has one).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::matmul::tiled::{
    check_groups, tiled_rows, tiled_token_tiles, tiled_tokens, Operand, Params as MatmulParams,
    Variant, EXPERT_TILE,
};
use crate::kernels::weights::ExpertStack;
use crate::kernels::{check_elems, words};

/// A step's routing, as `route` left it on the GPU.
#[derive(Clone, Copy)]
pub struct Routing<'a> {
    /// `[tokens * top_k]` u32: the expert of each slot.
    pub expert_of: &'a GpuBuffer,
    /// `[tokens * top_k]` f32: the router weight of each slot.
    pub weight_of: &'a GpuBuffer,
    pub tokens: usize,
    pub top_k: usize,
    pub n_experts: usize,
}

impl Routing<'_> {
    pub fn slots(&self) -> usize {
        self.tokens * self.top_k
    }
}

kernel_params! {
    pub(crate) struct RouterParams {
        rows: u32,
        n_experts: u32,
        top_k: u32,
        normalize: u32,
        /// element of logits where token 0's row starts
        logits_offset: u32,
    }
}

const ROUTER: KernelSpec = KernelSpec {
    name: "moe_router",
    sources: &[include_str!("../../../../../shaders/moe/moe_router.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite, Access::ReadWrite],
};

/// Softmax over each token's `n_experts` gate logits (rows of `logits` from
/// element `logits_offset`), then its `top_k` experts, best first (equal
/// logits: lower index first), with their probabilities, renormalized over
/// the chosen k when `normalize`.
pub fn route(
    rec: &mut Recorder,
    logits: &GpuBuffer,
    logits_offset: usize,
    routing: &Routing,
    normalize: bool,
) -> Result<(), GpuError> {
    const K: &str = "moe_router";
    let r = routing;
    if r.top_k == 0 || r.top_k > r.n_experts {
        return Err(shape_err(
            K,
            format!("top {} of {} experts", r.top_k, r.n_experts),
        ));
    }
    check_elems(K, "logits", logits, logits_offset + r.tokens * r.n_experts)?;
    check_elems(K, "expert_of", r.expert_of, r.slots())?;
    check_elems(K, "weight_of", r.weight_of, r.slots())?;
    // The gate logits read; each slot's expert and weight written.
    rec.moved(words(r.tokens * r.n_experts + 2 * r.slots()));
    let params = RouterParams {
        rows: r.tokens as u32,
        n_experts: r.n_experts as u32,
        top_k: r.top_k as u32,
        normalize: normalize as u32,
        logits_offset: logits_offset as u32,
    };
    rec.dispatch(
        &ROUTER,
        &params,
        &[logits, r.expert_of, r.weight_of],
        workgroups_for(r.tokens as u32, 64),
    );
    Ok(())
}

/// Slots sorted by expert and cut into tiles, as `group_by_expert` left them.
#[derive(Clone, Copy)]
pub struct Groups<'a> {
    /// `[slots]` u32: slot indices, grouped by expert, in slot order within one.
    pub sorted: &'a GpuBuffer,
    /// `[3 * max_tiles]` u32: (expert, first index into `sorted`, count).
    pub tiles: &'a GpuBuffer,
    /// Token tiles per workgroup of the tiled kernel; a tile holds
    /// `tiled_tokens(tt)` slots at most.
    tt: u32,
    max_tiles: u32,
}

/// Length in u32 of a tile list for `slots` slots over `n_experts`, for any
/// tile size the grouped form picks: each expert's run needs
/// floor(count / tile) full tiles plus at most one partial one.
pub fn tiles_len(slots: usize, n_experts: usize) -> usize {
    3 * max_tiles(slots, n_experts, tiled_tokens(1))
}

fn max_tiles(slots: usize, n_experts: usize, tile: usize) -> usize {
    slots / tile + n_experts.min(slots)
}

kernel_params! {
    pub(crate) struct GroupParams {
        slots: u32,
        /// most slots per tile
        tile: u32,
        /// tiles the matmul dispatch covers
        max_tiles: u32,
    }
}

/// Sorts the routed slots by expert into `sorted` and writes the tile list
/// into `tiles` (at least `tiles_len` long), on the GPU.
pub fn group_by_expert<'a>(
    rec: &mut Recorder,
    routing: &Routing,
    sorted: &'a GpuBuffer,
    tiles: &'a GpuBuffer,
) -> Result<Groups<'a>, GpuError> {
    const K: &str = "moe_group";
    let slots = routing.slots();
    let n_experts = routing.n_experts;
    // Tiles sized for an even spread of slots over experts.
    let tt = tiled_token_tiles(slots.div_ceil(n_experts));
    let tile = tiled_tokens(tt);
    let max_tiles = max_tiles(slots, n_experts, tile);
    check_elems(K, "expert_of", routing.expert_of, slots)?;
    check_elems(K, "sorted", sorted, slots)?;
    check_elems(K, "tiles", tiles, 3 * max_tiles)?;
    check_groups(K, max_tiles as u32, || format!("{max_tiles} tiles"))?;
    // Two u32 arrays of n_experts in workgroup memory: keep within WebGPU's
    // default 16 KiB.
    if n_experts > 2048 {
        return Err(shape_err(K, format!("{n_experts} experts (at most 2048)")));
    }
    let defines = [("N_EXPERTS", n_experts.to_string().into())];
    let name = format!("moe_group_e{n_experts}");
    let spec = KernelSpec {
        name: &name,
        sources: &[include_str!("../../../../../shaders/moe/moe_group.wgsl")],
        flags: &[],
        defines: &defines,
        entry: "main",
        storage: &[Access::Read, Access::ReadWrite, Access::ReadWrite],
    };
    let params = GroupParams {
        slots: slots as u32,
        tile: tile as u32,
        max_tiles: max_tiles as u32,
    };
    rec.dispatch(
        &spec,
        &params,
        &[routing.expert_of, tiles, sorted],
        [1, 1, 1],
    );
    Ok(Groups {
        sorted,
        tiles,
        tt,
        max_tiles: max_tiles as u32,
    })
}

/// How `expert_matmul` runs the slots.
#[derive(Clone, Copy)]
pub enum ExpertForm<'a> {
    /// One matrix-vector workgroup column per slot (decode).
    Indexed,
    /// Tiles of slots grouped by expert (prefill).
    Grouped(Groups<'a>),
}

/// Where an expert matmul reads each slot's input row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpertInput {
    /// `x` holds one row per token (gate and up read the token's state).
    PerToken,
    /// `x` holds one row per slot (down reads its slot's activation).
    PerSlot,
}

const EXPERT_GEMV_STORAGE: &[Access] = &[
    Access::Weights,
    Access::Read,
    Access::ReadWrite,
    Access::Read,
];
const EXPERT_TILED_STORAGE: &[Access] = &[
    Access::Weights,
    Access::Read,
    Access::ReadWrite,
    Access::Read,
    Access::Read,
];

/// `out[s, r] = sum_k x[row(s), k] * W_e[r, k]` for every slot `s` with
/// `e = expert_of[s]`, `r < stack.rows`; `row(s)` per `input`. Output rows are
/// `stack.rows` apart, slot-major.
pub fn expert_matmul(
    rec: &mut Recorder,
    form: ExpertForm,
    routing: &Routing,
    x: &GpuBuffer,
    input: ExpertInput,
    stack: &ExpertStack,
    out: &GpuBuffer,
) -> Result<(), GpuError> {
    const K: &str = "moe_matmul";
    let slots = routing.slots();
    if stack.experts != routing.n_experts {
        return Err(shape_err(
            K,
            format!(
                "a stack of {} experts routed over {}",
                stack.experts, routing.n_experts
            ),
        ));
    }
    let (x_rows, x_div) = match input {
        ExpertInput::PerToken => (routing.tokens, routing.top_k),
        ExpertInput::PerSlot => (slots, 1),
    };
    check_elems(K, "x", x, x_rows * stack.cols())?;
    check_elems(K, "out", out, slots * stack.rows)?;
    check_elems(K, "expert_of", routing.expert_of, slots)?;
    if slots == 0 {
        return Ok(());
    }
    let w = &stack.matrix;
    // The routed experts' slabs (a slot each: a token's top k are distinct,
    // tokens may share), x's rows and the slots' outputs.
    let slab = (w.bytes() / stack.experts) as u64;
    rec.moved(slots as u64 * slab + words(x_rows * stack.cols() + slots * stack.rows + slots));
    let part_params = |part: &crate::kernels::weights::MatrixPart| {
        let mut p = MatmulParams::new(w, part, 1, stack.rows, 0, 0, stack.rows);
        p.x_div = x_div as u32;
        p.first_expert = (part.first_row / stack.rows) as u32;
        p.part_experts = (part.rows / stack.rows) as u32;
        if let ExpertForm::Grouped(g) = &form {
            p.token_tiles = g.tt;
        }
        p
    };
    // Per form: the kernel, its storage, its output rows per workgroup, the
    // routing buffers it reads after (weights, x, out), and its workgroup rows
    // (one per slot, or one per tile).
    let (variant, storage, rows_per_group, extra, y_groups) = match form {
        ExpertForm::Indexed => {
            check_groups(K, slots as u32, || format!("{slots} slots"))?;
            let rows_per_group = rec.ctx().tuning.gemv_rows_for(1);
            (
                Variant::gemv(w, Operand::Experts, rows_per_group, 1),
                EXPERT_GEMV_STORAGE,
                rows_per_group,
                ([routing.expert_of, routing.expert_of], 1),
                slots as u32,
            )
        }
        ExpertForm::Grouped(g) => {
            check_elems(K, "sorted", g.sorted, slots)?;
            check_elems(K, "tiles", g.tiles, 3 * g.max_tiles as usize)?;
            (
                Variant::tiled(w, Operand::Experts, EXPERT_TILE),
                EXPERT_TILED_STORAGE,
                tiled_rows(g.tt),
                ([g.tiles, g.sorted], 2),
                g.max_tiles,
            )
        }
    };
    let key = variant.key();
    let row_groups = (stack.rows as u32).div_ceil(rows_per_group);
    check_groups(K, row_groups, || format!("{} rows", stack.rows))?;
    for part in &w.parts {
        let (extra, n_extra) = extra;
        let mut buffers = [&*part.buffer, x, out, out, out];
        buffers[3..3 + n_extra].copy_from_slice(&extra[..n_extra]);
        rec.dispatch_variant(
            &key,
            || variant.spec(storage),
            &part_params(part),
            &buffers[..3 + n_extra],
            [row_groups, y_groups, 1],
        );
    }
    Ok(())
}

/// A shared expert's contribution to `combine`: its output rows and the
/// per-token logit of its sigmoid gate.
#[derive(Clone, Copy)]
pub struct SharedExpert<'a> {
    pub y: &'a GpuBuffer,
    pub gate: &'a GpuBuffer,
}

kernel_params! {
    pub(crate) struct CombineParams {
        rows: u32,
        d: u32,
        top_k: u32,
    }
}

/// `out[t, c] = sum_j weight_of[t, j] * y[t * top_k + j, c]` (+
/// `sigmoid(shared.gate[t]) * shared.y[t, c]`), for `c < d`; `y` holds the
/// down projections per slot.
pub fn combine(
    rec: &mut Recorder,
    routing: &Routing,
    y: &GpuBuffer,
    d: usize,
    shared: Option<SharedExpert>,
    out: &GpuBuffer,
) -> Result<(), GpuError> {
    const K: &str = "moe_combine";
    let n = routing.tokens * d;
    check_elems(K, "y", y, routing.slots() * d)?;
    check_elems(K, "weight_of", routing.weight_of, routing.slots())?;
    check_elems(K, "out", out, n)?;
    if let Some(s) = &shared {
        check_elems(K, "shared y", s.y, n)?;
        check_elems(K, "shared gate", s.gate, routing.tokens)?;
    }
    // The slots' rows and weights read (with the shared expert's), out written.
    let shared_rows = shared.as_ref().map_or(0, |_| n + routing.tokens);
    rec.moved(words(routing.slots() * (d + 1) + shared_rows + n));
    let spec = KernelSpec {
        name: if shared.is_some() {
            "moe_combine_shared"
        } else {
            "moe_combine"
        },
        sources: &[include_str!("../../../../../shaders/moe/moe_combine.wgsl")],
        flags: &[("SHARED", shared.is_some())],
        defines: &[],
        entry: "main",
        storage: if shared.is_some() {
            &[
                Access::Read,
                Access::Read,
                Access::ReadWrite,
                Access::Read,
                Access::Read,
            ]
        } else {
            &[Access::Read, Access::Read, Access::ReadWrite]
        },
    };
    let params = CombineParams {
        rows: routing.tokens as u32,
        d: d as u32,
        top_k: routing.top_k as u32,
    };
    let (buffers, bound) = match &shared {
        Some(s) => ([y, routing.weight_of, out, s.y, s.gate], 5),
        None => ([y, routing.weight_of, out, out, out], 3),
    };
    rec.dispatch(
        &spec,
        &params,
        &buffers[..bound],
        workgroups_for(n as u32, 256),
    );
    Ok(())
}

#[cfg(test)]
mod tests;
