// Entry point of the fused linear layer, many-token form (prefill): the
// register-blocked matmul over p.m consecutive token rows with the store,
// add (both by p.accumulate) and glu epilogues of linear_gemv.wgsl (bias
// included). The norm
// prologue is a separate dispatch in this form (kernels::linear): a tile's
// invocation sees only part of a row, so it cannot normalise it.
// Sources: quant.wgsl, matmul_common.wgsl, matmul_tiled.wgsl, [act_fns.wgsl,]
// this file.
#if BIAS
@group(0) @binding({{BIAS_BINDING}}) var<storage, read> bias: array<f32>; // [bias_offset + rows]
#endif
// Dispatch: [ceil(rows / (WG / TT * TN)), ceil(m / (TT * TM)), 1], TT = p.token_tiles.

// Gating (`#if GLU`): the part's rows are interleaved gate/up pairs and
// out takes one element a pair (out_offset and out_stride count those).
// emit_tile hands a token's sums over in row order, so each pair's gate
// (even row) arrives just before its up, and waits here. out_base is then
// twice the output element's index, and emit halves it.
#if GLU
var<private> gate_sum: f32;
#endif
const OUT_SCALE: u32 = {{OUT_SCALE}}u;

fn x_base(tok: u32) -> u32 {
    return p.x_offset + tok * p.k;
}

fn out_base(tok: u32) -> u32 {
    return OUT_SCALE * (p.out_offset + tok * p.out_stride);
}

fn emit(i: u32, row: u32, v: f32) {
    #if GLU
    if ((row & 1u) == 0u) {
        gate_sum = v;
    } else {
        out[i / 2u] = {{ACT}}(gate_sum) * v;
    }
    #else
    var s = v;
    #endif
    #if BIAS
    s += bias[p.bias_offset + row];
    #endif
    #if !GLU
    if (p.accumulate != 0u) {
        s += out[i];
    }
    out[i] = s;
    #endif
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
