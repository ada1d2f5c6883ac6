// x of the vec4 matrix-vector core (matvec.wgsl) as f32 vec4s, through the
// entry point's x_vec (which may normalise it on the way).

// X_DECL: a storage array, or (kernels::linear_gemv on CPU adapters whose
// storage loads are slow, `x_uniform`) a uniform one of the row's length.
@group(0) @binding(2) {{X_DECL}} // [x_offset / 4 + k / 4]

// Step s of the row whose first vec4 is base4: each lane loads its x once
// and dots it with the step of all its group's rows.
fn step_x(base4: u32, s: u32) -> StepX {
    let runs = runs_vec_{{FMT}}(s);
    var r: StepX;
    for (var i = 0u; i < XV / 2u; i++) {
        r.xs[i] = x_vec(base4, runs.x + i);
        r.xs[XV / 2u + i] = x_vec(base4, runs.y + i);
    }
    for (var g = 0u; g < XG; g++) {
        var v = vec4<f32>(0.0);
        for (var i = 0u; i < min(8u, XV); i++) {
            v += r.xs[8u * g + i];
        }
        r.xg[g] = v.x + v.y + v.z + v.w;
    }
    return r;
}
