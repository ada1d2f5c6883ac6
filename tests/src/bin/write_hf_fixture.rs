//! Writes the browser tests' Hugging Face checkpoints (web/test/hf.test.mjs):
//! tiny models (`wick_tests::hf_checkpoint`), each as a GGUF file and as the
//! checkpoint folder its tensors make, so the page can load both and
//! compare, and the native CLI can run the same folder.
//!
//! usage: write_hf_fixture OUT_DIR [MINILM_DIR]
//!
//! OUT_DIR/llama-f32.gguf, OUT_DIR/llama-f32/ (one model.safetensors),
//! OUT_DIR/qwen2-f16.gguf, OUT_DIR/qwen2-f16/ (two shards and the index),
//! and with MINILM_DIR (all-MiniLM-L6-v2's folder)
//! OUT_DIR/all-MiniLM-L6-v2-sharded/: its weights in two shards.

use std::path::Path;

use wick_tests::hf_checkpoint::{
    shard_name, tokenizer_config_json, tokenizer_json, Storage, TinyModel,
};
use wick_tests::reshard::reshard_folder;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// `name.gguf` and the folder `name/`, its safetensors in `shards` files.
fn model(out: &Path, name: &str, arch: &'static str, storage: Storage, shards: usize) {
    let model = TinyModel::new(arch);
    let gguf = model.gguf(storage);
    write(&out.join(format!("{name}.gguf")), &gguf);
    let dir = out.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let (files, index) = model.safetensors(&gguf, storage, shards);
    if let Some(index) = index {
        write(&dir.join("model.safetensors.index.json"), &index);
        for (i, bytes) in files.iter().enumerate() {
            write(&dir.join(shard_name(i, shards)), bytes);
        }
    } else {
        write(&dir.join("model.safetensors"), &files[0]);
    }
    write(&dir.join("config.json"), &model.config_json());
    write(&dir.join("tokenizer.json"), &tokenizer_json());
    write(&dir.join("tokenizer_config.json"), &tokenizer_config_json());
}

fn main() {
    let Some(out) = std::env::args_os().nth(1) else {
        eprintln!("usage: write_hf_fixture OUT_DIR [MINILM_DIR]");
        std::process::exit(2);
    };
    let out = Path::new(&out);
    std::fs::create_dir_all(out).unwrap();
    model(out, "llama-f32", "llama", Storage::F32, 1);
    model(out, "qwen2-f16", "qwen2", Storage::F16, 2);
    if let Some(minilm) = std::env::args_os().nth(2) {
        let to = out.join("all-MiniLM-L6-v2-sharded");
        reshard_folder(Path::new(&minilm), &to, 2);
    }
}
