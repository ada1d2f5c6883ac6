// Whole-step dot products for matvec.wgsl, one pair of functions per format:
//   runs_vec_FMT(s): where step s's two runs of x start (vec4s from the row
//     start; each run is XV / 2 vec4s);
//   dot_step_FMT(row, s, xs, xg): sum over step s of part row `row` of
//     weight * x, given the step's x values xs (run a, then run b) and their
//     sums per 32 (xg).
// Quants come from w4 (the part as vec4s: a block's quants are whole vec4s
// in the GPU layout), the rest through quant.wgsl's word readers. One file
// per step length, since WGSL checks constant indices against XV.

// ---- F32 / F16: steps of 16 elements; rows start on a vec4 (k % 16 == 0) --

fn runs_vec_f32(s: u32) -> vec2<u32> {
    return vec2<u32>(4u * s, 4u * s + 2u);
}
fn dot_step_f32(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    let v = row * (p.row_bytes / 16u) + 4u * s;
    return dot(bitcast<vec4<f32>>(w_vec4(v)), xs[0]) + dot(bitcast<vec4<f32>>(w_vec4(v + 1u)), xs[1])
        + dot(bitcast<vec4<f32>>(w_vec4(v + 2u)), xs[2]) + dot(bitcast<vec4<f32>>(w_vec4(v + 3u)), xs[3]);
}

fn runs_vec_f16(s: u32) -> vec2<u32> {
    return vec2<u32>(4u * s, 4u * s + 2u);
}
fn dot_step_f16(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    let v = row * (p.row_bytes / 16u) + 2u * s;
    let a = w_vec4(v);
    let b = w_vec4(v + 1u);
    return dot(f16x4(a.xy), xs[0]) + dot(f16x4(a.zw), xs[1]) + dot(f16x4(b.xy), xs[2]) + dot(f16x4(b.zw), xs[3]);
}

// Chunks (the tiled vec4 core): a step, chunk_q_FMT the weights themselves
// (no chunk_ab_FMT: nothing to scale); x in two neighbouring runs of 2
// vec4s (chunk_x_FMT, as in quant_vec32.wgsl).
fn chunk_x_f32(c: u32) -> vec2<u32> {
    return vec2<u32>(4u * c, 4u * c + 2u);
}
fn chunk_q_f32(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let v = row * (p.row_bytes / 16u) + 4u * c;
    return array<vec4<f32>, CV>(bitcast<vec4<f32>>(w_vec4(v)), bitcast<vec4<f32>>(w_vec4(v + 1u)),
        bitcast<vec4<f32>>(w_vec4(v + 2u)), bitcast<vec4<f32>>(w_vec4(v + 3u)));
}
fn chunk_x_f16(c: u32) -> vec2<u32> {
    return vec2<u32>(4u * c, 4u * c + 2u);
}
fn chunk_q_f16(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let v = row * (p.row_bytes / 16u) + 2u * c;
    let a = w_vec4(v);
    let b = w_vec4(v + 1u);
    return array<vec4<f32>, CV>(f16x4(a.xy), f16x4(a.zw), f16x4(b.xy), f16x4(b.zw));
}
