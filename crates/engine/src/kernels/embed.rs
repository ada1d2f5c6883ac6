//! Embedding gather: `out[t] = scale * table[ids[t]]`, dequantizing the rows
//! of a stored-format table (scale is 1, except e.g. Gemma's sqrt(d)).
//!
//! One dispatch per table part; each writes the tokens whose id falls in its
//! rows. An id past the table reads nothing and gets a row of zeros (written
//! by the last part): a bad token id must not read out of bounds, and zeros
//! are the least surprising value to carry on with.

use crate::gpu::params::kernel_params;

use super::weights::{QuantMatrix, QUANT_WGSL, UNIT};
use super::{check_elems, words};
use crate::gpu::{error::shape_err, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey};

kernel_params! {
    pub(crate) struct Params {
        /// token rows
        m: u32,
        /// row length (embedding width)
        k: u32,
        /// bytes of one stored row
        row_bytes: u32,
        /// first table row held by this part
        first_row: u32,
        /// table rows held by this part
        rows: u32,
        /// 1: ids >= first_row + rows get zero rows (last part)
        zero_beyond: u32,
        /// element of ids for token 0
        ids_offset: u32,
        /// element of out for token 0
        out_offset: u32,
        /// ceil(k / 16)
        units: u32,
        /// 1, or e.g. sqrt(d) for Gemma
        scale: f32,
        /// The part's layout (quant.wgsl).
        /// blocks per row
        blocks: u32,
        /// word where the aux region starts
        aux_base: u32,
        /// word where the d16 region starts
        d16_base: u32,
    }
}

const EMBED_WGSL: &str = include_str!("../../../../shaders/embed.wgsl");

/// `out[out_offset + t * table.cols + e] = scale * table[ids[ids_offset + t], e]`
/// for `t < m`, `e < table.cols`; a row of zeros where the id is not below
/// `table.rows`. `ids` holds u32 token ids; offsets are in elements.
#[allow(clippy::too_many_arguments)]
pub fn embed(
    rec: &mut Recorder,
    table: &QuantMatrix,
    ids: &GpuBuffer,
    ids_offset: usize,
    out: &GpuBuffer,
    out_offset: usize,
    m: usize,
    scale: f32,
) -> Result<(), GpuError> {
    check_elems("embed", "ids", ids, ids_offset + m)?;
    check_elems("embed", "out", out, out_offset + m * table.cols)?;
    if m > 65535 {
        return Err(shape_err(
            "embed",
            format!("{m} token rows exceed one dispatch"),
        ));
    }
    if m == 0 {
        return Ok(());
    }
    // The ids, a table row each, the rows written.
    rec.moved(words(m) + (m * table.row_bytes()) as u64 + words(m * table.cols));
    let fmt = table.format();
    let key = VariantKey {
        family: "embed",
        fmt: fmt.fmt,
        args: [0; 6],
    };
    let make = || OwnedSpec {
        name: format!("embed_{}", fmt.fmt),
        sources: vec![QUANT_WGSL, EMBED_WGSL],
        flags: Vec::new(),
        defines: fmt.defines(),
        entry: "main",
        storage: [Access::Weights, Access::Read, Access::ReadWrite][..].into(),
    };
    let units = table.cols.div_ceil(UNIT) as u32;
    let last = table.parts.len() - 1;
    for (i, part) in table.parts.iter().enumerate() {
        let params = Params {
            m: m as u32,
            k: table.cols as u32,
            row_bytes: table.row_bytes() as u32,
            first_row: part.first_row as u32,
            rows: part.rows as u32,
            zero_beyond: (i == last) as u32,
            ids_offset: ids_offset as u32,
            out_offset: out_offset as u32,
            units,
            scale,
            blocks: table.blocks_per_row(),
            aux_base: part.bases.aux,
            d16_base: part.bases.d16,
        };
        rec.dispatch_variant(
            &key,
            make,
            &params,
            &[&part.buffer, ids, out],
            [units.div_ceil(64), m as u32, 1],
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::quant::{dequantize, quantize, GgmlType};
    use crate::kernels::weights::{test_weights, GPU_DTYPES};
    use crate::testutil::assert_shape_err;
    use crate::testutil::{ctx, random_vec};

    /// Runs `embed` with offsets 2 (ids) and 3 (out); checks the guard
    /// values around the output and returns the m rows.
    fn run(table: &QuantMatrix, ids: &[u32], scale: f32) -> Vec<f32> {
        let ctx = ctx();
        let (m, k) = (ids.len(), table.cols);
        let mut all_ids = vec![0u32; 2];
        all_ids.extend_from_slice(ids);
        let gids = ctx.upload_u32("ids", &all_ids).unwrap();
        let gout = ctx.upload_f32("out", &vec![-5.0; 3 + m * k + 2]).unwrap();
        let mut rec = Recorder::new(ctx);
        embed(&mut rec, table, &gids, 2, &gout, 3, m, scale).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let all = pollster::block_on(ctx.read_f32(&gout, 0, 3 + m * k + 2)).unwrap();
        assert!(
            all[..3].iter().chain(&all[3 + m * k..]).all(|&v| v == -5.0),
            "embed wrote outside its output"
        );
        all[3..3 + m * k].to_vec()
    }

    /// The CPU gather: rows of the dequantized table, scaled; zeros past it.
    fn reference(values: &[f32], rows: usize, k: usize, ids: &[u32], scale: f32) -> Vec<f32> {
        ids.iter()
            .flat_map(|&id| {
                let id = id as usize;
                (0..k).map(move |e| {
                    if id < rows {
                        scale * values[id * k + e]
                    } else {
                        0.0
                    }
                })
            })
            .collect()
    }

    #[test]
    fn embed_matches_cpu_for_every_dtype_whole_and_split() {
        let ctx = ctx();
        let rows = 37;
        // Out-of-range ids (37, u32::MAX) and repeats among them.
        let ids = [5u32, 0, 36, 37, 17, 5, u32::MAX, 23, 9];
        for dtype in GPU_DTYPES {
            let k = match dtype.block_elements() {
                1 => 45, // a partial 16-weight unit at the row end
                32 => 96,
                _ => 768,
            };
            let bytes = quantize(dtype, &test_weights(rows * k, 40)).unwrap();
            let values = dequantize(dtype, &bytes, rows * k).unwrap();
            let row_bytes = bytes.len() as u64 / rows as u64;
            let whole = QuantMatrix::upload(ctx, "table", dtype, rows, k, &bytes).unwrap();
            let split = QuantMatrix::upload_with_limit(
                ctx,
                "table",
                dtype,
                rows,
                k,
                &bytes,
                8 * row_bytes + crate::kernels::weights::part_overhead(dtype, k, ctx.weight_store),
            )
            .unwrap();
            assert_eq!(split.parts.len(), 5);
            for scale in [1.0, 3.5] {
                let want = reference(&values, rows, k, &ids, scale);
                // Decoding matches the CPU's bit for bit (same f32 products,
                // up to the order of d * sc * q in the K-quants), and scaling
                // is one more rounding on each side: allow 2 ulp.
                let what = format!("{dtype} scale {scale}");
                crate::testutil::assert_close(&run(&whole, &ids, scale), &want, 2.5e-7, &what);
                crate::testutil::assert_close(
                    &run(&split, &ids, scale),
                    &want,
                    2.5e-7,
                    &format!("{what} split"),
                );
            }
        }
    }

    #[test]
    fn embed_rejects_short_buffers() {
        let ctx = ctx();
        let bytes = quantize(GgmlType::Q8_0, &random_vec(4 * 32, 1)).unwrap();
        let table = QuantMatrix::upload(ctx, "t", GgmlType::Q8_0, 4, 32, &bytes).unwrap();
        let ids = ctx.upload_u32("ids", &[1, 2]).unwrap();
        let out = ctx.create_storage("out", 64 * 4).unwrap();
        let mut rec = Recorder::new(ctx);
        let err = embed(&mut rec, &table, &ids, 1, &out, 0, 2, 1.0).unwrap_err();
        assert_shape_err(&err, "embed");
        let err = embed(&mut rec, &table, &ids, 0, &out, 1, 2, 1.0).unwrap_err();
        assert_shape_err(&err, "embed");
    }
}
