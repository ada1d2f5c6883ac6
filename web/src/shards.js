// Split GGUF models (llama.cpp's `gguf-split`): one model in several
// complete GGUF files named NAME-00001-of-00003.gguf, the first holding the
// metadata. Loaded from the first shard's URL (the others' URLs derived by
// name) or from a list of URLs / Files / buffers given in order. Every
// shard's header goes to the engine before any weight, so the plan and the
// memory check see the whole model; then each shard is streamed in turn
// through readSource (and so through its cache), never held whole.

import { ModelLoadError, WickError } from "./errors.js";
import { readStart } from "./header.js";
import { readSource } from "./source.js";

/** The first read of a later shard's header: tensor infos only (9 KB in the synthetic 8B's second shard). */
const LATER_HEADER_READ = 64 * 1024;

const SHARD_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;

/**
 * The shards `source` names, in order, or null where it is one file (or a
 * Hugging Face folder): a URL whose name is `-00001-of-000NN.gguf` with
 * NN > 1, or an array of URLs, Files/Blobs or buffers (Files named *.gguf:
 * an array of other Files is a checkpoint folder).
 */
export function shardSources(source) {
  if (Array.isArray(source)) return source.length > 0 && source.every(isShard) ? source.slice() : null;
  if (typeof source !== "string" && !(source instanceof URL)) return null;
  const url = new URL(String(source), globalThis.location?.href);
  const m = SHARD_NAME.exec(url.pathname);
  if (!m) return null;
  const [no, count] = [Number(m[1]), Number(m[2])];
  if (count < 2 || no < 1 || no > count) return null;
  if (no !== 1) {
    throw new ModelLoadError(
      `${url.href} is shard ${no} of ${count} of a split model: load it by the first shard's URL (-00001-of-${m[2]}.gguf)`,
      { file: url.href },
    );
  }
  return Array.from({ length: count }, (_, i) => {
    const u = new URL(url.href);
    u.pathname = url.pathname.replace(SHARD_NAME, `-${String(i + 1).padStart(5, "0")}-of-${m[2]}.gguf`);
    return u.href;
  });
}

function isShard(s) {
  if (typeof s === "string" || s instanceof URL) return true;
  if (s instanceof ArrayBuffer || ArrayBuffer.isView(s)) return true;
  if (typeof File !== "undefined" && s instanceof File) return s.name.endsWith(".gguf");
  return typeof Blob !== "undefined" && s instanceof Blob;
}

/** A shard's name for messages: its URL or file name, else its place. */
function nameOf(source, i) {
  if (typeof source === "string" || source instanceof URL) return new URL(String(source), globalThis.location?.href).href;
  if (typeof File !== "undefined" && source instanceof File) return source.name;
  return `shard ${i + 1}`;
}

/**
 * Streams the shards into a split WasmLoader (`createSplit`), reporting
 * `report(phase, loaded, total)` over all shards; `call` runs a wasm call
 * (turning its errors into typed ones). Returns the total in bytes.
 */
export async function streamShards(loader, shards, { signal, onProgress, cache, download, onStoreFailed }, report, call) {
  const n = shards.length;
  const names = shards.map(nameOf);
  // Each shard's size as its reader reports it, once known.
  const sizes = new Array(n).fill(null);
  let before = 0;
  const progressOf = (i, quiet) => (p) => {
    if (p.total != null) sizes[i] = p.total;
    if (quiet) return;
    const known = sizes.every((s) => s != null);
    const total = known ? sizes.reduce((a, b) => a + b, 0) : null;
    onProgress?.({ phase: p.phase, loaded: before + p.loaded, total });
  };
  // A shard that cannot be read is a ModelLoadError naming it; so is one
  // the server does not have (a 404: the model is incomplete). Other typed
  // errors (a download that kept failing, the storage quota) pass through.
  const named = (i, e) => {
    if (e?.name === "AbortError") return e;
    if (e instanceof WickError && !(e.code === "download" && e.status === 404)) return e;
    return new ModelLoadError(`loading the model failed: shard ${i + 1} of ${n} (${names[i]}): ${e?.message ?? e}`, {
      file: names[i],
    });
  };
  const pull = async (i, it) => {
    try {
      return await it.next();
    } catch (e) {
      throw named(i, e);
    }
  };

  // Headers. The first shard's reader is kept open, paused after its
  // header, with the chunks it gave; the others' headers (tensor infos
  // only) are read in small Range requests (or from the store), not
  // through their readers: a reader stopped after its header would have
  // started downloading the whole shard, and dropped a partial copy of it
  // kept for resuming.
  const first = readSource(shards[0], { signal, cache, download, onStoreFailed, onProgress: progressOf(0, false) });
  const kept = [];
  let parsed = false;
  try {
    for (let i = 0; i < n; i++) {
      if (i > 0) {
        try {
          const { size } = await readStart(shards[i], (bytes) => call(() => loader.pushHeader(i, bytes)), {
            first: LATER_HEADER_READ, signal, cache, name: `shard ${i + 1} of ${n} (${names[i]})`,
          });
          if (size != null) sizes[i] = size;
        } catch (e) {
          throw named(i, e);
        }
        continue;
      }
      let complete = false;
      while (!complete) {
        const { done, value } = await pull(i, first);
        if (done) {
          throw new ModelLoadError(`loading the model failed: shard ${i + 1} of ${n} (${names[i]}) ends inside its header`, {
            file: names[i],
          });
        }
        kept.push(value);
        complete = call(() => loader.pushHeader(i, value));
      }
    }
    let p = null;
    // Each shard from its start: the first's kept chunks, then the rest.
    for (let i = 0; i < n; i++) {
      const it = i === 0 ? first : readSource(shards[i], { signal, cache, download, onStoreFailed, onProgress: progressOf(i, false) });
      const chunks = i === 0 ? kept.splice(0) : [];
      for (;;) {
        let chunk = chunks.shift();
        if (chunk === undefined) {
          const { done, value } = await pull(i, it);
          if (done) break;
          chunk = value;
        }
        p = call(() => loader.pushShard(i, chunk));
        if (!parsed) report("parse", p.loaded, p.total);
        parsed = true;
        report("upload", Math.min(p.loaded, p.total), p.total);
        // Let the page paint and the GPU queue drain between chunks.
        if (chunk.byteLength >= 1 << 20) await new Promise((r) => setTimeout(r, 0));
      }
      before += sizes[i] ?? 0;
    }
    return p?.total ?? 0;
  } finally {
    await first.return?.();
  }
}
