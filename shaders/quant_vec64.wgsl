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
// vec4, after the part's quants (32 or 48 words a block).
fn aux4(blk: u32) -> vec4<u32> {
    return w4[p.aux_base / 4u + blk];
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
    let q0 = w4[8u * blk + 2u * c];      // bytes 32c .. 32c + 16
    let q1 = w4[8u * blk + 2u * c + 1u]; // bytes 32c + 16 .. 32c + 32
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
    return bytes_u((ql & 0x0f0f0f0fu) | (((qh >> shift) & 0x03030303u) << 4u)) - vec4<f32>(32.0);
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
    var sum = 0.0;
    for (var j = 0u; j < 2u; j++) {
        let ql = w4[t.qv + 4u * t.n + 2u * t.g + j];
        let qh = w4[t.qv + 8u + 2u * t.n + j];
        let a = dot(q6x4(ql.x, qh.x, sa), xs[4u * j]) + dot(q6x4(ql.y, qh.y, sa), xs[4u * j + 1u])
            + dot(q6x4(ql.z, qh.z, sa), xs[4u * j + 2u]) + dot(q6x4(ql.w, qh.w, sa), xs[4u * j + 3u]);
        let b = dot(q6x4(ql.x >> 4u, qh.x, sb), xs[8u + 4u * j]) + dot(q6x4(ql.y >> 4u, qh.y, sb), xs[9u + 4u * j])
            + dot(q6x4(ql.z >> 4u, qh.z, sb), xs[10u + 4u * j]) + dot(q6x4(ql.w >> 4u, qh.w, sb), xs[11u + 4u * j]);
        // Scales: run a's 16 elements from 16j use scale 8n + 2g + j, run b's 4 later.
        let sc = 8u * t.n + 2u * t.g + j;
        sum += i8_of(scales, sc) * a + i8_of(scales, sc + 4u) * b;
    }
    return d16(t.blk) * sum;
}

// ---- Chunks (the tiled vec4 core): half a step, weights as values ---------
// Chunk c is run c % 2 of step c / 2 (see runs_vec_FMT), 32 elements.

fn chunk_x_q4_k(c: u32) -> u32 {
    return 8u * c; // Q4_K's runs follow each other
}
fn decode_chunk_q4_k(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let s = c / 2u;
    let blk = row * p.blocks + s / 4u;
    let cc = s & 3u;
    let sc = chunk_scales_q4_k_of(aux4(blk), cc);
    let q0 = w4[8u * blk + 2u * cc];
    let q1 = w4[8u * blk + 2u * cc + 1u];
    if ((c & 1u) == 0u) {
        let d = sc.x;
        let m = vec4<f32>(sc.y);
        return array<vec4<f32>, CV>(d * nib_lo(q0.x) - m, d * nib_lo(q0.y) - m, d * nib_lo(q0.z) - m, d * nib_lo(q0.w) - m,
            d * nib_lo(q1.x) - m, d * nib_lo(q1.y) - m, d * nib_lo(q1.z) - m, d * nib_lo(q1.w) - m);
    }
    let d = sc.z;
    let m = vec4<f32>(sc.w);
    return array<vec4<f32>, CV>(d * nib_hi(q0.x) - m, d * nib_hi(q0.y) - m, d * nib_hi(q0.z) - m, d * nib_hi(q0.w) - m,
        d * nib_hi(q1.x) - m, d * nib_hi(q1.y) - m, d * nib_hi(q1.z) - m, d * nib_hi(q1.w) - m);
}

fn chunk_x_q6_k(c: u32) -> u32 {
    let runs = runs_vec_q6_k(c / 2u);
    return select(runs.x, runs.y, (c & 1u) == 1u);
}
fn decode_chunk_q6_k(row: u32, c: u32) -> array<vec4<f32>, CV> {
    let s = c / 2u;
    let h = c & 1u; // run a (low nibbles) or b (high nibbles)
    let blk = row * p.blocks + s / 4u;
    let n = (s >> 1u) & 1u;
    let g = s & 1u;
    let qv = 12u * blk;
    let qh_shift = 2u * g + 4u * h;
    let ql_shift = 4u * h;
    let d = d16(blk);
    let scales = aux4(blk);
    var v: array<vec4<f32>, CV>;
    for (var j = 0u; j < 2u; j++) {
        let ql = w4[qv + 4u * n + 2u * g + j];
        let qh = w4[qv + 8u + 2u * n + j];
        let sc = d * i8_of(scales, 8u * n + 2u * g + j + 4u * h);
        v[4u * j] = sc * q6x4(ql.x >> ql_shift, qh.x, qh_shift);
        v[4u * j + 1u] = sc * q6x4(ql.y >> ql_shift, qh.y, qh_shift);
        v[4u * j + 2u] = sc * q6x4(ql.z >> ql_shift, qh.z, qh_shift);
        v[4u * j + 3u] = sc * q6x4(ql.w >> ql_shift, qh.w, qh_shift);
    }
    return v;
}
