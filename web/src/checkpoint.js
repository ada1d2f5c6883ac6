// A decoder from a Hugging Face checkpoint folder (config.json,
// tokenizer.json, tokenizer_config.json, model.safetensors or the shards
// model.safetensors.index.json lists), for Engine.load. The small files are
// read whole; each shard's header is read from a prefix of it, so the whole
// checkpoint is checked before its first tensor byte is fetched; then every
// shard streams into the engine chunk by chunk (crates/web/src/hf_loader.rs
// converts and uploads each tensor as its bytes arrive), never a whole shard
// in one buffer.

import { WasmHfLoader } from "../pkg/wick_web.js";
import { ModelLoadError } from "./errors.js";
import { call, guard } from "./runtime.js";

const INDEX = "model.safetensors.index.json";
/** A first read of each shard's start: most headers fit (a big model's take more, asked for next). */
const HEADER_GUESS = 64 * 1024;

/**
 * Loads `folder` (an hfFolder) into a WasmEngine (not warmed up yet):
 * `{ wasm, total }`. `report(phase, loaded, total)` hears of it in bytes of
 * the safetensors files, all shards together.
 */
export async function loadCheckpoint(folder, options, report) {
  const { signal, cache = true, download, onStoreFailed, contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead } = options;
  const loader = await guard(WasmHfLoader.create({ contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead }));
  try {
    const set = async (file, optional = false) => {
      const bytes = await folder.bytes(file, { optional });
      if (bytes) call(() => loader.setFile(file, bytes));
      return bytes;
    };
    await set("config.json");
    await set("tokenizer.json");
    await set("tokenizer_config.json", true);
    const index = await set(INDEX, true);
    signal?.throwIfAborted();
    const shards = call(() => loader.shards());
    const lengths = [];
    for (const [i, file] of shards.entries()) {
      await readHeader(folder, loader, i, file, cache).catch((e) => {
        if (index || e?.name !== "ModelLoadError" || e.file !== file) throw e;
        throw new ModelLoadError(`${e.message} (a checkpoint folder holds model.safetensors, or ${INDEX} and the shards it lists)`, { file });
      });
      lengths.push(call(() => loader.shardLength(i)));
    }
    const total = lengths.reduce((a, b) => a + b, 0);
    call(() => loader.begin());
    report("parse", 0, total);
    let done = 0;
    for (const [i, file] of shards.entries()) {
      const before = done;
      // Fetch progress over all shards: this one's bytes after the ones before.
      const onProgress = (p) => report(p.phase, before + p.loaded, total);
      for await (const chunk of folder.chunks(file, { signal, cache, download, onProgress, onStoreFailed })) {
        call(() => loader.push(i, chunk));
        done += chunk.byteLength;
        report("upload", Math.min(done, total), total);
        // Let the page paint and the GPU queue drain between chunks.
        if (chunk.byteLength >= 1 << 20) await new Promise((r) => setTimeout(r, 0));
      }
      call(() => loader.endShard(i));
      done = before + lengths[i];
    }
    signal?.throwIfAborted();
    return { wasm: call(() => loader.finish()), total };
  } catch (e) {
    call(() => loader.abort());
    throw e;
  } finally {
    loader.free();
  }
}

/** Shard `i`'s header, from as much of the file's start as it needs. */
async function readHeader(folder, loader, i, file, cache) {
  let want = HEADER_GUESS;
  for (;;) {
    const bytes = await folder.prefix(file, want, { cache });
    const need = call(() => loader.setHeader(i, bytes));
    if (need === 0) return;
    if (bytes.length < want || need <= bytes.length) {
      throw new ModelLoadError(
        `loading the model failed: ${file}: the file ends inside its safetensors header (${bytes.length} bytes, the header needs ${need})`,
        { file },
      );
    }
    want = need;
  }
}
