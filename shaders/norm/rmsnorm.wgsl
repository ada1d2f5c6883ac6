// RMSNorm over rows: out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * weight[i].
//
// A segment of `lanes` invocations (32, 64, 128 or 256; a power of two) owns a
// row, so a workgroup of 256 handles 256 / lanes rows: many short rows (per-head
// q/k norms, dim 64..256) share a workgroup, a few long rows (hidden 576..2048)
// get all 256 invocations each. Each lane sums the squares of a strided slice
// (coalesced: neighbouring lanes read neighbouring elements), then a tree over
// the segment's slots in workgroup memory adds the partial sums:
// log2(lanes) barriers, the fewest a tree allows.
//
// Bindings come in two variants (the Rust side picks one). WebGPU rejects a
// dispatch that binds one buffer twice when either binding is writable, so in
// place (out in x's buffer) binds x once, read_write, and writes through it.
//   "rmsnorm":         1 weight (read) [dim]; 2 x (read) [x_offset + rows*dim];
//                      3 dst (read_write) [out_offset + rows*dim]
//   "rmsnorm_inplace": 1 weight (read) [dim]; 2 x (read_write), also the output:
//                      [max(x_offset, out_offset) + rows*dim]
//   "rmsnorm_add":     as "rmsnorm", but adds into dst (PLUS): a residual
//                      stream absorbing a post-normed sub-block (Gemma 3)

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, {{X_ACCESS}}> x: array<f32>;
#if SEPARATE_OUT
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
#endif

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let row = (wid.x + wid.y * groups.x) * (256u / lanes) + li / lanes;
    // Rows past the end still run every barrier (barriers need uniform control
    // flow); they only skip their loads and stores.
    let live = row < p.rows;
    let x_base = p.x_offset + row * p.dim;

    var sum_sq = 0.0;
    if (live) {
        for (var i = lane; i < p.dim; i += lanes) {
            let v = x[x_base + i];
            sum_sq += v * v;
        }
    }
    partial[li] = sum_sq;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride >>= 1u) {
        if (lane < stride) {
            partial[li] += partial[li + stride];
        }
        workgroupBarrier();
    }

    if (live) {
        let scale = inverseSqrt(partial[li - lane] / f32(p.dim) + p.eps);
        let out_base = p.out_offset + row * p.dim;
        // In place each lane rewrites exactly the elements it alone read, so
        // no lane can overwrite a value another lane has yet to read.
        for (var i = lane; i < p.dim; i += lanes) {
            {{OUT}}[out_base + i] = {{PLUS}}x[x_base + i] * scale * weight[i];
        }
    }
}
