// Per-head RMSNorm in place on strided rows (the q/k norms of an encoder's
// fused q/k/v rows, EmbeddingGemma): head h of row r is the `head_dim`
// elements from r * row_stride + col + h * head_dim, and becomes
// x / sqrt(mean(x^2) + eps) * weight. The decoder's rmsnorm reads contiguous
// rows; here a row's q heads and its k head sit between other columns.
//
// One invocation per (row, head): it sums its head's squares, then scales
// them. Heads are at most a few hundred elements and a step has a few
// thousand of them, so no workgroup reduction is needed.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> weight: array<f32>;    // [head_dim]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;   // [rows * row_stride]

const WG: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let idx = gid.x + gid.y * groups.x * WG;
    if (idx >= p.rows * p.heads) {
        return;
    }
    let base = (idx / p.heads) * p.row_stride + p.col + (idx % p.heads) * p.head_dim;
    var sum = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        let v = x[base + d];
        sum += v * v;
    }
    let scale = inverseSqrt(sum / f32(p.head_dim) + p.eps);
    for (var d = 0u; d < p.head_dim; d++) {
        x[base + d] = x[base + d] * scale * weight[d];
    }
}
