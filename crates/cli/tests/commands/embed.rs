//! `wick embed` as a user runs it: OpenAI's embeddings response with
//! `--json`, one vector a line without, and inputs it cannot take refused
//! with one error line naming them.

use crate::common;
use common::{stderr, wick, wick_json};

fn minilm() -> String {
    let path = wick_tests::model_path("all-MiniLM-L6-v2");
    path.to_str().unwrap().to_string()
}

#[test]
fn embed_json_is_openais_embeddings_response() {
    let m = minilm();
    let file = std::env::temp_dir().join(format!("wick-embed-{}.txt", std::process::id()));
    std::fs::write(&file, "from a file\nsecond line\n").unwrap();
    let out = wick(&[
        "embed",
        "--model",
        &m,
        "--text",
        "Hi",
        "--text",
        "I love my dog",
        "--file",
        file.to_str().unwrap(),
        "--json",
    ]);
    std::fs::remove_file(&file).ok();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "all-MiniLM-L6-v2");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 4);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["object"], "embedding");
        assert_eq!(d["index"], i);
        let e: Vec<f64> = d["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(e.len(), 384);
        let norm = e.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "input {i}: norm {norm}");
    }
    // [CLS] hi [SEP] (3), [CLS] i love my dog [SEP] (6), [CLS] from a file [SEP] (5), [CLS] second line [SEP] (4).
    assert_eq!(
        v["usage"],
        serde_json::json!({ "prompt_tokens": 18, "total_tokens": 18 })
    );
}

#[test]
fn embed_text_prints_one_vector_a_line() {
    let out = wick(&[
        "embed",
        "--model",
        &minilm(),
        "--text",
        "a",
        "--text",
        "b c",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    for line in lines {
        let values: Vec<f32> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), 384);
    }
}

#[test]
fn embed_refuses_too_long_inputs_naming_them_unless_asked_to_truncate() {
    let m = minilm();
    let long = "word ".repeat(300);
    let out = wick(&["embed", "--model", &m, "--text", "fine", "--text", &long]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("input 1 is 302 tokens") && err.contains("at most 256"),
        "{err}"
    );
    let v = wick_json(&[
        "embed",
        "--model",
        &m,
        "--text",
        &long,
        "--truncate",
        "--json",
    ]);
    assert_eq!(v["usage"]["prompt_tokens"], 256);
}

#[test]
fn embed_bad_invocations_are_one_error_line() {
    for (args, needle) in [
        (
            vec!["embed", "--model", "no/such/folder", "--text", "x"],
            "is neither a GGUF file nor a folder",
        ),
        (vec!["embed", "--model", "."], "nothing to embed"),
    ] {
        let out = wick(&args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            !err.contains("panicked") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

/// A sharded checkpoint (`model.safetensors.index.json` and its shards)
/// loads as its one-file form does: MiniLM's tensors split over two files
/// give the same vectors, printed digit for digit (each tensor's bytes are
/// the same, so any difference would be a tensor read from the wrong place).
#[test]
fn embed_reads_a_sharded_checkpoint_as_its_one_file_form() {
    let dir = std::env::temp_dir().join(format!("wick-embed-sharded-{}", std::process::id()));
    wick_tests::reshard::reshard_folder(std::path::Path::new(&minilm()), &dir, 2);
    assert!(dir.join("model-00002-of-00002.safetensors").is_file());
    assert!(!dir.join("model.safetensors").exists());
    let run = |model: &str| {
        let args = [
            "embed",
            "--model",
            model,
            "--text",
            "a sharded model",
            "--text",
            "b",
        ];
        let out = wick(&args);
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        out.stdout
    };
    let sharded = run(dir.to_str().unwrap());
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        String::from_utf8(sharded).unwrap(),
        String::from_utf8(run(&minilm())).unwrap()
    );
}

#[test]
fn embed_runs_embeddinggemma_with_its_dense_modules() {
    // The folder's two Dense modules (768 -> 3072 -> 768) come from the
    // subfolders modules.json names; the vectors equal sentence-transformers'
    // (tests/fixtures/embed/embeddinggemma_reference.json, inputs 0 and 1)
    // to the embedding tests' bar.
    let path = wick_tests::model_path("embeddinggemma-300m");
    let reference: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            wick_tests::workspace_root().join("tests/fixtures/embed/embeddinggemma_reference.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let want = &reference["inputs"].as_array().unwrap()[..2];
    let mut args = vec!["embed", "--model", path.to_str().unwrap(), "--json"];
    for w in want {
        args.extend(["--text", w["text"].as_str().unwrap()]);
    }
    let v = wick_json(&args);
    assert_eq!(v["model"], "embeddinggemma-300m");
    let vector = |x: &serde_json::Value| -> Vec<f64> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let mut tokens = 0;
    for (i, (d, w)) in v["data"].as_array().unwrap().iter().zip(want).enumerate() {
        let (got, expected) = (vector(&d["embedding"]), vector(&w["embedding"]));
        assert_eq!(got.len(), 768, "input {i}");
        // Both are unit vectors: the dot product is the cosine.
        let cosine: f64 = got.iter().zip(&expected).map(|(a, b)| a * b).sum();
        assert!(cosine >= 0.999, "input {i}: cosine {cosine}");
        tokens += w["ids"].as_array().unwrap().len();
    }
    assert_eq!(v["usage"]["prompt_tokens"], tokens);
}
