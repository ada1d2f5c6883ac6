// RMSNorm of rows into f32 and into 8-bit blocks, the second the form the
// matrix-vector core reads on CPU adapters (linear_x_q8.wgsl):
//   out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * weight[i]
//   each 32 values v of out's row: d = max|v| / 127, q = round(v / d) as
//   32 signed bytes (byte i of word j is value 4j + i), and (d, d * sum(q))
//   with d rounded to f16 (q itself comes from the unrounded d).
// llama.cpp rounds activations the same way (its Q8_0 / Q8_1 blocks, which
// store d in f16) before its CPU backend's quantized dot products; its f16
// d brought the goldens closer to it than an f32 d.
// One 64-lane workgroup a row; rows are whole blocks (dim % 32 == 0).

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;     // [dim / 4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;          // [(x_offset + rows * dim) / 4]
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;  // [(out_offset + rows * dim) / 4]
@group(0) @binding(4) var<storage, read_write> xq: array<vec4<u32>>;   // [rows * dim / 16]
@group(0) @binding(5) var<storage, read_write> xd: array<vec2<f32>>;   // [rows * dim / 32]

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

// Four signed bytes, value i in byte i.
fn pack_i8(q: vec4<i32>) -> u32 {
    let b = bitcast<vec4<u32>>(q) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let row = wid.x + wid.y * groups.x;
    if (row >= p.rows) {
        return; // whole workgroup: uniform
    }
    let n4 = p.dim / 4u;
    let x4 = p.x_offset / 4u + row * n4;
    var sum_sq = 0.0;
    for (var i = lid; i < n4; i += WG) {
        let v = x[x4 + i];
        sum_sq += dot(v, v);
    }
    partial[lid] = sum_sq;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.dim) + p.eps);
    let o4 = p.out_offset / 4u + row * n4;
    let blocks = p.dim / 32u;
    for (var b = lid; b < blocks; b += WG) {
        var v: array<vec4<f32>, 8>;
        var amax = vec4<f32>(0.0);
        for (var i = 0u; i < 8u; i++) {
            let j = 8u * b + i;
            v[i] = x[x4 + j] * scale * weight[j];
            out[o4 + j] = v[i];
            amax = max(amax, abs(v[i]));
        }
        let d = max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
        let inv = select(0.0, 1.0 / d, d > 0.0);
        var words: array<u32, 8>;
        var qsum = vec4<i32>(0);
        for (var i = 0u; i < 8u; i++) {
            let q = vec4<i32>(round(v[i] * inv));
            qsum += q;
            words[i] = pack_i8(q);
        }
        let blk = row * blocks + b;
        xq[2u * blk] = vec4<u32>(words[0], words[1], words[2], words[3]);
        xq[2u * blk + 1u] = vec4<u32>(words[4], words[5], words[6], words[7]);
        // d as an f16 (q comes from the unrounded d); past f16's range,
        // where quantizeToF16 is undefined, it stays f32.
        let d16 = select(d, quantizeToF16(d), d <= 65504.0);
        xd[blk] = vec2<f32>(d16, d16 * f32(qsum.x + qsum.y + qsum.z + qsum.w));
    }
}
