// Split GGUF in the page (llama.cpp's gguf-split shards), in Chromium: the
// tiny qwen3 fixture cut into 3 shards by the native CLI (`wick split`, into
// test-output/split/) loads by its first shard's URL and by a list of Files,
// and gives the same greedy ids as the unsplit file in the same page; with
// `cache: true` each shard is kept and a second load (a list of URLs) reads
// them from the cache; the worker engine takes a list too; progress counts
// the bytes of all shards; a shard the server does not have (404) is a
// ModelLoadError naming it. The check is in split-checks.mjs (Firefox runs
// it too, firefox.test.mjs). The page's preflight reads only the headers
// (one file or every shard) and reports what the load then holds by the
// engine's own count, and why it does not fit where a budget is too small.
//
// run: node --test web/test/split.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { after, before, test } from "node:test";
import { checkBuilt, launch, modelFile, openTestPage, startServer, within } from "./harness.mjs";
import { checkSplitLoads, writeShards } from "./split-checks.mjs";

const log = (s) => console.log(s);
const TINY = "tiny-qwen3.q8_0.gguf";
let server, browser, page, sizes, control;

before(async () => {
  checkBuilt();
  sizes = writeShards();
  let base;
  ({ server, url: base, control } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
});

after(async () => {
  await browser?.close();
  server?.close();
});

test("a split model loads by its first shard's URL and by a list, as its unsplit file", { timeout: 240_000 }, () =>
  checkSplitLoads(page, sizes, log, control));

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
