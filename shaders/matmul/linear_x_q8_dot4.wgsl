// x of the fused linear layer for the vec4 matrix-vector core (matvec.wgsl)
// in 8-bit blocks (as rmsnorm_q8.wgsl writes them, see linear_x_q8.wgsl),
// kept as bytes: the weights' quants meet x's signed bytes four at a time
// in dot4I8Packed, and each integer sum is scaled once (per block, or per
// K-quant sub-block), as llama.cpp's quantized dot products do. No byte of
// weights or x becomes an f32. The step functions are dot_i8_FMT
// (quant_dot4_{32,64}.wgsl, by step length); the sums are exact, so this
// differs from linear_x_q8.wgsl's f32 arithmetic by rounding alone.
// Sources: the vec4 core's (matvec.wgsl), this file, then quant_dot4_*.

@group(0) @binding(2) {{XQ_DECL}} // [k / 16], storage or uniform as X_DECL (matvec_x_f32.wgsl)
@group(0) @binding({{XD_BINDING}}) var<storage, read> xd: array<vec2<f32>>; // [k / 32]

// The step type StepX and its reader step_x(base4, s) come with the step
// functions (quant_dot4_{32,64}.wgsl): one block or two, named fields, no
// array indexed by a loop variable (which llvmpipe keeps in memory).

fn dot_x(row: u32, s: u32, x: StepX) -> f32 {
    return dot_i8_{{FMT}}(row, s, x);
}
// The same given the step's block's stored scales (matvec_tile.wgsl; the
// formats with scale tiles only: the TILE flag drops it for the others).
#if TILE
fn dot_x_scaled(row: u32, s: u32, x: StepX, d: f32, aux: u32) -> f32 {
    return dot_i8_scaled_{{FMT}}(row, s, x, d, aux);
}
#endif

// Sum over 16 pairs of signed bytes, as an f32 (exact: at most 16 * 128^2).
fn dot16(a: vec4<u32>, b: vec4<u32>) -> f32 {
    return f32(dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y) + dot4I8Packed(a.z, b.z)
        + dot4I8Packed(a.w, b.w));
}

// The low or high nibbles of 16 quant bytes, as 16 bytes.
fn nibbles_lo(q: vec4<u32>) -> vec4<u32> {
    return q & vec4<u32>(0x0f0f0f0fu);
}
fn nibbles_hi(q: vec4<u32>) -> vec4<u32> {
    return (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
}
