// A step's x as f32 values, for the x readers that hand the vec4 core
// (matvec.wgsl) numbers: xs, run a then run b (see runs_vec_FMT), and xg,
// the sums of each 32 of them (xg[g] = xs[8g .. 8g + 8]): the formats with
// an offset (Q4_0's -8, Q4_1's m, K-quant mins) subtract offset * sum once
// instead of once per weight.
struct StepX {
    xs: array<vec4<f32>, XV>,
    xg: array<f32, XG>,
}

// Step s of part row `row` dotted with x: the format's float step.
fn dot_x(row: u32, s: u32, x: StepX) -> f32 {
    return dot_step_{{FMT}}(row, s, x.xs, x.xg);
}

// The same given the step's block's stored scales (matvec_tile.wgsl; the
// formats with scale tiles only: the TILE flag drops it for the others).
#if TILE
fn dot_x_scaled(row: u32, s: u32, x: StepX, d: f32, aux: u32) -> f32 {
    return dot_scaled_{{FMT}}(row, s, x.xs, x.xg, d, aux);
}
#endif
