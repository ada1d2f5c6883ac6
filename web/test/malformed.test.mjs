// Bad input in the browser: the malformed model files of the CLI's
// crates/cli/tests/commands/malformed.rs (made the same way: malformed-files.mjs),
// each loaded on the page. Every load must reject with a typed
// ModelLoadError whose message names the problem, never a panic of the
// wasm module: afterwards the same page loads SmolLM2 and generates.
//
// run: npm test   (after npm run build)

import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  checkBuilt, launch, MODEL, modelsDir, openTestPage, outDir, repoRoot, startServer, within,
} from "./harness.mjs";
import { writeMalformedFiles } from "./malformed-files.mjs";

const log = (s) => console.log(s);
let server, base, browser, files;

before(async () => {
  checkBuilt();
  const tiny = path.join(repoRoot, "tests/fixtures/models/tiny-qwen3moe.q8_0.gguf");
  files = writeMalformedFiles(path.join(outDir, "malformed"), path.join(modelsDir, MODEL), tiny);
  ({ server, url: base } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.close();
});

describe("malformed model files on the page", () => {
  test("loads SmolLM2 after each malformed file rejects with a ModelLoadError naming its problem", { timeout: 600_000 }, async () => {
    const panics = [];
    const page = await openTestPage(browser, base, (line) => {
      if (/panicked/i.test(line)) panics.push(line);
      log(line);
    });
    try {
      const results = await within(300_000, page.evaluate(async (names) => {
        const { Engine, ModelLoadError } = window.wick;
        const out = [];
        const load = async (name, how, source) => {
          try {
            await Engine.load(source, { contextLength: 32 });
            out.push({ name, how, loaded: true });
          } catch (e) {
            out.push({ name, how, typed: e instanceof ModelLoadError, errName: e.name, code: e.code, message: e.message });
          }
        };
        for (const name of names) {
          const url = `/test-output/malformed/${name}`;
          // Bytes in hand (a Blob), and streamed from a URL with Range
          // requests (but the empty file, which a server answers with 416
          // Range Not Satisfiable: an HTTP error, not a file's).
          await load(name, "blob", await (await fetch(url)).blob());
          if (name !== "empty.gguf") await load(name, "url", url);
        }
        return out;
      }, files.map((f) => f.name)), "malformed loads");
      assert.equal(results.length, 2 * files.length - 1);
      for (const r of results) {
        const what = `${r.name} (${r.how})`;
        log(`${what}: ${r.errName}: ${r.message}`);
        assert.ok(!r.loaded, `${what} loaded`);
        assert.ok(r.typed, `${what}: ${r.errName} is not a ModelLoadError: ${r.message}`);
        assert.equal(r.code, "model_load", what);
        for (const needle of files.find((f) => f.name === r.name).needles) {
          assert.ok(r.message.includes(needle), `${what}: no ${JSON.stringify(needle)} in ${r.message}`);
        }
      }
      // The module did not abort: the same page loads a real model and generates.
      const after = await within(280_000, page.evaluate(async (url) => {
        const engine = await window.wick.Engine.load(url, { contextLength: 64, warmUp: false });
        const ids = [];
        for await (const c of engine.generate("The capital of France is", { maxTokens: 2, temperature: 0 })) {
          if (c.tokenId !== null) ids.push(c.tokenId);
        }
        engine.dispose();
        return ids;
      }, `/models/${MODEL}`), "SmolLM2 after the malformed files");
      assert.equal(after.length, 2, `generated ${JSON.stringify(after)}`);
      assert.deepEqual(panics, [], "the wasm module panicked");
    } finally {
      await page.close();
    }
  });
});
