// GPU out-of-memory and validation errors in the browser: typed
// OutOfMemoryError / GpuValidationError on the page, after which the engine
// is unusable, and the same class rebuilt across the worker boundary.
//
// SwiftShader cannot be driven out of memory without taking the machine's
// memory with it, so the error is the device's own `uncapturederror` event,
// dispatched on wick's real GPUDevice with a real GPUOutOfMemoryError (or
// GPUValidationError): from there it takes the path a driver's would, through
// wgpu's handler, the engine's fault slot, the wasm error tagging and
// errors.js. (Natively a real allocation failure is tested:
// tests/tests/out_of_memory.rs.)
//
// run: npm test   (after npm run build)

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { checkBuilt, launch, openTestPage, startServer, within } from "./harness.mjs";

const TINY = "/models/tiny-qwen3moe.q8_0.gguf";
const log = (s) => console.log(s);
let server, base, browser;

before(async () => {
  checkBuilt();
  ({ server, url: base } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.close();
});

/** Loads the tiny model on a fresh page, fires `kind` on its device, generates twice. */
async function fire(kind) {
  const page = await openTestPage(browser, base, log);
  try {
    return await within(240_000, page.evaluate(async ({ url, kind }) => {
      const { Engine } = window.wick;
      // The device wick opens for this load (each load opens its own).
      let device;
      const requestDevice = GPUAdapter.prototype.requestDevice;
      GPUAdapter.prototype.requestDevice = async function (...args) {
        device = await requestDevice.apply(this, args);
        return device;
      };
      const engine = await Engine.load(url, { contextLength: 32, warmUp: false });
      GPUAdapter.prototype.requestDevice = requestDevice;
      const first = [];
      for await (const c of engine.generate("hi", { maxTokens: 1, temperature: 0 })) first.push(c.tokenId);
      const error = kind === "oom" ? new GPUOutOfMemoryError("test: no memory left") : new GPUValidationError("test: invalid");
      device.dispatchEvent(new GPUUncapturedErrorEvent("uncapturederror", { error }));
      const run = async () => {
        try {
          for await (const _ of engine.generate("hi", { maxTokens: 2, temperature: 0 }));
          return null;
        } catch (e) {
          return { name: e.name, code: e.code, message: e.message, wick: e instanceof window.wick.WickError };
        }
      };
      return { first: first.length, error: await run(), later: await run() };
    }, { url: TINY, kind }), `${kind} on the page`);
  } finally {
    await page.close();
  }
}

describe("GPU errors on the page", () => {
  test("an out-of-memory error fails generation with OutOfMemoryError, later calls too", { timeout: 300_000 }, async () => {
    const r = await fire("oom");
    log(`oom: ${JSON.stringify(r)}`);
    assert.ok(r.first >= 1, "generated before the error");
    assert.equal(r.error?.name, "OutOfMemoryError", JSON.stringify(r.error));
    assert.equal(r.error.code, "out_of_memory");
    assert.ok(r.error.wick && /out of memory/.test(r.error.message), r.error.message);
    assert.equal(r.later?.name, "OutOfMemoryError", "the engine stays unusable");
  });

  test("a validation error fails generation with GpuValidationError, later calls too", { timeout: 300_000 }, async () => {
    const r = await fire("validation");
    log(`validation: ${JSON.stringify(r)}`);
    assert.equal(r.error?.name, "GpuValidationError", JSON.stringify(r.error));
    assert.equal(r.error.code, "gpu_validation");
    assert.equal(r.later?.name, "GpuValidationError");
  });

  test("both classes survive the worker boundary (errorMessage, then typedError)", { timeout: 60_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await page.evaluate(async () => {
        const { errorMessage, typedError } = await import("/web/src/errors.js");
        const { OutOfMemoryError, GpuValidationError } = window.wick;
        // As the wasm side tags them (crates/web/src/lib.rs, js_coded).
        const tagged = (code) => Object.assign(new Error(`a ${code}`), { code });
        const across = (code) => typedError(structuredClone(errorMessage(typedError(tagged(code)))));
        const oom = across("out_of_memory");
        const val = across("gpu_validation");
        return {
          oom: [oom instanceof OutOfMemoryError, oom.code, oom.message],
          val: [val instanceof GpuValidationError, val.code, val.message],
        };
      });
      assert.deepEqual(r.oom, [true, "out_of_memory", "a out_of_memory"]);
      assert.deepEqual(r.val, [true, "gpu_validation", "a gpu_validation"]);
    } finally {
      await page.close();
    }
  });
});
