// Soft-capping in place: x[i] = cap * tanh(x[i] / cap) over n elements from
// x_offset (Gemma 2's final logits). The quotient is clamped to +-15, where
// tanh is already +-1 in f32, because some implementations of tanh return
// NaN for large arguments.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // [x_offset + n]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    let at = p.x_offset + i;
    x[at] = p.cap * tanh(clamp(x[at] / p.cap, -15.0, 15.0));
}
