//! nomic-embed-text-v1.5 (nomic-bert, GGUF F16) against an independent f64
//! forward pass in numpy (tests/fixtures/embed/nomic_reference.json, made by
//! the script beside it): the WordPiece ids exactly, and each embedding to a
//! cosine similarity of at least 0.999, one input at a time and all 16 in one
//! padded batch; the batch also equals the single inputs.
//!
//! The model file is fetched by scripts/fetch-models.sh (`nomic`, in `all`,
//! which CI runs); without it the test says so and passes.

use std::path::PathBuf;

use serde::Deserialize;
use wick::embedding::{EmbedOptions, Embedder, Embedding};
use wick_tests::{gpu, workspace_root};

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

fn model() -> Option<PathBuf> {
    let dir = std::env::var_os("WICK_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("models"));
    let path = dir.join(FILE);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: {} is absent (scripts/fetch-models.sh nomic fetches it)",
            path.display()
        );
        None
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// The smallest cosine over the inputs, failing below 0.999.
fn check(got: &[Embedding], want: &[RefInput], what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: count");
    let mut min = 1.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.vector.len(), 768, "{what}: dim");
        assert_eq!(g.tokens, w.ids.len(), "{what}: input {i} tokens");
        let norm: f64 = g
            .vector
            .iter()
            .map(|&x| x as f64 * x as f64)
            .sum::<f64>()
            .sqrt();
        assert!(
            (norm - 1.0).abs() < 1e-5,
            "{what}: input {i} is not unit length ({norm})"
        );
        let c = cosine(&g.vector, &w.vector);
        assert!(c >= 0.999, "{what}: input {i} ({:?}): cosine {c}", w.text);
        min = min.min(c);
    }
    eprintln!("{what}: min cosine {min:.9} (1 - min = {:.2e})", 1.0 - min);
    min
}

#[test]
fn nomic_matches_the_f64_reference_one_at_a_time_and_batched() {
    let Some(path) = model() else { return };
    let bytes = std::fs::read(&path).unwrap();
    let embedder = Embedder::load_gguf(gpu(), &bytes).unwrap();
    assert_eq!((embedder.dim(), embedder.max_tokens()), (768, 2048));
    let reference: Reference = serde_json::from_slice(
        &std::fs::read(workspace_root().join("tests/fixtures/embed/nomic_reference.json")).unwrap(),
    )
    .unwrap();
    let texts: Vec<&str> = reference.inputs.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts.len(), 16);
    let ids = embedder.tokenize(&texts, EmbedOptions::default()).unwrap();
    for (i, (got, r)) in ids.iter().zip(&reference.inputs).enumerate() {
        assert_eq!(got, &r.ids, "input {i} ({:?}): token ids", r.text);
    }
    let mut single = Vec::new();
    for t in &texts {
        single.extend(pollster::block_on(embedder.embed(&[t], EmbedOptions::default())).unwrap());
    }
    check(&single, &reference.inputs, "batch of 1");
    let batch = pollster::block_on(embedder.embed(&texts, EmbedOptions::default())).unwrap();
    check(&batch, &reference.inputs, "batch of 16");
    // Padding must not leak into a sequence's rows (rotary positions
    // restart per sequence; masked keys stay masked).
    for (i, (a, b)) in single.iter().zip(&batch).enumerate() {
        let c = cosine(&a.vector, &b.vector);
        assert!(c > 0.999_999, "input {i}: batch vs alone cosine {c}");
    }
    // The task prefix changes the vector (the user adds it; wick does not).
    let bare =
        pollster::block_on(embedder.embed(&["What is TSNE?"], EmbedOptions::default())).unwrap();
    assert!(cosine(&bare[0].vector, &single[0].vector) < 0.99);
}
