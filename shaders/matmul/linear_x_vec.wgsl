// x of the fused linear layer for the vec4 matrix-vector core (matvec.wgsl):
// vec4 j of the row whose first vec4 is base4, normalised when NORM is on
// (the core loads each vec4 of the row exactly once per workgroup), its
// squares summed into its token row's sum (x_token, matvec.wgsl).

fn x_vec(base4: u32, j: u32) -> vec4<f32> {
    let v = x[base4 + j];
    #if NORM
    sum_sq[x_token] += dot(v, v);
    return v * norm_w[j];
    #else
    return v;
    #endif
}
