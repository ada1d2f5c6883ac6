// Integer step functions of linear_x_q8_dot4.wgsl for the K-quants (steps
// of 64: two 32-value blocks of x, runs a and b of quant_vec64.wgsl's
// runs_vec_FMT): dot_i8_FMT(row, s, x) as dot_step_FMT there, each
// sub-block's integer sum scaled once.

// A step's x: the blocks of runs a and b.
struct StepX {
    a0: vec4<u32>, // run a's bytes 0..16 (byte i of word j is value 4j + i)
    a1: vec4<u32>, // run a's bytes 16..32
    b0: vec4<u32>,
    b1: vec4<u32>,
    d: vec2<f32>,    // the blocks' scales (a, b)
    dsum: vec2<f32>, // d * sum(q) of each
}

fn step_x(base4: u32, s: u32) -> StepX {
    let runs = runs_vec_{{FMT}}(s);
    let a = (base4 + runs.x) / 8u;
    let b = (base4 + runs.y) / 8u;
    let da = xd[a];
    let db = xd[b];
    return StepX(xq[2u * a], xq[2u * a + 1u], xq[2u * b], xq[2u * b + 1u], vec2<f32>(da.x, db.x),
        vec2<f32>(da.y, db.y));
}

// Q4_K: run a is sub-block 2c (low nibbles of the chunk's 32 quant bytes),
// run b sub-block 2c + 1 (their high nibbles); each w = d sc q - dmin m.
fn dot_i8_q4_k(row: u32, s: u32, x: StepX) -> f32 {
    let blk = row * p.blocks + s / 4u;
    let c = s & 3u;
    let sc = chunk_scales_q4_k_of(aux4(blk), c);
    let q0 = w_vec4(8u * blk + 2u * c);      // bytes 32c .. 32c + 16
    let q1 = w_vec4(8u * blk + 2u * c + 1u); // bytes 32c + 16 .. 32c + 32
    let lo = dot16(nibbles_lo(q0), x.a0) + dot16(nibbles_lo(q1), x.a1);
    let hi = dot16(nibbles_hi(q0), x.b0) + dot16(nibbles_hi(q1), x.b1);
    return sc.x * x.d.x * lo + sc.z * x.d.y * hi - (sc.y * x.dsum.x + sc.w * x.dsum.y);
}

// Sixteen Q6_K values q - 32 as signed bytes: low nibbles of `ql`'s bytes
// with two bits of `qh`'s from `shift` above them (0..63), then 32 off each
// byte without a borrow between bytes: flipping bit 5 gives v - 32 for
// v >= 32, and for v < 32 the byte also needs bits 6 and 7 (its sign).
fn q6_bytes(ql: vec4<u32>, qh: vec4<u32>, shift: u32) -> vec4<u32> {
    let v = (ql & vec4<u32>(0x0f0f0f0fu)) | (((qh >> vec4<u32>(shift)) & vec4<u32>(0x03030303u)) << vec4<u32>(4u));
    let m = v ^ vec4<u32>(0x20202020u);
    let neg = m & vec4<u32>(0x20202020u);
    return m | (neg << vec4<u32>(1u)) | (neg << vec4<u32>(2u));
}

// Q6_K: as dot_step_q6_k, 16 elements a scale: run a's halves j = 0, 1 use
// scale 8n + 2g + j, run b's the scale 4 later.
fn dot_i8_q6_k(row: u32, s: u32, x: StepX) -> f32 {
    let t = q6_k_step(row, s);
    let sa = 2u * t.g;
    let sb = 4u + 2u * t.g;
    let scales = aux4(t.blk);
    let sc = 8u * t.n + 2u * t.g;
    let ql0 = w_vec4(t.qv + 4u * t.n + 2u * t.g);
    let ql1 = w_vec4(t.qv + 4u * t.n + 2u * t.g + 1u);
    let qh0 = w_vec4(t.qv + 8u + 2u * t.n);
    let qh1 = w_vec4(t.qv + 8u + 2u * t.n + 1u);
    let a = i8_of(scales, sc) * dot16(q6_bytes(ql0, qh0, sa), x.a0)
        + i8_of(scales, sc + 1u) * dot16(q6_bytes(ql1, qh1, sa), x.a1);
    let b = i8_of(scales, sc + 4u) * dot16(q6_bytes(ql0 >> vec4<u32>(4u), qh0, sb), x.b0)
        + i8_of(scales, sc + 5u) * dot16(q6_bytes(ql1 >> vec4<u32>(4u), qh1, sb), x.b1);
    return d16(t.blk) * (x.d.x * a + x.d.y * b);
}
