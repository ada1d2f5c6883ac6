#!/usr/bin/env bash
# The browser part of the tests: installs what it needs idempotently
# (Debian's chromium and firefox-esr, the wasm32 target, the wasm-bindgen CLI at the version
# in Cargo.lock, the npm dev dependencies, the SmolLM2, Gemma 3, Qwen2.5 0.5B and 1.5B and
# all-MiniLM-L6-v2 models), builds the native CLI (the tests compare with its
# output), the checkpoint fixtures' writer and the npm package, then
# runs the browser tests in headless Chromium on SwiftShader and the core
# path in headless Firefox ESR on lavapipe (web/test/firefox.test.mjs,
# driven by puppeteer-core over WebDriver BiDi), and the packed package in a
# Vite 6 and a webpack 5 app (web/test/bundlers/).
# Screenshots and metrics land in test-output/.
#
# usage: scripts/test-web.sh [--prepare | --tests | --big]
#   --prepare  only install and build (scripts/test.sh does this while the
#              models download, before the native tests)
#   --tests    only fetch the models (if missing) and run the tests
#   --big      only the opt-in 8B test (web/test/big-model.test.mjs, not part
#              of the suite: about half an hour on 2 cores, ~10 GB of disk
#              and ~6 GB of memory; after a build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
prepare=1
tests=1
big=0
case "${1:-}" in
  --prepare) tests=0 ;;
  --tests) prepare=0 ;;
  --big)
    prepare=0
    tests=0
    big=1
    ;;
  "") ;;
  *)
    echo "usage: scripts/test-web.sh [--prepare | --tests | --big]" >&2
    exit 2
    ;;
esac

# Installs and builds everything the tests use.
prepare() {
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  browsers=()
  command -v chromium >/dev/null 2>&1 || browsers+=(chromium)
  command -v firefox-esr >/dev/null 2>&1 || browsers+=(firefox-esr)
  if [ ${#browsers[@]} -gt 0 ]; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${browsers[@]}" >/dev/null
  fi
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
  fi

  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
  fi

  want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
  have="$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)"
  if [ "$have" != "$want" ]; then
    # Not --locked: a pinned dependency of it is gone from the registry.
    # opt-level 1: it runs once a build over one module, and its dependencies
    # (walrus, wasmparser) compile in about half the time of opt-level 3.
    # --force: cargo may still record a CLI whose binary is gone.
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --force wasm-bindgen-cli --version "$want"
  fi

  npm ci --no-audit --no-fund
  # The bundler tests' apps (Vite 6, webpack 5), each from its pinned lockfile.
  for app in web/test/bundlers/vite-app web/test/bundlers/webpack-app; do
    (cd "$app" && npm ci --no-audit --no-fund)
  done
  . scripts/env.sh
  # The native CLI (the tests compare with its output) and the Hugging Face
  # checkpoint fixtures' writer (web/test/harness.mjs, hfFixture).
  # scripts/test.sh sets WICK_NATIVE_BUILT: its `cargo test --no-run` has
  # built both, with the features of the whole workspace's tests, and a
  # build of these packages alone would build the engine twice more.
  if [ -z "${WICK_NATIVE_BUILT:-}" ]; then
    cargo build --release -q -p wick-cli
    cargo build --release -q -p wick-tests --bin write_hf_fixture
  fi
  npm run build
}

run_tests() {
  # scripts/test.sh has fetched and checked every model already.
  if [ -z "${WICK_MODELS_FETCHED:-}" ]; then
    scripts/setup.sh smollm2 gemma3 qwen2 qwen15 minilm
  fi
  . scripts/env.sh
  npm test
  npm run test:bundlers
}

if [ "$prepare" = 1 ]; then prepare; fi
if [ "$tests" = 1 ]; then run_tests; fi
if [ "$big" = 1 ]; then
  . scripts/env.sh
  [ -x target/release/wick ] || cargo build --release -q -p wick-cli
  [ -f web/pkg/wick_web_bg.wasm ] || npm run build
  WICK_BIG_MODEL=1 node --test --test-reporter=spec web/test/big-model.test.mjs
fi
