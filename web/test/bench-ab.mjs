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
// page API has had: Engine.load, generate, lastResult.stats.

import path from "node:path";

const [rounds, ...roots] = process.argv.slice(2);
if (!(Number(rounds) >= 1) || roots.length === 0) {
  throw new Error("usage: node web/test/bench-ab.mjs ROUNDS ROOT...");
}
const MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf";
const DECODE_TOKENS = 24;
const BODY = " the quick brown fox jumps over the lazy dog while the engine reads every weight of the model once per chunk of tokens and writes the sums back to memory".repeat(3);

for (let round = 1; round <= Number(rounds); round++) {
  for (const root of roots) {
    // Each checkout's own harness serves its own web/ and models/.
    const h = await import(path.resolve(root, "web/test/harness.mjs"));
    const { server, url: base } = await h.startServer();
    const browser = await h.launch();
    try {
      const page = await h.openTestPage(browser, base);
      const r = await h.within(1_200_000, page.evaluate(async ({ url, body, n }) => {
        const engine = await window.wick.Engine.load(url, { contextLength: 512 });
        let prefill;
        for (const lead of ["Once upon a time", "In a small village"]) {
          for await (const _ of engine.generate(lead + body, { maxTokens: 1, temperature: 0 })) { /* drain */ }
          prefill = engine.lastResult.stats;
        }
        for await (const _ of engine.generate("The capital of France is", { maxTokens: n, temperature: 0 })) { /* drain */ }
        const decode = engine.lastResult.stats;
        await engine.dispose();
        return { prefill, decode };
      }, { url: `/models/${MODEL}`, body: BODY, n: DECODE_TOKENS }), `${root} round ${round}`);
      const { prefill: p, decode: d } = r;
      console.log(`round ${round} ${root}: prefill ${p.promptTokens} tokens ${p.prefillTokensPerSecond.toFixed(2)} tok/s,`
        + ` decode ${d.generatedTokens} tokens ${d.decodeTokensPerSecond.toFixed(3)} tok/s`);
    } finally {
      await browser.close();
      server.close();
    }
  }
}
