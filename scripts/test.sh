#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, the whole workspace's tests
# in release (CPU references are ~100x slower in debug) on lavapipe, a minute
# of fuzzing, and the browser tests (wasm build, npm package, headless
# Chromium on SwiftShader).
#
# Ordered for a 2-core machine: the model files download while the code is
# checked and compiled (network beside CPU), then the native tests and the
# browser tests run side by side. Each of those leaves a core idle much of
# the time (single-threaded stretches of the software GPUs, browser and model
# start-up, readbacks), so together they take far less than one after the
# other. Their lines are prefixed [native] and [web]; either failing fails
# the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh --no-models
models_log="$(mktemp)"
scripts/fetch-models.sh all >"$models_log" 2>&1 &
fetch=$!
. scripts/env.sh

cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release --no-run
if ! wait "$fetch"; then
  cat "$models_log" >&2
  echo "test.sh: fetching the models failed" >&2
  exit 1
fi
cat "$models_log"
rm -f "$models_log"

# A minute of fuzzing (crates/fuzz) after the native tests: no panic or
# oversized allocation on malformed model files, tokenizers or chat templates.
( { cargo test --workspace --release && scripts/fuzz.sh 60; } 2>&1 | sed -u 's/^/[native] /' ) &
native=$!
( scripts/test-web.sh 2>&1 | sed -u 's/^/[web] /' ) &
web=$!
failed=()
wait "$native" || failed+=(native)
wait "$web" || failed+=(web)
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all passed"
