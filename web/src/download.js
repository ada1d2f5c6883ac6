// Fetching one file in chunks: Range requests of `chunkSize` bytes, a few at
// once, handed on in file order (at most `parallel` chunks fetched ahead of
// the one being read, so memory stays bounded); a chunk whose connection
// drops or whose request fails is asked for again from its first missing
// byte, a bounded number of times with a growing pause, then a
// DownloadError names the URL and that byte. A server that ignores Range
// (a 200 answer) gives one plain stream, cut into chunks of the same size.

import { DownloadError, InvalidRequestError } from "./errors.js";

const MiB = 1 << 20;
/** The `download` load option's defaults. */
export const DOWNLOAD_DEFAULTS = Object.freeze({ chunkSize: 16 * MiB, parallel: 4, retries: 5, retryDelay: 500 });

/** The `download` option checked, defaults filled in. */
export function downloadOptions(o = {}) {
  if (o === null || typeof o !== "object") throw new InvalidRequestError("download", "must be an object");
  const out = { ...DOWNLOAD_DEFAULTS };
  const int = (k, min, max) => {
    if (o[k] === undefined) return;
    if (!Number.isInteger(o[k]) || o[k] < min || o[k] > max) {
      throw new InvalidRequestError(`download.${k}`, `must be an integer from ${min} to ${max}, got ${JSON.stringify(o[k])}`);
    }
    out[k] = o[k];
  };
  int("chunkSize", 64 * 1024, 1024 * MiB);
  int("parallel", 1, 16);
  int("retries", 0, 20);
  int("retryDelay", 0, 60_000);
  return out;
}

/** `bytes START-END/TOTAL` of a 206 response. */
function contentRange(res) {
  const m = /bytes\s+(\d+)-(\d+)\/(\d+|\*)/.exec(res.headers.get("content-range") ?? "");
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === "*" ? null : Number(m[3]) };
}

/** The validators a response gives: size (of the whole file), ETag, Last-Modified. */
function validators(res, size) {
  return { size, etag: res.headers.get("etag"), lastModified: res.headers.get("last-modified") };
}

/**
 * A 200 body's length from Content-Length, null where it is missing or
 * counts encoded bytes (Content-Encoding: fetch hands on the decoded body).
 */
function bodyLength(res) {
  const encoding = res.headers.get("content-encoding");
  if (encoding && encoding !== "identity") return null;
  const len = Number(res.headers.get("content-length"));
  return len > 0 ? len : null;
}

/** Statuses worth asking again: timeouts, throttling, server errors. */
const retryable = (status) => status === 408 || status === 429 || status >= 500;

function httpError(url, res, offset) {
  return new DownloadError(`fetching ${url} failed: HTTP ${res.status} ${res.statusText}`.trim(), { url, offset, status: res.status });
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });
}

/**
 * A HEAD request's answer: `{ ok, status, statusText, size, etag,
 * lastModified }`, or `{ ok: false, status: 0 }` when the network failed
 * (the store may still serve a whole copy).
 */
export async function probe(url, signal) {
  let res;
  try {
    res = await fetch(url, { method: "HEAD", signal });
  } catch (e) {
    if (e?.name === "AbortError") throw e;
    return { ok: false, status: 0, statusText: String(e?.message ?? e) };
  }
  return { ok: res.ok, status: res.status, statusText: res.statusText, ...validators(res, res.ok ? bodyLength(res) : null) };
}

/**
 * Starts fetching `url` from byte `from` (a multiple of `chunkSize`) and
 * resolves once the first answer's headers are in, before its body is read:
 * `{ size, etag, lastModified, ranges, from, chunks() }`. `ranges` false: the
 * server sent the whole file (200), so `from` is 0 whatever was asked.
 * `chunks()` yields `{ index, bytes }` in file order, index counted in
 * chunks from the file's start; `onBytes(n)` hears of every new byte
 * received, each byte once (a retried range asks only for what is missing).
 * `expect`: the size and ETag the file had, so a change midway is an error.
 * `onPrefix(bytes)`: while the file's first chunk arrives (a download from
 * byte 0), its bytes so far, after every read (a loader parses the header
 * from them before the chunk is whole).
 */
export async function startDownload(url, { from = 0, opts, signal, onBytes = () => {}, expect = {}, onPrefix }) {
  const { chunkSize, parallel, retries, retryDelay } = opts;
  // Our own controller: a consumer that stops early cancels every request.
  const ac = new AbortController();
  const onAbort = () => ac.abort(signal.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const stop = () => {
    signal?.removeEventListener("abort", onAbort);
    ac.abort(new DOMException("the download was stopped", "AbortError"));
  };

  const get = async (start, end) => {
    const headers = end == null ? {} : { Range: `bytes=${start}-${end}` };
    return fetch(url, { signal: ac.signal, headers });
  };
  const guessEnd = (start) => start + chunkSize - 1;

  // The first request, retried as any chunk is.
  let first;
  for (let tries = 0; ; tries++) {
    try {
      first = await get(from, guessEnd(from));
      if (first.ok || !retryable(first.status)) break;
      if (tries >= retries) break;
      first.body?.cancel().catch(() => {});
    } catch (e) {
      if (e?.name === "AbortError") {
        stop();
        throw e;
      }
      if (tries >= retries) {
        stop();
        throw new DownloadError(`fetching ${url} failed at byte ${from} after ${tries + 1} tries: ${e?.message ?? e}`, { url, offset: from });
      }
    }
    await sleep(retryDelay * 2 ** tries, ac.signal).catch((e) => {
      stop();
      throw e;
    });
  }
  const range = first.status === 206 ? contentRange(first) : null;
  if (!first.ok || (first.status === 206 && (!range || range.start !== from || range.total == null))) {
    stop();
    first.body?.cancel().catch(() => {});
    if (!first.ok) throw httpError(url, first, from);
    throw new DownloadError(`fetching ${url} failed: the server answered bytes ${from}- with ${first.headers.get("content-range")}`, { url, offset: from });
  }
  const ranges = first.status === 206;
  const size = ranges ? range.total : bodyLength(first);
  const v = validators(first, size);
  const changed = (res, total) =>
    (expect.size != null && total != null && total !== expect.size) ||
    (expect.etag && res.headers.get("etag") && res.headers.get("etag") !== expect.etag);
  if (changed(first, size)) {
    stop();
    first.body?.cancel().catch(() => {});
    throw new DownloadError(`fetching ${url} failed: the file changed on the server (size or ETag) during the load; load it again`, { url, offset: from });
  }

  async function* plain() {
    let index = 0;
    let buf = new Uint8Array(size == null ? chunkSize : Math.min(chunkSize, size));
    let at = 0;
    let offset = 0;
    const reader = first.body.getReader();
    try {
      for (;;) {
        let r;
        try {
          r = await reader.read();
        } catch (e) {
          if (e?.name === "AbortError") throw e;
          throw new DownloadError(`fetching ${url} failed at byte ${offset} (the server does not answer Range requests, so it cannot resume): ${e?.message ?? e}`, { url, offset });
        }
        if (r.done) break;
        let piece = r.value;
        if (size != null && offset + piece.byteLength > size) {
          throw new DownloadError(`fetching ${url} failed at byte ${offset}: the body is longer than its Content-Length ${size}`, { url, offset });
        }
        onBytes(piece.byteLength);
        while (piece.byteLength) {
          const n = Math.min(piece.byteLength, buf.length - at);
          buf.set(piece.subarray(0, n), at);
          at += n;
          offset += n;
          piece = piece.subarray(n);
          if (index === 0 && at < buf.length) onPrefix?.(buf.subarray(0, at));
          if (at === buf.length) {
            yield { index: index++, bytes: buf };
            buf = new Uint8Array(size == null ? chunkSize : Math.min(chunkSize, size - offset));
            at = 0;
          }
        }
      }
      if (size != null && offset !== size) {
        throw new DownloadError(`fetching ${url} failed at byte ${offset}: the body ended before its ${size} bytes`, { url, offset });
      }
      if (at > 0) yield { index, bytes: buf.subarray(0, at) };
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /** Chunk `k` of the download: fetched (from `res` first, for chunk 0) until whole. */
  async function fill(k, res) {
    const start = from + k * chunkSize;
    const end = Math.min(start + chunkSize, size);
    const buf = new Uint8Array(end - start);
    let got = 0;
    let failures = 0;
    for (;;) {
      let error = null;
      const before = got;
      try {
        res ??= await get(start + got, end - 1);
        const r = res.status === 206 ? contentRange(res) : null;
        if (!r || r.start !== start + got || r.total !== size || r.end >= end || changed(res, r.total)) {
          res.body?.cancel().catch(() => {});
          if (r && (r.total !== size || changed(res, r.total))) {
            throw new DownloadError(`fetching ${url} failed: the file changed on the server during the load; load it again`, { url, offset: start + got });
          }
          if (!res.ok && !retryable(res.status)) throw httpError(url, res, start + got);
          throw new Error(`bytes ${start + got}-${end - 1} answered HTTP ${res.status} ${res.headers.get("content-range") ?? ""}`.trim());
        }
        const reader = res.body.getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            if (got + value.byteLength > buf.length) throw new Error("the server sent more bytes than asked for");
            buf.set(value, got);
            got += value.byteLength;
            onBytes(value.byteLength);
            if (start === 0 && got < buf.length) onPrefix?.(buf.subarray(0, got));
          }
        } finally {
          reader.cancel().catch(() => {});
        }
        if (got === buf.length) return buf;
        // A clean end short of the range (a server that caps ranges): ask for the rest.
        if (got === before) error = new Error("the response ended with no bytes");
      } catch (e) {
        if (e?.name === "AbortError" || e instanceof DownloadError) throw e;
        error = e;
      }
      res = null;
      if (error) {
        failures++;
        if (failures > retries) {
          throw new DownloadError(
            `fetching ${url} failed at byte ${start + got} after ${failures} tries: ${error?.message ?? error}`,
            { url, offset: start + got },
          );
        }
        await sleep(retryDelay * 2 ** (failures - 1), ac.signal);
      }
    }
  }

  async function* ranged() {
    const n = Math.ceil((size - from) / chunkSize);
    const tasks = new Map();
    const launch = (k) => {
      const p = fill(k, k === 0 ? first : null);
      p.catch(() => {}); // awaited in order below; an early failure must not be "unhandled"
      tasks.set(k, p);
    };
    for (let k = 0; k < Math.min(parallel, n); k++) launch(k);
    for (let k = 0; k < n; k++) {
      const bytes = await tasks.get(k);
      tasks.delete(k);
      if (k + parallel < n) launch(k + parallel);
      yield { index: from / chunkSize + k, bytes };
    }
  }

  async function* chunks() {
    try {
      yield* ranges ? ranged() : plain();
    } finally {
      stop();
    }
  }

  return {
    ...v,
    ranges,
    from: ranges ? from : 0,
    chunks,
    /** Stops before chunks() is read (a quota refusal, a stale partial copy). */
    cancel() {
      stop();
      first.body?.cancel().catch(() => {});
    },
  };
}
