// The wasm module: loaded once, and guarded so that a panic inside it (which
// aborts the module on wasm32) rejects every pending call instead of leaving
// its promise hanging.

import init, { setPanicHandler } from "../pkg/wick_web.js";
import { AbortError, typedError, WebGPUUnavailableError } from "./errors.js";

export const NO_WEBGPU =
  "WebGPU is not available in this browser: wick needs a browser with WebGPU enabled " +
  "(Chrome/Edge 113+, or Firefox/Safari with WebGPU turned on) and a GPU adapter";

let ready = null;
let crashed = null;
const pending = new Set();

/** Instantiates the wasm module (once). `wasmUrl` overrides where the .wasm is fetched from. */
export function initWasm(wasmUrl) {
  if (!ready) {
    const arg = wasmUrl ? { module_or_path: wasmUrl } : undefined;
    ready = init(arg).then(() => {
      setPanicHandler((msg) => {
        crashed = new Error(`wick crashed (this is a bug; reload the page): ${msg}`);
        for (const reject of pending) reject(crashed);
        pending.clear();
      });
    });
    ready.catch(() => {
      ready = null;
    });
  }
  return ready;
}

/** Throws the clear error where the page has no WebGPU at all. */
export function checkWebGPU() {
  if (!globalThis.navigator?.gpu) throw new WebGPUUnavailableError(NO_WEBGPU);
}

/** A wasm promise that also rejects if the module crashes meanwhile. */
export function guard(promise) {
  if (crashed) return Promise.reject(crashed);
  return new Promise((resolve, reject) => {
    pending.add(reject);
    Promise.resolve(promise)
      .then(resolve, (e) => reject(crashed ?? toError(e)))
      .finally(() => pending.delete(reject));
  });
}

/** A synchronous wasm call; a crash becomes the crash error. */
export function call(fn) {
  if (crashed) throw crashed;
  try {
    return fn();
  } catch (e) {
    throw crashed ?? toError(e);
  }
}

/** An Error, in its typed class where the wasm side tagged it with a code. */
function toError(e) {
  if (e instanceof Error || e instanceof DOMException) return typedError(e);
  return new Error(typeof e === "string" ? e : String(e));
}

/**
 * What an abort throws: the signal's own reason where the caller gave one,
 * else (the default DOMException reason too) wick's AbortError.
 */
export function abortError(signal) {
  const r = signal?.reason;
  if (r instanceof Error && r.name !== "AbortError") return r;
  return new AbortError();
}
