//! nomic-embed-text-v1.5 (nomic-bert, GGUF F16) against an independent f64
//! forward pass in numpy (tests/fixtures/embed/nomic_reference.json, made by
//! the script beside it): the WordPiece ids exactly, and each embedding to a
//! cosine similarity of at least 0.999, one input at a time and all 16 in one
//! padded batch; the batch also equals the single inputs.
//!
//! The model file is fetched by scripts/fetch-models.sh (`nomic`, in `all`,
//! which CI runs); a missing file fails the test, as for the other models.

use serde::Deserialize;
use wick::embedding::{EmbedOptions, Embedder};
use wick_tests::embed_check::{self, cosine, Expected};
use wick_tests::{gpu, model_path, workspace_root};

const FILE: &str = "nomic-embed-text-v1.5.f16.gguf";

#[derive(Deserialize)]
struct Reference {
    inputs: Vec<RefInput>,
}

#[derive(Deserialize)]
struct RefInput {
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

/// The reference as `embed_check` takes it.
fn expected(want: &[RefInput]) -> Vec<Expected<'_>> {
    want.iter()
        .map(|w| Expected {
            text: &w.text,
            ids: &w.ids,
            vector: &w.vector,
        })
        .collect()
}

#[test]
fn nomic_matches_the_f64_reference_one_at_a_time_and_batched() {
    let path = model_path(FILE);
    let bytes = std::fs::read(&path).unwrap();
    let embedder = Embedder::load_gguf(gpu(), &bytes).unwrap();
    assert_eq!((embedder.dim(), embedder.max_tokens()), (768, 2048));
    let reference: Reference = serde_json::from_slice(
        &std::fs::read(workspace_root().join("tests/fixtures/embed/nomic_reference.json")).unwrap(),
    )
    .unwrap();
    let single = embed_check::check_reference(&embedder, &expected(&reference.inputs), 768);
    // The task prefix changes the vector (the user adds it; wick does not).
    let bare =
        pollster::block_on(embedder.embed(&["What is TSNE?"], EmbedOptions::default())).unwrap();
    assert!(cosine(&bare[0].vector, &single[0].vector) < 0.99);
}
