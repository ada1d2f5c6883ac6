//! Split models (llama.cpp's `gguf-split` shards): `wick split` and
//! `wick bench --write-gguf --split-max-size` write them, every command that
//! takes a model loads one by its first shard, and a shard missing from the
//! folder is named.

use std::path::{Path, PathBuf};

use crate::common;
use common::{fails_with, wick, wick_json};

fn tiny() -> PathBuf {
    wick_tests::model_path("tiny-qwen3.q8_0.gguf")
}

/// A fresh folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wick-cli-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Greedy ids of a few tokens after fixed ids.
fn greedy(model: &Path) -> serde_json::Value {
    let v = wick_json(&[
        "generate",
        "--model",
        s(model),
        "--ids",
        "785,6722,315",
        "--max-tokens",
        "4",
        "--temperature",
        "0",
        "--json",
        "--no-warmup",
    ]);
    v["ids"].clone()
}

#[test]
fn a_split_model_runs_from_its_first_shard_as_the_unsplit_file() {
    let dir = scratch("split");
    // 400 kB: the embedding alone in the first shard, the layers in two more.
    let out = wick_json_lines(&[
        "split",
        s(&tiny()),
        s(&dir.join("tiny.gguf")),
        "--split-max-size",
        "400K",
    ]);
    let first = dir.join("tiny-00001-of-00003.gguf");
    assert_eq!(
        out,
        (1..=3)
            .map(|i| s(&dir.join(format!("tiny-0000{i}-of-00003.gguf"))).to_owned())
            .collect::<Vec<_>>()
    );
    let info = wick_json(&["info", "--json", "--model", s(&first)]);
    let whole = wick_json(&["info", "--json", "--model", s(&tiny())]);
    assert_eq!(info["model"]["shards"], 3, "{info}");
    assert_eq!(whole["model"]["shards"], 1, "{whole}");
    assert_eq!(info["model"]["tensors"], whole["model"]["tensors"]);
    assert_eq!(greedy(&first), greedy(&tiny()));
    // A later shard given, and a shard missing from the folder.
    fails_with(
        &[
            "logits",
            "--model",
            s(&dir.join("tiny-00002-of-00003.gguf")),
            "--ids",
            "1",
        ],
        "is shard 2 of 3 of a split model: give the first shard",
    );
    std::fs::remove_file(dir.join("tiny-00003-of-00003.gguf")).unwrap();
    fails_with(
        &["generate", "--model", s(&first), "--ids", "1"],
        "shard 3 of 3 of the split model is missing: '",
    );
    fails_with(
        &["info", "--model", s(&first)],
        "tiny-00003-of-00003.gguf' not found",
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// stdout's lines of a successful run.
fn wick_json_lines(args: &[&str]) -> Vec<String> {
    let out = wick(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `--split-max-size` writes the synthetic model as `wick split` cuts the
/// same model written whole. (The bench itself is refused by a tiny memory
/// budget once the files are written: what is tested here is the writing.)
#[test]
fn bench_write_gguf_with_split_max_size_writes_shards() {
    let dir = scratch("bench-split");
    let bench = |path: &Path, split: Option<&str>| {
        let mut args = vec![
            "bench",
            "--synthetic",
            "smollm2-135m",
            "--quant",
            "q4_0",
            "--write-gguf",
            s(path),
            "--memory-budget",
            "0.001",
        ];
        if let Some(size) = split {
            args.extend_from_slice(&["--split-max-size", size]);
        }
        fails_with(&args, "the model does not fit");
    };
    bench(&dir.join("whole.gguf"), None);
    bench(&dir.join("parts.gguf"), Some("30M"));
    wick_json_lines(&[
        "split",
        s(&dir.join("whole.gguf")),
        s(&dir.join("cut")),
        "--split-max-size",
        "30M",
    ]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let parts: Vec<&String> = names.iter().filter(|n| n.starts_with("parts-")).collect();
    assert!(parts.len() >= 2, "{names:?}");
    for p in &parts {
        let cut = dir.join(p.replacen("parts-", "cut-", 1));
        let a = std::fs::read(dir.join(p)).unwrap();
        let b = std::fs::read(&cut).unwrap();
        assert!(a == b, "{p} differs from {}", cut.display());
    }
    let first = dir.join(parts[0]);
    let info = wick_json(&["info", "--json", "--model", s(&first)]);
    assert_eq!(info["model"]["shards"], parts.len(), "{info}");
    fails_with(
        &[
            "split",
            s(&dir.join("whole.gguf")),
            s(&dir.join("z")),
            "--split-max-size",
            "3X",
        ],
        "unit must be K, M or G",
    );
    std::fs::remove_dir_all(&dir).ok();
}
