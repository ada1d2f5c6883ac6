#!/usr/bin/env bash
# Runs the tests. Two tiers:
#
#   scripts/test.sh           the whole suite, as CI runs it: formatting, the
#                             import graph (scripts/imports.py),
#                             clippy, every native test in release on
#                             lavapipe, a minute of fuzzing, and the browser
#                             tests (wasm build, npm package, headless
#                             Chromium on SwiftShader and Firefox on lavapipe,
#                             the bundler apps)
#   scripts/test.sh --quick   the inner loop: formatting, the unit tests, the
#                             tiny fixtures and SmolLM2 (the one small real
#                             model), native only, no browser and no fuzzing
#
# Ordered for a 2-core machine: the model files download while everything
# is installed and compiled (network beside CPU); then the native unit
# tests, the native integration tests (the encoders' apart) and the browser
# tests run side by side. Each phase prints the minutes since the start; the
# parts' lines are prefixed [unit], [integration], [encoders] and [web]; any
# part failing fails the run,
# and all always run. At the end it
# prints each phase's time and the slowest tests of each part (native from
# libtest's --report-time, through scripts/report-time.sh; browser from
# web/test/timings-reporter.mjs), so every log shows where the time went.
#
# Mesa keeps lavapipe's compiled kernels in its shader cache on disk
# (~/.cache/mesa_shader_cache, or MESA_SHADER_CACHE_DIR), so a kernel that
# one test binary compiled is not compiled again by the next, nor by the
# next run. To time the suite as a fresh machine runs it, point
# MESA_SHADER_CACHE_DIR at an empty folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *)
    echo "usage: scripts/test.sh [--quick]" >&2
    exit 2
    ;;
esac

started=$SECONDS
phase_names=()
phase_starts=()
phase() {
  echo "test.sh: [$(((SECONDS - started) / 60)) min] $*"
  phase_names+=("$*")
  phase_starts+=("$SECONDS")
}
out="$root/test-output/timings"
mkdir -p "$out"
rm -f "$out/native.log" "$out/web.tsv"
export WICK_TEST_TIMINGS="$out/web.tsv"
runner="$root/scripts/report-time.sh"
test_cmd=(cargo test --workspace --release --config "target.'cfg(all())'.runner = '$runner'")

# The timings of every phase, then the slowest tests: printed last, where a
# reader of a long CI log looks first.
report() {
  local i n=${#phase_names[@]} end
  echo "test.sh: time by phase"
  for ((i = 0; i < n; i++)); do
    end=$([ $((i + 1)) -lt "$n" ] && echo "${phase_starts[$((i + 1))]}" || echo "$SECONDS")
    printf '  %6d s  %s\n' $((end - phase_starts[i])) "${phase_names[$i]}"
  done
  [ -n "${unit_seconds:-}" ] && printf '  %6d s    the unit and doc tests%s\n' "$unit_seconds" "$([ "$quick" = 1 ] || echo ', fuzzing')"
  [ -n "${integration_seconds:-}" ] && printf '  %6d s    the integration tests, beside them\n' "$integration_seconds"
  [ -n "${encoders_seconds:-}" ] && printf '  %6d s    the encoder end-to-end tests, beside them\n' "$encoders_seconds"
  [ -n "${web_seconds:-}" ] && printf '  %6d s    the browser part, beside them\n' "$web_seconds"
  printf '  %6d s  in all\n' $((SECONDS - started))
  [ -s "$out/native.log" ] && python3 scripts/slowest.py native "$out/native.log"
  [ -s "$out/web.tsv" ] && python3 scripts/slowest.py web "$out/web.tsv"
  return 0
}

# Background parts (the model download, the browser's build) end with the run.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

phase "installing"
scripts/setup.sh --no-models
models_log="$(mktemp)"
quick_models=(smollm2 gemma3 qwen2)
if [ "$quick" = 1 ]; then
  scripts/fetch-models.sh "${quick_models[@]}" >"$models_log" 2>&1 &
else
  scripts/fetch-models.sh all >"$models_log" 2>&1 &
fi
fetch=$!
. scripts/env.sh

wait_models() {
  if ! wait "$fetch"; then
    cat "$models_log" >&2
    echo "test.sh: fetching the models failed" >&2
    exit 1
  fi
  cat "$models_log"
  rm -f "$models_log"
}

logs="$(mktemp -d)"
failed=()
# Runs one part in the background: its lines prefixed "[name] ", kept in
# $logs/name, its seconds in $logs/name.seconds.
part() {
  local name=$1
  shift
  (
    s=$SECONDS
    "$@" 2>&1 | sed -u "s/^/[$name] /" | tee "$logs/$name"
    status=${PIPESTATUS[0]}
    echo $((SECONDS - s)) >"$logs/$name.seconds"
    exit "$status"
  ) &
}
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

if [ "$quick" = 1 ]; then
  phase "formatting, the import graph, building the native tests"
  cargo fmt --all --check
  python3 scripts/imports.py
  "${test_cmd[@]}" --no-run -q
  wait_models
  # The tests see the quick tier's models alone (links in a folder of their
  # own), so one that needs another fails rather than passing by accident.
  models_dir="${WICK_MODELS_DIR:-$root/models}"
  export WICK_MODELS_DIR="$root/test-output/quick-models"
  rm -rf "$WICK_MODELS_DIR" && mkdir -p "$WICK_MODELS_DIR"
  for f in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf qwen2.5-coder-0.5b-instruct-awq.gguf; do
    ln -s "$models_dir/$f" "$WICK_MODELS_DIR/$f"
  done
  phase "native tests (quick tier)"
  skip_args=()
  while read -r filter; do
    skip_args+=(--skip "$filter")
  done < <(grep -v '^#' scripts/quick-skip.txt | grep -v '^$')
  # Two streams side by side, as in the whole suite: the unit and doc
  # tests, and the integration test binaries (one stream leaves a core idle
  # while lavapipe compiles).
  quick_unit_tests() {
    "${test_cmd[@]}" --lib --bins -- "${skip_args[@]}" && "${test_cmd[@]}" --doc
  }
  part unit quick_unit_tests
  unit=$!
  part integration "${test_cmd[@]}" --test '*' -- "${skip_args[@]}"
  integration=$!
  wait "$unit" || failed+=(unit)
  wait "$integration" || failed+=(integration)
  echo "test.sh: [$(((SECONDS - started) / 60)) min] done"
  unit_seconds="$(cat "$logs/unit.seconds")"
  integration_seconds="$(cat "$logs/integration.seconds")"
  cat "$logs/unit" "$logs/integration" >"$out/native.log"
  report
  if [ ${#failed[@]} = 0 ]; then
    rm -rf "$logs"
    echo "test.sh: quick tier passed"
    exit 0
  fi
  for part in "${failed[@]}"; do
    echo "test.sh: what failed in $part:" >&2
    failure_lines "$part" >&2
  done
  echo "test.sh: quick tier failed: ${failed[*]}" >&2
  exit 1
fi

# The browser part's tools and package (wasm-bindgen CLI, npm packages, the
# wasm build with its own target dir) are built beside the native build:
# both are compiles on a 2-core machine, and starting the web part first
# shortens the run, whose last part to finish is the browser tests.
( WICK_NATIVE_BUILT=1 scripts/test-web.sh --prepare 2>&1 | sed -u 's/^/[web] /' | tee "$logs/web-prepare" ) &
web_prepare=$!
phase "formatting, the import graph, clippy, building the native tests (the browser's build beside them)"
cargo fmt --all --check
python3 scripts/imports.py
cargo clippy --workspace --all-targets --release -- -D warnings
"${test_cmd[@]}" --no-run
phase "finishing the browser's build"
if ! wait "$web_prepare"; then
  tail -40 "$logs/web-prepare" >&2
  echo "test.sh: building for the browser tests failed" >&2
  exit 1
fi
wait_models

# The native tests run as two streams beside the browser's: the unit tests
# (then the doc tests and a minute of fuzzing, crates/fuzz: no panic or
# oversized allocation on malformed model files, tokenizers or chat
# templates) and the integration tests. Each test binary runs its tests on
# one core most of the time (they share one GPU device, and lavapipe's
# compiles are serial), so once the browser's part ends a single native
# stream would leave a core idle. Both streams select targets with
# --workspace, so they resolve the same features as the build above and
# rebuild nothing. Each part's lines are also kept, so that a failure's own
# lines can be printed again at the end, where a reader of a long CI log
# looks first.
unit_tests() {
  "${test_cmd[@]}" --lib --bins && "${test_cmd[@]}" --doc && WICK_NATIVE_BUILT=1 scripts/fuzz.sh 60
}
phase "native and browser tests, side by side"
part unit unit_tests
unit=$!
# The encoders' end-to-end tests (the longest of that binary) run in a
# process of their own beside it, each with its own GPU device, so that the
# run's last minutes keep both cores busy.
encoder_tests=(embed_gemma:: embed_minilm:: embed_nomic::)
skip_encoders=()
for t in "${encoder_tests[@]}"; do skip_encoders+=(--skip "$t"); done
part integration "${test_cmd[@]}" --test '*' -- "${skip_encoders[@]}"
integration=$!
part encoders "${test_cmd[@]}" --test end_to_end -- "${encoder_tests[@]}"
encoders=$!
part web env WICK_MODELS_FETCHED=1 scripts/test-web.sh --tests
web=$!
wait "$unit" || failed+=(unit)
wait "$integration" || failed+=(integration)
wait "$encoders" || failed+=(encoders)
echo "test.sh: [$(((SECONDS - started) / 60)) min] native tests ended"
wait "$web" || failed+=(web)
echo "test.sh: [$(((SECONDS - started) / 60)) min] done"
unit_seconds="$(cat "$logs/unit.seconds" 2>/dev/null || true)"
integration_seconds="$(cat "$logs/integration.seconds" 2>/dev/null || true)"
encoders_seconds="$(cat "$logs/encoders.seconds" 2>/dev/null || true)"
web_seconds="$(cat "$logs/web.seconds" 2>/dev/null || true)"
cat "$logs/unit" "$logs/integration" "$logs/encoders" >"$out/native.log"
report

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
