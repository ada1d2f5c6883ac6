//! A weight matrix uploaded as its rows arrive, in order, in pieces of any
//! size: the page's fetched chunks (16 MiB) are far smaller than an 8B
//! model's token embedding (282 MiB in Q4_K), and gathering a matrix whole
//! before its upload made the page's wasm memory as large as the largest
//! matrix plus its repacked copy. Here every part's buffer is made first,
//! and each run of whole rows is repacked on its own and written to its
//! place in the part's regions (`layout`), so what is held at once is a
//! run of rows, not the matrix. The buffers end byte for byte as
//! `QuantMatrix::upload` makes them (`streamed_tests`).
//!
//! Weight textures (llvmpipe, natively) are written once, whole: there the
//! rows are gathered and uploaded at `finish` as before.

use crate::format::quant::GgmlType;
use crate::gpu::error::shape_err;
use crate::gpu::{GpuContext, GpuError, WeightStore};
use crate::kernels::weights::layout::{repack, BlockLayout};
use crate::kernels::weights::{part_layout, plan_parts, MatrixPart, QuantMatrix, PART_SLACK};

/// At most this many bytes of rows are repacked and written at once.
const RUN_BYTES: usize = 4 << 20;

/// A matrix being uploaded row run by row run; `finish` gives the matrix.
pub struct MatrixUpload {
    label: String,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// The row run granularity: a run starts at a part-local row that is a
    /// multiple of it, so its scale slots are a whole number of tiles and
    /// its f16 scales whole words (`write_buffer` writes words).
    step: usize,
    max_part_bytes: u64,
    row_group: usize,
    /// Streamed: the parts, their buffers made (zeroed) up front. Gathered
    /// (textures): empty until `finish`.
    parts: Vec<MatrixPart>,
    /// Rows written so far.
    done: usize,
    /// Bytes of rows received and not yet written: less than a run's step
    /// of rows when streamed, every byte when gathered.
    carry: Vec<u8>,
}

impl MatrixUpload {
    /// Plans the parts (refusing what `QuantMatrix::upload` refuses) and, in
    /// a buffer store, makes their buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
        max_part_bytes: u64,
        row_group: usize,
    ) -> Result<MatrixUpload, GpuError> {
        let store = ctx.weight_store;
        let plan = plan_parts(label, dtype, rows, cols, max_part_bytes, row_group, store)?;
        // Checked by plan_parts.
        let row_bytes = dtype.row_bytes(cols as u64).unwrap_or(0) as usize;
        let layout = BlockLayout::of(dtype);
        let mut parts = Vec::new();
        if store == WeightStore::Buffers {
            for p in &plan {
                let (data_bytes, bases) = part_layout(dtype, p.rows, cols);
                let part_label = if p.first_row == 0 && p.rows == rows {
                    label.to_string()
                } else {
                    format!("{label}[rows {}..{}]", p.first_row, p.first_row + p.rows)
                };
                let buffer = ctx.create_storage(&part_label, data_bytes as u64 + PART_SLACK)?;
                debug_assert_eq!(buffer.size(), p.buffer_bytes, "{part_label}: planned size");
                parts.push(MatrixPart {
                    first_row: p.first_row,
                    rows: p.rows,
                    buffer,
                    bases,
                });
            }
        }
        let tile = layout.map_or(1, |l| l.tile_rows);
        // Gathered (textures): room for the whole matrix at once, not grown
        // by doubling.
        let carry = if parts.is_empty() {
            Vec::with_capacity(rows * row_bytes)
        } else {
            Vec::new()
        };
        Ok(MatrixUpload {
            label: label.to_string(),
            dtype,
            rows,
            cols,
            row_bytes,
            // Even as well: two f16 scales (or F16 values) to a word.
            step: tile.next_multiple_of(2),
            max_part_bytes,
            row_group,
            parts,
            done: 0,
            carry,
        })
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        (self.done * self.row_bytes + self.carry.len()) as u64
    }

    /// Takes the next bytes of the matrix (GGUF rows, in order; a piece may
    /// end inside a row), writing every run of rows they complete.
    pub fn push(&mut self, ctx: &GpuContext, mut bytes: &[u8]) -> Result<(), GpuError> {
        let total = (self.rows * self.row_bytes) as u64;
        if self.received() + bytes.len() as u64 > total {
            return Err(shape_err(
                "weights upload",
                format!(
                    "'{}': {} x {} {} needs {total} bytes, got more",
                    self.label, self.rows, self.cols, self.dtype
                ),
            ));
        }
        if self.parts.is_empty() {
            self.carry.extend_from_slice(bytes);
            return Ok(());
        }
        // First complete the carried rows (less than a step of them, or
        // the rest of their part) from the new bytes.
        if !self.carry.is_empty() {
            let want = self.left_in_part().min(self.step) * self.row_bytes;
            let take = (want - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < want {
                return Ok(());
            }
            let carried = std::mem::take(&mut self.carry);
            self.write_run(ctx, &carried);
        }
        // Then runs straight from the bytes; the rest is carried.
        loop {
            let n = self.run_rows(bytes.len() / self.row_bytes.max(1));
            if n == 0 {
                break;
            }
            let len = n * self.row_bytes;
            self.write_run(ctx, &bytes[..len]);
            bytes = &bytes[len..];
        }
        self.carry.extend_from_slice(bytes);
        Ok(())
    }

    /// Rows from row `done` to the end of its part (0 once complete).
    fn left_in_part(&self) -> usize {
        self.part_at()
            .map_or(0, |p| p.first_row + p.rows - self.done)
    }

    /// The part row `done` is in.
    fn part_at(&self) -> Option<&MatrixPart> {
        self.parts.iter().find(|p| self.done < p.first_row + p.rows)
    }

    /// Rows of the next run when `avail` whole rows are at hand: the rest
    /// of the part where they are all there (and not over `RUN_BYTES`),
    /// else whole steps, at most `RUN_BYTES` of them; 0: carry them.
    fn run_rows(&self, avail: usize) -> usize {
        let left = self.left_in_part();
        let max = (RUN_BYTES / self.row_bytes.max(1) / self.step).max(1) * self.step;
        if left <= max && avail >= left {
            return left;
        }
        avail.min(max).min(left) / self.step * self.step
    }

    /// Repacks `bytes` (whole rows from row `done`, within one part, from
    /// a part-local row that is a multiple of the step) and writes each of
    /// its regions to its place in the part.
    fn write_run(&mut self, ctx: &GpuContext, bytes: &[u8]) {
        let n = bytes.len() / self.row_bytes;
        let part = self.part_at().expect("a run within a part");
        let r0 = self.done - part.first_row;
        let blocks_per_row = self.cols / self.dtype.block_elements();
        match (
            BlockLayout::of(self.dtype),
            repack(self.dtype, bytes, blocks_per_row),
        ) {
            (Some(layout), Some((gpu, bases))) => {
                let (aux_at, d16_at) = (4 * bases.aux as usize, 4 * bases.d16 as usize);
                // Run-local scale slot s is part slot r0 * blocks_per_row + s
                // (r0 is a whole number of tiles).
                let slot0 = (r0 * blocks_per_row) as u64;
                let into = |base: u32, unit: usize| 4 * base as u64 + slot0 * unit as u64;
                write_words(
                    ctx,
                    part,
                    (r0 * blocks_per_row * layout.quants.len()) as u64,
                    &gpu[..aux_at],
                );
                write_words(
                    ctx,
                    part,
                    into(part.bases.aux, layout.aux.len()),
                    &gpu[aux_at..d16_at],
                );
                write_words(ctx, part, into(part.bases.d16, 2), &gpu[d16_at..]);
            }
            // F32 / F16: the stored bytes as they are.
            _ => write_words(ctx, part, (r0 * self.row_bytes) as u64, bytes),
        }
        self.done += n;
    }

    /// The matrix, once every row arrived.
    pub fn finish(self, ctx: &GpuContext) -> Result<QuantMatrix, GpuError> {
        let total = (self.rows * self.row_bytes) as u64;
        if self.received() != total {
            return Err(shape_err(
                "weights upload",
                format!(
                    "'{}': {} x {} {} needs {total} bytes, got {}",
                    self.label,
                    self.rows,
                    self.cols,
                    self.dtype,
                    self.received()
                ),
            ));
        }
        if self.parts.is_empty() {
            return QuantMatrix::upload_grouped(
                ctx,
                &self.label,
                self.dtype,
                self.rows,
                self.cols,
                &self.carry,
                self.max_part_bytes,
                self.row_group,
            );
        }
        Ok(QuantMatrix {
            dtype: self.dtype,
            rows: self.rows,
            cols: self.cols,
            parts: self.parts,
        })
    }
}

/// Writes `data` at `offset` of the part's buffer, its last partial word
/// zero-padded (the buffer starts zeroed; a region's next run starts on a
/// word).
fn write_words(ctx: &GpuContext, part: &MatrixPart, offset: u64, data: &[u8]) {
    debug_assert_eq!(offset % 4, 0, "a run starts on a word");
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        ctx.write(&part.buffer, offset, &data[..whole]);
    }
    if whole < data.len() {
        let mut last = [0u8; 4];
        last[..data.len() - whole].copy_from_slice(&data[whole..]);
        ctx.write(&part.buffer, offset + whole as u64, &last);
    }
}
