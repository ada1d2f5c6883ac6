// The Web Worker side of createWorkerEngine(): runs an Engine off the main
// thread. Messages from the page: { id, type, ... }; replies: { id, type:
// "event" | "result" | "error", ... }. { type: "abort", target } aborts the
// request `target` (a load, generate or chat). "preflight" reports on a
// model without loading it. "loadEmbeddings" and
// "embeddings" run an EmbeddingEngine instead of an Engine.
//
// Start it as a module worker: new Worker(new URL("wick/worker", import.meta.url), { type: "module" }).

import { errorMessage } from "./errors.js";
import { EmbeddingEngine, Engine, preflight } from "./index.js";

let engine = null;
const running = new Map();

const post = (msg) => self.postMessage(msg);

async function handle(msg) {
  const { id, type } = msg;
  // What a request needs loaded: an Engine unless it says otherwise.
  const need = (Kind = Engine) => {
    if (!engine) throw new Error("no model is loaded in this worker (call load first)");
    if (!(engine instanceof Kind)) {
      throw new Error(Kind === EmbeddingEngine
        ? "the model in this worker is not an embedding model (load it with WorkerEngine.loadEmbeddings)"
        : "the model in this worker is an embedding model: only embeddings.create, info and dispose");
    }
    return engine;
  };
  const ac = new AbortController();
  running.set(id, ac);
  const signal = ac.signal;
  const event = (value) => post({ id, type: "event", value });
  try {
    let value;
    switch (type) {
      case "load": {
        if (engine) await engine.dispose();
        engine = null;
        const onProgress = (p) => event(p);
        engine = await Engine.load(msg.source, { ...msg.options, signal, onProgress });
        value = engine.info();
        break;
      }
      case "loadEmbeddings": {
        if (engine) await engine.dispose();
        engine = null;
        engine = await EmbeddingEngine.load(msg.source, { ...msg.options, signal, onProgress: event });
        value = engine.info();
        break;
      }
      case "preflight":
        value = await preflight(msg.source, { ...msg.options, signal });
        break;
      case "embeddings": {
        value = await need(EmbeddingEngine).embeddings.create(msg.params);
        break;
      }
      case "generate": {
        const run = need().generate(msg.prompt, { ...msg.options, signal });
        for await (const chunk of run) event(chunk);
        value = run.result;
        break;
      }
      case "chat": {
        const params = msg.params;
        const out = await need().chat.completions.create(params, { signal });
        if (params.stream) {
          for await (const chunk of out) event(chunk);
          value = null;
        } else {
          value = out;
        }
        break;
      }
      case "tokenize":
        value = need().tokenize(msg.text, msg.options);
        break;
      case "decode":
        value = need().decode(msg.ids, msg.options);
        break;
      case "applyChatTemplate":
        value = need().applyChatTemplate(msg.messages, msg.options);
        break;
      case "info":
        value = need(Object).info();
        break;
      case "dispose":
        if (engine) await engine.dispose();
        engine = null;
        value = null;
        break;
      default:
        throw new Error(`unknown request type ${type}`);
    }
    post({ id, type: "result", value, lastResult: engine?.lastResult ?? null });
  } catch (e) {
    post({ id, type: "error", error: errorMessage(e) });
  } finally {
    running.delete(id);
  }
}

self.onmessage = (e) => {
  const msg = e.data;
  if (msg?.type === "abort") {
    running.get(msg.target)?.abort(new DOMException("The operation was aborted.", "AbortError"));
    return;
  }
  handle(msg);
};
