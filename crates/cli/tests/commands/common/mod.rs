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
    wick_command().args(args).output().expect("run wick")
}

/// The `wick` binary, run as the tests run it: each run is a new process
/// that compiles its kernels on lavapipe, mostly for a few tokens, so
/// llvmpipe skips LLVM's optimization passes (`GALLIVM_PERF=nopt`, as the
/// engine's unit tests do): the same WGSL runs, compiled in about half the
/// time. A caller's own setting is kept.
pub fn wick_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wick"));
    if std::env::var_os("GALLIVM_PERF").is_none() {
        command.env("GALLIVM_PERF", "nopt");
    }
    command
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
