// Mixture-of-experts router, one invocation per token: softmax over the
// token's gate logits, then its top_k experts and their weights, written for
// the expert kernels to read (no CPU round trip).
//   expert_of[t * top_k + j]: token t's j-th expert, best first
//   weight_of[t * top_k + j]: its softmax probability, divided by the sum of
//                             the chosen k when `normalize` (qwen3moe,
//                             Mixtral; not qwen2moe)
// Order: higher logit first; equal logits by lower expert index. Selection
// needs no scratch array: pick j is the best expert strictly after pick j - 1
// in that order. Experts are chosen on logits, not probabilities, so two
// logits that round to one probability stay distinct.
// Dispatch: ceil(rows / 64) workgroups.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;         // [logits_offset + rows * n_experts]
@group(0) @binding(2) var<storage, read_write> expert_of: array<u32>; // [rows * top_k]
@group(0) @binding(3) var<storage, read_write> weight_of: array<f32>; // [rows * top_k]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t >= p.rows) {
        return;
    }
    let base = p.logits_offset + t * p.n_experts;
    var top = logits[base];
    for (var e = 1u; e < p.n_experts; e++) {
        top = max(top, logits[base + e]);
    }
    var denom = 0.0;
    for (var e = 0u; e < p.n_experts; e++) {
        denom += exp(logits[base + e] - top);
    }
    let out0 = t * p.top_k;
    var prev_v = 0.0;
    var prev_e = 0u;
    var chosen = 0.0;
    for (var j = 0u; j < p.top_k; j++) {
        var best_e = p.n_experts;
        var best_v = 0.0;
        for (var e = 0u; e < p.n_experts; e++) {
            let v = logits[base + e];
            let after_prev = j == 0u || v < prev_v || (v == prev_v && e > prev_e);
            // Strict: on equal logits the lower index, met first, stays.
            if (after_prev && (best_e == p.n_experts || v > best_v)) {
                best_e = e;
                best_v = v;
            }
        }
        // Only NaN logits leave nothing to pick; any valid id keeps the
        // expert kernels in bounds.
        best_e = min(best_e, p.n_experts - 1u);
        let w = exp(best_v - top) / denom;
        expert_of[out0 + j] = best_e;
        weight_of[out0 + j] = w;
        chosen += w;
        prev_v = best_v;
        prev_e = best_e;
    }
    if (p.normalize != 0u) {
        for (var j = 0u; j < p.top_k; j++) {
            weight_of[out0 + j] = weight_of[out0 + j] / chosen;
        }
    }
}
