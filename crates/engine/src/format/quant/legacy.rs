//! The 32-element "legacy" blocks: one f16 scale `d` per block (plus an f16
//! offset `m` for the `_1` types). In the 4- and 5-bit types element j < 16 sits
//! in the low nibble of `qs[j]` and element j + 16 in its high nibble, so a
//! GPU thread decodes both halves of a block from the same byte.
//!
//! | type | bytes | layout                          | value            |
//! |------|-------|---------------------------------|------------------|
//! | Q4_0 | 18    | d, qs[16]                       | d * (q - 8)      |
//! | Q4_1 | 20    | d, m, qs[16]                    | d * q + m        |
//! | Q5_0 | 22    | d, qh: u32, qs[16]              | d * (q - 16)     |
//! | Q5_1 | 24    | d, m, qh: u32, qs[16]           | d * q + m        |
//! | Q8_0 | 34    | d, qs: [i8; 32]                 | d * q            |
//!
//! The 5th bit of element j of a 5-bit block is bit j of `qh`.

use super::{f16_at, f16_scale, level, signed_absmax};

pub(super) fn dequant_q4_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, &q) in b[2..18].iter().enumerate() {
        out[j] = ((q & 0xF) as i32 - 8) as f32 * d;
        out[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

pub(super) fn dequant_q4_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for (j, &q) in b[4..20].iter().enumerate() {
        out[j] = (q & 0xF) as f32 * d + m;
        out[j + 16] = (q >> 4) as f32 * d + m;
    }
}

/// The 5-bit values of one block, element order, from `qh` and `qs`.
fn five_bit(qh: u32, qs: &[u8]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for (j, &byte) in qs.iter().enumerate() {
        q[j] = (byte & 0xF) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (byte >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

pub(super) fn dequant_q5_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for (o, q) in out.iter_mut().zip(five_bit(qh, &b[6..22])) {
        *o = (q as i32 - 16) as f32 * d;
    }
}

pub(super) fn dequant_q5_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for (o, q) in out.iter_mut().zip(five_bit(qh, &b[8..24])) {
        *o = q as f32 * d + m;
    }
}

pub(super) fn dequant_q8_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in out.iter_mut().zip(&b[2..34]) {
        *o = q as i8 as f32 * d;
    }
}

/// Symmetric 4/5-bit levels as ggml chooses them: the signed extreme maps to
/// level 0 exactly (d = max / -half), the opposite side clamps at the top.
fn symmetric(x: &[f32], half: i32) -> Option<([u8; 2], [u8; 32])> {
    let (bits, d) = f16_scale(signed_absmax(x) / -(half as f32))?;
    let mut q = [0u8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = level(v, d, half, 2 * half - 1);
    }
    Some((bits, q))
}

/// Offset 4/5-bit levels: min maps to level 0, max to the top level.
fn offset(x: &[f32], top: i32) -> Option<([u8; 2], [u8; 2], [u8; 32])> {
    let min = x.iter().copied().fold(f32::INFINITY, f32::min);
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (d_bits, d) = f16_scale((max - min) / top as f32)?;
    let (m_bits, m) = f16_scale(min)?;
    let mut q = [0u8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = level(v - m, d, 0, top);
    }
    Some((d_bits, m_bits, q))
}

fn pack_nibbles(q: &[u8; 32], qs: &mut [u8]) {
    for (j, byte) in qs.iter_mut().enumerate() {
        *byte = (q[j] & 0xF) | ((q[j + 16] & 0xF) << 4);
    }
}

fn fifth_bits(q: &[u8; 32]) -> [u8; 4] {
    let qh = q
        .iter()
        .enumerate()
        .fold(0u32, |h, (j, &v)| h | (((v >> 4) & 1) as u32) << j);
    qh.to_le_bytes()
}

pub(super) fn quant_q4_0(x: &[f32], o: &mut [u8]) -> bool {
    let Some((d, q)) = symmetric(x, 8) else {
        return false;
    };
    o[0..2].copy_from_slice(&d);
    pack_nibbles(&q, &mut o[2..18]);
    true
}

pub(super) fn quant_q4_1(x: &[f32], o: &mut [u8]) -> bool {
    let Some((d, m, q)) = offset(x, 15) else {
        return false;
    };
    o[0..2].copy_from_slice(&d);
    o[2..4].copy_from_slice(&m);
    pack_nibbles(&q, &mut o[4..20]);
    true
}

pub(super) fn quant_q5_0(x: &[f32], o: &mut [u8]) -> bool {
    let Some((d, q)) = symmetric(x, 16) else {
        return false;
    };
    o[0..2].copy_from_slice(&d);
    o[2..6].copy_from_slice(&fifth_bits(&q));
    pack_nibbles(&q, &mut o[6..22]);
    true
}

pub(super) fn quant_q5_1(x: &[f32], o: &mut [u8]) -> bool {
    let Some((d, m, q)) = offset(x, 31) else {
        return false;
    };
    o[0..2].copy_from_slice(&d);
    o[2..4].copy_from_slice(&m);
    o[4..8].copy_from_slice(&fifth_bits(&q));
    pack_nibbles(&q, &mut o[8..24]);
    true
}

pub(super) fn quant_q8_0(x: &[f32], o: &mut [u8]) -> bool {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let Some((bits, d)) = f16_scale(amax / 127.0) else {
        return false;
    };
    o[0..2].copy_from_slice(&bits);
    for (byte, &v) in o[2..34].iter_mut().zip(x) {
        let q = if d == 0.0 { 0 } else { (v / d).round() as i32 };
        *byte = q.clamp(-128, 127) as i8 as u8;
    }
    true
}
