// wick: LLM inference on WebGPU in the browser.
//
//   import { Engine } from "wick";
//   const engine = await Engine.load(url, { onProgress });
//   for await (const chunk of engine.generate("Once upon a time", { maxTokens: 32 }))
//     out += chunk.text;
//
// See docs/javascript.md and index.d.ts for the whole API.

import { liveGpuMemory as wasmLiveGpuMemory, releaseGpu as wasmReleaseGpu, WasmLoader, version as wasmVersion } from "../pkg/wick_web.js";
import { ChatCompletionStream, createChat } from "./chat.js";
import { InvalidRequestError, isFatal } from "./errors.js";
import { abortError, call, checkWebGPU, guard, initWasm, NO_WEBGPU } from "./runtime.js";
import { loadCheckpoint } from "./checkpoint.js";
import { hfFolder, isFolderSource } from "./hf-folder.js";
import { readSource } from "./source.js";
import { checkCache, clearCache, modelCache } from "./model-cache.js";
import { shardSources, streamShards } from "./shards.js";

export { ChatCompletionStream, clearCache, modelCache, NO_WEBGPU };
export { DOWNLOAD_DEFAULTS } from "./download.js";
export {
  AbortError,
  ContextWindowExceededError,
  DeviceLostError,
  DownloadError,
  GpuValidationError,
  InvalidRequestError,
  ModelLoadError,
  OutOfMemoryError,
  StorageQuotaError,
  UnsupportedFieldError,
  WasmLoadError,
  WebGPUUnavailableError,
  WickError,
} from "./errors.js";
export { createWorkerEngine, WorkerEngine } from "./worker-client.js";
export { preflight } from "./preflight.js";
export { EmbeddingEngine } from "./embeddings.js";

/** Sampling defaults: mild temperature with nucleus and top-k cuts. `temperature: 0` is greedy. */
export const DEFAULTS = Object.freeze({ maxTokens: 256, temperature: 0.7, topK: 40, topP: 0.95 });

/**
 * The engine's own count of live GPU memory over every Engine on this page
 * (not those in workers): `{ liveBytes, liveBuffers, liveBindGroups }`. Once
 * every engine is disposed it holds only the page's GPU context (its uniform
 * arena, kept for the next load; one context for each `limits` choice the
 * page loaded with), and nothing after `releaseGpu()`. Call after `init()`
 * or a load.
 */
export function liveGpuMemory() {
  return call(() => wasmLiveGpuMemory());
}

/**
 * Lets go of the page's GPU device and the kernels compiled on it. Every
 * Engine and EmbeddingEngine of the page shares one device, kept between
 * loads so that a second load (another model, or the same one again after
 * dispose) compiles only what the first did not; engines still loaded keep
 * theirs until disposed, and the next load opens a new device. Call after
 * `init()` or a load.
 */
export function releaseGpu() {
  call(() => wasmReleaseGpu());
}

/** Instantiates the wasm module now (Engine.load does it on first use). */
export async function init(wasmUrl) {
  await initWasm(wasmUrl);
  return wasmVersion();
}

/** One generation: an async iterable of `{ text, tokenId }`; `result` is set when it ends. */
export class TokenRun {
  constructor(gen) {
    this._gen = gen;
    /** `{ finishReason, stats, ids }` once the iteration finished. */
    this.result = null;
  }
  [Symbol.asyncIterator]() {
    return this._gen;
  }
  next() {
    return this._gen.next();
  }
  return(v) {
    return this._gen.return(v);
  }
  /** All text joined (runs the generation to the end). */
  async text() {
    let s = "";
    for await (const c of this) s += c.text;
    return s;
  }
}

export class Engine {
  #w;
  #info;
  #queue = Promise.resolve();
  #disposed = false;
  /** The DeviceLostError (or OutOfMemoryError, GpuValidationError) that made the engine unusable. */
  #lost = null;

  /** @internal use Engine.load; `name`: a checkpoint folder's, where the model names none. */
  constructor(wasmEngine, name) {
    this.#w = wasmEngine;
    this.#info = call(() => wasmEngine.info());
    if (name) this.#info.model.name ??= name;
    /** The last finished generation's `{ finishReason, stats, ids }`. */
    this.lastResult = null;
    /** OpenAI-shaped chat: `engine.chat.completions.create({ messages, stream })`. */
    this.chat = createChat({
      checkTools: (tools, choice) => this.#checkTools(tools, choice),
      promptIds: (messages, tools, kwargs) => this.#promptIds(messages, tools, kwargs),
      tokens: (ids, opts) => this.#tokens(ids, opts),
      modelName: () => this.#info.model.name ?? this.#info.model.architecture,
      contextLength: () => this.#info.model.contextLength,
    });
  }

  /**
   * Loads a model: a GGUF file, a split GGUF, or a Hugging Face checkpoint
   * folder. GGUF `source`: URL string | URL | File | Blob | ArrayBuffer |
   * typed array | Response | ReadableStream. Split GGUF (llama.cpp's
   * gguf-split shards): the first shard's URL (NAME-00001-of-0000N.gguf; the
   * others are found by name beside it), or an array of the shards in order
   * (URLs, Files named *.gguf, Blobs or buffers). Folder `source`: its URL ending in "/", a
   * FileList or array of Files (a folder picker's), or an object or Map of
   * `{ "path/in/folder": Blob }`; it holds config.json, tokenizer.json,
   * optionally tokenizer_config.json, and model.safetensors or the shards
   * model.safetensors.index.json lists (F32, F16 or BF16). The bytes are
   * streamed into GPU buffers tensor by tensor; no file is held whole in
   * memory. `quantize: "q8_0"` quantizes a checkpoint's matrices at load.
   * A URL is kept in the persistent model store (`cache`, default true where
   * the browser has one; see modelCache) and downloaded in parallel Range
   * requests that retry and resume (`download`).
   */
  static async load(source, options = {}) {
    const { onProgress, signal, wasmUrl, warmUp = true } = options;
    if (typeof warmUp !== "boolean") throw new InvalidRequestError("warmUp", `must be true or false, got ${JSON.stringify(warmUp)}`);
    checkCache(options.cache ?? true);
    // The load's phases (info().load): opening (the wasm module, the GPU
    // device, the first request) up to the first byte, the bytes read and
    // uploaded (one stream), the engine built, the warm-up (pipelines
    // created, then one step: where the kernels compile).
    const started = performance.now();
    checkWebGPU();
    // A GGUF's first request goes out while the wasm module instantiates
    // (loadGguf awaits it); the other sources await it first.
    const wasmReady = init(wasmUrl);
    wasmReady.catch(() => {});
    const marks = {};
    // Files the model store could not keep (the load went on without them).
    const notStored = [];
    // With the warm-up, the model's pipelines are asked for as soon as its
    // header is read, so they compile while the weights download; only
    // where the browser keeps one pipeline per descriptor (Chromium's
    // Dawn), which the warm-up then finds compiled: elsewhere each would
    // compile twice.
    const compileAhead = warmUp && keepsOnePipelinePerDescriptor();
    const loadOptions = { ...options, compileAhead, onStoreFailed: (f) => notStored.push(f) };
    const report = (phase, loaded, total) => {
      const now = performance.now();
      marks[phase] ??= now;
      if (phase !== "warmup" && phase !== "ready") marks.lastByte = now;
      onProgress?.({ phase, loaded, total });
    };
    // A split GGUF (its first shard's URL, or a list of shards) before a
    // folder: an array of *.gguf Files is a split model, other Files a checkpoint.
    const shards = shardSources(source);
    const folder = !shards && isFolderSource(source) ? hfFolder(source, { signal }) : null;
    // A list of one is that file.
    const several = shards && shards.length > 1;
    if (several || folder) {
      await wasmReady;
      signal?.throwIfAborted();
    }
    const { wasm, total } = several
      ? await loadShards(shards, loadOptions, report)
      : folder
        ? await loadCheckpoint(folder, loadOptions, report)
        : await loadGguf(shards ? shards[0] : source, loadOptions, report, wasmReady);
    const engine = new Engine(wasm, folder?.name);
    // Compile every pipeline and run one step now, not on the first token
    // (unless asked not to: then each compiles when first used).
    let pipelinesCreated = null;
    let pipelinesAhead = null;
    const built = performance.now();
    if (warmUp) {
      report("warmup", total, total);
      ({ created: pipelinesCreated, ahead: pipelinesAhead } = await guard(engine.#w.warmUp()));
    }
    // A draft model for speculative: "draft", loaded as this one is (the
    // same device limits, store and download settings) and attached.
    if (options.draftModel !== undefined) {
      try {
        const { draftModel, onProgress } = options;
        const same = ["signal", "wasmUrl", "warmUp", "cache", "download", "limits", "contextLength", "prefillChunk", "tokensPerSubmit", "kvCache", "activations"];
        const draftOptions = Object.fromEntries(same.filter((k) => options[k] !== undefined).map((k) => [k, options[k]]));
        if (onProgress) draftOptions.onProgress = (p) => onProgress({ ...p, draft: true });
        await engine.setDraftModel(await Engine.load(draftModel, draftOptions));
      } catch (e) {
        await engine.dispose();
        throw e;
      }
    }
    // Generations draft tokens unless they say otherwise (the pass's
    // pipelines are created now where the load warms up).
    if (options.speculative !== undefined || options.draftTokens !== undefined) {
      const { speculative, draftTokens } = options;
      try {
        await guard(engine.#w.setSpeculation({ speculative, draftTokens }));
        engine.#info.speculative = call(() => engine.#w.info()).speculative;
      } catch (e) {
        await engine.dispose();
        throw e;
      }
    }
    const warmed = performance.now();
    await engine.#describeAdapter();
    report("ready", total, total);
    const ms = (a, b) => Math.round(b - a);
    const lastByte = marks.lastByte ?? built;
    const firstByte = Math.min(...["fetch", "cache", "read", "parse"].map((p) => marks[p] ?? Infinity), lastByte);
    engine.#info.load = {
      totalMs: ms(started, performance.now()),
      phasesMs: {
        open: ms(started, firstByte),
        bytes: ms(firstByte, lastByte),
        build: ms(lastByte, built),
        warmUp: ms(built, warmed),
      },
      bytes: total,
      pipelinesCreated,
      pipelinesAhead,
      notStored,
    };
    return engine;
  }

  /** Adapter, features (and whether the f16 or f32 path runs), limits, model config. */
  info() {
    return structuredClone(this.#info);
  }

  /** Token ids of `text` (BOS where the model asks for it; special-token text not parsed by default). */
  tokenize(text, { addSpecial = true, parseSpecial = false } = {}) {
    this.#live();
    return Array.from(call(() => this.#w.tokenize(String(text), addSpecial, parseSpecial)));
  }

  /** The text of token ids (control tokens hidden unless `skipSpecial: false`). */
  decode(ids, { skipSpecial = true } = {}) {
    this.#live();
    return call(() => this.#w.decode(Uint32Array.from(ids), skipSpecial));
  }

  /**
   * The model's chat template applied to `messages` (as Hugging Face renders
   * it); `kwargs`: more template variables (`{ enable_thinking: false }`).
   */
  applyChatTemplate(messages, { addGenerationPrompt = true, tools, kwargs } = {}) {
    this.#live();
    const t = tools ? JSON.stringify(tools) : undefined;
    // The engine refuses kwargs that are not an object (InvalidRequestError).
    const k = kwargs === undefined || kwargs === null ? undefined : JSON.stringify(kwargs);
    return call(() => this.#w.applyChatTemplate(JSON.stringify(messages), addGenerationPrompt, t, k));
  }

  /**
   * Streams a completion of `prompt` (text, or token ids used verbatim):
   * `for await (const { text, tokenId } of engine.generate(prompt, opts))`.
   * Options: maxTokens, temperature (0 = greedy), topK, topP, seed, stopIds,
   * signal (an abort ends the iteration by throwing an AbortError); at most
   * one of jsonSchema (an object), regex (a string) and grammar (Lark text)
   * makes every token match it (constrained decoding, one token a submit).
   */
  generate(prompt, options = {}) {
    const ids = typeof prompt === "string" ? this.tokenize(prompt) : Array.from(prompt);
    return this.#tokens(ids, options);
  }

  /**
   * Attaches `draft`, another Engine of this page loaded with the same
   * `limits` and the same vocabulary (token for token: a refusal names the
   * first token that differs), as the draft model of `speculative:
   * "draft"`. `draft` is taken: it drafts for this engine from now on and
   * is disposed with it; the caller's `draft` is disposed. (`draftModel`,
   * a load option, loads and attaches one.)
   */
  async setDraftModel(draft) {
    this.#live();
    if (!(draft instanceof Engine)) throw new InvalidRequestError("draftModel", "must be an Engine (or, as a load option, a model source)");
    if (draft === this) throw new InvalidRequestError("draftModel", "an engine cannot draft for itself: load the model again for that");
    draft.#live();
    await draft.#queue.catch(() => {});
    call(() => this.#w.checkDraftModel(draft.#w));
    draft.#disposed = true;
    call(() => this.#w.setDraftModel(draft.#w));
    this.#info.speculative = call(() => this.#w.info()).speculative;
  }

  /** Frees the GPU memory now; waits for a running generation to stop first. */
  async dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    await this.#queue.catch(() => {});
    call(() => this.#w.dispose());
  }

  /** wgpu reports no adapter name on the web; ask the browser for it. */
  async #describeAdapter() {
    const a = this.#info.adapter;
    if (a.name) return;
    try {
      const info = (await navigator.gpu.requestAdapter())?.info;
      const parts = [info?.vendor, info?.architecture, info?.description].filter(Boolean);
      a.name = [...new Set(parts)].join(" ");
    } catch {
      // The name is only informative.
    }
  }

  #live() {
    if (this.#lost) throw this.#lost;
    if (this.#disposed) throw new Error("this engine was disposed");
  }

  /** @internal Destroys the GPU device (the browser tests' lost GPU). */
  __testLoseDevice() {
    call(() => this.#w.__testLoseDevice());
  }

  #checkTools(tools, choice) {
    this.#live();
    const json = (v) => (v === undefined || v === null ? undefined : JSON.stringify(v));
    call(() => this.#w.checkTools(json(tools), json(choice)));
  }

  async #promptIds(messages, tools, kwargs) {
    this.#live();
    const t = tools ? JSON.stringify(tools) : undefined;
    const k = kwargs ? JSON.stringify(kwargs) : undefined;
    return Array.from(call(() => this.#w.encodeChat(JSON.stringify(messages), t, k)));
  }

  #tokens(ids, options) {
    this.#live();
    const run = new TokenRun(this.#steps(ids, options, (r) => {
      run.result = r;
      this.lastResult = r;
    }));
    return run;
  }

  /** One generation at a time: a second waits for the first to end. */
  async *#steps(ids, options, onResult) {
    const { signal } = options;
    let release;
    const turn = this.#queue;
    this.#queue = new Promise((r) => (release = r));
    await turn;
    let gen = null;
    try {
      this.#live();
      if (signal?.aborted) throw abortError(signal);
      gen = await guard(this.#w.start(Uint32Array.from(ids), startOptions(options)));
      const ids_ = [];
      for (;;) {
        const step = await guard(gen.next());
        if (signal?.aborted) throw abortError(signal);
        if (step.done) {
          if (step.text || step.reasoning || step.toolCalls) yield chunkOf(step, null);
          const result = { finishReason: step.finishReason, stats: step.stats, ids: ids_ };
          if (step.logprobs) result.logprobs = step.logprobs;
          onResult(result);
          return;
        }
        ids_.push(step.tokenId);
        yield chunkOf(step, step.tokenId);
      }
    } catch (e) {
      if (isFatal(e)) this.#lost = e;
      throw e;
    } finally {
      if (gen) {
        call(() => gen.cancel());
        gen.free();
      }
      release();
    }
  }
}

/** Whether the browser's WebGPU is Chromium's (Dawn), which gives identical pipeline descriptors one pipeline. */
function keepsOnePipelinePerDescriptor() {
  const brands = globalThis.navigator?.userAgentData?.brands ?? [];
  return brands.some((b) => b.brand === "Chromium") || /Chrom(e|ium)\//.test(globalThis.navigator?.userAgent ?? "");
}

/**
 * Streams a GGUF file into a WasmEngine (not warmed up yet): `{ wasm, total }`,
 * total in bytes. The source's first request (and the model store's check)
 * goes out before the wasm module is ready and the GPU device opened, so
 * they overlap.
 */
async function loadGguf(source, options, report, wasmReady) {
  const { signal, cache = true, download, onStoreFailed, contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead } = options;
  let loader = null;
  // Bytes of the file the loader has taken, and whether its header parsed.
  let pushed = 0;
  let parsed = false;
  let total = 0;
  const took = (p) => {
    total = p.total;
    if (p.headerParsed && !parsed) {
      parsed = true;
      report("parse", p.loaded, p.total);
    }
    if (parsed) report("upload", Math.min(p.loaded, p.total), p.total);
  };
  // While a download's first chunk arrives, the loader takes its bytes so
  // far, so the header parses (and the pipelines are asked for) before the
  // chunk is whole: in pushes that double, since a header not yet whole is
  // parsed again from its start, and that stop once it parses (the push
  // that completes it then carries few tensor bytes to upload before the
  // pipelines are asked for). An error here is thrown by the loop below.
  let prefix = null;
  let prefixError = null;
  const pushPrefix = () => {
    if (!loader || prefixError || !prefix) return;
    try {
      while (!parsed && prefix.byteLength >= Math.max(2 * pushed, 64 * 1024)) {
        const end = Math.min(prefix.byteLength, Math.max(2 * pushed, 64 * 1024));
        took(call(() => loader.push(prefix.subarray(pushed, end))));
        pushed = end;
      }
    } catch (e) {
      prefixError = e;
    }
  };
  const onPrefix = (bytes) => {
    prefix = bytes;
    pushPrefix();
  };
  const chunks = readSource(source, { signal, onProgress: (p) => report(p.phase, p.loaded, p.total), cache, download, onStoreFailed, onPrefix });
  const first = chunks.next();
  // Observed below; a failure here must not surface as unhandled meanwhile.
  first.catch(() => {});
  try {
    await wasmReady;
    signal?.throwIfAborted();
    loader = await guard(WasmLoader.create({ contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead }));
  } catch (e) {
    chunks.return().catch(() => {});
    throw e;
  }
  try {
    pushPrefix();
    // The file offset of the next chunk.
    let at = 0;
    for (let next = await first; !next.done; next = await chunks.next()) {
      if (prefixError) throw prefixError;
      const chunk = next.value;
      const skip = Math.min(Math.max(pushed - at, 0), chunk.byteLength);
      at += chunk.byteLength;
      if (skip < chunk.byteLength) {
        took(call(() => loader.push(skip > 0 ? chunk.subarray(skip) : chunk)));
        pushed = at;
      }
      // Let the page paint and the GPU queue drain between chunks.
      if (chunk.byteLength >= 1 << 20) await new Promise((r) => setTimeout(r, 0));
    }
    if (prefixError) throw prefixError;
    signal?.throwIfAborted();
    return { wasm: call(() => loader.finish()), total };
  } catch (e) {
    call(() => loader.abort());
    chunks.return().catch(() => {});
    throw e;
  } finally {
    loader.free();
  }
}

/** Streams a split GGUF's shards into a WasmEngine (not warmed up yet): `{ wasm, total }`. */
async function loadShards(shards, options, report) {
  const { signal, cache = true, download, onStoreFailed, contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead } = options;
  const opts = { contextLength, prefillChunk, tokensPerSubmit, kvCache, activations, quantize, limits, memoryBudget, compileAhead };
  const loader = await guard(WasmLoader.createSplit(opts, shards.length));
  try {
    // Progress through `report`, so the load's phases see the first byte.
    const onProgress = (p) => report(p.phase, p.loaded, p.total);
    const total = await streamShards(loader, shards, { signal, onProgress, cache, download, onStoreFailed }, report, call);
    signal?.throwIfAborted();
    return { wasm: call(() => loader.finish()), total };
  } catch (e) {
    call(() => loader.abort());
    throw e;
  } finally {
    loader.free();
  }
}

/** A step as the iteration yields it: `reasoning` only where the chat split it off. */
function chunkOf(step, tokenId) {
  const c = { text: step.text, tokenId };
  if (step.reasoning) c.reasoning = step.reasoning;
  if (step.toolCalls) c.toolCalls = step.toolCalls;
  return c;
}

function startOptions(o) {
  const pick = (v, d) => (v === undefined || v === null ? d : v);
  const seed = pick(o.seed, Math.floor(Math.random() * 2 ** 32));
  if (!Number.isInteger(seed) || seed < 0) throw new TypeError("seed must be a non-negative integer");
  return {
    maxTokens: pick(o.maxTokens, DEFAULTS.maxTokens),
    temperature: pick(o.temperature, DEFAULTS.temperature),
    topK: pick(o.topK, DEFAULTS.topK),
    topP: pick(o.topP, DEFAULTS.topP),
    seed,
    stopIds: o.stopIds ? Array.from(o.stopIds) : [],
    minP: pick(o.minP, 0),
    repetitionPenalty: pick(o.repetitionPenalty, 1),
    frequencyPenalty: pick(o.frequencyPenalty, 0),
    presencePenalty: pick(o.presencePenalty, 0),
    logitBias: o.logitBias ? Array.from(o.logitBias, ([id, b]) => [id, b]) : [],
    stop: o.stop === undefined || o.stop === null ? [] : [o.stop].flat(),
    // Chat only (chat.js sets them): top_logprobs, and the `<think>` split.
    logprobs: o.logprobs ?? undefined,
    reasoning: Boolean(o.reasoning),
    // Constrained decoding: at most one (the engine refuses more).
    jsonSchema: o.jsonSchema ?? undefined,
    regex: o.regex ?? undefined,
    lark: o.grammar ?? undefined,
    // Chat only: OpenAI's tools and tool_choice (calls parsed, or forced).
    tools: o.tools ?? undefined,
    toolChoice: o.toolChoice ?? undefined,
    // Drafting for this generation (default: the load's `speculative`).
    speculative: o.speculative ?? undefined,
    draftTokens: o.draftTokens ?? undefined,
  };
}
