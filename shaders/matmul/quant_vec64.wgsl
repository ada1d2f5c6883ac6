// Whole-step dot products for matvec.wgsl, one pair of functions per format:
//   runs_vec_FMT(s): where step s's two runs of x start (vec4s from the row
//     start; each run is XV / 2 vec4s);
//   dot_step_FMT(row, s, xs, xg): sum over step s of part row `row` of
//     weight * x, given the step's x values xs (run a, then run b) and their
//     sums per 32 (xg).
// Quants come from w4 (the part as vec4s: a block's quants are whole vec4s
// in the GPU layout), the rest through quant.wgsl's word readers. One file
// per step length, since WGSL checks constant indices against XV.

// ---- K-quants: 256-element blocks, steps of 64 --------------------------------

// A block's four aux words (Q4_K: d, dmin and the scale bytes; Q6_K: the 16
// scales) in one vec4 load rather than four word loads: on CPU adapters
// every load costs alike, whatever its width. The aux region starts on a
// vec4, after the part's quants (32 or 48 words a block). The K-quants'
// scale slots are row-major (SCALE_TILE 1), so a block's slot is its index
// and their readers pass the block for it.
fn aux4(slot: u32) -> vec4<u32> {
    return w_vec4(p.aux_base / 4u + slot);
}
// Signed byte j (0..16) of `aux`.
fn i8_of(aux: vec4<u32>, j: u32) -> f32 {
    let v = aux[j >> 2u] >> ((j & 3u) * 8u);
    return f32(bitcast<i32>(v << 24u) >> 24u);
}

// Q4_K step s: chunk c = s % 4 of block s / 4, elements 64c .. 64c + 64: the
// low nibbles of quant bytes 32c .. 32c + 32 (sub-block 2c, xs[0..8]) and
// their high nibbles (sub-block 2c + 1, xs[8..16]).
fn runs_vec_q4_k(s: u32) -> vec2<u32> {
    return vec2<u32>(16u * s, 16u * s + 8u);
}
fn dot_step_q4_k(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    let blk = row * p.blocks + s / 4u;
    let c = s & 3u;
    let sc = chunk_scales_q4_k_of(aux4(blk), c);
    let q0 = w_vec4(8u * blk + 2u * c);      // bytes 32c .. 32c + 16
    let q1 = w_vec4(8u * blk + 2u * c + 1u); // bytes 32c + 16 .. 32c + 32
    let lo = dot(nib_lo(q0.x), xs[0]) + dot(nib_lo(q0.y), xs[1]) + dot(nib_lo(q0.z), xs[2]) + dot(nib_lo(q0.w), xs[3])
        + dot(nib_lo(q1.x), xs[4]) + dot(nib_lo(q1.y), xs[5]) + dot(nib_lo(q1.z), xs[6]) + dot(nib_lo(q1.w), xs[7]);
    let hi = dot(nib_hi(q0.x), xs[8]) + dot(nib_hi(q0.y), xs[9]) + dot(nib_hi(q0.z), xs[10]) + dot(nib_hi(q0.w), xs[11])
        + dot(nib_hi(q1.x), xs[12]) + dot(nib_hi(q1.y), xs[13]) + dot(nib_hi(q1.z), xs[14]) + dot(nib_hi(q1.w), xs[15]);
    return sc.x * lo + sc.z * hi - (sc.y * xg[0] + sc.w * xg[1]);
}

// Q6_K step s: half n = (s / 2) % 2 and g = s % 2 of block s / 4. Run a is
// half elements 32g .. 32g + 32 (low nibbles of ql bytes 64n + 32g + l,
// qh bits at shift 2g), run b the 32 elements 64 further (high nibbles,
// shift 4 + 2g); qh byte 32n + l serves both. Each 16 elements have a scale.
fn runs_vec_q6_k(s: u32) -> vec2<u32> {
    let a = 64u * (s / 4u) + 32u * ((s >> 1u) & 1u) + 8u * (s & 1u);
    return vec2<u32>(a, a + 16u);
}
// Element values (q - 32) of 4 elements from a ql word and a qh word.
fn q6x4(ql: u32, qh: u32, shift: u32) -> vec4<f32> {
    return q6x4_u(ql, qh, shift) - vec4<f32>(32.0);
}
// The same, unsigned (q).
fn q6x4_u(ql: u32, qh: u32, shift: u32) -> vec4<f32> {
    return bytes_u((ql & 0x0f0f0f0fu) | (((qh >> shift) & 0x03030303u) << 4u));
}
// Where Q6_K step s of part row `row` lies (for dot_step_q6_k and
// quant_dot4_64.wgsl's dot_i8_q6_k).
struct Q6kStep {
    blk: u32, // the block
    n: u32,   // its half
    g: u32,   // the 32 of the half
    qv: u32,  // the block's first quant vec4: 192 bytes, ql (8 vec4s) then qh (4)
}
fn q6_k_step(row: u32, s: u32) -> Q6kStep {
    let blk = row * p.blocks + s / 4u;
    return Q6kStep(blk, (s >> 1u) & 1u, s & 1u, 12u * blk);
}

fn dot_step_q6_k(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    let t = q6_k_step(row, s);
    let sa = 2u * t.g;
    let sb = 4u + 2u * t.g;
    let scales = aux4(t.blk);
    // The step's two 16-byte halves of ql and of qh, written out rather than
    // looped over: xs indexed by a loop variable is an array in memory for
    // GPU compilers too (this step ran 15-25x slower than Q4_K's on an H200).
    let ql0 = w_vec4(t.qv + 4u * t.n + 2u * t.g);
    let ql1 = w_vec4(t.qv + 4u * t.n + 2u * t.g + 1u);
    let qh0 = w_vec4(t.qv + 8u + 2u * t.n);
    let qh1 = w_vec4(t.qv + 8u + 2u * t.n + 1u);
    // Run a's 16 elements from 16j use scale 8n + 2g + j, run b's 4 later.
    let sc = 8u * t.n + 2u * t.g;
    let a0 = q6_dot16(ql0, qh0, sa, xs[0], xs[1], xs[2], xs[3]);
    let a1 = q6_dot16(ql1, qh1, sa, xs[4], xs[5], xs[6], xs[7]);
    let b0 = q6_dot16(ql0 >> vec4<u32>(4u), qh0, sb, xs[8], xs[9], xs[10], xs[11]);
    let b1 = q6_dot16(ql1 >> vec4<u32>(4u), qh1, sb, xs[12], xs[13], xs[14], xs[15]);
    let sum = i8_of(scales, sc) * a0 + i8_of(scales, sc + 1u) * a1
        + i8_of(scales, sc + 4u) * b0 + i8_of(scales, sc + 5u) * b1;
    return d16(t.blk) * sum;
}
// 16 elements' weights (from the low nibbles of `ql`, top bits at `shift` in
// `qh`) dotted with their x.
fn q6_dot16(ql: vec4<u32>, qh: vec4<u32>, shift: u32, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>,
            x3: vec4<f32>) -> f32 {
    return dot(q6x4(ql.x, qh.x, shift), x0) + dot(q6x4(ql.y, qh.y, shift), x1)
        + dot(q6x4(ql.z, qh.z, shift), x2) + dot(q6x4(ql.w, qh.w, shift), x3);
}

// ---- Chunks (the tiled vec4 core): 32 elements from 16 bytes of quants ----
// As quant_vec32.wgsl's chunks: chunk_q_FMT gives the quants as
// integer-valued floats, chunk_ab_FMT each run's (a, b). A chunk reads one
// vec4 of quant bytes and takes both their nibbles (Q6_K: with their top
// bits from one vec4 of qh, which one other chunk reads too), so each nibble
// byte is read once, not once per nibble. The two nibbles are elements 32
// (Q4_K) or 64 (Q6_K) apart: x is two runs of 16 elements (chunk_x_FMT:
// their starts, in vec4s), each with a scale of its own.

// Q4_K chunk c: block c / 8, step s = (c % 8) / 2 (sub-blocks 2s and 2s + 1),
// quant bytes 32s + 16h .. + 16 (h = c % 2): low nibbles are elements
// 64s + 16h + (0..16), high nibbles 32 further.
fn chunk_x_q4_k(c: u32) -> vec2<u32> {
    let a = 16u * (c / 2u) + 4u * (c & 1u);
    return vec2<u32>(a, a + 8u);
}
fn chunk_q_q4_k(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let blk = row * p.blocks + c / 8u;
    let q = w_vec4(8u * blk + 2u * ((c / 2u) & 3u) + (c & 1u));
    return array<vec4<f32>, CV>(nib_lo(q.x), nib_lo(q.y), nib_lo(q.z), nib_lo(q.w),
        nib_hi(q.x), nib_hi(q.y), nib_hi(q.z), nib_hi(q.w));
}
// The "given" forms take the block's aux4 (and Q6_K its d16), which the
// tiled core loads once for a block's 8 chunks (kernels::tile_shape).
fn chunk_ab_given_q4_k(aux: vec4<u32>, d: f32, c: u32) -> vec4<f32> {
    // (d * scale, dmin * min) of both sub-blocks: the weights are d * scale * q - dmin * min.
    let sc = chunk_scales_q4_k_of(aux, (c / 2u) & 3u);
    return vec4<f32>(sc.x, -sc.y, sc.z, -sc.w);
}
fn chunk_ab_q4_k(row: u32, c: u32) -> vec4<f32> {
    return chunk_ab_given_q4_k(aux4(row * p.blocks + c / 8u), 0.0, c);
}

// Q6_K chunk c: block c / 8, half n = (c / 4) % 2, g = (c / 2) % 2, k = c % 2:
// ql bytes 64n + 32g + 16k .. + 16 hold the low 4 bits of half elements
// 32g + 16k + (0..16) (low nibbles; top bits at shift 2g of qh bytes
// 32n + 16k + (0..16)) and of the 16 elements 64 further (high nibbles,
// shift 4 + 2g). Each 16 elements have one scale.
fn chunk_x_q6_k(c: u32) -> vec2<u32> {
    let a = 64u * (c / 8u) + 32u * ((c / 4u) & 1u) + 8u * ((c / 2u) & 1u) + 4u * (c & 1u);
    return vec2<u32>(a, a + 16u);
}
fn chunk_q_q6_k(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let blk = row * p.blocks + c / 8u;
    let n = (c / 4u) & 1u;
    let g = (c / 2u) & 1u;
    let k = c & 1u;
    let ql = w_vec4(12u * blk + 4u * n + 2u * g + k);
    let qh = w_vec4(12u * blk + 8u + 2u * n + k);
    let ha = 2u * g;
    let hb = 4u + 2u * g;
    return array<vec4<f32>, CV>(q6x4_u(ql.x, qh.x, ha), q6x4_u(ql.y, qh.y, ha), q6x4_u(ql.z, qh.z, ha),
        q6x4_u(ql.w, qh.w, ha), q6x4_u(ql.x >> 4u, qh.x, hb), q6x4_u(ql.y >> 4u, qh.y, hb),
        q6x4_u(ql.z >> 4u, qh.z, hb), q6x4_u(ql.w >> 4u, qh.w, hb));
}
fn chunk_ab_q6_k(row: u32, c: u32) -> vec4<f32> {
    let blk = row * p.blocks + c / 8u;
    return chunk_ab_given_q6_k(aux4(blk), d16(blk), c);
}
fn chunk_ab_given_q6_k(scales: vec4<u32>, d: f32, c: u32) -> vec4<f32> {
    let i = 8u * ((c / 4u) & 1u) + 2u * ((c / 2u) & 1u) + (c & 1u);
    // Element values are q - 32.
    let sa = d * i8_of(scales, i);
    let sb = d * i8_of(scales, i + 4u);
    return vec4<f32>(sa, -32.0 * sa, sb, -32.0 * sb);
}
