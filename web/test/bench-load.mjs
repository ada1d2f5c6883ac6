// Load time in headless Chromium (SwiftShader): wick against wllama, each
// in a fresh browser profile (nothing cached), from `load` to ready, then
// the time to the first token of a short prompt. Not a test:
//   node web/test/bench-load.mjs [ROUNDS] [MODEL] [OLD_ROOT...]
// OLD_ROOT: another checkout of wick with its wasm built (`npm run build`
// there), whose wick is timed in the same rounds (e.g. an older commit in a
// worktree), served from its own root.
// wllama is installed into target/bench-load on first use (npm, pinned).
// wick's load is split by phase (info().load: open, bytes, build, warm-up);
// then wick loads the model again in the same page, from its model store
// and with the page's compiled pipelines.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { launch, modelsDir, MODEL, outDir, repoRoot, startServer } from "./harness.mjs";

const WLLAMA = "3.13.0";
const rounds = Number(process.argv[2] ?? 2);
const model = process.argv[3] ?? MODEL;
const oldRoots = process.argv.slice(4).map((r) => path.resolve(r));
const wllamaDir = path.join(repoRoot, "target/bench-load");
const wllamaPkg = path.join(wllamaDir, "node_modules/@wllama/wllama");
if (!existsSync(path.join(wllamaPkg, "esm/index.js"))) {
  mkdirSync(wllamaDir, { recursive: true });
  execFileSync("npm", ["install", "--prefix", wllamaDir, "--no-save", `@wllama/wllama@${WLLAMA}`], { stdio: "inherit" });
}

const PROMPT = "The capital of France is";

async function wickLoad({ url, prompt }) {
  const t0 = performance.now();
  const marks = {};
  const engine = await window.wick.Engine.load(url, {
    onProgress: ({ phase }) => {
      marks[phase] ??= performance.now() - t0;
    },
  });
  const ready = performance.now() - t0;
  const t1 = performance.now();
  for await (const _ of engine.generate(prompt, { maxTokens: 1, temperature: 0 })) break;
  const firstToken = performance.now() - t1;
  const load = engine.info().load;
  await engine.dispose();
  // Again in the same page: the bytes from the model store, the pipelines
  // from the page's GPU device.
  const t2 = performance.now();
  const again = await window.wick.Engine.load(url);
  const secondReady = performance.now() - t2;
  const secondLoad = again.info().load;
  await again.dispose();
  return { ready, firstToken, marks, load, secondReady, secondLoad };
}

/** An older checkout's wick: load, one token, and the same load again. */
async function wickLoadOld({ url, prompt }) {
  const t0 = performance.now();
  const engine = await window.wick.Engine.load(url);
  const ready = performance.now() - t0;
  const t1 = performance.now();
  for await (const _ of engine.generate(prompt, { maxTokens: 1, temperature: 0 })) break;
  const firstToken = performance.now() - t1;
  await engine.dispose();
  const t2 = performance.now();
  const again = await window.wick.Engine.load(url);
  const secondReady = performance.now() - t2;
  await again.dispose();
  return { ready, firstToken, secondReady };
}

async function wllamaLoad({ url, prompt, wasm }) {
  const { Wllama } = await import("/target/bench-load/node_modules/@wllama/wllama/esm/index.js");
  const w = new Wllama({ default: wasm }, { suppressNativeLog: true });
  const t0 = performance.now();
  await w.loadModelFromUrl(url);
  const ready = performance.now() - t0;
  const t1 = performance.now();
  await w.createCompletion({ prompt, max_tokens: 1, temperature: 0 });
  const firstToken = performance.now() - t1;
  await w.exit();
  return { ready, firstToken };
}

const { server, url } = await startServer();
const old = await Promise.all(oldRoots.map((root) => startServer({ root, modelsDir })));
const engines = [
  ...(process.env.BENCH_ONLY ? [process.env.BENCH_ONLY] : ["wick", "wllama"]).map((name) => ({ name, base: url })),
  ...oldRoots.map((root, i) => ({ name: `wick@${path.basename(root)}`, base: old[i].url, old: true })),
];
const results = [];
try {
  for (let r = 0; r < rounds; r++) {
    for (const { name, base, old: isOld } of engines) {
      const browser = await launch();
      try {
        const page = await browser.newPage();
        page.on("console", (m) => (m.type() === "error" || process.env.BENCH_VERBOSE) && console.error(`[${name}] ${m.text().slice(0, 300)}`));
        await page.goto(`${base}/web/test/page.html`);
        await page.waitForFunction(() => window.wickReady === true);
        const modelUrl = `${base}/models/${model}`;
        const res =
          name === "wllama"
            ? await page.evaluate(wllamaLoad, { url: modelUrl, prompt: PROMPT, wasm: `${url}/target/bench-load/node_modules/@wllama/wllama/esm/wasm/wllama.wasm` })
            : await page.evaluate(isOld ? wickLoadOld : wickLoad, { url: modelUrl, prompt: PROMPT });
        results.push({ round: r, engine: name, ...res });
        console.log(`${name} round ${r}: ready ${(res.ready / 1000).toFixed(2)} s, first token ${(res.firstToken / 1000).toFixed(2)} s` +
          (res.load ? `  phases (ms): ${JSON.stringify(res.load.phasesMs)}, ${res.load.pipelinesCreated} pipelines (${res.load.pipelinesAhead} ahead)` : "") +
          (res.secondReady != null ? `; second load, same page ${(res.secondReady / 1000).toFixed(2)} s` : ""));
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  server.close();
  for (const o of old) o.server.close();
}
const best = (e, k) => Math.min(...results.filter((r) => r.engine === e).map((r) => r[k]));
const summary = {
  model,
  wllama: WLLAMA,
  wickReadyS: best("wick", "ready") / 1000,
  wllamaReadyS: best("wllama", "ready") / 1000,
  wickFirstTokenS: best("wick", "firstToken") / 1000,
  wllamaFirstTokenS: best("wllama", "firstToken") / 1000,
  wickSecondLoadS: best("wick", "secondReady") / 1000,
};
summary.loadRatio = summary.wickReadyS / summary.wllamaReadyS;
summary.secondToFirst = summary.wickSecondLoadS / summary.wickReadyS;
for (const e of engines.filter((e) => e.old)) {
  summary[e.name] = { readyS: best(e.name, "ready") / 1000, firstTokenS: best(e.name, "firstToken") / 1000, secondLoadS: best(e.name, "secondReady") / 1000 };
}
console.log(JSON.stringify(summary, null, 2));
writeFileSync(path.join(outDir, "bench-load.json"), JSON.stringify({ summary, results }, null, 2));
