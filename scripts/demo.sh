#!/usr/bin/env bash
# Builds everything for the browser demo, fetches the default model
# (SmolLM2-135M), serves the repository on localhost and prints the demo's URL.
# usage: scripts/demo.sh [PORT]   (default 8080; Ctrl-C stops the server)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
port="${1:-8080}"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)"
[ "$have" = "$want" ] || cargo install wasm-bindgen-cli --version "$want"
[ -x node_modules/.bin/wasm-opt ] || npm ci --no-audit --no-fund
npm run build
scripts/fetch-models.sh smollm2

model="/models/SmolLM2-135M-Instruct.Q4_1.gguf"
echo
echo "wick demo: http://127.0.0.1:$port/web/demo/?model=$model"
echo "wick bench: http://127.0.0.1:$port/web/demo/bench.html (benchmarks the GPU, reports JSON)"
echo "(open it in a browser with WebGPU: Chrome/Edge 113+; Ctrl-C stops the server)"
echo
exec node web/tools/serve.mjs --port "$port"
