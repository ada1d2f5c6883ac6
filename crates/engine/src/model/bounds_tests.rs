//! Crafted headers whose counts and dimensions are absurd, overflowing or
//! beyond the kernels: each is refused by `Plan::for_file` from the header
//! alone (no tensor data, no GPU), naming the key and its value.

use super::*;
use crate::format::gguf::{GgufFile, MetaValue};
use crate::format::gguf_write::GgufWriter;
use crate::format::quant::GgmlType;
use crate::model::config_check::check;
use crate::model::Plan;
use crate::pipeline::KvDtype;

/// A small valid llama header (2 layers, d 64, 4 heads / 2 KV of 16) with
/// `edits` applied to its `llama.*` keys (`None` removes a key), and only the
/// token embedding declared: enough for the config, which is all that runs.
fn header(edits: &[(&str, Option<MetaValue>)]) -> GgufFile {
    let mut keys: Vec<(String, MetaValue)> = [
        ("block_count", 2),
        ("embedding_length", 64),
        ("feed_forward_length", 128),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
        ("context_length", 256),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), MetaValue::U32(v)))
    .collect();
    for (key, value) in edits {
        keys.retain(|(k, _)| k != key);
        if let Some(v) = value {
            keys.push((key.to_string(), v.clone()));
        }
    }
    let mut w = GgufWriter::new().meta("general.architecture", MetaValue::String("llama".into()));
    for (k, v) in keys {
        w = w.meta(format!("llama.{k}"), v);
    }
    let header = w
        .declare_tensor("token_embd.weight", &[64, 100], GgmlType::F32)
        .try_header()
        .unwrap();
    GgufFile::parse_header(&header).unwrap()
}

fn plan_error(edits: &[(&str, Option<MetaValue>)]) -> ModelError {
    match Plan::for_file(&header(edits)) {
        Ok(plan) => panic!("accepted {edits:?}: {:?}", plan.config),
        Err(e) => e,
    }
}

fn assert_out_of_bounds(err: &ModelError, key: &str, value: u64) {
    assert!(
        matches!(err, ModelError::OutOfBounds { key: k, value: v, .. } if k == key && *v == value),
        "expected {key} = {value} out of bounds, got: {err}"
    );
    assert!(err.to_string().contains(&value.to_string()), "{err}");
}

#[test]
fn the_unedited_header_plans() {
    let plan = Plan::for_file(&header(&[])).unwrap();
    assert_eq!(plan.config.head_dim, 16);
    assert_eq!(plan.config.vocab_size, 100);
}

/// Before the bound, `needs` would list nine names per layer for 2^40
/// layers before any tensor was looked at.
#[test]
fn an_absurd_block_count_is_refused_before_tensors_are_listed() {
    for n in [1u64 << 40, u64::MAX, MAX_LAYERS as u64 + 1, 0] {
        let err = plan_error(&[("block_count", Some(MetaValue::U64(n)))]);
        assert_out_of_bounds(&err, "llama.block_count", n);
    }
}

#[test]
fn overflowing_dimensions_are_refused() {
    let huge = MetaValue::U64(u64::MAX);
    for key in [
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "context_length",
    ] {
        let err = plan_error(&[(key, Some(huge.clone()))]);
        assert_out_of_bounds(&err, &format!("llama.{key}"), u64::MAX);
    }
    // Each count in bounds, but the head_dim they imply (65536 / 1) is not.
    let err = plan_error(&[
        ("embedding_length", Some(MetaValue::U32(65_536))),
        ("attention.head_count", Some(MetaValue::U32(1))),
        ("attention.head_count_kv", Some(MetaValue::U32(1))),
    ]);
    assert_out_of_bounds(&err, "llama.attention.key_length", 65_536);
}

#[test]
fn head_dim_over_the_attention_kernels_limit_is_refused_at_config_time() {
    let err = plan_error(&[("attention.key_length", Some(MetaValue::U32(512)))]);
    assert_out_of_bounds(&err, "llama.attention.key_length", 512);
    // Derived (d_model / heads) rather than stated: refused all the same.
    let err = plan_error(&[
        ("embedding_length", Some(MetaValue::U32(2048))),
        ("attention.head_count", Some(MetaValue::U32(4))),
    ]);
    assert_out_of_bounds(&err, "llama.attention.key_length", 512);
    // Within 256 but not whole vec4s.
    let err = plan_error(&[("attention.key_length", Some(MetaValue::U32(18)))]);
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("key_length 18")),
        "{err}"
    );
}

#[test]
fn zero_heads_are_refused() {
    let err = plan_error(&[("attention.head_count", Some(MetaValue::U32(0)))]);
    assert_out_of_bounds(&err, "llama.attention.head_count", 0);
    let err = plan_error(&[("attention.head_count_kv", Some(MetaValue::U32(0)))]);
    assert_out_of_bounds(&err, "llama.attention.head_count_kv", 0);
}

#[test]
fn heads_that_do_not_divide_are_refused() {
    let err = plan_error(&[("attention.head_count_kv", Some(MetaValue::U32(3)))]);
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("4 query heads") && m.contains("3 key/value")),
        "{err}"
    );
}

#[test]
fn other_unrunnable_shapes_are_refused_by_name() {
    let err = plan_error(&[("attention.value_length", Some(MetaValue::U32(32)))]);
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("value_length 32")),
        "{err}"
    );
    let err = plan_error(&[("rope.dimension_count", Some(MetaValue::U32(15)))]);
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("dimension_count 15")),
        "{err}"
    );
    let err = plan_error(&[("rope.dimension_count", Some(MetaValue::U32(32)))]);
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("dimension_count 32")),
        "{err}"
    );
    // A missing count is the parser's typed error, naming the key.
    let err = plan_error(&[("block_count", None)]);
    assert!(err.to_string().contains("llama.block_count"), "{err}");
}

#[test]
fn a_config_built_elsewhere_is_checked_the_same() {
    let mut cfg = Plan::for_file(&header(&[])).unwrap().config;
    check(&cfg).unwrap();
    cfg.n_layers = usize::MAX;
    let err = check(&cfg).unwrap_err();
    assert_out_of_bounds(&err, "llama.block_count", usize::MAX as u64);
}

/// Row and position counts are the caller's: their products are refused as
/// buffers over the limit, never wrapped to a small allocation.
#[test]
fn buffer_size_products_are_checked() {
    use crate::model::activations::f32_bytes;
    use crate::pipeline::kv_cache::KvCache;
    use crate::testutil::ctx;
    let ctx = ctx();
    assert_eq!(f32_bytes(ctx, "x", &[3, 5]).unwrap(), 60);
    let err = f32_bytes(ctx, "x", &[usize::MAX / 2, 3]).unwrap_err();
    assert!(
        matches!(err, crate::gpu::GpuError::BufferTooLarge { .. }),
        "{err}"
    );
    let cfg = Plan::for_file(&header(&[])).unwrap().config;
    for (ctx_len, dtype) in [
        (usize::MAX, KvDtype::F32),
        (usize::MAX / 64, KvDtype::F16),
        (1 << 40, KvDtype::F16),
    ] {
        let err = KvCache::new(ctx, &cfg, ctx_len, dtype)
            .err()
            .expect("refused");
        assert!(
            matches!(&err, crate::gpu::GpuError::BufferTooLarge { label, .. } if label == "k cache"),
            "{ctx_len}: {err}"
        );
    }
    let f32_fits = KvCache::max_ctx_len(ctx, &cfg, KvDtype::F32);
    assert!(f32_fits > 1000);
    assert!(KvCache::max_ctx_len(ctx, &cfg, KvDtype::F16) >= 2 * f32_fits);
}
