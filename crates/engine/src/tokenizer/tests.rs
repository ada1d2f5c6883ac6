//! Tokenizers from small vocabularies built in memory: SentencePiece merge
//! order, byte fallback, the leading-space rule, and typed errors. The real
//! vocabularies are tested against llama.cpp in tests/tokenizer_golden.rs.

use super::{Tokenizer, TokenizerError};
use crate::format::gguf::{GgufFile, MetaValue};
use crate::format::gguf_write::GgufWriter;

fn strings(xs: &[&str]) -> MetaValue {
    MetaValue::Array(
        xs.iter()
            .map(|s| MetaValue::String(s.to_string()))
            .collect(),
    )
}

fn from_meta(meta: Vec<(&str, MetaValue)>) -> Result<Tokenizer, TokenizerError> {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w = w.meta(k, v);
    }
    Tokenizer::from_gguf(&GgufFile::parse(&w.to_bytes()).unwrap())
}

/// A SentencePiece-style vocab: byte tokens, pieces with scores.
fn tiny_spm(extra: Vec<(&str, MetaValue)>) -> Result<Tokenizer, TokenizerError> {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let pieces = ["▁", "a", "b", "c", "ab", "bc", "▁a", "▁ab", "é"];
    let first_piece = tokens.len();
    tokens.extend(pieces.iter().map(|s| s.to_string()));
    types.extend([1; 9]);
    // The highest score merges first: "bc" (-1) before "ab" (-2), though "ab" is to its left.
    let piece_scores = [-5.0, -9.0, -9.0, -9.0, -2.0, -1.0, -4.0, -6.0, -9.0];
    let mut scores = vec![0.0f32; first_piece];
    scores.extend(piece_scores);
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut meta = vec![
        ("tokenizer.ggml.model", MetaValue::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(&token_refs)),
        (
            "tokenizer.ggml.scores",
            MetaValue::Array(scores.into_iter().map(MetaValue::F32).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            MetaValue::Array(types.into_iter().map(MetaValue::I32).collect()),
        ),
    ];
    meta.extend(extra);
    from_meta(meta)
}

#[test]
fn sentencepiece_merges_by_score_with_byte_fallback() {
    let tok = tiny_spm(vec![]).unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    assert_eq!(
        (tok.bos_id(), tok.eos_id(), tok.add_bos()),
        (Some(1), Some(2), true)
    );
    // "abc" → "▁abc" (a space in front): b+c, then ▁+a; no "▁abc" or "abc".
    assert_eq!(
        tok.encode("abc", true, false).unwrap(),
        vec![1, id("▁a"), id("bc")]
    );
    // "x" has no piece: byte fallback.
    assert_eq!(
        tok.encode("x", false, false).unwrap(),
        vec![id("▁"), id("<0x78>")]
    );
    let ids = tok.encode("ab x", false, false).unwrap();
    assert_eq!(ids, vec![id("▁ab"), id("▁"), id("<0x78>")]);
    assert_eq!(tok.decode(&ids, true).unwrap(), "ab x");
    // No space prefix when the metadata turns it off.
    let tok = tiny_spm(vec![(
        "tokenizer.ggml.add_space_prefix",
        MetaValue::Bool(false),
    )])
    .unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    assert_eq!(
        tok.encode("abc", false, false).unwrap(),
        vec![id("a"), id("bc")]
    );
    assert_eq!(
        tok.encode("ab c", false, false).unwrap(),
        vec![id("ab"), id("▁"), id("c")]
    );
    assert_eq!(
        tok.decode(&tok.encode(" abc", false, false).unwrap(), false)
            .unwrap(),
        " abc"
    );
}

#[test]
fn typed_errors_for_bad_metadata() {
    let err = from_meta(vec![(
        "tokenizer.ggml.model",
        MetaValue::String("wordpiece9".into()),
    )])
    .unwrap_err();
    assert!(
        matches!(&err, TokenizerError::UnsupportedModel(m) if m == "wordpiece9"),
        "{err}"
    );

    let gpt2 = |pre: &str| {
        vec![
            ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
            ("tokenizer.ggml.pre", MetaValue::String(pre.into())),
            ("tokenizer.ggml.tokens", strings(&["a", "b", "ab"])),
            ("tokenizer.ggml.merges", strings(&["a b"])),
        ]
    };
    let err = from_meta(gpt2("no-such-pre")).unwrap_err();
    assert!(
        matches!(&err, TokenizerError::UnsupportedPreTokenizer(p) if p == "no-such-pre"),
        "{err}"
    );
    assert!(err.to_string().contains("no-such-pre"));

    let ok = from_meta(gpt2("qwen2")).unwrap();
    assert_eq!(ok.encode("ab", false, false).unwrap(), vec![2]);

    let mut no_tokens = gpt2("qwen2");
    no_tokens.retain(|(k, _)| *k != "tokenizer.ggml.tokens");
    let err = from_meta(no_tokens).unwrap_err();
    assert!(
        matches!(&err, TokenizerError::MissingMetadata(k) if k == "tokenizer.ggml.tokens"),
        "{err}"
    );

    let mut no_merges = gpt2("qwen2");
    no_merges.retain(|(k, _)| *k != "tokenizer.ggml.merges");
    assert!(matches!(
        from_meta(no_merges).unwrap_err(),
        TokenizerError::MissingMetadata(_)
    ));

    let err = from_meta(vec![]).unwrap_err();
    assert!(
        matches!(&err, TokenizerError::MissingMetadata(k) if k == "tokenizer.ggml.model"),
        "{err}"
    );

    let mut bad_types = gpt2("qwen2");
    bad_types.push((
        "tokenizer.ggml.token_type",
        MetaValue::Array(vec![MetaValue::I32(1)]),
    ));
    assert!(matches!(
        from_meta(bad_types).unwrap_err(),
        TokenizerError::BadMetadata { .. }
    ));

    let mut bos_missing = gpt2("qwen2");
    bos_missing.push(("tokenizer.ggml.add_bos_token", MetaValue::Bool(true)));
    assert!(matches!(
        from_meta(bos_missing).unwrap_err(),
        TokenizerError::MissingMetadata(_)
    ));

    assert!(matches!(
        ok.decode(&[3], false),
        Err(TokenizerError::TokenOutOfRange { id: 3, vocab: 3 })
    ));
}

#[test]
fn tokenizer_json_errors_are_typed() {
    assert!(matches!(
        Tokenizer::from_tokenizer_json(b"{not json"),
        Err(TokenizerError::Json(_))
    ));
    assert!(matches!(
        Tokenizer::from_tokenizer_json(b"[1, 2]"),
        Err(TokenizerError::Json(_))
    ));
    let wordpiece = br#"{"model": {"type": "WordPiece", "vocab": {"a": 0}}}"#;
    assert!(matches!(
        Tokenizer::from_tokenizer_json(wordpiece),
        Err(TokenizerError::UnsupportedModel(_))
    ));
}

/// Found by fuzzing (crates/fuzz/regressions/tokenizer_json): an id of
/// 2^32 - 1 sized the token table at 2^32 entries (128 GiB).
#[test]
fn tokenizer_json_ids_past_the_table_are_refused() {
    let model_id = br#"{"model":{"type":"BPE","vocab":{"a":0,"b":4294967295},"merges":[]}}"#;
    let added_id = br#"{"added_tokens":[{"id":4294967295,"content":"<x>","special":true}],
        "model":{"type":"BPE","vocab":{"a":0},"merges":[]}}"#;
    for json in [&model_id[..], &added_id[..]] {
        match Tokenizer::from_tokenizer_json(json) {
            Err(TokenizerError::Json(msg)) => assert!(msg.contains("4294967295"), "{msg}"),
            other => panic!("expected a Json error, got {other:?}"),
        }
    }
    // The largest id the table allows still loads: vocabulary + added tokens.
    let last = br#"{"added_tokens":[{"id":2,"content":"<x>","special":true}],
        "model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[]}}"#;
    assert_eq!(
        Tokenizer::from_tokenizer_json(last).unwrap().vocab_size(),
        3
    );
}

/// Found by fuzzing: the tokenizers crate panics building a BPE model with a
/// merge whose join is longer than every token, or whose second part is
/// shorter than the continuing-subword prefix; both are refused first.
#[test]
fn tokenizer_json_merges_the_tokenizers_crate_panics_on_are_refused() {
    let join_missing = br#"{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]}}"#;
    let no_prefix = br###"{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},
        "merges":[["a","b"]],"continuing_subword_prefix":"##"}}"###;
    for (json, needle) in [
        (&join_missing[..], "not in the vocabulary"),
        (&no_prefix[..], "continuing_subword_prefix"),
    ] {
        match Tokenizer::from_tokenizer_json(json) {
            Err(TokenizerError::Json(msg)) => assert!(msg.contains(needle), "{msg}"),
            other => panic!("expected a Json error, got {other:?}"),
        }
    }
    let prefixed = br###"{"model":{"type":"BPE","vocab":{"a":0,"##b":1,"ab":2},
        "merges":["a ##b"],"continuing_subword_prefix":"##"}}"###;
    assert!(Tokenizer::from_tokenizer_json(prefixed).is_ok());
}

#[test]
fn streaming_drops_the_added_space_like_decode() {
    use super::StreamDecoder;
    let tok = tiny_spm(vec![]).unwrap();
    let ids = tok.encode("ab é x", true, false).unwrap();
    assert_eq!(tok.decode(&ids, true).unwrap(), "ab é x");
    // Shown, BOS is the first piece: the added space stays (as in llama.cpp).
    assert_eq!(tok.decode(&ids, false).unwrap(), "<s> ab é x");
    for skip in [true, false] {
        let mut s = StreamDecoder::new(&tok, skip);
        let mut out: String = ids.iter().map(|&id| s.push(id).unwrap()).collect();
        out.push_str(&s.finish().unwrap());
        assert_eq!(out, tok.decode(&ids, skip).unwrap());
    }
}

/// A SentencePiece-style tokenizer.json: spaces → ▁ by the normalizer, BPE
/// with byte fallback, `<bos>` from the post-processor template.
const SPM_JSON: &str = r#"{
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<bos>", "special": true},
    {"id": 2, "content": "<eos>", "special": true},
    {"id": 3, "content": "<think>", "special": false}
  ],
  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1], "tokens": ["<bos>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
    "vocab": {"<unk>": 0, "<bos>": 1, "<eos>": 2, "<think>": 3, "<0x78>": 4, "▁": 5, "h": 6, "i": 7, "hi": 8, "▁hi": 9},
    "merges": ["h i", "▁ hi"]}
}"#;

#[test]
fn sentencepiece_tokenizer_json() {
    let tok = Tokenizer::from_tokenizer_json(SPM_JSON.as_bytes()).unwrap();
    assert_eq!(
        (tok.bos_id(), tok.eos_id(), tok.add_bos()),
        (Some(1), Some(2), true)
    );
    assert_eq!(tok.vocab_size(), 10);
    // x has no piece: its byte token. <think> is user-defined: always matched.
    let ids = tok.encode("hi <think>x hi", true, false).unwrap();
    assert_eq!(ids, [1, 8, 5, 3, 4, 9]);
    assert_eq!(tok.decode(&ids, true).unwrap(), "hi <think>x hi");
    // <eos> is special: text unless parsed.
    assert_eq!(tok.encode("<eos>", false, true).unwrap(), [2]);
    assert_ne!(tok.encode("<eos>", false, false).unwrap(), [2]);
    assert!(tok.stop_ids().contains(&2));
}
