// The page side of the Web Worker variant: the same API as Engine, with the
// engine running in a worker (worker.js). Streaming and AbortSignal are
// carried across postMessage; methods that are synchronous on Engine
// (tokenize, decode, applyChatTemplate) return promises here.

import { anySignal, ChatCompletionStream } from "./chat.js";
import { AbortError, typedError, UnsupportedFieldError, WebGPUUnavailableError } from "./errors.js";
import { NO_WEBGPU } from "./runtime.js";

/** Starts a worker that will run an engine; call `load(source, options)` next. */
export function createWorkerEngine(workerUrl) {
  return new WorkerEngine(workerUrl);
}

/**
 * A model source as it crosses to the worker, and what to transfer rather
 * than copy: a URL as an absolute string; a Response as its body stream;
 * streams, ArrayBuffers and typed arrays transferred (an ArrayBuffer or a
 * typed array's buffer is detached in the page, as with any transfer); a
 * File or Blob as it is (a reference, no copy).
 */
function transferable(source) {
  // A split model's shards: each as it crosses alone.
  if (Array.isArray(source) && !source.some((s) => typeof File !== "undefined" && s instanceof File && !s.name.endsWith(".gguf"))) {
    const parts = source.map(transferable);
    return { sent: parts.map((p) => p.sent), transfer: parts.flatMap((p) => p.transfer) };
  }
  if (typeof source === "string" || source instanceof URL) {
    return { sent: new URL(source, globalThis.location?.href).href, transfer: [] };
  }
  if (typeof Response !== "undefined" && source instanceof Response) {
    if (!source.ok) throw new TypeError(`WorkerEngine.load: the Response is HTTP ${source.status}`);
    if (!source.body) throw new TypeError("WorkerEngine.load: the Response has no body");
    return { sent: source.body, transfer: [source.body] };
  }
  if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream) {
    return { sent: source, transfer: [source] };
  }
  if (source instanceof ArrayBuffer) return { sent: source, transfer: [source] };
  if (ArrayBuffer.isView(source)) {
    const whole = source.byteOffset === 0 && source.byteLength === source.buffer.byteLength;
    // A view of part of a larger buffer: send just its bytes (a copy of the
    // part), so the rest of the caller's buffer stays theirs.
    const bytes = whole ? new Uint8Array(source.buffer) : new Uint8Array(source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength));
    return { sent: bytes, transfer: [bytes.buffer] };
  }
  return { sent: source, transfer: [] };
}

/** The worker's error message as the same class the page engine throws. */
function rebuild(error) {
  const typed = typedError(error);
  if (typed instanceof Error) return typed;
  const e = new Error(error.message);
  if (error.name && error.name !== "Error") e.name = error.name;
  return e;
}

export class WorkerEngine {
  #worker;
  #next = 1;
  #calls = new Map();
  #info = null;
  #dead = null;

  constructor(workerUrl) {
    // The default is written as one expression, `new Worker(new URL("<literal>",
    // import.meta.url), ...)`: the only form Vite and webpack detect to bundle
    // the worker and emit its file (a URL held in a variable is left as it is).
    this.#worker = workerUrl
      ? new Worker(workerUrl, { type: "module" })
      : new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    this.#worker.onmessage = (e) => this.#onMessage(e.data);
    this.#worker.onerror = (e) => {
      e.preventDefault?.();
      const why = e.message ?? "could not start it (its script failed to load; if a bundler serves the page, see wick's README, With a bundler)";
      this.#fail(new Error(`the wick worker failed: ${why}`));
    };
    this.#worker.onmessageerror = () => this.#fail(new Error("the wick worker sent an unreadable message"));
    this.chat = {
      completions: {
        create: (params = {}, options = {}) => this.#chat(params, options),
      },
    };
    /** An embedding model's OpenAI-shaped embeddings (after loadEmbeddings). */
    this.embeddings = { create: (params) => this.#request({ type: "embeddings", params }) };
    /** The last finished generation's `{ finishReason, stats, ids }`. */
    this.lastResult = null;
  }

  /** A worker engine with `source` loaded: `await WorkerEngine.load(url, { onProgress, workerUrl })`. */
  static async load(source, options = {}) {
    const w = new WorkerEngine(options.workerUrl);
    try {
      await w.load(source, options);
    } catch (e) {
      w.terminate();
      throw e;
    }
    return w;
  }

  /**
   * A worker with an EmbeddingEngine loaded from a Hugging Face folder
   * (its URL, a FileList, Files or `{ path: Blob }`): `embeddings.create`,
   * `info()` and `dispose()` as on the page.
   */
  static async loadEmbeddings(source, options = {}) {
    const w = new WorkerEngine(options.workerUrl);
    try {
      await w.#load("loadEmbeddings", source, options);
    } catch (e) {
      w.terminate();
      throw e;
    }
    return w;
  }

  /**
   * The memory preflight of `source` on the worker's GPU (as `preflight`
   * on the page: headers only, nothing loaded or replaced).
   */
  async preflight(source, options = {}) {
    if (!globalThis.navigator?.gpu) throw new WebGPUUnavailableError(NO_WEBGPU);
    const { signal, workerUrl: _w, ...rest } = options;
    const { sent, transfer } = transferable(source);
    return this.#request({ type: "preflight", source: sent, options: rest }, { signal, transfer });
  }

  /** Loads (or replaces) the model in the worker. Same options as Engine.load. */
  load(source, options = {}) {
    return this.#load("load", source, options);
  }

  async #load(type, source, options) {
    if (!globalThis.navigator?.gpu) throw new WebGPUUnavailableError(NO_WEBGPU);
    const { onProgress, signal, workerUrl: _w, ...rest } = options;
    const { sent, transfer } = transferable(source);
    if (rest.draftModel !== undefined) {
      const draft = transferable(rest.draftModel);
      rest.draftModel = draft.sent;
      transfer.push(...draft.transfer);
    }
    this.#info = await this.#request({ type, source: sent, options: rest }, { signal, onEvent: onProgress, transfer });
    return this;
  }

  /** The loaded model's info (cached from load; synchronous like Engine.info). */
  info() {
    if (!this.#info) throw new Error("no model is loaded (call load first)");
    return structuredClone(this.#info);
  }

  tokenize(text, options) {
    return this.#request({ type: "tokenize", text, options });
  }
  decode(ids, options) {
    return this.#request({ type: "decode", ids: Array.from(ids), options });
  }
  applyChatTemplate(messages, options) {
    return this.#request({ type: "applyChatTemplate", messages, options });
  }

  /** Same as Engine.generate: an async iterable of `{ text, tokenId }`. */
  generate(prompt, options = {}) {
    const { signal, ...rest } = options;
    const p = typeof prompt === "string" ? prompt : Array.from(prompt);
    const self = this;
    const run = {
      result: null,
      [Symbol.asyncIterator]() {
        return self.#stream({ type: "generate", prompt: p, options: rest }, signal, (r) => {
          run.result = r;
          self.lastResult = r;
        });
      },
      async text() {
        let s = "";
        for await (const c of this) s += c.text;
        return s;
      },
    };
    return run;
  }

  /** Frees the model and stops the worker. */
  async dispose() {
    if (this.#dead) return;
    try {
      await this.#request({ type: "dispose" });
    } finally {
      this.terminate();
    }
  }

  /** Stops the worker at once. */
  terminate() {
    this.#worker.terminate();
    this.#fail(new Error("the wick worker was terminated"));
  }

  async #chat(params, options) {
    if ("signal" in params) {
      throw new UnsupportedFieldError("signal", "pass it as create(body, { signal }), as the openai SDK does");
    }
    const signal = options?.signal;
    if (!params.stream) return this.#request({ type: "chat", params }, { signal });
    return new ChatCompletionStream((own) =>
      this.#stream({ type: "chat", params }, anySignal(signal, own), () => {}),
    );
  }

  /** Events of one request as an async generator; ends with its result. */
  async *#stream(msg, signal, onResult) {
    const queue = [];
    let wake = null;
    let ended = false;
    const push = (item) => {
      queue.push(item);
      wake?.();
    };
    const id = this.#send(msg, signal, {
      onEvent: (value) => push({ value }),
      resolve: (value) => push({ end: true, value }),
      reject: (error) => push({ error }),
    });
    try {
      for (;;) {
        while (queue.length === 0) await new Promise((r) => (wake = r));
        const item = queue.shift();
        if (item.error) throw item.error;
        if (item.end) {
          ended = true;
          onResult(item.value);
          return;
        }
        yield item.value;
      }
    } finally {
      if (!ended && this.#calls.has(id)) {
        this.#worker.postMessage({ type: "abort", target: id });
      }
    }
  }

  #request(msg, { signal, onEvent, transfer } = {}) {
    return new Promise((resolve, reject) => this.#send(msg, signal, { onEvent, resolve, reject }, transfer));
  }

  #send(msg, signal, handlers, transfer = []) {
    const id = this.#next++;
    if (this.#dead) {
      handlers.reject(this.#dead);
      return id;
    }
    if (signal?.aborted) {
      handlers.reject(new AbortError());
      return id;
    }
    const onAbort = () => this.#worker.postMessage({ type: "abort", target: id });
    signal?.addEventListener("abort", onAbort, { once: true });
    this.#calls.set(id, { ...handlers, cleanup: () => signal?.removeEventListener("abort", onAbort) });
    try {
      this.#worker.postMessage({ ...msg, id }, transfer);
    } catch (e) {
      this.#calls.get(id)?.cleanup();
      this.#calls.delete(id);
      handlers.reject(e);
    }
    return id;
  }

  #onMessage(msg) {
    const c = this.#calls.get(msg.id);
    if (!c) return;
    if (msg.type === "event") {
      c.onEvent?.(msg.value);
      return;
    }
    this.#calls.delete(msg.id);
    c.cleanup();
    if (msg.lastResult !== undefined) this.lastResult = msg.lastResult;
    if (msg.type === "result") c.resolve(msg.value);
    else c.reject(rebuild(msg.error));
  }

  #fail(error) {
    this.#dead ??= error;
    for (const c of this.#calls.values()) {
      c.cleanup();
      c.reject(error);
    }
    this.#calls.clear();
  }
}
