// Causal grouped-query attention with one invocation per (query row, query
// head) and no barriers: the form for many rows (prefill) on CPU adapters,
// where attention.wgsl's workgroup per (head, row) pays its barriers once
// for every row and head. Same parameters, bindings, masking (causal, the
// sliding window) and softcap as attention.wgsl; the softmax is online
// (flash-style) over the keys one at a time, so a row's keys are read once.
// The statements per vec4 of the head (LOAD_Q, DOT_K, ADD_V, STORE) are
// written out D4 times by kernels::attention rather than looped: llvmpipe
// ends a shader's loops after 65535 iterations in all.
// Sources: attention_common.wgsl, this file.
// Dispatch: [ceil(rows * q_heads / 64), 1, 1].

const D4: u32 = {{D4}}u; // vec4s per head row (head_dim / 4)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p.rows * p.q_heads) {
        return;
    }
    let row = gid.x / p.q_heads;
    let h = gid.x % p.q_heads;
    let pos = p.pos0 + row;
    var lo = 0u;
    if (p.window != 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    let kv_stride = p.kv_heads * D4;
    let kv_base = p.kv_offset / 4u + (h / p.group) * D4;
    let head_base = (row * p.q_heads + h) * p.head_dim;
    var qv: array<vec4<f32>, D4>;
    let qb = p.q_offset + head_base;
    {{LOAD_Q}}
    var m = NEG_BIG;
    var l = 0.0;
    var acc: array<vec4<f32>, D4>;
    for (var key = lo; key <= pos; key++) {
        let kb = kv_base + key * kv_stride;
        var dot4 = vec4(0.0);
        {{DOT_K}}
        var s = dot4.x + dot4.y + dot4.z + dot4.w;
        if (p.use_softcap != 0u) {
            s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
        }
        // A new max rescales what came before (alpha = 1 otherwise); the
        // clamp keeps the first key's exp argument in range.
        let m_new = max(m, s);
        let alpha = exp(max(m - m_new, -80.0));
        let wgt = exp(s - m_new);
        m = m_new;
        l = l * alpha + wgt;
        {{ADD_V}}
    }
    // l >= 1: the key holding the max contributes exp(0).
    let ob = p.out_offset + head_base;
    {{STORE}}
}
