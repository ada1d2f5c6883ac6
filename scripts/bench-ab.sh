#!/usr/bin/env bash
# An older commit's decode and prefill speed beside this tree's, measured in
# one run on one machine (what issue 11's bars ask for): `wick bench --json`
# per model, the two binaries alternating, the order flipped every round so
# that a shared machine's drift lands on both, then a table with the ratios.
#
#   scripts/bench-ab.sh [--rounds N] [--old REV] [MODEL...] [-- BENCH_ARGS...]
#
# REV: a commit (default c7bee39, the last before the kernels round). Its
# wick is built once in a worktree under target/bench-ab/. MODEL: GGUF files
# (default: SmolLM2, Qwen2.5 0.5B and Gemma 3 from models/). BENCH_ARGS go to
# both binaries, so use options the old one has too (--prompt-tokens,
# --gen-tokens). The old binary's roofline fraction is derived from the new
# one's weight bytes per token and copy bandwidth (older benches print
# neither): the same weights are read per token, on the same adapter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"

rounds=2
old=c7bee39
models=()
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    --old) old="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    --) shift; bench_args=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done
if [ ${#models[@]} -eq 0 ]; then
  models=("$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
          "$root/models/qwen2.5-coder-0.5b-instruct-awq.gguf"
          "$root/models/gemma-3-270m-q4_k_m.gguf")
fi
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "bench-ab: no model file $m (scripts/fetch-models.sh fetches them)" >&2; exit 2; }
done
case "$rounds" in ''|*[!0-9]*|0) echo "bench-ab: --rounds takes a positive count, not '$rounds'" >&2; exit 2 ;; esac

rev="$(git -C "$root" rev-parse --verify --quiet "$old^{commit}")" \
  || { echo "bench-ab: '$old' is not a commit of this repository" >&2; exit 2; }
short="$(git -C "$root" rev-parse --short "$rev")"
work="$root/target/bench-ab"
src="$work/src-$short"
mkdir -p "$work"
if [ ! -d "$src" ]; then
  git -C "$root" worktree add --detach "$src" "$rev" >/dev/null
fi
echo "building $short's wick (once) and this tree's" >&2
CARGO_TARGET_DIR="$work/target-$short" cargo build --release -q -p wick-cli --manifest-path "$src/Cargo.toml"
cargo build --release -q -p wick-cli --manifest-path "$root/Cargo.toml"
old_bin="$work/target-$short/release/wick"
new_bin="$root/target/release/wick"

runs="$work/runs.jsonl"
: > "$runs"
for m in "${models[@]}"; do
  for r in $(seq 1 "$rounds"); do
    order=(old new)
    [ $((r % 2)) -eq 0 ] && order=(new old)
    for side in "${order[@]}"; do
      bin="$old_bin"; [ "$side" = new ] && bin="$new_bin"
      echo "round $r: $side on $(basename "$m")" >&2
      json="$("$bin" bench --model "$m" --json "${bench_args[@]}")"
      printf '{"side":"%s","round":%d,"model":"%s","bench":%s}\n' \
        "$side" "$r" "$(basename "$m")" "$(echo "$json" | tr -d '\n')" >> "$runs"
    done
  done
done

python3 - "$runs" "$short" <<'EOF'
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
old = sys.argv[2]
print(f"| model | round | decode {old} | decode now | ratio | roofline {old} | roofline now"
      f" | prefill {old} | prefill now | prefill / decode now |")
print("| --- " * 10 + "|")
for model in dict.fromkeys(r["model"] for r in runs):
    mine = [r for r in runs if r["model"] == model]
    for rnd in sorted({r["round"] for r in mine}):
        o = next(r["bench"] for r in mine if r["round"] == rnd and r["side"] == "old")
        n = next(r["bench"] for r in mine if r["round"] == rnd and r["side"] == "new")
        bytes_per_token, copy = n.get("weight_bytes_per_token"), n.get("copy_gbps")
        def roof(b):
            if bytes_per_token is None or not copy:
                return "-"
            return f"{b['decode_tok_s'] * bytes_per_token / (copy * 1e9):.3f}"
        print(f"| {model} | {rnd} | {o['decode_tok_s']:.2f} | {n['decode_tok_s']:.2f}"
              f" | {n['decode_tok_s'] / o['decode_tok_s']:.2f}x | {roof(o)} | {roof(n)}"
              f" | {o['prefill_tok_s']:.1f} | {n['prefill_tok_s']:.1f}"
              f" | {n['prefill_tok_s'] / n['decode_tok_s']:.1f} |")
EOF
