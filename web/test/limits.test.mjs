// WebGPU's default limits in the page (`limits: "default"`: 128 MiB per
// storage binding, 256 MiB per buffer, as a phone grants), in Chromium:
// SmolLM2 and Qwen2.5-0.5B (whose 151,936-row output matrix is over one
// binding, so it is split by rows) generate the native engine's greedy
// ids, and info() says which limits are in force. The checks are in
// limits-checks.mjs (Firefox runs them too, firefox.test.mjs).
//
// run: node --test web/test/limits.test.mjs   (after npm run build)

import { after, before, test } from "node:test";
import { checkBuilt, launch, nativeGenerate, openTestPage, startServer } from "./harness.mjs";
import { checkDefaultLimits, checkLimitsRefused } from "./limits-checks.mjs";

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
    const expected = { ids: native.ids, what: "the native engine's (the adapter's limits)" };
    await checkDefaultLimits(page, model, { expected, prompt: PROMPT, n: N, ctxLen: CTX }, log);
  });
}

test("a limits value other than adapter or default is refused by name", { timeout: 60_000 }, () => checkLimitsRefused(page));
