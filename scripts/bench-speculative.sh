#!/usr/bin/env bash
# Plain against speculative decoding, side by side in one run: for each
# model and each prompt of tests/fixtures/speculative/lookup_prompts.json
# (code edits and quotes, where replies copy), `wick bench --chat` greedy,
# plain and with prompt lookup in turn, each round; with --draft-model FILE,
# plain and with that draft model on general_prompts.json instead.
# --draft-tokens takes one K or several (7,8): each drafted run in turn, in
# the same rounds; --verify takes one form or both (exact,batched; default:
# the adapter's) the same way. Prints a markdown table per K (and form) of decode tok/s (median of
# the rounds), the ratio to plain, the acceptance rate, tokens and
# milliseconds a pass, and writes the raw reports to
# test-output/bench-speculative.json.
#
# usage: scripts/bench-speculative.sh [--rounds N] [--gen-tokens N] [--draft-tokens K[,K...]] [--verify FORM[,FORM]] [--draft-model FILE] MODEL.gguf...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rounds=2
gen=128
draft=7
draft_model=""
verify=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --gen-tokens) gen="$2"; shift 2 ;;
    --draft-tokens) draft="$2"; shift 2 ;;
    --draft-model) draft_model="$2"; shift 2 ;;
    --verify) verify="$2"; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--rounds N] [--gen-tokens N] [--draft-tokens K[,K...]] [--verify FORM[,FORM]] [--draft-model FILE] MODEL.gguf..." >&2; exit 2; }
wick="${WICK:-target/release/wick}"
[ -x "$wick" ] || cargo build --release -q -p wick-cli
mkdir -p test-output
python3 - "$wick" "$rounds" "$gen" "$draft" "$draft_model" "$verify" "$@" <<'PY'
import json, subprocess, sys, statistics
wick, rounds, gen, drafts, draft_model, verify, models = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7:]
# Each drafted configuration: K, with a --verify form where one is named.
ks = [(k, v) for k in drafts.split(",") for v in (verify.split(",") if verify else [""])]
kind_on = "draft" if draft_model else "lookup"
extra = ["--draft-model", draft_model] if draft_model else []
fixture = "general_prompts.json" if draft_model else "lookup_prompts.json"
prompts = json.load(open("tests/fixtures/speculative/" + fixture))
rows, raw = {k: [] for k in ks}, []
for model in models:
    for p in prompts:
        runs = {k: [] for k in ["off"] + ks}
        for _ in range(rounds):
            for k in ["off"] + ks:
                args = [wick, "bench", "--model", model, "--chat", p["text"], "--gen-tokens", gen, "--json"]
                if k == "off":
                    args += ["--speculative", "off"]
                else:
                    args += ["--speculative", kind_on, "--draft-tokens", k[0]] + extra
                    if k[1]:
                        args += ["--verify", k[1]]
                r = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
                runs[k].append(r)
                raw.append({"model": model, "prompt": p["name"], "speculative": "off" if k == "off" else kind_on,
                            "draft_tokens": None if k == "off" else int(k[0]), "report": r})
        plain = statistics.median(r["decode_tok_s"] for r in runs["off"])
        for k in ks:
            spec = statistics.median(r["decode_tok_s"] for r in runs[k])
            s = runs[k][-1]["speculative"]
            pass_ms = 1000 * s["pass_seconds"] / max(1, s["passes"])
            rows[k].append((model.split("/")[-1], p["name"], runs["off"][-1]["gen_tokens"], plain, spec, spec / plain,
                            s["acceptance_rate"], s["tokens_per_pass"], pass_ms, s["plain_steps"]))
json.dump(raw, open("test-output/bench-speculative.json", "w"), indent=1)
def name(k):
    return f"K = {k[0]}" + (f", --verify {k[1]}" if k[1] else "")
for k in ks:
    print(f"\n{kind_on}, {name(k)}:\n")
    print(f"| model | prompt | tokens | plain tok/s | {kind_on} tok/s | ratio | accepted | tokens a pass | ms a pass | plain steps |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m, n, t, a, b, r, acc, tpp, ms, ps in rows[k]:
        print(f"| {m} | {n} | {t} | {a:.1f} | {b:.1f} | {r:.2f}x | {acc:.0%} | {tpp:.1f} | {ms:.0f} | {ps} |")
    for model in models:
        mine = [r for r in rows[k] if r[0] == model.split("/")[-1]]
        geo = statistics.geometric_mean(r[5] for r in mine)
        print(f"\n{model.split('/')[-1]}, {name(k)}: geometric mean ratio {geo:.2f}x over {len(mine)} prompts")
PY
