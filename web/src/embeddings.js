// Text embeddings on WebGPU: an encoder model (a sentence-transformers /
// Hugging Face BERT folder such as all-MiniLM-L6-v2) and
// `embeddings.create` in the shape of OpenAI's API.
//
//   const engine = await EmbeddingEngine.load("/models/all-MiniLM-L6-v2/");
//   const { data } = await engine.embeddings.create({ input: ["a", "b"] });
//
// A class of its own beside Engine, not Engine.load detecting an encoder:
// the two share nothing a caller uses (an encoder has no chat, no
// generation, no context to fill), and a load should fail by name when it
// is handed the wrong kind of model rather than yield an object whose
// methods throw.

import { WasmEmbedLoader } from "../pkg/wick_web.js";
import { InvalidRequestError, ModelLoadError, UnsupportedFieldError } from "./errors.js";
import { hfFolder } from "./hf-folder.js";
import { checkCache } from "./model-cache.js";
import { call, checkWebGPU, guard, initWasm } from "./runtime.js";

const WEIGHTS = "model.safetensors";
const INDEX = "model.safetensors.index.json";

// The fields create() honours; `user` is accepted and has no effect (as in chat).
const FIELDS = new Set(["input", "model", "dimensions", "encoding_format", "user"]);

/** Refuses, by name, every field of `params` outside `fields`. */
function checkFields(params, fields) {
  for (const k of Object.keys(params)) {
    if (k === "signal") {
      throw new UnsupportedFieldError("signal", "pass it as create(body, { signal }), as the openai SDK does");
    }
    if (!fields.has(k) && params[k] !== undefined) {
      throw new UnsupportedFieldError(k, "not supported by wick");
    }
  }
}

/** An integer field >= `lo`, or undefined when absent. */
function integer(params, field, lo) {
  const v = params[field];
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v < lo) {
    throw new InvalidRequestError(field, `must be an integer >= ${lo}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** OpenAI's limit on inputs per request. */
export const MAX_INPUTS = 2048;

export class EmbeddingEngine {
  #w;
  #info;
  #matryoshka;
  #queue = Promise.resolve();
  #disposed = false;

  /** @internal use EmbeddingEngine.load */
  constructor(wasmEmbedder, name, matryoshka) {
    this.#w = wasmEmbedder;
    this.#info = { ...call(() => wasmEmbedder.info()), name, matryoshka };
    this.#matryoshka = matryoshka;
    /** OpenAI-shaped: `engine.embeddings.create({ input, dimensions, encoding_format })`. */
    this.embeddings = { create: (params) => this.#create(params) };
  }

  /**
   * Loads an encoder from a Hugging Face / sentence-transformers folder:
   * `source` is the folder's URL (its files are fetched beside it), a
   * FileList or array of Files (a folder picker's), or an object or Map of
   * `{ "path/in/folder": Blob }`. Reads config.json, tokenizer.json,
   * model.safetensors (or model.safetensors.index.json and the shards it
   * lists) and, when present, modules.json, the Pooling
   * module's config.json and sentence_bert_config.json.
   * Options: onProgress, signal, cache and download (for the weights, as Engine.load),
   * wasmUrl, name (the response's `model`; default: the folder's name),
   * matryoshka (the model was trained for truncated embeddings: allows
   * `dimensions` below its own).
   */
  static async load(source, options = {}) {
    const { onProgress, signal, cache = true, download, wasmUrl, name, matryoshka = false } = options;
    checkCache(cache);
    checkWebGPU();
    await initWasm(wasmUrl);
    signal?.throwIfAborted();
    const folder = hfFolder(source, { signal });
    const loader = await guard(WasmEmbedLoader.create());
    try {
      const set = async (file, as = file, optional = false) => {
        const bytes = await folder.bytes(file, { optional });
        if (bytes) call(() => loader.setFile(as, bytes));
        return bytes;
      };
      await set("config.json");
      await set("tokenizer.json");
      const modules = await set("modules.json", undefined, true);
      if (modules) {
        const dir = call(() => WasmEmbedLoader.poolingPath(modules));
        // Absent, the engine's error names the folder modules.json gave.
        if (dir !== undefined) await set(dir ? `${dir}/config.json` : "config.json", "pooling", true);
      }
      await set("sentence_bert_config.json", undefined, true);
      signal?.throwIfAborted();
      const bytes = await pushWeights(folder, loader, { signal, onProgress, cache, download });
      // "upload" covers the engine's checks and the weights' upload in one step.
      const report = (phase) => onProgress?.({ phase, loaded: bytes, total: bytes });
      report("upload");
      const engine = new EmbeddingEngine(call(() => loader.finish()), name ?? folder.name, Boolean(matryoshka));
      report("ready");
      return engine;
    } finally {
      loader.free();
    }
  }

  /** `{ dimensions, maxTokens, vocabSize, layers, pooling, normalize, name, matryoshka }`. */
  info() {
    return structuredClone(this.#info);
  }

  /**
   * The embeddings of `texts` as one Float32Array per text (the model's
   * own dimensions) and each text's token count: `{ vectors, tokens }`.
   */
  async embed(texts) {
    const dim = this.#info.dimensions;
    const r = await this.#run(texts);
    const vectors = r.tokens.map((_, i) => r.vectors.subarray(i * dim, (i + 1) * dim));
    return { vectors, tokens: r.tokens };
  }

  /** Frees the GPU memory (after a running request). */
  async dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    await this.#queue.catch(() => {});
    call(() => this.#w.dispose());
    this.#w.free();
  }

  /** One request at a time on the GPU: a second waits for the first. */
  async #run(texts) {
    if (this.#disposed) throw new Error("this embedding engine was disposed");
    const turn = this.#queue;
    let release;
    this.#queue = new Promise((r) => (release = r));
    try {
      await turn;
      if (this.#disposed) throw new Error("this embedding engine was disposed");
      return await guard(this.#w.embed(texts));
    } finally {
      release();
    }
  }

  async #create(params) {
    if (!params || typeof params !== "object") throw new InvalidRequestError("request", "must be an object");
    checkFields(params, FIELDS);
    const texts = inputs(params.input);
    const format = params.encoding_format ?? "float";
    if (format !== "float" && format !== "base64") {
      throw new InvalidRequestError("encoding_format", `must be "float" or "base64", got ${JSON.stringify(format)}`);
    }
    const dim = this.#info.dimensions;
    const dims = integer(params, "dimensions", 1) ?? dim;
    if (dims !== dim && !this.#matryoshka) {
      throw new InvalidRequestError(
        "dimensions",
        `${this.#info.name} gives ${dim}-dimensional embeddings and was not loaded as a Matryoshka model ` +
          "(EmbeddingEngine.load(source, { matryoshka: true })), so it cannot shorten them",
      );
    }
    if (dims > dim) throw new InvalidRequestError("dimensions", `at most the model's ${dim}, got ${dims}`);
    const r = await this.#run(texts);
    const data = r.tokens.map((_, index) => {
      let v = r.vectors.subarray(index * dim, (index + 1) * dim);
      if (dims < dim) v = truncate(v, dims);
      return { object: "embedding", index, embedding: format === "base64" ? base64(v) : Array.from(v) };
    });
    const tokens = r.tokens.reduce((a, b) => a + b, 0);
    return { object: "list", data, model: this.#info.name, usage: { prompt_tokens: tokens, total_tokens: tokens } };
  }
}

/**
 * Streams model.safetensors, or each shard model.safetensors.index.json
 * lists, into the loader (the chunks go straight into wasm memory);
 * resolves to the bytes pushed. Progress counts all files together.
 */
async function pushWeights(folder, loader, opts) {
  const index = await folder.bytes(INDEX, { optional: true });
  if (index) call(() => loader.setFile(INDEX, index));
  const shards = call(() => loader.shards());
  let before = 0;
  for (const [i, file] of shards.entries()) {
    let total;
    const onProgress = (p) => {
      total = p.total ?? undefined;
      opts.onProgress?.({ ...p, loaded: before + p.loaded, total: shards.length === 1 ? p.total : undefined });
    };
    let loaded = 0;
    try {
      for await (const chunk of folder.chunks(file, { ...opts, onProgress })) {
        loaded = call(() => loader.pushWeights(i, chunk, total));
        if (chunk.byteLength >= 1 << 20) await new Promise((r) => setTimeout(r, 0));
      }
    } catch (e) {
      if (!index && e?.name === "ModelLoadError" && e.file === file) {
        throw new ModelLoadError(`${e.message} (an embedding model folder holds ${WEIGHTS}, or ${INDEX} and the shards it lists)`, { file });
      }
      throw e;
    }
    before += loaded;
  }
  return before;
}

/** OpenAI's `input`: a string or an array of strings (token-id inputs refused by name). */
function inputs(input) {
  const list = typeof input === "string" ? [input] : input;
  if (!Array.isArray(list)) throw new InvalidRequestError("input", "must be a string or an array of strings");
  if (list.length === 0) throw new InvalidRequestError("input", "must not be empty");
  if (list.length > MAX_INPUTS) throw new InvalidRequestError("input", `at most ${MAX_INPUTS} inputs, got ${list.length}`);
  list.forEach((s, i) => {
    if (typeof s === "number" || Array.isArray(s)) {
      throw new UnsupportedFieldError("input", "token-id inputs are not supported by wick; pass text");
    }
    if (typeof s !== "string") throw new InvalidRequestError(`input[${i}]`, "must be a string");
    if (s.length === 0) throw new InvalidRequestError(`input[${i}]`, "must not be an empty string");
  });
  return list;
}

/** The first `n` values, L2-normalised again (Matryoshka truncation). */
export function truncate(v, n) {
  const out = new Float32Array(v.subarray(0, n));
  let sum = 0;
  for (const x of out) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < n; i++) out[i] /= norm;
  return out;
}

/** The vector's little-endian f32 bytes in base64, as OpenAI's `encoding_format: "base64"`. */
export function base64(v) {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  v.forEach((x, i) => view.setFloat32(i * 4, x, true));
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
