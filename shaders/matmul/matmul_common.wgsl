// Shared by the matmul kernels (after quant.wgsl): out[t, n] = sum_k x[t, k] *
// W[n, k] for one matrix part, whose rows are output columns first_row ..
// first_row + rows (first_row folded into out_offset by the caller). For an
// expert stack a part holds whole experts, `rows` rows each. Sources:
// matmul_params.wgsl, an x reader (matmul_x_scalar.wgsl, or
// matmul_x_vec4.wgsl where every x row starts on a vec4), then this file.

{{WEIGHT_WORDS}} // part, in the GPU layout (quant.wgsl) + zero padding
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [out_offset + (m - 1) * out_stride + rows]

const QK: u32 = {{QK}};
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}};
const UNITS: u32 = {{UNITS}};

fn x4_masked(base: u32, e: u32) -> vec4<f32> {
    return vec4<f32>(x_masked(base, e), x_masked(base, e + 1u), x_masked(base, e + 2u), x_masked(base, e + 3u));
}

// The 16 x values matching a unit whose runs start at row elements `e`;
// `masked` only for the one partial unit of an F32/F16 row.
fn load_x(base: u32, e: vec2<u32>, masked: bool) -> Unit {
    if (masked) {
        return Unit(x4_masked(base, e.x), x4_masked(base, e.x + 4u), x4_masked(base, e.y), x4_masked(base, e.y + 4u));
    }
    return Unit(x4(base + e.x), x4(base + e.x + 4u), x4(base + e.y), x4(base + e.y + 4u));
}

// Zeroes the weights of a partial unit that lie past the row end (they were
// read from the next row or the padding).
fn mask_unit(v: Unit, e: vec2<u32>) -> Unit {
    let i = vec4<u32>(0u, 1u, 2u, 3u);
    let z = vec4<f32>(0.0);
    let k = vec4<u32>(p.k);
    return Unit(
        select(z, v.a0, vec4<u32>(e.x) + i < k),
        select(z, v.a1, vec4<u32>(e.x + 4u) + i < k),
        select(z, v.b0, vec4<u32>(e.y) + i < k),
        select(z, v.b1, vec4<u32>(e.y + 4u) + i < k),
    );
}

fn dot_unit(a: Unit, b: Unit) -> f32 {
    return dot(a.a0, b.a0) + dot(a.a1, b.a1) + dot(a.b0, b.b0) + dot(a.b1, b.b1);
}

// Weights of unit U of row `row` of the part, masked if partial.
fn weight_unit(row: u32, U: u32, e: vec2<u32>, masked: bool) -> Unit {
    let v = decode_{{FMT}}(row, U);
    if (masked) {
        return mask_unit(v, e);
    }
    return v;
}

// Row elements where the two runs of unit U start.
fn unit_elems(U: u32) -> vec2<u32> {
    return (U / UNITS) * QK + runs_{{FMT}}(U % UNITS);
}
