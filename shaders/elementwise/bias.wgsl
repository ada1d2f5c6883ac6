// Bias add over rows, in place: x[r, c] += bias[c] (Qwen2's q/k/v biases).
// One invocation per element of x.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> bias: array<f32>;    // [cols]
@group(0) @binding(2) var<storage, read_write> x: array<f32>; // [x_offset + rows*cols]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.rows * p.cols) {
        return;
    }
    x[p.x_offset + i] += bias[i % p.cols];
}
