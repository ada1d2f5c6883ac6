//! The prefill matmul's x through a uniform window: the token rows cut into
//! slices, one dispatch each, whose rows fit one uniform binding placed at
//! an aligned offset into x's buffer (`Access::UniformWindow`).
//!
//! Why: llvmpipe (Mesa 22.3) loads a storage buffer one SIMD lane at a time
//! even where every lane reads the same address, while a uniform load at a
//! lane-uniform address is one scalar load and a broadcast. The windowed
//! tiled core (one token tile a workgroup, so x's address depends only on
//! the workgroup and the loop) reads x only that way; its weights come from
//! textures (`WeightStore::Textures`).

/// One dispatch's token rows and where its window sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct XSlice {
    /// The first token row and how many.
    pub first: usize,
    pub tokens: usize,
    /// Bytes into x's buffer where the window starts (a multiple of the
    /// alignment).
    pub offset: u64,
    /// The element of the window where token row `first` starts.
    pub x_offset: usize,
}

/// How the token rows of a prefill matmul fit a window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct XRows {
    /// Bytes of x's buffer.
    pub buffer_bytes: u64,
    /// Bytes one window shows (at most `buffer_bytes`).
    pub window_bytes: u64,
    /// What a window's offset must be a multiple of.
    pub align: u64,
    /// The element where token row 0 starts, the row length (f32) and the
    /// token rows.
    pub x_offset: usize,
    pub k: usize,
    pub m: usize,
    /// Token rows one tile takes: a slice holds a multiple of these where
    /// the window holds that many, so that only the last tile of the last
    /// slice is ever partial.
    pub tile_tokens: usize,
}

impl XRows {
    /// The slices, in token order, covering every row once; `None` where
    /// some row does not fit a window (a row longer than the window, or
    /// one at the buffer's end that no aligned window reaches).
    pub(crate) fn slices(&self) -> Option<Vec<XSlice>> {
        let row_bytes = 4 * self.k as u64;
        if self.window_bytes > self.buffer_bytes || self.align == 0 || row_bytes == 0 {
            return None;
        }
        // The last aligned offset at which a whole window is inside the buffer.
        let last_offset = (self.buffer_bytes - self.window_bytes) / self.align * self.align;
        let mut slices = Vec::new();
        let mut first = 0;
        while first < self.m {
            let start = 4 * (self.x_offset + first * self.k) as u64;
            let offset = (start / self.align * self.align).min(last_offset);
            let fit = ((offset + self.window_bytes).saturating_sub(start) / row_bytes) as usize;
            let mut tokens = fit.min(self.m - first);
            if tokens < self.m - first && tokens >= self.tile_tokens {
                tokens -= tokens % self.tile_tokens;
            }
            if tokens == 0 {
                return None;
            }
            slices.push(XSlice {
                first,
                tokens,
                offset,
                x_offset: ((start - offset) / 4) as usize,
            });
            first += tokens;
        }
        Some(slices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(buffer_bytes: u64, x_offset: usize, k: usize, m: usize) -> XRows {
        XRows {
            buffer_bytes,
            window_bytes: buffer_bytes.min(65536),
            align: 256,
            x_offset,
            k,
            m,
            tile_tokens: 4,
        }
    }

    /// Every slice's rows lie inside its window, the window inside the
    /// buffer at an aligned offset, and the slices cover 0..m in order.
    fn check(r: &XRows, slices: &[XSlice]) {
        let mut next = 0;
        for s in slices {
            assert_eq!(s.first, next, "{r:?}: slices in order, no gap");
            assert!(s.tokens > 0);
            assert_eq!(s.offset % r.align, 0, "{r:?}: aligned window");
            assert!(
                s.offset + r.window_bytes <= r.buffer_bytes,
                "{r:?}: window in the buffer"
            );
            let start = 4 * (r.x_offset + s.first * r.k) as u64;
            assert_eq!(s.offset + 4 * s.x_offset as u64, start, "{r:?}: row start");
            let end = start + 4 * (s.tokens * r.k) as u64;
            assert!(
                end <= s.offset + r.window_bytes,
                "{r:?}: rows inside the window"
            );
            next += s.tokens;
        }
        assert_eq!(next, r.m, "{r:?}: every row once");
    }

    #[test]
    fn slices_cover_the_rows_inside_aligned_windows() {
        // SmolLM2's and Qwen2.5's widths, a row that is not a multiple of
        // the alignment, offsets into the buffer, one row and many.
        for (k, m, x_offset) in [
            (576, 64, 0),
            (1536, 64, 0),
            (4864, 64, 0),
            (4864, 3, 0),
            (896, 1, 0),
            (20, 37, 12),
            (100, 300, 4),
            (16384 - 64, 5, 0),
        ] {
            let bytes = 4 * (x_offset + m * k) as u64;
            for buffer_bytes in [bytes, bytes + 4, bytes.next_multiple_of(256)] {
                let r = rows(buffer_bytes, x_offset, k, m);
                // A buffer of whole alignments always fits; in another, the
                // last rows may lie past every aligned window (then None).
                let Some(slices) = r.slices() else {
                    assert!(buffer_bytes % 256 != 0, "{r:?} fits");
                    continue;
                };
                check(&r, &slices);
                // Whole tiles in every slice but the last, where the window holds them.
                for s in &slices[..slices.len() - 1] {
                    assert!(s.tokens % 4 == 0 || s.tokens < 4, "{r:?}: {s:?}");
                }
            }
        }
    }

    #[test]
    fn a_window_of_the_whole_buffer_is_one_slice() {
        let r = rows(4 * 64 * 100, 0, 100, 64);
        let slices = r.slices().unwrap();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].tokens, 64);
    }

    #[test]
    fn rows_longer_than_a_window_do_not_fit() {
        // 16385 f32 is one element over 64 KiB.
        assert!(rows(4 * 2 * 16385, 0, 16385, 2).slices().is_none());
    }

    #[test]
    fn a_last_row_no_aligned_window_reaches_does_not_fit() {
        // The buffer ends 8 bytes past a window whose start is aligned; a
        // row ending there needs a window starting 8 bytes later.
        let r = XRows {
            buffer_bytes: 65536 + 8,
            window_bytes: 65536,
            align: 256,
            x_offset: 2,
            k: 16383,
            m: 1,
            tile_tokens: 4,
        };
        assert!(r.slices().is_none());
    }
}
