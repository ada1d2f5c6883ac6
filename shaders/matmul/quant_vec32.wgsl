// Whole-step dot products for matvec.wgsl, one pair of functions per format:
//   runs_vec_FMT(s): where step s's two runs of x start (vec4s from the row
//     start; each run is XV / 2 vec4s);
//   dot_step_FMT(row, s, xs, xg): sum over step s of part row `row` of
//     weight * x, given the step's x values xs (run a, then run b) and their
//     sums per 32 (xg).
// Quants come from w4 (the part as vec4s: a block's quants are whole vec4s
// in the GPU layout), the rest through quant.wgsl's word readers. One file
// per step length, since WGSL checks constant indices against XV.

// ---- 32-element blocks: a step is one block --------------------------------

fn runs_vec_block(s: u32) -> vec2<u32> {
    return vec2<u32>(8u * s, 8u * s + 4u);
}

fn runs_vec_q8_0(s: u32) -> vec2<u32> {
    return runs_vec_block(s);
}
fn dot_step_q8_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    return dot_scaled_q8_0(row, s, xs, xg, d16(scale_slot(row, s)), 0u);
}
// The step given its block's scales as they are stored: d the f16 scale
// (d16), aux its aux word (each format reads the ones it has), which the
// one-lane tile reader (matvec_tile.wgsl) loads for 16 rows at once.
fn dot_scaled_q8_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>, d: f32, aux: u32) -> f32 {
    let blk = row * p.blocks + s;
    let a = w_vec4(2u * blk);
    let b = w_vec4(2u * blk + 1u);
    let sum = dot(bytes_i(a.x), xs[0]) + dot(bytes_i(a.y), xs[1]) + dot(bytes_i(a.z), xs[2]) + dot(bytes_i(a.w), xs[3])
        + dot(bytes_i(b.x), xs[4]) + dot(bytes_i(b.y), xs[5]) + dot(bytes_i(b.z), xs[6]) + dot(bytes_i(b.w), xs[7]);
    return d * sum;
}

// Sum over a block of 16 quant bytes: low nibbles are elements 0..16 (xs[0..4]),
// high nibbles elements 16..32 (xs[4..8]).
fn dot_nibbles(q: vec4<u32>, xs: array<vec4<f32>, XV>) -> f32 {
    return dot(nib_lo(q.x), xs[0]) + dot(nib_lo(q.y), xs[1]) + dot(nib_lo(q.z), xs[2]) + dot(nib_lo(q.w), xs[3])
        + dot(nib_hi(q.x), xs[4]) + dot(nib_hi(q.y), xs[5]) + dot(nib_hi(q.z), xs[6]) + dot(nib_hi(q.w), xs[7]);
}

fn runs_vec_q4_0(s: u32) -> vec2<u32> {
    return runs_vec_block(s);
}
fn dot_step_q4_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    return dot_scaled_q4_0(row, s, xs, xg, d16(scale_slot(row, s)), 0u);
}
fn dot_scaled_q4_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>, d: f32, aux: u32) -> f32 {
    return d * (dot_nibbles(w_vec4(row * p.blocks + s), xs) - 8.0 * xg[0]);
}

fn runs_vec_q4_1(s: u32) -> vec2<u32> {
    return runs_vec_block(s);
}
fn dot_step_q4_1(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    return dot_scaled_q4_1(row, s, xs, xg, 0.0, aux_word(scale_slot(row, s), 0u));
}
// aux: d and m as two f16.
fn dot_scaled_q4_1(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>, d: f32, aux: u32) -> f32 {
    let dm = unpack2x16float(aux);
    return dm.x * dot_nibbles(w_vec4(row * p.blocks + s), xs) + dm.y * xg[0];
}

fn runs_vec_q5_0(s: u32) -> vec2<u32> {
    return runs_vec_block(s);
}
fn dot_step_q5_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>) -> f32 {
    let slot = scale_slot(row, s);
    return dot_scaled_q5_0(row, s, xs, xg, d16(slot), aux_word(slot, 0u));
}
// aux: qh, whose bit j is the fifth bit of element j.
fn dot_scaled_q5_0(row: u32, s: u32, xs: array<vec4<f32>, XV>, xg: array<f32, XG>, d: f32, qh: u32) -> f32 {
    let q = w_vec4(row * p.blocks + s);
    let sum = dot(q5_lo(q.x, qh), xs[0]) + dot(q5_lo(q.y, qh >> 4u), xs[1]) + dot(q5_lo(q.z, qh >> 8u), xs[2])
        + dot(q5_lo(q.w, qh >> 12u), xs[3]) + dot(q5_hi(q.x, qh >> 16u), xs[4]) + dot(q5_hi(q.y, qh >> 20u), xs[5])
        + dot(q5_hi(q.z, qh >> 24u), xs[6]) + dot(q5_hi(q.w, qh >> 28u), xs[7]);
    return d * (sum - 16.0 * xg[0]);
}

// ---- Chunks (the tiled vec4 core): a block, quants and scales apart -------
// chunk_q_FMT(row, c) gives chunk c's CV vec4s of quants as integer-valued
// floats and chunk_ab_FMT(row, c) the affine map of each run of CV / 2
// vec4s, (a0, b0, a1, b1): run r's weights are a_r * q + b_r. The core
// scales each row's dot products instead of each weight (the x sums serve
// the offsets). Their x is two runs starting where chunk_x_FMT(c) says
// (here neighbours: the block's elements in order).

fn chunk_x_block(c: u32) -> vec2<u32> {
    return vec2<u32>(8u * c, 8u * c + 4u);
}
// Nibble values of a block's 16 quant bytes.
fn nibbles8(q: vec4<u32>) -> array<vec4<f32>, CV> {
    return array<vec4<f32>, CV>(nib_lo(q.x), nib_lo(q.y), nib_lo(q.z), nib_lo(q.w),
        nib_hi(q.x), nib_hi(q.y), nib_hi(q.z), nib_hi(q.w));
}
// One scale and offset for the whole block.
fn block_ab(d: f32, off: f32) -> vec4<f32> {
    return vec4<f32>(d, off, d, off);
}

// The "given" forms take the block's stored scales, d (its f16 scale) and
// aux (its aux word; each format reads the ones it has), which the tiled
// core loads for a scale tile's 8 rows at once (kernels::tile_shape).

fn chunk_x_q8_0(c: u32) -> vec2<u32> {
    return chunk_x_block(c);
}
fn chunk_q_given_q8_0(row: u32, c: u32, aux: u32) -> array<vec4<f32>, CV> {
    let blk = row * p.blocks + c;
    let a = w_vec4(2u * blk);
    let b = w_vec4(2u * blk + 1u);
    return array<vec4<f32>, CV>(bytes_i(a.x), bytes_i(a.y), bytes_i(a.z), bytes_i(a.w),
        bytes_i(b.x), bytes_i(b.y), bytes_i(b.z), bytes_i(b.w));
}
fn chunk_q_q8_0(row: u32, c: u32) -> array<vec4<f32>, CV> {
    return chunk_q_given_q8_0(row, c, 0u);
}
fn chunk_ab_given_q8_0(d: f32, aux: u32) -> vec4<f32> {
    return block_ab(d, 0.0);
}
fn chunk_ab_q8_0(row: u32, c: u32) -> vec4<f32> {
    return chunk_ab_given_q8_0(d16(scale_slot(row, c)), 0u);
}

fn chunk_x_q4_0(c: u32) -> vec2<u32> {
    return chunk_x_block(c);
}
fn chunk_q_given_q4_0(row: u32, c: u32, aux: u32) -> array<vec4<f32>, CV> {
    return nibbles8(w_vec4(row * p.blocks + c));
}
fn chunk_q_q4_0(row: u32, c: u32) -> array<vec4<f32>, CV> {
    return chunk_q_given_q4_0(row, c, 0u);
}
fn chunk_ab_given_q4_0(d: f32, aux: u32) -> vec4<f32> {
    return block_ab(d, -8.0 * d);
}
fn chunk_ab_q4_0(row: u32, c: u32) -> vec4<f32> {
    return chunk_ab_given_q4_0(d16(scale_slot(row, c)), 0u);
}

fn chunk_x_q4_1(c: u32) -> vec2<u32> {
    return chunk_x_block(c);
}
fn chunk_q_given_q4_1(row: u32, c: u32, aux: u32) -> array<vec4<f32>, CV> {
    return nibbles8(w_vec4(row * p.blocks + c));
}
fn chunk_q_q4_1(row: u32, c: u32) -> array<vec4<f32>, CV> {
    return chunk_q_given_q4_1(row, c, 0u);
}
// aux: d and m as two f16.
fn chunk_ab_given_q4_1(d: f32, aux: u32) -> vec4<f32> {
    let dm = unpack2x16float(aux);
    return block_ab(dm.x, dm.y);
}
fn chunk_ab_q4_1(row: u32, c: u32) -> vec4<f32> {
    return chunk_ab_given_q4_1(0.0, aux_word(scale_slot(row, c), 0u));
}

fn chunk_x_q5_0(c: u32) -> vec2<u32> {
    return chunk_x_block(c);
}
// aux: qh, whose bit j is the fifth bit of element j.
fn chunk_q_given_q5_0(row: u32, c: u32, qh: u32) -> array<vec4<f32>, CV> {
    let q = w_vec4(row * p.blocks + c);
    return array<vec4<f32>, CV>(q5_lo(q.x, qh), q5_lo(q.y, qh >> 4u), q5_lo(q.z, qh >> 8u), q5_lo(q.w, qh >> 12u),
        q5_hi(q.x, qh >> 16u), q5_hi(q.y, qh >> 20u), q5_hi(q.z, qh >> 24u), q5_hi(q.w, qh >> 28u));
}
fn chunk_q_q5_0(row: u32, c: u32) -> array<vec4<f32>, CV> {
    return chunk_q_given_q5_0(row, c, aux_word(scale_slot(row, c), 0u));
}
fn chunk_ab_given_q5_0(d: f32, aux: u32) -> vec4<f32> {
    return block_ab(d, -16.0 * d);
}
fn chunk_ab_q5_0(row: u32, c: u32) -> vec4<f32> {
    return chunk_ab_given_q5_0(d16(scale_slot(row, c)), 0u);
}
