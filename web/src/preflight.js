// The memory preflight before a download: the start of each file of a
// model (one GGUF, or every shard of a split one) is read (a Range request
// of the first 8 MiB, 64 KiB of a later shard, again for twice as much
// while the header is longer; from the
// model store where it holds those bytes), the page's GPU is opened with
// the load's options, and the engine says what the model would hold there
// and whether it fits: the load's own checks and sums (WasmPreflight,
// wick::engine::preflight_headers), not a copy of them here.

import { WasmPreflight } from "../pkg/wick_web.js";
import { InvalidRequestError } from "./errors.js";
import { readStart } from "./header.js";
import { checkCache } from "./model-cache.js";
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
  const name = files.length > 1 ? `shard ${i + 1} of ${files.length}` : "the file";
  const { read } = await readStart(files[i], (bytes) => call(() => p.pushHeader(i, bytes)), {
    first: i === 0 ? FIRST_READ : LATER_READ, signal, cache, name,
  });
  return read;
}
