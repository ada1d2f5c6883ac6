// Parameters, bindings and constants of both attention kernels
// (attention.wgsl, attention_lanes.wgsl), field for field
// kernels::attention::Params; concatenated in front of each.

struct Params {
    rows: u32,        // query rows (dispatch y)
    pos0: u32,        // absolute position of row 0
    q_heads: u32,     // query heads (dispatch x)
    kv_heads: u32,
    head_dim: u32,    // multiple of 4, <= 4 * WG
    group: u32,       // q_heads / kv_heads: head h reads kv head h / group
    window: u32,      // sliding window in positions; 0 = none
    use_softcap: u32, // 1: s = softcap * tanh(s / softcap)
    scale: f32,       // multiplies q.k (before the softcap)
    softcap: f32,
    q_offset: u32,    // first element of q
    kv_offset: u32,   // first element of this layer's slice of k_cache / v_cache; multiple of 4
    out_offset: u32,  // first element of out
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Finite stand-in for -infinity: no inf arithmetic, which some exp
// implementations mishandle.
const NEG_BIG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;              // [q_offset + rows * q_heads * head_dim]: [rows][q_heads][head_dim]
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<f32>>;  // [(kv_offset + ctx_len * kv_heads * head_dim) / 4]: [ctx_len][kv_heads][head_dim / 4]
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<f32>>;  // same layout as k_cache
@group(0) @binding(4) var<storage, read_write> out: array<f32>;      // [out_offset + rows * q_heads * head_dim]: [rows][q_heads][head_dim]
