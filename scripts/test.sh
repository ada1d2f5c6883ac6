#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, the whole workspace's tests
# in release (CPU references are ~100x slower in debug) on lavapipe, a minute
# of fuzzing, then the browser tests (wasm build, npm package, headless
# Chromium on SwiftShader).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh all
. scripts/env.sh

cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release
# A minute of fuzzing (crates/fuzz): no panic or oversized allocation on
# malformed model files, tokenizers or chat templates.
scripts/fuzz.sh 60
scripts/test-web.sh
