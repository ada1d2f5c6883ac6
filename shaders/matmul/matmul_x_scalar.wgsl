// x of the matmul kernels as scalars: any row length and offset.

@group(0) @binding(2) var<storage, read> x: array<f32>; // [x_offset + m * k]

// x[i .. i + 4].
fn x4(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}

// One x value of the row at `base`, or 0 past its end (no read past it).
fn x_masked(base: u32, e: u32) -> f32 {
    return select(0.0, x[base + min(e, p.k - 1u)], e < p.k);
}
