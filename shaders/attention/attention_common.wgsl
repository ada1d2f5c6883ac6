// Parameters, bindings and constants of the attention kernels
// (attention.wgsl, attention_lanes.wgsl, attention_split.wgsl and its
// merge), field for field
// kernels::attention::Params; concatenated in front of each.

// Finite stand-in for -infinity: no inf arithmetic, which some exp
// implementations mishandle.
const NEG_BIG: f32 = -3.0e38;

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;              // [q_offset + rows * q_heads * head_dim]: [rows][q_heads][head_dim]
// K and V: four elements a word, vec4<f32>, or f16 four to a vec2<u32>
// (KV_WORD; kernels::kv::KvDtype). Either way element e is in word e / 4,
// so kv_offset / 4 indexes both; load_k / load_v give f32.
@group(0) @binding(2) var<storage, read> k_cache: array<{{KV_WORD}}>;  // [(kv_offset + ctx_len * kv_heads * head_dim) / 4]: [ctx_len][kv_heads][head_dim / 4]
@group(0) @binding(3) var<storage, read> v_cache: array<{{KV_WORD}}>;  // same layout as k_cache
@group(0) @binding(4) var<storage, read_write> out: array<f32>;      // [out_offset + rows * q_heads * head_dim]: [rows][q_heads][head_dim]

fn unpack_f16x4(w: vec2<u32>) -> vec4<f32> {
    return vec4(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn load_k(i: u32) -> vec4<f32> {
    return {{KV_UNPACK}}(k_cache[i]);
}

fn load_v(i: u32) -> vec4<f32> {
    return {{KV_UNPACK}}(v_cache[i]);
}

// The split form's cut of query row `row` (attention_split.wgsl and its
// merge): (span, splits), from the keys the row sees, as
// kernels::attention::split_plan_of_row computes it: about p.wanted splits,
// none shorter than p.min_span keys (but for a row with fewer) nor longer
// than 256. Each row is cut as a decode step at its position is, so a
// verifying pass's rows sum their keys as decode does.
fn split_of_row(row: u32) -> vec2<u32> {
    var keys = p.pos0 + row + 1u;
    if (p.window != 0u) {
        keys = min(keys, p.window);
    }
    let span = min(clamp((keys + p.wanted - 1u) / p.wanted, p.min_span, 256u), max(keys, 1u));
    return vec2<u32>(span, max((keys + span - 1u) / span, 1u));
}
