// WebGPU's default limits in the page (`limits: "default"`: 128 MiB per
// storage binding, 256 MiB per buffer, as a phone grants), as more than one
// browser checks them (limits.test.mjs in Chromium, firefox.test.mjs in
// Firefox): the page side runs in the browser, the assertions here.

import assert from "node:assert/strict";
import { within } from "./harness.mjs";

/**
 * `model` loaded on WebGPU's default limits generates `expected.ids`
 * greedily (`expected.what` says whose: the native engine's on the
 * adapter's limits, or llama.cpp's), and info() says which limits are in
 * force. Returns the page's info().limits.
 */
export async function checkDefaultLimits(page, model, { expected, prompt, n, ctxLen }, log = () => {}) {
  const r = await within(280_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
    const { Engine } = window.wick;
    // Warm-up off: the kernels compile on first use, once.
    const t0 = performance.now();
    const engine = await Engine.load(url, { contextLength: ctx, limits: "default", warmUp: false, cache: false });
    const t1 = performance.now();
    const ids = [];
    for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) if (c.tokenId !== null) ids.push(c.tokenId);
    const info = engine.info();
    await engine.dispose();
    return { ids, limits: info.limits, loadSeconds: (t1 - t0) / 1000, generateSeconds: (performance.now() - t1) / 1000 };
  }, { url: `/models/${model}`, prompt, n, ctx: ctxLen }), model);
  log(`${model} on default limits: ${JSON.stringify(r)}`);
  assert.equal(r.limits.requested, "default");
  assert.equal(r.limits.maxStorageBufferBindingSize, 128 * 2 ** 20);
  assert.equal(r.limits.maxBufferSize, 256 * 2 ** 20);
  assert.deepEqual(r.ids, expected.ids, `greedy ids equal ${expected.what}`);
  return r.limits;
}

/** A limits value other than "adapter" or "default" is refused by name, before anything is fetched. */
export async function checkLimitsRefused(page) {
  const e = await page.evaluate(() => window.wick.Engine.load("/models/SmolLM2-135M-Instruct.Q4_1.gguf", { limits: "phone" })
    .then(() => null, (e) => ({ name: e.name, field: e.field, message: e.message })));
  assert.equal(e?.name, "InvalidRequestError");
  assert.equal(e.field, "limits");
  assert.match(e.message, /"phone" is not a limits choice/);
}
