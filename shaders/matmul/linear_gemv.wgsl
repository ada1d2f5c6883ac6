// Entry point of the fused linear layer, matrix-vector form (decode): what a
// transformer block does around a projection, in the projection's dispatch.
//   prologue (NORM): x is RMS-normalised on the fly. Each workgroup computes
//     its token rows' scale itself (see sum_sq below), so no separate norm
//     dispatch and no normed copy of x exist.
//   epilogue: store or add by p.accumulate (one pipeline for both), or glu
//   (EPILOGUE 2):
//     store: out = W x (+ bias)
//     add:   out += W x (+ bias); the residual stream absorbs a projection
//     glu:   gate and up rows interleaved in W (gate row i is weight row 2i,
//            up row i is 2i + 1): out[i] = act(gate_i . x) * (up_i . x)
// ROWS counts weight rows (even for glu; a part holds whole pairs), p.rows the
// part's weight rows. Sources: quant.wgsl, a matrix-vector core (the unit
// one: matmul_common.wgsl, matmul_gemv.wgsl, linear_x_unit.wgsl; or the vec4
// one: matvec.wgsl, quant_vec.wgsl, linear_x_vec.wgsl), act_fns.wgsl, then
// this file; the x_* file reads x through the norm.
// Extra bindings after the core's, present per variant:
#if NORM
@group(0) @binding({{NORM_BINDING}}) {{NORM_DECL}} // [ceil(k / 4)], zero-padded; storage or uniform as x
#endif
#if BIAS
@group(0) @binding({{BIAS_BINDING}}) var<storage, read> bias: array<f32>; // [bias_offset + rows]
#endif
// Dispatch: ceil(rows / ROWS) workgroups, folded over x and y past 65535.

// The norm costs no pass and no barrier of its own: RMSNorm(x) . w =
// scale * ((x * norm_w) . w), and the lanes that load x for the dot products
// load each element exactly once, so they sum its squares on the way; the
// sums travel through the reduction's one barrier with the dot products.
// One sum a token row (the x reader adds to its token's).
var<private> sum_sq: array<f32, TOKENS>;
var<workgroup> sq_partial: array<f32, WG * TOKENS>;

fn stash_lane(lid: u32) {
    #if NORM
    for (var t = 0u; t < TOKENS; t++) {
        sq_partial[t * WG + lid] = sum_sq[t];
    }
    #endif
}

// Where the core reduces rows as a tree or with subgroups (REDUCE != 0,
// GPUs), the lanes' sums of squares become one the same way, as a tree in
// sq_partial[t * WG] for token row t: otherwise every storing lane would
// add X_LANES of them. After reduce_rows; workgroup-uniform control flow.
fn reduce_norm(lid: u32) {
    #if NORM
    if (REDUCE != 0u) {
        for (var s = X_LANES / 2u; s > 0u; s >>= 1u) {
            if (lid < s) {
                for (var t = 0u; t < TOKENS; t++) {
                    sq_partial[t * WG + lid] += sq_partial[t * WG + lid + s];
                }
            }
            workgroupBarrier();
        }
    }
    #endif
}

// 1 / sqrt(mean(x^2) + eps) of token row t (after reduce_norm), or 1.
fn x_scale(t: u32) -> f32 {
    #if NORM
    var s = sq_partial[t * WG];
    if (REDUCE == 0u) {
        for (var j = 1u; j < X_LANES; j++) {
            s += sq_partial[t * WG + j];
        }
    }
    return inverseSqrt(s / f32(p.k) + p.eps);
    #else
    return 1.0;
    #endif
}

fn bias_of(row: u32) -> f32 {
    #if BIAS
    return bias[p.bias_offset + row];
    #else
    return 0.0;
    #endif
}

const EPILOGUE: u32 = {{EPILOGUE}}u;

// A workgroup may hold more rows than lanes (the vec4 core on a CPU
// adapter), so each lane emits every WG-th one.
fn emit_rows(lid: u32, row0: u32) {
    if (EPILOGUE == 2u) {
        for (var i = lid; i < ROWS / 2u * TOKENS; i += WG) {
            let r = i / TOKENS;
            let t = i % TOKENS;
            let wrow = row0 + 2u * r;
            if (wrow < p.rows && t < p.m) {
                let s = x_scale(t);
                let g = row_sum(2u * r * TOKENS + t) * s;
                let u = row_sum((2u * r + 1u) * TOKENS + t) * s;
                out[p.out_offset + t * p.out_stride + wrow / 2u] = {{ACT}}(g) * u;
            }
        }
        return;
    }
    for (var i = lid; i < ROWS * TOKENS; i += WG) {
        let r = i / TOKENS;
        let t = i % TOKENS;
        let row = row0 + r;
        if (row < p.rows && t < p.m) {
            let o = p.out_offset + t * p.out_stride + row;
            var v = row_sum(i) * x_scale(t) + bias_of(row);
            if (p.accumulate != 0u) {
                v += out[o];
            }
            out[o] = v;
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    #if SG
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(num_subgroups) sg_count: u32,
    #endif
) {
    #if SG
    sg = vec4<u32>(sg_lane, sg_size, sg_id, sg_count);
    #endif
    let row0 = (wid.x + wid.y * groups.x) * ROWS;
    if (row0 >= p.rows) {
        return; // whole workgroup: uniform
    }
    gemv_partials(lid, row0, 0u, p.x_offset);
    reduce_rows(lid);
    reduce_norm(lid);
    emit_rows(lid, row0);
}
