//! A tiny nomic-bert GGUF written here: what loads, and what is refused by
//! name (the real model's numbers are tests/tests/end_to_end/embed_nomic.rs's).

use super::*;
use crate::format::gguf::MetaValue;
use crate::format::GgufWriter;
use crate::testutil::{ctx, random_vec};

const D: usize = 8;
const FFN: usize = 12;
const VOCAB: usize = 5;

fn k(s: &str) -> String {
    format!("{ARCH}.{s}")
}

fn writer() -> GgufWriter {
    with("general.architecture", MetaValue::String(ARCH.into()))
}

/// The tiny model with metadata `key` set to `value` (replacing or adding).
fn with(key: &str, value: MetaValue) -> GgufWriter {
    let mut meta = vec![
        (
            "general.architecture".to_string(),
            MetaValue::String(ARCH.into()),
        ),
        (k("block_count"), MetaValue::U32(1)),
        (k("context_length"), MetaValue::U32(16)),
        (k("embedding_length"), MetaValue::U32(D as u32)),
        (k("feed_forward_length"), MetaValue::U32(FFN as u32)),
        (k("attention.head_count"), MetaValue::U32(2)),
        (k("attention.layer_norm_epsilon"), MetaValue::F32(1e-12)),
        (k("attention.causal"), MetaValue::Bool(false)),
        (k("pooling_type"), MetaValue::U32(1)),
        (k("rope.freq_base"), MetaValue::F32(1000.0)),
    ];
    meta.retain(|(m, _)| m != key);
    meta.push((key.to_string(), value));
    let mut w = GgufWriter::new();
    for (key, value) in meta {
        w = w.meta(key, value);
    }
    let mut seed = 0;
    let mut t = |w: GgufWriter, name: &str, dims: &[u64]| {
        seed += 1;
        let n = dims.iter().product::<u64>() as usize;
        w.tensor_f32(name, dims, &random_vec(n, seed))
    };
    let (d, f) = (D as u64, FFN as u64);
    w = t(w, "token_embd.weight", &[d, VOCAB as u64]);
    w = t(w, "token_types.weight", &[d, 2]);
    for name in [
        "token_embd_norm",
        "blk.0.attn_output_norm",
        "blk.0.layer_output_norm",
    ] {
        w = t(w, &format!("{name}.weight"), &[d]);
        w = t(w, &format!("{name}.bias"), &[d]);
    }
    w = t(w, "blk.0.attn_qkv.weight", &[d, 3 * d]);
    w = t(w, "blk.0.attn_output.weight", &[d, d]);
    w = t(w, "blk.0.ffn_up.weight", &[d, f]);
    w = t(w, "blk.0.ffn_gate.weight", &[d, f]);
    t(w, "blk.0.ffn_down.weight", &[f, d])
}

fn load(w: GgufWriter) -> Result<(BertConfig, PoolMode), ModelError> {
    let bytes = w.to_bytes();
    let file = GgufFile::parse(&bytes)?;
    let (cfg, pool) = config(&file)?;
    upload(ctx(), &cfg, &file, &bytes)?;
    Ok((cfg, pool))
}

#[test]
fn a_tiny_nomic_bert_loads() {
    let (cfg, pool) = load(writer()).unwrap();
    assert_eq!(
        (cfg.dim, cfg.heads, cfg.head_dim, cfg.ffn, cfg.vocab),
        (D, 2, 4, FFN, VOCAB)
    );
    assert_eq!(
        cfg.positions,
        Positions::Rotary {
            theta: 1000.0,
            n_rot: 4
        }
    );
    assert_eq!((cfg.ffn_kind, pool), (Ffn::SwiGlu, PoolMode::Mean));
}

#[test]
fn what_it_does_not_run_is_refused_by_name() {
    for (w, word) in [
        (
            with("general.architecture", MetaValue::String("bert".into())),
            "bert",
        ),
        (
            with(&k("attention.causal"), MetaValue::Bool(true)),
            "causal",
        ),
        (
            with(&k("pooling_type"), MetaValue::U32(0)),
            "pooling_type 0",
        ),
        (with(&k("pooling_type"), MetaValue::U32(4)), "rank"),
        (
            with(&k("rope.scaling.type"), MetaValue::String("yarn".into())),
            "yarn",
        ),
        (
            with(&k("attention.head_count_kv"), MetaValue::U32(1)),
            "key/value heads",
        ),
        (
            with(&k("rope.dimension_count"), MetaValue::U32(3)),
            "dimension_count 3",
        ),
        (
            with(&k("attention.head_count"), MetaValue::U32(3)),
            "3 heads",
        ),
        (
            writer().tensor_f32("blk.0.attn_qkv.bias", &[3 * D as u64], &[0.0; 3 * D]),
            "blk.0.attn_qkv.bias",
        ),
    ] {
        let err = load(w).unwrap_err().to_string();
        assert!(err.contains(word), "{word}: {err}");
    }
}
