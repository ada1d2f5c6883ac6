//! Tests of `synthetic`: the architectures against their published configs,
//! the file's validity, and finite logits in every quant.

use std::sync::Arc;

use super::*;
use crate::engine::ModelLoader;
use crate::format::gguf::GgufFile;
use crate::format::quant::dequantize;
use crate::gpu::GpuContext;
use crate::model::Plan;
use crate::pipeline::PipelineOptions;
use crate::tokenizer::Tokenizer;

/// (name, arch, layers, d, heads, kv heads, head dim, ffn, vocab, tied,
/// q/k/v bias, rope theta): the published configs.
#[allow(clippy::type_complexity)]
const PUBLISHED: [(
    &str,
    &str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    bool,
    bool,
    f32,
); 4] = [
    (
        "smollm2-135m",
        "llama",
        30,
        576,
        9,
        3,
        64,
        1536,
        49152,
        true,
        false,
        1e5,
    ),
    (
        "qwen2.5-0.5b",
        "qwen2",
        24,
        896,
        14,
        2,
        64,
        4864,
        151936,
        true,
        true,
        1e6,
    ),
    (
        "llama-3.2-1b",
        "llama",
        16,
        2048,
        32,
        8,
        64,
        8192,
        128256,
        true,
        false,
        5e5,
    ),
    (
        "llama-3.1-8b",
        "llama",
        32,
        4096,
        32,
        8,
        128,
        14336,
        128256,
        false,
        false,
        5e5,
    ),
];

#[test]
fn architectures_match_published_configs_and_their_headers_declare_them() {
    for (name, family, layers, d, heads, kv, hd, ffn, vocab, tied, bias, theta) in PUBLISHED {
        let a = arch(name).unwrap();
        let got = (
            a.architecture,
            a.n_layers,
            a.d_model,
            a.n_heads,
            a.n_kv_heads,
        );
        assert_eq!(got, (family, layers, d, heads, kv), "{name}");
        let got = (
            a.head_dim,
            a.ffn_dim,
            a.vocab_size,
            a.tied,
            a.qkv_bias,
            a.rope_theta,
        );
        assert_eq!(got, (hd, ffn, vocab, tied, bias, theta), "{name}");

        // The header alone: no tensor data is made.
        let m = SyntheticModel::new(a, GgmlType::Q8_0).unwrap();
        let file = GgufFile::parse_header(&m.header).unwrap();
        let c = Plan::for_file(&file).unwrap().config;
        let got = (
            c.architecture.as_str(),
            c.n_layers,
            c.d_model,
            c.n_heads,
            c.n_kv_heads,
        );
        assert_eq!(got, (family, layers, d, heads, kv), "{name}");
        assert_eq!(
            (c.head_dim, c.ffn_dim, c.vocab_size, c.rope.theta),
            (hd, ffn, vocab, theta)
        );
        let dims = |t: &str| file.tensor(t).map(|t| t.dims.clone());
        assert_eq!(
            dims("token_embd.weight"),
            Some(vec![d as u64, vocab as u64])
        );
        assert_eq!(
            dims("blk.0.attn_k.weight"),
            Some(vec![d as u64, (kv * hd) as u64])
        );
        assert_eq!(
            dims("blk.0.ffn_down.weight"),
            Some(vec![ffn as u64, d as u64])
        );
        assert!(file
            .tensor(&format!("blk.{layers}.attn_q.weight"))
            .is_none());
        assert_eq!(file.tensor("output.weight").is_none(), tied, "{name}");
        assert_eq!(file.tensor("blk.0.attn_q.bias").is_some(), bias, "{name}");
        let tok = Tokenizer::from_gguf(&file).unwrap();
        assert_eq!(tok.encode("Hi!", false, false).unwrap(), [72, 105, 33]);
    }
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let e = arch("gpt-5").unwrap_err().to_string();
    assert!(
        e.contains("gpt-5") && e.contains("smollm2-135m, qwen2.5-0.5b"),
        "{e}"
    );
    let e = quant("q3_k").unwrap_err().to_string();
    assert!(
        e.contains("q3_k") && e.contains("q4_0, q4_k, q8_0, f16"),
        "{e}"
    );
    assert_eq!(quant("q4_k").unwrap(), GgmlType::Q4_K);
    assert_eq!(matrix_type(GgmlType::Q4_K, 576), GgmlType::Q5_0);
    assert_eq!(matrix_type(GgmlType::Q4_K, 1536), GgmlType::Q4_K);
}

#[test]
fn a_whole_model_streams_as_a_valid_file_of_sane_weights() {
    let a = arch("smollm2-135m").unwrap();
    let m = SyntheticModel::new(a, GgmlType::Q4_0).unwrap();
    let bytes = m.to_bytes();
    assert_eq!(bytes.len() as u64, m.len());
    let file = GgufFile::parse(&bytes).unwrap();
    file.check_file_len(bytes.len() as u64).unwrap();
    let t = file.tensor("blk.29.ffn_down.weight").unwrap();
    let data = file.tensor_bytes(&bytes, t).unwrap();
    let w = dequantize(t.dtype, data, t.n_elements as usize).unwrap();
    let std = (w.iter().map(|v| v * v).sum::<f32>() / w.len() as f32).sqrt();
    let want = 1.0 / (a.ffn_dim as f32).sqrt();
    assert!(
        (std / want - 1.0).abs() < 0.2,
        "std {std}, want about {want}"
    );
    // Rows differ, and a rebuild is byte for byte the same.
    let row = t.row_bytes() as usize;
    assert_ne!(data[..row], data[row..2 * row]);
    assert_eq!(
        SyntheticModel::new(a, GgmlType::Q4_0).unwrap().to_bytes(),
        bytes
    );
}

/// The largest model streams in seconds (`--ignored` to time it; it
/// makes 4.5 GB of weights, one tensor at a time).
#[test]
#[ignore]
fn the_8b_model_streams_fast() {
    let start = std::time::Instant::now();
    let m = SyntheticModel::new(arch("llama-3.1-8b").unwrap(), GgmlType::Q4_0).unwrap();
    let mut n = 0u64;
    m.stream(|chunk| {
        n += chunk.len() as u64;
        Ok::<_, ()>(())
    })
    .unwrap();
    assert_eq!(n, m.len());
    eprintln!(
        "8B q4_0: {n} bytes in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// Loads `arch` in `quant` and returns the logits of a 3-token prompt's last
/// position, checking they are finite and not all equal.
fn finite_logits(ctx: &Arc<GpuContext>, arch: &Arch, quant: GgmlType) -> Vec<f32> {
    let m = SyntheticModel::new(arch, quant).unwrap();
    let opts = PipelineOptions {
        ctx_len: Some(16),
        ..Default::default()
    };
    let mut loader = ModelLoader::new(ctx.clone(), opts);
    m.stream(|chunk| loader.push(chunk).map(|_| ())).unwrap();
    let mut engine = loader.finish().unwrap();
    let ids = [1, 200, arch.vocab_size as u32 - 1];
    let logits = pollster::block_on(engine.pipeline.prefill(&ids, 1)).unwrap();
    let l = logits.into_iter().next().unwrap();
    let what = format!("{} {quant}", arch.name);
    assert_eq!(l.len(), arch.vocab_size, "{what}");
    assert!(l.iter().all(|v| v.is_finite()), "{what}: {l:?}");
    assert!(l.iter().any(|&v| v != l[0]), "{what}: constant logits");
    l
}

/// A deep, narrow model in every quant gives finite logits after 32
/// layers: the weights' scale does not blow activations up.
#[test]
fn deep_models_give_finite_logits_in_every_quant() {
    let deep = Arch {
        name: "deep-test",
        n_layers: 32,
        d_model: 256,
        n_heads: 4,
        n_kv_heads: 2,
        ffn_dim: 512,
        vocab_size: 300,
        tied: false,
        ..ARCHS[1].clone()
    };
    let ctx = Arc::new(pollster::block_on(GpuContext::new()).unwrap());
    for (_, q) in QUANTS {
        finite_logits(&ctx, &deep, q);
    }
}

/// Every named model at full size gives finite logits (`--ignored`: minutes
/// on lavapipe, and the 8B one needs about 9 GB of memory there).
#[test]
#[ignore]
fn named_models_give_finite_logits() {
    let ctx = Arc::new(pollster::block_on(GpuContext::new()).unwrap());
    for a in &ARCHS {
        let l = finite_logits(&ctx, a, GgmlType::Q4_0);
        let rms = (l.iter().map(|v| v * v).sum::<f32>() / l.len() as f32).sqrt();
        eprintln!("{}: logits rms {rms}", a.name);
    }
}
