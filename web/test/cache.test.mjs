// The persistent model store and the download path in Chromium, on the tiny
// Qwen3 (27 MB) in 1 MiB chunks so a file spans many of them: a connection
// cut midway is resumed from the cut's chunk and gives the native engine's
// greedy ids; a second load reads the store (one HEAD, no GET); a stopped
// load resumes from its stored chunks; a changed ETag or size refetches; the
// quota error comes before any model byte, and a write refused past that
// check leaves the load streaming (Chromium only); persist() is asked once;
// modelCache from the page and a worker; the Cache API when OPFS is
// missing; a server without Range. The checks are in store-checks.mjs
// (Firefox runs them too, firefox.test.mjs); the truth is the file on disk
// (its SHA-256) and the native CLI's ids; the server (web/tools/serve.mjs)
// logs every request and the bytes it sent.
//
// run: node --test web/test/cache.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { checkBuilt, launch, nativeGenerate, openTestPage, startServer } from "./harness.mjs";
import {
  checkCacheApiFallback, checkChangedEtag, CUT, checkChangedSize, checkCutLoad, checkFailingChunk, checkModelCacheApi,
  checkNoRange, checkQuotaRefused, checkStoredLoad, checkStoppedResume, DOWNLOAD, storeContext,
} from "./store-checks.mjs";

const TINY = "tiny-qwen3.q8_0.gguf";
const PROMPT = "The capital of France is";
const N = 4;
const CTX = 64;
const log = (s) => console.log(s);

let server, browser, page, native, ctx;

before(async () => {
  checkBuilt();
  native = nativeGenerate(PROMPT, N, CTX, TINY);
  const started = await startServer();
  server = started.server;
  browser = await launch();
  page = await openTestPage(browser, started.url, log);
  ctx = await storeContext(page, started.control, TINY, log);
  await page.evaluate(() => window.wick.modelCache.clear());
  // Count persist() calls: the first model stored asks once, no later one.
  await page.evaluate(() => {
    const real = StorageManager.prototype.persist;
    window.persistCalls = 0;
    StorageManager.prototype.persist = function () {
      window.persistCalls++;
      return real.call(this);
    };
  });
});

after(async () => {
  await page?.close().catch(() => {});
  await browser?.close();
  server?.close();
});

describe("the model store and resumable downloads", () => {
  test("a load through a cut connection gives the native ids and asks again only from the cut", { timeout: 240_000 }, () =>
    checkCutLoad(ctx, { native, prompt: PROMPT, n: N, ctxLen: CTX }));

  test("a second load reads the store: a HEAD request, no model byte fetched", { timeout: 120_000 }, () =>
    checkStoredLoad(ctx, { ctxLen: CTX }));

  test("a load stopped part way resumes from its stored chunks", { timeout: 60_000 }, () => checkStoppedResume(ctx));

  test("a changed ETag invalidates the stored copy and fetches the file again", { timeout: 60_000 }, () => checkChangedEtag(ctx));

  test("a changed size under the same ETag invalidates the stored copy", { timeout: 60_000 }, () => checkChangedSize(ctx));

  test("the quota error comes before any model byte is fetched", { timeout: 60_000 }, () => checkQuotaRefused(ctx));

  test("a store that refuses a write past the quota check loads the model without storing it", { timeout: 60_000 }, async () => {
    // As Chromium's incognito storage does (in memory: writes fail past
    // about 1.6 GB while estimate() reports 10 GiB free): the sixth chunk's
    // write is refused for space.
    const url = ctx.path("?refused");
    const r = await page.evaluate(async ({ url, download }) => {
      const { Engine, modelCache } = window.wick;
      const real = FileSystemWritableFileStream.prototype.write;
      let writes = 0;
      FileSystemWritableFileStream.prototype.write = function (data) {
        // Chunks are a MiB; the meta records are small.
        if (data?.byteLength >= 1 << 20 && ++writes === 6) {
          return Promise.reject(new DOMException("it would exceed the quota", "QuotaExceededError"));
        }
        return real.call(this, data);
      };
      const warnings = [];
      const warn = console.warn;
      console.warn = (...a) => warnings.push(a.join(" "));
      try {
        const read = await window.readAll(url, { download });
        writes = 0;
        const e = await Engine.load(url, { download, contextLength: 64, warmUp: false });
        const notStored = e.info().load.notStored;
        await e.dispose();
        return { read, notStored, warnings, stored: await modelCache.has(url), listed: (await modelCache.list()).filter((m) => m.url.endsWith(url)) };
      } finally {
        FileSystemWritableFileStream.prototype.write = real;
        console.warn = warn;
      }
    }, { url, download: DOWNLOAD });
    log(`store refused: ${JSON.stringify(r.notStored)}; warnings ${JSON.stringify(r.warnings)}`);
    // The bytes are still the file's, the load completes, and says why the
    // file was not kept; nothing partial is left in the store.
    assert.equal(r.read.error, null, JSON.stringify(r.read.error));
    assert.equal(r.read.sha, ctx.sha);
    assert.equal(r.notStored.length, 1, JSON.stringify(r.notStored));
    assert.ok(r.notStored[0].url.endsWith(url));
    assert.match(r.notStored[0].reason, /QuotaExceededError/);
    assert.ok(r.warnings.some((w) => w.includes("the load goes on without storing it")), JSON.stringify(r.warnings));
    assert.equal(r.stored, false);
    assert.deepEqual(r.listed, []);
  });

  test("a chunk that keeps failing is a DownloadError naming the URL and byte", { timeout: 60_000 }, () => checkFailingChunk(ctx));

  test("a server without Range support streams the file into the store", { timeout: 60_000 }, () => checkNoRange(ctx));

  test("without OPFS the Cache API stores the model", { timeout: 60_000 }, () => checkCacheApiFallback(ctx));

  test("modelCache lists, answers has, deletes and clears, from the page and from a worker", { timeout: 180_000 }, async () => {
    await checkModelCacheApi(ctx, {
      stored: { [`?cut=${CUT}`]: "opfs", "?resume": "opfs", "?norange": "opfs", "?fallback": "cache" },
      absent: ["?quota", "?resized"],
    });
    assert.equal(await page.evaluate(() => window.persistCalls), 1, "persist() asked once, for the first model stored");
  });
});
