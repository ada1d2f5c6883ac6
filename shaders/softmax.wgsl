// Softmax over rows, in place: x[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r).
//
// Masked entries: any value <= MASKED (so -inf, and the -1e30 / -FLT_MAX that
// masks often use) gets probability 0 and takes no part in the max or the
// sum; a row whose every entry is masked comes out all zeros, never NaN. The
// test is a plain comparison, not IEEE infinity arithmetic, because WGSL lets
// an implementation assume no infinities (fast math). Inputs must not be +inf
// or NaN.
//
// A segment of `lanes` invocations (a power of two in 32..=256) owns a row, as
// in rmsnorm.wgsl: short rows share a workgroup, long rows (a vocabulary of
// 151936) get all 256 invocations. Each lane makes one pass over its strided
// slice keeping a running (max, sum of exp(x - max)) -- the online softmax, one
// exp per element -- then a tree over the segment merges the pairs
// (log2(lanes) barriers), and a second pass writes the probabilities.

struct Params {
    rows: u32,     // rows
    cols: u32,     // elements per row
    x_offset: u32, // first element of x
    lanes: u32,    // invocations per row: a power of two in 32..=256
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // [x_offset + rows*cols]

const MASKED: f32 = -1e30;

var<workgroup> part_max: array<f32, 256>;
var<workgroup> part_sum: array<f32, 256>;

// Merges two (max, sum) partials. A sum of 0 means "no unmasked entry yet"
// and its max is meaningless, so it never reaches an exp.
fn merge(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
    if (s1 == 0.0) {
        return vec2<f32>(m2, s2);
    }
    if (s2 == 0.0) {
        return vec2<f32>(m1, s1);
    }
    let m = max(m1, m2);
    return vec2<f32>(m, s1 * exp(m1 - m) + s2 * exp(m2 - m));
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let row = (wid.x + wid.y * groups.x) * (256u / lanes) + li / lanes;
    // Rows past the end still run every barrier, skipping loads and stores.
    let live = row < p.rows;
    let base = p.x_offset + row * p.cols;

    var m = 0.0;
    var s = 0.0;
    if (live) {
        for (var i = lane; i < p.cols; i += lanes) {
            let v = x[base + i];
            if (v <= MASKED) {
                continue;
            }
            if (s == 0.0) {
                m = v;
                s = 1.0;
            } else if (v > m) {
                s = s * exp(m - v) + 1.0;
                m = v;
            } else {
                s += exp(v - m);
            }
        }
    }
    part_max[li] = m;
    part_sum[li] = s;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride >>= 1u) {
        if (lane < stride) {
            let merged = merge(part_max[li], part_sum[li], part_max[li + stride], part_sum[li + stride]);
            part_max[li] = merged.x;
            part_sum[li] = merged.y;
        }
        workgroupBarrier();
    }

    if (live) {
        let row_max = part_max[li - lane];
        let row_sum = part_sum[li - lane];
        // row_sum >= 1 whenever any entry is unmasked (the max contributes 1).
        let inv = select(0.0, 1.0 / row_sum, row_sum > 0.0);
        for (var i = lane; i < p.cols; i += lanes) {
            let v = x[base + i];
            x[base + i] = select(exp(v - row_max) * inv, 0.0, v <= MASKED);
        }
    }
}
