// The gate activations of gated MLPs, shared by activation.wgsl and the fused
// gate/up matmuls (linear_gemv.wgsl, linear_tiled.wgsl).

// sigmoid without overflow: exp only ever sees -|v|, so it lies in (0, 1].
fn sigmoid(v: f32) -> f32 {
    let e = exp(-abs(v));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), v >= 0.0);
}

fn silu(x: f32) -> f32 {
    return x * sigmoid(x);
}

// GELU, tanh approximation: 0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3).
// Computed as x * sigmoid(2u), the same function (0.5 * (1 + tanh(u)) ==
// sigmoid(2u)) without tanh: some implementations evaluate tanh through
// exp(2u), which overflows to inf / inf = NaN for u past ~44, and 1 + tanh(u)
// cancels for negative x. 2u is clamped to [-80, 80] so that x^3 overflowing
// (|x| > 7e12) cannot feed an infinity in; sigmoid(80) is exactly 1 in f32
// and sigmoid(-80) = 1.8e-35, where the true value is smaller still, so the
// clamp changes outputs by less than 1e-34 * |x|.
fn gelu_tanh(x: f32) -> f32 {
    let u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x * sigmoid(clamp(2.0 * u, -80.0, 80.0));
}

// The gate activation the tiled fused matmul's parameter `glu` names: 1
// SiLU, 2 GELU-tanh (kernels::matmul::tiled::Params::glu).
fn gate_act(glu: u32, x: f32) -> f32 {
    if (glu == 2u) {
        return gelu_tanh(x);
    }
    return silu(x);
}
