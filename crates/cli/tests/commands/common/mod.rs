//! What the CLI's test binaries share: the real model they run and the
//! `wick` binary itself. (Each test binary uses a part of it.)
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// SmolLM2, as `scripts/fetch-models.sh` puts it (a missing file fails).
pub fn smollm2() -> PathBuf {
    wick_tests::model_path("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// `wick args...`, its output captured.
pub fn wick(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wick"))
        .args(args)
        .output()
        .expect("run wick")
}

/// `wick args...`, which must succeed, its stdout parsed as JSON.
pub fn wick_json(args: &[&str]) -> serde_json::Value {
    let out = wick(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `wick args...` fails with one error line holding `needle`, not a panic.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = wick(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
}
