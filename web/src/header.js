// The start of a model file, read in growing Range requests until its
// header is whole: what the preflight reads of every file, and what a split
// load reads of its later shards before their turn. Not through the
// model store's download path (which would start a download of the whole
// file, and drop a partial copy when the reader stops): from the store's
// bytes where it holds them, else a plain Range request.

import { DownloadError, ModelLoadError } from "./errors.js";
import { findEntry, storedPrefix } from "./model-cache.js";

/**
 * Feeds `push(bytes)` the start of `source` (a URL, Blob/File or buffer),
 * `first` bytes then twice as many each time, until it answers done: `true`
 * or 0 (a number is how many bytes from the start it needs at least).
 * Resolves to `{ read, size }`: the bytes read, the file's size where known.
 */
export async function readStart(source, push, { first, signal, cache, name = "the file" }) {
  let have = 0;
  let want = first;
  let size = null;
  for (;;) {
    signal?.throwIfAborted();
    const r = await readRange(source, have, want, { signal, cache });
    size ??= r.size;
    if (r.bytes.byteLength === 0) {
      throw new ModelLoadError(`loading the model failed: ${name} ends after ${have} bytes, inside its header`, { file: describe(source) });
    }
    have += r.bytes.byteLength;
    const answer = push(r.bytes);
    if (answer === true || answer === 0) return { read: have, size };
    want = Math.max(typeof answer === "number" ? answer : 0, 2 * have);
  }
}

function describe(source) {
  if (typeof source === "string" || source instanceof URL) return new URL(String(source), globalThis.location?.href).href;
  if (typeof File !== "undefined" && source instanceof File) return source.name;
  return undefined;
}

/** Bytes `from..to` of `source` (fewer at its end), and its size where known: `{ bytes, size }`. */
async function readRange(source, from, to, { signal, cache }) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const all = source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return { bytes: all.subarray(Math.min(from, all.length), Math.min(to, all.length)), size: all.length };
  }
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    return { bytes: new Uint8Array(await source.slice(from, to).arrayBuffer()), size: source.size };
  }
  const url = new URL(String(source), globalThis.location?.href).href;
  if (cache) {
    // A model in the store (whole, or a partial copy past these bytes) is read from there.
    const stored = await storedPrefix(url, to).catch(() => null);
    if (stored && stored.byteLength >= to) {
      const meta = (await findEntry(url).catch(() => null))?.meta;
      return { bytes: stored.subarray(from, to), size: meta?.size ?? null };
    }
  }
  let res;
  try {
    res = await fetch(url, { headers: { Range: `bytes=${from}-${to - 1}` }, signal });
  } catch (e) {
    if (e?.name === "AbortError") throw e;
    throw new DownloadError(`fetching ${url} failed at byte ${from}: ${e?.message ?? e}`, { url, offset: from });
  }
  if (res.status === 416) return { bytes: new Uint8Array(0), size: null }; // past the end
  if (!res.ok) {
    res.body?.cancel().catch(() => {});
    throw new DownloadError(`fetching ${url} failed: HTTP ${res.status} ${res.statusText}`.trim(), { url, offset: from, status: res.status });
  }
  if (res.status === 206) {
    const total = Number(/\/(\d+)$/.exec(res.headers.get("content-range") ?? "")?.[1]);
    return { bytes: new Uint8Array(await res.arrayBuffer()), size: Number.isFinite(total) ? total : null };
  }
  // A server that ignores Range sends the whole file: read only up to `to`.
  const len = Number(res.headers.get("content-length"));
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
  return { bytes: out.subarray(0, at), size: len > 0 ? len : null };
}
