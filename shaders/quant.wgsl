// Weight decoding shared by the matmul and embedding kernels: one definition
// per storage format, concatenated in front of a kernel (KernelSpec.sources).
//
// The including kernel declares the weights as raw words:
//   @group(0) @binding(1) var<storage, read> w: array<u32>; // one matrix part, bytes as stored in GGUF
// Blocks are 34, 18, 22 or 210 bytes long, so a block (and a row) may start at
// any even byte: everything here addresses bytes and reads whole words.
// The part buffer carries at least 80 zero bytes after its last row, so a
// reader may fetch one word past its data, and a partial F32/F16 unit may
// read a whole unit past the row end (the kernel masks those lanes).
//
// Decoding works in units of 16 weights: two runs of 8 consecutive row
// elements, at block elements `runs_FMT(u)` (x: run a, y: run b). The runs
// follow each format's byte layout, so a unit reads each byte it needs once:
// e.g. the low and high nibbles of one Q4_0 byte are elements j and j+16.
// Per format FMT the kernel gets, as defines, QK (elements per block, 16 for
// F32/F16 whose "block" is one unit), BLOCK_BYTES and UNITS (units per block).

struct Unit {
    a0: vec4<f32>, // run a, elements 0..4
    a1: vec4<f32>, // run a, elements 4..8
    b0: vec4<f32>, // run b, elements 0..4
    b1: vec4<f32>, // run b, elements 4..8
}

// ---- byte readers -----------------------------------------------------------

// The 32 bits starting `s` bits (a multiple of 8) into `lo`, continuing in `hi`.
// When s == 0 the shift by 32 is taken mod 32 by WGSL and the select discards it.
fn funnel(lo: u32, hi: u32, s: u32) -> u32 {
    return select((lo >> s) | (hi << (32u - s)), lo, s == 0u);
}

// One byte at byte offset `b`.
fn w_u8(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// A signed byte at `b`.
fn w_i8(b: u32) -> f32 {
    return f32(bitcast<i32>(w_u8(b) << 24u) >> 24u);
}

// The IEEE half at an even byte offset `b`.
fn w_f16(b: u32) -> f32 {
    return unpack2x16float(w[b >> 2u] >> ((b & 2u) * 8u)).x;
}

// 4 bytes at any byte offset.
fn w_bytes4(b: u32) -> u32 {
    let i = b >> 2u;
    return funnel(w[i], w[i + 1u], (b & 3u) * 8u);
}

// 8 bytes at any byte offset, as two little-endian words.
fn w_bytes8(b: u32) -> vec2<u32> {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    return vec2<u32>(funnel(w0, w1, s), funnel(w1, w2, s));
}

// 16 bytes at any byte offset, as four little-endian words.
fn w_bytes16(b: u32) -> vec4<u32> {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    let w3 = w[i + 3u];
    let w4 = w[i + 4u];
    return vec4<u32>(funnel(w0, w1, s), funnel(w1, w2, s), funnel(w2, w3, s), funnel(w3, w4, s));
}

// ---- unpacking packed words --------------------------------------------------

// The four bytes of `v`, as unsigned values.
fn bytes_u(v: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu));
}

// The four bytes of `v`, as signed values.
fn bytes_i(v: u32) -> vec4<f32> {
    let shifted = vec4<u32>(v << 24u, v << 16u, v << 8u, v);
    return vec4<f32>(bitcast<vec4<i32>>(shifted) >> vec4<u32>(24u));
}

// Low and high nibbles of the four bytes of `v`.
fn nib_lo(v: u32) -> vec4<f32> {
    return bytes_u(v & 0x0f0f0f0fu);
}
fn nib_hi(v: u32) -> vec4<f32> {
    return bytes_u((v >> 4u) & 0x0f0f0f0fu);
}

// Bits 0..4 of `h`, each as 0 or 16 (the fifth bit of a Q5 value).
fn bit5x4(h: u32) -> vec4<f32> {
    return vec4<f32>(((vec4<u32>(h) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) << vec4<u32>(4u));
}

// ---- F32 and F16: a "block" is one unit of 16 consecutive elements -----------

fn runs_f32(u: u32) -> vec2<u32> {
    return vec2<u32>(0u, 8u);
}
fn decode_f32(b: u32, u: u32) -> Unit {
    let i = b >> 2u; // F32 rows are whole words
    return Unit(
        bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u])),
        bitcast<vec4<f32>>(vec4<u32>(w[i + 4u], w[i + 5u], w[i + 6u], w[i + 7u])),
        bitcast<vec4<f32>>(vec4<u32>(w[i + 8u], w[i + 9u], w[i + 10u], w[i + 11u])),
        bitcast<vec4<f32>>(vec4<u32>(w[i + 12u], w[i + 13u], w[i + 14u], w[i + 15u])),
    );
}

fn f16x4(v: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y));
}
fn runs_f16(u: u32) -> vec2<u32> {
    return vec2<u32>(0u, 8u);
}
fn decode_f16(b: u32, u: u32) -> Unit {
    // An odd row length puts a row at 2 bytes past a word.
    let lo = w_bytes16(b);
    let hi = w_bytes16(b + 16u);
    return Unit(f16x4(lo.xy), f16x4(lo.zw), f16x4(hi.xy), f16x4(hi.zw));
}

// ---- Q8_0: {d: f16, qs: [i8; 32]}, 34 bytes; x = d * q --------------------------

fn runs_q8_0(u: u32) -> vec2<u32> {
    return vec2<u32>(16u * u, 16u * u + 8u);
}
fn decode_q8_0(b: u32, u: u32) -> Unit {
    let d = w_f16(b);
    let q = w_bytes16(b + 2u + 16u * u);
    return Unit(d * bytes_i(q.x), d * bytes_i(q.y), d * bytes_i(q.z), d * bytes_i(q.w));
}

// ---- Q4_0: {d: f16, qs: [u8; 16]}, 18 bytes; element j < 16 is the low nibble
// of qs[j], j + 16 its high nibble; x = d * (q - 8) ------------------------------

fn runs_q4_0(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q4_0(b: u32, u: u32) -> Unit {
    let d = w_f16(b);
    let q = w_bytes8(b + 2u + 8u * u);
    let z = vec4<f32>(8.0);
    return Unit(d * (nib_lo(q.x) - z), d * (nib_lo(q.y) - z), d * (nib_hi(q.x) - z), d * (nib_hi(q.y) - z));
}

// ---- Q4_1: {d: f16, m: f16, qs: [u8; 16]}, 20 bytes (word aligned); x = d * q + m

fn runs_q4_1(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q4_1(b: u32, u: u32) -> Unit {
    let i = b >> 2u;
    let dm = unpack2x16float(w[i]);
    let q0 = w[i + 1u + 2u * u];
    let q1 = w[i + 2u + 2u * u];
    let m = vec4<f32>(dm.y);
    return Unit(dm.x * nib_lo(q0) + m, dm.x * nib_lo(q1) + m, dm.x * nib_hi(q0) + m, dm.x * nib_hi(q1) + m);
}

// ---- Q5_0: {d: f16, qh: u32, qs: [u8; 16]}, 22 bytes; bit j of qh is the fifth
// bit of element j; x = d * (q - 16) --------------------------------------------

fn runs_q5_0(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q5_0(b: u32, u: u32) -> Unit {
    let d = w_f16(b);
    let qh = w_bytes4(b + 2u);
    let q = w_bytes8(b + 6u + 8u * u);
    let ha = qh >> (8u * u);
    let hb = qh >> (16u + 8u * u);
    let z = vec4<f32>(16.0);
    return Unit(
        d * (nib_lo(q.x) + bit5x4(ha) - z),
        d * (nib_lo(q.y) + bit5x4(ha >> 4u) - z),
        d * (nib_hi(q.x) + bit5x4(hb) - z),
        d * (nib_hi(q.y) + bit5x4(hb >> 4u) - z),
    );
}

// ---- Q4_K: {d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]}, 144 bytes (word
// aligned), 256 elements in 8 sub-blocks of 32 with 6-bit scale and min each.
// Elements 64c + l (l < 32) are the low nibbles of qs[32c + l] (sub-block 2c),
// 64c + 32 + l the high nibbles (sub-block 2c + 1); x = d * sc * q - dmin * m.

// Scale and min of sub-block j from the 12 scale bytes as words s0, s1, s2:
// j < 4 keeps 6 bits of bytes j and j + 4; j >= 4 takes 4 bits from byte j + 4
// and the top 2 bits of bytes j - 4 (scale) and j (min).
fn scale_min_q4_k(j: u32, s0: u32, s1: u32, s2: u32) -> vec2<f32> {
    let sh = (j & 3u) * 8u;
    let b0 = (s0 >> sh) & 0xffu;
    let b1 = (s1 >> sh) & 0xffu;
    let b2 = (s2 >> sh) & 0xffu;
    let low = vec2<u32>(b0 & 63u, b1 & 63u);
    let high = vec2<u32>((b2 & 15u) | ((b0 >> 6u) << 4u), (b2 >> 4u) | ((b1 >> 6u) << 4u));
    return vec2<f32>(select(high, low, j < 4u));
}
fn runs_q4_k(u: u32) -> vec2<u32> {
    let c = u >> 2u;
    let s = u & 3u;
    return vec2<u32>(64u * c + 8u * s, 64u * c + 32u + 8u * s);
}
fn decode_q4_k(b: u32, u: u32) -> Unit {
    let i = b >> 2u;
    let c = u >> 2u;
    let s = u & 3u;
    let dd = unpack2x16float(w[i]);
    let s0 = w[i + 1u];
    let s1 = w[i + 2u];
    let s2 = w[i + 3u];
    let sa = scale_min_q4_k(2u * c, s0, s1, s2);
    let sb = scale_min_q4_k(2u * c + 1u, s0, s1, s2);
    let da = dd.x * sa.x;
    let ma = vec4<f32>(dd.y * sa.y);
    let db = dd.x * sb.x;
    let mb = vec4<f32>(dd.y * sb.y);
    let q0 = w[i + 4u + 8u * c + 2u * s];
    let q1 = w[i + 5u + 8u * c + 2u * s];
    return Unit(da * nib_lo(q0) - ma, da * nib_lo(q1) - ma, db * nib_hi(q0) - mb, db * nib_hi(q1) - mb);
}

// ---- Q6_K: {ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16}, 210 bytes,
// 256 elements in two halves of 128. In half n, for l < 32, byte ql[64n + l]
// holds the low 4 bits of elements l (low nibble) and l + 64 (high nibble),
// ql[64n + 32 + l] those of l + 32 and l + 96; qh[32n + l] holds their top 2
// bits at shifts 0, 2, 4, 6 for l, l + 32, l + 64, l + 96. Element e of the
// half has scale scales[8n + e / 16]; x = d * scale * (q - 32).

fn runs_q6_k(u: u32) -> vec2<u32> {
    let n = u >> 3u;
    let l0 = 8u * (u & 3u);
    let g = (u >> 2u) & 1u;
    let a = 128u * n + l0 + 32u * g;
    return vec2<u32>(a, a + 64u);
}
fn decode_q6_k(b: u32, u: u32) -> Unit {
    let n = u >> 3u;
    let l0 = 8u * (u & 3u);
    let g = (u >> 2u) & 1u;
    let ql = w_bytes8(b + 64u * n + 32u * g + l0);
    let qh = w_bytes8(b + 128u + 32u * n + l0);
    let sh_a = 2u * g;
    let sh_b = sh_a + 4u;
    // Pack 6-bit values four to a word, then centre them.
    let qa0 = (ql.x & 0x0f0f0f0fu) | (((qh.x >> sh_a) & 0x03030303u) << 4u);
    let qa1 = (ql.y & 0x0f0f0f0fu) | (((qh.y >> sh_a) & 0x03030303u) << 4u);
    let qb0 = ((ql.x >> 4u) & 0x0f0f0f0fu) | (((qh.x >> sh_b) & 0x03030303u) << 4u);
    let qb1 = ((ql.y >> 4u) & 0x0f0f0f0fu) | (((qh.y >> sh_b) & 0x03030303u) << 4u);
    let d = w_f16(b + 208u);
    // Run a starts at half element l0 + 32g, run b 64 further: scale index + 4.
    let sc = b + 192u + 8u * n + (l0 + 32u * g) / 16u;
    let da = d * w_i8(sc);
    let db = d * w_i8(sc + 4u);
    let z = vec4<f32>(32.0);
    return Unit(da * (bytes_u(qa0) - z), da * (bytes_u(qa1) - z), db * (bytes_u(qb0) - z), db * (bytes_u(qb1) - z));
}
