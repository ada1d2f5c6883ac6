// Entry point of the matrix-vector matmul over an expert stack (decode form
// of mixture-of-experts): one workgroup column per routed slot (token t's
// j-th expert is slot t * top_k + j). The workgroup reads its slot's expert
// from the router's output and streams that expert's slab of the stack, so
// the CPU never learns which experts ran and nothing is re-recorded per token.
// TOKENS is 1: each slot has its own expert.
//   x row of slot s:   s / x_div (x_div = top_k when x holds one row per
//                      token, 1 when it holds one row per slot)
//   out row of slot s: s
// A part of the stack holds experts first_expert .. + part_experts; slots
// routed elsewhere leave this part's dispatch at once.
// Dispatch: [ceil(rows / ROWS), slots, 1].

@group(0) @binding(4) var<storage, read> expert_of: array<u32>; // [slots]

// x is read as it is.
fn x_unit(base: u32, t: u32, e: vec2<u32>, masked: bool) -> Unit {
    return load_x(base, e, masked);
}

fn stash_lane(lid: u32) {}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let slot = wid.y;
    let row0 = wid.x * ROWS;
    // Read-only storage indexed by a workgroup id: uniform, so these early
    // exits keep the barrier in gemv() in uniform control flow.
    let local = expert_of[slot] - p.first_expert; // wraps past part_experts when below
    if (row0 >= p.rows || local >= p.part_experts) {
        return;
    }
    gemv(
        lid,
        row0,
        local * p.rows,
        p.x_offset + slot / p.x_div * p.k,
        p.out_offset + slot * p.out_stride,
    );
}
