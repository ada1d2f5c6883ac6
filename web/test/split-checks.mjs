// Split GGUF (llama.cpp's gguf-split shards) in the page, as more than one
// browser checks it (split.test.mjs in Chromium, firefox.test.mjs in
// Firefox): the tiny qwen3 fixture cut into 3 shards by the native CLI
// (`wick split`, into test-output/split/, served at /test-output/split/)
// loads by its first shard's URL and by a list, and gives the greedy ids of
// the unsplit file in the same page. The page side runs in the browser, the
// assertions here.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { modelFile, nativeEnv, outDir, releaseBinary, within } from "./harness.mjs";

export const SPLIT_MODEL = "tiny-qwen3.q8_0.gguf";
const DIR = path.join(outDir, "split");
const shard = (prefix, i) => `${prefix}-0000${i}-of-00003.gguf`;

/**
 * Writes the shards (400 kB of tensor data each: the embedding alone in the
 * first, the layers in two more), and the same shards with the second one
 * absent from the server ("gap"). Returns the three shards' sizes.
 */
export function writeShards() {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  const wick = releaseBinary("wick", "wick-cli");
  execFileSync(wick, ["split", modelFile(SPLIT_MODEL), path.join(DIR, "tiny.gguf"), "--split-max-size", "400K"], { env: nativeEnv() });
  for (const i of [1, 3]) copyFileSync(path.join(DIR, shard("tiny", i)), path.join(DIR, shard("gap", i)));
  return [1, 2, 3].map((i) => statSync(path.join(DIR, shard("tiny", i))).size);
}

/**
 * The split model against its unsplit file on `page`: by the first shard's
 * URL with `cache: true` (each shard kept) and by a list of URLs (read from
 * the store) it gives the unsplit file's greedy id; a list of Files and the
 * worker engine load the same model; progress counts the bytes of all
 * shards (the files' sizes, `sizes` from writeShards); a shard the server
 * does not have (404) is a ModelLoadError naming it.
 */
export async function checkSplitLoads(page, sizes, log = () => {}, control = null) {
  const mark = control?.requests.length ?? 0;
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
        // a software GPU for each load.
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
  }, [`/models/${SPLIT_MODEL}`, "/test-output/split"]), "split loads");
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
  for (const i of control ? [2, 3] : []) {
    const p = `/test-output/split/tiny-0000${i}-of-00003.gguf`;
    const ranged = control.requests.slice(mark).filter((q) => q.path === p && q.method === "GET" && q.range);
    const sent = ranged.reduce((a, q) => a + q.sent, 0);
    assert.ok(sent <= sizes[i - 1] + (64 << 10), `shard ${i}: ${sent} bytes in ${ranged.length} Range requests, the file ${sizes[i - 1]}`);
  }
  // The missing shard, named.
  assert.equal(missing?.name, "ModelLoadError", JSON.stringify(missing));
  assert.equal(missing.code, "model_load");
  assert.match(missing.file, /\/test-output\/split\/gap-00002-of-00003\.gguf$/);
  assert.match(missing.message, /shard 2 of 3 .*gap-00002-of-00003\.gguf.*404/);
}
