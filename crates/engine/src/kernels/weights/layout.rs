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
//! Quants are numbered row-major over the part: block `b` of part row `r` is
//! block `r * blocks_per_row + b`. The aux and d16 regions go by scale
//! slots instead (`scale_slot`): the 32-element formats keep them in tiles
//! of `SCALE_TILE` rows, the same block of 8 consecutive rows side by side,
//! so a lane that takes whole rows (llvmpipe's decode shape, see
//! `matvec_tile`) reads a step's 8 scales in one `vec4` load and its 8
//! Q5_0 fifth-bit words in two, where one load a row cost it a third of
//! its loads. The K-quants' scales are one `vec4` a row already and stay
//! row-major (tiles of one row). The regions hold the bytes of the file
//! plus the last tile's unused slots (at most 7 rows of scales a part).
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
    /// Rows of a scale tile: `SCALE_TILE`, or 1 (row-major scales).
    pub tile_rows: usize,
}

/// Rows of a scale tile of the 32-element formats: one `vec4` of f16
/// scales. A lane of llvmpipe's decode shape takes one or two
/// (`vec_shape::VecShape::for_class`).
pub(crate) const SCALE_TILE: usize = 8;

/// The slot of block `b` of part row `row` in the aux and d16 regions, for
/// tiles of `tile_rows` rows over rows of `blocks_per_row` blocks (as
/// quant.wgsl's `scale_slot`).
pub(crate) fn scale_slot(tile_rows: usize, blocks_per_row: usize, row: usize, b: usize) -> usize {
    ((row / tile_rows) * blocks_per_row + b) * tile_rows + row % tile_rows
}

impl BlockLayout {
    /// The layout of a quantized format; `None` for F32/F16 (stored as is).
    pub(crate) fn of(dtype: GgmlType) -> Option<BlockLayout> {
        let (quants, aux, d16, tile_rows) = match dtype {
            GgmlType::Q8_0 => (2..34, 0..0, Some(0), SCALE_TILE),
            GgmlType::Q4_0 => (2..18, 0..0, Some(0), SCALE_TILE),
            GgmlType::Q4_1 => (4..20, 0..4, None, SCALE_TILE),
            GgmlType::Q5_0 => (6..22, 2..6, Some(0), SCALE_TILE),
            GgmlType::Q4_K => (16..144, 0..16, None, 1),
            GgmlType::Q6_K => (0..192, 192..208, Some(208), 1),
            _ => return None,
        };
        Some(BlockLayout {
            quants,
            aux,
            d16,
            tile_rows,
        })
    }

    pub(crate) fn quant_words(&self) -> usize {
        self.quants.len() / 4
    }

    pub(crate) fn aux_words(&self) -> usize {
        self.aux.len() / 4
    }

    /// Bytes of one scale slot: the aux bytes and the f16 scale.
    pub(crate) fn scale_bytes(&self) -> usize {
        self.aux.len() + 2 * self.d16.is_some() as usize
    }

    /// Scale slots of a part of `rows` rows of `blocks_per_row` blocks: its
    /// rows rounded up to whole tiles.
    pub(crate) fn slots(&self, rows: usize, blocks_per_row: usize) -> usize {
        rows.next_multiple_of(self.tile_rows) * blocks_per_row
    }
}

/// Where a part's aux and d16 regions start, in words from its start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionBases {
    pub aux: u32,
    pub d16: u32,
}

/// Bytes of the three regions for a part of `rows` rows of `blocks_per_row`
/// blocks of `layout`, and where the regions start. With tiles of 8 rows
/// every region starts on a `vec4` (the quants are whole `vec4`s a block,
/// and the slots a multiple of 8), which the tiled readers rely on.
pub(crate) fn region_sizes(
    layout: &BlockLayout,
    rows: usize,
    blocks_per_row: usize,
) -> (usize, RegionBases) {
    let slots = layout.slots(rows, blocks_per_row);
    let quant_words = rows * blocks_per_row * layout.quant_words();
    let aux_words = slots * layout.aux_words();
    let d16_words = if layout.d16.is_some() {
        slots.div_ceil(2)
    } else {
        0
    };
    let bases = RegionBases {
        aux: quant_words as u32,
        d16: (quant_words + aux_words) as u32,
    };
    (4 * (quant_words + aux_words + d16_words), bases)
}

/// Where block `i` (row-major over the part) of a block's bytes goes: its
/// quants' byte offset, its aux bytes' and its f16 scale's.
struct Places {
    quants: usize,
    aux: usize,
    d16: usize,
}

fn places(layout: &BlockLayout, bases: RegionBases, blocks_per_row: usize, i: usize) -> Places {
    let slot = scale_slot(
        layout.tile_rows,
        blocks_per_row,
        i / blocks_per_row,
        i % blocks_per_row,
    );
    Places {
        quants: i * layout.quants.len(),
        aux: bases.aux as usize * 4 + slot * layout.aux.len(),
        d16: bases.d16 as usize * 4 + 2 * slot,
    }
}

/// GGUF rows (`gguf`, whole rows of `blocks_per_row` blocks of `dtype`) in
/// the GPU layout; `None` for F32/F16 (and an empty row).
pub(crate) fn repack(
    dtype: GgmlType,
    gguf: &[u8],
    blocks_per_row: usize,
) -> Option<(Vec<u8>, RegionBases)> {
    let layout = BlockLayout::of(dtype)?;
    let block_bytes = dtype.block_bytes();
    let rows = gguf.len().checked_div(block_bytes * blocks_per_row)?;
    let (size, bases) = region_sizes(&layout, rows, blocks_per_row);
    let mut out = vec![0u8; size];
    let (q_len, a_len) = (layout.quants.len(), layout.aux.len());
    for (i, block) in gguf.chunks_exact(block_bytes).enumerate() {
        let at = places(&layout, bases, blocks_per_row, i);
        out[at.quants..at.quants + q_len].copy_from_slice(&block[layout.quants.clone()]);
        out[at.aux..at.aux + a_len].copy_from_slice(&block[layout.aux.clone()]);
        if let Some(d) = layout.d16 {
            out[at.d16..at.d16 + 2].copy_from_slice(&block[d..d + 2]);
        }
    }
    Some((out, bases))
}

/// The inverse of `repack`: `rows` rows of `blocks_per_row` GGUF blocks back
/// from the GPU layout (what the CPU reads to dequantize a part as the
/// shaders see it).
pub(crate) fn unpack(
    dtype: GgmlType,
    gpu: &[u8],
    rows: usize,
    blocks_per_row: usize,
) -> Option<Vec<u8>> {
    let layout = BlockLayout::of(dtype)?;
    let block_bytes = dtype.block_bytes();
    let (size, bases) = region_sizes(&layout, rows, blocks_per_row);
    if gpu.len() < size {
        return None;
    }
    let (q_len, a_len) = (layout.quants.len(), layout.aux.len());
    let mut out = vec![0u8; rows * blocks_per_row * block_bytes];
    for (i, block) in out.chunks_exact_mut(block_bytes).enumerate() {
        let at = places(&layout, bases, blocks_per_row, i);
        block[layout.quants.clone()].copy_from_slice(&gpu[at.quants..at.quants + q_len]);
        block[layout.aux.clone()].copy_from_slice(&gpu[at.aux..at.aux + a_len]);
        if let Some(d) = layout.d16 {
            block[d..d + 2].copy_from_slice(&gpu[at.d16..at.d16 + 2]);
        }
    }
    Some(out)
}

/// Dequantizes `rows` rows of `blocks_per_row` blocks stored in the GPU
/// layout: the CPU reference for what the shaders decode.
pub fn dequantize_gpu_layout(
    dtype: GgmlType,
    gpu: &[u8],
    rows: usize,
    blocks_per_row: usize,
) -> Result<Vec<f32>, crate::format::quant::QuantError> {
    let n = rows * blocks_per_row * dtype.block_elements();
    match unpack(dtype, gpu, rows, blocks_per_row) {
        Some(gguf) => crate::format::quant::dequantize(dtype, &gguf, n),
        None => crate::format::quant::dequantize(dtype, gpu, n),
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
        // 21 rows: whole tiles and a part-used one; 3 blocks a row
        // leave the last d16 word of a row-major layout half used.
        let (rows, blocks_per_row) = (21, 3);
        for dtype in GPU_DTYPES {
            let n = rows * blocks_per_row * dtype.block_elements();
            let gguf = quantize(dtype, &test_weights(n, dtype as u64)).unwrap();
            let want = dequantize(dtype, &gguf, n).unwrap();
            let gpu = match repack(dtype, &gguf, blocks_per_row) {
                Some((gpu, _)) => {
                    let l = BlockLayout::of(dtype).unwrap();
                    let unused_slots = l.slots(rows, blocks_per_row) - rows * blocks_per_row;
                    assert!(
                        gpu.len() <= gguf.len() + unused_slots * l.scale_bytes() + 2,
                        "{dtype}: grew by more than the last tile"
                    );
                    assert_ne!(gpu, gguf, "{dtype}: repack left the bytes in place");
                    gpu
                }
                None => gguf.clone(),
            };
            let got = dequantize_gpu_layout(dtype, &gpu, rows, blocks_per_row).unwrap();
            assert_eq!(got.len(), want.len(), "{dtype}");
            assert!(got == want, "{dtype}: the GPU layout decodes differently");
        }
    }

    /// What the tiled decode reader assumes: block b of the 8 rows of a
    /// tile has its 8 scales (and aux words) side by side in row order,
    /// tile after tile, block after block.
    #[test]
    fn a_tiles_scales_sit_side_by_side() {
        assert_eq!(SCALE_TILE, 8, "the offsets below are for tiles of 8");
        let (rows, blocks_per_row) = (19, 2);
        let n = rows * blocks_per_row * 32;
        let gguf = quantize(GgmlType::Q5_0, &test_weights(n, 3)).unwrap();
        let (gpu, bases) = repack(GgmlType::Q5_0, &gguf, blocks_per_row).unwrap();
        let (aux_at, d16_at) = (bases.aux as usize * 4, bases.d16 as usize * 4);
        assert_eq!(aux_at % 16, 0, "aux region not on a vec4");
        assert_eq!(d16_at % 16, 0, "d16 region not on a vec4");
        for row in 0..rows {
            for b in 0..blocks_per_row {
                let block = &gguf[(row * blocks_per_row + b) * 22..][..22];
                let run = (row / 8) * blocks_per_row + b;
                let d = d16_at + 16 * run + 2 * (row % 8);
                assert_eq!(gpu[d..d + 2], block[0..2], "d of row {row} block {b}");
                let a = aux_at + 32 * run + 4 * (row % 8);
                assert_eq!(gpu[a..a + 4], block[2..6], "qh of row {row} block {b}");
            }
        }
    }

    #[test]
    fn regions_follow_each_other() {
        // One row of 3 blocks: 3 quant blocks, and a tile's 24 scale slots.
        let l = BlockLayout::of(GgmlType::Q5_0).unwrap();
        let (size, bases) = region_sizes(&l, 1, 3);
        assert_eq!(bases, RegionBases { aux: 12, d16: 36 });
        assert_eq!(size, 4 * (12 + 24 + 12));
        // The K-quants' scales stay a row each.
        let l = BlockLayout::of(GgmlType::Q6_K).unwrap();
        let (size, bases) = region_sizes(&l, 3, 1);
        assert_eq!(bases, RegionBases { aux: 144, d16: 156 });
        assert_eq!(size, 4 * (144 + 12 + 2));
    }
}
