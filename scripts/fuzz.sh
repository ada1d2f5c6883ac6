#!/usr/bin/env bash
# Fuzzes wick's CPU-side load path (GGUF header -> config and bounds ->
# tensor checks -> plan), its tokenizer builders (GGUF metadata,
# tokenizer.json), its chat-template renderer and its Hugging Face folder
# path (config.json parsers, safetensors header, streaming to GGUF) for
# SECONDS in total, split evenly over the targets (crates/fuzz). Seeds come
# from the GGUF files and model folders in $WICK_MODELS_DIR (default
# models/), tests/fixtures/models and ../shared/models, the tests' tiny
# checkpoints, plus crates/fuzz/seeds. Exits non-zero on any panic, any allocation over the
# harness's bound, or an execution that hangs; failing inputs, minimized,
# land in target/fuzz-findings (keep each in crates/fuzz/regressions/<target>/
# once fixed).
#
# usage: scripts/fuzz.sh [SECONDS] [extra wick-fuzz arguments, e.g. --seed 7]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds="${1:-60}"
shift || true

# scripts/test.sh sets WICK_NATIVE_BUILT: its `cargo test --no-run` has built
# the binary, with the whole workspace's features; a build of this package
# alone would build the engine and its dependencies again.
if [ -z "${WICK_NATIVE_BUILT:-}" ] || [ ! -x target/release/wick-fuzz ]; then
  cargo build --release -p wick-fuzz
fi
models=()
for dir in "${WICK_MODELS_DIR:-$root/models}" "$root/tests/fixtures/models" "$root/../shared/models"; do
  if [ -d "$dir" ]; then models+=(--models "$dir"); fi
done
exec target/release/wick-fuzz --seconds "$seconds" --findings "$root/target/fuzz-findings" \
  "${models[@]}" "$@"
