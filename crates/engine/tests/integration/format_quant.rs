//! Quant block layouts: the type table, hand-built blocks decoded to values
//! worked out by hand from the documented layouts, and the errors.

use wick::format::{dequantize, dequantize_into, quantize, GgmlType, QuantError};

const F16_HALF: u16 = 0x3800; // 0.5
const F16_QUARTER: u16 = 0x3400; // 0.25
const F16_EIGHTH: u16 = 0x3000; // 0.125
const F16_ONE: u16 = 0x3C00;
const F16_MINUS_ONE: u16 = 0xBC00;
const F16_TWO: u16 = 0x4000;

fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

#[test]
fn type_table_round_trips_ids_and_names() {
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for t in GgmlType::ALL {
        assert_eq!(GgmlType::from_id(t.id()), Some(t));
        assert!(ids.insert(t.id()) && names.insert(t.name()), "{t} repeated");
        assert_eq!(t.to_string(), t.name());
        assert!(t.block_elements() > 0 && t.block_bytes() > 0);
    }
    // Retired by ggml (Q4_2, Q4_3, repacked Q4_0_x_x and IQ4_NL_x_x) or never assigned.
    for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, u32::MAX] {
        assert_eq!(GgmlType::from_id(id), None, "id {id}");
    }
}

#[test]
fn block_sizes_match_ggml_structs() {
    use GgmlType::*;
    // (type, id, elements, bytes) from the block structs in ggml-common.h.
    let expect = [
        (F32, 0, 1, 4),
        (F16, 1, 1, 2),
        (Q4_0, 2, 32, 18),
        (Q4_1, 3, 32, 20),
        (Q5_0, 6, 32, 22),
        (Q5_1, 7, 32, 24),
        (Q8_0, 8, 32, 34),
        (Q8_1, 9, 32, 36),
        (Q2_K, 10, 256, 84),
        (Q3_K, 11, 256, 110),
        (Q4_K, 12, 256, 144),
        (Q5_K, 13, 256, 176),
        (Q6_K, 14, 256, 210),
        (Q8_K, 15, 256, 292),
        (IQ4_NL, 20, 32, 18),
        (IQ4_XS, 23, 256, 136),
        (BF16, 30, 1, 2),
        (MXFP4, 39, 32, 17),
    ];
    for (t, id, elements, bytes) in expect {
        assert_eq!(
            (t.id(), t.block_elements(), t.block_bytes()),
            (id, elements, bytes),
            "{t}"
        );
    }
    // The K quants' published bits per weight.
    for (t, bpw) in [
        (Q2_K, 2.625),
        (Q3_K, 3.4375),
        (Q4_K, 4.5),
        (Q5_K, 5.5),
        (Q6_K, 6.5625),
    ] {
        assert_eq!(
            t.block_bytes() as f64 * 8.0 / t.block_elements() as f64,
            bpw,
            "{t}"
        );
    }
}

#[test]
fn row_bytes_needs_whole_blocks() {
    assert_eq!(GgmlType::Q4_K.row_bytes(4096), Some(16 * 144));
    assert_eq!(GgmlType::Q8_0.row_bytes(64), Some(68));
    assert_eq!(GgmlType::F32.row_bytes(7), Some(28));
    assert_eq!(GgmlType::Q4_K.row_bytes(100), None);
    assert_eq!(GgmlType::Q8_0.row_bytes(31), None);
    assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None, "overflow");
}

#[test]
fn can_dequantize_covers_the_model_types() {
    use GgmlType::*;
    for t in [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K,
    ] {
        assert!(t.can_dequantize(), "{t}");
    }
    for t in [Q8_1, Q2_K, Q3_K, Q8_K, IQ2_XXS, IQ4_NL, I32, MXFP4] {
        assert!(!t.can_dequantize(), "{t}");
    }
}

#[test]
fn q4_0_block_by_hand() {
    // d = 0.5; qs[j] = j | (15 - j) << 4: element j has q = j, element j + 16 has q = 15 - j.
    let mut b = le16(F16_HALF).to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let got = dequantize(GgmlType::Q4_0, &b, 32).unwrap();
    for j in 0..16 {
        assert_eq!(got[j], 0.5 * (j as f32 - 8.0), "element {j}");
        assert_eq!(
            got[j + 16],
            0.5 * ((15 - j) as f32 - 8.0),
            "element {}",
            j + 16
        );
    }
    assert_eq!((got[0], got[15], got[16], got[31]), (-4.0, 3.5, 3.5, -4.0));
}

#[test]
fn q4_1_block_by_hand() {
    // d = 0.25, m = -1; low nibble of qs[j] = j, high nibble = j ^ 0xA.
    let mut b = [le16(F16_QUARTER), le16(F16_MINUS_ONE)].concat();
    b.extend((0..16u8).map(|j| j | ((j ^ 0xA) << 4)));
    let got = dequantize(GgmlType::Q4_1, &b, 32).unwrap();
    for j in 0..16 {
        assert_eq!(got[j], 0.25 * j as f32 - 1.0);
        assert_eq!(got[j + 16], 0.25 * (j ^ 0xA) as f32 - 1.0);
    }
    assert_eq!((got[0], got[15], got[16]), (-1.0, 2.75, 1.5));
}

#[test]
fn q5_0_block_by_hand() {
    // d = 2; qh = 0xAAAA5555: bit j (j < 16) set for even j, bit j + 16 set for odd j.
    // qs[j] = j | j << 4, so both halves have low bits j.
    let mut b = le16(F16_TWO).to_vec();
    b.extend(0xAAAA_5555u32.to_le_bytes());
    b.extend((0..16u8).map(|j| j | (j << 4)));
    let got = dequantize(GgmlType::Q5_0, &b, 32).unwrap();
    for j in 0..16 {
        let lo = j as f32 + if j % 2 == 0 { 16.0 } else { 0.0 };
        let hi = j as f32 + if j % 2 == 1 { 16.0 } else { 0.0 };
        assert_eq!(got[j], 2.0 * (lo - 16.0), "element {j}");
        assert_eq!(got[j + 16], 2.0 * (hi - 16.0), "element {}", j + 16);
    }
    assert_eq!(
        (got[0], got[1], got[16], got[17], got[31]),
        (0.0, -30.0, -32.0, 2.0, 30.0)
    );
}

#[test]
fn q5_1_block_by_hand() {
    // d = 0.5, m = 1; qh = 0xFFFF0000: only elements 16.. have the 5th bit.
    let mut b = [le16(F16_HALF), le16(F16_ONE)].concat();
    b.extend(0xFFFF_0000u32.to_le_bytes());
    b.extend((0..16u8).map(|j| (15 - j) | (j << 4)));
    let got = dequantize(GgmlType::Q5_1, &b, 32).unwrap();
    for j in 0..16 {
        assert_eq!(got[j], 0.5 * (15 - j) as f32 + 1.0);
        assert_eq!(got[j + 16], 0.5 * (16 + j) as f32 + 1.0);
    }
    assert_eq!((got[0], got[31]), (8.5, 16.5));
}

#[test]
fn q8_0_block_by_hand() {
    // d = 0.125; qs[j] = 8j - 128 as i8 (-128, -120, ..., 120).
    let mut b = le16(F16_EIGHTH).to_vec();
    b.extend((0..32i32).map(|j| (8 * j - 128) as i8 as u8));
    let got = dequantize(GgmlType::Q8_0, &b, 32).unwrap();
    for (j, v) in got.iter().enumerate() {
        assert_eq!(*v, 0.125 * (8 * j as i32 - 128) as f32);
    }
    assert_eq!((got[0], got[31]), (-16.0, 15.0));
}

/// Sub-block scales and mins for the K tests, chosen so the last four use
/// their top two bits (values >= 16) and pack as worked out below.
const K_SC: [u8; 8] = [1, 2, 3, 4, 17, 33, 50, 63];
const K_M: [u8; 8] = [0, 5, 10, 15, 20, 40, 48, 63];
/// Bytes 0..4: sc[j] | (sc[j+4] >> 4) << 6; 4..8: m[j] | (m[j+4] >> 4) << 6;
/// 8..12: (sc[j+4] & 15) | (m[j+4] & 15) << 4. E.g. byte 0 = 1 | 1 << 6 = 65,
/// byte 8 = (17 & 15) | (20 & 15) << 4 = 1 | 64 = 65, byte 11 = 15 | 15 << 4 = 255.
const K_SCALES: [u8; 12] = [65, 130, 195, 196, 64, 133, 202, 207, 65, 129, 2, 255];

#[test]
fn q4_k_block_by_hand() {
    // d = 0.5, dmin = 0.25; qs[32c + l] = (l % 16) | (15 - l % 16) << 4.
    let mut b = [le16(F16_HALF), le16(F16_QUARTER)].concat();
    b.extend(K_SCALES);
    b.extend((0..128usize).map(|i| ((i % 16) | ((15 - i % 16) << 4)) as u8));
    let got = dequantize(GgmlType::Q4_K, &b, 256).unwrap();
    for (e, v) in got.iter().enumerate() {
        // Element e is in 64-chunk c; its first 32 take low nibbles (sub-block
        // 2c), the next 32 the high nibbles of the same bytes (sub-block 2c+1).
        let (c, w, l) = (e / 64, e % 64, e % 32);
        let (sub, q) = if w < 32 {
            (2 * c, l % 16)
        } else {
            (2 * c + 1, 15 - l % 16)
        };
        let want = 0.5 * K_SC[sub] as f32 * q as f32 - 0.25 * K_M[sub] as f32;
        assert_eq!(*v, want, "element {e}");
    }
    // Sub-block 7 (sc 63, m 63), element 255: l = 31, q = 15 - 15 = 0 -> -0.25 * 63.
    assert_eq!(got[255], -15.75);
    // Sub-block 4 (sc 17, m 20), element 129: q = 1 -> 0.5 * 17 - 5.
    assert_eq!(got[129], 3.5);
}

#[test]
fn q5_k_block_by_hand() {
    // As Q4_K plus qh[l] = 37 l mod 256: element 64c + l adds 16 if bit 2c of
    // qh[l] is set, element 64c + 32 + l if bit 2c + 1 is.
    let qh: Vec<u8> = (0..32u32).map(|l| (37 * l) as u8).collect();
    let mut b = [le16(F16_HALF), le16(F16_QUARTER)].concat();
    b.extend(K_SCALES);
    b.extend(&qh);
    b.extend((0..128usize).map(|i| ((i % 16) | ((15 - i % 16) << 4)) as u8));
    let got = dequantize(GgmlType::Q5_K, &b, 256).unwrap();
    for (e, v) in got.iter().enumerate() {
        let (c, w, l) = (e / 64, e % 64, e % 32);
        let (sub, low, bit) = if w < 32 {
            (2 * c, l % 16, 2 * c)
        } else {
            (2 * c + 1, 15 - l % 16, 2 * c + 1)
        };
        let q = low + if qh[l] >> bit & 1 == 1 { 16 } else { 0 };
        let want = 0.5 * K_SC[sub] as f32 * q as f32 - 0.25 * K_M[sub] as f32;
        assert_eq!(*v, want, "element {e}");
    }
    // Element 1: qh[1] = 37 = 0b100101 has bit 0 -> q = 1 + 16, sub-block 0 (sc 1, m 0).
    assert_eq!(got[1], 8.5);
}

#[test]
fn q6_k_block_by_hand() {
    // ql[i] = i, qh[i] = 7i mod 256, scales[s] = 3 (s - 8) (negative, zero and
    // positive), d = 0.5. Expected values follow ggml's loop shape: per half,
    // for l < 32, four values at l, l+32, l+64, l+96 with scale index l/16 + 0,2,4,6.
    let ql: Vec<u8> = (0..128u8).collect();
    let qh: Vec<u8> = (0..64u32).map(|i| (7 * i) as u8).collect();
    let sc: Vec<i8> = (0..16i8).map(|s| 3 * (s - 8)).collect();
    let mut b = [ql.clone(), qh.clone()].concat();
    b.extend(sc.iter().map(|&s| s as u8));
    b.extend(le16(F16_HALF));
    let got = dequantize(GgmlType::Q6_K, &b, 256).unwrap();
    let mut want = [0f32; 256];
    for half in 0..2 {
        let (ql, qh, sc, y) = (
            &ql[64 * half..],
            &qh[32 * half..],
            &sc[8 * half..],
            128 * half,
        );
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            want[y + l] = 0.5 * sc[is] as f32 * q1 as f32;
            want[y + l + 32] = 0.5 * sc[is + 2] as f32 * q2 as f32;
            want[y + l + 64] = 0.5 * sc[is + 4] as f32 * q3 as f32;
            want[y + l + 96] = 0.5 * sc[is + 6] as f32 * q4 as f32;
        }
    }
    assert_eq!(got, want);
    // Element 0: q = 0 | 0 -> -32, scale -24: 0.5 * -24 * -32.
    assert_eq!(got[0], 384.0);
    // Element 200 = half 1, l = 8, third group: ql[72] >> 4 = 4, qh[40] = 280 mod 256 = 24,
    // (24 >> 4) & 3 = 1 -> q = 4 | 16 = 20 - 32 = -12; scale index 8 + 4 = 12 -> 12.
    assert_eq!(got[200], 0.5 * 12.0 * -12.0);
}

#[test]
fn float_types_by_hand() {
    let f32_bytes: Vec<u8> = [1.5f32, -2.0, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        dequantize(GgmlType::F32, &f32_bytes, 3).unwrap(),
        [1.5, -2.0, 0.0]
    );
    let f16_bytes = [le16(F16_HALF), le16(0xC500), le16(0x7BFF)].concat(); // 0.5, -5, 65504
    assert_eq!(
        dequantize(GgmlType::F16, &f16_bytes, 3).unwrap(),
        [0.5, -5.0, 65504.0]
    );
    let bf16_bytes = [le16(0x3F80), le16(0xC0A0), le16(0x4780)].concat(); // 1, -5, 65536
    assert_eq!(
        dequantize(GgmlType::BF16, &bf16_bytes, 3).unwrap(),
        [1.0, -5.0, 65536.0]
    );
}

#[test]
fn wrong_lengths_and_types_are_errors() {
    use GgmlType::*;
    let bad_len = |t: GgmlType, bytes: usize, n: usize| dequantize(t, &vec![0; bytes], n);
    assert!(matches!(
        bad_len(Q8_0, 33, 32),
        Err(QuantError::BadLength {
            dtype: Q8_0,
            elements: 32,
            bytes: 33
        })
    ));
    assert!(matches!(
        bad_len(Q8_0, 35, 32),
        Err(QuantError::BadLength { .. })
    ));
    assert!(matches!(
        bad_len(Q4_K, 144, 512),
        Err(QuantError::BadLength { .. })
    ));
    assert!(matches!(
        bad_len(F32, 3, 1),
        Err(QuantError::BadLength { .. })
    ));
    assert!(matches!(
        bad_len(Q8_0, 34, 33),
        Err(QuantError::NotWholeBlocks { block: 32, .. })
    ));
    assert!(matches!(
        bad_len(Q8_0, 34, usize::MAX),
        Err(QuantError::NotWholeBlocks { .. })
    ));
    assert!(matches!(
        bad_len(Q4_K, 144, 256 * (usize::MAX / 256)),
        Err(QuantError::BadLength { .. })
    ));
    let mut out = [0f32; 31];
    assert!(dequantize_into(Q4_0, &[0; 18], &mut out).is_err());
    for t in [Q2_K, Q3_K, Q8_1, IQ2_XXS, IQ4_XS, I8, MXFP4] {
        let ok_len = bad_len(t, t.block_bytes(), t.block_elements());
        assert!(
            matches!(ok_len, Err(QuantError::Unsupported { dtype }) if dtype == t),
            "{t}"
        );
        let q = quantize(t, &vec![0.0; t.block_elements()]);
        assert!(matches!(q, Err(QuantError::Unsupported { .. })), "{t}");
    }
    assert!(matches!(
        quantize(Q8_0, &[0.0; 33]),
        Err(QuantError::NotWholeBlocks { .. })
    ));
    let mut with_nan = vec![0.5f32; 64];
    with_nan[40] = f32::NAN;
    assert!(matches!(
        quantize(Q4_0, &with_nan),
        Err(QuantError::NotRepresentable { index: 40, .. })
    ));
    // A block whose scale overflows f16, and an F16 value past its range.
    let mut huge = vec![1.0f32; 256];
    huge[3] = 1e10;
    for t in [Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K] {
        assert!(
            matches!(
                quantize(t, &huge),
                Err(QuantError::NotRepresentable { index: 3, .. })
            ),
            "{t}"
        );
    }
    assert!(matches!(
        quantize(F16, &[1.0, 1e6]),
        Err(QuantError::NotRepresentable { index: 1, .. })
    ));
    assert_eq!(
        quantize(F16, &[f32::INFINITY]).unwrap(),
        le16(0x7C00),
        "infinity is representable"
    );
}
