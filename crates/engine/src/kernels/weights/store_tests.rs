//! Weights in textures and in buffers give the same results, bit for bit:
//! the kernels are one WGSL over `w_word` / `w_vec4`, so the store must
//! change only where the bytes come from. The buffer path is checked
//! against the CPU in the kernels' own tests (on the adapter's store);
//! this runs both stores on one adapter, each format through the decode
//! GEMV (whole and split into parts, the split's last part ending
//! mid-texture-row), the prefill matmul and the embedding lookup.

use crate::format::quant::{quantize, GgmlType};
use crate::gpu::{GpuContext, Recorder, WeightStore};
use crate::kernels::embed::embed;
use crate::kernels::matmul::linear::{linear, Epilogue, Linear, LinearScratch};
use crate::kernels::weights::{part_overhead, test_weights, QuantMatrix, GPU_DTYPES};
use crate::testutil::{ctx_with_store, random_vec};

/// Rows, columns and token rows of the case for `dtype`: whole vec4 steps
/// (the vec4 cores) and an odd row count.
fn shape(dtype: GgmlType) -> (usize, usize, usize) {
    match dtype.block_elements() {
        1 => (37, 80, 3),
        32 => (37, 96, 3),
        _ => (21, 512, 3),
    }
}

/// The outputs of one store: GEMV whole, GEMV over parts of 8 rows,
/// matmul of `m` rows, embedding of a few ids.
fn outputs(ctx: &GpuContext, dtype: GgmlType) -> Vec<Vec<f32>> {
    let (n, k, m) = shape(dtype);
    let bytes = quantize(dtype, &test_weights(n * k, 3)).unwrap();
    let row_bytes = bytes.len() as u64 / n as u64;
    let whole = QuantMatrix::upload(ctx, "w", dtype, n, k, &bytes).unwrap();
    let limit = 8 * row_bytes + part_overhead(dtype, k, ctx.weight_store);
    let split = QuantMatrix::upload_with_limit(ctx, "w", dtype, n, k, &bytes, limit).unwrap();
    assert_eq!(split.parts.len(), n.div_ceil(8), "{dtype}: parts");
    let x = ctx.upload_f32("x", &random_vec(m * k, 4)).unwrap();
    let normed = ctx.create_storage("normed", (4 * m * k) as u64).unwrap();
    let ids = ctx.upload_u32("ids", &[0, n as u32 - 1, 9, 3]).unwrap();
    let mut results = Vec::new();
    for (w, rows) in [(&whole, 1), (&split, 1), (&whole, m)] {
        let out = ctx.create_storage("out", (4 * rows * n) as u64).unwrap();
        let op = Linear {
            x: &x,
            x_offset: 0,
            norm: None,
            x_q8: None,
            w,
            bias: None,
            out: &out,
            out_offset: 0,
            out_stride: n,
            epilogue: Epilogue::Store,
            m: rows,
            as_decode: false,
        };
        let mut rec = Recorder::new(ctx);
        let scratch = LinearScratch {
            normed: &normed,
            ranges: None,
        };
        linear(&mut rec, &op, &scratch).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        results.push(pollster::block_on(ctx.read_f32(&out, 0, rows * n)).unwrap());
    }
    let out = ctx.create_storage("embedded", (4 * 4 * k) as u64).unwrap();
    let mut rec = Recorder::new(ctx);
    embed(&mut rec, &split, &ids, 0, &out, 0, 4, 1.0).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    results.push(pollster::block_on(ctx.read_f32(&out, 0, 4 * k)).unwrap());
    results
}

#[test]
fn weights_in_textures_give_what_weights_in_buffers_give() {
    let buffers = ctx_with_store(WeightStore::Buffers);
    let textures = ctx_with_store(WeightStore::Textures);
    assert_eq!(buffers.weight_store, WeightStore::Buffers);
    assert_eq!(textures.weight_store, WeightStore::Textures);
    for dtype in GPU_DTYPES {
        let want = outputs(buffers, dtype);
        let got = outputs(textures, dtype);
        assert_eq!(got.len(), want.len(), "{dtype}: outputs");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "{dtype}: output {i} length");
            assert!(
                w.iter().any(|v| *v != 0.0),
                "{dtype}: output {i} is all zero"
            );
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(g),
                bits(w),
                "{dtype}: output {i} differs between the stores"
            );
        }
    }
}

/// A texture part takes whole texture rows, and the planned size is what
/// the upload makes; the environment's name for each store parses back.
#[test]
fn texture_parts_are_whole_rows_and_names_parse() {
    use crate::gpu::weight_store::texture_row_bytes;
    let ctx = ctx_with_store(WeightStore::Textures);
    let (n, k) = (300, 256);
    let bytes = quantize(GgmlType::Q8_0, &test_weights(n * k, 5)).unwrap();
    let w = QuantMatrix::upload(ctx, "w", GgmlType::Q8_0, n, k, &bytes).unwrap();
    let size = w.parts[0].buffer.size();
    assert_eq!(size % texture_row_bytes(), 0, "{size} bytes");
    assert!(size >= bytes.len() as u64 && size < bytes.len() as u64 + texture_row_bytes() + 200);
    assert!(w.parts[0].buffer.raw().is_none(), "a texture, not a buffer");
    for store in [WeightStore::Buffers, WeightStore::Textures] {
        assert_eq!(WeightStore::parse(store.name()).unwrap(), store);
    }
    let err = WeightStore::parse("texture").unwrap_err();
    assert!(err.to_string().contains("WICK_WEIGHT_STORE"), "{err}");
}

/// Writing a weight texture after upload is not skipped silently: the
/// context keeps it as its fault and the next check reports it, naming the
/// part. (A context of its own: the fault makes it unusable.)
#[test]
fn writing_a_weight_texture_is_a_reported_fault() {
    let ctx = pollster::block_on(GpuContext::with_weight_store(Some(WeightStore::Textures)))
        .expect("a GPU adapter (lavapipe)");
    let bytes = quantize(GgmlType::Q8_0, &test_weights(4 * 32, 6)).unwrap();
    let w = QuantMatrix::upload(&ctx, "w", GgmlType::Q8_0, 4, 32, &bytes).unwrap();
    assert!(ctx.check_alive().is_ok());
    ctx.write(&w.parts[0].buffer, 0, &[0; 4]);
    let err = ctx.check_alive().unwrap_err();
    assert!(err.to_string().contains("'w'"), "{err}");
}
