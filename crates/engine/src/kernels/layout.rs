//! The GPU layout of quantized weights, made at upload.
//!
//! GGUF stores a block's scales and quants side by side in 18, 22, 34 or 210
//! bytes, so most blocks start at a byte no load instruction can reach
//! directly. On the GPU a matrix part is instead three regions of 32-bit
//! words, every block at the same stride in each:
//!
//! - quants: the block's quantized values, a multiple of 16 bytes, so a lane
//!   reads them as whole `vec4<u32>`s;
//! - aux: the other words a block needs (Q4_1's d and m, Q5_0's fifth bits,
//!   the K-quants' sub-block scales);
//! - d16: the f16 block scale of Q8_0, Q4_0, Q5_0 and Q6_K, two blocks to a
//!   word.
//!
//! The regions hold exactly the bytes of the file, so a part costs what it
//! did (plus at most one half word). Blocks are numbered row-major over the
//! part: block `b` of part row `r` is block `r * blocks_per_row + b`.
//! F32 and F16 keep their stored layout.

use std::ops::Range;

use crate::format::quant::GgmlType;

/// Where one GGUF block's bytes go.
#[derive(Clone, Debug)]
pub(crate) struct BlockLayout {
    /// Bytes of the block that are its quants (`quant_words() * 4` of them).
    pub quants: Range<usize>,
    /// Bytes that go to the aux region (a whole number of words; may be empty).
    pub aux: Range<usize>,
    /// Offset of the block's f16 scale, if it has one that goes to d16.
    pub d16: Option<usize>,
}

impl BlockLayout {
    /// The layout of a quantized format; `None` for F32/F16 (stored as is).
    pub(crate) fn of(dtype: GgmlType) -> Option<BlockLayout> {
        let (quants, aux, d16) = match dtype {
            GgmlType::Q8_0 => (2..34, 0..0, Some(0)),
            GgmlType::Q4_0 => (2..18, 0..0, Some(0)),
            GgmlType::Q4_1 => (4..20, 0..4, None),
            GgmlType::Q5_0 => (6..22, 2..6, Some(0)),
            GgmlType::Q4_K => (16..144, 0..16, None),
            GgmlType::Q6_K => (0..192, 192..208, Some(208)),
            _ => return None,
        };
        Some(BlockLayout { quants, aux, d16 })
    }

    pub(crate) fn quant_words(&self) -> usize {
        self.quants.len() / 4
    }

    pub(crate) fn aux_words(&self) -> usize {
        self.aux.len() / 4
    }
}

/// Where a part's aux and d16 regions start, in words from its start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionBases {
    pub aux: u32,
    pub d16: u32,
}

/// Bytes of the three regions for `blocks` blocks of `layout`, and where the
/// regions start.
pub(crate) fn region_sizes(layout: &BlockLayout, blocks: usize) -> (usize, RegionBases) {
    let quant_words = blocks * layout.quant_words();
    let aux_words = blocks * layout.aux_words();
    let d16_words = if layout.d16.is_some() {
        blocks.div_ceil(2)
    } else {
        0
    };
    let bases = RegionBases {
        aux: quant_words as u32,
        d16: (quant_words + aux_words) as u32,
    };
    (4 * (quant_words + aux_words + d16_words), bases)
}

/// GGUF blocks (`gguf`, whole blocks of `dtype`) in the GPU layout.
pub(crate) fn repack(dtype: GgmlType, gguf: &[u8]) -> Option<(Vec<u8>, RegionBases)> {
    let layout = BlockLayout::of(dtype)?;
    let block_bytes = dtype.block_bytes();
    let blocks = gguf.len() / block_bytes;
    let (size, bases) = region_sizes(&layout, blocks);
    let mut out = vec![0u8; size];
    let (q_len, a_len) = (layout.quants.len(), layout.aux.len());
    let aux_at = bases.aux as usize * 4;
    let d16_at = bases.d16 as usize * 4;
    for (b, block) in gguf.chunks_exact(block_bytes).enumerate() {
        out[b * q_len..(b + 1) * q_len].copy_from_slice(&block[layout.quants.clone()]);
        let a = aux_at + b * a_len;
        out[a..a + a_len].copy_from_slice(&block[layout.aux.clone()]);
        if let Some(d) = layout.d16 {
            out[d16_at + 2 * b..d16_at + 2 * b + 2].copy_from_slice(&block[d..d + 2]);
        }
    }
    Some((out, bases))
}

/// The inverse of `repack`: `blocks` GGUF blocks back from the GPU layout
/// (what the CPU reads to dequantize a part as the shaders see it).
pub(crate) fn unpack(dtype: GgmlType, gpu: &[u8], blocks: usize) -> Option<Vec<u8>> {
    let layout = BlockLayout::of(dtype)?;
    let block_bytes = dtype.block_bytes();
    let (size, bases) = region_sizes(&layout, blocks);
    if gpu.len() < size {
        return None;
    }
    let (q_len, a_len) = (layout.quants.len(), layout.aux.len());
    let mut out = vec![0u8; blocks * block_bytes];
    for (b, block) in out.chunks_exact_mut(block_bytes).enumerate() {
        block[layout.quants.clone()].copy_from_slice(&gpu[b * q_len..(b + 1) * q_len]);
        let a = bases.aux as usize * 4 + b * a_len;
        block[layout.aux.clone()].copy_from_slice(&gpu[a..a + a_len]);
        if let Some(d) = layout.d16 {
            let at = bases.d16 as usize * 4 + 2 * b;
            block[d..d + 2].copy_from_slice(&gpu[at..at + 2]);
        }
    }
    Some(out)
}

/// Dequantizes `blocks` blocks stored in the GPU layout: the CPU reference
/// for what the shaders decode.
pub fn dequantize_gpu_layout(
    dtype: GgmlType,
    gpu: &[u8],
    blocks: usize,
) -> Result<Vec<f32>, crate::format::quant::QuantError> {
    match unpack(dtype, gpu, blocks) {
        Some(gguf) => {
            crate::format::quant::dequantize(dtype, &gguf, blocks * dtype.block_elements())
        }
        None => crate::format::quant::dequantize(dtype, gpu, blocks * dtype.block_elements()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::quant::{dequantize, quantize};
    use crate::kernels::weights::{test_weights, GPU_DTYPES};

    #[test]
    fn every_block_byte_has_one_place() {
        for dtype in GPU_DTYPES {
            let Some(l) = BlockLayout::of(dtype) else {
                continue;
            };
            let mut covered = vec![0u8; dtype.block_bytes()];
            for i in l.quants.clone().chain(l.aux.clone()) {
                covered[i] += 1;
            }
            if let Some(d) = l.d16 {
                covered[d] += 1;
                covered[d + 1] += 1;
            }
            assert!(covered.iter().all(|&c| c == 1), "{dtype}: {covered:?}");
            assert_eq!(l.quants.len() % 16, 0, "{dtype}: quants not whole vec4s");
            assert_eq!(l.aux.len() % 4, 0, "{dtype}: aux not whole words");
        }
    }

    #[test]
    fn the_gpu_layout_dequantizes_as_gguf() {
        // An odd block count leaves the last d16 word half used.
        for dtype in GPU_DTYPES {
            let blocks = 7;
            let n = blocks * dtype.block_elements();
            let gguf = quantize(dtype, &test_weights(n, dtype as u64)).unwrap();
            let want = dequantize(dtype, &gguf, n).unwrap();
            let gpu = match repack(dtype, &gguf) {
                Some((gpu, _)) => {
                    assert!(gpu.len() <= gguf.len() + 2, "{dtype}: grew");
                    assert_ne!(gpu, gguf, "{dtype}: repack left the bytes in place");
                    gpu
                }
                None => gguf.clone(),
            };
            let got = dequantize_gpu_layout(dtype, &gpu, blocks).unwrap();
            assert_eq!(got.len(), want.len(), "{dtype}");
            assert!(got == want, "{dtype}: the GPU layout decodes differently");
        }
    }

    #[test]
    fn regions_follow_each_other() {
        let l = BlockLayout::of(GgmlType::Q5_0).unwrap();
        let (size, bases) = region_sizes(&l, 3);
        assert_eq!(bases, RegionBases { aux: 12, d16: 15 });
        assert_eq!(size, 4 * (12 + 3 + 2));
    }
}
