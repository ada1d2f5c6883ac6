// x's token rows cut into ranges of columns, each range's rows side by
// side (kernels::x_ranges): range r holds columns r * width up to
// min(k, (r + 1) * width), its m rows of w_r columns from out[r * m * width],
// row t at t * w_r. In vec4s: k, width and x_offset are multiples of 4.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;         // [x_offset4 + m * k4]
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>; // [m * k4]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n4) {
        return;
    }
    let range_vec4s = p.m * p.width4;
    let r = i / range_vec4s;
    let in_range = i - r * range_vec4s;
    let first = r * p.width4;
    let w = min(p.width4, p.k4 - first);
    let t = in_range / w;
    let j = in_range - t * w;
    out[i] = x[p.x_offset4 + t * p.k4 + first + j];
}
