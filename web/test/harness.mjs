// Shared setup of the browser tests: Debian's Chromium (never a downloaded
// browser) with WebGPU on its bundled SwiftShader, the static server, the
// native engine's reference output, and the llama.cpp golden file.

import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { repoRoot, startServer } from "../tools/serve.mjs";

export { repoRoot, startServer };

export const CHROMIUM = process.env.WICK_CHROMIUM || "/usr/bin/chromium";
export const MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf";
export const modelsDir = process.env.WICK_MODELS_DIR || path.join(repoRoot, "models");
export const outDir = path.join(repoRoot, "test-output");
mkdirSync(outDir, { recursive: true });

/** Closed-network headless flags; `webgpu: false` gives a browser without WebGPU. */
function chromiumArgs(webgpu) {
  const args = [
    "--headless=new",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
  ];
  if (webgpu) args.push("--enable-unsafe-webgpu");
  else args.push("--disable-webgpu", "--disable-gpu");
  return args;
}

/** Chromium with WebGPU (or, `webgpu: false`, without); its pages open in an incognito-like context. */
export function launch({ webgpu = true } = {}) {
  // playwright gives each launch a fresh temporary --user-data-dir.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: chromiumArgs(webgpu) });
}

/**
 * Chromium on a profile in `dir`, as a user's normal window: its storage
 * is on disk. A page of `launch()` opens in an off-the-record context,
 * whose storage is in memory: there OPFS refuses writes past about 1.6 GB
 * while navigator.storage.estimate() reports a 10 GiB quota, so a model
 * over that cannot be stored. Resolves to a BrowserContext (newPage, close).
 */
export function launchPersistent(dir) {
  return chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: chromiumArgs(true) });
}

/** A page on the test page with window.wick ready; console lines go to the log. */
export async function openTestPage(browser, baseUrl, log = () => {}) {
  const page = await browser.newPage();
  page.on("console", (m) => log(`[page] ${m.text()}`));
  page.on("pageerror", (e) => log(`[page error] ${e.message}`));
  await page.goto(`${baseUrl}/web/test/page.html`);
  await page.waitForFunction(() => window.wickReady === true);
  return page;
}

export function checkBuilt() {
  const wasm = path.join(repoRoot, "web/pkg/wick_web_bg.wasm");
  if (!existsSync(wasm)) throw new Error(`${wasm} is missing: run \`npm run build\` first`);
  const model = path.join(modelsDir, MODEL);
  if (!existsSync(model)) throw new Error(`${model} is missing: run scripts/fetch-models.sh smollm2`);
}

/** The native CLI's environment: Vulkan, and a runtime dir it can write. */
export function nativeEnv() {
  const runtime = process.env.XDG_RUNTIME_DIR || path.join("/tmp", `wick-runtime-${process.getuid()}`);
  mkdirSync(runtime, { recursive: true, mode: 0o700 });
  return { ...process.env, WGPU_BACKEND: process.env.WGPU_BACKEND || "vulkan", XDG_RUNTIME_DIR: runtime };
}

/** `target/release/NAME` of package `pkg`, built with cargo if it is missing. */
export function releaseBinary(name, pkg, bin) {
  const file = path.join(repoRoot, "target/release", name);
  if (!existsSync(file)) {
    const which = bin ? ["--bin", bin] : [];
    execFileSync("cargo", ["build", "--release", "-q", "-p", pkg, ...which], { cwd: repoRoot, stdio: "inherit" });
  }
  return file;
}

/**
 * `wick ARGS --json` (a command that loads a model: generate, usually), its
 * JSON output parsed. Without the warm-up: a short run compiles only the
 * kernels it uses.
 */
export function nativeJson(args) {
  const out = execFileSync(releaseBinary("wick", "wick-cli"), [...args, "--json", "--no-warmup"], {
    cwd: repoRoot,
    env: nativeEnv(),
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  return JSON.parse(out.slice(out.indexOf("{")));
}

/**
 * As nativeGenerate, in a process of its own that runs while the caller
 * goes on (a browser test's page work beside it): a promise of the output.
 */
export function nativeGenerateLater(prompt, maxTokens, ctxLen, model = MODEL) {
  const args = ["generate", "--model", modelFile(model), "--prompt", prompt, "--max-tokens", String(maxTokens), "--ctx-len", String(ctxLen), "--json", "--no-warmup"];
  const bin = releaseBinary("wick", "wick-cli");
  return new Promise((resolve, reject) => {
    execFile(bin, args, { cwd: repoRoot, env: nativeEnv(), encoding: "utf8", maxBuffer: 1 << 26 }, (e, out) => {
      if (e) reject(e);
      else resolve(JSON.parse(out.slice(out.indexOf("{"))));
    });
  });
}

/** Where model file `model` is: models/ (or $WICK_MODELS_DIR), else the
 * small test models in tests/fixtures/models or ../shared/models, as the
 * test server resolves /models/ (web/tools/serve.mjs). */
export function modelFile(model) {
  const fetched = path.join(modelsDir, model);
  const fixtures = [path.join(repoRoot, "tests/fixtures/models", model), path.join(repoRoot, "../shared/models", model)];
  return existsSync(fetched) ? fetched : fixtures.find((f) => existsSync(f)) ?? fetched;
}

/**
 * The native engine's greedy output for `prompt` (`wick generate --json`),
 * built with cargo if the binary is missing.
 */
export function nativeGenerate(prompt, maxTokens, ctxLen, model = MODEL) {
  const file = modelFile(model);
  return nativeJson(["generate", "--model", file, "--prompt", prompt, "--max-tokens", String(maxTokens), "--ctx-len", String(ctxLen)]);
}

/**
 * Writes the Hugging Face checkpoint fixtures (tests/src/bin/write_hf_fixture.rs)
 * into test-output/hf-fixture/, which the test server serves at
 * /test-output/hf-fixture/: tiny models as GGUF files and checkpoint
 * folders, and all-MiniLM-L6-v2 split into two shards. Returns the folder.
 */
export function hfFixture() {
  const dir = path.join(outDir, "hf-fixture");
  const bin = releaseBinary("write_hf_fixture", "wick-tests", "write_hf_fixture");
  execFileSync(bin, [dir, path.join(modelsDir, "all-MiniLM-L6-v2")], { stdio: "inherit" });
  return dir;
}

/** llama.cpp's reference for `model`'s case with this prompt, from golden file `file`. */
export function llamaCppCase(prompt, model = MODEL, file = "llamacpp_public.json") {
  const dirs = [process.env.WICK_GOLDEN_DIR, path.join(repoRoot, "tests/fixtures/golden"), path.join(repoRoot, "../shared/golden")];
  for (const d of dirs.filter(Boolean)) {
    const f = path.join(d, file);
    if (!existsSync(f)) continue;
    const entry = JSON.parse(readFileSync(f, "utf8")).find((e) => e.model === model);
    return entry?.cases.find((c) => c.prompt === prompt) ?? null;
  }
  return null;
}

export function chatTemplateCases() {
  const dirs = [process.env.WICK_GOLDEN_DIR, path.join(repoRoot, "tests/fixtures/golden"), path.join(repoRoot, "../shared/golden")];
  for (const d of dirs.filter(Boolean)) {
    const f = path.join(d, "chat_templates_public.json");
    if (existsSync(f)) return JSON.parse(readFileSync(f, "utf8")).find((e) => e.model === MODEL);
  }
  throw new Error("chat_templates_public.json not found");
}

/** Rejects if `promise` takes longer than `ms` (a hung promise fails the test). */
export function within(ms, promise, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what} did not settle within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(t));
}

export const FIREFOX = process.env.WICK_FIREFOX || "/usr/bin/firefox-esr";

/**
 * Debian's Firefox ESR, headless, driven by puppeteer-core over WebDriver
 * BiDi (never a downloaded browser). WebGPU is behind a pref on Linux, and
 * its blocklist refuses lavapipe, the only adapter here: both prefs are what
 * a user on such a machine would set. Network features that would reach out
 * are off, as for Chromium. `prefs` adds prefs of the caller's.
 */
export async function launchFirefox(prefs = {}) {
  const { default: puppeteer } = await import("puppeteer-core");
  return puppeteer.launch({
    browser: "firefox",
    executablePath: FIREFOX,
    headless: true,
    extraPrefsFirefox: {
      "dom.webgpu.enabled": true,
      "gfx.webgpu.ignore-blocklist": true,
      "app.update.enabled": false,
      "browser.safebrowsing.malware.enabled": false,
      "browser.safebrowsing.phishing.enabled": false,
      "network.captive-portal-service.enabled": false,
      "network.connectivity-service.enabled": false,
      "toolkit.telemetry.enabled": false,
      "datareporting.policy.dataSubmissionEnabled": false,
      ...prefs,
    },
  });
}

/** As openTestPage, for a puppeteer browser (Firefox). */
export async function openFirefoxPage(browser, baseUrl, log = () => {}) {
  const page = await browser.newPage();
  page.on("console", (m) => log(`[firefox] ${m.text()}`));
  page.on("pageerror", (e) => log(`[firefox error] ${e.message}`));
  await page.goto(`${baseUrl}/web/test/page.html`);
  await page.waitForFunction(() => window.wickReady === true);
  return page;
}

/**
 * The page's WebGPU readback round trip, in milliseconds: a 256-byte copy
 * into a MAP_READ buffer, submitted, then mapAsync awaited, `n` times on a
 * device of its own; the median and the fastest. What one decode step's
 * token readback costs the browser beyond the GPU work (Chromium answers a
 * map from its GPU process, Firefox by polling), for docs/performance.md.
 */
export function readbackRoundTrip(page, n = 30) {
  return page.evaluate(async (n) => {
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    const src = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const dst = device.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const times = [];
    for (let i = 0; i < n; i++) {
      const enc = device.createCommandEncoder();
      enc.copyBufferToBuffer(src, 0, dst, 0, 256);
      const t0 = performance.now();
      device.queue.submit([enc.finish()]);
      await dst.mapAsync(GPUMapMode.READ);
      times.push(performance.now() - t0);
      dst.unmap();
    }
    device.destroy();
    times.sort((a, b) => a - b);
    return { medianMs: times[n >> 1], fastestMs: times[0], n };
  }, n);
}
