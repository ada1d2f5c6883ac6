// The wasm module: loaded once, and guarded so that a panic inside it (which
// aborts the module on wasm32) rejects every pending call instead of leaving
// its promise hanging.

import init, { setPanicHandler } from "../pkg/wick_web.js";
import { AbortError, typedError, WasmLoadError, WebGPUUnavailableError } from "./errors.js";

export const NO_WEBGPU =
  "WebGPU is not available in this browser: wick needs a browser with WebGPU enabled " +
  "(Chrome/Edge 113+, or Firefox/Safari with WebGPU turned on) and a GPU adapter";

let ready = null;
let crashed = null;
const pending = new Set();

/** Instantiates the wasm module (once). `wasmUrl` overrides where the .wasm is fetched from. */
export function initWasm(wasmUrl) {
  if (!ready) {
    // Written as `new URL("<literal>", import.meta.url)`, the form Vite and
    // webpack detect: they emit the .wasm as an asset and rewrite the URL.
    const url = wasmUrl ?? new URL("../pkg/wick_web_bg.wasm", import.meta.url);
    ready = fetchWasm(url)
      .then((module_or_path) => init({ module_or_path }))
      .catch((e) => {
        if (e instanceof WebAssembly.CompileError) throw new WasmLoadError(`wick's WebAssembly from ${url} did not compile: ${e.message}`, { url: String(url) });
        throw e;
      })
      .then(() => {
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

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d]; // "\0asm"

/** What a user does about a .wasm that is not where the module looks for it. */
const WASM_FIX =
  "Under Vite's dev server, add `optimizeDeps: { exclude: [\"wick\"] }` to vite.config.js " +
  "(pre-bundling moves wick's modules away from its .wasm); with another bundler, have it emit " +
  "wick/web/pkg/wick_web_bg.wasm as an asset, or pass `wasmUrl` to Engine.load with the URL you serve it at.";

/**
 * The .wasm at `url`: the Response itself where it is served as
 * application/wasm (compiled while it streams in), else its bytes once they
 * are checked to be WebAssembly. A bundler that did not emit the file leaves
 * a URL its server answers with the app's HTML page, which would otherwise
 * fail deep inside WebAssembly.instantiate as "expected magic word".
 */
async function fetchWasm(url) {
  const where = String(url);
  let res;
  try {
    res = await fetch(url);
  } catch (e) {
    throw new WasmLoadError(`fetching wick's WebAssembly from ${where} failed: ${e.message}`, { url: where });
  }
  if (!res.ok) {
    throw new WasmLoadError(`fetching wick's WebAssembly from ${where} failed: HTTP ${res.status}. ${WASM_FIX}`, { url: where });
  }
  const type = res.headers.get("content-type") ?? "";
  if (/^application\/wasm\b/i.test(type)) return res;
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (WASM_MAGIC.every((b, i) => bytes[i] === b)) return bytes;
  const head = new TextDecoder().decode(bytes.subarray(0, 32)).replace(/\s+/g, " ").trim();
  const what = /html/i.test(type) || /^<(!doctype|html)/i.test(head) ? "an HTML page" : type || "no content type";
  throw new WasmLoadError(
    `wick's WebAssembly at ${where} is not WebAssembly: the server answered with ${what} ` +
      `(${bytes.length} bytes starting ${JSON.stringify(head)}), so the .wasm is not at that URL. ${WASM_FIX}`,
    { url: where },
  );
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
