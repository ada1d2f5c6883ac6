// Browser tests of EmbeddingEngine: all-MiniLM-L6-v2 (a sentence-transformers
// folder) loaded in headless Chromium on SwiftShader, from its URL and from a
// folder picker's Files, against sentence-transformers' reference vectors
// (tests/fixtures/embed/minilm_reference.json).
//
// run: node --test --test-concurrency=1 web/test/embeddings.test.mjs  (after npm run build)

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { hfFixture, launch, modelsDir, openTestPage, repoRoot, startServer, within } from "./harness.mjs";

const MODEL = "all-MiniLM-L6-v2";
const folder = path.join(modelsDir, MODEL);
const reference = JSON.parse(readFileSync(path.join(repoRoot, "tests/fixtures/embed/minilm_reference.json"), "utf8"));
const texts = reference.inputs.map((i) => i.text);
const MIN_COSINE = 0.999;
const LOAD_MS = 180_000;
const log = (s) => console.log(s);

let server, base, browser;

before(async () => {
  if (!existsSync(path.join(repoRoot, "web/pkg/wick_web_bg.wasm"))) throw new Error("web/pkg is missing: run `npm run build` first");
  if (!existsSync(path.join(folder, "model.safetensors"))) throw new Error(`${folder} is missing: run scripts/fetch-models.sh minilm`);
  hfFixture();
  ({ server, url: base } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.close();
});

function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

/** Each vector's cosine with its reference; fails below MIN_COSINE. */
function checkReference(vectors, what) {
  assert.equal(vectors.length, reference.inputs.length, `${what}: one vector per input`);
  const cos = vectors.map((v, i) => {
    assert.equal(v.length, reference.inputs[i].embedding.length, `${what}: input ${i}'s dimensions`);
    return cosine(v, reference.inputs[i].embedding);
  });
  const min = Math.min(...cos);
  log(`${what}: min cosine ${min.toFixed(9)} (1 - min = ${(1 - min).toExponential(2)}, input ${cos.indexOf(min)})`);
  cos.forEach((c, i) => assert.ok(c >= MIN_COSINE, `${what}: input ${i} ${JSON.stringify(texts[i])} cosine ${c}`));
  return min;
}

/** What a rejected promise's typed error looked like on the page. */
const caught = `async (p) => { try { await p; return null; } catch (e) { return { name: e.name, code: e.code, field: e.field, message: e.message, promptTokens: e.promptTokens, contextLength: e.contextLength, inputIndex: e.inputIndex }; } }`;

describe("EmbeddingEngine from a URL", () => {
  let page;
  before(async () => {
    page = await openTestPage(browser, base, log);
    await within(LOAD_MS, page.evaluate(async (url) => {
      const phases = new Set();
      window.embedder = await window.wick.EmbeddingEngine.load(url, { onProgress: (p) => phases.add(p.phase) });
      window.phases = [...phases];
    }, `/models/${MODEL}`), "load");
  });
  after(async () => page?.close());

  test("info names the model and its shape", async () => {
    const info = await page.evaluate(() => window.embedder.info());
    assert.deepEqual(
      { name: info.name, dimensions: info.dimensions, maxTokens: info.maxTokens, pooling: info.pooling, normalize: info.normalize, matryoshka: info.matryoshka },
      { name: MODEL, dimensions: 384, maxTokens: 256, pooling: "mean", normalize: true, matryoshka: false },
    );
    assert.ok((await page.evaluate(() => window.phases)).includes("ready"));
  });

  test("a batch of 16 mixed-length inputs matches sentence-transformers", { timeout: 300_000 }, async () => {
    const r = await within(240_000, page.evaluate((input) => window.embedder.embeddings.create({ input, model: "anything" }), texts), "batch");
    assert.equal(r.object, "list");
    assert.equal(r.model, MODEL);
    r.data.forEach((d, i) => {
      assert.equal(d.object, "embedding");
      assert.equal(d.index, i);
    });
    const tokens = reference.inputs.reduce((n, i) => n + i.ids.length, 0);
    assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
    checkReference(r.data.map((d) => d.embedding), "batch of 16");
  });

  test("one input at a time matches sentence-transformers", { timeout: 300_000 }, async () => {
    const r = await within(240_000, page.evaluate(async (texts) => {
      const out = [];
      for (const input of texts) out.push(await window.embedder.embeddings.create({ input }));
      return out;
    }, texts), "one at a time");
    r.forEach((x, i) => {
      assert.equal(x.data.length, 1);
      assert.equal(x.usage.prompt_tokens, reference.inputs[i].ids.length, `input ${i}'s tokens`);
    });
    checkReference(r.map((x) => x.data[0].embedding), "batch of 1");
  });

  test("base64 is the float vectors' little-endian f32 bytes", { timeout: 120_000 }, async () => {
    const r = await page.evaluate(async (input) => {
      const f = await window.embedder.embeddings.create({ input, encoding_format: "float" });
      const b = await window.embedder.embeddings.create({ input, encoding_format: "base64", dimensions: 384 });
      return { float: f.data.map((d) => d.embedding), b64: b.data.map((d) => d.embedding) };
    }, texts.slice(0, 3));
    r.b64.forEach((s, i) => {
      assert.equal(typeof s, "string");
      const buf = Buffer.from(s, "base64");
      const decoded = Array.from({ length: buf.length / 4 }, (_, k) => buf.readFloatLE(k * 4));
      assert.deepEqual(decoded, r.float[i], `input ${i}`);
    });
  });

  test("refuses what it does not do, by name", { timeout: 120_000 }, async () => {
    const errs = await page.evaluate(async (caught) => {
      const check = eval(caught);
      const e = window.embedder.embeddings;
      return {
        unknown: await check(e.create({ input: "a", temperature: 1 })),
        dimensions: await check(e.create({ input: "a", dimensions: 128 })),
        tooMany: await check(e.create({ input: "a", dimensions: 385 })),
        ids: await check(e.create({ input: [101, 102] })),
        idLists: await check(e.create({ input: [[101, 102]] })),
        format: await check(e.create({ input: "a", encoding_format: "int8" })),
        empty: await check(e.create({ input: [] })),
        emptyString: await check(e.create({ input: ["a", ""] })),
        tooLong: await check(e.create({ input: ["short", "word ".repeat(300)] })),
      };
    }, caught);
    const is = (e, name, field) => {
      assert.ok(e, `${name} expected`);
      assert.equal(e.name, name, e.message);
      if (field) assert.equal(e.field, field, e.message);
    };
    is(errs.unknown, "UnsupportedFieldError", "temperature");
    is(errs.dimensions, "InvalidRequestError", "dimensions");
    assert.match(errs.dimensions.message, /384/);
    is(errs.tooMany, "InvalidRequestError", "dimensions");
    is(errs.ids, "UnsupportedFieldError", "input");
    is(errs.idLists, "UnsupportedFieldError", "input");
    is(errs.format, "InvalidRequestError", "encoding_format");
    is(errs.empty, "InvalidRequestError", "input");
    is(errs.emptyString, "InvalidRequestError", "input[1]");
    is(errs.tooLong, "ContextWindowExceededError");
    assert.equal(errs.tooLong.contextLength, 256);
    assert.equal(errs.tooLong.promptTokens, 302);
    assert.equal(errs.tooLong.inputIndex, 1);
    // The engine still works after a refused request.
    const ok = await page.evaluate(() => window.embedder.embeddings.create({ input: "still here" }));
    assert.equal(ok.data[0].embedding.length, 384);
  });

  test("a sharded copy of the folder gives its vectors exactly", { timeout: LOAD_MS + 60_000 }, async () => {
    // The same tensor bytes in two files and an index (tests/src/reshard.rs,
    // written in before()), so any difference is a misread tensor.
    const r = await within(LOAD_MS, page.evaluate(async (input) => {
      const phases = new Set();
      const sharded = await window.wick.EmbeddingEngine.load("/test-output/hf-fixture/all-MiniLM-L6-v2-sharded/", { onProgress: (p) => phases.add(p.phase) });
      const got = await sharded.embeddings.create({ input });
      await sharded.dispose();
      const want = await window.embedder.embeddings.create({ input });
      return { got: got.data.map((d) => d.embedding), want: want.data.map((d) => d.embedding), phases: [...phases] };
    }, texts.slice(0, 4)), "sharded");
    assert.deepEqual(r.got, r.want);
    assert.deepEqual(r.phases, ["fetch", "upload", "ready"]);
  });

  test("a folder that is missing a file or has bad JSON is a ModelLoadError naming it", { timeout: 120_000 }, async () => {
    const errs = await page.evaluate(async (caught) => {
      const check = eval(caught);
      const { EmbeddingEngine } = window.wick;
      const bytes = async (p) => new Blob([await (await fetch(p)).arrayBuffer()]);
      const config = await bytes("/models/all-MiniLM-L6-v2/config.json");
      return {
        noFolder: await check(EmbeddingEngine.load("/models/no-such-model/")),
        noTokenizer: await check(EmbeddingEngine.load({ "config.json": config })),
        badJson: await check(EmbeddingEngine.load({ "config.json": new Blob(["{ not json"]) })),
        noWeights: await check(EmbeddingEngine.load({ "config.json": config, "tokenizer.json": await bytes("/models/all-MiniLM-L6-v2/tokenizer.json") })),
        badIndex: await check(EmbeddingEngine.load({
          "config.json": config,
          "tokenizer.json": await bytes("/models/all-MiniLM-L6-v2/tokenizer.json"),
          "model.safetensors.index.json": new Blob(["{}"]),
        })),
        truncated: await check(EmbeddingEngine.load({
          "config.json": config,
          "tokenizer.json": await bytes("/models/all-MiniLM-L6-v2/tokenizer.json"),
          "model.safetensors": (await bytes("/models/all-MiniLM-L6-v2/model.safetensors")).slice(0, 1 << 20),
        })),
      };
    }, caught);
    for (const [k, file] of [["noFolder", "config.json"], ["noTokenizer", "tokenizer.json"], ["badJson", "config.json"], ["noWeights", "model.safetensors"], ["badIndex", "model.safetensors.index.json"]]) {
      assert.ok(errs[k], `${k}: expected an error`);
      assert.equal(errs[k].name, "ModelLoadError", `${k}: ${errs[k].message}`);
      assert.ok(errs[k].message.includes(file), `${k}: ${errs[k].message} names ${file}`);
    }
    assert.match(errs.badJson.message, /not valid JSON/);
    assert.match(errs.badIndex.message, /weight_map/);
    assert.equal(errs.truncated?.name, "ModelLoadError", errs.truncated?.message);
    log(`truncated weights: ${errs.truncated.message}`);
  });
});

describe("EmbeddingEngine from a folder picker's Files", () => {
  test("loads the folder's FileList and matches the reference; Matryoshka dimensions renormalise", { timeout: LOAD_MS + 240_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      await page.evaluate(() => {
        const input = document.createElement("input");
        input.type = "file";
        input.webkitdirectory = true;
        input.id = "picker";
        document.body.append(input);
      });
      // Playwright hands the browser the folder's files as a user's pick would.
      await page.setInputFiles("#picker", folder);
      const r = await within(LOAD_MS + 200_000, page.evaluate(async (input) => {
        const files = document.getElementById("picker").files;
        const paths = Array.from(files, (f) => f.webkitRelativePath).sort();
        const engine = await window.wick.EmbeddingEngine.load(files, { matryoshka: true });
        const full = await engine.embeddings.create({ input });
        const short = await engine.embeddings.create({ input: input.slice(0, 2), dimensions: 64 });
        const info = engine.info();
        await engine.dispose();
        return { paths, info, full: full.data.map((d) => d.embedding), short: short.data.map((d) => d.embedding) };
      }, texts), "load from Files + embed");
      log(`picked: ${r.paths.join(", ")}`);
      assert.ok(r.paths.includes(`${MODEL}/1_Pooling/config.json`), "the picker gave the Pooling module's config");
      assert.equal(r.info.name, MODEL);
      checkReference(r.full, "from Files, batch of 16");
      r.short.forEach((v, i) => {
        assert.equal(v.length, 64);
        const norm = Math.hypot(...v);
        assert.ok(Math.abs(norm - 1) < 1e-5, `dimensions: 64 is unit length (${norm})`);
        const head = r.full[i].slice(0, 64);
        const headNorm = Math.hypot(...head);
        v.forEach((x, k) => assert.ok(Math.abs(x - head[k] / headNorm) < 1e-6, `input ${i} value ${k}`));
      });
    } finally {
      await page.close();
    }
  });
});

describe("EmbeddingEngine in a Web Worker", () => {
  test("WorkerEngine.loadEmbeddings: the batch of 16 and typed errors across postMessage", { timeout: LOAD_MS + 240_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 200_000, page.evaluate(async ({ url, input, caught }) => {
        const check = eval(caught);
        const engine = await window.wick.WorkerEngine.loadEmbeddings(url);
        try {
          const out = await engine.embeddings.create({ input });
          return {
            info: engine.info(),
            vectors: out.data.map((d) => d.embedding),
            usage: out.usage,
            dimensions: await check(engine.embeddings.create({ input: "a", dimensions: 8 })),
            tooLong: await check(engine.embeddings.create({ input: ["a", "b", "word ".repeat(300)] })),
            chat: await check(engine.chat.completions.create({ messages: [{ role: "user", content: "hi" }] })),
          };
        } finally {
          await engine.dispose();
        }
      }, { url: `/models/${MODEL}/`, input: texts, caught }), "worker load + embed");
      assert.equal(r.info.dimensions, 384);
      checkReference(r.vectors, "worker, batch of 16");
      assert.equal(r.dimensions?.name, "InvalidRequestError");
      assert.equal(r.dimensions.field, "dimensions");
      assert.equal(r.tooLong?.name, "ContextWindowExceededError");
      assert.deepEqual([r.tooLong.inputIndex, r.tooLong.promptTokens, r.tooLong.contextLength], [2, 302, 256]);
      assert.match(r.chat?.message ?? "", /is an embedding model/, "chat on an embedding model is refused by name");
    } finally {
      await page.close();
    }
  });
});
