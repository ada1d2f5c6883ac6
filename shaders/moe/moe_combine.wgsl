// Mixture-of-experts output per token: the router-weighted sum of its top_k
// experts' outputs, in pick order (as llama.cpp adds them), plus, where the
// model has one (SHARED variant), the shared expert's output scaled by
// sigmoid of its gate logit:
//   out[t, c] = sum_j weight_of[t * top_k + j] * y[(t * top_k + j) * d + c]
//             + sigmoid(shared_gate[t]) * shared_y[t * d + c]
// The SHARED flag keeps the shared expert's lines.
// Dispatch: ceil(rows * d / 256) workgroups, folded over x and y.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;           // [rows * top_k * d], per slot
@group(0) @binding(2) var<storage, read> weight_of: array<f32>;   // [rows * top_k]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // [rows * d]
#if SHARED
@group(0) @binding(4) var<storage, read> shared_y: array<f32>;    // [rows * d]
@group(0) @binding(5) var<storage, read> shared_gate: array<f32>; // [rows]
#endif

// sigmoid without overflow: exp only ever sees -|v|.
fn sigmoid(v: f32) -> f32 {
    let e = exp(-abs(v));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), v >= 0.0);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.rows * p.d) {
        return;
    }
    let t = i / p.d;
    let c = i % p.d;
    var sum = 0.0;
    for (var j = 0u; j < p.top_k; j++) {
        let slot = t * p.top_k + j;
        sum += weight_of[slot] * y[slot * p.d + c];
    }
    #if SHARED
    sum += sigmoid(shared_gate[t]) * shared_y[i];
    #endif
    out[i] = sum;
}
