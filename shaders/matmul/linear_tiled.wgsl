// Entry point of the fused linear layer, many-token form (prefill): the
// register-blocked matmul over p.m consecutive token rows with the store,
// add (both by p.accumulate) and glu (by p.glu) epilogues of
// linear_gemv.wgsl (bias included). The norm
// prologue is a separate dispatch in this form (kernels::linear): a tile's
// invocation sees only part of a row, so it cannot normalise it.
// Sources: quant.wgsl, matmul_common.wgsl, matmul_tiled.wgsl, act_fns.wgsl,
// this file.
#if BIAS
@group(0) @binding({{BIAS_BINDING}}) var<storage, read> bias: array<f32>; // [bias_offset + rows]
#endif
// Dispatch: [ceil(rows / (WG / TT * TN)), ceil(m / (TT * TM)), 1], TT = p.token_tiles.

// Gating (p.glu != 0, a value: a model's gated and plain projections share
// this pipeline): the part's rows are interleaved gate/up pairs and out
// takes one element a pair (out_offset and out_stride count those).
// emit_tile hands a token's sums over in row order, so each pair's gate
// (even row) arrives just before its up, and waits here. out_base is then
// twice the output element's index, and emit halves it. A gated
// projection has no bias (kernels::linear refuses one).
var<private> gate_sum: f32;

fn x_base(tok: u32) -> u32 {
    return p.x_offset + tok * p.k;
}

fn out_base(tok: u32) -> u32 {
    return select(1u, 2u, p.glu != 0u) * (p.out_offset + tok * p.out_stride);
}

fn emit(i: u32, row: u32, v: f32) {
    if (p.glu != 0u) {
        if ((row & 1u) == 0u) {
            gate_sum = v;
        } else {
            out[i / 2u] = gate_act(p.glu, gate_sum) * v;
        }
        return;
    }
    var s = v;
    #if BIAS
    s += bias[p.bias_offset + row];
    #endif
    if (p.accumulate != 0u) {
        s += out[i];
    }
    out[i] = s;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
    #if X_LANE
    @builtin(subgroup_invocation_id) sg_lane: u32,
    #endif
) {
    #if X_LANE
    x_lane = sg_lane;
    #endif
    tiled(lid, wid.x, wid.y, p.m, 0u);
}
