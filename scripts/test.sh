#!/usr/bin/env bash
# Runs every check and test: formatting, clippy, the whole workspace's tests
# in release (CPU references are ~100x slower in debug) on lavapipe, a minute
# of fuzzing, and the browser tests (wasm build, npm package, headless
# Chromium on SwiftShader).
#
# Ordered for a 2-core machine: the model files download while everything
# is installed and compiled (network beside CPU); then the native tests and
# the browser tests run side by side. On a fresh machine (as CI is) Mesa's
# shader cache is empty, and much of the native part is llvmpipe compiling
# kernels on one thread; beside it the browser tests slowed by about a
# tenth (npm test 2130 s against 1931 alone). An earlier reading that side
# by side slowed the unit tests tenfold compared a cold cache with a warm
# one. Each phase prints the minutes since the start, so a slow run shows
# where the time went. The native lines are prefixed [native], the
# browser's [web]; either part failing fails the run, and both always run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
started=$SECONDS
phase() { echo "test.sh: [$(((SECONDS - started) / 60)) min] $*"; }

phase "installing"
scripts/setup.sh --no-models
models_log="$(mktemp)"
scripts/fetch-models.sh all >"$models_log" 2>&1 &
fetch=$!
. scripts/env.sh

phase "formatting, clippy, building the native tests"
cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release --no-run
phase "installing and building for the browser tests"
scripts/test-web.sh --prepare 2>&1 | sed -u 's/^/[web] /'
if ! wait "$fetch"; then
  cat "$models_log" >&2
  echo "test.sh: fetching the models failed" >&2
  exit 1
fi
cat "$models_log"
rm -f "$models_log"

# A minute of fuzzing (crates/fuzz) after the native tests: no panic or
# oversized allocation on malformed model files, tokenizers or chat templates.
# Each part's lines are also kept, so that a failure's own lines can be
# printed again at the end, where a reader of a long CI log looks first.
logs="$(mktemp -d)"
failed=()
phase "native and browser tests, side by side"
( { cargo test --workspace --release && scripts/fuzz.sh 60; } 2>&1 | sed -u 's/^/[native] /' | tee "$logs/native" ) &
native=$!
( scripts/test-web.sh --tests 2>&1 | sed -u 's/^/[web] /' | tee "$logs/web" ) &
web=$!
wait "$native" || failed+=(native)
phase "native tests ended"
wait "$web" || failed+=(web)
phase "done"

# What failed in one part: cargo's "failures:" sections, node's "not ok"
# entries with their TAP details; the part's last lines when neither shows
# (a build, an install or the fuzzer failed). awk bounds its own output:
# a `head` after it would end it with SIGPIPE, which pipefail and set -e
# would turn into an exit before the summary.
failure_lines() {
  local log="$logs/$1" found
  found="$(awk '
    /\] failures:$/ { show = 1 }
    /\] test result: FAILED/ { print; show = 0 }
    /\] *not ok / { show = 2 }
    show && shown++ < 300 { print }
    show == 2 && /\] *\.\.\.$/ { show = 0 }
  ' "$log")"
  if [ -n "$found" ]; then echo "$found"; else tail -40 "$log"; fi
}

if [ ${#failed[@]} -gt 0 ]; then
  for part in "${failed[@]}"; do
    echo "test.sh: what failed in $part:" >&2
    failure_lines "$part" >&2
  done
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
rm -rf "$logs"
echo "test.sh: all passed"
