// Rotary position embedding, in place on x laid out [rows][heads][head_dim].
// Token t (row t) sits at position pos0 + t. Pair i (0 <= i < n_rot / 2) of
// every head turns by angle (pos * base^(-2i / n_rot) / factor_i) * freq_scale;
// elements at n_rot and past it are left as they are. factor_i is 1, or
// freq_factors[i] in the FREQ_FACTORS variant (Llama 3.1 / 3.2's
// rope_freqs.weight, as llama.cpp divides by it); freq_scale is linear
// position scaling (1 / rope.scaling.factor).
//
// YaRN (ggml's rope_yarn), on where ext_factor != 0: the angle blends the
// scaled one above with the unscaled one, by a ramp over the pairs that is 1
// below corr_low and 0 above corr_high, times ext_factor. cos and sin are
// multiplied by mscale (attn_factor, with YaRN's 1 + 0.1 ln(1 / freq_scale)
// folded in on the CPU; 1.0 for plain RoPE).
//
// The pair layout:
//   interleaved (neox == 0): elements (2i, 2i + 1). llama.cpp's converter
//     permutes the llama architecture's Q/K weights so that adjacent pairs
//     (GGML_ROPE_TYPE_NORM) are right for llama GGUFs.
//   neox (neox == 1): elements (i, i + n_rot / 2), the half split that qwen2,
//     qwen3 and gemma3 use (GGML_ROPE_TYPE_NEOX).
//
// One invocation per pair: it reads and writes only its own two elements.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // [x_offset + rows*heads*head_dim]
#if FREQ_FACTORS
@group(0) @binding(2) var<storage, read> freq_factors: array<f32>; // [n_rot / 2], > 0
#endif

// 2*pi split for Cody-Waite reduction: TWO_PI_HI has 8 significant bits, so
// k * TWO_PI_HI is exact for any k below 2^16 (angles below ~400000 rad), and
// the small remainder carries the rest of 2*pi's bits.
const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

// The angle of pair i from its unscaled angle theta (ggml's rope_yarn).
fn yarn_angle(theta: f32, i: u32) -> f32 {
    let interp = theta * p.freq_scale;
    if (p.ext_factor == 0.0) {
        return interp;
    }
    let y = (f32(i) - p.corr_low) / max(0.001, p.corr_high - p.corr_low);
    let mix = (1.0 - clamp(y, 0.0, 1.0)) * p.ext_factor;
    return interp * (1.0 - mix) + theta * mix;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.n_rot / 2u;
    let idx = gid.x + gid.y * groups.x * 256u;
    if (idx >= p.rows * p.heads * half) {
        return;
    }
    let i = idx % half;
    let head = idx / half; // token * heads + head
    let token = head / p.heads;
    let base = p.x_offset + head * p.head_dim;
    var a = base + 2u * i;
    var b = a + 1u;
    if (p.neox != 0u) {
        a = base + i;
        b = a + half;
    }

    // freq = base^(-2i / n_rot) = exp2(-i * log2_base_step). Positions are
    // integers below 2^24, so f32(pos) is exact.
    var freq = exp2(-f32(i) * p.log2_base_step);
    #if FREQ_FACTORS
    freq /= freq_factors[i];
    #endif
    let angle = yarn_angle(f32(p.pos0 + token) * freq, i);
    // WGSL bounds sin/cos error only on [-pi, pi]: reduce first. The product
    // k * TWO_PI_HI is exact, and so is the subtraction (Sterbenz), so the
    // reduction adds only ~k * 2^-24 * TWO_PI_LO of error.
    let k = round(angle * INV_TWO_PI);
    let r = (angle - k * TWO_PI_HI) - k * TWO_PI_LO;
    let c = cos(r) * p.mscale;
    let s = sin(r) * p.mscale;

    let x0 = x[a];
    let x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
