// Decode speed in headless Chromium (SwiftShader) per tokensPerSubmit (and
// per activation type, with --activations f32,q8): how the engine's
// defaults were chosen for the browser. Not a test; run after `npm run
// build` (scripts/test-web.sh builds):
//   node test/bench-submit.mjs [N...] [--activations TYPE,...]
// Prints one line per setting: decode tok/s of a greedy generation.

import { launch, MODEL, openTestPage, startServer, within } from "./harness.mjs";

const args = process.argv.slice(2);
const actAt = args.indexOf("--activations");
const activations = actAt >= 0 ? args.splice(actAt, 2)[1].split(",") : [undefined];
const settings = args.map(Number);
if (settings.some((n) => !Number.isInteger(n) || n < 1)) {
  throw new Error(`usage: bench-submit.mjs [N...] [--activations TYPE,...], got ${process.argv.slice(2).join(" ")}`);
}
const counts = settings.length ? settings : [1, 4, 8];
const TOKENS = 12;
const { server, url: base } = await startServer();
const browser = await launch();
try {
  const page = await openTestPage(browser, base);
  for (const round of [1, 2]) {
    for (const tokensPerSubmit of counts) for (const act of activations) {
      const r = await within(600_000, page.evaluate(async ({ url, tokensPerSubmit, act, n }) => {
        const engine = await window.wick.Engine.load(url, { contextLength: 128, tokensPerSubmit, activations: act });
        const ran = (await engine.info()).activations;
        const run = engine.generate("The capital of France is", { maxTokens: n, temperature: 0 });
        for await (const _ of run) { /* drain */ }
        const stats = run.result.stats;
        await engine.dispose();
        return { decode: stats.decodeTokensPerSecond, ran, tokens: run.result.usage?.completion_tokens };
      }, { url: `/models/${MODEL}`, tokensPerSubmit, act, n: TOKENS }), `tokensPerSubmit ${tokensPerSubmit}`);
      console.log(`round ${round} tokensPerSubmit ${tokensPerSubmit} activations ${r.ran}: decode ${r.decode.toFixed(3)} tok/s`);
    }
  }
} finally {
  await browser.close();
  server.close();
}
