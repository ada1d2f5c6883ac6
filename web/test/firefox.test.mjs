// The core path in a second browser engine: Debian's Firefox ESR, headless,
// WebGPU on Mesa's lavapipe, driven by puppeteer-core over WebDriver BiDi.
// Firefox implements WebGPU with its own wgpu and naga (so WGSL that
// Chromium's Tint accepts may fail here), reads buffers back by polling, and
// grants no subgroups; its adapter reports no name. One page holds one
// SmolLM2 engine through the file: load by URL with progress, greedy ids
// against the native engine and llama.cpp, the model store that load filled
// (OPFS: listed whole, read back with the file's bytes), a two-turn chat reusing its
// prefix, a malformed file refused, the worker engine, and dispose()
// returning the page's GPU memory to where it was. Then the loading path as
// the Chromium files check it, the same check code (store-checks.mjs,
// split-checks.mjs, limits-checks.mjs) on the same page: a download cut
// midway resumed with the native ids, a second load from the store, a
// stopped read resumed from its stored chunks, a changed ETag or size
// refetched, a real quota (a profile pref) refusing a model over it, a
// failing chunk, the Cache API where OPFS is absent, modelCache from the
// page and a worker, a split model against its unsplit file, and Gemma 3
// 270M (its 170 MiB embedding split by rows) on WebGPU's default limits.
// (A server without Range support is left to Chromium: it adds a 27 MB
// store write, about 4 s here, to a path no different in Firefox.) Decode tok/s and the readback round trip go to
// test-output/firefox-metrics.json.
//
// run: node --test web/test/firefox.test.mjs   (after npm run build; part of npm test)

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  checkBuilt, launchFirefox, MODEL, modelFile, nativeGenerate, nativeGenerateLater, openFirefoxPage, outDir,
  readbackRoundTrip, startServer, within,
} from "./harness.mjs";
import { checkLlamaCppGreedy, checkMultiTurnReuse, llamaCppGreedyIds } from "./core-checks.mjs";
import { checkDefaultLimits, checkLimitsRefused } from "./limits-checks.mjs";
import { checkSplitLoads, writeShards } from "./split-checks.mjs";
import {
  checkCacheApiFallback, checkChangedEtag, checkChangedSize, checkCutLoad, checkFailingChunk, checkModelCacheApi,
  checkQuotaRefused, checkStoredLoad, checkStoppedResume, CUT, storeContext,
} from "./store-checks.mjs";

const PROMPT = "The capital of France is";
const N = 4; // generated tokens compared with the native engine
const CTX = 256;
const LOAD_MS = 300_000;
const log = (s) => console.log(s);
const metrics = { browser: "firefox", model: MODEL };
const modelUrl = `/models/${MODEL}`;
// The store checks' model (27 MB, 1 MiB chunks).
const TINY = "tiny-qwen3.q8_0.gguf";
const TINY_CTX = 64;
// The smallest model here with a matrix over WebGPU's default 128 MiB
// binding: Gemma 3 270M's 262,144 x 640 Q8_0 embedding (170 MiB, also its
// output matrix) is split by rows. (Chromium's limits.test.mjs takes
// Qwen2.5-0.5B, twice the bytes, whose output matrix is 138 MiB.)
const LIMITS_MODEL = "gemma-3-270m-q4_k_m.gguf";
const LIMITS_N = 3;
const LIMITS_CTX = 64;
const QUOTA_KIB = 1000 * 1024;

let server, base, control, browser, page, native, tinyNative;

before(async () => {
  checkBuilt();
  for (const m of [TINY, LIMITS_MODEL]) {
    if (!existsSync(modelFile(m))) throw new Error(`${modelFile(m)} is missing: run scripts/fetch-models.sh gemma3 (the tiny ones are in tests/fixtures/models or ../shared/models)`);
  }
  native = nativeGenerate(PROMPT, N, CTX);
  // The store checks' reference, run while the page works on SmolLM2.
  tinyNative = nativeGenerateLater(PROMPT, N, TINY_CTX, TINY);
  tinyNative.catch(() => {}); // awaited by the store checks
  ({ server, url: base, control } = await startServer());
  browser = await launchFirefox({
    // A real storage quota, for the quota check: the profile's limit in KiB,
    // of which an origin gets a fifth (200 MiB here). It holds what the
    // checks store at once (SmolLM2, then a few copies of the tiny model),
    // and not Gemma 3 270M's 253 MB.
    "dom.quotaManager.temporaryStorage.fixedLimit": QUOTA_KIB,
  });
  metrics.version = await browser.version();
  page = await openFirefoxPage(browser, base, log);
});

after(async () => {
  await page?.close().catch(() => {});
  await browser?.close();
  server?.close();
  writeFileSync(path.join(outDir, "firefox-metrics.json"), JSON.stringify(metrics, null, 2));
  log(`firefox metrics: ${JSON.stringify(metrics)}`);
});

describe("Firefox: the engine on the page", () => {
  test("loads SmolLM2 by URL with progress; greedy ids equal the native engine's and llama.cpp's", { timeout: LOAD_MS + 120_000 }, async () => {
    const r = await within(LOAD_MS + 100_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
      const { Engine, init, liveGpuMemory } = window.wick;
      await init();
      window.baselineMemory = liveGpuMemory();
      const phases = {};
      const t0 = performance.now();
      const engine = await Engine.load(url, {
        contextLength: ctx,
        warmUp: false,
        onProgress: (p) => (phases[p.phase] = [p.loaded, p.total]),
      });
      const loadSeconds = (performance.now() - t0) / 1000;
      window.engine = engine;
      const ids = [];
      let text = "";
      const run = engine.generate(prompt, { maxTokens: n, temperature: 0 });
      for await (const c of run) {
        if (c.tokenId !== null) ids.push(c.tokenId);
        text += c.text;
      }
      return { ids, text, loadSeconds, phases, result: run.result, promptIds: engine.tokenize(prompt) };
    }, { url: modelUrl, prompt: PROMPT, n: N, ctx: CTX }), "load + generate");
    const stats = r.result.stats;
    log(`firefox: ${JSON.stringify(r.ids)} ${JSON.stringify(r.text)} load ${r.loadSeconds.toFixed(1)} s, ` +
      `prefill ${stats.prefillTokensPerSecond.toFixed(2)} tok/s, decode ${stats.decodeTokensPerSecond.toFixed(2)} tok/s`);
    Object.assign(metrics, { loadSeconds: r.loadSeconds, stats, ids: r.ids });

    for (const phase of ["fetch", "parse", "upload", "ready"]) assert.ok(r.phases[phase], `progress phase ${phase}`);
    assert.equal(r.phases.upload[0], r.phases.upload[1], "upload reached its total");
    assert.deepEqual(r.promptIds, native.prompt_ids, "prompt ids");
    assert.deepEqual(r.ids, native.ids, "greedy ids equal the native engine's");
    assert.equal(r.text, native.text);
    checkLlamaCppGreedy(PROMPT, r.promptIds, r.ids);
  });

  test("the load stored the model: modelCache lists it whole, its bytes are the file's, a read comes from the store", { timeout: 120_000 }, async () => {
    const r = await within(100_000, page.evaluate(async (url) => {
      const { modelCache } = window.wick;
      const { readSource } = await import("/web/src/source.js");
      const list = await modelCache.list();
      const phases = new Set();
      let bytes = 0;
      for await (const c of readSource(url, { cache: true, onProgress: (p) => phases.add(p.phase) })) bytes += c.byteLength;
      const blob = await modelCache.get(url);
      const digest = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
      const sha = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
      return { list, phases: [...phases], bytes, sha, has: await modelCache.has(url), usage: await modelCache.usage() };
    }, modelUrl), "stored model");
    log(`firefox store: ${JSON.stringify({ ...r, list: r.list.map((m) => [m.store, m.size, m.complete]) })}`);
    const file = readFileSync(modelFile(MODEL));
    const entry = r.list.find((m) => m.url.endsWith(modelUrl));
    assert.ok(entry?.complete, JSON.stringify(r.list));
    assert.equal(entry.store, "opfs", "Firefox stores in OPFS");
    assert.equal(entry.size, file.length);
    assert.equal(r.has, true);
    assert.deepEqual(r.phases, ["cache"], "read from the store, nothing fetched");
    assert.equal(r.bytes, file.length);
    assert.equal(r.sha, createHash("sha256").update(file).digest("hex"), "the stored bytes are the file's");
    assert.ok(r.usage.bytes >= file.length && r.usage.quota > 0, JSON.stringify(r.usage));
  });

  test("info() says what Firefox grants, and the readback round trip is measured", { timeout: 120_000 }, async () => {
    const info = await page.evaluate(() => window.engine.info());
    log(`firefox info: ${JSON.stringify({ ...info, model: undefined })}`);
    metrics.info = { adapter: info.adapter, features: info.features, computePath: info.computePath,
      activations: info.activations, decodeGemvReduce: info.decodeGemvReduce, limits: info.limits };
    // Firefox grants no subgroups; the engine must then sum lanes without them.
    assert.equal(info.features.subgroups, false);
    assert.notEqual(info.decodeGemvReduce, "subgroup");
    assert.equal(info.weightStore, "buffers");
    assert.equal(info.model.architecture, "llama");
    assert.equal(info.model.contextLength, CTX);
    metrics.readback = await within(100_000, readbackRoundTrip(page), "readback round trip");
    log(`firefox readback round trip: ${JSON.stringify(metrics.readback)}`);
    assert.ok(metrics.readback.medianMs > 0);
  });

  test("a two-turn chat reuses the cached prefix and answers as a fresh run", { timeout: 300_000 }, async () => {
    await checkMultiTurnReuse(page, (s) => log(`firefox ${s}`));
  });

  test("a malformed file is refused with a ModelLoadError naming its problem", { timeout: 120_000 }, async () => {
    const r = await within(100_000, page.evaluate(async (url) => {
      const { Engine, ModelLoadError } = window.wick;
      const err = (p) => p.then(() => ({ loaded: true }), (e) => ({ typed: e instanceof ModelLoadError, name: e.name, message: e.message }));
      const garbage = new Uint8Array(1 << 20).map((_, i) => (i * 2654435761) >>> 24);
      const head = await (await fetch(url, { headers: { Range: "bytes=0-3145727" } })).arrayBuffer();
      return { garbage: await err(Engine.load(garbage.buffer)), truncated: await err(Engine.load(new Blob([head]))) };
    }, modelUrl), "malformed loads");
    log(`firefox malformed: ${JSON.stringify(r)}`);
    for (const [what, e] of Object.entries(r)) assert.ok(e.typed, `${what}: ${JSON.stringify(e)}`);
    assert.match(r.garbage.message, /magic|GGUF/i);
    assert.match(r.truncated.message, /ended/i);
  });

  test("the worker engine generates the native ids", { timeout: LOAD_MS + 60_000 }, async () => {
    const r = await within(LOAD_MS + 30_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
      const engine = await window.wick.WorkerEngine.load(url, { contextLength: ctx, warmUp: false });
      const ids = [];
      for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) {
        if (c.tokenId !== null) ids.push(c.tokenId);
      }
      await engine.dispose();
      return { ids };
    }, { url: modelUrl, prompt: PROMPT, n: N, ctx: CTX }), "worker");
    assert.deepEqual(r.ids, native.ids, "worker greedy ids equal the native engine's");
  });
});

// The loading path in Firefox: the checks the Chromium files run
// (store-checks.mjs, split-checks.mjs, limits-checks.mjs), on the same page
// and its one GPU device; SmolLM2's engine stays loaded beside them.
describe("Firefox: downloads, the model store, split GGUF", () => {
  let ctx, shardSizes;
  before(async () => {
    shardSizes = writeShards();
    ctx = await storeContext(page, control, TINY, log);
    // The loads above stored SmolLM2; these checks count the store's entries.
    await page.evaluate(() => window.wick.modelCache.clear());
  });

  test("a load through a cut connection gives the native ids and asks again only from the cut", { timeout: 240_000 }, async () =>
    checkCutLoad(ctx, { native: await tinyNative, prompt: PROMPT, n: N, ctxLen: TINY_CTX }));

  test("a second load reads the store: a HEAD request, no model byte fetched", { timeout: 120_000 }, () =>
    checkStoredLoad(ctx, { ctxLen: TINY_CTX }));

  test("a read stopped part way resumes from its stored chunks", { timeout: 60_000 }, () => checkStoppedResume(ctx));

  test("a changed ETag invalidates the stored copy", { timeout: 60_000 }, () => checkChangedEtag(ctx));

  test("a changed size under the same ETag invalidates the stored copy", { timeout: 60_000 }, () => checkChangedSize(ctx));

  test("Firefox's quota refuses a model over it before any model byte is fetched", { timeout: 60_000 }, async () => {
    const { quota } = await page.evaluate(() => navigator.storage.estimate());
    assert.equal(quota, (QUOTA_KIB * 1024) / 5, "the origin's quota is a fifth of the profile's limit");
    await checkQuotaRefused(ctx, { big: LIMITS_MODEL });
  });

  test("a chunk that keeps failing is a DownloadError naming the URL and byte", { timeout: 60_000 }, () => checkFailingChunk(ctx));

  test("without OPFS the Cache API stores the model", { timeout: 60_000 }, () => checkCacheApiFallback(ctx));

  test("modelCache lists, answers has, deletes and clears, from the page and from a worker", { timeout: 180_000 }, () =>
    checkModelCacheApi(ctx, {
      stored: { [`?cut=${CUT}`]: "opfs", "?resume": "opfs", "?fallback": "cache" },
      absent: [`/models/${LIMITS_MODEL}?quota`, "?resized"],
    }));

  test("a split model loads by its first shard's URL and by a list, as its unsplit file", { timeout: 240_000 }, () =>
    checkSplitLoads(page, shardSizes, log));
});

describe("Firefox: the page's GPU memory", () => {
  test("dispose() returns the page's live GPU memory to its baseline", { timeout: 60_000 }, async () => {
    const r = await page.evaluate(async () => {
      const { liveGpuMemory, releaseGpu } = window.wick;
      const loaded = liveGpuMemory();
      await window.engine.dispose();
      const after = liveGpuMemory();
      releaseGpu();
      return { baseline: window.baselineMemory, loaded, after, released: liveGpuMemory() };
    });
    log(`firefox live GPU memory: ${JSON.stringify(r)}`);
    assert.ok(r.loaded.liveBytes > r.baseline.liveBytes + 50e6, "the engine held the model");
    // The page's GPU context stays for the next load: its uniform arena alone.
    assert.equal(r.after.liveBuffers, 1, "only the page's GPU context after dispose");
    assert.equal(r.after.liveBindGroups, 0);
    assert.deepEqual(r.released, r.baseline, "back to the baseline once releaseGpu() lets the context go");
  });
});

// After dispose and releaseGpu(): a load on other limits opens a device of
// its own (the page keeps one a limits choice), so it comes last.
describe("Firefox: WebGPU's default limits", () => {
  test(`${LIMITS_MODEL} on WebGPU's default limits gives llama.cpp's greedy ids`, { timeout: 300_000 }, async () => {
    // llama.cpp's ids, each leading its second choice by more than 0.5: the
    // reference costs no run here (`wick generate` on the adapter's limits
    // gives the same three, after 20 s of lavapipe).
    const expected = { ids: llamaCppGreedyIds(PROMPT, LIMITS_MODEL, LIMITS_N), what: "llama.cpp's" };
    metrics.defaultLimits = await checkDefaultLimits(page, LIMITS_MODEL, { expected, prompt: PROMPT, n: LIMITS_N, ctxLen: LIMITS_CTX }, log);
  });

  test("a limits value other than adapter or default is refused by name", { timeout: 60_000 }, () => checkLimitsRefused(page));
});
