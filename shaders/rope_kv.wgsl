// After the fused QKV projection: per-head RMSNorm of queries and keys (Qwen3,
// Gemma 3; the QK_NORM variant), RoPE on both, queries to `q_out`, keys and
// values into the layer's slice of the KV cache. One dispatch instead of up
// to eight (two norms, two ropes, two cache writes, and the copies between).
//
// qkv rows are [q_heads | kv_heads | kv_heads] heads of head_dim, one row per
// token (token t at position pos0 + t). One workgroup per (token, head slot):
// slots 0 .. q_heads are queries, then keys, then values.
// Rotation as rope.wgsl: pair i (< n_rot / 2) turns by
// pos * base^(-2i / n_rot) / factor_i * freq_scale (factor_i is 1, or
// freq_factors[i] in the FREQ_FACTORS variant); interleaved pairs (2i, 2i + 1) or
// neox pairs (i, i + n_rot / 2); elements from n_rot on pass through. YaRN's
// ramp and magnitude scale as rope.wgsl applies them.
// Cache layout: see kernels/kv.rs. An f16 cache (the F16 variant: lines
// marked F16 live, F32 ones commented out, and the reverse) is written a word
// (two elements) at a time: keys are rotated into workgroup memory first.

struct Params {
    rows: u32,           // tokens
    q_heads: u32,
    kv_heads: u32,
    head_dim: u32,       // <= 256
    n_rot: u32,          // even, <= head_dim
    pos0: u32,           // position of token 0
    neox: u32,           // 0: interleaved pairs, 1: neox pairs
    qkv_offset: u32,     // first element of qkv
    q_offset: u32,       // first element of q_out
    layer_offset: u32,   // first element of this layer's slice of each cache
    log2_base_step: f32, // 2 * log2(base) / n_rot, computed in f64 on the CPU
    freq_scale: f32,
    eps: f32,            // of the q/k norms
    ext_factor: f32,     // YaRN, see rope.wgsl; 0: off
    corr_low: f32,
    corr_high: f32,
    mscale: f32,         // multiplies cos and sin
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;          // [qkv_offset + rows * (q_heads + 2 kv_heads) * head_dim]
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;  // [q_offset + rows * q_heads * head_dim]
@group(0) @binding(3) var<storage, read_write> k_cache: array<{{KV_WORD}}>; // [layers][ctx_len][kv_heads][head_dim]
@group(0) @binding(4) var<storage, read_write> v_cache: array<{{KV_WORD}}>; // same layout
{{QK_NORM}}@group(0) @binding(5) var<storage, read> q_norm: array<f32>; // [head_dim]
{{QK_NORM}}@group(0) @binding(6) var<storage, read> k_norm: array<f32>; // [head_dim]
// After the norms where they are bound (7), else 5.
{{FREQ_FACTORS}}@group(0) @binding({{FF_BINDING}}) var<storage, read> freq_factors: array<f32>; // [n_rot / 2], > 0

const WG: u32 = 64u;
const TWO_PI_HI: f32 = 6.28125;               // see rope.wgsl
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

var<workgroup> head: array<f32, 256>;
var<workgroup> partial: array<f32, WG>;

// cos and sin of pair i's angle at `pos`, exactly as rope.wgsl computes them.
fn rotation(i: u32, pos: u32) -> vec2<f32> {
    var freq = exp2(-f32(i) * p.log2_base_step);
{{FREQ_FACTORS}}    freq /= freq_factors[i];
    let theta = f32(pos) * freq;
    var angle = theta * p.freq_scale;
    if (p.ext_factor != 0.0) {
        let y = (f32(i) - p.corr_low) / max(0.001, p.corr_high - p.corr_low);
        let mix = (1.0 - clamp(y, 0.0, 1.0)) * p.ext_factor;
        angle = angle * (1.0 - mix) + theta * mix;
    }
    let k = round(angle * INV_TWO_PI);
    let r = (angle - k * TWO_PI_HI) - k * TWO_PI_LO;
    return vec2<f32>(cos(r), sin(r)) * p.mscale;
}

// First cache element of a (token, K or V slot) head.
fn cache_base(slot: u32, token: u32) -> u32 {
    let hd = p.head_dim;
    let row = p.layer_offset + (p.pos0 + token) * p.kv_heads * hd;
    return row + ((slot - p.q_heads) % p.kv_heads) * hd;
}

// Where element e of a (token, slot) head goes (an f16 cache: for keys, to
// workgroup memory, written out by main as pairs).
fn store(slot: u32, token: u32, e: u32, v: f32) {
    let hd = p.head_dim;
    if (slot < p.q_heads) {
        q_out[p.q_offset + (token * p.q_heads + slot) * hd + e] = v;
{{F32}}    } else if (slot < p.q_heads + p.kv_heads) {
{{F32}}        k_cache[cache_base(slot, token) + e] = v;
{{F32}}    } else {
{{F32}}        v_cache[cache_base(slot, token) + e] = v;
{{F16}}    } else {
{{F16}}        head[e] = v;
    }
}

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let slots = p.q_heads + 2u * p.kv_heads;
    let g = wid.x + wid.y * groups.x;
    if (g >= p.rows * slots) {
        return; // whole workgroup: uniform
    }
    let token = g / slots;
    let slot = g % slots;
    let hd = p.head_dim;
    let src = p.qkv_offset + g * hd; // rows are contiguous runs of slots
    if (slot >= p.q_heads + p.kv_heads) {
{{F32}}        for (var e = lid; e < hd; e += WG) {
{{F32}}            store(slot, token, e, qkv[src + e]);
{{F32}}        }
{{F16}}        let vb = cache_base(slot, token) / 2u;
{{F16}}        for (var i = lid; i < hd / 2u; i += WG) {
{{F16}}            v_cache[vb + i] = pack2x16float(vec2(qkv[src + 2u * i], qkv[src + 2u * i + 1u]));
{{F16}}        }
        return; // uniform: slot depends on the workgroup id alone
    }
    var ss = 0.0;
    for (var e = lid; e < hd; e += WG) {
        let v = qkv[src + e];
        head[e] = v;
        ss += v * v;
    }
    partial[lid] = ss;
    workgroupBarrier();
{{QK_NORM}}    var total = 0.0;
{{QK_NORM}}    for (var j = 0u; j < WG; j++) {
{{QK_NORM}}        total += partial[j];
{{QK_NORM}}    }
{{QK_NORM}}    let scale = inverseSqrt(total / f32(hd) + p.eps);
{{QK_NORM}}    let is_q = slot < p.q_heads;
{{QK_NORM}}    for (var e = lid; e < hd; e += WG) {
{{QK_NORM}}        head[e] *= scale * select(k_norm[e], q_norm[e], is_q);
{{QK_NORM}}    }
{{QK_NORM}}    workgroupBarrier();
    let half = p.n_rot / 2u;
    let pos = p.pos0 + token;
    for (var i = lid; i < half; i += WG) {
        var a = 2u * i;
        var b = a + 1u;
        if (p.neox != 0u) {
            a = i;
            b = i + half;
        }
        let cs = rotation(i, pos);
        let x0 = head[a];
        let x1 = head[b];
        store(slot, token, a, x0 * cs.x - x1 * cs.y);
        store(slot, token, b, x0 * cs.y + x1 * cs.x);
    }
    for (var e = p.n_rot + lid; e < hd; e += WG) {
        store(slot, token, e, head[e]);
    }
{{F16}}    workgroupBarrier();
{{F16}}    if (slot >= p.q_heads) {
{{F16}}        let kb = cache_base(slot, token) / 2u;
{{F16}}        for (var i = lid; i < hd / 2u; i += WG) {
{{F16}}            k_cache[kb + i] = pack2x16float(vec2(head[2u * i], head[2u * i + 1u]));
{{F16}}        }
{{F16}}    }
}
