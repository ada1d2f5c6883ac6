// The memory preflight before a download: the start of each file of a
// model (one GGUF, or every shard of a split one) is read (a Range request
// of the first 8 MiB, 64 KiB of a later shard, again for twice as much
// while the header is longer; from the
// model store where it holds those bytes), the page's GPU is opened with
// the load's options, and the engine says what the model would hold there
// and whether it fits: the load's own checks and sums (WasmPreflight,
// wick::engine::preflight_headers), not a copy of them here.

import { WasmPreflight } from "../pkg/wick_web.js";
import { DownloadError, InvalidRequestError, ModelLoadError } from "./errors.js";
import { checkCache, storedPrefix } from "./model-cache.js";
import { call, checkWebGPU, guard, initWasm } from "./runtime.js";
import { shardSources } from "./shards.js";

const MiB = 1 << 20;
/**
 * The first request's bytes of a model's (first) file: its header holds the
 * vocabulary and merges, 5.9 to 6.5 MB in the Qwen2.5 and Gemma 3 files
 * here, so most take one request. A split model's later shards hold tensor
 * infos only (9 KB for the synthetic 8B's second shard).
 */
const FIRST_READ = 8 * MiB;
const LATER_READ = 64 * 1024;

/**
 * What `Engine.load(source, options)` would hold on this page's GPU and
 * whether it fits, from the model's headers alone (see index.d.ts,
 * Preflight). `source`: a GGUF URL, File, Blob or buffer, or a split
 * model (its first shard's URL, or the list of its shards).
 */
export async function preflight(source, options = {}) {
  const { signal, wasmUrl, cache = true, contextLength, kvCache, activations, prefillChunk, tokensPerSubmit, limits, memoryBudget } = options;
  checkCache(cache);
  checkWebGPU();
  const files = shardSources(source) ?? [source];
  for (const f of files) checkSource(f);
  await initWasm(wasmUrl);
  const p = call(() => new WasmPreflight(files.length));
  try {
    let headerBytes = 0;
    for (let i = 0; i < files.length; i++) {
      signal?.throwIfAborted();
      headerBytes += await readHeader(p, i, files, { signal, cache });
    }
    const opts = { contextLength, kvCache, activations, prefillChunk, tokensPerSubmit, limits, memoryBudget };
    const out = await guard(p.run(opts));
    out.headerBytes = headerBytes;
    return out;
  } finally {
    p.free();
  }
}

function checkSource(s) {
  const ok = typeof s === "string" || s instanceof URL || s instanceof ArrayBuffer || ArrayBuffer.isView(s) ||
    (typeof Blob !== "undefined" && s instanceof Blob);
  if (!ok) {
    throw new InvalidRequestError("source", "preflight takes a GGUF URL, URL, File, Blob, ArrayBuffer or typed array, or a split model's first shard URL or list of shards");
  }
}

/** Feeds file `i`'s first bytes to the preflight until its header is whole; returns the bytes read. */
async function readHeader(p, i, files, { signal, cache }) {
  const source = files[i];
  const name = files.length > 1 ? `shard ${i + 1} of ${files.length}` : "the file";
  let have = 0;
  let want = i === 0 ? FIRST_READ : LATER_READ;
  for (;;) {
    const bytes = await readRange(source, have, want, { signal, cache });
    if (bytes.byteLength === 0) {
      throw new ModelLoadError(`loading the model failed: ${name} ends after ${have} bytes, inside its header`, { file: describe(source) });
    }
    have += bytes.byteLength;
    const needed = call(() => p.pushHeader(i, bytes));
    if (needed === 0) return have;
    // The header says how much it needs at least; ask for twice what is here if that is more.
    want = Math.max(needed, 2 * have);
  }
}

function describe(source) {
  if (typeof source === "string" || source instanceof URL) return new URL(String(source), globalThis.location?.href).href;
  if (typeof File !== "undefined" && source instanceof File) return source.name;
  return undefined;
}

/** Bytes `from..to` of `source` (fewer at its end). */
async function readRange(source, from, to, { signal, cache }) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const all = source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return all.subarray(Math.min(from, all.length), Math.min(to, all.length));
  }
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    return new Uint8Array(await source.slice(from, to).arrayBuffer());
  }
  const url = new URL(String(source), globalThis.location?.href).href;
  if (cache) {
    // A model in the store (whole, or a partial copy past these bytes) is read from there.
    const stored = await storedPrefix(url, to).catch(() => null);
    if (stored && stored.byteLength >= to) return stored.subarray(from, to);
  }
  let res;
  try {
    res = await fetch(url, { headers: { Range: `bytes=${from}-${to - 1}` }, signal });
  } catch (e) {
    if (e?.name === "AbortError") throw e;
    throw new DownloadError(`fetching ${url} failed at byte ${from}: ${e?.message ?? e}`, { url, offset: from });
  }
  if (res.status === 416) return new Uint8Array(0); // past the end
  if (!res.ok) {
    res.body?.cancel().catch(() => {});
    throw new DownloadError(`fetching ${url} failed: HTTP ${res.status} ${res.statusText}`.trim(), { url, offset: from, status: res.status });
  }
  if (res.status === 206) return new Uint8Array(await res.arrayBuffer());
  // A server that ignores Range sends the whole file: read only up to `to`.
  const out = new Uint8Array(to - from);
  let at = 0;
  let pos = 0;
  const reader = res.body.getReader();
  try {
    while (at < out.length) {
      const { done, value } = await reader.read();
      if (done) break;
      const lo = Math.max(0, from - pos);
      const hi = Math.min(value.byteLength, to - pos);
      if (hi > lo) {
        out.set(value.subarray(lo, hi), at);
        at += hi - lo;
      }
      pos += value.byteLength;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return out.subarray(0, at);
}
