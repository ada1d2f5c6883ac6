// The persistent model store and the download path in Chromium, on the tiny
// Qwen3 (27 MB) in 1 MiB chunks so a file spans many of them: a connection
// cut midway is resumed from the cut's chunk and gives the native engine's
// greedy ids; a second load reads the store (one HEAD, no GET); a stopped
// load resumes from its stored chunks; a changed ETag refetches; the quota
// error comes before any model byte, and a write refused past that check
// leaves the load streaming; persist() is asked once; modelCache
// from the page and a worker;
// the Cache API when OPFS is missing; a server without Range. The truth is
// the file on disk (its SHA-256) and the native CLI's ids; the server
// (web/tools/serve.mjs) logs every request and the bytes it sent.
//
// run: node --test web/test/cache.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { checkBuilt, launch, modelFile, nativeGenerate, openTestPage, startServer, within } from "./harness.mjs";

const TINY = "tiny-qwen3.q8_0.gguf";
const PROMPT = "The capital of France is";
const N = 4;
const CTX = 64;
const CHUNK = 1 << 20;
const DOWNLOAD = { chunkSize: CHUNK, parallel: 4, retryDelay: 20 };
const log = (s) => console.log(s);

let server, base, control, browser, page, native, size, sha;
const path = (q = "") => `/models/${TINY}${q}`;
/** The server's log of requests for `p` since `from`. */
const requests = (p, from = 0) => control.requests.slice(from).filter((r) => r.path === p);

before(async () => {
  checkBuilt();
  native = nativeGenerate(PROMPT, N, CTX, TINY);
  const bytes = readFileSync(modelFile(TINY));
  size = bytes.length;
  sha = createHash("sha256").update(bytes).digest("hex");
  ({ server, url: base, control } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
  // readAll(url, options): readSource's bytes, their SHA-256, the progress
  // events and the error, if any (no GPU: the download and store alone).
  await page.evaluate(() => {
    window.sha256 = async (blob) =>
      Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer())), (b) => b.toString(16).padStart(2, "0")).join("");
    window.readAll = async (url, options = {}) => {
      const { readSource } = await import("/web/src/source.js");
      const parts = [];
      const progress = [];
      let error = null;
      try {
        for await (const c of readSource(url, { cache: true, onProgress: (p) => progress.push(p), ...options })) parts.push(c);
      } catch (e) {
        error = { name: e.name, code: e.code, message: e.message, url: e.url, offset: e.offset, needed: e.needed, available: e.available };
      }
      const blob = new Blob(parts);
      return { size: blob.size, sha: await window.sha256(blob), progress, phases: [...new Set(progress.map((p) => p.phase))], error };
    };
  });
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

/** `fetch` progress never goes back, never past the total, and ends at the file's size. */
function checkProgress(progress, what) {
  const fetches = progress.filter((p) => p.phase === "fetch" || p.phase === "cache");
  assert.ok(fetches.length > 0, `${what}: progress reported`);
  let last = 0;
  for (const p of fetches) {
    assert.ok(p.loaded >= last, `${what}: loaded went back from ${last} to ${p.loaded}`);
    assert.equal(p.total, size, `${what}: total`);
    assert.ok(p.loaded <= size, `${what}: ${p.loaded} past the total`);
    last = p.loaded;
  }
  assert.equal(last, size, `${what}: progress ends at the file's size`);
}

describe("the model store and resumable downloads", () => {
  const CUT = 5 * CHUNK + 123_457; // inside chunk 5
  const cutUrl = path(`?cut=${CUT}`);

  test("a load through a cut connection gives the native ids and asks again only from the cut", { timeout: 240_000 }, async () => {
    const mark = control.requests.length;
    const r = await within(220_000, page.evaluate(async ({ url, prompt, n, ctx, download }) => {
      const { Engine, modelCache } = window.wick;
      const progress = [];
      const engine = await Engine.load(url, { contextLength: ctx, warmUp: false, download, onProgress: (p) => progress.push(p) });
      const ids = [];
      for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) if (c.tokenId !== null) ids.push(c.tokenId);
      await engine.dispose();
      const stored = await modelCache.get(url);
      return { ids, progress, storedSha: await window.sha256(stored), storedSize: stored.size, has: await modelCache.has(url) };
    }, { url: cutUrl, prompt: PROMPT, n: N, ctx: CTX, download: DOWNLOAD }), "cut load");
    assert.deepEqual(r.ids, native.ids, "greedy ids equal the native engine's");
    checkProgress(r.progress, "cut load");
    assert.equal(r.has, true);
    assert.equal(r.storedSize, size);
    assert.equal(r.storedSha, sha, "the stored bytes are the file's");

    const gets = requests(cutUrl, mark).filter((q) => q.method === "GET");
    const cutChunk = Math.floor(CUT / CHUNK) * CHUNK;
    const cut = gets.find((q) => q.start <= CUT && q.end >= CUT && q.sent < q.end - q.start + 1);
    assert.ok(cut, `a response was cut: ${JSON.stringify(gets)}`);
    // The retry asks from the first byte the page did not receive: the cut,
    // or the chunk's start where the reset reached the page before its bytes.
    const retry = gets.filter((q) => q !== cut && q.start >= cutChunk && q.start <= CUT && q.end === cut.end);
    assert.equal(retry.length, 1, `one retry of the cut chunk: ${JSON.stringify(gets)}`);
    // Every byte sent once, but for what the cut connection lost in flight.
    const sent = gets.reduce((s, q) => s + q.sent, 0);
    assert.ok(sent >= size && sent <= size + CHUNK, `${sent} bytes sent for a ${size}-byte file`);
    log(`cut at ${CUT}: ${gets.length} GETs, the retry asked from ${retry[0].start}, ${sent} bytes sent`);
  });

  test("a second load reads the store: a HEAD request, no model byte fetched", { timeout: 120_000 }, async () => {
    const mark = control.requests.length;
    const r = await within(100_000, page.evaluate(async ({ url, ctx }) => {
      const progress = [];
      const engine = await window.wick.Engine.load(url, { contextLength: ctx, warmUp: false, onProgress: (p) => progress.push(p) });
      await engine.dispose();
      return { progress, phases: [...new Set(progress.map((p) => p.phase))] };
    }, { url: cutUrl, ctx: CTX }), "cached load");
    const seen = requests(cutUrl, mark);
    assert.deepEqual(seen.map((q) => q.method), ["HEAD"], JSON.stringify(seen));
    assert.ok(r.phases.includes("cache") && !r.phases.includes("fetch"), `phases ${r.phases}`);
    checkProgress(r.progress, "cached load");
  });

  test("a load stopped part way resumes from its stored chunks", { timeout: 60_000 }, async () => {
    const url = path("?resume");
    const mark = control.requests.length;
    const first = await page.evaluate(async ({ url, download, stopAt }) => {
      const ac = new AbortController();
      const onProgress = (p) => p.loaded >= stopAt && ac.abort();
      const r = await window.readAll(url, { download, onProgress, signal: ac.signal });
      return { error: r.error, list: await window.wick.modelCache.list() };
    }, { url, download: DOWNLOAD, stopAt: 9 * CHUNK });
    assert.equal(first.error?.name, "AbortError", JSON.stringify(first.error));
    const partial = first.list.find((m) => m.url.endsWith(url));
    assert.ok(partial && !partial.complete && partial.bytes > 0 && partial.bytes % CHUNK === 0, JSON.stringify(first.list));

    const mark2 = control.requests.length;
    const second = await page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD });
    assert.equal(second.error, null);
    assert.equal(second.sha, sha, "the resumed bytes are the file's");
    checkProgress(second.progress, "resumed load");
    const gets = requests(url, mark2).filter((q) => q.method === "GET");
    assert.equal(Math.min(...gets.map((q) => q.start)), partial.bytes, "the resumed load asks from the first chunk not stored");
    assert.equal(gets.reduce((s, q) => s + q.sent, 0), size - partial.bytes, "nothing stored is fetched again");
    log(`stopped with ${partial.bytes} bytes stored (${requests(url, mark).length - requests(url, mark2).length} requests), resumed with ${gets.length} GETs`);
  });

  test("a changed ETag invalidates the stored copy and fetches the file again", { timeout: 60_000 }, async () => {
    const url = path("?resume");
    control.etags.set(`/models/${TINY}`, '"changed"');
    try {
      const mark = control.requests.length;
      const r = await page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD });
      assert.equal(r.error, null);
      assert.ok(r.phases.includes("fetch") && !r.phases.includes("cache"), `phases ${r.phases}`);
      assert.equal(r.sha, sha);
      const gets = requests(url, mark).filter((q) => q.method === "GET");
      assert.equal(gets.reduce((s, q) => s + q.sent, 0), size, "the whole file fetched again");
      // And the new ETag is what the store now holds: the next read is a hit.
      const again = await page.evaluate(({ url }) => window.readAll(url), { url });
      assert.deepEqual(again.phases, ["cache"]);
    } finally {
      control.etags.clear();
    }
  });

  test("the quota error comes before any model byte is fetched", { timeout: 60_000 }, async () => {
    const url = path("?quota");
    const mark = control.requests.length;
    const e = await page.evaluate(async (url) => {
      const { Engine } = window.wick;
      const real = StorageManager.prototype.estimate;
      StorageManager.prototype.estimate = async () => ({ quota: 5_000_000, usage: 1_000_000 });
      try {
        await Engine.load(url, { warmUp: false });
        return null;
      } catch (e) {
        return { name: e.name, code: e.code, message: e.message, needed: e.needed, available: e.available, typed: e instanceof window.wick.StorageQuotaError };
      } finally {
        StorageManager.prototype.estimate = real;
      }
    }, url);
    assert.ok(e?.typed, JSON.stringify(e));
    assert.equal(e.code, "storage_quota");
    assert.equal(e.needed, size);
    assert.equal(e.available, 4_000_000);
    assert.ok(e.message.includes(String(size)) && e.message.includes("4000000"), e.message);
    assert.deepEqual(requests(url, mark).map((q) => q.method), ["HEAD"], "no GET");
    assert.equal(await page.evaluate((url) => window.wick.modelCache.has(url), url), false);
  });

  test("a store that refuses a write past the quota check loads the model without storing it", { timeout: 60_000 }, async () => {
    // As Chromium's incognito storage does (in memory: writes fail past
    // about 1.6 GB while estimate() reports 10 GiB free): the sixth chunk's
    // write is refused for space.
    const url = path("?refused");
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
    assert.equal(r.read.sha, sha);
    assert.equal(r.notStored.length, 1, JSON.stringify(r.notStored));
    assert.ok(r.notStored[0].url.endsWith(url));
    assert.match(r.notStored[0].reason, /QuotaExceededError/);
    assert.ok(r.warnings.some((w) => w.includes("the load goes on without storing it")), JSON.stringify(r.warnings));
    assert.equal(r.stored, false);
    assert.deepEqual(r.listed, []);
  });

  test("a chunk that keeps failing is a DownloadError naming the URL and byte", { timeout: 60_000 }, async () => {
    const at = 3 * CHUNK + 1000;
    const url = path(`?fail=${at}&times=9`);
    const r = await page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: { ...DOWNLOAD, retries: 2 } });
    assert.equal(r.error?.name, "DownloadError", JSON.stringify(r.error));
    assert.equal(r.error.code, "download");
    assert.equal(r.error.offset, 3 * CHUNK, "the first byte of the failing chunk");
    assert.ok(r.error.url.endsWith(url) && r.error.message.includes(String(3 * CHUNK)) && r.error.message.includes("503"), r.error.message);
    // Three tries of that chunk (the first and two retries), no more.
    const tries = requests(url).filter((q) => q.method === "GET" && q.start <= at && q.end >= at);
    assert.deepEqual(tries.map((q) => q.status), [503, 503, 503], JSON.stringify(tries));
    // What came before it stays stored for the next load.
    const entry = (await page.evaluate(() => window.wick.modelCache.list())).find((m) => m.url.endsWith(url));
    assert.ok(entry && !entry.complete && entry.bytes === 3 * CHUNK, JSON.stringify(entry));
  });

  test("a server without Range support streams the file into the store", { timeout: 60_000 }, async () => {
    const url = path("?norange");
    const first = await page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD });
    assert.equal(first.error, null);
    assert.equal(first.sha, sha);
    checkProgress(first.progress, "plain stream");
    const second = await page.evaluate(({ url }) => window.readAll(url), { url });
    assert.deepEqual(second.phases, ["cache"]);
    assert.equal(second.sha, sha);
  });

  test("without OPFS the Cache API stores the model", { timeout: 60_000 }, async () => {
    const url = path("?fallback");
    const mark = control.requests.length;
    const r = await page.evaluate(async ({ url, download }) => {
      const real = StorageManager.prototype.getDirectory;
      delete StorageManager.prototype.getDirectory;
      try {
        const first = await window.readAll(url, { download });
        const second = await window.readAll(url, { download });
        const entry = (await window.wick.modelCache.list()).find((m) => m.url.endsWith(url));
        const keys = (await (await caches.open("wick-models-v2")).keys()).length;
        return { first, second, entry, keys };
      } finally {
        StorageManager.prototype.getDirectory = real;
      }
    }, { url, download: DOWNLOAD });
    assert.equal(r.first.sha, sha);
    assert.equal(r.second.sha, sha);
    assert.deepEqual(r.second.phases, ["cache"]);
    assert.equal(r.entry?.store, "cache", JSON.stringify(r.entry));
    assert.equal(r.keys, Math.ceil(size / CHUNK) + 1, "a chunk per MiB and the meta");
    assert.equal(requests(url, mark).filter((q) => q.method === "GET").reduce((s, q) => s + q.sent, 0), size);
  });

  test("modelCache lists, answers has, deletes and clears, from the page and from a worker", { timeout: 60_000 }, async () => {
    const r = await page.evaluate(async ({ cutUrl }) => {
      const { modelCache, clearCache } = window.wick;
      const abs = (u) => new URL(u, location.href).href;
      const list = await modelCache.list();
      const usage = await modelCache.usage();
      // A module worker of its own importing the package: the same store.
      const src = `import { modelCache } from "${location.origin}/web/src/index.js";
        self.onmessage = async ({ data }) => {
          try { self.postMessage({ value: await modelCache[data.op](...data.args) }); }
          catch (e) { self.postMessage({ error: e.name + ": " + e.message }); }
        };`;
      const worker = new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })), { type: "module" });
      const ask = (op, ...args) => new Promise((resolve, reject) => {
        worker.onmessage = ({ data }) => (data.error ? reject(new Error(data.error)) : resolve(data.value));
        worker.postMessage({ op, args });
      });
      const fromWorker = { list: await ask("list"), has: await ask("has", abs(cutUrl)), usage: await ask("usage") };
      fromWorker.deleted = await ask("delete", abs(cutUrl));
      const hasAfterWorkerDelete = await modelCache.has(cutUrl);
      const deletedTwice = await clearCache(cutUrl);
      worker.terminate();
      const cleared = await modelCache.clear();
      return { list, usage, fromWorker, hasAfterWorkerDelete, deletedTwice, cleared, after: await modelCache.list(), usageAfter: await modelCache.usage() };
    }, { cutUrl });
    const byUrl = Object.fromEntries(r.list.map((m) => [new URL(m.url).pathname + new URL(m.url).search, m]));
    for (const q of [cutUrl, path("?resume"), path("?norange"), path("?fallback")]) {
      const m = byUrl[q];
      assert.ok(m?.complete, `${q} listed whole: ${JSON.stringify(r.list)}`);
      assert.equal(m.size, size);
      assert.equal(m.bytes, size);
      assert.ok(m.cachedAt > Date.now() - 600_000 && m.cachedAt <= Date.now(), `cachedAt ${m.cachedAt}`);
    }
    assert.equal(byUrl[path("?fallback")].store, "cache");
    assert.equal(byUrl[cutUrl].store, "opfs");
    assert.ok(!byUrl[path("?quota")], "the refused model is not listed");
    assert.equal(r.usage.bytes, r.list.reduce((s, m) => s + m.bytes, 0));
    assert.equal(r.usage.models, r.list.filter((m) => m.complete).length);
    assert.ok(r.usage.quota > 0 && r.usage.usage >= r.usage.bytes, JSON.stringify(r.usage));
    assert.deepEqual(r.fromWorker.list, r.list, "the worker sees the same store");
    assert.equal(r.fromWorker.has, true);
    assert.equal(r.fromWorker.usage.bytes, r.usage.bytes);
    assert.equal(r.fromWorker.deleted, true);
    assert.equal(r.hasAfterWorkerDelete, false, "deleted from the worker, gone on the page");
    assert.equal(r.deletedTwice, false);
    assert.equal(r.cleared, true);
    assert.deepEqual(r.after, []);
    assert.equal(r.usageAfter.bytes, 0);
    assert.equal(await page.evaluate(() => window.persistCalls), 1, "persist() asked once, for the first model stored");
  });
});
