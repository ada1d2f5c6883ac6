//! The 256-element "K" super-blocks. Each holds small sub-blocks whose own
//! scales are themselves quantized against one or two f16 super-scales, which
//! is how they reach ~4.5 / 5.5 / 6.5 bits per weight.
//!
//! Q4_K (144 B) = d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128].
//! Q5_K (176 B) = d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128].
//!   Eight sub-blocks of 32, each with a 6-bit scale `sc` and 6-bit min `m`:
//!   value = d * sc * q - dmin * m. Elements 64c..64c+32 are the low nibbles of
//!   qs[32c..32c+32] and elements 64c+32..64c+64 their high nibbles. In Q5_K the
//!   5th bit of those two halves is bit 2c, resp. 2c+1, of qh[l].
//! Q6_K (210 B) = ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16.
//!   Sixteen sub-blocks of 16 with signed 8-bit scales: value = d * sc * (q - 32).
//!   Each half h (128 elements) uses ql[64h..], qh[32h..]; within it, element
//!   32k + l takes its low 4 bits from ql[l + 32 * (k & 1)] (low nibble for
//!   k < 2, high for k >= 2) and its top 2 bits from bits 2k, 2k+1 of qh[l].

use super::{f16_at, f16_scale, f16_scale_up, level, signed_absmax};

/// Scale and min of sub-block `j` (0..8) from the 12 packed bytes. The first
/// four pairs are the low 6 bits of bytes 0..4 (scales) and 4..8 (mins); the
/// last four keep their low 4 bits in bytes 8..12 (scale low nibble, min high
/// nibble) and their top 2 bits in the spare top bits of bytes 0..8.
fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Inverse of [`scale_min`] for eight 6-bit scales and mins.
fn pack_scale_min(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    s
}

/// Shared decoder for Q4_K / Q5_K; `qh` is empty for Q4_K.
fn dequant_offset_k(b: &[u8], qh: &[u8], qs: &[u8], out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    for (c, (q, o)) in qs
        .chunks_exact(32)
        .zip(out.chunks_exact_mut(64))
        .enumerate()
    {
        let (sc1, m1) = scale_min(2 * c, scales);
        let (sc2, m2) = scale_min(2 * c + 1, scales);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
        for (l, &byte) in q.iter().enumerate() {
            let (hi1, hi2) = match qh.get(l) {
                Some(h) => (((h >> (2 * c)) & 1) << 4, ((h >> (2 * c + 1)) & 1) << 4),
                None => (0, 0),
            };
            o[l] = d1 * ((byte & 0xF) | hi1) as f32 - min1;
            o[l + 32] = d2 * ((byte >> 4) | hi2) as f32 - min2;
        }
    }
}

pub(super) fn dequant_q4_k(b: &[u8], out: &mut [f32]) {
    dequant_offset_k(b, &[], &b[16..144], out);
}

pub(super) fn dequant_q5_k(b: &[u8], out: &mut [f32]) {
    dequant_offset_k(b, &b[16..48], &b[48..176], out);
}

pub(super) fn dequant_q6_k(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 208);
    for h in 0..2 {
        let ql = &b[64 * h..64 * h + 64];
        let qh = &b[128 + 32 * h..128 + 32 * h + 32];
        let sc = &b[192 + 8 * h..192 + 8 * h + 8];
        let o = &mut out[128 * h..128 * h + 128];
        for l in 0..32 {
            for k in 0..4 {
                let low = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
                let q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) as i32 - 32;
                let scale = sc[2 * k + l / 16] as i8;
                o[32 * k + l] = d * scale as f32 * q as f32;
            }
        }
    }
}

/// Round-to-nearest Q4_K / Q5_K block (`top` = 15 or 31). Mins and then
/// scales are rounded *up* so every sub-block's grid covers its whole range:
/// nothing clamps, and each element is off by at most half its grid step.
fn quant_offset_k(x: &[f32], top: u8) -> Option<([u8; 4], [u8; 12], [u8; 256])> {
    // Mins are a non-negative amount subtracted, as in ggml, so a sub-block
    // of positive values gets min 0 and its range starts at 0.
    let mut lo = [0f32; 8];
    let mut hi = [0f32; 8];
    for (j, sub) in x.chunks_exact(32).enumerate() {
        lo[j] = sub.iter().copied().fold(0.0, f32::min);
        hi[j] = sub.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    }
    let (dmin_bits, dmin) = f16_scale_up(lo.iter().fold(0.0f32, |a, &l| a.max(-l)) / 63.0)?;
    let mut m = [0u8; 8];
    let mut need = [0f32; 8];
    for j in 0..8 {
        m[j] = if dmin > 0.0 {
            (-lo[j] / dmin).ceil().min(63.0) as u8
        } else {
            0
        };
        need[j] = ((hi[j] + dmin * m[j] as f32) / top as f32).max(0.0);
    }
    let (d_bits, d) = f16_scale_up(need.iter().fold(0.0f32, |a, &b| a.max(b)) / 63.0)?;
    let mut sc = [0u8; 8];
    let mut q = [0u8; 256];
    for (j, sub) in x.chunks_exact(32).enumerate() {
        sc[j] = if d > 0.0 {
            (need[j] / d).ceil().min(63.0) as u8
        } else {
            0
        };
        let (step, min) = (d * sc[j] as f32, dmin * m[j] as f32);
        for (l, &v) in sub.iter().enumerate() {
            q[32 * j + l] = level(v + min, step, 0, top as i32);
        }
    }
    let head = [d_bits[0], d_bits[1], dmin_bits[0], dmin_bits[1]];
    Some((head, pack_scale_min(&sc, &m), q))
}

pub(super) fn quant_q4_k(x: &[f32], o: &mut [u8]) -> bool {
    let Some((head, scales, q)) = quant_offset_k(x, 15) else {
        return false;
    };
    o[0..4].copy_from_slice(&head);
    o[4..16].copy_from_slice(&scales);
    for (c, qs) in o[16..144].chunks_exact_mut(32).enumerate() {
        for (l, byte) in qs.iter_mut().enumerate() {
            *byte = q[64 * c + l] | (q[64 * c + 32 + l] << 4);
        }
    }
    true
}

pub(super) fn quant_q5_k(x: &[f32], o: &mut [u8]) -> bool {
    let Some((head, scales, q)) = quant_offset_k(x, 31) else {
        return false;
    };
    o[0..4].copy_from_slice(&head);
    o[4..16].copy_from_slice(&scales);
    let (qh, qs) = o[16..176].split_at_mut(32);
    qh.fill(0);
    for (c, qs) in qs.chunks_exact_mut(32).enumerate() {
        for (l, byte) in qs.iter_mut().enumerate() {
            let (a, b) = (q[64 * c + l], q[64 * c + 32 + l]);
            *byte = (a & 0xF) | ((b & 0xF) << 4);
            qh[l] |= ((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1));
        }
    }
    true
}

/// Round-to-nearest Q6_K block. Like ggml, each sub-block's signed extreme
/// maps to q = -32 exactly, so sub-block scales take both signs (decoders
/// must treat them as i8).
pub(super) fn quant_q6_k(x: &[f32], o: &mut [u8]) -> bool {
    let mut s = [0f32; 16];
    for (j, sub) in x.chunks_exact(16).enumerate() {
        s[j] = signed_absmax(sub) / -32.0;
    }
    let Some((d_bits, d)) = f16_scale(s.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 127.0) else {
        return false;
    };
    o[0..192].fill(0);
    for (j, sub) in x.chunks_exact(16).enumerate() {
        let sc = if d > 0.0 {
            (s[j] / d).round().clamp(-128.0, 127.0) as i8
        } else {
            0
        };
        o[192 + j] = sc as u8;
        let step = d * sc as f32;
        for (i, &v) in sub.iter().enumerate() {
            let p = 16 * j + i;
            let (h, k, l) = (p / 128, (p % 128) / 32, p % 32);
            let q = level(v, step, 32, 63);
            o[64 * h + l + 32 * (k & 1)] |= (q & 0xF) << (4 * (k >> 1));
            o[128 + 32 * h + l] |= (q >> 4) << (2 * k);
        }
    }
    o[208..210].copy_from_slice(&d_bits);
    true
}
