//! The tiny models' tokenizer, both ways: GGUF `tokenizer.ggml.*` metadata
//! and the Hugging Face `tokenizer.json` + `tokenizer_config.json` of the
//! same vocabulary.

use serde_json::json;
use wick::format::MetaValue;

/// Tokens in the vocabulary (and rows of the models' embeddings).
pub const VOCAB: usize = 272;

/// Byte-level BPE: the 256 byte tokens, three merges (h e, l l, he ll), an
/// end-of-text control token, fillers up to the vocabulary size.
fn vocab() -> Vec<String> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut shifted = 0;
    let mut tokens: Vec<String> = (0..256u32)
        .map(|b| {
            let c = if printable(b) {
                b
            } else {
                shifted += 1;
                255 + shifted
            };
            char::from_u32(c).unwrap().to_string()
        })
        .collect();
    tokens.extend(["he", "ll", "hell", EOS].map(String::from));
    tokens.extend((tokens.len()..VOCAB).map(|i| format!("<filler_{i}>")));
    tokens
}

const EOS: &str = "<|endoftext|>";
const MERGES: [&str; 3] = ["h e", "l l", "he ll"];
pub const EOS_ID: u32 = 259;
pub const CHAT_TEMPLATE: &str =
    "{% for m in messages %}{{ m['content'] }}{{ eos_token }}{% endfor %}";

pub fn tokenizer_metadata() -> Vec<(String, MetaValue)> {
    let s = |v: &str| MetaValue::String(v.into());
    let tokens = vocab();
    let types = (0..tokens.len()).map(|i| MetaValue::I32(if i as u32 == EOS_ID { 3 } else { 1 }));
    vec![
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s("gpt-2")),
        (
            "tokenizer.ggml.tokens".into(),
            MetaValue::Array(tokens.iter().map(|t| s(t)).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            MetaValue::Array(types.collect()),
        ),
        (
            "tokenizer.ggml.merges".into(),
            MetaValue::Array(MERGES.iter().map(|m| s(m)).collect()),
        ),
        ("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(EOS_ID)),
        (
            "tokenizer.ggml.add_bos_token".into(),
            MetaValue::Bool(false),
        ),
        ("tokenizer.chat_template".into(), s(CHAT_TEMPLATE)),
    ]
}

/// `tokenizer.json` of the same vocabulary.
pub fn tokenizer_json() -> Vec<u8> {
    let tokens = vocab();
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as u32 != EOS_ID)
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    serde_json::to_vec(&json!({
        "version": "1.0",
        "added_tokens": [{"id": EOS_ID, "content": EOS, "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": MERGES}
    }))
    .unwrap()
}

/// `tokenizer_config.json`: EOS, no BOS, the chat template.
pub fn tokenizer_config_json() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "add_bos_token": false,
        "add_eos_token": false,
        "bos_token": null,
        "eos_token": {"content": EOS, "special": true},
        "chat_template": CHAT_TEMPLATE,
    }))
    .unwrap()
}
