//! A matrix streamed in pieces (`MatrixUpload`) ends byte for byte as the
//! whole upload makes it: every GPU type, splits into parts whose row
//! counts are not whole tiles, pieces that end inside rows, blocks and
//! words, and runs longer than one `RUN_BYTES`; bad byte counts are
//! refused. Textures gather and upload whole, as before.

use crate::format::quant::{quantize, GgmlType};
use crate::gpu::{GpuContext, GpuError, WeightStore};
use crate::kernels::weights::streamed::MatrixUpload;
use crate::kernels::weights::{part_overhead, test_weights, QuantMatrix, GPU_DTYPES};
use crate::testutil::ctx_with_store;

/// Every part's whole buffer, read back.
fn buffers(ctx: &GpuContext, m: &QuantMatrix) -> Vec<(usize, usize, Vec<u8>)> {
    m.parts
        .iter()
        .map(|p| {
            let bytes = pollster::block_on(ctx.read_bytes(&p.buffer, 0, p.buffer.size())).unwrap();
            (p.first_row, p.rows, bytes)
        })
        .collect()
}

fn streamed(
    ctx: &GpuContext,
    dtype: GgmlType,
    (rows, cols): (usize, usize),
    bytes: &[u8],
    limit: u64,
    group: usize,
    piece: usize,
) -> QuantMatrix {
    let mut up = MatrixUpload::begin(ctx, "w", dtype, rows, cols, limit, group).unwrap();
    for chunk in bytes.chunks(piece) {
        up.push(ctx, chunk).unwrap();
    }
    up.finish(ctx).unwrap()
}

#[test]
fn a_streamed_matrix_is_the_whole_upload() {
    let ctx = ctx_with_store(WeightStore::Buffers);
    for dtype in GPU_DTYPES {
        // 21 rows: whole scale tiles and a part-used one; 3 blocks a row
        // leave a half-used f16 scale word in a row-major layout.
        let (rows, cols) = (21, dtype.block_elements().max(16) * 3);
        let bytes = quantize(dtype, &test_weights(rows * cols, 11)).unwrap();
        let row_bytes = bytes.len() / rows;
        let overhead = part_overhead(dtype, cols, ctx.weight_store);
        // Whole; parts of 5 rows (not a tile); parts of 2-row groups.
        for (limit, group) in [
            (u64::MAX, 1),
            (5 * row_bytes as u64 + overhead, 1),
            (6 * row_bytes as u64 + overhead, 3),
        ] {
            let want =
                QuantMatrix::upload_grouped(ctx, "w", dtype, rows, cols, &bytes, limit, group)
                    .unwrap();
            let want = buffers(ctx, &want);
            for piece in [1, 7, 3 * row_bytes + 5, bytes.len()] {
                let got = streamed(ctx, dtype, (rows, cols), &bytes, limit, group, piece);
                let got = buffers(ctx, &got);
                assert!(
                    got == want,
                    "{dtype}: limit {limit}, group {group}, pieces of {piece}: the buffers differ"
                );
            }
        }
    }
}

#[test]
fn runs_longer_than_one_write_stream_too() {
    // 4.3 MiB of Q4_K rows: more than one run of RUN_BYTES.
    let ctx = ctx_with_store(WeightStore::Buffers);
    let dtype = GgmlType::Q4_K;
    let (rows, cols) = (1003, 4096);
    let bytes = quantize(dtype, &test_weights(rows * cols, 12)).unwrap();
    let want = QuantMatrix::upload(ctx, "w", dtype, rows, cols, &bytes).unwrap();
    let got = streamed(ctx, dtype, (rows, cols), &bytes, u64::MAX, 1, 3 << 20);
    assert!(buffers(ctx, &got) == buffers(ctx, &want));
}

#[test]
fn a_streamed_matrix_refuses_the_wrong_byte_count() {
    let ctx = ctx_with_store(WeightStore::Buffers);
    let dtype = GgmlType::Q8_0;
    let mut up = MatrixUpload::begin(ctx, "w", dtype, 2, 32, u64::MAX, 1).unwrap();
    up.push(ctx, &[0; 34]).unwrap();
    let err = up.push(ctx, &[0; 35]).unwrap_err();
    assert!(matches!(err, GpuError::Shape { .. }), "{err}");
    assert!(err.to_string().contains("needs 68 bytes"), "{err}");
    let err = up.finish(ctx).unwrap_err();
    assert!(err.to_string().contains("got 34"), "{err}");
    // What the whole upload refuses, before any byte.
    let err = MatrixUpload::begin(ctx, "w", GgmlType::Q5_1, 1, 32, u64::MAX, 1)
        .err()
        .unwrap();
    assert!(err.to_string().contains("Q5_1"), "{err}");
}

#[test]
fn textures_gather_and_upload_whole() {
    let ctx = ctx_with_store(WeightStore::Textures);
    let dtype = GgmlType::Q4_0;
    let (rows, cols) = (9, 64);
    let bytes = quantize(dtype, &test_weights(rows * cols, 13)).unwrap();
    let m = streamed(
        ctx,
        dtype,
        (rows, cols),
        &bytes,
        ctx.max_weight_part_bytes(),
        1,
        5,
    );
    assert_eq!((m.rows, m.cols, m.parts.len()), (rows, cols, 1));
}
