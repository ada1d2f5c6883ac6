// Weight decoding shared by the matmul and embedding kernels: one definition
// per storage format, concatenated in front of a kernel (KernelSpec.sources).
//
// The including kernel declares its parameters as `p`, with the part's
// layout in p.row_bytes, p.blocks, p.aux_base and p.d16_base, and puts the
// placeholder WEIGHT_WORDS (in double braces) where binding 1, one matrix
// part, belongs: pipeline creation declares it there, with `w_word(i)`
// (word i of the part) and `w_vec4(i)` (its 16 bytes from 16 i), as a
// storage buffer or a texture (gpu::weight_store). Every read of the
// weights goes through those two.
// F32 and F16 rows are stored as in the file (an odd F16 row length puts a
// row at 2 bytes past a word). Quantized parts are in the GPU layout of
// kernels::layout: three regions of words. Block i of the part (row-major)
// has its quants at QUANT_WORDS words from word i * QUANT_WORDS; block b of
// part row r has its scale slot t = scale_slot(r, b) in the other two:
//   aux:    AUX_WORDS words at p.aux_base + t * AUX_WORDS;
//   d16:    the block's f16 scale, half t % 2 of word p.d16_base + t / 2.
// Slots go in tiles of SCALE_TILE rows (8 for the 32-element formats, 1
// for the K-quants): block b of a tile's rows side by side. So every read
// is an aligned word, the quants of a block are whole vec4s, and so are a
// tile's 8 scales of one block (matvec_tile.wgsl). The part buffer carries
// at least 80 zero bytes after its data, so a partial F32/F16 unit may read
// a whole unit past the row end (the kernel masks those lanes).
//
// Decoding works in units of 16 weights: two runs of 8 consecutive row
// elements, at block elements `runs_FMT(u)` (x: run a, y: run b). The runs
// follow each format's byte layout, so a unit reads each byte it needs once:
// e.g. the low and high nibbles of one Q4_0 byte are elements j and j+16.
// `decode_FMT(row, U)` decodes unit U of part row `row`. Per format FMT the
// kernel gets, as defines, QK (elements per block, 16 for F32/F16 whose
// "block" is one unit), BLOCK_BYTES, UNITS (units per block), QUANT_WORDS,
// AUX_WORDS and SCALE_TILE.

struct Unit {
    a0: vec4<f32>, // run a, elements 0..4
    a1: vec4<f32>, // run a, elements 4..8
    b0: vec4<f32>, // run b, elements 0..4
    b1: vec4<f32>, // run b, elements 4..8
}

// ---- layout readers ------------------------------------------------------------

const QUANT_WORDS: u32 = {{QUANT_WORDS}};
const AUX_WORDS: u32 = {{AUX_WORDS}};
const SCALE_TILE: u32 = {{SCALE_TILE}};

// Block of unit U of part row `row`, and the unit within it.
fn block_of(row: u32, U: u32) -> u32 {
    return row * p.blocks + U / UNITS;
}
// Scale slot of block b of part row `row` (kernels::layout::scale_slot).
fn scale_slot(row: u32, b: u32) -> u32 {
    return ((row / SCALE_TILE) * p.blocks + b) * SCALE_TILE + row % SCALE_TILE;
}
// Scale slot of unit U of part row `row`.
fn slot_of(row: u32, U: u32) -> u32 {
    return scale_slot(row, U / UNITS);
}
fn quant_word(blk: u32, j: u32) -> u32 {
    return w_word(blk * QUANT_WORDS + j);
}
fn aux_word(slot: u32, j: u32) -> u32 {
    return w_word(p.aux_base + slot * AUX_WORDS + j);
}
fn d16(slot: u32) -> f32 {
    let v = unpack2x16float(w_word(p.d16_base + (slot >> 1u)));
    return select(v.x, v.y, (slot & 1u) == 1u);
}
// Signed byte j of the slot's aux words.
fn aux_i8(slot: u32, j: u32) -> f32 {
    let v = aux_word(slot, j >> 2u) >> ((j & 3u) * 8u);
    return f32(bitcast<i32>(v << 24u) >> 24u);
}
// Byte offset of unit U of row `row` in an F32/F16 part.
fn unit_byte(row: u32, U: u32) -> u32 {
    return row * p.row_bytes + U * BLOCK_BYTES;
}

// ---- F16 rows at any even byte ---------------------------------------------------

// The 32 bits starting `s` bits (a multiple of 8) into `lo`, continuing in `hi`.
// When s == 0 the shift by 32 is taken mod 32 by WGSL and the select discards it.
fn funnel(lo: u32, hi: u32, s: u32) -> u32 {
    return select((lo >> s) | (hi << (32u - s)), lo, s == 0u);
}

// 16 bytes at any byte offset, as four little-endian words.
fn w_bytes16(b: u32) -> vec4<u32> {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let w0 = w_word(i);
    let w1 = w_word(i + 1u);
    let w2 = w_word(i + 2u);
    let w3 = w_word(i + 3u);
    let w4 = w_word(i + 4u);
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

// Bits 0..3 of `h` moved to bit 4 of bytes 0..3: the fifth bits of four Q5
// elements, to OR into their nibbles before one conversion. The multiply
// adds copies of the 4 bits at shifts 0, 7, 14 and 21 (disjoint, so nothing
// carries), which puts bit i of `h` at bit 8i.
fn fifth_bits(h: u32) -> u32 {
    return (((h & 0xfu) * 0x00204081u) & 0x01010101u) << 4u;
}
// Four Q5 values (0..31): the low or high nibbles of `v`'s bytes, with the
// fifth bits from bits 0..3 of `h`.
fn q5_lo(v: u32, h: u32) -> vec4<f32> {
    return bytes_u((v & 0x0f0f0f0fu) | fifth_bits(h));
}
fn q5_hi(v: u32, h: u32) -> vec4<f32> {
    return bytes_u(((v >> 4u) & 0x0f0f0f0fu) | fifth_bits(h));
}

// ---- F32 and F16: a "block" is one unit of 16 consecutive elements -----------

fn runs_f32(u: u32) -> vec2<u32> {
    return vec2<u32>(0u, 8u);
}
fn decode_f32(row: u32, U: u32) -> Unit {
    let i = unit_byte(row, U) >> 2u; // F32 rows are whole words
    return Unit(
        bitcast<vec4<f32>>(vec4<u32>(w_word(i), w_word(i + 1u), w_word(i + 2u), w_word(i + 3u))),
        bitcast<vec4<f32>>(vec4<u32>(w_word(i + 4u), w_word(i + 5u), w_word(i + 6u), w_word(i + 7u))),
        bitcast<vec4<f32>>(vec4<u32>(w_word(i + 8u), w_word(i + 9u), w_word(i + 10u), w_word(i + 11u))),
        bitcast<vec4<f32>>(vec4<u32>(w_word(i + 12u), w_word(i + 13u), w_word(i + 14u), w_word(i + 15u))),
    );
}

fn f16x4(v: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y));
}
fn runs_f16(u: u32) -> vec2<u32> {
    return vec2<u32>(0u, 8u);
}
fn decode_f16(row: u32, U: u32) -> Unit {
    // An odd row length puts a row at 2 bytes past a word.
    let b = unit_byte(row, U);
    let lo = w_bytes16(b);
    let hi = w_bytes16(b + 16u);
    return Unit(f16x4(lo.xy), f16x4(lo.zw), f16x4(hi.xy), f16x4(hi.zw));
}

// ---- Q8_0: {d: f16, qs: [i8; 32]}, 34 bytes; x = d * q --------------------------

fn runs_q8_0(u: u32) -> vec2<u32> {
    return vec2<u32>(16u * u, 16u * u + 8u);
}
fn decode_q8_0(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let slot = slot_of(row, U);
    let u = U % UNITS;
    let d = d16(slot);
    let q = vec4<u32>(quant_word(blk, 4u * u), quant_word(blk, 4u * u + 1u), quant_word(blk, 4u * u + 2u), quant_word(blk, 4u * u + 3u));
    return Unit(d * bytes_i(q.x), d * bytes_i(q.y), d * bytes_i(q.z), d * bytes_i(q.w));
}

// ---- Q4_0: {d: f16, qs: [u8; 16]}, 18 bytes; element j < 16 is the low nibble
// of qs[j], j + 16 its high nibble; x = d * (q - 8) ------------------------------

fn runs_q4_0(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q4_0(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let slot = slot_of(row, U);
    let u = U % UNITS;
    let d = d16(slot);
    let q = vec2<u32>(quant_word(blk, 2u * u), quant_word(blk, 2u * u + 1u));
    let z = vec4<f32>(8.0);
    return Unit(d * (nib_lo(q.x) - z), d * (nib_lo(q.y) - z), d * (nib_hi(q.x) - z), d * (nib_hi(q.y) - z));
}

// ---- Q4_1: {d: f16, m: f16, qs: [u8; 16]}, 20 bytes (word aligned); x = d * q + m

fn runs_q4_1(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q4_1(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let slot = slot_of(row, U);
    let u = U % UNITS;
    let dm = unpack2x16float(aux_word(slot, 0u));
    let q0 = quant_word(blk, 2u * u);
    let q1 = quant_word(blk, 2u * u + 1u);
    let m = vec4<f32>(dm.y);
    return Unit(dm.x * nib_lo(q0) + m, dm.x * nib_lo(q1) + m, dm.x * nib_hi(q0) + m, dm.x * nib_hi(q1) + m);
}

// ---- Q5_0: {d: f16, qh: u32, qs: [u8; 16]}, 22 bytes; bit j of qh is the fifth
// bit of element j; x = d * (q - 16) --------------------------------------------

fn runs_q5_0(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 16u + 8u * u);
}
fn decode_q5_0(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let slot = slot_of(row, U);
    let u = U % UNITS;
    let d = d16(slot);
    let qh = aux_word(slot, 0u);
    let q = vec2<u32>(quant_word(blk, 2u * u), quant_word(blk, 2u * u + 1u));
    let ha = qh >> (8u * u);
    let hb = qh >> (16u + 8u * u);
    let z = vec4<f32>(16.0);
    return Unit(
        d * (q5_lo(q.x, ha) - z),
        d * (q5_lo(q.y, ha >> 4u) - z),
        d * (q5_hi(q.x, hb) - z),
        d * (q5_hi(q.y, hb >> 4u) - z),
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
// d * scale and dmin * min of sub-blocks 2c and 2c + 1 of the block with
// scale slot `slot`: (scale a, min a, scale b, min b).
fn chunk_scales_q4_k(slot: u32, c: u32) -> vec4<f32> {
    let aux = vec4<u32>(aux_word(slot, 0u), aux_word(slot, 1u), aux_word(slot, 2u), aux_word(slot, 3u));
    return chunk_scales_q4_k_of(aux, c);
}
// The same from the block's four aux words (d and dmin, then the 12
// scale bytes), however they were read.
fn chunk_scales_q4_k_of(aux: vec4<u32>, c: u32) -> vec4<f32> {
    let dd = unpack2x16float(aux.x);
    let sa = scale_min_q4_k(2u * c, aux.y, aux.z, aux.w);
    let sb = scale_min_q4_k(2u * c + 1u, aux.y, aux.z, aux.w);
    return vec4<f32>(dd.x * sa.x, dd.y * sa.y, dd.x * sb.x, dd.y * sb.y);
}
fn runs_q4_k(u: u32) -> vec2<u32> {
    let c = u >> 2u;
    let s = u & 3u;
    return vec2<u32>(64u * c + 8u * s, 64u * c + 32u + 8u * s);
}
fn decode_q4_k(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let u = U % UNITS;
    let c = u >> 2u;
    let s = u & 3u;
    let sc = chunk_scales_q4_k(slot_of(row, U), c);
    let da = sc.x;
    let ma = vec4<f32>(sc.y);
    let db = sc.z;
    let mb = vec4<f32>(sc.w);
    let q0 = quant_word(blk, 8u * c + 2u * s);
    let q1 = quant_word(blk, 8u * c + 2u * s + 1u);
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
fn decode_q6_k(row: u32, U: u32) -> Unit {
    let blk = block_of(row, U);
    let u = U % UNITS;
    let n = u >> 3u;
    let l0 = 8u * (u & 3u);
    let g = (u >> 2u) & 1u;
    // ql and qh are quant bytes 0..128 and 128..192; l0 is a multiple of 8.
    let qlw = (64u * n + 32u * g + l0) / 4u;
    let qhw = (128u + 32u * n + l0) / 4u;
    let ql = vec2<u32>(quant_word(blk, qlw), quant_word(blk, qlw + 1u));
    let qh = vec2<u32>(quant_word(blk, qhw), quant_word(blk, qhw + 1u));
    let sh_a = 2u * g;
    let sh_b = sh_a + 4u;
    // Pack 6-bit values four to a word, then centre them.
    let qa0 = (ql.x & 0x0f0f0f0fu) | (((qh.x >> sh_a) & 0x03030303u) << 4u);
    let qa1 = (ql.y & 0x0f0f0f0fu) | (((qh.y >> sh_a) & 0x03030303u) << 4u);
    let qb0 = ((ql.x >> 4u) & 0x0f0f0f0fu) | (((qh.x >> sh_b) & 0x03030303u) << 4u);
    let qb1 = ((ql.y >> 4u) & 0x0f0f0f0fu) | (((qh.y >> sh_b) & 0x03030303u) << 4u);
    let slot = slot_of(row, U);
    let d = d16(slot);
    // Run a starts at half element l0 + 32g, run b 64 further: scale index + 4
    // (the 16 scale bytes are the block's 4 aux words).
    let sc = 8u * n + (l0 + 32u * g) / 16u;
    let da = d * aux_i8(slot, sc);
    let db = d * aux_i8(slot, sc + 4u);
    let z = vec4<f32>(32.0);
    return Unit(da * (bytes_u(qa0) - z), da * (bytes_u(qa1) - z), db * (bytes_u(qb0) - z), db * (bytes_u(qb1) - z));
}
