//! nomic-embed-text-v1.5 (nomic-bert, GGUF F16) against an independent f64
//! forward pass in numpy (tests/fixtures/embed/nomic_reference.json, made by
//! the script beside it): the WordPiece ids exactly, and each embedding to a
//! cosine similarity of at least 0.999, all 16 in one call (padded batches of
//! similar lengths) and some one at a time, which equal their batch rows.
//!
//! Both wick and that reference are also held to llama.cpp's embedding mode
//! (nomic_llamacpp.json, made by make_nomic_llamacpp.sh with the prebuilt
//! CPU llama.cpp of node-llama-cpp 3.21.1): the same token ids, and a cosine
//! of at least 0.999 per input. When recorded, the numpy reference agreed
//! with llama.cpp to 1 - cosine <= 5e-7 on every input.
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

/// A reference file of tests/fixtures/embed/.
fn load(name: &str) -> Reference {
    let path = workspace_root().join("tests/fixtures/embed").join(name);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn nomic_matches_the_f64_reference_and_llama_cpp() {
    let path = model_path(FILE);
    let bytes = std::fs::read(&path).unwrap();
    let embedder = Embedder::load_gguf(gpu(), &bytes).unwrap();
    assert_eq!((embedder.dim(), embedder.max_tokens()), (768, 2048));
    let reference = load("nomic_reference.json");
    let llamacpp = load("nomic_llamacpp.json");
    // The reference itself against llama.cpp, then wick against both, all at
    // the bar (0.999). All three use the GGUF's F16 weights as they
    // are; llama.cpp computes in f32 (partly f16) and was within
    // 1 - cosine <= 5e-7 of the f64 reference on every input when recorded.
    embed_check::agree(
        &expected(&reference.inputs),
        &expected(&llamacpp.inputs),
        "numpy f64 reference vs llama.cpp",
    );
    let batch = embed_check::check_reference(&embedder, &expected(&reference.inputs), 768);
    embed_check::check(
        &batch,
        &expected(&llamacpp.inputs),
        768,
        "wick vs llama.cpp",
    );
    // The task prefix changes the vector (the user adds it; wick does not).
    let bare =
        pollster::block_on(embedder.embed(&["What is TSNE?"], EmbedOptions::default())).unwrap();
    assert!(cosine(&bare[0].vector, &batch[0].vector) < 0.99);
}
