//! all-MiniLM-L6-v2 (BERT, sentence-transformers) against sentence-transformers'
//! own embeddings (tests/fixtures/embed/minilm_reference.json, made by the
//! script beside it): the tokenizer's ids exactly, and each embedding to a
//! cosine similarity of at least 0.999, all 16 in one call (padded batches of
//! similar lengths) and some one at a time, which equal their batch rows.

use serde::Deserialize;
use wick::embedding::EmbedOptions;
use wick_tests::embed_check::{self, ReferenceInput};

#[derive(Deserialize)]
struct Reference {
    inputs: Vec<ReferenceInput>,
}

#[test]
fn minilm_matches_sentence_transformers_one_at_a_time_and_batched() {
    let embedder = embed_check::load_sentence_folder("all-MiniLM-L6-v2");
    let reference: Reference = embed_check::read_reference("minilm_reference.json");
    let want: Vec<_> = reference
        .inputs
        .iter()
        .map(ReferenceInput::expected)
        .collect();
    embed_check::check_reference(&embedder, &want, 384);
}

#[test]
fn inputs_past_the_limit_are_refused_naming_them_or_truncated_on_request() {
    let embedder = embed_check::load_sentence_folder("all-MiniLM-L6-v2");
    assert_eq!(
        embedder.max_tokens(),
        256,
        "sentence_bert_config.json's max_seq_length"
    );
    let long = "word ".repeat(300);
    let err =
        pollster::block_on(embedder.embed(&["short", &long], EmbedOptions::default())).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("input 1 is 302 tokens") && msg.contains("at most 256"),
        "{msg}"
    );
    let cut =
        pollster::block_on(embedder.embed(&[&long], EmbedOptions { truncate: true })).unwrap();
    assert_eq!(cut[0].tokens, 256);
    let empty: [&str; 0] = [];
    assert!(pollster::block_on(embedder.embed(&empty, EmbedOptions::default())).is_err());
}
