// After the fused QKV projection: per-head RMSNorm of queries and keys (Qwen3,
// Gemma 3; the QK_NORM variant), RoPE on both, queries to `q_out`, keys and
// values into the layer's slice of the KV cache. One dispatch instead of up
// to eight (two norms, two ropes, two cache writes, and the copies between).
//
// qkv rows are [q_heads | kv_heads | kv_heads] heads of head_dim, one row per
// token (token t at position pos0 + t). A (token, head slot) is a head: a
// workgroup each, or an invocation each (LANES below); slots 0 .. q_heads
// are queries, then keys, then values.
// Rotation as rope.wgsl: pair i (< n_rot / 2) turns by
// pos * base^(-2i / n_rot) / factor_i * freq_scale (factor_i is 1, or
// freq_factors[i] in the FREQ_FACTORS variant); interleaved pairs (2i, 2i + 1) or
// neox pairs (i, i + n_rot / 2); elements from n_rot on pass through. YaRN's
// ramp and magnitude scale as rope.wgsl applies them.
// Cache layout: see kernels/kv.rs. An f16 cache (the F16 variant: its `#if
// F16` lines kept, the f32 cache's `#if !F16` ones dropped, and the reverse)
// is written a word (two elements) at a time.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;          // [qkv_offset + rows * (q_heads + 2 kv_heads) * head_dim]
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;  // [q_offset + rows * q_heads * head_dim]
@group(0) @binding(3) var<storage, read_write> k_cache: array<{{KV_WORD}}>; // [layers][ctx_len][kv_heads][head_dim]
@group(0) @binding(4) var<storage, read_write> v_cache: array<{{KV_WORD}}>; // same layout
#if QK_NORM
@group(0) @binding(5) var<storage, read> q_norm: array<f32>; // [head_dim]
@group(0) @binding(6) var<storage, read> k_norm: array<f32>; // [head_dim]
#endif
// After the norms where they are bound (7), else 5.
#if FREQ_FACTORS
@group(0) @binding({{FF_BINDING}}) var<storage, read> freq_factors: array<f32>; // [n_rot / 2], > 0
#endif

const WG: u32 = 64u;
const TWO_PI_HI: f32 = 6.28125;               // see rope.wgsl
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

var<workgroup> partial: array<f32, WG>; // the workgroup form's QK_NORM sums

// cos and sin of pair i's angle at `pos`, exactly as rope.wgsl computes them.
fn rotation(i: u32, pos: u32) -> vec2<f32> {
    var freq = exp2(-f32(i) * p.log2_base_step);
    #if FREQ_FACTORS
    freq /= freq_factors[i];
    #endif
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

// Element e of a query or key head whose qkv row starts at `src`, normed
// (QK_NORM: times `scale` and the norm's weight) but not rotated.
fn normed(src: u32, e: u32, scale: f32, is_q: bool) -> f32 {
    var v = qkv[src + e];
    #if QK_NORM
    v *= scale * select(k_norm[e], q_norm[e], is_q);
    #endif
    return v;
}

// Element e (< n_rot) of a query or key head with neox pairs (i, i + half),
// normed and rotated.
fn rotated_neox(src: u32, e: u32, pos: u32, scale: f32, is_q: bool) -> f32 {
    let half = p.n_rot / 2u;
    let i = e % half;
    let cs = rotation(i, pos);
    let x0 = normed(src, i, scale, is_q);
    let x1 = normed(src, i + half, scale, is_q);
    return select(x0 * cs.y + x1 * cs.x, x0 * cs.x - x1 * cs.y, e < half);
}

// Elements e and e + 1 (e even, < n_rot) of a query or key head, normed and
// rotated: interleaved pairs are the two themselves, so one rotation serves;
// neox ones belong to two pairs.
fn rotated_pair(src: u32, e: u32, pos: u32, scale: f32, is_q: bool) -> vec2<f32> {
    if (p.neox != 0u) {
        return vec2<f32>(rotated_neox(src, e, pos, scale, is_q), rotated_neox(src, e + 1u, pos, scale, is_q));
    }
    let cs = rotation(e / 2u, pos);
    let x0 = normed(src, e, scale, is_q);
    let x1 = normed(src, e + 1u, scale, is_q);
    return vec2<f32>(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
}

// Elements 2 * wd and 2 * wd + 1 of a (token, query or key slot) head, to
// q_out or the key cache (an f16 cache: as one word).
fn store_pair(slot: u32, token: u32, wd: u32, v: vec2<f32>) {
    if (slot < p.q_heads) {
        let at = p.q_offset + (token * p.q_heads + slot) * p.head_dim + 2u * wd;
        q_out[at] = v.x;
        q_out[at + 1u] = v.y;
        return;
    }
    let kb = cache_base(slot, token);
    #if !F16
    k_cache[kb + 2u * wd] = v.x;
    k_cache[kb + 2u * wd + 1u] = v.y;
    #else
    k_cache[kb / 2u + wd] = pack2x16float(v);
    #endif
}

// The last element of an odd head_dim (only an f32 cache allows one), which
// no pair covers; past n_rot, so never rotated.
fn store_last(slot: u32, token: u32, src: u32, scale: f32) {
    let e = p.head_dim - 1u;
    let v = normed(src, e, scale, slot < p.q_heads);
    if (slot < p.q_heads) {
        q_out[p.q_offset + (token * p.q_heads + slot) * p.head_dim + e] = v;
        return;
    }
    #if !F16
    if (slot < p.q_heads + p.kv_heads) {
        k_cache[cache_base(slot, token) + e] = v;
    } else {
        v_cache[cache_base(slot, token) + e] = qkv[src + e];
    }
    #endif
}

// Invocations a (token, slot) head: 64, a workgroup a head (`#if !SERIAL`:
// GPUs), or 1, an invocation a head and 64 heads a workgroup (`#if SERIAL`:
// CPU adapters, where it needs no barrier at all).
const LANES: u32 = {{LANES}}u;

// The head's sum of squares from each lane's share `ss`. In the workgroup
// form every lane calls it: the returns before it depend on the workgroup.
fn head_sum(lid: u32, ss: f32) -> f32 {
    #if SERIAL
    return ss;
    #else
    partial[lid] = ss;
    workgroupBarrier();
    var total = 0.0;
    for (var j = 0u; j < WG; j++) {
        total += partial[j];
    }
    return total;
    #endif
}

// Each lane writes whole pairs of elements, computing each from qkv (no
// head in workgroup memory), so only QK_NORM's sum needs a barrier, and
// only in the workgroup form.
@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let slots = p.q_heads + 2u * p.kv_heads;
    let wg = wid.x + wid.y * groups.x;
    #if !SERIAL
    let g = wg; // the head
    let lane = lid;
    #else
    let g = wg * WG + lid;
    let lane = 0u;
    #endif
    if (g >= p.rows * slots) {
        return; // the workgroup form: whole workgroup, uniform
    }
    let token = g / slots;
    let slot = g % slots;
    let hd = p.head_dim;
    let src = p.qkv_offset + g * hd; // rows are contiguous runs of slots
    if (slot >= p.q_heads + p.kv_heads) {
        let vb = cache_base(slot, token);
        for (var wd = lane; wd < hd / 2u; wd += LANES) {
            let v = vec2<f32>(qkv[src + 2u * wd], qkv[src + 2u * wd + 1u]);
            #if !F16
            v_cache[vb + 2u * wd] = v.x;
            v_cache[vb + 2u * wd + 1u] = v.y;
            #else
            v_cache[vb / 2u + wd] = pack2x16float(v);
            #endif
        }
        if (lane == 0u && hd % 2u == 1u) {
            store_last(slot, token, src, 1.0);
        }
        return; // the workgroup form: uniform, slot depends on the workgroup id alone
    }
    let is_q = slot < p.q_heads;
    var scale = 1.0;
    #if QK_NORM
    var ss = 0.0;
    for (var e = lane; e < hd; e += LANES) {
        let v = qkv[src + e];
        ss += v * v;
    }
    scale = inverseSqrt(head_sum(lid, ss) / f32(hd) + p.eps);
    #endif
    let pos = p.pos0 + token;
    for (var wd = lane; wd < hd / 2u; wd += LANES) {
        let e = 2u * wd;
        var v: vec2<f32>;
        if (e < p.n_rot) {
            v = rotated_pair(src, e, pos, scale, is_q);
        } else {
            v = vec2<f32>(normed(src, e, scale, is_q), normed(src, e + 1u, scale, is_q));
        }
        store_pair(slot, token, wd, v);
    }
    if (lane == 0u && hd % 2u == 1u) {
        store_last(slot, token, src, scale);
    }
}
