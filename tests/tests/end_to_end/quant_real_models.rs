//! Every quant type in the real model files, decoded on the GPU (through the
//! embedding gather, which dequantizes whole rows) and on the CPU (the
//! reference dequantizer), compared row by row.

use std::collections::BTreeMap;

use wick::format::gguf::GgufFile;
use wick::format::quant::{dequantize, GgmlType};
use wick::gpu::Recorder;
use wick::kernels::embed::embed;
use wick::kernels::weights::QuantMatrix;
use wick_tests::{gpu, model_path};

/// Rows checked per tensor: the first, one in the middle, and the last.
fn sample_rows(n_rows: usize) -> Vec<u32> {
    let mut rows = vec![0, (n_rows / 2) as u32, (n_rows - 1) as u32];
    rows.dedup();
    rows
}

/// For each type in `file`, the first 2-D tensor of that type.
fn one_tensor_per_type(gguf: &GgufFile) -> BTreeMap<&'static str, &wick::format::gguf::TensorInfo> {
    let mut by_type = BTreeMap::new();
    for t in &gguf.tensors {
        if t.dims.len() == 2 {
            by_type.entry(t.dtype.name()).or_insert(t);
        }
    }
    by_type
}

/// Returns each type checked with the number of buffers its table needed.
fn check_file(file: &str) -> Vec<(GgmlType, usize)> {
    let ctx = gpu();
    let bytes = std::fs::read(model_path(file)).unwrap();
    let gguf = GgufFile::parse(&bytes).unwrap();
    let mut seen = Vec::new();
    for (_, t) in one_tensor_per_type(&gguf) {
        let (cols, n_rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let data = gguf.tensor_bytes(&bytes, t).unwrap();
        let table = QuantMatrix::upload(&ctx, &t.name, t.dtype, n_rows, cols, data).unwrap();
        let rows = sample_rows(n_rows);
        let ids = ctx.upload_u32("ids", &rows).unwrap();
        let out = ctx
            .create_storage("out", (4 * rows.len() * cols) as u64)
            .unwrap();
        let mut rec = Recorder::new(&ctx);
        embed(&mut rec, &table, &ids, 0, &out, 0, rows.len(), 1.0).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&out, 0, rows.len() * cols)).unwrap();
        let row_bytes = data.len() / n_rows;
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            let want =
                dequantize(t.dtype, &data[r * row_bytes..(r + 1) * row_bytes], cols).unwrap();
            let got_row = &got[i * cols..(i + 1) * cols];
            for (j, (g, w)) in got_row.iter().zip(&want).enumerate() {
                // The same scale-times-quant products in f32 on both sides:
                // a couple of ulps at most.
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{file} {} ({}) row {r} col {j}: GPU {g}, CPU {w}",
                    t.name,
                    t.dtype.name()
                );
            }
        }
        seen.push((t.dtype, table.parts.len()));
    }
    seen
}

#[test]
fn smollm2_types_decode_identically_on_gpu_and_cpu() {
    let seen: Vec<_> = check_file("SmolLM2-135M-Instruct.Q4_1.gguf")
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert!(
        seen.contains(&GgmlType::Q4_1) && seen.contains(&GgmlType::Q8_0),
        "{seen:?}"
    );
}

#[test]
fn gemma3_k_quants_decode_identically_on_gpu_and_cpu() {
    let seen: Vec<_> = check_file("gemma-3-270m-q4_k_m.gguf")
        .into_iter()
        .map(|s| s.0)
        .collect();
    for t in [
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        assert!(seen.contains(&t), "{t:?} not in {seen:?}");
    }
}

#[test]
fn qwen2_tables_over_the_binding_limit_decode_identically() {
    // Its 151936-row token embedding is split across several buffers where
    // the adapter's storage binding is small (128 MiB on lavapipe).
    let seen = check_file("qwen2.5-coder-0.5b-instruct-awq.gguf");
    let limit = gpu().max_binding_bytes();
    if limit < 150 << 20 {
        assert!(
            seen.iter().any(|&(_, parts)| parts > 1),
            "no table was split: {seen:?}"
        );
    }
}

#[test]
fn f16_decodes_identically_on_gpu_and_cpu() {
    let seen: Vec<_> = check_file("tiny-qwen3moe.f16.gguf")
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert!(seen.contains(&GgmlType::F16), "{seen:?}");
}
