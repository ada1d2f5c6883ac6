// A 1.5B model in the page: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB, an
// untied Q6_K head of 151936 x 1536) loaded by URL in headless Chromium on
// SwiftShader, streamed in Range requests chunk by chunk into GPU buffers,
// then greedy tokens compared with llama.cpp's. Records load time, peak JS
// heap (sampled over CDP while it loads and generates) and decode tok/s in
// test-output/large-model-metrics.json.
//
// run: node --test web/test/large-model.test.mjs   (after npm run build and
// scripts/fetch-models.sh qwen15; it is part of npm test)

import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { checkBuilt, launch, llamaCppCase, modelsDir, openTestPage, outDir, startServer, within } from "./harness.mjs";

const MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const GOLDEN = "llamacpp_qwen15_public.json";
const PROMPT = "def fibonacci(n):";
// Generated tokens: llama.cpp's top-1 leads its top-2 by 0.73-6.99 at each
// of the first six (llamacpp_qwen15_public.json), so all six are compared;
// SwiftShader runs this model at well under a token a second.
const N = 6;
const CTX = 64;
const LIMIT_MS = 900_000;
/** Heap samples over this many ArrayBuffer bytes are taken again after a GC. */
const GC_CHECK_BYTES = 256 << 20;
const log = (s) => console.log(s);

let server, base, browser;

before(async () => {
  checkBuilt();
  const file = path.join(modelsDir, MODEL);
  if (!existsSync(file)) throw new Error(`${file} is missing: run scripts/fetch-models.sh qwen15`);
  ({ server, url: base } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.close();
});

test("loads Qwen2.5-Coder-1.5B from a URL, streamed, and greedy-generates llama.cpp's tokens", { timeout: LIMIT_MS + 60_000 }, async () => {
  const page = await openTestPage(browser, base, log);
  // The page's heap, sampled from outside so that sampling adds nothing to it:
  // usedSize is the JS heap, backingStorageSize the ArrayBuffers' bytes
  // (fetched chunks, the wasm memory).
  const cdp = await page.context().newCDPSession(page);
  // backingStorageSize also counts ArrayBuffers nothing references any
  // more (fetched chunks already uploaded) until V8 collects them, which it
  // does when it likes: a raw peak of 158 MB in one run and 568 MB in
  // another. A sample over GC_CHECK_BYTES is taken again after a forced
  // collection, so the peak is of what the page still holds.
  const peak = { jsHeap: 0, backingStore: 0, uncollected: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      let h = await cdp.send("Runtime.getHeapUsage").catch(() => null);
      if (h && (h.backingStorageSize ?? 0) > GC_CHECK_BYTES) {
        peak.uncollected = Math.max(peak.uncollected, h.backingStorageSize);
        await cdp.send("HeapProfiler.collectGarbage").catch(() => null);
        h = await cdp.send("Runtime.getHeapUsage").catch(() => null);
      }
      if (h) {
        peak.jsHeap = Math.max(peak.jsHeap, h.usedSize);
        peak.backingStore = Math.max(peak.backingStore, h.backingStorageSize ?? 0);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();

  let r;
  try {
    r = await within(LIMIT_MS, page.evaluate(async ({ url, prompt, n, ctx }) => {
      const { Engine } = window.wick;
      const phases = {};
      let fetchChunks = 0;
      let biggestChunk = 0;
      const t0 = performance.now();
      const engine = await Engine.load(url, {
        contextLength: ctx,
        warmUp: false,
        // Not stored: this test is about streaming 1.1 GB through the page,
        // and the store's own tests (cache.test.mjs) use a small file.
        cache: false,
        onProgress: (p) => {
          phases[p.phase] = [p.loaded, p.total];
          if (p.phase === "fetch") {
            biggestChunk = Math.max(biggestChunk, p.loaded - (phases.lastFetch ?? 0));
            phases.lastFetch = p.loaded;
            fetchChunks++;
          }
        },
      });
      const loadSeconds = (performance.now() - t0) / 1000;
      const ids = [];
      let text = "";
      const run = engine.generate(prompt, { maxTokens: n, temperature: 0 });
      for await (const c of run) {
        if (c.tokenId !== null) ids.push(c.tokenId);
        text += c.text;
      }
      const out = {
        ids, text, loadSeconds, phases, fetchChunks, biggestChunk, stats: run.result.stats,
        promptIds: engine.tokenize(prompt), info: engine.info(),
      };
      engine.dispose();
      return out;
    }, { url: `/models/${MODEL}`, prompt: PROMPT, n: N, ctx: CTX }), "load + generate");
  } finally {
    sampling = false;
    await sampler;
    await page.close();
  }
  const fileBytes = r.phases.fetch[1];
  const metrics = {
    model: MODEL,
    fileBytes,
    loadSeconds: r.loadSeconds,
    peakJsHeapBytes: peak.jsHeap,
    peakArrayBufferBytes: peak.backingStore,
    peakUncollectedArrayBufferBytes: peak.uncollected,
    fetchChunks: r.fetchChunks,
    biggestChunkBytes: r.biggestChunk,
    prefillTokensPerSecond: r.stats.prefillTokensPerSecond,
    decodeTokensPerSecond: r.stats.decodeTokensPerSecond,
    ids: r.ids,
    text: r.text,
    adapter: r.info.adapter,
    limits: r.info.limits,
  };
  writeFileSync(path.join(outDir, "large-model-metrics.json"), JSON.stringify(metrics, null, 2));
  log(`large model: ${JSON.stringify(metrics)}`);

  const ref = llamaCppCase(PROMPT, MODEL, GOLDEN);
  assert.ok(ref, "llama.cpp reference case");
  assert.deepEqual(r.promptIds, ref.prompt_ids, "prompt ids equal llama.cpp's");
  assert.equal(r.ids.length, N);
  for (let i = 0; i < N; i++) {
    const top = ref.topk_per_position[ref.prompt_ids.length - 1 + i];
    assert.ok(top[0][1] - top[1][1] > 0.5, `llama.cpp's margin at token ${i} is clear (the comment above)`);
    assert.equal(r.ids[i], ref.greedy_ids[i], `token ${i} vs llama.cpp`);
  }
  // Streamed: the whole file went through, in many chunks each far smaller
  // than the file, and neither the page's JS heap nor its ArrayBuffers
  // (measured: 3 MB and 266 MB when the loader gathered each tensor whole,
  // the 191 MB head the largest; 3 MB and 265 MB since matrices stream by
  // rows, uncollected download chunks, four 16 MiB Range requests at
  // once, counted below GC_CHECK_BYTES) came near the file's size.
  for (const phase of ["fetch", "parse", "upload", "ready"]) assert.ok(r.phases[phase], `progress phase ${phase}`);
  assert.equal(r.phases.upload[0], r.phases.upload[1], "upload reached its total");
  assert.ok(r.fetchChunks > 16, `${r.fetchChunks} fetch chunks`);
  assert.ok(r.biggestChunk <= fileBytes / 8, `biggest chunk ${r.biggestChunk} bytes`);
  assert.ok(peak.jsHeap > 0 && peak.jsHeap < fileBytes / 8, `peak JS heap ${peak.jsHeap} bytes`);
  assert.ok(peak.backingStore < fileBytes / 2, `peak ArrayBuffer bytes ${peak.backingStore}`);
});
