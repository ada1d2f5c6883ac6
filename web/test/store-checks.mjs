// Checks of the model store and the download path that more than one
// browser runs (cache.test.mjs in Chromium, firefox.test.mjs in Firefox): the
// page side runs in the browser, the assertions here. Each works on one
// model file served at /models/NAME by web/tools/serve.mjs in 1 MiB chunks,
// so a file spans many of them; the truth is the file on disk (its size and
// SHA-256), the native CLI's ids and the server's log of what it sent.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { modelFile, outDir, within } from "./harness.mjs";

export const CHUNK = 1 << 20;
export const DOWNLOAD = { chunkSize: CHUNK, parallel: 4, retryDelay: 20 };

/**
 * What the checks share: the page, the server's `control`, the model's
 * size and SHA-256 on disk, `path(query)` (its URL with a query, so each
 * check has a store entry of its own) and `requests(path, from)` (the
 * server's log for that URL since `from`). Installs on the page
 * `window.sha256(blob)` and `window.readAll(url, options)`: readSource's
 * bytes with `cache: true`, their SHA-256, the progress and the error, if
 * any (no GPU: the download and the store alone).
 */
export async function storeContext(page, control, model, log = () => {}) {
  const bytes = readFileSync(modelFile(model));
  const size = bytes.length;
  const sha = createHash("sha256").update(bytes).digest("hex");
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
        error = { name: e.name, code: e.code ?? null, message: e.message, url: e.url ?? null, offset: e.offset ?? null };
      }
      const blob = new Blob(parts);
      return { size: blob.size, sha: await window.sha256(blob), progress, phases: [...new Set(progress.map((p) => p.phase))], error };
    };
  });
  return {
    page,
    control,
    model,
    size,
    sha,
    log,
    path: (q = "") => `/models/${model}${q}`,
    requests: (p, from = 0) => control.requests.slice(from).filter((r) => r.path === p),
  };
}

/** `fetch` progress never goes back, never past the total, and ends at the file's size. */
export function checkProgress(ctx, progress, what) {
  const fetches = progress.filter((p) => p.phase === "fetch" || p.phase === "cache");
  assert.ok(fetches.length > 0, `${what}: progress reported`);
  let last = 0;
  for (const p of fetches) {
    assert.ok(p.loaded >= last, `${what}: loaded went back from ${last} to ${p.loaded}`);
    assert.equal(p.total, ctx.size, `${what}: total`);
    assert.ok(p.loaded <= ctx.size, `${what}: ${p.loaded} past the total`);
    last = p.loaded;
  }
  assert.equal(last, ctx.size, `${what}: progress ends at the file's size`);
}

/** The offset `?cut` drops the connection at: inside chunk 5. */
export const CUT = 5 * CHUNK + 123_457;
/** The URL of the cut load (and of the cached load after it). */
export const cutPath = (ctx) => ctx.path(`?cut=${CUT}`);

/**
 * A load (Engine.load, `prompt` generated greedily) through a connection
 * the server cuts midway gives the native engine's ids `native`, stores
 * the file's bytes, and asks again only from the cut: one retry of the cut
 * chunk, every byte sent once but what the cut lost in flight.
 */
export async function checkCutLoad(ctx, { native, prompt, n, ctxLen }) {
  const url = cutPath(ctx);
  const mark = ctx.control.requests.length;
  const r = await within(220_000, ctx.page.evaluate(async ({ url, prompt, n, ctx, download }) => {
    const { Engine, modelCache } = window.wick;
    const progress = [];
    const engine = await Engine.load(url, { contextLength: ctx, warmUp: false, download, onProgress: (p) => progress.push(p) });
    const ids = [];
    for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) if (c.tokenId !== null) ids.push(c.tokenId);
    await engine.dispose();
    const stored = await modelCache.get(url);
    return { ids, progress, storedSha: await window.sha256(stored), storedSize: stored.size, has: await modelCache.has(url) };
  }, { url, prompt, n, ctx: ctxLen, download: DOWNLOAD }), "cut load");
  assert.deepEqual(r.ids, native.ids, "greedy ids equal the native engine's");
  checkProgress(ctx, r.progress, "cut load");
  assert.equal(r.has, true);
  assert.equal(r.storedSize, ctx.size);
  assert.equal(r.storedSha, ctx.sha, "the stored bytes are the file's");

  const gets = ctx.requests(url, mark).filter((q) => q.method === "GET");
  const cutChunk = Math.floor(CUT / CHUNK) * CHUNK;
  const cut = gets.find((q) => q.start <= CUT && q.end >= CUT && q.sent < q.end - q.start + 1);
  assert.ok(cut, `a response was cut: ${JSON.stringify(gets)}`);
  // The retry asks from the first byte the page did not receive: the cut,
  // or the chunk's start where the reset reached the page before its bytes.
  const retry = gets.filter((q) => q !== cut && q.start >= cutChunk && q.start <= CUT && q.end === cut.end);
  assert.equal(retry.length, 1, `one retry of the cut chunk: ${JSON.stringify(gets)}`);
  // Every byte sent once, but for what the cut connection lost in flight.
  const sent = gets.reduce((s, q) => s + q.sent, 0);
  assert.ok(sent >= ctx.size && sent <= ctx.size + CHUNK, `${sent} bytes sent for a ${ctx.size}-byte file`);
  ctx.log(`cut at ${CUT}: ${gets.length} GETs, the retry asked from ${retry[0].start}, ${sent} bytes sent`);
}

/** A second load of the cut load's URL reads the store: one HEAD request, no model byte fetched. */
export async function checkStoredLoad(ctx, { ctxLen }) {
  const url = cutPath(ctx);
  const mark = ctx.control.requests.length;
  const r = await within(100_000, ctx.page.evaluate(async ({ url, ctx }) => {
    const progress = [];
    const engine = await window.wick.Engine.load(url, { contextLength: ctx, warmUp: false, onProgress: (p) => progress.push(p) });
    await engine.dispose();
    return { progress, phases: [...new Set(progress.map((p) => p.phase))] };
  }, { url, ctx: ctxLen }), "cached load");
  const seen = ctx.requests(url, mark);
  assert.deepEqual(seen.map((q) => q.method), ["HEAD"], JSON.stringify(seen));
  assert.ok(r.phases.includes("cache") && !r.phases.includes("fetch"), `phases ${r.phases}`);
  checkProgress(ctx, r.progress, "cached load");
}

/** A read stopped part way (an abort) keeps whole chunks; the next read asks from the first one not stored. */
export async function checkStoppedResume(ctx) {
  const url = ctx.path("?resume");
  const mark = ctx.control.requests.length;
  const first = await within(50_000, ctx.page.evaluate(async ({ url, download, stopAt }) => {
    const ac = new AbortController();
    const onProgress = (p) => p.loaded >= stopAt && ac.abort();
    const r = await window.readAll(url, { download, onProgress, signal: ac.signal });
    return { error: r.error, list: await window.wick.modelCache.list() };
  }, { url, download: DOWNLOAD, stopAt: 9 * CHUNK }), "stopped read");
  assert.equal(first.error?.name, "AbortError", JSON.stringify(first.error));
  const partial = first.list.find((m) => m.url.endsWith(url));
  assert.ok(partial && !partial.complete && partial.bytes > 0 && partial.bytes % CHUNK === 0, JSON.stringify(first.list));

  const mark2 = ctx.control.requests.length;
  const second = await within(50_000, ctx.page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD }), "resumed read");
  assert.equal(second.error, null);
  assert.equal(second.sha, ctx.sha, "the resumed bytes are the file's");
  checkProgress(ctx, second.progress, "resumed load");
  const gets = ctx.requests(url, mark2).filter((q) => q.method === "GET");
  assert.equal(Math.min(...gets.map((q) => q.start)), partial.bytes, "the resumed load asks from the first chunk not stored");
  assert.equal(gets.reduce((s, q) => s + q.sent, 0), ctx.size - partial.bytes, "nothing stored is fetched again");
  ctx.log(`stopped with ${partial.bytes} bytes stored (${ctx.requests(url, mark).length - ctx.requests(url, mark2).length} requests), resumed with ${gets.length} GETs`);
}

/**
 * A changed ETag invalidates the stored copy of `?resume` (stored whole by
 * checkStoppedResume): the whole file is fetched again, and the store
 * then holds the new ETag (the next read is a hit).
 */
export async function checkChangedEtag(ctx) {
  const url = ctx.path("?resume");
  ctx.control.etags.set(ctx.path(), '"changed"');
  try {
    const mark = ctx.control.requests.length;
    const r = await within(50_000, ctx.page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD }), "changed read");
    assert.equal(r.error, null);
    assert.ok(r.phases.includes("fetch") && !r.phases.includes("cache"), `phases ${r.phases}`);
    assert.equal(r.sha, ctx.sha);
    const gets = ctx.requests(url, mark).filter((q) => q.method === "GET");
    assert.equal(gets.reduce((s, q) => s + q.sent, 0), ctx.size, "the whole file fetched again");
    const again = await ctx.page.evaluate(({ url }) => window.readAll(url), { url });
    assert.deepEqual(again.phases, ["cache"]);
  } finally {
    ctx.control.etags.clear();
  }
}

/**
 * A file whose size changed on the server under the same ETag (another
 * file's bytes at the URL: the server's `control.files`) invalidates the
 * stored copy of `?resized`: the new file is fetched whole and its bytes
 * are what the read gives. The two files are the model's first 3 MiB and
 * some bytes, and its first 2 MiB and a few (written to test-output/), so
 * each spans chunks and the check stores little. The entry is deleted after.
 */
export async function checkChangedSize(ctx) {
  const url = ctx.path("?resized");
  const model = readFileSync(modelFile(ctx.model));
  const dir = path.join(outDir, "store-checks");
  mkdirSync(dir, { recursive: true });
  const files = [3 * CHUNK + 4321, 2 * CHUNK + 17].map((n, i) => {
    const file = path.join(dir, `resized-${i}.bin`);
    writeFileSync(file, model.subarray(0, n));
    return { file, size: n, sha: createHash("sha256").update(model.subarray(0, n)).digest("hex") };
  });
  const read = () => within(50_000, ctx.page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD }), "read");
  // One ETag for both files, so only the size tells the change.
  ctx.control.etags.set(ctx.path(), '"the same"');
  try {
    ctx.control.files.set(ctx.path(), files[0].file);
    const first = await read();
    assert.equal(first.error, null, JSON.stringify(first.error));
    assert.equal(first.sha, files[0].sha);
    assert.equal(await ctx.page.evaluate((url) => window.wick.modelCache.has(url), url), true, "stored whole");

    ctx.control.files.set(ctx.path(), files[1].file);
    const mark = ctx.control.requests.length;
    const r = await read();
    assert.equal(r.error, null, JSON.stringify(r.error));
    assert.ok(r.phases.includes("fetch") && !r.phases.includes("cache"), `phases ${r.phases}`);
    assert.equal(r.size, files[1].size);
    assert.equal(r.sha, files[1].sha, "the new file's bytes");
    const gets = ctx.requests(url, mark).filter((q) => q.method === "GET");
    assert.equal(gets.reduce((s, q) => s + q.sent, 0), files[1].size, "the new file fetched whole");
    const again = await read();
    assert.deepEqual(again.phases, ["cache"], "the store holds the new file");
    assert.equal(again.sha, files[1].sha);
  } finally {
    ctx.control.files.clear();
    ctx.control.etags.clear();
  }
  assert.equal(await ctx.page.evaluate((url) => window.wick.modelCache.delete(url), url), true);
}

/**
 * The quota check refuses a load before any model byte is fetched, with a
 * StorageQuotaError naming the bytes needed (the file's size) and those
 * available, and nothing is stored.
 *
 * `big` (a model file name) uses the browser's real quota: that file, over
 * what navigator.storage.estimate() leaves, is refused, and the numbers
 * named are the file's size and the estimate's quota less its usage. The
 * browser must then have been given a quota smaller than the file (Firefox:
 * the pref dom.quotaManager.temporaryStorage.fixedLimit, which sets the
 * whole profile's limit; an origin gets a fifth of it).
 *
 * Without `big`, the check's own model is refused under a quota made small
 * by replacing StorageManager.prototype.estimate for the call (5 MB, 1 MB
 * used): Chromium has no setting for a page's quota (it follows the
 * disk's free space), and the estimate is the only input the check reads.
 */
export async function checkQuotaRefused(ctx, { big = null } = {}) {
  const url = big ? `/models/${big}?quota` : ctx.path("?quota");
  const needed = big ? statSync(modelFile(big)).size : ctx.size;
  const mark = ctx.control.requests.length;
  const e = await within(50_000, ctx.page.evaluate(async ({ url, fake }) => {
    const { Engine } = window.wick;
    const real = StorageManager.prototype.estimate;
    if (fake) StorageManager.prototype.estimate = async () => ({ quota: 5_000_000, usage: 1_000_000 });
    try {
      const before = await navigator.storage.estimate();
      try {
        await Engine.load(url, { warmUp: false });
        return null;
      } catch (e) {
        const after = await navigator.storage.estimate();
        return {
          name: e.name, code: e.code, message: e.message, needed: e.needed, available: e.available,
          typed: e instanceof window.wick.StorageQuotaError, before, after,
        };
      }
    } finally {
      StorageManager.prototype.estimate = real;
    }
  }, { url, fake: !big }), "quota");
  ctx.log(`quota refusal: ${JSON.stringify(e)}`);
  assert.ok(e?.typed, JSON.stringify(e));
  assert.equal(e.code, "storage_quota");
  assert.equal(e.needed, needed);
  if (big) {
    // What the estimate left just before the load and just after it (the
    // browser may settle its usage count meanwhile).
    const left = [e.before, e.after].map((x) => x.quota - x.usage);
    assert.ok(e.available >= Math.min(...left) && e.available <= Math.max(...left), `available ${e.available}, the estimate's ${left}`);
    assert.ok(e.available < needed);
  } else {
    assert.equal(e.available, 4_000_000);
  }
  assert.ok(e.message.includes(`${needed} bytes`) && e.message.includes(`${e.available} are available`), e.message);
  assert.deepEqual(ctx.requests(url, mark).map((q) => q.method), ["HEAD"], "no GET");
  assert.equal(await ctx.page.evaluate((url) => window.wick.modelCache.has(url), url), false);
}

/** A chunk that keeps failing (503s) is a DownloadError naming the URL and byte; what came before stays stored. */
export async function checkFailingChunk(ctx) {
  const at = 3 * CHUNK + 1000;
  const url = ctx.path(`?fail=${at}&times=9`);
  const r = await within(50_000, ctx.page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: { ...DOWNLOAD, retries: 2 } }), "failing read");
  assert.equal(r.error?.name, "DownloadError", JSON.stringify(r.error));
  assert.equal(r.error.code, "download");
  assert.equal(r.error.offset, 3 * CHUNK, "the first byte of the failing chunk");
  assert.ok(r.error.url.endsWith(url) && r.error.message.includes(String(3 * CHUNK)) && r.error.message.includes("503"), r.error.message);
  // Three tries of that chunk (the first and two retries), no more.
  const tries = ctx.requests(url).filter((q) => q.method === "GET" && q.start <= at && q.end >= at);
  assert.deepEqual(tries.map((q) => q.status), [503, 503, 503], JSON.stringify(tries));
  const entry = (await ctx.page.evaluate(() => window.wick.modelCache.list())).find((m) => m.url.endsWith(url));
  assert.ok(entry && !entry.complete && entry.bytes === 3 * CHUNK, JSON.stringify(entry));
}

/** A server without Range support streams the file into the store; the next read is a hit. */
export async function checkNoRange(ctx) {
  const url = ctx.path("?norange");
  const first = await within(50_000, ctx.page.evaluate(({ url, download }) => window.readAll(url, { download }), { url, download: DOWNLOAD }), "plain read");
  assert.equal(first.error, null);
  assert.equal(first.sha, ctx.sha);
  checkProgress(ctx, first.progress, "plain stream");
  const second = await ctx.page.evaluate(({ url }) => window.readAll(url), { url });
  assert.deepEqual(second.phases, ["cache"]);
  assert.equal(second.sha, ctx.sha);
}

/**
 * Without OPFS (StorageManager.prototype.getDirectory removed for the
 * call, as in a browser that lacks it) the Cache API stores the model: a
 * chunk per MiB and the meta, the second read a hit, every byte fetched once.
 */
export async function checkCacheApiFallback(ctx) {
  const url = ctx.path("?fallback");
  const mark = ctx.control.requests.length;
  const r = await within(50_000, ctx.page.evaluate(async ({ url, download }) => {
    const real = StorageManager.prototype.getDirectory;
    delete StorageManager.prototype.getDirectory;
    try {
      const first = await window.readAll(url, { download });
      const second = await window.readAll(url, { download });
      const entry = (await window.wick.modelCache.list()).find((m) => m.url.endsWith(url));
      const keys = (await (await caches.open("wick-models-v2")).keys()).length;
      return { first, second, entry, keys, opfsGone: typeof navigator.storage.getDirectory };
    } finally {
      StorageManager.prototype.getDirectory = real;
    }
  }, { url, download: DOWNLOAD }), "fallback reads");
  assert.equal(r.opfsGone, "undefined", "OPFS was absent for the reads");
  assert.equal(r.first.error, null, JSON.stringify(r.first.error));
  assert.equal(r.first.sha, ctx.sha);
  assert.equal(r.second.sha, ctx.sha);
  assert.deepEqual(r.second.phases, ["cache"]);
  assert.equal(r.entry?.store, "cache", JSON.stringify(r.entry));
  assert.equal(r.keys, Math.ceil(ctx.size / CHUNK) + 1, "a chunk per MiB and the meta");
  assert.equal(ctx.requests(url, mark).filter((q) => q.method === "GET").reduce((s, q) => s + q.sent, 0), ctx.size);
}

/**
 * modelCache from the page and from a module worker importing the
 * package: `list` names each of `stored` (query -> the store it is in,
 * "opfs" or "cache") whole at the file's size and none of `absent` (a
 * query of the model's URL, or a path);
 * `usage` adds up the list; `has`, `delete` (from the worker, seen on the
 * page), a second delete answering false, and `clear` leaving nothing.
 */
export async function checkModelCacheApi(ctx, { stored, absent = [] }) {
  const cutUrl = cutPath(ctx);
  const r = await within(150_000, ctx.page.evaluate(async ({ cutUrl }) => {
    const { modelCache, clearCache } = window.wick;
    const abs = (u) => new URL(u, location.href).href;
    const list = await modelCache.list();
    const usage = await modelCache.usage();
    const src = `import { modelCache } from "${location.origin}/web/src/index.js";
      self.onmessage = async ({ data }) => {
        try { self.postMessage({ value: await modelCache[data.op](...data.args) }); }
        catch (e) { self.postMessage({ error: e.name + ": " + e.message }); }
      };`;
    const worker = new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })), { type: "module" });
    const ask = (op, ...args) => new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => (data.error ? reject(new Error(data.error)) : resolve(data.value));
      worker.onerror = (e) => reject(new Error(`worker: ${e.message}`));
      worker.postMessage({ op, args });
    });
    const fromWorker = { list: await ask("list"), has: await ask("has", abs(cutUrl)), usage: await ask("usage") };
    fromWorker.deleted = await ask("delete", abs(cutUrl));
    const hasAfterWorkerDelete = await modelCache.has(cutUrl);
    const deletedTwice = await clearCache(cutUrl);
    worker.terminate();
    const cleared = await modelCache.clear();
    return { list, usage, fromWorker, hasAfterWorkerDelete, deletedTwice, cleared, after: await modelCache.list(), usageAfter: await modelCache.usage() };
  }, { cutUrl }), "modelCache");
  const byUrl = Object.fromEntries(r.list.map((m) => [new URL(m.url).pathname + new URL(m.url).search, m]));
  for (const [q, store] of Object.entries(stored)) {
    const m = byUrl[ctx.path(q)];
    assert.ok(m?.complete, `${q} listed whole: ${JSON.stringify(r.list)}`);
    assert.equal(m.size, ctx.size);
    assert.equal(m.bytes, ctx.size);
    assert.equal(m.store, store, `${q}'s store`);
    assert.ok(m.cachedAt > Date.now() - 600_000 && m.cachedAt <= Date.now(), `cachedAt ${m.cachedAt}`);
  }
  for (const q of absent) assert.ok(!byUrl[q.startsWith("?") ? ctx.path(q) : q], `${q} is not listed`);
  assert.equal(r.usage.bytes, r.list.reduce((s, m) => s + m.bytes, 0));
  assert.equal(r.usage.models, r.list.filter((m) => m.complete).length);
  // The origin's usage counts what the browser keeps on disk: OPFS files at
  // their size, but Firefox compresses Cache API bodies (snappy), so only
  // the OPFS entries are a floor for it.
  const inOpfs = r.list.filter((m) => m.store === "opfs").reduce((s, m) => s + m.bytes, 0);
  assert.ok(r.usage.quota > 0 && r.usage.usage >= inOpfs, JSON.stringify({ ...r.usage, inOpfs }));
  assert.deepEqual(r.fromWorker.list, r.list, "the worker sees the same store");
  assert.equal(r.fromWorker.has, true);
  assert.equal(r.fromWorker.usage.bytes, r.usage.bytes);
  assert.equal(r.fromWorker.deleted, true);
  assert.equal(r.hasAfterWorkerDelete, false, "deleted from the worker, gone on the page");
  assert.equal(r.deletedTwice, false);
  assert.equal(r.cleared, true);
  assert.deepEqual(r.after, []);
  assert.equal(r.usageAfter.bytes, 0);
}
