//! What happens to one checkpoint tensor's bytes on their way to the GPU:
//! the steps llama.cpp's converter takes offline, taken here at load.
//!
//! - Llama's q/k projection rows are permuted from Hugging Face's rotary
//!   layout (each head's first half paired with its second half) to GGUF's
//!   (adjacent pairs). wick's RoPE kernel runs either layout, but the HF
//!   layout would sum each q·k in a different order than a GGUF file of the
//!   same weights does, and the two loads would no longer give identical
//!   logits; a row permutation costs one copy of two small matrices a block.
//! - Gemma's norm weights are stored as w and applied as 1 + w: GGUF stores
//!   1 + w, which is what wick's RMSNorm multiplies by. Added in f32.
//! - BF16 becomes F32, exactly (a BF16 value is an f32 with its low 16 bits
//!   zero). F16 would halve the memory but lose BF16's range: values beyond
//!   65504 overflow and small ones flush to zero. `quantize` (Q8_0) is the
//!   way to make a BF16 or F32 checkpoint small on the GPU.
//! - With `quantize`, every matrix becomes that type; vectors (norms,
//!   biases) stay as they are, since they are uploaded as f32 anyway.

use crate::format::quant::{dequantize, quantize, GgmlType};
use crate::format::safetensors::{Dtype, SafeTensor};
use crate::model::ModelError;

/// The conversion of one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversion {
    /// The checkpoint's type.
    pub stored: GgmlType,
    /// The type the GGUF stream carries.
    pub target: GgmlType,
    /// Permute rows from HF's rotary layout to GGUF's, in heads of this many rows.
    pub rotary_rows: Option<usize>,
    /// Add 1 to every value (Gemma's norm weights).
    pub add_one: bool,
}

/// The ggml type of a checkpoint dtype wick reads.
pub fn stored_type(t: &SafeTensor) -> Result<GgmlType, ModelError> {
    match t.dtype {
        Dtype::F32 => Ok(GgmlType::F32),
        Dtype::F16 => Ok(GgmlType::F16),
        Dtype::BF16 => Ok(GgmlType::BF16),
        other => Err(ModelError::UnsupportedQuant {
            tensor: t.name.clone(),
            dtype: format!("{other:?} (wick reads F32, F16 and BF16 safetensors)"),
        }),
    }
}

impl Conversion {
    /// Whether the bytes pass through unchanged.
    pub fn is_identity(&self) -> bool {
        self.stored == self.target && self.rotary_rows.is_none() && !self.add_one
    }

    /// The converted bytes of a tensor of `n_elements` in `rows` rows.
    pub fn apply(&self, name: &str, bytes: &[u8], rows: usize) -> Result<Vec<u8>, ModelError> {
        let n_elements = bytes.len() / self.stored.block_bytes();
        let permuted;
        let bytes = match self.rotary_rows {
            Some(head_rows) => {
                permuted = permute_rotary_rows(bytes, rows, head_rows).ok_or_else(|| {
                    ModelError::Config(format!(
                        "tensor `{name}`: {rows} rows are not whole heads of {head_rows} rows"
                    ))
                })?;
                &permuted[..]
            }
            None => bytes,
        };
        if self.stored == self.target && !self.add_one {
            return Ok(bytes.to_vec());
        }
        let mut values = dequantize(self.stored, bytes, n_elements)?;
        if self.add_one {
            values.iter_mut().for_each(|v| *v += 1.0);
        }
        Ok(quantize(self.target, &values)?)
    }
}

/// Rows reordered within each head of `head_rows` rows: GGUF row 2i + j is
/// HF row j * head_rows / 2 + i (the inverse of the permutation transformers'
/// converter applies to Meta's checkpoints; llama.cpp's converter applies
/// this one). `None` unless the rows split into whole heads of an even size.
pub fn permute_rotary_rows(bytes: &[u8], rows: usize, head_rows: usize) -> Option<Vec<u8>> {
    if rows == 0 || head_rows == 0 || head_rows % 2 != 0 || rows % head_rows != 0 {
        return None;
    }
    if bytes.len() % rows != 0 {
        return None;
    }
    let row_bytes = bytes.len() / rows;
    let half = head_rows / 2;
    let mut out = Vec::with_capacity(bytes.len());
    for head in 0..rows / head_rows {
        for g in 0..head_rows {
            let hf = head * head_rows + (g % 2) * half + g / 2;
            out.extend_from_slice(&bytes[hf * row_bytes..(hf + 1) * row_bytes]);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotary_permutation_pairs_each_half_with_its_partner() {
        // Two heads of 4 one-byte rows: HF (a0 a1 b0 b1) -> GGUF (a0 b0 a1 b1).
        let hf = [0, 1, 2, 3, 10, 11, 12, 13];
        assert_eq!(
            permute_rotary_rows(&hf, 8, 4).unwrap(),
            [0, 2, 1, 3, 10, 12, 11, 13]
        );
        assert_eq!(permute_rotary_rows(&hf, 8, 3), None);
        assert_eq!(permute_rotary_rows(&hf, 8, 16), None);
    }

    #[test]
    fn bf16_becomes_f32_exactly_and_norms_gain_one() {
        let values = [1.5f32, -2.0, 3.0e38, 1.0e-30];
        let bf16 = quantize(GgmlType::BF16, &values).unwrap();
        let c = Conversion {
            stored: GgmlType::BF16,
            target: GgmlType::F32,
            rotary_rows: None,
            add_one: false,
        };
        let out = c.apply("t", &bf16, 1).unwrap();
        let back = dequantize(GgmlType::F32, &out, 4).unwrap();
        let exact = dequantize(GgmlType::BF16, &bf16, 4).unwrap();
        assert_eq!(back, exact);
        let norm = Conversion { add_one: true, ..c };
        let out = norm.apply("t", &bf16, 1).unwrap();
        assert_eq!(
            dequantize(GgmlType::F32, &out, 4).unwrap()[..2],
            [2.5, -1.0]
        );
    }
}
