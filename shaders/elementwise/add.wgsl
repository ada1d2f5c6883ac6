// Residual add: out[i] = a[i] + b[i], over n elements. In place is allowed
// (out may be the same buffer as a), so `out` aliases nothing else bound here.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> b: array<f32>;        // [b_offset + n]
@group(0) @binding(2) var<storage, read_write> a_out: array<f32>; // a and out: [max(a_offset, out_offset) + n]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    a_out[p.out_offset + i] = a_out[p.a_offset + i] + b[p.b_offset + i];
}
