// The malformed model files of crates/cli/tests/commands/malformed.rs, made the same
// way for the browser tests: from SmolLM2's real header (so everything but
// the one defect is as a real model has it) or the tiny MoE fixture, with
// the same needles the refusal must name. Nothing is committed: the files
// are written under test-output/ at test time.
//
// Only as much of GGUF as changing one thing needs: the header is split
// into its key/value entries and tensor-table entries as raw bytes, one of
// them replaced or added, and the header written back (declared tensors, no
// data, as the Rust test's `Header::bytes`).

import { mkdirSync, openSync, readSync, closeSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const enc = new TextEncoder();

// GGUF value types and the fixed sizes of the scalar ones.
const STRING = 8, ARRAY = 9;
const SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const U32 = 4, F32 = 6;
const Q8_1 = 9; // ggml's type id

/** The first `n` bytes of `file`. */
function head(file, n) {
  const fd = openSync(file, "r");
  const buf = Buffer.alloc(n);
  const got = readSync(fd, buf, 0, n, 0);
  closeSync(fd);
  return new Uint8Array(buf.buffer, buf.byteOffset, got);
}

/** The header of `bytes` as raw entries: { version, kvs: [{ key, raw }], tensors: [raw], end, dataOffset }. */
export function parseHeader(bytes) {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let o = 0;
  const u32 = () => ((o += 4), v.getUint32(o - 4, true));
  const u64 = () => ((o += 8), Number(v.getBigUint64(o - 8, true)));
  const str = () => {
    const n = u64();
    o += n;
    return new TextDecoder().decode(bytes.subarray(o - n, o));
  };
  const skip = (type) => {
    if (type in SCALAR) o += SCALAR[type];
    else if (type === STRING) str();
    else if (type === ARRAY) {
      const t = u32();
      const n = u64();
      if (t in SCALAR) o += n * SCALAR[t];
      else for (let i = 0; i < n; i++) skip(t);
    } else throw new Error(`GGUF value type ${type} at ${o}`);
  };
  if (u32() !== 0x46554747) throw new Error("not GGUF");
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  const kvs = [];
  let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const start = o;
    const key = str();
    const type = u32();
    if (key === "general.alignment") alignment = v.getUint32(o, true);
    skip(type);
    kvs.push({ key, raw: bytes.slice(start, o) });
  }
  const tensors = [];
  for (let i = 0; i < nTensors; i++) {
    const start = o;
    str();
    const dims = u32();
    o += 8 * dims + 4 + 8; // dims, type, offset
    tensors.push(bytes.slice(start, o));
  }
  return { version, kvs, tensors, end: o, dataOffset: Math.ceil(o / alignment) * alignment };
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) (out.set(p, o), (o += p.length));
  return out;
}

function u32le(x) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, x, true);
  return b;
}

function u64le(x) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(x), true);
  return b;
}

function gstr(s) {
  const b = enc.encode(s);
  return concat([u64le(b.length), b]);
}

/** One key/value entry: a u32, an f32 or a string. */
function kv(key, type, value) {
  let v;
  if (type === U32) v = u32le(value);
  else if (type === F32) (v = new Uint8Array(4)), new DataView(v.buffer).setFloat32(0, value, true);
  else v = gstr(value);
  return { key, raw: concat([gstr(key), u32le(type), v]) };
}

/** The header written back with `sets` (entries from `kv`) replacing or added to its own. */
function withMeta(h, sets) {
  const kvs = h.kvs.filter((e) => !sets.some((s) => s.key === e.key)).concat(sets);
  return concat([
    enc.encode("GGUF"), u32le(h.version), u64le(h.tensors.length), u64le(kvs.length),
    ...kvs.map((e) => e.raw), ...h.tensors,
  ]);
}

/** A tensor-table entry's name, element count, and where its type and offset are. */
function tensorInfo(raw) {
  const v = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const n = Number(v.getBigUint64(0, true));
  const name = new TextDecoder().decode(raw.subarray(8, 8 + n));
  const nDims = v.getUint32(8 + n, true);
  let elems = 1n;
  for (let d = 0; d < nDims; d++) elems *= v.getBigUint64(12 + n + 8 * d, true);
  const typeAt = 12 + n + 8 * nDims;
  return { name, elems, typeAt, offsetAt: typeAt + 4, offset: v.getBigUint64(typeAt + 4, true) };
}

/** The header with tensor `name` given type `type`, `grow` more bytes a 32-element block, and the tensors after it moved up. */
function withType(h, name, type, grow) {
  const target = h.tensors.map(tensorInfo).find((t) => t.name === name);
  const shift = ((target.elems / 32n) * BigInt(grow) + 31n) / 32n * 32n;
  const tensors = h.tensors.map((raw) => {
    const t = tensorInfo(raw);
    const out = raw.slice();
    const v = new DataView(out.buffer);
    if (t.name === name) v.setUint32(t.typeAt, type, true);
    if (t.offset > target.offset) v.setBigUint64(t.offsetAt, t.offset + shift, true);
    return out;
  });
  return withMeta({ ...h, tensors }, []);
}

/** Where `name` (as bytes) is in `bytes`: its first or last occurrence. */
function find(bytes, name, last = false) {
  const n = enc.encode(name);
  const at = [];
  outer: for (let i = 0; i + n.length <= bytes.length; i++) {
    for (let j = 0; j < n.length; j++) if (bytes[i + j] !== n[j]) continue outer;
    if (!last) return i;
    at.push(i);
  }
  if (!at.length) throw new Error(`${name} not found`);
  return at[at.length - 1];
}

/**
 * Writes every malformed file into `dir`; returns [{ name, needles }] in the
 * order of the Rust test. `model` is SmolLM2's path, `tiny` the MoE fixture's.
 */
export function writeMalformedFiles(dir, model, tiny) {
  mkdirSync(dir, { recursive: true });
  const headBytes = head(model, 16 << 20);
  const h = parseHeader(headBytes);
  if (h.end >= headBytes.length) throw new Error("SmolLM2's header is over 16 MiB?");
  const real = withMeta(h, []);
  const files = [];
  const add = (name, bytes, needles) => {
    writeFileSync(path.join(dir, name), bytes);
    files.push({ name, needles });
  };

  add("empty.gguf", new Uint8Array(0), ["incomplete", "inside its header"]);
  add("cut-in-header.gguf", headBytes.slice(0, 1000), ["incomplete", "after 1000 bytes"]);
  add("cut-in-data.gguf", head(model, h.dataOffset + 100), ["incomplete", "tensor '", "needs bytes up to"]);

  add("magic.gguf", enc.encode("GGML\x03\0\0\0 and more"), ["magic"]);
  add("version.gguf", concat([enc.encode("GGUF"), u32le(9), new Uint8Array(16)]), ["version 9"]);

  // 2^60 tensors in a 24-byte file: refused before anything is sized.
  add("tensor-count.gguf", concat([enc.encode("GGUF"), u32le(3), u64le(2n ** 60n), u64le(0)]), ["implausible", "tensor count"]);
  add("block-count.gguf", withMeta(h, [kv("llama.block_count", U32, 1 << 30)]), ["llama.block_count", "1073741824"]);
  add("head-count.gguf", withMeta(h, [kv("llama.attention.head_count", U32, 0)]), ["llama.attention.head_count"]);

  // The tiny model with token_embd's table entry moved 1 TiB past the end:
  // name, n_dims (u32), dims (2 x u64), type (u32), then the offset.
  const moe = new Uint8Array(readFileSync(tiny));
  const offsetAt = find(moe, "token_embd.weight") + "token_embd.weight".length + 4 + 16 + 4;
  new DataView(moe.buffer).setBigUint64(offsetAt, 1n << 40n, true);
  add("offset.gguf", moe, ["token_embd.weight", "needs bytes up to 10995"]);

  // output_norm's type id 99: name, n_dims (u32), one dim (u64), the type.
  const t99 = real.slice();
  const typeAt = find(t99, "output_norm.weight", true) + "output_norm.weight".length + 4 + 8;
  new DataView(t99.buffer).setUint32(typeAt, 99, true);
  add("type-99.gguf", t99, ["output_norm.weight", "99"]);

  // A real ggml type the kernels do not decode on blk.0.attn_q: Q8_1 keeps
  // Q4_1's 32-element blocks but takes 36 bytes a block, not 20, so the
  // tensors after it move up (as the Rust writer lays them out).
  add("q8_1.gguf", withType(h, "blk.0.attn_q.weight", Q8_1, 36 - 20), ["blk.0.attn_q.weight", "Q8_1", "do not support"]);

  add("mamba.gguf", withMeta(h, [kv("general.architecture", STRING, "mamba")]), ["unsupported architecture", "mamba"]);
  add("longrope.gguf", withMeta(h, [
    kv("llama.rope.scaling.type", STRING, "longrope"),
    kv("llama.rope.scaling.factor", F32, 4),
  ]), ["llama.rope.scaling.type", "longrope", "not implemented"]);
  return files;
}
