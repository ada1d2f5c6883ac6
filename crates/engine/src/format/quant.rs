//! ggml tensor element types, their block layouts, and CPU (de)quantizers.
//!
//! The dequantizers are the reference every GPU kernel is tested against, so
//! they follow ggml's bit layouts exactly (all multi-byte fields little-endian,
//! scales IEEE half unless noted). The quantizers are plain round-to-nearest:
//! they exist so tests can make valid blocks with a realistic spread of values,
//! not to match llama.cpp's error-minimising search.

mod kquant;
mod legacy;

use half::{bf16, f16};

/// Every tensor element type ggml has assigned an id to, so that the tensor
/// table of any real GGUF file parses even when wick cannot compute with it.
/// Ids 4, 5 (old Q4_2/Q4_3), 31-33 and 36-38 (repacked layouts) were retired
/// by ggml and are absent on purpose: no valid file contains them.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// Per-type facts: (ggml id, name, elements per block, bytes per block).
/// Sizes follow the block structs in ggml-common.h.
const fn info(t: GgmlType) -> (u32, &'static str, usize, usize) {
    use GgmlType::*;
    match t {
        F32 => (0, "F32", 1, 4),
        F16 => (1, "F16", 1, 2),
        Q4_0 => (2, "Q4_0", 32, 18),
        Q4_1 => (3, "Q4_1", 32, 20),
        Q5_0 => (6, "Q5_0", 32, 22),
        Q5_1 => (7, "Q5_1", 32, 24),
        Q8_0 => (8, "Q8_0", 32, 34),
        Q8_1 => (9, "Q8_1", 32, 36),
        Q2_K => (10, "Q2_K", 256, 84),
        Q3_K => (11, "Q3_K", 256, 110),
        Q4_K => (12, "Q4_K", 256, 144),
        Q5_K => (13, "Q5_K", 256, 176),
        Q6_K => (14, "Q6_K", 256, 210),
        Q8_K => (15, "Q8_K", 256, 292),
        IQ2_XXS => (16, "IQ2_XXS", 256, 66),
        IQ2_XS => (17, "IQ2_XS", 256, 74),
        IQ3_XXS => (18, "IQ3_XXS", 256, 98),
        IQ1_S => (19, "IQ1_S", 256, 50),
        IQ4_NL => (20, "IQ4_NL", 32, 18),
        IQ3_S => (21, "IQ3_S", 256, 110),
        IQ2_S => (22, "IQ2_S", 256, 82),
        IQ4_XS => (23, "IQ4_XS", 256, 136),
        I8 => (24, "I8", 1, 1),
        I16 => (25, "I16", 1, 2),
        I32 => (26, "I32", 1, 4),
        I64 => (27, "I64", 1, 8),
        F64 => (28, "F64", 1, 8),
        IQ1_M => (29, "IQ1_M", 256, 56),
        BF16 => (30, "BF16", 1, 2),
        TQ1_0 => (34, "TQ1_0", 256, 54),
        TQ2_0 => (35, "TQ2_0", 256, 66),
        MXFP4 => (39, "MXFP4", 32, 17),
        NVFP4 => (40, "NVFP4", 64, 36),
        Q1_0 => (41, "Q1_0", 128, 18),
        Q2_0 => (42, "Q2_0", 64, 18),
    }
}

impl GgmlType {
    /// All types, in id order.
    pub const ALL: [GgmlType; 35] = {
        use GgmlType::*;
        [
            F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
            IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, I8, I16, I32, I64, F64,
            IQ1_M, BF16, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0,
        ]
    };

    /// The type with this ggml id, or `None` for an id ggml never assigned or retired.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// The ggml id, as stored in a GGUF tensor table.
    pub fn id(self) -> u32 {
        info(self).0
    }

    /// ggml's name for the type ("Q4_K").
    pub fn name(self) -> &'static str {
        info(self).1
    }

    /// Elements in one block (1 for plain scalar types).
    pub fn block_elements(self) -> usize {
        info(self).2
    }

    /// Bytes in one block.
    pub fn block_bytes(self) -> usize {
        info(self).3
    }

    /// Bytes taken by `n_elements` consecutive elements; `None` if that is not
    /// a whole number of blocks (ggml never splits a block across rows) or overflows.
    pub fn row_bytes(self, n_elements: u64) -> Option<u64> {
        let be = self.block_elements() as u64;
        if n_elements % be != 0 {
            return None;
        }
        (n_elements / be).checked_mul(self.block_bytes() as u64)
    }

    /// Whether [`dequantize`] (and [`quantize`]) handle this type.
    pub fn can_dequantize(self) -> bool {
        use GgmlType::*;
        matches!(
            self,
            F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K
        )
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantError {
    #[error("no CPU (de)quantizer for {dtype} data")]
    Unsupported { dtype: GgmlType },
    #[error("{elements} elements is not a whole number of {dtype} blocks of {block} elements")]
    NotWholeBlocks {
        dtype: GgmlType,
        elements: usize,
        block: usize,
    },
    #[error("{dtype} data of {bytes} bytes does not hold exactly {elements} elements")]
    BadLength {
        dtype: GgmlType,
        elements: usize,
        bytes: usize,
    },
    #[error("value {value} at index {index} cannot be stored as {dtype}")]
    NotRepresentable {
        dtype: GgmlType,
        index: usize,
        value: f32,
    },
}

/// Decodes `n_elements` values of type `dtype` from `bytes`, which must be
/// exactly the bytes of those elements.
pub fn dequantize(
    dtype: GgmlType,
    bytes: &[u8],
    n_elements: usize,
) -> Result<Vec<f32>, QuantError> {
    // Check before allocating, so a wrong count cannot allocate a huge buffer.
    check_sizes(dtype, bytes.len(), n_elements)?;
    let mut out = vec![0.0; n_elements];
    dequantize_into(dtype, bytes, &mut out)?;
    Ok(out)
}

/// Decodes `out.len()` values of type `dtype` from `bytes` into `out`.
pub fn dequantize_into(dtype: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    check_sizes(dtype, bytes.len(), out.len())?;
    match dtype {
        GgmlType::F32 => {
            for (b, o) in bytes.chunks_exact(4).zip(out) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 | GgmlType::BF16 => {
            for (b, o) in bytes.chunks_exact(2).zip(out) {
                *o = dequant_scalar(dtype, [b[0], b[1]]);
            }
        }
        GgmlType::Q4_0 => blocks(dtype, bytes, out, legacy::dequant_q4_0),
        GgmlType::Q4_1 => blocks(dtype, bytes, out, legacy::dequant_q4_1),
        GgmlType::Q5_0 => blocks(dtype, bytes, out, legacy::dequant_q5_0),
        GgmlType::Q5_1 => blocks(dtype, bytes, out, legacy::dequant_q5_1),
        GgmlType::Q8_0 => blocks(dtype, bytes, out, legacy::dequant_q8_0),
        GgmlType::Q4_K => blocks(dtype, bytes, out, kquant::dequant_q4_k),
        GgmlType::Q5_K => blocks(dtype, bytes, out, kquant::dequant_q5_k),
        GgmlType::Q6_K => blocks(dtype, bytes, out, kquant::dequant_q6_k),
        _ => return Err(QuantError::Unsupported { dtype }),
    }
    Ok(())
}

/// Encodes `values` as `dtype` with round-to-nearest scales. Block types need
/// a whole number of blocks and finite values whose block scales fit in f16.
pub fn quantize(dtype: GgmlType, values: &[f32]) -> Result<Vec<u8>, QuantError> {
    if !dtype.can_dequantize() {
        return Err(QuantError::Unsupported { dtype });
    }
    let be = dtype.block_elements();
    if values.len() % be != 0 {
        return Err(not_whole(dtype, values.len()));
    }
    let mut out = vec![0u8; values.len() / be * dtype.block_bytes()];
    match dtype {
        GgmlType::F32 => {
            for (o, v) in out.chunks_exact_mut(4).zip(values) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        GgmlType::F16 | GgmlType::BF16 => {
            for (i, (o, &v)) in out.chunks_exact_mut(2).zip(values).enumerate() {
                let h = if dtype == GgmlType::F16 {
                    f16::from_f32(v).to_le_bytes()
                } else {
                    bf16::from_f32(v).to_le_bytes()
                };
                // A finite value that only fits as infinity is an overflow, not a value.
                if v.is_finite() && !dequant_scalar(dtype, h).is_finite() {
                    return Err(QuantError::NotRepresentable {
                        dtype,
                        index: i,
                        value: v,
                    });
                }
                o.copy_from_slice(&h);
            }
        }
        _ => {
            let encode = match dtype {
                GgmlType::Q4_0 => legacy::quant_q4_0,
                GgmlType::Q4_1 => legacy::quant_q4_1,
                GgmlType::Q5_0 => legacy::quant_q5_0,
                GgmlType::Q5_1 => legacy::quant_q5_1,
                GgmlType::Q8_0 => legacy::quant_q8_0,
                GgmlType::Q4_K => kquant::quant_q4_k,
                GgmlType::Q5_K => kquant::quant_q5_k,
                GgmlType::Q6_K => kquant::quant_q6_k,
                _ => return Err(QuantError::Unsupported { dtype }),
            };
            let blocks = values
                .chunks_exact(be)
                .zip(out.chunks_exact_mut(dtype.block_bytes()));
            for (i, (x, o)) in blocks.enumerate() {
                if let Some(j) = x.iter().position(|v| !v.is_finite()) {
                    return Err(QuantError::NotRepresentable {
                        dtype,
                        index: i * be + j,
                        value: x[j],
                    });
                }
                if !encode(x, o) {
                    let j = (0..be)
                        .max_by(|&a, &b| x[a].abs().total_cmp(&x[b].abs()))
                        .unwrap_or(0);
                    return Err(QuantError::NotRepresentable {
                        dtype,
                        index: i * be + j,
                        value: x[j],
                    });
                }
            }
        }
    }
    Ok(out)
}

fn dequant_scalar(dtype: GgmlType, b: [u8; 2]) -> f32 {
    match dtype {
        GgmlType::F16 => f16::from_le_bytes(b).to_f32(),
        _ => bf16::from_le_bytes(b).to_f32(),
    }
}

fn not_whole(dtype: GgmlType, elements: usize) -> QuantError {
    QuantError::NotWholeBlocks {
        dtype,
        elements,
        block: dtype.block_elements(),
    }
}

fn check_sizes(dtype: GgmlType, bytes: usize, elements: usize) -> Result<(), QuantError> {
    if !dtype.can_dequantize() {
        return Err(QuantError::Unsupported { dtype });
    }
    if elements % dtype.block_elements() != 0 {
        return Err(not_whole(dtype, elements));
    }
    let expected = (elements / dtype.block_elements()).checked_mul(dtype.block_bytes());
    if expected != Some(bytes) {
        return Err(QuantError::BadLength {
            dtype,
            elements,
            bytes,
        });
    }
    Ok(())
}

/// Runs a one-block decoder over every block; lengths were checked by the caller.
fn blocks(dtype: GgmlType, bytes: &[u8], out: &mut [f32], f: fn(&[u8], &mut [f32])) {
    let pairs = bytes
        .chunks_exact(dtype.block_bytes())
        .zip(out.chunks_exact_mut(dtype.block_elements()));
    pairs.for_each(|(b, o)| f(b, o));
}

/// Reads the little-endian IEEE half at `b[i..i + 2]`.
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Rounds a scale to f16 and returns (bits, value the decoder will see), or
/// `None` if it overflows f16. Encoders quantize against the decoded value so
/// the f16 rounding of the scale does not add to the element error.
fn f16_scale(x: f32) -> Option<([u8; 2], f32)> {
    let h = f16::from_f32(x);
    h.is_finite().then(|| (h.to_le_bytes(), h.to_f32()))
}

/// Like [`f16_scale`] but never rounds a positive scale down, so a range that
/// the exact scale covers is still covered after rounding. For `x >= 0`.
fn f16_scale_up(x: f32) -> Option<([u8; 2], f32)> {
    let mut h = f16::from_f32(x);
    if x > 0.0 && h.to_f32() < x {
        h = f16::from_bits(h.to_bits() + 1);
    }
    h.is_finite().then(|| (h.to_le_bytes(), h.to_f32()))
}

/// The value of largest magnitude, with its sign (the first one on ties).
fn signed_absmax(x: &[f32]) -> f32 {
    x.iter()
        .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
}

/// Round-to-nearest level of `x` on the grid `d * (q - zero)`, clamped to
/// `0..=top`; a zero scale puts every value at the zero point.
fn level(x: f32, d: f32, zero: i32, top: i32) -> u8 {
    if d == 0.0 {
        return zero.clamp(0, top) as u8;
    }
    ((x / d).round() as i32 + zero).clamp(0, top) as u8
}
