//! Safetensors headers, shard indexes and Hugging Face configs: what parses,
//! and that every malformed input is a typed error naming the tensor or
//! field, decided before any tensor byte is read. (Loading whole checkpoints
//! is `tests/tests/end_to_end/hf_layout.rs`.)

use wick::error::WickError;
use wick::format::quant::GgmlType;
use wick::format::safetensors::Dtype;
use wick::format::{SafetensorsError, SafetensorsHeader, ShardIndex};
use wick::hf_folder::with_hf_names;
use wick::model::hf::{HfCheckpoint, HfOptions};
use wick::model::ModelError;

/// A file of `json` as its header and `data_len` zero bytes of data.
fn file(json: &str, data_len: usize) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out.resize(out.len() + data_len, 0);
    out
}

fn parse_err(json: &str) -> SafetensorsError {
    SafetensorsHeader::parse(&file(json, 0)).unwrap_err()
}

#[test]
fn header_parses_in_file_order_with_absolute_ranges() {
    let json = r#"{"__metadata__": {"format": "pt"},
        "b": {"dtype": "F16", "shape": [2, 3], "data_offsets": [16, 28]},
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "c": {"dtype": "BF16", "shape": [], "data_offsets": [28, 30]}}"#;
    let bytes = file(json, 30);
    let h = SafetensorsHeader::parse(&bytes).unwrap();
    let base = 8 + json.len() as u64;
    assert_eq!(h.data_offset, base);
    let names: Vec<_> = h.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let b = h.tensor("b").unwrap();
    assert_eq!((b.dtype, b.shape.clone()), (Dtype::F16, vec![2, 3]));
    assert_eq!((b.start, b.end), (base + 16, base + 28));
    assert_eq!(h.file_len(), bytes.len() as u64);
    h.check_file_len(bytes.len() as u64).unwrap();
    assert_eq!(
        h.check_file_len(bytes.len() as u64 - 1),
        Err(SafetensorsError::OutOfBounds {
            tensor: "c".into(),
            start: base + 28,
            end: base + 30,
            file_len: bytes.len() as u64 - 1,
        })
    );
}

#[test]
fn a_prefix_asks_for_the_rest_of_the_header() {
    let bytes = file(
        r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}"#,
        4,
    );
    let need = |n: u64| Err(SafetensorsError::NeedMoreHeader { needed_at_least: n });
    assert_eq!(SafetensorsHeader::parse(&bytes[..5]).map(|_| ()), need(8));
    let header_end = bytes.len() as u64 - 4;
    assert_eq!(
        SafetensorsHeader::parse(&bytes[..20]).map(|_| ()),
        need(header_end)
    );
    assert!(SafetensorsHeader::parse(&bytes[..header_end as usize]).is_ok());
    let mut huge = bytes.clone();
    huge[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(
        SafetensorsHeader::parse(&huge).map(|_| ()),
        Err(SafetensorsError::HeaderTooLarge(1 << 40))
    );
}

#[test]
fn malformed_entries_name_their_tensor() {
    assert!(matches!(
        parse_err("[1, 2]"),
        SafetensorsError::BadHeader(_)
    ));
    assert!(matches!(
        parse_err("{not json"),
        SafetensorsError::BadHeader(_)
    ));
    let dup = r#"{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                  "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}"#;
    assert_eq!(
        parse_err(dup),
        SafetensorsError::DuplicateTensor("w".into())
    );
    for (json, why) in [
        (
            r#"{"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}"#,
            "F99",
        ),
        (
            r#"{"w": {"dtype": "F32", "data_offsets": [0, 4]}}"#,
            "shape",
        ),
        (
            r#"{"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}"#,
            "end before",
        ),
        (
            r#"{"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}"#,
            "overflows",
        ),
    ] {
        match parse_err(json) {
            SafetensorsError::BadTensor { tensor, reason } => {
                assert_eq!(tensor, "w");
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("{json}: {other:?}"),
        }
    }
    assert_eq!(
        parse_err(r#"{"w": {"dtype": "F16", "shape": [3, 2], "data_offsets": [0, 8]}}"#),
        SafetensorsError::SizeMismatch {
            tensor: "w".into(),
            dtype: Dtype::F16,
            shape: vec![3, 2],
            expected: 12,
            found: 8,
        }
    );
    let overlap = r#"{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}"#;
    assert_eq!(
        parse_err(overlap),
        SafetensorsError::Overlap {
            first: "a".into(),
            second: "b".into()
        }
    );
}

fn shard(names: &[&str]) -> SafetensorsHeader {
    let entries: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                r#""{n}": {{"dtype": "F32", "shape": [1], "data_offsets": [{}, {}]}}"#,
                4 * i,
                4 * i + 4
            )
        })
        .collect();
    SafetensorsHeader::parse(&file(
        &format!("{{{}}}", entries.join(",")),
        4 * names.len(),
    ))
    .unwrap()
}

#[test]
fn shard_index_is_checked_against_the_shards() {
    let json = br#"{"metadata": {"total_size": 12}, "weight_map": {
        "a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
        "c": "model-00001-of-00002.safetensors"}}"#;
    let index = ShardIndex::parse(json).unwrap();
    assert_eq!(
        index.shards,
        [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors"
        ]
    );
    index.check(&[shard(&["b", "c"]), shard(&["a"])]).unwrap();
    let bad = |headers: &[SafetensorsHeader], want: &str| match index.check(headers) {
        Err(SafetensorsError::BadIndex(msg)) => assert!(msg.contains(want), "{msg}"),
        other => panic!("{other:?}"),
    };
    bad(
        &[shard(&["b"]), shard(&["a"])],
        "`c` is listed under model-00001",
    );
    bad(
        &[shard(&["b", "c", "d"]), shard(&["a"])],
        "`d` of model-00001",
    );
    bad(
        &[shard(&["a", "c"]), shard(&["b"])],
        "`a` is in model-00001",
    );
    bad(&[shard(&["b", "c"])], "2 shards listed, 1 headers");
    for json in [
        r#"{"weight_map": {"a": "../escape.safetensors"}}"#,
        r#"{"weight_map": {"a": 3}}"#,
        r#"{"weight_map": {}}"#,
        r#"{"metadata": {}}"#,
    ] {
        assert!(matches!(
            ShardIndex::parse(json.as_bytes()),
            Err(SafetensorsError::BadIndex(_))
        ));
    }
}

const LLAMA: &str = r#"{"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
    "tie_word_embeddings": true, "rope_scaling": null}"#;

fn plan(
    config: &str,
    tensors: &[(&str, &str, &[u64])],
    opts: &HfOptions,
) -> Result<HfCheckpoint, ModelError> {
    let mut at = 0;
    let entries: Vec<String> = tensors
        .iter()
        .map(|(name, dtype, shape)| {
            let bits = match *dtype {
                "F32" | "I32" => 32,
                _ => 16,
            };
            let len = shape.iter().product::<u64>() * bits / 8;
            at += len;
            format!(r#""{name}": {{"dtype": "{dtype}", "shape": {shape:?}, "data_offsets": [{}, {at}]}}"#, at - len)
        })
        .collect();
    let json = format!("{{{}}}", entries.join(","));
    let header = SafetensorsHeader::parse(&file(&json, at as usize)).unwrap();
    HfCheckpoint::new(config.as_bytes(), &[header], None, opts)
}

#[test]
fn checkpoints_wick_cannot_run_are_refused_by_name() {
    let none = HfOptions::default();
    let embed = ("model.embed_tokens.weight", "F32", &[272u64, 64][..]);
    plan(LLAMA, &[embed], &none).unwrap();
    let err = |config: &str, tensors: &[(&str, &str, &[u64])], opts: &HfOptions| {
        plan(config, tensors, opts).unwrap_err().to_string()
    };
    let msg = err(
        LLAMA,
        &[embed, ("model.layers.0.mlp.extra.weight", "F32", &[4])],
        &none,
    );
    assert!(msg.contains("model.layers.0.mlp.extra.weight"), "{msg}");
    let msg = err(
        LLAMA,
        &[
            embed,
            ("model.layers.1.input_layernorm.weight", "F32", &[64]),
        ],
        &none,
    );
    assert!(msg.contains("past num_hidden_layers 1"), "{msg}");
    let msg = err(
        LLAMA,
        &[("model.embed_tokens.weight", "I32", &[272, 64])],
        &none,
    );
    assert!(
        msg.contains("model.embed_tokens.weight") && msg.contains("I32"),
        "{msg}"
    );
    let untied = LLAMA.replace(
        r#""tie_word_embeddings": true"#,
        r#""tie_word_embeddings": false"#,
    );
    assert!(err(&untied, &[embed], &none).contains("lm_head.weight"));
    let scaled = LLAMA.replace(
        r#""rope_scaling": null"#,
        r#""rope_scaling": {"rope_type": "llama3"}"#,
    );
    assert!(err(&scaled, &[embed], &none).contains("`rope_scaling`"));
    let bert = LLAMA.replace(r#""llama""#, r#""bert""#);
    assert!(matches!(
        plan(&bert, &[embed], &none),
        Err(ModelError::UnsupportedArchitecture(_))
    ));
    let no_heads = LLAMA.replace(r#""num_attention_heads": 4,"#, "");
    assert!(err(&no_heads, &[embed], &none).contains("`num_attention_heads` is missing"));
    let q8 = HfOptions {
        quantize: Some(GgmlType::Q8_0),
    };
    plan(LLAMA, &[embed], &q8).unwrap();
    let msg = err(
        LLAMA,
        &[("model.embed_tokens.weight", "F32", &[272, 48])],
        &q8,
    );
    assert!(msg.contains("rows of 48"), "{msg}");
    let q4 = HfOptions {
        quantize: Some(GgmlType::Q4_0),
    };
    assert!(err(LLAMA, &[embed], &q4).contains("only q8_0"));
}

/// `rope.freq_base` of the metadata `config.json` becomes.
fn rope_base(config: &str) -> Result<f32, ModelError> {
    let cfg = wick::model::hf::config::parse(config.as_bytes())?;
    let key = format!("{}.rope.freq_base", cfg.architecture);
    let (_, v) = cfg.metadata.iter().find(|(k, _)| *k == key).unwrap();
    Ok(v.as_f32().unwrap())
}

#[test]
fn rope_base_comes_from_either_spelling_and_scaling_is_refused() {
    assert_eq!(rope_base(LLAMA).unwrap(), 10_000.0);
    let old = LLAMA.replace(r#""rope_scaling": null"#, r#""rope_theta": 100000.0"#);
    assert_eq!(rope_base(&old).unwrap(), 100_000.0);
    let new = LLAMA.replace(
        r#""rope_scaling": null"#,
        r#""rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}"#,
    );
    assert_eq!(rope_base(&new).unwrap(), 500_000.0);
    let scaled = new.replace(r#""default""#, r#""llama3""#);
    assert!(rope_base(&scaled)
        .unwrap_err()
        .to_string()
        .contains("rope_type"));
    let gemma = r#"{"model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048,
        "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "sliding_window": 512, "_sliding_window_pattern": 6, "use_bidirectional_attention": false}"#;
    assert_eq!(rope_base(gemma).unwrap(), 1e6);
    let local = gemma.replace("10000.0", "20000.0");
    assert!(rope_base(&local)
        .unwrap_err()
        .to_string()
        .contains("sliding layers"));
    let encoder = gemma.replace(
        r#""use_bidirectional_attention": false"#,
        r#""use_bidirectional_attention": true"#,
    );
    assert!(rope_base(&encoder)
        .unwrap_err()
        .to_string()
        .contains("bidirectional"));
    let pattern = gemma.replace(
        r#""_sliding_window_pattern": 6"#,
        r#""_sliding_window_pattern": 4"#,
    );
    assert!(rope_base(&pattern)
        .unwrap_err()
        .to_string()
        .contains("_sliding_window_pattern"));
}

#[test]
fn load_errors_name_the_checkpoints_tensors() {
    let e = with_hf_names(
        ModelError::MissingTensor("blk.1.ffn_up.weight".into()).into(),
        "llama",
    );
    assert!(
        matches!(e, WickError::Model(ModelError::MissingTensor(n)) if n == "model.layers.1.mlp.up_proj.weight")
    );
    let e = ModelError::TensorShape {
        name: "blk.0.ffn_norm.weight".into(),
        expected: vec![64],
        found: vec![32, 2],
    };
    match with_hf_names(e.into(), "gemma3") {
        WickError::Model(ModelError::TensorShape { name, found, .. }) => {
            assert_eq!(name, "model.layers.0.pre_feedforward_layernorm.weight");
            assert_eq!(found, [2, 32]);
        }
        other => panic!("{other:?}"),
    }
}
