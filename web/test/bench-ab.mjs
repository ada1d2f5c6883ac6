// Prefill and decode speed in headless Chromium (SwiftShader), checkouts
// side by side: each ROOT is a checkout of wick with its wasm built
// (`scripts/build-web.sh` there) and its models/ beside it; rounds alternate
// between them so the machine's drift falls on all alike. Not a test:
//   node web/test/bench-ab.mjs ROUNDS ROOT...
// e.g. an older commit in a worktree against this one:
//   git worktree add ../wick-old c7bee39 && (cd ../wick-old && scripts/build-web.sh)
//   node web/test/bench-ab.mjs 2 ../wick-old .
// Per round and root: the second of two fresh ~94-token prompts (no cached
// prefix; the first also compiles what the engine compiles lazily), then 24
// greedy tokens after a short prompt. Uses only what every version of the
// page API has had: Engine.load, generate, lastResult.stats. Each round
// also times buffer copies on the browser's adapter (as `wick bench` does
// natively) for the roofline fraction: decode tok/s x weight bytes a token
// / copy bytes a second, the weight bytes from the stats of the roots that
// report them (weightBytesPerToken; the model is the same file for all).

import path from "node:path";

// In the page: GB/s (1e9 bytes copied a second) of 64 MiB buffer-to-buffer
// copies on a device of its own, the fastest of four batches of four.
async function copyGbps() {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const size = 64 << 20;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const a = device.createBuffer({ size, usage });
  const b = device.createBuffer({ size, usage });
  const run = async (n) => {
    const enc = device.createCommandEncoder();
    for (let i = 0; i < n; i++) enc.copyBufferToBuffer(i % 2 ? b : a, 0, i % 2 ? a : b, 0, size);
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
  };
  await run(2);
  let best = Infinity;
  for (let k = 0; k < 4; k++) {
    const t = performance.now();
    await run(4);
    best = Math.min(best, (performance.now() - t) / 4);
  }
  device.destroy();
  return size / (best / 1000) / 1e9;
}

const [rounds, ...roots] = process.argv.slice(2);
if (!(Number(rounds) >= 1) || roots.length === 0) {
  throw new Error("usage: node web/test/bench-ab.mjs ROUNDS ROOT...");
}
const MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf";
const DECODE_TOKENS = 24;
const BODY = " the quick brown fox jumps over the lazy dog while the engine reads every weight of the model once per chunk of tokens and writes the sums back to memory".repeat(3);

const results = [];
for (let round = 1; round <= Number(rounds); round++) {
  for (const root of roots) {
    // Each checkout's own harness serves its own web/ and models/.
    const h = await import(path.resolve(root, "web/test/harness.mjs"));
    const { server, url: base } = await h.startServer();
    const browser = await h.launch();
    try {
      const page = await h.openTestPage(browser, base);
      const r = await h.within(1_200_000, page.evaluate(async ({ url, body, n, copySource }) => {
        // Passed as source: evaluate runs only this function in the page.
        const copyGbps = new Function(`return (${copySource})`)();
        const engine = await window.wick.Engine.load(url, { contextLength: 512 });
        let prefill;
        for (const lead of ["Once upon a time", "In a small village"]) {
          for await (const _ of engine.generate(lead + body, { maxTokens: 1, temperature: 0 })) { /* drain */ }
          prefill = engine.lastResult.stats;
        }
        for await (const _ of engine.generate("The capital of France is", { maxTokens: n, temperature: 0 })) { /* drain */ }
        const decode = engine.lastResult.stats;
        await engine.dispose();
        return { prefill, decode, copy: await copyGbps() };
      }, { url: `/models/${MODEL}`, body: BODY, n: DECODE_TOKENS, copySource: copyGbps.toString() }), `${root} round ${round}`);
      const { prefill: p, decode: d, copy } = r;
      results.push({ round, root, p, d, copy });
      console.log(`round ${round} ${root}: prefill ${p.promptTokens} tokens ${p.prefillTokensPerSecond.toFixed(2)} tok/s,`
        + ` decode ${d.generatedTokens} tokens ${d.decodeTokensPerSecond.toFixed(3)} tok/s, copy ${copy.toFixed(2)} GB/s`);
    } finally {
      await browser.close();
      server.close();
    }
  }
}

const weightBytes = results.map((r) => r.d.weightBytesPerToken).find((b) => b > 0);
if (weightBytes) {
  for (const { round, root, d, copy } of results) {
    const fraction = (d.decodeTokensPerSecond * weightBytes) / (copy * 1e9);
    console.log(`round ${round} ${root}: roofline_fraction ${fraction.toFixed(3)} (${weightBytes} weight bytes a token)`);
  }
}
