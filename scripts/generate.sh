#!/usr/bin/env bash
# The main job: fetch the default model (SmolLM2-135M), build wick, generate.
# usage: scripts/generate.sh [PROMPT] [extra `wick generate` options...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh smollm2
. scripts/env.sh
prompt="${1:-The capital of France is}"
[ $# -gt 0 ] && shift
cargo build --release -q -p wick-cli
# 48 tokens unless the extra options say how many.
case " $* " in
  *" --max-tokens"*) defaults=() ;;
  *) defaults=(--max-tokens 48) ;;
esac
exec target/release/wick generate --model "${WICK_MODELS_DIR:-$root/models}/SmolLM2-135M-Instruct.Q4_1.gguf" \
  --prompt "$prompt" "${defaults[@]}" "$@"
