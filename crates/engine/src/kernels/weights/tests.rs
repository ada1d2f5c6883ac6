//! Uploads split by rows within the limit, keep the stored bytes, and
//! refuse bad inputs.

use super::*;
use crate::format::quant::quantize;
use crate::testutil::{ctx, ctx_with_store, random_vec};

#[test]
fn upload_splits_by_rows_within_the_limit() {
    // Buffers, which read back (textures are never copied out).
    let ctx = ctx_with_store(WeightStore::Buffers);
    let (rows, cols) = (10, 64);
    let bytes = quantize(GgmlType::Q8_0, &random_vec(rows * cols, 5)).unwrap();
    let row_bytes = 68;
    let m = QuantMatrix::upload_with_limit(
        ctx,
        "w",
        GgmlType::Q8_0,
        rows,
        cols,
        &bytes,
        3 * row_bytes + part_overhead(GgmlType::Q8_0, cols, ctx.weight_store),
    )
    .unwrap();
    let sizes: Vec<(usize, usize)> = m.parts.iter().map(|p| (p.first_row, p.rows)).collect();
    assert_eq!(sizes, [(0, 3), (3, 3), (6, 3), (9, 1)]);
    for p in &m.parts {
        assert!(
            p.buffer.size()
                <= 3 * row_bytes + part_overhead(GgmlType::Q8_0, cols, ctx.weight_store)
        );
    }
    // The stored bytes arrive, rearranged: the last part's row (two blocks)
    // reads back as the file's.
    let p = &m.parts[3];
    let layout = crate::kernels::weights::layout::BlockLayout::of(GgmlType::Q8_0).unwrap();
    let size = crate::kernels::weights::layout::region_sizes(&layout, 1, 2).0 as u64;
    let back = pollster::block_on(ctx.read_bytes(&p.buffer, 0, size)).unwrap();
    let blocks = crate::kernels::weights::layout::unpack(GgmlType::Q8_0, &back, 1, 2).unwrap();
    assert_eq!(blocks, &bytes[9 * 68..]);
}

#[test]
fn upload_rejects_bad_inputs() {
    let ctx = ctx();
    let err = QuantMatrix::upload(ctx, "w", GgmlType::Q5_1, 1, 32, &[0; 24]).unwrap_err();
    assert!(err.to_string().contains("Q5_1"), "{err}");
    let err = QuantMatrix::upload(ctx, "w", GgmlType::Q8_0, 2, 32, &[0; 34]).unwrap_err();
    assert!(matches!(err, GpuError::Shape { .. }), "{err}");
    let err = QuantMatrix::upload(ctx, "w", GgmlType::Q4_K, 1, 32, &[0; 18]).unwrap_err();
    assert!(err.to_string().contains("blocks"), "{err}");
    let err =
        QuantMatrix::upload_with_limit(ctx, "w", GgmlType::F32, 2, 64, &[0; 512], 100).unwrap_err();
    assert!(matches!(err, GpuError::BufferTooLarge { .. }), "{err}");
}

/// The plan the memory preflight reads is the upload's own: same parts,
/// same buffer sizes, for every GPU type, splits that leave a half-used
/// d16 word, and expert-sized row groups.
#[test]
fn plan_parts_is_what_upload_makes() {
    use crate::kernels::weights::test_weights;
    let ctx = ctx();
    for dtype in GPU_DTYPES {
        let (rows, cols) = (7, dtype.block_elements() * 3);
        let bytes = quantize(dtype, &test_weights(rows * cols, 9)).unwrap();
        let row_bytes = bytes.len() as u64 / rows as u64;
        for (limit, group) in [
            (u64::MAX, 1),
            (
                3 * row_bytes + part_overhead(dtype, cols, ctx.weight_store),
                1,
            ),
            (
                4 * row_bytes + part_overhead(dtype, cols, ctx.weight_store),
                2,
            ),
        ] {
            let rows = rows - rows % group;
            let bytes = &bytes[..rows * row_bytes as usize];
            let plan = plan_parts("w", dtype, rows, cols, limit, group, ctx.weight_store).unwrap();
            let m = QuantMatrix::upload_grouped(ctx, "w", dtype, rows, cols, bytes, limit, group)
                .unwrap();
            let made: Vec<PartPlan> = m
                .parts
                .iter()
                .map(|p| PartPlan {
                    first_row: p.first_row,
                    rows: p.rows,
                    buffer_bytes: p.buffer.size(),
                })
                .collect();
            assert_eq!(plan, made, "{dtype} limit {limit} group {group}");
        }
    }
    let err = plan_parts("w", GgmlType::Q8_0, 4, 32, 8, 1, ctx.weight_store).unwrap_err();
    assert!(matches!(err, GpuError::BufferTooLarge { .. }), "{err}");
}
