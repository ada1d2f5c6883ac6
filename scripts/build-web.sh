#!/usr/bin/env bash
# Builds the npm package's WebAssembly: crates/web for wasm32-unknown-unknown
# (release), wasm-bindgen --target web into web/pkg/, then wasm-opt from the
# npm package `binaryen` where it is installed (Debian's binaryen 108 produces
# a module that fails to load, so it is never used). No wasm-pack: the
# settings are here and in package.json.
#
# Needs: rustup target wasm32-unknown-unknown and the wasm-bindgen CLI at the
# version in Cargo.lock (scripts/test-web.sh installs both).
# env: WICK_WASM_OPT=0 skips wasm-opt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)"
if [ "$have" != "$want" ]; then
  echo "build-web: wasm-bindgen CLI ${have:-missing}, Cargo.lock wants $want;" \
    "run scripts/test-web.sh or: cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi

# A target dir of its own: wasm builds do not invalidate the native ones.
export CARGO_TARGET_DIR="$root/target/wasm"
CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  cargo build --release --target wasm32-unknown-unknown -p wick-web
wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/wick_web.wasm"

out="$root/web/pkg"
rm -rf "$out"
wasm-bindgen --target web --out-dir "$out" --out-name wick_web "$wasm"

opt="$root/node_modules/.bin/wasm-opt"
if [ "${WICK_WASM_OPT:-1}" != "0" ] && [ -x "$opt" ]; then
  # The features rustc's wasm32 target enables by default.
  "$opt" -O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$out/wick_web_bg.wasm" -o "$out/wick_web_bg.opt.wasm"
  mv "$out/wick_web_bg.opt.wasm" "$out/wick_web_bg.wasm"
  echo "build-web: wasm-opt $("$opt" --version)"
else
  echo "build-web: wasm-opt skipped (npm ci installs it from the binaryen package)"
fi

size=$(stat -c %s "$out/wick_web_bg.wasm")
gz=$(gzip -9 -c "$out/wick_web_bg.wasm" | wc -c)
echo "build-web: web/pkg/wick_web_bg.wasm $size bytes, $gz gzipped"
