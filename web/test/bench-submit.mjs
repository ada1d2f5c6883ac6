// Decode speed in headless Chromium (SwiftShader) per tokensPerSubmit: how
// the engine's default was chosen for the browser. Not a test; run after
// `npm run build` (scripts/test-web.sh builds): node test/bench-submit.mjs [N...]
// Prints one line per setting: decode tok/s of a greedy generation.

import { launch, MODEL, openTestPage, startServer, within } from "./harness.mjs";

const settings = process.argv.slice(2).map(Number);
const counts = settings.length ? settings : [1, 4, 8];
const TOKENS = 12;
const { server, url: base } = await startServer();
const browser = await launch();
try {
  const page = await openTestPage(browser, base);
  for (const round of [1, 2]) {
    for (const tokensPerSubmit of counts) {
      const r = await within(600_000, page.evaluate(async ({ url, tokensPerSubmit, n }) => {
        const engine = await window.wick.Engine.load(url, { contextLength: 128, tokensPerSubmit });
        const run = engine.generate("The capital of France is", { maxTokens: n, temperature: 0 });
        for await (const _ of run) { /* drain */ }
        const stats = run.result.stats;
        await engine.dispose();
        return { decode: stats.decodeTokensPerSecond, tokens: run.result.usage?.completion_tokens };
      }, { url: `/models/${MODEL}`, tokensPerSubmit, n: TOKENS }), `tokensPerSubmit ${tokensPerSubmit}`);
      console.log(`round ${round} tokensPerSubmit ${tokensPerSubmit}: decode ${r.decode.toFixed(3)} tok/s`);
    }
  }
} finally {
  await browser.close();
  server.close();
}
