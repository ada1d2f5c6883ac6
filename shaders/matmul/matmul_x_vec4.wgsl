// x of the matmul kernels as vec4s, for rows that start on a vec4 (x_offset
// and k multiples of 4): a unit's runs start at multiples of 8 in the row,
// so each 4 values are one load, where the scalar reader makes four.

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>; // [(x_offset + m * k) / 4]

// x[i .. i + 4], i a multiple of 4.
fn x4(i: u32) -> vec4<f32> {
    return x[i >> 2u];
}

// One x value of the row at `base`, or 0 past its end (no read past it).
fn x_masked(base: u32, e: u32) -> f32 {
    let j = base + min(e, p.k - 1u);
    return select(0.0, x[j >> 2u][j & 3u], e < p.k);
}
