// GELU with the exact erf form, in place: x = 0.5 * x * (1 + erf(x / sqrt(2)))
// (BERT's `hidden_act: gelu`; the tanh approximation is act_fns.wgsl's).
// One invocation per element.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // [x_offset + n]

// erf by Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7 over the
// whole line, about f32's own rounding of values near 1. WGSL has no erf.
fn erf_approx(v: f32) -> f32 {
    let a = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
        + t * (-1.453152027 + t * 1.061405429))));
    // exp(-a*a) underflows to 0 for a past ~9.4, where erf is 1 in f32 anyway.
    let e = 1.0 - poly * exp(-a * a);
    return select(-e, e, v >= 0.0);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    let v = x[p.x_offset + i];
    x[p.x_offset + i] = 0.5 * v * (1.0 + erf_approx(v * 0.7071067811865476));
}
