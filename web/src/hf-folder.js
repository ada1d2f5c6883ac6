// A Hugging Face / sentence-transformers folder as named files: from a base
// URL (each file fetched beside it) or from a list of Files (an
// `<input type="file" webkitdirectory>`'s FileList, or Files/Blobs keyed by
// their path in the folder). Only bytes move here: every file is parsed by
// the engine (crates/web/src/embedder.rs, hf_loader.rs). A missing or unreadable file is a
// ModelLoadError that names it.

import { ModelLoadError, StorageQuotaError } from "./errors.js";
import { storedPrefix } from "./model-cache.js";
import { readSource } from "./source.js";

/**
 * Whether `source` names a folder rather than one file: a URL ending in "/",
 * a FileList or array of Files, or an object or Map of `{ path: Blob }`.
 */
export function isFolderSource(source) {
  if (typeof source === "string" || source instanceof URL) {
    return new URL(String(source), globalThis.location?.href).pathname.endsWith("/");
  }
  if (!source || typeof source !== "object") return false;
  if (typeof Blob !== "undefined" && source instanceof Blob) return false;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return false;
  if (typeof Response !== "undefined" && source instanceof Response) return false;
  if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream) return false;
  return true;
}

/**
 * `{ name, bytes(path, { optional }), prefix(path, n, opts), chunks(path, opts) }` over `source`:
 * a URL string / URL of the folder, a FileList or array of Files, or an
 * object or Map of `{ "path/in/folder": Blob }`.
 */
export function hfFolder(source, { signal } = {}) {
  if (typeof source === "string" || source instanceof URL) return urlFolder(source, signal);
  if (source && typeof source === "object") return filesFolder(source);
  throw new TypeError(
    "the source must be the folder's URL, a FileList or array of Files, or an object of { path: Blob }",
  );
}

function urlFolder(source, signal) {
  let base = new URL(String(source), globalThis.location?.href);
  if (!base.pathname.endsWith("/")) base = new URL(`${base.pathname}/${base.search}`, base);
  const urlOf = (path) => new URL(path, base).href;
  return {
    name: decodeURIComponent(base.pathname.split("/").filter(Boolean).pop() ?? "model"),
    async bytes(path, { optional = false } = {}) {
      let res;
      try {
        res = await fetch(urlOf(path), { signal });
      } catch (e) {
        if (e?.name === "AbortError") throw e;
        throw new ModelLoadError(`${path}: fetching ${urlOf(path)} failed: ${e?.message ?? e}`, { file: path });
      }
      if (res.status === 404 && optional) return null;
      if (!res.ok) {
        throw new ModelLoadError(`${path}: fetching ${urlOf(path)} failed: HTTP ${res.status}`, { file: path });
      }
      return new Uint8Array(await res.arrayBuffer());
    },
    async prefix(path, n, { cache = true } = {}) {
      // A stored copy (a load with `cache`) is read first.
      const stored = cache ? await storedPrefix(urlOf(path), n).catch(() => null) : null;
      if (stored) return stored;
      let res;
      try {
        res = await fetch(urlOf(path), { signal, headers: { Range: `bytes=0-${n - 1}` } });
      } catch (e) {
        if (e?.name === "AbortError") throw e;
        throw new ModelLoadError(`${path}: fetching ${urlOf(path)} failed: ${e?.message ?? e}`, { file: path });
      }
      if (!res.ok) {
        throw new ModelLoadError(`${path}: fetching ${urlOf(path)} failed: HTTP ${res.status}`, { file: path });
      }
      // A server without Range requests sends the whole file: read n bytes of it.
      return firstBytes(res.body, n);
    },
    chunks(path, opts) {
      return named(path, readSource(urlOf(path), opts));
    },
  };
}

/** The first `n` bytes of `stream` (fewer where it is shorter); the rest is cancelled. */
async function firstBytes(stream, n) {
  const out = new Uint8Array(n);
  let at = 0;
  const reader = stream.getReader();
  try {
    while (at < n) {
      const { done, value } = await reader.read();
      if (done) break;
      const part = value.subarray(0, n - at);
      out.set(part, at);
      at += part.length;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return out.subarray(0, at);
}

function filesFolder(source) {
  const files = new Map();
  let name = null;
  if (!(source instanceof Map) && (typeof source.length === "number" || typeof source[Symbol.iterator] === "function")) {
    for (const f of Array.from(source)) {
      if (!(f instanceof Blob)) throw new TypeError("every item of the file list must be a File");
      // A folder picker's Files carry "folder/sub/file"; the folder is the model.
      const rel = f.webkitRelativePath || f.name;
      const parts = rel.split("/");
      if (parts.length > 1) {
        const top = parts.shift();
        name ??= top;
      }
      files.set(parts.join("/"), f);
    }
  } else {
    for (const [path, f] of source instanceof Map ? source : Object.entries(source)) {
      if (!(f instanceof Blob)) throw new TypeError(`${path}: must be a File or Blob`);
      files.set(path, f);
    }
  }
  const missing = (path) =>
    new ModelLoadError(`${path} is missing from the files given (${[...files.keys()].join(", ") || "none"})`, { file: path });
  return {
    name: name ?? "model",
    async bytes(path, { optional = false } = {}) {
      const f = files.get(path);
      if (!f) {
        if (optional) return null;
        throw missing(path);
      }
      return new Uint8Array(await f.arrayBuffer());
    },
    async prefix(path, n) {
      const f = files.get(path);
      if (!f) throw missing(path);
      return new Uint8Array(await f.slice(0, n).arrayBuffer());
    },
    chunks(path, opts) {
      const f = files.get(path);
      if (!f) throw missing(path);
      return named(path, readSource(f, opts));
    },
  };
}

/** `chunks`'s errors (a failed fetch, a 404) as ModelLoadErrors naming `path`. */
async function* named(path, chunks) {
  try {
    yield* chunks;
  } catch (e) {
    // A full store is no fault of the file: it stays a StorageQuotaError.
    if (e?.name === "AbortError" || e instanceof ModelLoadError || e instanceof StorageQuotaError) throw e;
    throw new ModelLoadError(`${path}: ${e?.message ?? e}`, { file: path });
  }
}
