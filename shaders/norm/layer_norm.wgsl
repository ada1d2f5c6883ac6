// LayerNorm over rows, in place: x[r] = (x[r] - mean) / sqrt(var + eps) * w + b
// (BERT's post-norm blocks and its embedding norm). One workgroup of WG
// invocations per row; invocation i owns the columns i, i + WG, ... and is
// the only one to read and then write them, so the row can be normalised
// where it lies. Two passes over the row (mean, then the mean of squared
// deviations) rather than E[x^2] - E[x]^2, which cancels for rows whose mean
// is large against their spread.

const WG: u32 = 64u;

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<f32>;       // [cols]
@group(0) @binding(2) var<storage, read> b: array<f32>;       // [cols]
@group(0) @binding(3) var<storage, read_write> x: array<f32>; // [x_offset + rows * cols]

var<workgroup> partial: array<f32, WG>;

// The sum of every invocation's `v`, in every invocation.
fn workgroup_sum(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < WG; i++) {
        total += partial[i];
    }
    workgroupBarrier(); // everyone has read before the next call writes
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // Rows past 65535 go on in y; the whole group takes the same branch.
    let row = wid.x + wid.y * groups.x;
    if (row >= p.rows) {
        return;
    }
    let base = p.x_offset + row * p.cols;
    var s = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        s += x[base + c];
    }
    let mean = workgroup_sum(lid, s) / f32(p.cols);
    var ss = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let d = x[base + c] - mean;
        ss += d * d;
    }
    let inv = 1.0 / sqrt(workgroup_sum(lid, ss) / f32(p.cols) + p.eps);
    for (var c = lid; c < p.cols; c += WG) {
        x[base + c] = (x[base + c] - mean) * inv * w[c] + b[c];
    }
}
