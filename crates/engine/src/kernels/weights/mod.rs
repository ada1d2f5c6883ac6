//! Weight matrices on the GPU, kept in their stored format: the same bytes
//! as the file, quantized blocks rearranged into aligned regions at upload
//! (`kernels::weights::layout`).
//!
//! Kernels dequantize while they read, so a matrix costs its stored bytes of
//! memory and bandwidth, not four bytes per weight. A matrix bigger than one
//! storage binding may be (lavapipe: 128 MiB; a 151936 x 896 token embedding
//! in Q8_0 is 137 MiB) is split by rows into parts, each in its own buffer;
//! kernels record one dispatch per part.

pub mod layout;
pub mod streamed;

use crate::format::quant::GgmlType;
use crate::gpu::{error::shape_err, BufferRef, GpuContext, GpuError, WeightStore};
use crate::kernels::weights::layout::{region_sizes, repack, BlockLayout, RegionBases};

/// Zero bytes after the last row of every part. Decoders read whole words,
/// up to one word past their data, and a partial F32/F16 unit at the end of a
/// row reads a whole unit (64 bytes) past it before masking; 80 covers both.
/// A part's size may also round up by a half-used d16 word (4 more); the
/// unused slots of its last scale tile are planned on their own
/// (`plan_parts`).
const PART_PADDING: u64 = 80;
pub(crate) const PART_SLACK: u64 = PART_PADDING + 4;

/// A weight matrix `W[rows, cols]` (rows = output features, GGUF dims[1];
/// cols = input features, contiguous, GGUF dims[0]) in its stored format.
#[derive(Debug)]
pub struct QuantMatrix {
    pub dtype: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub parts: Vec<MatrixPart>,
}

/// Rows `first_row .. first_row + rows` of a matrix, in one buffer (in the
/// GPU layout: `bases` says where its aux and d16 regions start).
#[derive(Debug, Clone)]
pub struct MatrixPart {
    pub first_row: usize,
    pub rows: usize,
    pub buffer: BufferRef,
    pub(crate) bases: RegionBases,
}

/// How the shaders decode one format: which `decode_*` functions of
/// quant.wgsl, and the block geometry they assume.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GpuFormat {
    /// Suffix of the format's functions in quant.wgsl (`decode_q8_0`).
    pub fmt: &'static str,
    /// Elements per block; for F32/F16 one 16-element unit.
    pub qk: u32,
    pub block_bytes: u32,
    /// Words of one block in the quants and aux regions (0 for F32/F16).
    pub quant_words: u32,
    pub aux_words: u32,
    /// Rows of a scale tile (`layout::SCALE_TILE` or 1; 1 for F32/F16).
    pub scale_tile: u32,
    /// Whether a block has an f16 scale in the d16 region.
    pub has_d16: bool,
}

/// Every block decodes in units of 16 weights (see quant.wgsl).
pub(crate) const UNIT: usize = 16;

impl GpuFormat {
    pub(crate) fn of(dtype: GgmlType) -> Option<GpuFormat> {
        let fmt = match dtype {
            GgmlType::F32 | GgmlType::F16 => {
                let f32 = dtype == GgmlType::F32;
                return Some(GpuFormat {
                    fmt: if f32 { "f32" } else { "f16" },
                    qk: 16,
                    block_bytes: if f32 { 64 } else { 32 },
                    quant_words: 0,
                    aux_words: 0,
                    scale_tile: 1,
                    has_d16: false,
                });
            }
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q4_K => "q4_k",
            GgmlType::Q6_K => "q6_k",
            _ => return None,
        };
        let layout = BlockLayout::of(dtype)?;
        Some(GpuFormat {
            fmt,
            qk: dtype.block_elements() as u32,
            block_bytes: dtype.block_bytes() as u32,
            quant_words: layout.quant_words() as u32,
            aux_words: layout.aux_words() as u32,
            scale_tile: layout.tile_rows as u32,
            has_d16: layout.d16.is_some(),
        })
    }

    /// Elements per step of the vec4 matrix-vector core (matvec.wgsl): a
    /// block, a quarter of a K-quant block, or 16 F32/F16 elements.
    pub(crate) fn vec_step(&self) -> u32 {
        match self.qk {
            16 => 16,
            256 => 64,
            _ => 32,
        }
    }

    /// Whether the weights are quants with block scales (not F32/F16).
    pub(crate) fn is_quantized(&self) -> bool {
        self.quant_words > 0
    }

    /// The defines quant.wgsl's users expect for this format.
    pub(crate) fn defines(&self) -> Vec<(&'static str, std::borrow::Cow<'static, str>)> {
        vec![
            ("FMT", self.fmt.into()),
            ("QK", format!("{}u", self.qk).into()),
            ("BLOCK_BYTES", format!("{}u", self.block_bytes).into()),
            ("UNITS", format!("{}u", self.qk as usize / UNIT).into()),
            ("QUANT_WORDS", format!("{}u", self.quant_words).into()),
            ("AUX_WORDS", format!("{}u", self.aux_words).into()),
            ("SCALE_TILE", format!("{}u", self.scale_tile).into()),
        ]
    }
}

/// The dtypes the matmul and embedding kernels decode: what a model's
/// weight matrices may be stored as.
pub const GPU_DTYPES: [GgmlType; 8] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

/// The shared decoding source, concatenated in front of each kernel.
pub(crate) const QUANT_WGSL: &str = include_str!("../../../../../shaders/weights/quant.wgsl");

impl QuantMatrix {
    /// Uploads weights in their stored format (no dequantization), split by
    /// rows into parts that each fit one storage binding.
    pub fn upload(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<QuantMatrix, GpuError> {
        Self::upload_with_limit(
            ctx,
            label,
            dtype,
            rows,
            cols,
            bytes,
            ctx.max_weight_part_bytes(),
        )
    }

    /// As `upload`, with parts of at most `max_part_bytes` (padding included):
    /// tests force small splits with it.
    pub fn upload_with_limit(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_bytes: u64,
    ) -> Result<QuantMatrix, GpuError> {
        Self::upload_grouped(ctx, label, dtype, rows, cols, bytes, max_part_bytes, 1)
    }

    /// As `upload_with_limit`, with every part holding a whole number of
    /// `row_group`-row groups (an expert stack's experts).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upload_grouped(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_bytes: u64,
        row_group: usize,
    ) -> Result<QuantMatrix, GpuError> {
        let store = ctx.weight_store;
        let parts = plan_parts(label, dtype, rows, cols, max_part_bytes, row_group, store)?;
        let row_bytes = dtype.row_bytes(cols as u64).unwrap_or(0);
        if rows as u64 * row_bytes != bytes.len() as u64 {
            return Err(shape_err(
                "weights upload",
                format!(
                    "'{label}': {rows} x {cols} {dtype} needs {} bytes, got {}",
                    rows as u64 * row_bytes,
                    bytes.len()
                ),
            ));
        }
        let mut uploaded = Vec::with_capacity(parts.len());
        for part in parts {
            let (first_row, n) = (part.first_row, part.rows);
            let start = first_row as u64 * row_bytes;
            let data = &bytes[start as usize..(start + n as u64 * row_bytes) as usize];
            let part_label = if first_row == 0 && n == rows {
                label.to_string()
            } else {
                format!("{label}[rows {first_row}..{}]", first_row + n)
            };
            let blocks_per_row = cols / dtype.block_elements();
            let repacked = repack(dtype, data, blocks_per_row);
            let (data, bases) = match &repacked {
                Some((gpu, bases)) => (&gpu[..], *bases),
                None => (data, RegionBases::default()),
            };
            let size = data.len() as u64 + PART_SLACK;
            let buffer = match store {
                WeightStore::Buffers => upload_words(ctx, &part_label, data, size)?,
                WeightStore::Textures => ctx.upload_weight_texture(&part_label, data, size)?,
            };
            debug_assert_eq!(
                buffer.size(),
                part.buffer_bytes,
                "{part_label}: planned size"
            );
            uploaded.push(MatrixPart {
                first_row,
                rows: n,
                buffer,
                bases,
            });
        }
        Ok(QuantMatrix {
            dtype,
            rows,
            cols,
            parts: uploaded,
        })
    }

    /// The matrix an upload of `rows` x `cols` `dtype` in parts of whole
    /// `row_group`-row groups would make, its parts planned as the upload
    /// plans them (refusing what it refuses), but every part bound to
    /// `stand_in`, which holds none of its bytes. A model built of these
    /// records the steps the real one will, so its kernels are known before
    /// its weights arrive (`ModelLoader::stand_in_pipeline`); it is never
    /// run.
    pub(crate) fn stand_in(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        (rows, cols): (usize, usize),
        row_group: usize,
        stand_in: &BufferRef,
    ) -> Result<QuantMatrix, GpuError> {
        let max_part = ctx.max_weight_part_bytes();
        let plan = plan_parts(
            label,
            dtype,
            rows,
            cols,
            max_part,
            row_group,
            ctx.weight_store,
        )?;
        let parts = plan
            .iter()
            .map(|p| MatrixPart {
                first_row: p.first_row,
                rows: p.rows,
                buffer: stand_in.clone(),
                bases: part_layout(dtype, p.rows, cols).1,
            })
            .collect();
        Ok(QuantMatrix {
            dtype,
            rows,
            cols,
            parts,
        })
    }

    /// Bytes of one stored row.
    pub fn row_bytes(&self) -> usize {
        // Checked at upload.
        self.dtype.row_bytes(self.cols as u64).unwrap_or(0) as usize
    }

    /// Blocks in one row (for F32/F16, elements): the layout's row stride.
    pub(crate) fn blocks_per_row(&self) -> u32 {
        (self.cols / self.dtype.block_elements()) as u32
    }

    /// Total stored bytes (without padding).
    pub fn bytes(&self) -> usize {
        self.rows * self.row_bytes()
    }

    pub(crate) fn format(&self) -> GpuFormat {
        GpuFormat::of(self.dtype).expect("checked at upload")
    }
}

/// A storage buffer of `size` bytes holding `data`, zero after it.
fn upload_words(
    ctx: &GpuContext,
    label: &str,
    data: &[u8],
    size: u64,
) -> Result<BufferRef, GpuError> {
    let buffer = ctx.create_storage(label, size)?;
    // write_buffer wants multiples of 4 bytes: the whole words, then the
    // last partial word zero-padded (the buffer starts zeroed).
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        ctx.write(&buffer, 0, &data[..whole]);
    }
    if whole < data.len() {
        let mut last = [0u8; 4];
        last[..data.len() - whole].copy_from_slice(&data[whole..]);
        ctx.write(&buffer, whole as u64, &last);
    }
    Ok(buffer)
}

/// Bytes of a part of `rows` rows of a `dtype` matrix of `cols` columns
/// in its GPU layout, and where its aux and d16 regions start: as `repack`
/// lays it out, or for F32/F16 their bytes as stored. `cols` is a whole
/// number of blocks (checked by `plan_parts`).
pub(crate) fn part_layout(dtype: GgmlType, rows: usize, cols: usize) -> (usize, RegionBases) {
    let blocks_per_row = cols / dtype.block_elements();
    match BlockLayout::of(dtype) {
        Some(l) => region_sizes(&l, rows, blocks_per_row),
        None => (
            rows * dtype.row_bytes(cols as u64).unwrap_or(0) as usize,
            RegionBases::default(),
        ),
    }
}

/// One part of a matrix as `QuantMatrix::upload` makes it: its rows and the
/// size of its buffer (the GPU layout's regions, padding included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartPlan {
    pub first_row: usize,
    pub rows: usize,
    pub buffer_bytes: u64,
}

/// The parts an upload of a `rows` x `cols` `dtype` matrix makes, with every
/// check of the upload but the bytes': parts of at most `max_part_bytes`,
/// each a whole number of `row_group`-row groups, sized as `store` keeps
/// them. The memory preflight sizes
/// weights with it from the header alone, so it counts what the GPU will
/// hold, not the file's bytes.
pub fn plan_parts(
    label: &str,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    max_part_bytes: u64,
    row_group: usize,
    store: WeightStore,
) -> Result<Vec<PartPlan>, GpuError> {
    let kernel = "weights upload";
    if GpuFormat::of(dtype).is_none() {
        return Err(shape_err(
            kernel,
            format!("'{label}': {dtype} weights have no GPU decoder (supported: F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K)"),
        ));
    }
    if rows == 0 || cols == 0 || row_group == 0 {
        return Err(shape_err(
            kernel,
            format!("'{label}': empty {rows} x {cols} matrix"),
        ));
    }
    let row_bytes = dtype.row_bytes(cols as u64).ok_or_else(|| {
        shape_err(
            kernel,
            format!(
                "'{label}': {cols} columns is not a whole number of {dtype} blocks of {}",
                dtype.block_elements()
            ),
        )
    })?;
    if cols > u32::MAX as usize / 4 {
        return Err(shape_err(
            kernel,
            format!("'{label}': {cols} columns overflow u32 indexing"),
        ));
    }
    // Shaders address bytes with u32: keep every part under 4 GiB.
    let limit = max_part_bytes.min(u32::MAX as u64 - 255);
    let overhead = part_overhead(dtype, cols, store);
    let group_bytes = row_bytes.saturating_mul(row_group as u64);
    let rows_per_part = limit.saturating_sub(overhead) / group_bytes * row_group as u64;
    if rows_per_part == 0 {
        let what = if row_group == 1 {
            "one row"
        } else {
            "one expert"
        };
        return Err(GpuError::BufferTooLarge {
            label: format!("{label} ({what})"),
            size: group_bytes.saturating_add(overhead),
            limit_name: "max_storage_buffer_binding_size",
            limit,
        });
    }
    let mut parts = Vec::new();
    let mut first_row = 0usize;
    while first_row < rows {
        let n = (rows - first_row).min(rows_per_part as usize);
        let data_bytes = part_layout(dtype, n, cols).0 as u64;
        parts.push(PartPlan {
            first_row,
            rows: n,
            buffer_bytes: store.part_bytes(data_bytes + PART_SLACK),
        });
        first_row += n;
    }
    Ok(parts)
}

/// The most bytes a part of a `dtype` matrix of `cols` columns takes
/// beyond its rows' stored bytes: `PART_SLACK` (padding and a half-used d16
/// word), the unused slots of its last scale tile (up to tile - 1 rows
/// of scales; tiled parts have whole d16 words), and in a texture the
/// rest of its last texture row.
pub(crate) fn part_overhead(dtype: GgmlType, cols: usize, store: WeightStore) -> u64 {
    let blocks_per_row = cols / dtype.block_elements();
    let tile_slack =
        BlockLayout::of(dtype).map_or(0, |l| (l.tile_rows - 1) * blocks_per_row * l.scale_bytes());
    let rounding = match store {
        WeightStore::Buffers => 0,
        WeightStore::Textures => store.part_bytes(1) - 1,
    };
    PART_SLACK + tile_slack as u64 + rounding
}

/// A layer's experts' copies of one matrix, stacked as GGUF stores them
/// (`ffn_gate_exps`: `experts` slabs of `rows` x `cols`, expert-major). Kept
/// as one `QuantMatrix` of `experts * rows` rows whose parts each hold whole
/// experts, so an expert kernel finds a slab in one binding.
#[derive(Debug)]
pub struct ExpertStack {
    pub matrix: QuantMatrix,
    pub experts: usize,
    /// Rows of one expert's matrix.
    pub rows: usize,
}

impl ExpertStack {
    pub fn upload(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        experts: usize,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<ExpertStack, GpuError> {
        Self::upload_with_limit(
            ctx,
            label,
            dtype,
            experts,
            rows,
            cols,
            bytes,
            ctx.max_weight_part_bytes(),
        )
    }

    /// As `upload`, with parts of at most `max_part_bytes`: tests split small
    /// stacks with it.
    #[allow(clippy::too_many_arguments)]
    pub fn upload_with_limit(
        ctx: &GpuContext,
        label: &str,
        dtype: GgmlType,
        experts: usize,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_bytes: u64,
    ) -> Result<ExpertStack, GpuError> {
        if experts == 0 {
            return Err(shape_err(
                "weights upload",
                format!("'{label}': a stack of 0 experts"),
            ));
        }
        let matrix = QuantMatrix::upload_grouped(
            ctx,
            label,
            dtype,
            experts * rows,
            cols,
            bytes,
            max_part_bytes,
            rows,
        )?;
        Ok(ExpertStack {
            matrix,
            experts,
            rows,
        })
    }

    pub fn cols(&self) -> usize {
        self.matrix.cols
    }
}

/// Test weights whose K-quant sub-block scales and mins all differ: random
/// values with a magnitude drawn per 16 elements and an offset per 32. Plain
/// uniform values give every sub-block nearly the same scale and min, so a
/// decoder that picks the wrong one would go unnoticed.
#[cfg(test)]
pub(crate) fn test_weights(len: usize, seed: u64) -> Vec<f32> {
    use crate::testutil::random_vec;
    let r = random_vec(len, seed);
    let mag = random_vec(len.div_ceil(16), seed + 1000);
    let off = random_vec(len.div_ceil(32), seed + 2000);
    (0..len)
        .map(|i| r[i] * (0.51 + 0.49 * mag[i / 16]) + 0.5 * off[i / 32])
        .collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod store_tests;

#[cfg(test)]
mod streamed_tests;
