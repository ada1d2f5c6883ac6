// The persistent model store: where a model's bytes are kept between page
// loads, keyed by the file's absolute URL (so shards of a split model are
// entries of their own). Two backends, one layout:
//
// - the Origin Private File System (navigator.storage.getDirectory()) where
//   it exists and files can be written from this scope (createWritable, or a
//   sync access handle in a worker): a folder per model, named by the
//   SHA-256 of its URL, holding `meta.json` and one file per chunk (`c0`,
//   `c1`, ...);
// - the Cache API otherwise: the same `meta` and chunks as entries of the
//   cache "wick-models-v2", under synthetic same-origin keys.
//
// A model is written chunk by chunk as it downloads; `meta.chunks` counts
// the chunks written whole (each written before the meta that counts it),
// so a load cut short (an abort, the page closed, the network gone) leaves a
// partial entry the next load resumes from, and a partial entry is never
// read as a whole model (`meta.complete` is set only with the last chunk).
// The meta also keeps the server's validators (size, ETag, Last-Modified)
// so a changed file invalidates the copy.

import { InvalidRequestError, StorageQuotaError } from "./errors.js";

/** The Cache API cache of this layout; "wick-models-v1" held whole files (wick <= 0.1). */
export const CACHE_NAME = "wick-models-v2";
const LEGACY_CACHE = "wick-models-v1";
const OPFS_DIR = "wick-models";
const META_VERSION = 1;

/** The `cache` load option: true (the default) or false. */
export function checkCache(cache) {
  if (typeof cache !== "boolean") throw new InvalidRequestError("cache", `must be true or false, got ${JSON.stringify(cache)}`);
}

/** `url` made absolute against the page (or worker) location. */
export function absoluteUrl(url) {
  return new URL(String(url), globalThis.location?.href).href;
}

/** Bytes an entry holds now. */
export function storedBytes(meta) {
  if (meta.complete) return meta.size ?? 0;
  const n = meta.chunks * meta.chunkSize;
  return meta.size == null ? n : Math.min(n, meta.size);
}

/** Bytes of chunk `i` of an entry whose size is known. */
export function chunkLength(meta, i) {
  return Math.min(meta.chunkSize, meta.size - i * meta.chunkSize);
}

// ---- the OPFS backend ----

function opfsWritable() {
  const proto = globalThis.FileSystemFileHandle?.prototype;
  return Boolean(proto && (proto.createWritable || proto.createSyncAccessHandle));
}

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Writes `bytes` as the whole of file `name` in `dir`. createWritable
 * commits on close (atomically, in Chromium and Firefox); a sync access
 * handle (workers, Safari) writes in place, which is why a chunk is counted
 * only by the meta written after it.
 */
async function writeFile(dir, name, bytes) {
  const fh = await dir.getFileHandle(name, { create: true });
  if (fh.createWritable) {
    const w = await fh.createWritable();
    try {
      await w.write(bytes);
      await w.close();
    } catch (e) {
      await w.abort().catch(() => {});
      throw e;
    }
    return;
  }
  const h = await fh.createSyncAccessHandle();
  try {
    h.truncate(0);
    h.write(bytes, { at: 0 });
    h.flush();
  } finally {
    h.close();
  }
}

function opfsBackend(root) {
  const folder = async (url, create = false) => {
    try {
      return await root.getDirectoryHandle(await sha256Hex(url), { create });
    } catch (e) {
      if (e?.name === "NotFoundError") return null;
      throw e;
    }
  };
  const readMeta = async (dir) => {
    try {
      const file = await (await dir.getFileHandle("meta.json")).getFile();
      const meta = JSON.parse(await file.text());
      return meta?.v === META_VERSION ? meta : null;
    } catch {
      // Missing or torn (a sync-handle write cut short): not an entry.
      return null;
    }
  };
  const chunkFile = async (dir, i) => (await dir.getFileHandle(`c${i}`)).getFile();
  return {
    kind: "opfs",
    async meta(url) {
      const dir = await folder(url);
      if (!dir) return null;
      const meta = await readMeta(dir);
      if (!meta || meta.url !== url) return null;
      // Count only the chunks that are really there at their length (a
      // browser may evict or a user may delete files under us).
      let ok = 0;
      for (; ok < meta.chunks; ok++) {
        const f = await chunkFile(dir, ok).catch(() => null);
        // A size-less entry (no Content-Length) has only whole chunks until it completes with its size.
        const want = meta.size == null ? meta.chunkSize : chunkLength(meta, ok);
        if (!f || f.size !== want) break;
      }
      if (ok < meta.chunks) return { ...meta, chunks: ok, complete: false };
      return meta;
    },
    async writeChunk(url, i, bytes) {
      await writeFile(await folder(url, true), `c${i}`, bytes);
    },
    async writeMeta(url, meta) {
      await writeFile(await folder(url, true), "meta.json", new TextEncoder().encode(JSON.stringify(meta)));
    },
    async chunk(url, i) {
      return chunkFile(await folder(url), i);
    },
    async remove(url) {
      try {
        await root.removeEntry(await sha256Hex(url), { recursive: true });
        return true;
      } catch (e) {
        if (e?.name === "NotFoundError") return false;
        throw e;
      }
    },
    async list() {
      const out = [];
      for await (const [, h] of root.entries()) {
        if (h.kind !== "directory") continue;
        const meta = await readMeta(h);
        if (meta) out.push(meta);
      }
      return out;
    },
    async clear() {
      let any = false;
      for await (const [name] of root.entries()) {
        await root.removeEntry(name, { recursive: true });
        any = true;
      }
      return any;
    },
  };
}

// ---- the Cache API backend ----

function cacheBackend(cache) {
  // Keys are same-origin URLs under a path no server page uses; the model's
  // own URL is encoded in them, so each file is an entry of its own.
  const PREFIX = "/.wick-model-cache/";
  const key = (url, part) => new URL(`${PREFIX}${encodeURIComponent(url)}/${part}`, globalThis.location.origin).href;
  const isMeta = (k) => new URL(k).pathname.startsWith(PREFIX) && k.endsWith("/meta");
  const readMeta = async (k) => {
    const res = await cache.match(k);
    try {
      const meta = res ? await res.json() : null;
      return meta?.v === META_VERSION ? meta : null;
    } catch {
      return null;
    }
  };
  const removeKeys = async (url) => {
    let any = false;
    const meta = await readMeta(key(url, "meta"));
    if (await cache.delete(key(url, "meta"))) any = true;
    // Chunks past the meta's count may exist (written, the meta not yet).
    const n = meta ? (meta.size ? Math.ceil(meta.size / meta.chunkSize) : meta.chunks + 1) : 0;
    for (let i = 0; i < n; i++) await cache.delete(key(url, `c${i}`));
    return any;
  };
  return {
    kind: "cache",
    async meta(url) {
      const meta = await readMeta(key(url, "meta"));
      if (!meta || meta.url !== url) return null;
      let ok = 0;
      for (; ok < meta.chunks; ok++) if (!(await cache.match(key(url, `c${ok}`)))) break;
      if (ok < meta.chunks) return { ...meta, chunks: ok, complete: false };
      return meta;
    },
    async writeChunk(url, i, bytes) {
      await cache.put(key(url, `c${i}`), new Response(bytes, { headers: { "content-length": String(bytes.byteLength) } }));
    },
    async writeMeta(url, meta) {
      await cache.put(key(url, "meta"), new Response(JSON.stringify(meta), { headers: { "content-type": "application/json" } }));
    },
    async chunk(url, i) {
      const res = await cache.match(key(url, `c${i}`));
      if (!res) throw new DOMException(`chunk ${i} of ${url} is missing from the cache`, "NotFoundError");
      return res.blob();
    },
    remove: removeKeys,
    async list() {
      const out = [];
      for (const req of await cache.keys()) {
        if (!isMeta(req.url)) continue;
        const meta = await readMeta(req.url);
        if (meta) out.push(meta);
      }
      return out;
    },
    async clear() {
      let any = false;
      for (const req of await cache.keys()) any = (await cache.delete(req)) || any;
      return any;
    },
  };
}

/**
 * The backends this scope can use, the one new entries go to first: OPFS
 * where it exists and can be written, then the Cache API. Chosen on every
 * call (cheap), so a page that loses OPFS falls back at once.
 */
export async function backends() {
  const out = [];
  if (typeof navigator !== "undefined" && typeof navigator.storage?.getDirectory === "function" && opfsWritable() &&
      globalThis.crypto?.subtle) {
    try {
      const root = await navigator.storage.getDirectory();
      out.push(opfsBackend(await root.getDirectoryHandle(OPFS_DIR, { create: true })));
    } catch {
      // No OPFS here (a private window, an insecure context): the Cache API.
    }
  }
  if (typeof caches !== "undefined") {
    try {
      out.push(cacheBackend(await caches.open(CACHE_NAME)));
    } catch {
      // Storage disabled for this origin.
    }
  }
  return out;
}

/** The first backend holding an entry for `url`: `{ backend, meta }`, or null. */
export async function findEntry(url, list) {
  for (const backend of list ?? (await backends())) {
    const meta = await backend.meta(url);
    if (meta) return { backend, meta };
  }
  return null;
}

/** A new entry's meta (nothing stored yet). */
export function newMeta(url, { size, etag, lastModified, chunkSize }) {
  return { v: META_VERSION, url, size: size ?? null, etag: etag ?? null, lastModified: lastModified ?? null, chunkSize, chunks: 0, complete: false, cachedAt: null };
}

let persistAsked = false;
/**
 * Asks once per page for persistent storage, so the browser does not evict
 * the models under storage pressure. Not awaited: Firefox asks the user and
 * its promise waits for the answer. Workers have no persist().
 */
export function askPersist() {
  if (persistAsked) return;
  persistAsked = true;
  const storage = globalThis.navigator?.storage;
  if (typeof storage?.persist !== "function") return;
  storage.persisted?.()
    .then((already) => (already ? true : storage.persist()))
    .catch(() => {});
}

/**
 * Throws StorageQuotaError when `needed` more bytes do not fit what
 * navigator.storage.estimate() leaves, counting `freed` bytes a stale copy
 * gives back. No estimate (an old browser): no check.
 */
export async function checkQuota(url, needed, freed = 0) {
  const estimate = globalThis.navigator?.storage?.estimate;
  if (typeof estimate !== "function" || needed <= 0) return;
  let est;
  try {
    est = await navigator.storage.estimate();
  } catch {
    return;
  }
  if (typeof est?.quota !== "number") return;
  const available = Math.max(0, est.quota - (est.usage ?? 0) + freed);
  if (needed > available) {
    throw new StorageQuotaError(
      `${url} does not fit the browser's storage: it needs ${needed} bytes, ${available} are available ` +
        "(free space with modelCache.delete or clear, or load with cache: false to stream it without storing it)",
      { url, needed, available },
    );
  }
}

/** What list() says of an entry. */
function describe(meta, kind) {
  return { url: meta.url, size: meta.size, bytes: storedBytes(meta), complete: Boolean(meta.complete), cachedAt: meta.cachedAt, store: kind };
}

/**
 * The app-facing view of the store, the same in a page and in a worker (OPFS
 * and the Cache API are per origin, so both see the same models).
 */
export const modelCache = {
  /**
   * Every stored model: `{ url, size, bytes, complete, cachedAt, store }`;
   * `complete: false` is a download cut short that the next load resumes
   * (`bytes` of `size` stored); `cachedAt` is when it completed (ms since
   * the epoch, null while partial); `store` is "opfs" or "cache".
   */
  async list() {
    const out = [];
    for (const b of await backends()) for (const meta of await b.list()) out.push(describe(meta, b.kind));
    return out.sort((a, b) => a.url.localeCompare(b.url));
  },
  /** Whether `url` is stored whole (a load would read it from the store). */
  async has(url) {
    const hit = await findEntry(absoluteUrl(url));
    return Boolean(hit?.meta.complete);
  },
  /** The stored file as a Blob (its chunks in order, read lazily), or null unless stored whole. */
  async get(url) {
    const hit = await findEntry(absoluteUrl(url));
    if (!hit?.meta.complete) return null;
    const parts = [];
    for (let i = 0; i < hit.meta.chunks; i++) parts.push(await hit.backend.chunk(hit.meta.url, i));
    return new Blob(parts);
  },
  /** Removes `url` (whole or partial) from every store; true if anything was there. */
  async delete(url) {
    const abs = absoluteUrl(url);
    let any = false;
    for (const b of await backends()) any = (await b.remove(abs)) || any;
    if (typeof caches !== "undefined") any = (await (await caches.open(LEGACY_CACHE)).delete(abs)) || any;
    return any;
  },
  /** Removes every stored model; true if there was any. */
  async clear() {
    let any = false;
    for (const b of await backends()) any = (await b.clear()) || any;
    if (typeof caches !== "undefined") any = (await caches.delete(LEGACY_CACHE)) || any;
    return any;
  },
  /**
   * `{ bytes, models, usage, quota }`: bytes the stored models hold (partial
   * ones included), how many are stored whole, and the origin's usage and
   * quota from navigator.storage.estimate() (null where it is missing).
   */
  async usage() {
    const all = await this.list();
    let est = null;
    try {
      est = await globalThis.navigator?.storage?.estimate?.();
    } catch {
      // No estimate here.
    }
    return {
      bytes: all.reduce((s, m) => s + m.bytes, 0),
      models: all.filter((m) => m.complete).length,
      usage: est?.usage ?? null,
      quota: est?.quota ?? null,
    };
  },
};

/**
 * The first `n` bytes of `url` from the store, where its stored chunks
 * cover them (a checkpoint's safetensors header), else null.
 */
export async function storedPrefix(url, n) {
  const hit = await findEntry(absoluteUrl(url));
  if (!hit) return null;
  const { backend, meta } = hit;
  const have = storedBytes(meta);
  if (have < n && !meta.complete) return null;
  const out = new Uint8Array(Math.min(n, have));
  let at = 0;
  for (let i = 0; at < out.length; i++) {
    const part = new Uint8Array(await (await backend.chunk(meta.url, i)).arrayBuffer());
    const take = part.subarray(0, out.length - at);
    out.set(take, at);
    at += take.length;
  }
  return out;
}

/** The old name of `modelCache.delete(url)` / `modelCache.clear()`. */
export function clearCache(url) {
  return url == null ? modelCache.clear() : modelCache.delete(url);
}
