//! Embeddings against a reference's vectors: each of unit length, with the
//! reference's token count, and a cosine similarity of at least 0.999 (the
//! issue's bar; wick's f32 math lands within 1e-12 of f64 references); and
//! one reference against another (`agree`), e.g. an f64 reference against
//! llama.cpp's vectors.

use wick::embedding::{EmbedOptions, Embedder, Embedding};

/// One reference input: its text, token ids and vector.
#[derive(Clone, Copy)]
pub struct Expected<'a> {
    pub text: &'a str,
    pub ids: &'a [u32],
    pub vector: &'a [f32],
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// The smallest cosine over the inputs, failing below 0.999; `dim` is the
/// model's embedding size.
pub fn check(got: &[Embedding], want: &[Expected], dim: usize, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: count");
    let mut min = 1.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.vector.len(), dim, "{what}: dim");
        assert_eq!(g.tokens, w.ids.len(), "{what}: input {i} tokens");
        let norm = g
            .vector
            .iter()
            .map(|&x| x as f64 * x as f64)
            .sum::<f64>()
            .sqrt();
        assert!(
            (norm - 1.0).abs() < 1e-5,
            "{what}: input {i} is not unit length ({norm})"
        );
        let c = cosine(&g.vector, w.vector);
        assert!(c >= 0.999, "{what}: input {i} ({:?}): cosine {c}", w.text);
        min = min.min(c);
    }
    eprintln!("{what}: min cosine {min:.9} (1 - min = {:.2e})", 1.0 - min);
    min
}

/// Checks `embedder` on the reference's texts: their token ids, then each
/// embedding (`check`) all in one call (padded batches of similar lengths)
/// and some one input at a time (every fifth and the longest: a single run
/// costs as much as its share of the batch, and these cover the shortest,
/// the longest and lengths between), and that padding does not leak into a
/// sequence's rows (those batch rows equal the single runs up to f32
/// rounding, far below what a masked key or row would change). Returns the
/// batch's vectors, in the inputs' order.
pub fn check_reference(embedder: &Embedder, want: &[Expected], dim: usize) -> Vec<Embedding> {
    let texts: Vec<&str> = want.iter().map(|w| w.text).collect();
    assert_eq!(texts.len(), 16, "the references hold 16 inputs");
    let ids = embedder.tokenize(&texts, EmbedOptions::default()).unwrap();
    for (i, (got, w)) in ids.iter().zip(want).enumerate() {
        assert_eq!(got, w.ids, "input {i} ({:?}): token ids", w.text);
    }
    let batch = pollster::block_on(embedder.embed(&texts, EmbedOptions::default())).unwrap();
    check(&batch, want, dim, "batch of 16");
    let longest = (0..ids.len()).max_by_key(|&i| ids[i].len()).unwrap();
    let mut alone: Vec<usize> = (0..texts.len()).step_by(5).collect();
    if !alone.contains(&longest) {
        alone.push(longest);
    }
    let single: Vec<Embedding> = alone
        .iter()
        .flat_map(|&i| {
            pollster::block_on(embedder.embed(&[texts[i]], EmbedOptions::default())).unwrap()
        })
        .collect();
    let single_want: Vec<Expected> = alone.iter().map(|&i| want[i]).collect();
    check(&single, &single_want, dim, "one at a time");
    for (&i, a) in alone.iter().zip(&single) {
        let c = cosine(&a.vector, &batch[i].vector);
        assert!(c > 0.999_999, "input {i}: batch vs alone cosine {c}");
    }
    batch
}

/// The smallest cosine between two references' vectors for the same texts
/// (a reference checked against another), failing below 0.999 or if their
/// texts or token ids differ.
pub fn agree(a: &[Expected], b: &[Expected], what: &str) -> f64 {
    assert_eq!(a.len(), b.len(), "{what}: count");
    let mut min = 1.0f64;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.text, y.text, "{what}: input {i} text");
        assert_eq!(x.ids, y.ids, "{what}: input {i} ({:?}): token ids", x.text);
        let c = cosine(x.vector, y.vector);
        assert!(c >= 0.999, "{what}: input {i} ({:?}): cosine {c}", x.text);
        min = min.min(c);
    }
    eprintln!("{what}: min cosine {min:.9} (1 - min = {:.2e})", 1.0 - min);
    min
}

/// A sentence-transformers folder under the models directory (`name`), one
/// `model.safetensors`: the encoder with its pooling, Dense modules (if any)
/// and `sentence_bert_config.json`, as `modules.json` lists them.
pub fn load_sentence_folder(name: &str) -> Embedder {
    use wick::embedding::{dense_paths, pooling_path, DenseFiles, EmbedFiles, SentenceFiles};
    let dir = crate::model_path(name);
    let read = |file: &str| std::fs::read(dir.join(file)).unwrap();
    let modules = read("modules.json");
    let pooling = pooling_path(&modules)
        .unwrap()
        .map(|sub| read(&format!("{sub}/config.json")));
    let dense: Vec<(Vec<u8>, Vec<u8>)> = dense_paths(&modules)
        .unwrap()
        .iter()
        .map(|sub| {
            (
                read(&format!("{sub}/config.json")),
                read(&format!("{sub}/model.safetensors")),
            )
        })
        .collect();
    let dense: Vec<DenseFiles> = dense
        .iter()
        .map(|(config, safetensors)| DenseFiles {
            config,
            safetensors,
        })
        .collect();
    let (config, tokenizer, weights, sentence_bert) = (
        read("config.json"),
        read("tokenizer.json"),
        read("model.safetensors"),
        read("sentence_bert_config.json"),
    );
    let files = EmbedFiles {
        config: &config,
        tokenizer: &tokenizer,
        shards: &[&weights],
        index: None,
        sentence: SentenceFiles {
            modules: Some(&modules),
            pooling: pooling.as_deref(),
            dense: &dense,
            sentence_bert: Some(&sentence_bert),
        },
    };
    Embedder::load_hf(crate::gpu(), &files).unwrap()
}

/// One input of a sentence-transformers reference file
/// (`tests/fixtures/embed/*_reference.json`): text, ids and embedding.
#[derive(serde::Deserialize)]
pub struct ReferenceInput {
    pub text: String,
    pub ids: Vec<u32>,
    pub embedding: Vec<f32>,
}

impl ReferenceInput {
    /// The input as `check` takes it.
    pub fn expected(&self) -> Expected<'_> {
        Expected {
            text: &self.text,
            ids: &self.ids,
            vector: &self.embedding,
        }
    }
}

/// A reference file under `tests/fixtures/embed/`, parsed.
pub fn read_reference<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = crate::workspace_root()
        .join("tests/fixtures/embed")
        .join(file);
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
