// x of the fused linear layer for the unit matrix-vector core
// (matmul_gemv.wgsl): one 16-element unit, normalised when NORM is on.

// Norm weights of elements e..e + 4: runs start at multiples of 4, so one
// vec4 load. A masked unit's lanes past k read x = 0; keep their index in range.
#if NORM
fn nw4(e: u32) -> vec4<f32> {
    return norm_w[min(e, p.k - 1u) / 4u];
}
#endif

fn x_unit(base: u32, t: u32, e: vec2<u32>, masked: bool) -> Unit {
    let u = load_x(base, e, masked);
    #if NORM
    sum_sq[t] += dot(u.a0, u.a0) + dot(u.a1, u.a1) + dot(u.b0, u.b0) + dot(u.b1, u.b1);
    return Unit(u.a0 * nw4(e.x), u.a1 * nw4(e.x + 4u), u.b0 * nw4(e.y), u.b1 * nw4(e.y + 4u));
    #else
    return u;
    #endif
}

