// Split GGUF in the page (llama.cpp's gguf-split shards): the tiny qwen3
// fixture cut into 3 shards by the native CLI (`wick split`, into
// test-output/split/) loads by its first shard's URL and by a list of Files,
// and gives the same greedy ids as the unsplit file in the same page; with
// `cache: true` each shard is kept and a second load (a list of URLs) reads
// them from the cache; the worker engine takes a list too; progress counts the bytes of all shards; a shard the
// server does not have (404) is a ModelLoadError naming it. The page's
// preflight reads only the headers (one file or every shard) and reports
// what the load then holds by the engine's own count, and why it does not
// fit where a budget is too small.
//
// run: node --test web/test/split.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { checkBuilt, launch, modelFile, nativeEnv, openTestPage, outDir, releaseBinary, startServer, within } from "./harness.mjs";

const log = (s) => console.log(s);
const TINY = "tiny-qwen3.q8_0.gguf";
const DIR = path.join(outDir, "split"); // served at /test-output/split/
const shard = (prefix, i) => `${prefix}-0000${i}-of-00003.gguf`;
let server, base, browser, page, control;

before(async () => {
  checkBuilt();
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  // 400 kB of tensor data a shard: the embedding alone in the first, the
  // layers in two more.
  const wick = releaseBinary("wick", "wick-cli");
  execFileSync(wick, ["split", modelFile(TINY), path.join(DIR, "tiny.gguf"), "--split-max-size", "400K"], { env: nativeEnv() });
  // The same shards with the second one absent from the server.
  for (const i of [1, 3]) copyFileSync(path.join(DIR, shard("tiny", i)), path.join(DIR, shard("gap", i)));
  ({ server, url: base, control } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
});

after(async () => {
  await browser?.close();
  server?.close();
});

test("a split model loads by its first shard's URL and by a list, as its unsplit file", { timeout: 240_000 }, async () => {
  const sizes = [1, 2, 3].map((i) => statSync(path.join(DIR, shard("tiny", i))).size);
  const mark = control.requests.length;
  const r = await within(200_000, page.evaluate(async ([whole, dir]) => {
    const { Engine, clearCache } = window.wick;
    const shards = [1, 2, 3].map((i) => `${dir}/tiny-0000${i}-of-00003.gguf`);
    const greedy = async (source, options = {}, generate = true) => {
      const events = [];
      const e = await Engine.load(source, { contextLength: 32, warmUp: false, onProgress: (p) => events.push(p), ...options });
      let ids = null;
      if (generate) {
        // One token, the prompt's argmax over the whole vocabulary: a decode
        // step (or log-probabilities) would compile more kernels, seconds on
        // SwiftShader for each load.
        const run = e.generate([785, 6722, 315, 9625, 374], { maxTokens: 1, temperature: 0 });
        await run.text();
        ids = run.result.ids;
      }
      const model = e.info().model;
      await e.dispose();
      return { ids, events, model };
    };
    await Promise.all(shards.map((u) => clearCache(u)));
    const out = { whole: await greedy(whole) };
    out.first = await greedy(shards[0], { cache: true });
    out.cached = await Promise.all(shards.map((u) => window.wick.modelCache.has(u)));
    out.list = await greedy(shards, { cache: true });
    const files = await Promise.all(shards.map(async (u) => new File([await (await fetch(u)).blob()], u.split("/").pop())));
    // Loaded only: the generations above compared the weights; this is the
    // list of Files path (not taken for a checkpoint folder).
    out.files = await greedy(files, {}, false);
    // The worker engine takes the same sources (a list here), loaded only.
    const { WorkerEngine } = window.wick;
    const w = await WorkerEngine.load(shards, { contextLength: 32, warmUp: false });
    out.worker = w.info().model;
    await w.dispose();
    out.missing = await Engine.load(`${dir}/gap-00001-of-00003.gguf`, { warmUp: false }).then(
      () => null, (e) => ({ name: e.name, code: e.code, file: e.file, message: e.message }));
    await Promise.all(shards.map((u) => clearCache(u)));
    return out;
  }, [`/models/${TINY}`, "/test-output/split"]), "split loads");
  const { whole, first, list, files, worker, missing, cached } = r;
  log(`greedy ids: whole ${whole.ids}, first shard ${first.ids}, list ${list.ids}`);
  assert.equal(whole.ids.length, 1);
  assert.deepEqual(first.ids, whole.ids);
  assert.deepEqual(list.ids, whole.ids);
  assert.deepEqual(files.model, whole.model);
  assert.deepEqual(worker, whole.model);
  // Each shard kept in the cache, and read from there the second time.
  assert.deepEqual(cached, [true, true, true]);
  const phases = (events) => new Set(events.map((e) => e.phase));
  assert.ok(phases(first.events).has("fetch"), JSON.stringify([...phases(first.events)]));
  assert.ok(phases(list.events).has("cache") && !phases(list.events).has("fetch"), JSON.stringify([...phases(list.events)]));
  // Progress over all shards: the bytes read end at the sum of the files'
  // sizes (the bytes on the server), and the upload ends at its total.
  const sum = sizes.reduce((a, b) => a + b, 0);
  for (const [name, { events }] of Object.entries({ first, list, files })) {
    const read = events.filter((e) => ["fetch", "cache", "read"].includes(e.phase));
    const last = read.at(-1);
    assert.deepEqual([last.loaded, last.total], [sum, sum], `${name}: ${JSON.stringify(last)}`);
    assert.ok(read.every((e, i) => i === 0 || e.loaded >= read[i - 1].loaded), `${name}: progress goes back`);
    const up = events.filter((e) => e.phase === "upload").at(-1);
    assert.equal(up.loaded, up.total, name);
    assert.ok(up.total > sizes[0] && up.total <= sum, `${name}: upload total ${up.total}`);
  }
  // The later shards' headers were read in Range requests of 64 KiB, not
  // by starting their downloads: each was fetched whole once (the first
  // shard's URL with the store emptied; the other loads read the store, the
  // Files were fetched without Range), plus its header's request.
  for (const i of [2, 3]) {
    const p = `/test-output/split/${shard("tiny", i)}`;
    const ranged = control.requests.slice(mark).filter((q) => q.path === p && q.method === "GET" && q.range);
    const sent = ranged.reduce((a, q) => a + q.sent, 0);
    assert.ok(sent <= sizes[i - 1] + (64 << 10), `shard ${i}: ${sent} bytes in ${ranged.length} Range requests, the file ${sizes[i - 1]}`);
  }
  // The missing shard, named.
  assert.equal(missing?.name, "ModelLoadError", JSON.stringify(missing));
  assert.equal(missing.code, "model_load");
  assert.match(missing.file, /\/test-output\/split\/gap-00002-of-00003\.gguf$/);
  assert.match(missing.message, /shard 2 of 3 .*gap-00002-of-00003\.gguf.*404/);
});

test("the preflight reads the headers only and reports what the load then holds", { timeout: 120_000 }, async () => {
  const wholeUrl = `/models/${TINY}`;
  const size = statSync(modelFile(TINY)).size;
  const mark = control.requests.length;
  const r = await within(100_000, page.evaluate(async ([whole, dir]) => {
    const { Engine, preflight, liveGpuMemory } = window.wick;
    const opts = { contextLength: 32, cache: false };
    const err = (e) => ({ name: e.name, code: e.code, message: e.message });
    const out = {};
    out.one = await preflight(whole, opts);
    out.split = await preflight(`${dir}/tiny-00001-of-00003.gguf`, opts);
    const file = new File([await (await fetch(whole)).blob()], "tiny.gguf");
    out.file = await preflight(file, opts);
    const w = window.wick.createWorkerEngine();
    out.worker = await w.preflight(whole, opts);
    w.terminate();
    // The load's own count of what it holds (the GPU was opened above).
    const base = liveGpuMemory().liveBytes;
    const e = await Engine.load(whole, { ...opts, warmUp: false });
    out.held = liveGpuMemory().liveBytes - base;
    out.contextLength = e.info().model.contextLength;
    await e.dispose();
    // A budget a quarter of the KV cache short (what the page already
    // holds counted): a shorter context fits, and the load refuses with
    // the preflight's reason.
    const { bytes, limits } = out.one;
    const tight = { ...opts, memoryBudget: bytes.total + limits.inUse - bytes.kvCache / 4 };
    out.tight = await preflight(whole, tight);
    out.refused = await Engine.load(whole, { ...tight, warmUp: false }).then((x) => x.dispose().then(() => null), err);
    out.none = await preflight(whole, { ...opts, memoryBudget: 1 << 20 });
    out.bad = await preflight(whole, { ...opts, memoryBudget: 0 }).then(() => null, err);
    return out;
  }, [wholeUrl, "/test-output/split"]), "preflights");
  const { one, split, file, worker, held, tight, refused, none, bad } = r;
  log(`preflight: ${JSON.stringify(one)}`);
  // Fits, with the numbers the load then allocates.
  assert.equal(one.fits, true);
  assert.equal(one.reason, null);
  assert.equal(one.contextLength, 32);
  assert.equal(r.contextLength, 32);
  assert.equal(one.bytes.total, held, "preflight total vs the engine's live bytes after the load");
  assert.equal(one.bytes.total, ["weights", "kvCache", "activations", "readback", "sampler"].reduce((a, k) => a + one.bytes[k], 0));
  assert.equal(one.limits.deviceMemory, null, "WebGPU reports no device memory");
  assert.ok(one.limits.maxStorageBufferBindingSize > 0 && one.largestContextByBinding >= one.largestContext);
  // The same model split, or as a File: the same report.
  assert.deepEqual(split.bytes, one.bytes);
  assert.deepEqual(file.bytes, one.bytes);
  assert.deepEqual(worker.bytes, one.bytes, "in a worker");
  // Headers only: one Range request of the first 8 MiB of the 27 MB file
  // (its header, with a 151,936-token vocabulary, is 5.9 MB); the server
  // sent those bytes and no more.
  assert.equal(one.headerBytes, 8 << 20);
  const sent = control.requests.slice(mark).filter((q) => q.path === wholeUrl && q.range).map((q) => q.sent);
  assert.deepEqual(sent.slice(0, 1), [8 << 20]);
  // The later shards' headers (tensor infos) from 64 KiB reads.
  assert.ok(split.headerBytes <= (8 << 20) + 2 * (64 << 10), `${split.headerBytes}`);
  // Too tight: why, and the load says the same.
  assert.equal(tight.fits, false);
  assert.equal(tight.reason.code, "context_too_large");
  assert.ok(tight.largestContext > 0 && tight.largestContext < 32, `${tight.largestContext}`);
  assert.equal(tight.limits.memoryBudget, one.bytes.total + one.limits.inUse - one.bytes.kvCache / 4);
  assert.equal(tight.limits.available, tight.limits.memoryBudget - tight.limits.inUse);
  assert.equal(refused?.name, "ModelLoadError", JSON.stringify(refused));
  assert.ok(refused.message.includes(tight.reason.message), refused.message);
  assert.equal(none.reason.code, "model_too_large");
  assert.equal(none.largestContext, 0);
  assert.equal(bad?.name, "InvalidRequestError", JSON.stringify(bad));
});
