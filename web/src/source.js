// Reading a model's bytes in order, in chunks, from a URL (streamed, in
// Range requests where the server allows them, optionally through the Cache
// API), a File/Blob, an ArrayBuffer or a ReadableStream. Nothing here holds
// a whole model in memory.

const MiB = 1 << 20;
/** Bytes asked for per Range request. */
export const RANGE_BYTES = 64 * MiB;
export const CACHE_NAME = "wick-models-v1";

/**
 * Async iterator of Uint8Array chunks of `source`, reporting
 * `onProgress({ phase, loaded, total })` with phase "fetch", "cache" or "read".
 */
export async function* readSource(source, { signal, onProgress, cache = false } = {}) {
  const report = (phase, loaded, total) => onProgress?.({ phase, loaded, total });
  if (typeof source === "string" || source instanceof URL) {
    yield* readUrl(String(source), { signal, report, cache });
  } else if (typeof Blob !== "undefined" && source instanceof Blob) {
    yield* readStream(source.stream(), source.size, "read", { signal, report });
  } else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof ArrayBuffer
      ? new Uint8Array(source)
      : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    const step = 16 * MiB;
    for (let at = 0; at < bytes.length; at += step) {
      signal?.throwIfAborted();
      const chunk = bytes.subarray(at, Math.min(at + step, bytes.length));
      report("read", at + chunk.length, bytes.length);
      yield chunk;
    }
  } else if (typeof Response !== "undefined" && source instanceof Response) {
    yield* readResponse(source, "model response", "fetch", { signal, report });
  } else if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream) {
    yield* readStream(source, null, "read", { signal, report });
  } else {
    throw new TypeError(
      "Engine.load: source must be a URL string, URL, File, Blob, ArrayBuffer, typed array, Response or ReadableStream " +
        "(a GGUF file), or a Hugging Face folder: its URL ending in \"/\", a FileList or array of Files, or { path: Blob }",
    );
  }
}

async function* readStream(stream, total, phase, { signal, report }) {
  const reader = stream.getReader();
  let loaded = 0;
  try {
    for (;;) {
      signal?.throwIfAborted();
      const { done, value } = await reader.read();
      if (done) break;
      loaded += value.byteLength;
      report(phase, loaded, total);
      yield value;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function readResponse(res, what, phase, opts) {
  if (!res.ok) {
    throw new Error(`fetching ${what} failed: HTTP ${res.status} ${res.statusText}`.trim());
  }
  if (!res.body) throw new Error(`fetching ${what} failed: the response has no body`);
  const len = Number(res.headers.get("content-length"));
  return readStream(res.body, len > 0 ? len : null, phase, opts);
}

async function fetchOrThrow(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (e?.name === "AbortError") throw e;
    throw new Error(`fetching ${url} failed: ${e?.message ?? e}`);
  }
}

/** `bytes START-END/TOTAL` of a 206 response. */
function contentRange(res) {
  const m = /bytes\s+(\d+)-(\d+)\/(\d+|\*)/.exec(res.headers.get("content-range") ?? "");
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === "*" ? null : Number(m[3]) };
}

/** The file as one stream of chunks: Range requests in turn where the server
 *  answers 206, else the plain 200 body. Sets `meta.total` once known. */
async function* fetchChunks(url, signal, meta) {
  let res = await fetchOrThrow(url, { signal, headers: { Range: `bytes=0-${RANGE_BYTES - 1}` } });
  const range = res.status === 206 ? contentRange(res) : null;
  if (!range || range.start !== 0 || range.total == null) {
    if (!res.ok) throw new Error(`fetching ${url} failed: HTTP ${res.status} ${res.statusText}`.trim());
    const len = Number(res.headers.get("content-length"));
    meta.total = len > 0 ? len : null;
    meta.ranges = false;
    yield* chunksOf(res);
    return;
  }
  meta.total = range.total;
  meta.ranges = true;
  let offset = 0;
  for (;;) {
    for await (const chunk of chunksOf(res)) {
      offset += chunk.byteLength;
      yield chunk;
    }
    if (offset >= range.total) return;
    const end = Math.min(offset + RANGE_BYTES, range.total) - 1;
    res = await fetchOrThrow(url, { signal, headers: { Range: `bytes=${offset}-${end}` } });
    const r = res.status === 206 ? contentRange(res) : null;
    if (!r || r.start !== offset) {
      throw new Error(`fetching ${url} failed: range ${offset}-${end} answered HTTP ${res.status}`);
    }
  }
}

async function* chunksOf(res) {
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

async function* readUrl(url, { signal, report, cache }) {
  const abs = new URL(url, globalThis.location?.href).href;
  const store = cache && typeof caches !== "undefined" ? await caches.open(CACHE_NAME) : null;
  const hit = store ? await store.match(abs) : null;
  if (hit) {
    yield* readResponse(hit, abs, "cache", { signal, report });
    return;
  }
  const meta = {};
  // Our own controller, so a failed load also stops the cache's copy.
  const ac = new AbortController();
  const onAbort = () => ac.abort(signal.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    yield* fetchInto(abs, store, meta, ac, { signal, report });
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

async function* fetchInto(abs, store, meta, ac, { signal, report }) {
  const chunks = fetchChunks(abs, ac.signal, meta);
  if (!store) {
    let loaded = 0;
    for await (const chunk of chunks) {
      loaded += chunk.byteLength;
      report("fetch", loaded, meta.total);
      yield chunk;
    }
    return;
  }
  // Write through to the cache: one branch of a tee goes to cache.put, which
  // stores it only if the whole stream arrives.
  const first = await chunks.next();
  const stream = new ReadableStream({
    start(c) {
      if (first.done) c.close();
      else c.enqueue(first.value);
    },
    async pull(c) {
      const { done, value } = await chunks.next();
      if (done) c.close();
      else c.enqueue(value);
    },
    cancel(reason) {
      chunks.return(reason);
    },
  });
  const [forUs, forCache] = stream.tee();
  const headers = meta.total ? { "content-length": String(meta.total) } : {};
  const stored = store.put(abs, new Response(forCache, { headers })).catch(() => {});
  let ok = false;
  try {
    yield* readStream(forUs, meta.total, "fetch", { signal, report });
    ok = true;
  } finally {
    if (!ok) ac.abort(new DOMException("model load failed", "AbortError"));
    await stored;
    if (!ok) await store.delete(abs).catch(() => {});
  }
}

/** Removes `url` (or every model) from the cache `Engine.load(..., { cache: true })` fills. */
export async function clearCache(url) {
  if (typeof caches === "undefined") return false;
  if (url == null) return caches.delete(CACHE_NAME);
  const store = await caches.open(CACHE_NAME);
  return store.delete(new URL(url, globalThis.location?.href).href);
}
