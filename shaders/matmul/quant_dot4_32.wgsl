// Integer step functions of linear_x_q8_dot4.wgsl for the 32-element block
// formats: dot_i8_FMT(row, s, x) is the sum over block s of part row `row`
// of weight * x, x in 8-bit blocks (one a step). Weights in the GPU layout
// (quant.wgsl), quants as vec4s from w4 as quant_vec32.wgsl reads them.

// A step's x: one block.
struct StepX {
    lo: vec4<u32>, // bytes 0..16 (byte i of word j is value 4j + i)
    hi: vec4<u32>, // bytes 16..32
    d: f32,        // the block's scale
    dsum: f32,     // d * sum(q), for the formats with an offset
}

fn step_x(base4: u32, s: u32) -> StepX {
    let b = (base4 + runs_vec_{{FMT}}(s).x) / 8u;
    let d = xd[b];
    return StepX(xq[2u * b], xq[2u * b + 1u], d.x, d.y);
}

fn dot_i8_q8_0(row: u32, s: u32, x: StepX) -> f32 {
    return dot_i8_scaled_q8_0(row, s, x, d16(scale_slot(row, s)), 0u);
}
// The step given its block's scales as they are stored (see quant_vec32.wgsl's
// dot_scaled_FMT): d the f16 scale, aux the aux word.
fn dot_i8_scaled_q8_0(row: u32, s: u32, x: StepX, d: f32, aux: u32) -> f32 {
    let blk = row * p.blocks + s;
    let sum = dot16(w_vec4(2u * blk), x.lo) + dot16(w_vec4(2u * blk + 1u), x.hi);
    return d * x.d * sum;
}

// A block's 16 quant bytes: element i is the low nibble of byte i, element
// 16 + i its high nibble; `lo5` / `hi5` are OR'd in (Q5_0's fifth bits).
fn dot_nibbles_i8(q: vec4<u32>, lo5: vec4<u32>, hi5: vec4<u32>, x: StepX) -> f32 {
    return dot16(nibbles_lo(q) | lo5, x.lo) + dot16(nibbles_hi(q) | hi5, x.hi);
}

fn dot_i8_q4_0(row: u32, s: u32, x: StepX) -> f32 {
    return dot_i8_scaled_q4_0(row, s, x, d16(scale_slot(row, s)), 0u);
}
fn dot_i8_scaled_q4_0(row: u32, s: u32, x: StepX, d: f32, aux: u32) -> f32 {
    let sum = dot_nibbles_i8(w_vec4(row * p.blocks + s), vec4<u32>(0u), vec4<u32>(0u), x);
    return d * (x.d * sum - 8.0 * x.dsum);
}

fn dot_i8_q4_1(row: u32, s: u32, x: StepX) -> f32 {
    return dot_i8_scaled_q4_1(row, s, x, 0.0, aux_word(scale_slot(row, s), 0u));
}
// aux: d and m as two f16.
fn dot_i8_scaled_q4_1(row: u32, s: u32, x: StepX, d: f32, aux: u32) -> f32 {
    let dm = unpack2x16float(aux);
    let sum = dot_nibbles_i8(w_vec4(row * p.blocks + s), vec4<u32>(0u), vec4<u32>(0u), x);
    return dm.x * x.d * sum + dm.y * x.dsum;
}

fn dot_i8_q5_0(row: u32, s: u32, x: StepX) -> f32 {
    let slot = scale_slot(row, s);
    return dot_i8_scaled_q5_0(row, s, x, d16(slot), aux_word(slot, 0u));
}
// aux: qh, whose bit j is the fifth bit of element j.
fn dot_i8_scaled_q5_0(row: u32, s: u32, x: StepX, d: f32, qh: u32) -> f32 {
    let lo5 = vec4<u32>(fifth_bits(qh), fifth_bits(qh >> 4u), fifth_bits(qh >> 8u), fifth_bits(qh >> 12u));
    let hi5 = vec4<u32>(fifth_bits(qh >> 16u), fifth_bits(qh >> 20u), fifth_bits(qh >> 24u), fifth_bits(qh >> 28u));
    let sum = dot_nibbles_i8(w_vec4(row * p.blocks + s), lo5, hi5, x);
    return d * (x.d * sum - 16.0 * x.dsum);
}
