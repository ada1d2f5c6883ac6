// Load time in headless Chromium (SwiftShader): wick against wllama, each
// in a fresh browser profile (nothing cached), from `load` to ready, then
// the time to the first token of a short prompt. Not a test:
//   node web/test/bench-load.mjs [ROUNDS] [MODEL]
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
const results = [];
try {
  for (let r = 0; r < rounds; r++) {
    for (const which of (process.env.BENCH_ONLY ? [process.env.BENCH_ONLY] : ["wick", "wllama"])) {
      const browser = await launch();
      try {
        const page = await browser.newPage();
        page.on("console", (m) => (m.type() === "error" || process.env.BENCH_VERBOSE) && console.error(`[${which}] ${m.text().slice(0, 300)}`));
        await page.goto(`${url}/web/test/page.html`);
        await page.waitForFunction(() => window.wickReady === true);
        const modelUrl = `${url}/models/${model}`;
        const res =
          which === "wick"
            ? await page.evaluate(wickLoad, { url: modelUrl, prompt: PROMPT })
            : await page.evaluate(wllamaLoad, { url: modelUrl, prompt: PROMPT, wasm: `${url}/target/bench-load/node_modules/@wllama/wllama/esm/wasm/wllama.wasm` });
        results.push({ round: r, engine: which, ...res });
        console.log(`${which} round ${r}: ready ${(res.ready / 1000).toFixed(2)} s, first token ${(res.firstToken / 1000).toFixed(2)} s` +
          (res.load ? `  phases (ms): ${JSON.stringify(res.load.phasesMs)}, ${res.load.pipelinesCreated} pipelines; second load from the store ${(res.secondReady / 1000).toFixed(2)} s ${JSON.stringify(res.secondLoad.phasesMs)}` : ""));
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  server.close();
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
console.log(JSON.stringify(summary, null, 2));
writeFileSync(path.join(outDir, "bench-load.json"), JSON.stringify({ summary, results }, null, 2));
