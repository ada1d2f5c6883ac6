//! `--model DIR`: a Hugging Face checkpoint folder runs as the GGUF file of
//! the same weights does, and a folder that is not a checkpoint is one clear
//! error line.

use std::path::{Path, PathBuf};

use wick_tests::hf_checkpoint::{tokenizer_config_json, tokenizer_json, Storage, TinyModel};

use crate::common;
use common::{fails_with, wick, wick_json};

/// A fresh folder under the system's temp dir, named for the test.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wick-cli-hf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The tiny Llama as `model.gguf` and as the checkpoint in `hf/` (sharded in two).
fn write_model(dir: &Path) -> (PathBuf, PathBuf) {
    let model = TinyModel::new("llama");
    let gguf = model.gguf(Storage::F16);
    let gguf_path = dir.join("model.gguf");
    std::fs::write(&gguf_path, &gguf).unwrap();
    let hf = dir.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    let (shards, index) = model.safetensors(&gguf, Storage::F16, 2);
    for (i, bytes) in shards.iter().enumerate() {
        std::fs::write(
            hf.join(format!("model-{:05}-of-00002.safetensors", i + 1)),
            bytes,
        )
        .unwrap();
    }
    std::fs::write(hf.join("model.safetensors.index.json"), index.unwrap()).unwrap();
    std::fs::write(hf.join("config.json"), model.config_json()).unwrap();
    std::fs::write(hf.join("tokenizer.json"), tokenizer_json()).unwrap();
    std::fs::write(hf.join("tokenizer_config.json"), tokenizer_config_json()).unwrap();
    (gguf_path, hf)
}

#[test]
fn a_checkpoint_folder_runs_as_its_gguf_file() {
    let dir = fresh_dir("runs");
    let (gguf, hf) = write_model(&dir);
    let logits = |m: &Path| {
        let args = [
            "logits",
            "--model",
            m.to_str().unwrap(),
            "--ids",
            "3,104,259,257,30",
            "--last",
            "3",
            "--json",
        ];
        wick_json(&args)["positions"].clone()
    };
    let want = logits(&gguf);
    assert_eq!(want.as_array().map(Vec::len), Some(3), "{want}");
    assert_eq!(logits(&hf), want);
    let ids = wick_json(&[
        "tokenize",
        "--model",
        hf.to_str().unwrap(),
        "--text",
        "hello",
        "--json",
    ]);
    assert_eq!(ids["ids"], serde_json::json!([258, 111]));
    let q8 = wick(&[
        "logits",
        "--model",
        hf.to_str().unwrap(),
        "--ids",
        "3,104",
        "--quantize",
        "q8_0",
        "--json",
    ]);
    assert!(
        q8.status.success(),
        "{}",
        String::from_utf8_lossy(&q8.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_folder_that_is_not_a_checkpoint_is_a_clear_error() {
    let dir = fresh_dir("bad");
    let (gguf, hf) = write_model(&dir);
    let q8_gguf = [
        "logits",
        "--model",
        gguf.to_str().unwrap(),
        "--ids",
        "3",
        "--quantize",
        "q8_0",
    ];
    fails_with(&q8_gguf, "applies to Hugging Face folders");
    std::fs::remove_file(hf.join("model-00002-of-00002.safetensors")).unwrap();
    fails_with(
        &["logits", "--model", hf.to_str().unwrap(), "--ids", "3"],
        "model-00002-of-00002.safetensors",
    );
    std::fs::remove_file(hf.join("model.safetensors.index.json")).unwrap();
    fails_with(
        &["logits", "--model", hf.to_str().unwrap(), "--ids", "3"],
        "has neither model.safetensors",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
