// WebGPU's default limits in the page (`limits: "default"`: 128 MiB per
// storage binding, 256 MiB per buffer, as a phone grants): SmolLM2 and
// Qwen2.5-0.5B (whose 151,936-row embedding is over one binding, so it is
// split by rows) generate the native engine's greedy ids, and info() says
// which limits are in force.
//
// run: node --test web/test/limits.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { checkBuilt, launch, nativeGenerate, openTestPage, startServer, within } from "./harness.mjs";

const PROMPT = "The capital of France is";
const N = 3;
const CTX = 64;
const MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-awq.gguf"];
const log = (s) => console.log(s);
let server, browser, page;

before(async () => {
  checkBuilt();
  const { server: s, url } = await startServer();
  server = s;
  browser = await launch();
  page = await openTestPage(browser, url, log);
});

after(async () => {
  await browser?.close();
  server?.close();
});

for (const model of MODELS) {
  test(`${model} on WebGPU's default limits gives the native ids`, { timeout: 300_000 }, async () => {
    const native = nativeGenerate(PROMPT, N, CTX, model);
    const r = await within(280_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
      const { Engine } = window.wick;
      // Warm-up off: the kernels compile on first use, once.
      const engine = await Engine.load(url, { contextLength: ctx, limits: "default", warmUp: false, cache: false });
      const ids = [];
      for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) if (c.tokenId !== null) ids.push(c.tokenId);
      const info = engine.info();
      await engine.dispose();
      return { ids, limits: info.limits };
    }, { url: `/models/${model}`, prompt: PROMPT, n: N, ctx: CTX }), model);
    log(`${model}: ${JSON.stringify(r)}`);
    assert.equal(r.limits.requested, "default");
    assert.equal(r.limits.maxStorageBufferBindingSize, 128 * 2 ** 20);
    assert.equal(r.limits.maxBufferSize, 256 * 2 ** 20);
    assert.deepEqual(r.ids, native.ids, "greedy ids equal the native engine's (the adapter's limits)");
  });
}

test("a limits value other than adapter or default is refused by name", { timeout: 60_000 }, async () => {
  const e = await page.evaluate(() => window.wick.Engine.load("/models/SmolLM2-135M-Instruct.Q4_1.gguf", { limits: "phone" }).then(() => null, (e) => ({ name: e.name, field: e.field, message: e.message })));
  assert.equal(e?.name, "InvalidRequestError");
  assert.equal(e.field, "limits");
  assert.match(e.message, /"phone" is not a limits choice/);
});
