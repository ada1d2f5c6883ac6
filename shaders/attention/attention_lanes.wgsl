// Causal grouped-query attention with one invocation per (query row, KV
// head, HL of the query heads that read it) and no barriers: the form for
// many rows (prefill) on CPU adapters, where attention.wgsl's workgroup per
// (head, row) pays its barriers once for every row and head. Same
// parameters, bindings, masking (causal, the sliding window) and softcap as
// attention.wgsl; the softmax is online (flash-style) over the keys one at a
// time, so a row's keys are read once, and each read serves the HL heads
// the invocation holds: llvmpipe loads storage one lane at a time, so a
// key's K and V cost the same whether one head uses them or eight.
// The statements per head and vec4 of the head (LOAD_Q, DOT_K, SCORE, ADD_V,
// STORE) are written out by kernels::attention rather than looped: llvmpipe
// ends a shader's loops after 65535 iterations in all.
// Sources: attention_common.wgsl, this file.
// Dispatch: [ceil(rows * q_heads / HL / WG_LANES), 1, 1].

const D4: u32 = {{D4}}u; // vec4s per head row (head_dim / 4)
const HL: u32 = {{HL}}u; // query heads an invocation holds; divides p.group

@compute @workgroup_size({{WG_LANES}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let per_row = p.q_heads / HL;
    if (gid.x >= p.rows * per_row) {
        return;
    }
    let row = gid.x / per_row;
    let h0 = (gid.x % per_row) * HL; // first query head; all HL read KV head h0 / group
    let pos = p.pos0 + row;
    var lo = 0u;
    if (p.window != 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    let kv_stride = p.kv_heads * D4;
    let kv_base = p.kv_offset / 4u + (h0 / p.group) * D4;
    let head_base = (row * p.q_heads + h0) * p.head_dim; // head h0 + j at head_base + j * head_dim
    var qv: array<vec4<f32>, HL * D4>;
    let qb = p.q_offset + head_base;
    {{LOAD_Q}}
    var m: array<f32, HL>;
    var l: array<f32, HL>;
    {{INIT}}
    var acc: array<vec4<f32>, HL * D4>;
    var kv: array<vec4<f32>, D4>; // the key's K, then its V
    for (var key = lo; key <= pos; key++) {
        let kb = kv_base + key * kv_stride;
        {{LOAD_K}}
        // Zeroed by its constructor each key: with the declaration's implicit
        // zero, Chromium on SwiftShader kept the previous key's sums.
        var dot4 = array<vec4<f32>, HL>();
        {{DOT_K}}
        var alpha: array<f32, HL>;
        var wgt: array<f32, HL>;
        {{SCORE}}
        {{LOAD_V}}
        {{ADD_V}}
    }
    // l >= 1: the key holding the max contributes exp(0).
    let ob = p.out_offset + head_base;
    {{STORE}}
}

// One head's online-softmax step for the raw score s given the head's
// running max m and sum l: (the factor that rescales what came before, this
// key's weight, the new max, the new sum). The factor is 1 unless s is a
// new max; the clamp keeps the first key's exp argument in range.
fn online_step(s_raw: f32, m: f32, l: f32) -> vec4<f32> {
    var s = s_raw;
    if (p.use_softcap != 0u) {
        s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
    }
    let m_new = max(m, s);
    let alpha = exp(max(m - m_new, -80.0));
    let wgt = exp(s - m_new);
    return vec4(alpha, wgt, m_new, l * alpha + wgt);
}
