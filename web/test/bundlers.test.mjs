// The packed package (`npm pack`) installed into the apps a user builds with
// a bundler — Vite 6 (dev server, and `vite build` served as static files)
// and webpack 5 — in headless Chromium: the page engine and the worker
// engine each greedy-generate the native engine's tokens. The apps are in
// web/test/bundlers/; their pinned dependencies come from `npm ci` there
// (scripts/test-web.sh runs it).
//
// run: node --test web/test/bundlers.test.mjs   (after npm run build)

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { checkBuilt, launch, MODEL, modelsDir, nativeGenerate, repoRoot, startServer, within } from "./harness.mjs";

const PROMPT = "The capital of France is";
const N = 8;
const CTX = 64;
const RUN_MS = 600_000;
const apps = path.join(repoRoot, "web/test/bundlers");
const log = (s) => console.log(s);

/**
 * Checks a build's output folder: the .wasm emitted, and a worker chunk that
 * bundles the engine (it loads that .wasm), not worker.js copied as it is.
 */
function checkEmitted(dir, files) {
  const wasm = files.find((f) => f.endsWith(".wasm"));
  assert.ok(wasm, `the .wasm is emitted: ${files.join(" ")}`);
  const worker = files.filter((f) => f.endsWith(".js") && !/^(main|index)\b/.test(f));
  assert.ok(worker.some((f) => readFileSync(path.join(dir, f), "utf8").includes(wasm)), `a worker chunk that loads ${wasm}: ${files.join(" ")}`);
}

let native, browser, models, packDir;

before(async () => {
  checkBuilt();
  for (const app of ["vite-app", "webpack-app"]) {
    if (!existsSync(path.join(apps, app, "node_modules/.bin"))) {
      throw new Error(`web/test/bundlers/${app} has no node_modules: run \`npm ci\` there (scripts/test-web.sh does)`);
    }
  }
  // The tarball a user would install, from the package as built now.
  packDir = mkdtempSync(path.join(tmpdir(), "wick-pack-"));
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", packDir], { cwd: repoRoot, encoding: "utf8" });
  const tarball = path.join(packDir, JSON.parse(out)[0].filename);
  for (const app of ["vite-app", "webpack-app"]) {
    // --no-save: the fixture's package.json and lockfile stay as committed.
    execFileSync("npm", ["install", "--no-save", "--no-audit", "--no-fund", tarball], { cwd: path.join(apps, app), encoding: "utf8" });
  }
  native = nativeGenerate(PROMPT, N, CTX);
  log(`native: ${JSON.stringify(native.ids)} ${JSON.stringify(native.text)}`);
  // The model server the Vite dev server proxies /models to.
  ({ server: models } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  models?.close();
  if (packDir) rmSync(packDir, { recursive: true, force: true });
});

/** Opens the app at `url`; resolves to the page once its module ran. Records requested URLs. */
async function openApp(url) {
  const page = await browser.newPage();
  page.requested = [];
  page.on("request", (r) => page.requested.push(r.url()));
  page.on("console", (m) => log(`[page] ${m.text()}`));
  page.on("pageerror", (e) => log(`[page error] ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => window.wickReady === true, null, { timeout: 60_000 });
  return page;
}

/** Both engines, one after the other: load the model, greedy-generate N tokens, dispose. */
function generateBoth(page) {
  return page.evaluate(async ({ url, prompt, n, ctx }) => {
    const { Engine, WorkerEngine } = window.wick;
    const run = async (E) => {
      // No warm-up (what a bundle changes is how the wasm and the worker
      // load, not the kernels): each pipeline compiles when first used.
      const engine = await E.load(url, { contextLength: ctx, warmUp: false });
      const ids = [];
      for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) {
        if (c.tokenId !== null) ids.push(c.tokenId);
      }
      await engine.dispose();
      return ids;
    };
    return { page: await run(Engine), worker: await run(WorkerEngine) };
  }, { url: `/models/${MODEL}`, prompt: PROMPT, n: N, ctx: CTX });
}

async function checkApp(url, what) {
  const page = await openApp(url);
  try {
    const t0 = Date.now();
    const r = await within(RUN_MS, generateBoth(page), `${what}: load + generate`);
    log(`${what}: page ${JSON.stringify(r.page)} worker ${JSON.stringify(r.worker)} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    assert.deepEqual(r.page, native.ids, "page engine: the native engine's greedy ids");
    assert.deepEqual(r.worker, native.ids, "worker engine: the native engine's greedy ids");
    return page.requested;
  } finally {
    await page.close();
  }
}

/** The app's bundler, imported from the app's own node_modules. */
const vite = () => import(pathToFileURL(path.join(apps, "vite-app/node_modules/vite/dist/node/index.js")).href);

/** A Vite dev server on the app; `config` is inline config. */
async function viteDev(config) {
  const { createServer } = await vite();
  const server = await createServer({ root: path.join(apps, "vite-app"), server: { host: "127.0.0.1", port: 0 }, ...config });
  await server.listen();
  return { server, url: server.resolvedUrls.local[0] };
}

describe("Vite 6", () => {
  before(() => {
    // Read by the app's vite.config.js: where its dev server proxies /models.
    process.env.WICK_MODEL_SERVER = `http://127.0.0.1:${models.address().port}`;
  });

  test("dev server (optimizeDeps.exclude, as the README says): both engines generate the native ids", { timeout: RUN_MS + 60_000 }, async () => {
    const { server, url } = await viteDev({});
    try {
      const requested = await checkApp(url, "vite dev");
      assert.ok(requested.some((u) => u.endsWith("/node_modules/wick/web/pkg/wick_web_bg.wasm")), "the page fetched the package's .wasm");
    } finally {
      await server.close();
    }
  });

  test("dev server without optimizeDeps.exclude: a WasmLoadError names the URL and the setting", { timeout: 120_000 }, async () => {
    // The app's config without the setting: Vite pre-bundles wick, and the
    // .wasm URL, relative to the pre-bundled module, gets the app's HTML page.
    const { server, url } = await viteDev({ configFile: false, logLevel: "warn" });
    const page = await openApp(url);
    try {
      const e = await within(60_000, page.evaluate(() => window.wick.Engine.load(new ArrayBuffer(8)).then(() => null, (e) => ({
        name: e.name, code: e.code, url: e.url, message: e.message, typed: e instanceof window.wick.WickError,
      }))), "load without the setting");
      log(`without optimizeDeps.exclude: ${JSON.stringify(e)}`);
      assert.equal(e?.name, "WasmLoadError", JSON.stringify(e));
      assert.equal(e.code, "wasm_load");
      assert.ok(e.typed);
      assert.match(e.url, /\/node_modules\/\.vite\/.*wick_web_bg\.wasm$/);
      assert.match(e.message, /an HTML page/);
      assert.ok(e.message.includes(e.url), "the message names the URL");
      assert.ok(e.message.includes('optimizeDeps: { exclude: ["wick"] }'), "the message names the setting");
    } finally {
      await page.close();
      await server.close();
    }
  });

  test("vite build, served as static files: both engines generate the native ids", { timeout: RUN_MS + 120_000 }, async () => {
    const { build } = await vite();
    await build({ root: path.join(apps, "vite-app"), logLevel: "warn" });
    const dist = path.join(apps, "vite-app/dist");
    const assets = readdirSync(path.join(dist, "assets"));
    log(`vite build: ${assets.join(" ")}`);
    checkEmitted(path.join(dist, "assets"), assets);
    const { server, url } = await startServer({ root: dist, modelsDir });
    try {
      const requested = await checkApp(`${url}/`, "vite build");
      assert.ok(requested.some((u) => /\/assets\/wick_web_bg-.*\.wasm$/.test(u)), "the page fetched the emitted .wasm");
    } finally {
      server.close();
    }
  });
});

describe("webpack 5", () => {
  test("webpack build, served as static files: both engines generate the native ids", { timeout: RUN_MS + 120_000 }, async () => {
    const app = path.join(apps, "webpack-app");
    execFileSync("npm", ["run", "build"], { cwd: app, encoding: "utf8" });
    const emitted = readdirSync(path.join(app, "dist"));
    log(`webpack build: ${emitted.join(" ")}`);
    checkEmitted(path.join(app, "dist"), emitted);
    const { server, url } = await startServer({ root: app, modelsDir });
    try {
      const requested = await checkApp(`${url}/`, "webpack");
      assert.ok(requested.some((u) => /\/dist\/[0-9a-f]+\.wasm$/.test(u)), "the page fetched the emitted .wasm");
    } finally {
      server.close();
    }
  });
});
