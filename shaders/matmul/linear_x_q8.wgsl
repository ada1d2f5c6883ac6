// x of the fused linear layer for the vec4 matrix-vector core (matvec.wgsl)
// in 8-bit blocks, as rmsnorm_q8.wgsl writes them: each 32 values of the
// row are 32 signed bytes q (two vec4<u32>, byte i of word j is value
// 4j + i) and the pair (d, d * sum(q)), a value being d * q. A step's x
// then costs 3 loads per 32 values where f32 takes 8: on CPU adapters,
// whose loads run lane by lane, loads bound the kernel, not bytes.

@group(0) @binding(2) {{XQ_DECL}} // [k / 16], storage or uniform as X_DECL (matvec_x_f32.wgsl)
@group(0) @binding({{XD_BINDING}}) var<storage, read> xd: array<vec2<f32>>; // [k / 32]

// Step s of the row whose first vec4 is base4 (a multiple of 8: rows of
// whole blocks). Quantized formats only (F32/F16 rows read f32 x): their
// steps are whole blocks, one (XV 8) whose runs follow on, or two (XV 16),
// one a run.
fn step_x(base4: u32, s: u32) -> StepX {
    let runs = runs_vec_{{FMT}}(s);
    var r: StepX;
    for (var g = 0u; g < XG; g++) {
        let b = (base4 + select(runs.x, runs.y, g == 1u)) / 8u;
        let q0 = xq[2u * b];
        let q1 = xq[2u * b + 1u];
        let d = xd[b];
        r.xs[8u * g] = d.x * bytes_i(q0.x);
        r.xs[8u * g + 1u] = d.x * bytes_i(q0.y);
        r.xs[8u * g + 2u] = d.x * bytes_i(q0.z);
        r.xs[8u * g + 3u] = d.x * bytes_i(q0.w);
        r.xs[8u * g + 4u] = d.x * bytes_i(q1.x);
        r.xs[8u * g + 5u] = d.x * bytes_i(q1.y);
        r.xs[8u * g + 6u] = d.x * bytes_i(q1.z);
        r.xs[8u * g + 7u] = d.x * bytes_i(q1.w);
        r.xg[g] = d.y;
    }
    return r;
}
