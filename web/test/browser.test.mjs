// Browser tests: the npm package in Debian's headless Chromium, WebGPU on
// SwiftShader (no shader-f16: the f32 path). SwiftShader is slow, so every
// generation is a few tokens. Writes test-output/browser-metrics.json and
// screenshots of the demo page.
//
// run: npm test   (after npm run build; scripts/test-web.sh does both)

import assert from "node:assert/strict";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  chatTemplateCases, checkBuilt, launch, llamaCppCase, MODEL, modelFile, nativeGenerate,
  openTestPage, outDir, readbackRoundTrip, repoRoot, startServer, within,
} from "./harness.mjs";
import { assertLogprobs, nativeLogprobs, withChatTemplate } from "./chat-helpers.mjs";
import { checkLlamaCppGreedy, checkMultiTurnReuse } from "./core-checks.mjs";

const PROMPT = "The capital of France is";
const N = 4; // generated tokens compared with the native engine
const CTX = 256;
const LOAD_MS = 240_000;
const log = (s) => console.log(s);
const metrics = { model: MODEL };

let server, base, browser, native;

before(async () => {
  checkBuilt();
  native = nativeGenerate(PROMPT, N, CTX);
  metrics.native = { ids: native.ids, stats: native.stats };
  log(`native (lavapipe): ${JSON.stringify(native.ids)} ${JSON.stringify(native.text)} ` +
    `load ${native.stats.load_seconds?.toFixed(2)} s, decode ${native.stats.decode_tok_s?.toFixed(2)} tok/s`);
  ({ server, url: base } = await startServer());
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.close();
  writeFileSync(path.join(outDir, "browser-metrics.json"), JSON.stringify(metrics, null, 2));
  log(`metrics: ${JSON.stringify(metrics)}`);
});

const modelUrl = (q = "") => `/models/${MODEL}${q}`;

describe("Engine on the page", () => {
  let page;
  before(async () => {
    page = await openTestPage(browser, base, log);
  });
  after(async () => page?.close());

  test("loads SmolLM2 from a URL and greedy-generates the native engine's tokens", { timeout: LOAD_MS + 240_000 }, async () => {
    const r = await within(LOAD_MS + 200_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
      const { Engine } = window.wick;
      const phases = {};
      const t0 = performance.now();
      const engine = await Engine.load(url, {
        contextLength: ctx,
        onProgress: (p) => (phases[p.phase] = [p.loaded, p.total]),
      });
      const loadSeconds = (performance.now() - t0) / 1000;
      window.engine = engine;
      const ids = [];
      let text = "";
      const run = engine.generate(prompt, { maxTokens: n, temperature: 0 });
      for await (const c of run) {
        if (c.tokenId !== null) ids.push(c.tokenId);
        text += c.text;
      }
      return { ids, text, loadSeconds, phases, result: run.result, promptIds: engine.tokenize(prompt), info: engine.info() };
    }, { url: modelUrl(), prompt: PROMPT, n: N, ctx: CTX }), "load + generate");
    log(`browser: ${JSON.stringify(r.ids)} ${JSON.stringify(r.text)} load ${r.loadSeconds.toFixed(1)} s, ` +
      `prefill ${r.result.stats.prefillTokensPerSecond.toFixed(2)} tok/s, decode ${r.result.stats.decodeTokensPerSecond.toFixed(2)} tok/s`);
    metrics.browser = { loadSeconds: r.loadSeconds, stats: r.result.stats, adapter: r.info.adapter, ids: r.ids };

    assert.deepEqual(r.promptIds, native.prompt_ids, "prompt ids");
    assert.deepEqual(r.ids, native.ids, "greedy ids equal the native engine's");
    assert.equal(r.text, native.text);
    assert.equal(r.result.finishReason, native.finish_reason);
    // Streaming progress went through fetch, parse, upload and ready.
    for (const phase of ["fetch", "parse", "upload", "warmup", "ready"]) assert.ok(r.phases[phase], `progress phase ${phase}`);
    assert.equal(r.phases.upload[0], r.phases.upload[1], "upload reached its total");

    checkLlamaCppGreedy(PROMPT, r.promptIds, r.ids);
  });

  test("a second load on the page compiles nothing (one GPU device for the page), and info().load gives the phases", { timeout: LOAD_MS + 120_000 }, async () => {
    const r = await within(LOAD_MS + 100_000, page.evaluate(async ({ url, ctx, prompt, n }) => {
      const { Engine } = window.wick;
      const engine = await Engine.load(url, { contextLength: ctx });
      const ids = [];
      for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) if (c.tokenId !== null) ids.push(c.tokenId);
      const out = { first: window.engine.info().load, second: engine.info().load, ids };
      await engine.dispose();
      return out;
    }, { url: modelUrl(), ctx: CTX, prompt: PROMPT, n: 3 }), "second load");
    log(`load phases: first ${JSON.stringify(r.first)}, second ${JSON.stringify(r.second)}`);
    metrics.load = r;
    assert.ok(r.first.pipelinesCreated > 0, "the first load compiled its kernels");
    // Chromium: every pipeline the warm-up needed was asked for (and
    // compiled) while the weights downloaded, from the header alone.
    assert.equal(r.first.pipelinesAhead, r.first.pipelinesCreated, "every pipeline asked for ahead");
    assert.equal(r.second.pipelinesCreated, 0, "the second load found every pipeline compiled");
    assert.equal(r.second.pipelinesAhead, 0, "and asked for none ahead");
    for (const l of [r.first, r.second]) {
      const sum = Object.values(l.phasesMs).reduce((a, b) => a + b, 0);
      assert.ok(sum <= l.totalMs + 2 && sum >= l.totalMs - 50, `phases ${JSON.stringify(l.phasesMs)} add up to ${l.totalMs} ms`);
      assert.ok(l.phasesMs.warmUp > 0 && l.bytes > 0);
    }
    // The reused pipelines compute the same on the second engine's buffers.
    assert.deepEqual(r.ids, native.ids.slice(0, 3));
  });

  test("speculative decoding by prompt lookup gives the native plain greedy ids, with its stats, and under a grammar its plain ids; bad options are refused by name", { timeout: LOAD_MS + 240_000 }, async () => {
    // A reply that quotes its prompt, so lookup drafts.
    const prompt = 'Q: Repeat after me: "The river rose in the night and the farmers moved their animals to the ridge."\nA: "The river';
    const n = 32;
    const want = nativeGenerate(prompt, n, CTX);
    const r = await within(LOAD_MS + 200_000, page.evaluate(async ({ url, ctx, prompt, n }) => {
      const { Engine } = window.wick;
      const run = async (engine, opts) => {
        const ids = [];
        const gen = engine.generate(prompt, { maxTokens: n, temperature: 0, ...opts });
        for await (const c of gen) if (c.tokenId !== null) ids.push(c.tokenId);
        return { ids, stats: gen.result.stats };
      };
      const errorOf = async (f) => { try { await f(); return null; } catch (e) { return { name: e.name, code: e.code, field: e.field, message: e.message }; } };
      // The load's setting: every generation drafts unless it says otherwise.
      const engine = await Engine.load(url, { contextLength: ctx, speculative: "lookup", draftTokens: 8 });
      const setting = engine.info().speculative;
      const plain = await run(engine, { speculative: "off" });
      const lookup = await run(engine);
      // Under a grammar the engine's setting drafts too.
      const regex = "[a-z ,.]+";
      const grammar = { plain: await run(engine, { speculative: "off", regex }), lookup: await run(engine, { regex }) };
      const refused = {
        zero: await errorOf(() => run(engine, { speculative: "lookup", draftTokens: 0 })),
        kind: await errorOf(() => run(engine, { speculative: "medusa" })),
        load: await errorOf(() => Engine.load(url, { contextLength: ctx, speculative: "lookup", draftTokens: 99 })),
      };
      await engine.dispose();
      return { plain, lookup, grammar, refused, setting };
    }, { url: modelUrl(), ctx: CTX, prompt, n }), "speculative");
    const s = r.lookup.stats.speculative;
    log(`page lookup: ${JSON.stringify(s)}; decode ${r.plain.stats.decodeTokensPerSecond.toFixed(2)} tok/s plain, ` +
      `${r.lookup.stats.decodeTokensPerSecond.toFixed(2)} tok/s with lookup`);
    metrics.speculative = { plain: r.plain.stats, lookup: r.lookup.stats };
    assert.deepEqual(r.plain.ids, want.ids, "plain greedy: the native ids");
    assert.deepEqual(r.lookup.ids, want.ids, "lookup: the native plain greedy ids");
    assert.equal(r.plain.stats.speculative, undefined);
    assert.ok(s.passes > 0 && s.accepted > 0 && s.accepted <= s.drafted, JSON.stringify(s));
    assert.equal(s.drafter, "lookup");
    // SwiftShader is a CPU adapter: its passes run as a prompt chunk.
    assert.equal(s.exact, false, JSON.stringify(s));
    assert.deepEqual(r.setting, { kind: "lookup", draftTokens: 8, draftModel: false }, "info() says how the engine drafts");
    const g = r.grammar.lookup.stats.speculative;
    log(`page lookup under a grammar: ${JSON.stringify(g)}`);
    assert.deepEqual(r.grammar.lookup.ids, r.grammar.plain.ids, "under a grammar: its plain ids");
    assert.ok(g.passes > 0 && g.accepted > 0, JSON.stringify(g));
    for (const k of ["zero", "load"]) assert.equal(r.refused[k]?.field, "draftTokens", JSON.stringify(r.refused[k]));
    assert.equal(r.refused.kind?.field, "speculative", JSON.stringify(r.refused.kind));
  });

  test("speculative decoding with a draft model (SmolLM2 drafting for itself) gives the native plain greedy ids; a draft of another vocabulary is refused naming the token", { timeout: 2 * LOAD_MS + 240_000 }, async () => {
    const n = 24;
    const want = nativeGenerate(PROMPT, n, CTX);
    const r = await within(2 * LOAD_MS + 200_000, page.evaluate(async ({ url, other, ctx, prompt, n }) => {
      const { Engine } = window.wick;
      const errorOf = async (f) => { try { await f(); return null; } catch (e) { return { name: e.name, code: e.code, field: e.field, message: e.message }; } };
      const drafts = [];
      // The draft model by the load option (the same file: the model agrees
      // with its own drafts wherever its argmax is clear).
      const engine = await Engine.load(url, {
        contextLength: ctx, speculative: "draft", draftTokens: 4, draftModel: url,
        onProgress: (p) => { if (p.draft) drafts.push(p.phase); },
      });
      const setting = engine.info().speculative;
      const ids = [];
      const gen = engine.generate(prompt, { maxTokens: n, temperature: 0 });
      for await (const c of gen) if (c.tokenId !== null) ids.push(c.tokenId);
      const stats = gen.result.stats.speculative;
      // Refused: "draft" on an engine without one; a draft model of
      // another vocabulary (the tiny Qwen3), which stays usable.
      const lone = await Engine.load(url, { contextLength: ctx });
      const tiny = await Engine.load(other, { contextLength: ctx, warmUp: false });
      const refused = {
        none: await errorOf(async () => { for await (const _ of lone.generate(prompt, { maxTokens: 2, speculative: "draft" })); }),
        vocab: await errorOf(() => lone.setDraftModel(tiny)),
        self: await errorOf(() => lone.setDraftModel(lone)),
      };
      let tinyAfter = 0;
      for await (const c of tiny.generate([1, 2, 3], { maxTokens: 2, temperature: 0 })) if (c.tokenId !== null) tinyAfter++;
      await Promise.all([engine.dispose(), lone.dispose(), tiny.dispose()]);
      return { ids, stats, setting, refused, drafts: [...new Set(drafts)], tinyAfter };
    }, { url: modelUrl(), other: "/models/tiny-qwen3.q8_0.gguf", ctx: CTX, prompt: PROMPT, n }), "draft model");
    log(`page draft model: ${JSON.stringify(r.stats)}`);
    assert.deepEqual(r.ids, want.ids, "drafted by a draft model: the native plain greedy ids");
    assert.equal(r.stats.drafter, "draft");
    assert.ok(r.stats.passes > 0 && r.stats.accepted > 0 && r.stats.accepted <= r.stats.drafted, JSON.stringify(r.stats));
    assert.deepEqual(r.setting, { kind: "draft", draftTokens: 4, draftModel: true });
    assert.ok(r.drafts.includes("ready"), `the draft's load reported its progress: ${r.drafts}`);
    assert.equal(r.refused.none?.field, "speculative", JSON.stringify(r.refused.none));
    assert.equal(r.refused.vocab?.field, "draftModel", JSON.stringify(r.refused.vocab));
    assert.match(r.refused.vocab.message, /differs from the model's at token \d+/);
    assert.equal(r.refused.self?.field, "draftModel", JSON.stringify(r.refused.self));
    assert.equal(r.tinyAfter, 2, "a refused draft engine stays usable");
  });

  test("info() reports the adapter and the f32 path; the readback round trip is measured", { timeout: 120_000 }, async () => {
    const info = await page.evaluate(() => window.engine.info());
    assert.equal(info.computePath, "f32");
    assert.ok(info.adapter.name.length > 0, "adapter named");
    assert.equal(typeof info.features.shaderF16, "boolean");
    assert.equal(typeof info.features.packedDot4, "boolean");
    assert.match(info.computePathNote, info.features.shaderF16 ? /available/ : /not available/);
    // SwiftShader is a CPU adapter: lanes summed serially (no subgroups in the browser either).
    assert.equal(info.adapter.isSoftware, true);
    assert.equal(info.decodeGemvReduce, "serial");
    assert.equal(info.weightStore, "buffers");
    // 8-bit activations are lavapipe's default only (slower on SwiftShader).
    assert.equal(info.activations, "f32");
    assert.equal(info.model.architecture, "llama");
    for (const arch of ["llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "smollm3"]) {
      assert.ok(info.supportedArchitectures.includes(arch), arch);
    }
    assert.equal(info.model.contextLength, CTX);
    assert.equal(info.model.hasChatTemplate, true);
    metrics.info = info;
    // What a readback costs the page, beside Firefox's (firefox.test.mjs).
    metrics.readback = await within(100_000, readbackRoundTrip(page), "readback round trip");
    log(`readback round trip: ${JSON.stringify(metrics.readback)}`);
    assert.ok(metrics.readback.medianMs > 0);
  });

  test("chat template renders as Hugging Face does", async () => {
    const ref = chatTemplateCases();
    for (const c of ref.cases) {
      const r = await page.evaluate(([messages]) => {
        const text = window.engine.applyChatTemplate(messages);
        return { text, ids: window.engine.tokenize(text, { parseSpecial: true }) };
      }, [c.messages]);
      assert.equal(r.text, c.rendered);
      assert.deepEqual(r.ids, c.ids);
    }
  });

  test("chat.completions.create without and with stream", { timeout: 240_000 }, async () => {
    const messages = chatTemplateCases().cases[0].messages;
    const r = await within(220_000, page.evaluate(async (messages) => {
      const engine = window.engine;
      const params = { messages, max_tokens: 3, temperature: 0 };
      const whole = await engine.chat.completions.create(params);
      const chunks = [];
      const stream = await engine.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
      for await (const c of stream) chunks.push(c);
      return { whole, chunks };
    }, messages), "chat");
    const { whole, chunks } = r;
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices[0].message.role, "assistant");
    assert.ok(whole.choices[0].message.content.length > 0);
    assert.equal(whole.choices[0].finish_reason, "length");
    assert.equal(whole.usage.completion_tokens, 3);
    assert.equal(whole.usage.prompt_tokens, chatTemplateCases().cases[0].ids.length);
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0].id));
    const streamed = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assert.equal(streamed, whole.choices[0].message.content, "greedy stream equals the whole reply");
    // The finish chunk, then (include_usage) the usage chunk with no choices.
    assert.equal(chunks.at(-2).choices[0].finish_reason, "length");
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 3);
    assert.equal(whole.choices[0].message.refusal, null);
    assert.match(whole.system_fingerprint, /^wick-/);
    assert.equal(whole.usage.prompt_tokens_details.cached_tokens, 0);
    log(`chat reply: ${JSON.stringify(whole.choices[0].message.content)}`);
  });

  test("chat.completions.create honours or refuses each OpenAI field by name, with typed errors", { timeout: 300_000 }, async () => {
    const r = await within(280_000, page.evaluate(async ({ ctx }) => {
      const w = window.wick;
      const engine = window.engine;
      const create = (body, opts) => engine.chat.completions.create(body, opts);
      const err = (p) => p.then(() => null, (e) => ({
        name: e.name, code: e.code, field: e.field, message: e.message, typed: e instanceof w.WickError,
        promptTokens: e.promptTokens, contextLength: e.contextLength,
      }));
      const messages = [{ role: "user", content: "Say hi." }];
      const base = { messages, max_tokens: 2, temperature: 0 };
      const refused = {
        fiveStops: await err(create({ ...base, stop: ["a", "b", "c", "d", "e"] })),
        unknown: await err(create({ ...base, frobnicate: 1 })),
        format: await err(create({ ...base, response_format: { type: "xml" } })),
        toolChoice: await err(create({ ...base, tool_choice: "required" })),
        bodySignal: await err(create({ ...base, signal: new AbortController().signal })),
        nStream: await err(create({ ...base, n: 2, stream: true })),
        temperature: await err(create({ ...base, temperature: 3 })),
        bias: await err(create({ ...base, logit_bias: { 5: 200 } })),
        image: await err(create({ ...base, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] })),
      };
      const ids = () => engine.lastResult.ids;
      const plain = await create(base);
      const plainIds = ids();
      const parts = await create({ ...base, messages: [{ role: "user", content: [{ type: "text", text: "Say " }, { type: "text", text: "hi." }] }] });
      // Banning the greedy first token moves the first token.
      const banned = await create({ ...base, logit_bias: { [plainIds[0]]: -100 } });
      const bannedIds = ids();
      const two = await create({ ...base, temperature: 1, seed: 5, n: 2 });
      const twoAgain = await create({ ...base, temperature: 1, seed: 5, n: 2 });
      const extras = await create({
        ...base, frequency_penalty: 1.5, presence_penalty: 0.5, top_k: 5, min_p: 0.05,
        repetition_penalty: 1.1, top_p: 0.9, user: "u", model: "anything", tool_choice: "none",
        response_format: { type: "text" }, max_completion_tokens: 1,
      });
      // A stop string taken from inside the greedy reply (likely across a
      // token boundary): the reply ends right before it.
      const six = await create({ ...base, max_tokens: 6 });
      const sixText = six.choices[0].message.content;
      const stop = sixText.slice(2, 5);
      const stopped = await create({ ...base, max_tokens: 6, stop });
      const ac = new AbortController();
      ac.abort();
      const aborted = await err(create(base, { signal: ac.signal }));
      const overflow = await err(create({ messages: [{ role: "user", content: "word ".repeat(ctx * 2) }], max_tokens: 1 }));
      return { refused, plain, plainIds, parts, bannedIds, two, twoAgain, extras, aborted, overflow, sixText, stop, stopped, name: engine.info().model.name };
    }, { ctx: CTX }), "fields");
    log(`refusals: ${JSON.stringify(r.refused)}`);
    for (const [field, e] of [["frobnicate", r.refused.unknown],
      ["response_format.type", r.refused.format], ["signal", r.refused.bodySignal],
      ["n", r.refused.nStream], ["messages[0].content[0].type", r.refused.image]]) {
      assert.equal(e?.name, "UnsupportedFieldError", `${field}: ${JSON.stringify(e)}`);
      assert.equal(e.code, "unsupported_field");
      assert.equal(e.field, field);
      assert.ok(e.typed);
    }
    // "required" with no tools to call (tools/tool_choice themselves: tools.test.mjs).
    for (const [field, e] of [["temperature", r.refused.temperature], ["logit_bias", r.refused.bias], ["stop", r.refused.fiveStops],
      ["tool_choice", r.refused.toolChoice]]) {
      assert.equal(e?.name, "InvalidRequestError", `${field}: ${JSON.stringify(e)}`);
      assert.equal(e.field, field);
    }
    assert.equal(r.parts.choices[0].message.content, r.plain.choices[0].message.content, "text parts join into the same prompt");
    assert.notEqual(r.bannedIds[0], r.plainIds[0], "logit_bias -100 bans the greedy token");
    assert.equal(r.two.choices.length, 2);
    assert.deepEqual(r.two.choices.map((c) => c.index), [0, 1]);
    assert.deepEqual(r.two.choices.map((c) => c.message.content), r.twoAgain.choices.map((c) => c.message.content), "seeded n is reproducible");
    assert.ok(r.two.usage.completion_tokens >= 2 && r.two.usage.completion_tokens <= 4, "two choices of up to 2 tokens");
    assert.equal(r.extras.usage.completion_tokens, 1, "max_completion_tokens");
    assert.equal(r.extras.model, r.name ?? r.extras.model, "the loaded model answers");
    assert.ok(r.stop.length === 3, `stop ${JSON.stringify(r.stop)} from ${JSON.stringify(r.sixText)}`);
    assert.equal(r.stopped.choices[0].finish_reason, "stop");
    assert.equal(r.stopped.choices[0].message.content, r.sixText.slice(0, r.sixText.indexOf(r.stop)));
    assert.equal(r.aborted?.name, "AbortError");
    assert.equal(r.aborted.code, "aborted");
    assert.equal(r.overflow?.name, "ContextWindowExceededError", JSON.stringify(r.overflow));
    assert.equal(r.overflow.code, "context_window_exceeded");
    assert.equal(r.overflow.contextLength, CTX);
    assert.ok(r.overflow.promptTokens > CTX);
  });

  test("a multi-turn chat reuses the cached prefix and answers as a fresh run", { timeout: 300_000 }, async () => {
    await checkMultiTurnReuse(page, log);
  });

  test("a cached model loads again from the model store, with progress", { timeout: 300_000 }, async () => {
    const r = await within(280_000, page.evaluate(async ({ url, ctx }) => {
      const { Engine, clearCache } = window.wick;
      await clearCache(url);
      const phases = [];
      const load = async () => {
        const seen = new Set();
        const e = await Engine.load(url, { contextLength: ctx, cache: true, warmUp: false, onProgress: (p) => seen.add(p.phase) });
        await e.dispose();
        phases.push([...seen]);
      };
      await load();
      await load();
      const cleared = await clearCache(url);
      return { phases, cleared };
    }, { url: modelUrl(), ctx: CTX }), "cached loads");
    assert.ok(r.phases[0].includes("fetch") && !r.phases[0].includes("cache"), `first load: ${r.phases[0]}`);
    assert.ok(r.phases[1].includes("cache") && !r.phases[1].includes("fetch"), `second load: ${r.phases[1]}`);
    assert.ok(r.phases[1].includes("upload") && r.phases[1].includes("ready"));
    assert.equal(r.cleared, true);
  });

  test("a corrupt or truncated file and a missing URL give load errors, not hung promises", { timeout: 200_000 }, async () => {
    const errors = await within(180_000, page.evaluate(async () => {
      const { Engine } = window.wick;
      const msg = (p) => p.then(() => "loaded?!", (e) => `${e.name}: ${e.message}`);
      const garbage = new Uint8Array(1 << 20).map((_, i) => (i * 2654435761) >>> 24);
      const head = await (await fetch("/models/SmolLM2-135M-Instruct.Q4_1.gguf", { headers: { Range: "bytes=0-3145727" } })).arrayBuffer();
      return {
        garbage: await msg(Engine.load(garbage.buffer)),
        truncated: await msg(Engine.load(new Blob([head]))),
        missing: await msg(Engine.load("/models/no-such-model.gguf")),
        badSource: await msg(Engine.load(42)),
        badWarmUp: await msg(Engine.load("/models/SmolLM2-135M-Instruct.Q4_1.gguf", { warmUp: "no" })),
      };
    }), "corrupt loads");
    log(`load errors: ${JSON.stringify(errors)}`);
    assert.match(errors.garbage, /^ModelLoadError: loading the model failed: .*(magic|GGUF)/i);
    assert.match(errors.truncated, /^ModelLoadError: loading the model failed: .*ended/i);
    assert.match(errors.missing, /404/);
    assert.match(errors.badSource, /^TypeError/);
    assert.equal(errors.badWarmUp, 'InvalidRequestError: warmUp: must be true or false, got "no"');
  });
});

/** Loads `url` on the page, greedy-generates n tokens of PROMPT; returns
 * the ids, the prompt's ids and `info().model`. */
function greedyOnPage(page, url, n, contextLength = 64) {
  return page.evaluate(async ({ url, prompt, n, contextLength }) => {
    const engine = await window.wick.Engine.load(url, { contextLength, warmUp: false });
    const ids = [];
    for await (const c of engine.generate(prompt, { maxTokens: n, temperature: 0 })) {
      if (c.tokenId !== null) ids.push(c.tokenId);
    }
    const promptIds = engine.tokenize(prompt);
    const model = engine.info().model;
    await engine.dispose();
    return { ids, promptIds, model };
  }, { url, prompt: PROMPT, n, contextLength });
}

describe("Gemma 3 on the page (K-quants on the f32 path)", () => {
  const GEMMA = "gemma-3-270m-q4_k_m.gguf";
  test("greedy-generates the native engine's tokens", { timeout: LOAD_MS + 300_000 }, async () => {
    const n = 2;
    const want = nativeGenerate(PROMPT, n, 64, GEMMA);
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 280_000, greedyOnPage(page, `/models/${GEMMA}`, n), "gemma load + generate");
      log(`gemma3 browser: ${JSON.stringify(r.ids)} native: ${JSON.stringify(want.ids)}`);
      assert.deepEqual(r.promptIds, want.prompt_ids, "prompt ids");
      assert.deepEqual(r.ids, want.ids, "greedy ids equal the native engine's");
      const ref = llamaCppCase(PROMPT, GEMMA);
      assert.deepEqual(r.promptIds, ref.prompt_ids, "llama.cpp prompt ids");
    } finally {
      await page.close();
    }
  });
});

describe("Mixture of experts on the page (qwen3moe, routed on the GPU)", () => {
  const MOE = "tiny-qwen3moe.q8_0.gguf";
  test("greedy-generates the native engine's tokens", { timeout: LOAD_MS + 240_000 }, async () => {
    const n = 4;
    const want = nativeGenerate(PROMPT, n, 64, MOE);
    const page = await openTestPage(browser, base, log);
    try {
      // A prompt of 5 tokens runs the grouped expert form (prefill), the
      // generated tokens the indexed one (decode).
      const r = await within(LOAD_MS + 200_000, greedyOnPage(page, `/models/${MOE}`, n), "qwen3moe load + generate");
      log(`qwen3moe browser: ${JSON.stringify(r.ids)} native: ${JSON.stringify(want.ids)}`);
      assert.equal(r.model.architecture, "qwen3moe");
      assert.deepEqual(r.model.experts, { count: 8, used: 2, ffnDim: 32, sharedFfnDim: null });
      assert.deepEqual(r.promptIds, want.prompt_ids, "prompt ids");
      assert.deepEqual(r.ids, want.ids, "greedy ids equal the native engine's");
      // llama.cpp's greedy ids are logged, not asserted: its top-1 leads its
      // top-2 by only 0.03-0.2 at these positions (random weights), inside
      // the two engines' numerical difference. The golden tests compare logits.
      const ref = llamaCppCase(PROMPT, MOE);
      assert.deepEqual(r.promptIds, ref.prompt_ids, "llama.cpp prompt ids");
      log(`qwen3moe llama.cpp greedy: ${JSON.stringify(ref.greedy_ids.slice(0, n))}`);
    } finally {
      await page.close();
    }
  });
});

describe("Phi-3 on the page (fused tensors, LongRoPE's long factors)", () => {
  // The tiny random-weight file (../shared/models.md) at 512 positions, past
  // its original 256, so LongRoPE's long factors. Two tokens: llama.cpp's
  // top-1 leads its top-2 by 0.8 at the first, far beyond the engines'
  // numerical difference. Gemma 2 and SmolLM3 run natively only: their new
  // code is one elementwise kernel (WGSL checked for every adapter class by
  // kernel_variants) and a rope_kv parameter.
  const FILE = "tiny-phi3.q8_0.gguf";
  const ctx = 512;
  const n = 2;
  test("greedy-generates the native engine's tokens", { timeout: LOAD_MS + 200_000 }, async () => {
    const want = nativeGenerate(PROMPT, n, ctx, FILE);
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 180_000, greedyOnPage(page, `/models/${FILE}`, n, ctx), "phi3 load + generate");
      log(`phi3 browser: ${JSON.stringify(r.ids)} native: ${JSON.stringify(want.ids)}`);
      assert.equal(r.model.architecture, "phi3");
      assert.equal(r.model.ropeFactors, "long");
      assert.equal(r.model.attentionSoftcap, null);
      assert.deepEqual(r.model.unrotatedLayers, []);
      assert.deepEqual(r.promptIds, want.prompt_ids, "prompt ids");
      assert.deepEqual(r.ids, want.ids, "greedy ids equal the native engine's");
      const ref = llamaCppCase(PROMPT, FILE, "llamacpp_tiny_archs_public.json");
      assert.deepEqual(r.promptIds, ref.prompt_ids, "llama.cpp prompt ids");
    } finally {
      await page.close();
    }
  });
});

describe("Engine in a Web Worker", () => {
  test("streams the same tokens, and an abort stops a generation", { timeout: LOAD_MS + 240_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 200_000, page.evaluate(async ({ url, prompt, n, ctx }) => {
        const { WorkerEngine } = window.wick;
        let progress = 0;
        const engine = await WorkerEngine.load(url, { contextLength: ctx, warmUp: false, onProgress: () => progress++ });
        const chunks = [];
        const run = engine.generate(prompt, { maxTokens: n, temperature: 0 });
        for await (const c of run) chunks.push({ ...c, at: performance.now() });
        // Abort after the first token of a long generation.
        const ac = new AbortController();
        let got = 0;
        let error = null;
        const t0 = performance.now();
        try {
          for await (const c of engine.generate(prompt, { maxTokens: 200, temperature: 0, signal: ac.signal })) {
            got += 1;
            if (got === 1) ac.abort();
          }
        } catch (e) {
          error = `${e.name}: ${e.message}`;
        }
        const abortSeconds = (performance.now() - t0) / 1000;
        // The engine is still usable after the abort.
        const again = [];
        for await (const c of engine.generate(prompt, { maxTokens: 1, temperature: 0 })) again.push(c.tokenId);
        const info = engine.info();
        const tokens = await engine.tokenize(prompt);
        await engine.dispose();
        // A local file (here a Blob) crosses into the worker too.
        const blob = await (await fetch(url)).blob();
        const fromBlob = await WorkerEngine.load(blob, { contextLength: 64, warmUp: false });
        const blobTokens = await fromBlob.tokenize(prompt);
        await fromBlob.dispose();
        return { chunks, result: run.result, got, error, abortSeconds, again, progress, info, tokens, blobTokens };
      }, { url: modelUrl("?norange"), prompt: PROMPT, n: N, ctx: CTX }), "worker");
      log(`worker: ${JSON.stringify(r.chunks.map((c) => c.tokenId))}, abort after ${r.got} token(s) in ${r.abortSeconds.toFixed(1)} s: ${r.error}`);
      assert.deepEqual(r.chunks.map((c) => c.tokenId), native.ids, "worker greedy ids equal the native engine's");
      assert.equal(r.chunks.map((c) => c.text).join(""), native.text);
      // Streamed: the chunks arrived one by one, not all at the end.
      assert.ok(r.chunks.at(-1).at - r.chunks[0].at > 50, "tokens arrive over time");
      assert.equal(r.result.finishReason, native.finish_reason);
      assert.match(r.error ?? "", /^AbortError/);
      assert.ok(r.got <= 2, `stopped after ${r.got} tokens`);
      assert.deepEqual(r.again, native.ids.slice(0, 1));
      assert.ok(r.progress > 0);
      assert.deepEqual(r.tokens, native.prompt_ids);
      assert.deepEqual(r.blobTokens, native.prompt_ids);
      metrics.worker = { abortSeconds: r.abortSeconds };
    } finally {
      await page.close();
    }
  });
});

describe("every source type crosses to a worker", () => {
  test("Response, ReadableStream, ArrayBuffer and typed array are transferred, not cloned", { timeout: 4 * LOAD_MS }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(4 * LOAD_MS - 10_000, page.evaluate(async ({ url, prompt }) => {
        const { WorkerEngine } = window.wick;
        const out = {};
        const tokens = async (source) => {
          const engine = await WorkerEngine.load(source, { contextLength: 32, warmUp: false });
          const ids = await engine.tokenize(prompt);
          await engine.dispose();
          return ids;
        };
        out.response = await tokens(await fetch(url));
        out.stream = await tokens((await fetch(url)).body);
        const buffer = await (await fetch(url)).arrayBuffer();
        out.bufferBytes = buffer.byteLength;
        out.buffer = await tokens(buffer);
        out.bufferAfter = buffer.byteLength; // 0: transferred (detached), not copied
        const typed = new Uint8Array(await (await fetch(url)).arrayBuffer());
        out.typed = await tokens(typed);
        out.typedAfter = typed.byteLength;
        out.notOk = await WorkerEngine.load(new Response("nope", { status: 404 })).then(() => "loaded?!", (e) => `${e.name}: ${e.message}`);
        return out;
      }, { url: modelUrl("?norange"), prompt: PROMPT }), "worker sources");
      log(`worker sources: ${JSON.stringify({ ...r, response: undefined, stream: undefined, buffer: undefined, typed: undefined })}`);
      for (const k of ["response", "stream", "buffer", "typed"]) assert.deepEqual(r[k], native.prompt_ids, k);
      assert.ok(r.bufferBytes > 0);
      assert.equal(r.bufferAfter, 0, "the ArrayBuffer was transferred");
      assert.equal(r.typedAfter, 0, "the typed array's buffer was transferred");
      assert.match(r.notOk, /^TypeError: .*HTTP 404/);
    } finally {
      await page.close();
    }
  });
});

describe("memory comes back", () => {
  test("load and dispose twice, then another model: the page's live GPU memory returns to its baseline", { timeout: 3 * LOAD_MS }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(3 * LOAD_MS - 10_000, page.evaluate(async ({ urls, prompt }) => {
        const { Engine, init, liveGpuMemory, releaseGpu } = window.wick;
        await init();
        const baseline = liveGpuMemory();
        const rounds = [];
        for (const url of urls) {
          const engine = await Engine.load(url, { contextLength: 64, warmUp: false });
          await engine.generate(prompt, { maxTokens: 2, temperature: 0 }).text();
          const loaded = liveGpuMemory();
          await engine.dispose();
          rounds.push({ loaded, after: liveGpuMemory() });
        }
        releaseGpu();
        return { baseline, rounds, released: liveGpuMemory() };
      }, { urls: [modelUrl(), modelUrl(), "/models/gemma-3-270m-q4_k_m.gguf"], prompt: PROMPT }), "memory");
      log(`live GPU memory: ${JSON.stringify(r)}`);
      // After each dispose only the page's GPU context remains (kept for
      // the next load): its uniform arena, one buffer, the same every round.
      const context = r.rounds[0].after;
      assert.equal(context.liveBuffers, 1, "the page's GPU context holds its uniform arena alone");
      assert.equal(context.liveBindGroups, 0);
      for (const [i, round] of r.rounds.entries()) {
        assert.ok(round.loaded.liveBytes > r.baseline.liveBytes + 50e6, `round ${i} held the model`);
        assert.deepEqual(round.after, context, `round ${i}: back to the page's context after dispose`);
      }
      assert.equal(r.rounds.length, 3);
      assert.deepEqual(r.released, r.baseline, "releaseGpu() lets the context go: back to the baseline");
    } finally {
      await page.close();
    }
  });
});

describe("a lost GPU device", () => {
  test("fails the generation with DeviceLostError, later calls too, and a new load works", { timeout: 2 * LOAD_MS + 60_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(2 * LOAD_MS + 30_000, page.evaluate(async ({ url, ctx, prompt }) => {
        const { Engine, DeviceLostError } = window.wick;
        const engine = await Engine.load(url, { contextLength: ctx, tokensPerSubmit: 1, warmUp: false });
        const got = [];
        let error = null;
        try {
          for await (const c of engine.generate(prompt, { maxTokens: 16, temperature: 0 })) {
            got.push(c.tokenId);
            if (got.length === 1) engine.__testLoseDevice();
          }
        } catch (e) {
          error = { name: e.name, code: e.code, typed: e instanceof DeviceLostError, message: e.message };
        }
        const later = await (async () => engine.generate(prompt, { maxTokens: 1 }).text())().then(() => null, (e) => e.name);
        const fresh = await Engine.load(url, { contextLength: ctx, warmUp: false });
        const ids = [];
        for await (const c of fresh.generate(prompt, { maxTokens: 2, temperature: 0 })) ids.push(c.tokenId);
        await fresh.dispose();
        return { got, error, later, ids };
      }, { url: modelUrl(), ctx: CTX, prompt: PROMPT }), "device lost");
      log(`device lost: ${JSON.stringify(r)}`);
      assert.equal(r.error?.name, "DeviceLostError", JSON.stringify(r.error));
      assert.equal(r.error.code, "device_lost");
      assert.ok(r.error.typed);
      assert.ok(r.got.length < 16, `stopped after ${r.got.length} tokens`);
      assert.equal(r.later, "DeviceLostError");
      assert.deepEqual(r.ids, native.ids.slice(0, 2), "a new load generates the native ids");
    } finally {
      await page.close();
    }
  });
});

describe("a panic in the wasm module", () => {
  test("rejects the pending generation and later calls instead of hanging", { timeout: LOAD_MS + 60_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 30_000, page.evaluate(async ({ url, ctx }) => {
        const { Engine } = window.wick;
        const wasm = await import("/web/pkg/wick_web.js");
        const engine = await Engine.load(url, { contextLength: ctx, warmUp: false });
        const it = engine.generate("Hello", { maxTokens: 2, temperature: 0 })[Symbol.asyncIterator]();
        const pending = it.next().then(() => "resolved?!", (e) => e.message);
        await new Promise((r) => setTimeout(r, 200));
        let sync = null;
        try {
          wasm.__testPanic("deliberate test panic");
        } catch (e) {
          sync = e.message;
        }
        const later = await Engine.load(url).then(() => "loaded?!", (e) => e.message);
        return { pending: await pending, sync, later };
      }, { url: modelUrl(), ctx: CTX }), "panic");
      log(`after a panic: ${JSON.stringify(r)}`);
      for (const m of [r.pending, r.later]) assert.match(m, /wick crashed[\s\S]*deliberate test panic/);
      assert.ok(r.sync, "the panicking call threw");
    } finally {
      await page.close();
    }
  });
});

describe("without WebGPU", () => {
  test("Engine.load, the demo page and the bench page say WebGPU is not available", { timeout: 120_000 }, async () => {
    const plain = await launch({ webgpu: false });
    try {
      const page = await openTestPage(plain, base, log);
      const r = await within(60_000, page.evaluate(async () => {
        const hasGpu = !!navigator.gpu;
        const { Engine, WorkerEngine } = window.wick;
        const msg = (p) => p.then(() => "loaded?!", (e) => `${e.name}: ${e.message}`);
        return {
          hasGpu,
          page: await msg(Engine.load("/models/SmolLM2-135M-Instruct.Q4_1.gguf")),
          worker: await msg(WorkerEngine.load("/models/SmolLM2-135M-Instruct.Q4_1.gguf")),
        };
      }), "no-webgpu load");
      log(`no WebGPU (navigator.gpu ${r.hasGpu ? "present" : "absent"}): ${r.page}`);
      assert.match(r.page, /^WebGPUUnavailableError: WebGPU is not available in this browser/);
      assert.match(r.worker, /^WebGPUUnavailableError: WebGPU is not available in this browser/);

      // The same page with navigator.gpu present but no adapter: the wasm path.
      const noAdapter = await openTestPage(browser, base, log);
      await noAdapter.evaluate(() => {
        Object.defineProperty(navigator.gpu, "requestAdapter", { value: async () => null });
      });
      const viaWasm = await noAdapter.evaluate(() =>
        window.wick.Engine.load(new ArrayBuffer(8)).then(() => "loaded?!", (e) => `${e.name} ${e.code}: ${e.message}`));
      assert.match(viaWasm, /^WebGPUUnavailableError webgpu_unavailable: WebGPU is not available in this browser/);
      await noAdapter.close();

      const demo = await plain.newPage();
      await demo.goto(`${base}/web/demo/?autoload`);
      await demo.waitForFunction(() => !document.getElementById("error").hidden, null, { timeout: 30_000 });
      assert.match(await demo.textContent("#error"), /WebGPU is not available/);
      await demo.screenshot({ path: path.join(outDir, "demo-no-webgpu.png") });
      // The bench page names the typed error.
      await demo.goto(`${base}/web/demo/bench.html?run=1`);
      await demo.waitForFunction(() => document.body.dataset.state === "error", null, { timeout: 30_000 });
      assert.match(await demo.textContent("#error"), /^WebGPUUnavailableError: WebGPU is not available/);
    } finally {
      await plain.close();
    }
  });
});

describe("demo page", () => {
  test("loads a model, streams a reply, and a screenshot is saved", { timeout: LOAD_MS + 240_000 }, async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 820 } });
    page.on("console", (m) => log(`[demo] ${m.text()}`));
    try {
      await page.goto(`${base}/web/demo/?model=${encodeURIComponent(modelUrl())}&autoload`);
      await page.waitForFunction(() => document.body.dataset.loaded === "1" || !document.getElementById("error").hidden,
        null, { timeout: LOAD_MS });
      assert.equal(await page.isHidden("#error"), true, `load error: ${await page.textContent("#error")}`);
      assert.match(await page.textContent("#info"), /f32 path/);
      await page.fill("#max-tokens", "4");
      await page.$eval("#temperature", (el) => {
        el.value = "0";
        el.dispatchEvent(new Event("input"));
      });
      await page.fill("#prompt", "What is the capital of France?");
      await page.click("#send");
      // Streaming: the reply has text while the generation still runs.
      await page.waitForFunction(() => {
        const m = document.querySelector(".msg.assistant");
        return m && m.textContent.length > 0;
      }, null, { timeout: 200_000 });
      await page.waitForFunction(() => document.body.dataset.replies === "1", null, { timeout: 200_000 });
      const reply = await page.textContent(".msg.assistant");
      const tps = await page.textContent("#tps");
      log(`demo reply: ${JSON.stringify(reply)}; ${tps}`);
      assert.ok(reply.replace(/\(.*\)$/, "").trim().length > 0, "a reply was streamed");
      assert.match(tps, /tokens\/s · prefill/, "final tokens/s from the generation stats");
      await page.screenshot({ path: path.join(outDir, "demo.png"), fullPage: true });
    } finally {
      await page.close();
    }
  });

  test("the bench page runs from URL parameters and reports the native bench's figures as JSON; a load error is named", { timeout: LOAD_MS + 120_000 }, async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 1100 }, permissions: ["clipboard-read", "clipboard-write"] });
    page.on("console", (m) => log(`[bench] ${m.text()}`));
    const ask = { ctx: 128, promptTokens: 8, tokens: 4 };
    const done = () => ["done", "error"].includes(document.body.dataset.state);
    try {
      // A new page is a new browser context: nothing is in its model store yet.
      const q = new URLSearchParams({ model: modelUrl(), ...ask, run: "1" });
      await page.goto(`${base}/web/demo/bench.html?${q}`);
      await page.waitForFunction(done, null, { timeout: LOAD_MS });
      assert.equal(await page.isHidden("#error"), true, `bench error: ${await page.textContent("#error")}`);
      const r = JSON.parse(await page.textContent("#json"));
      log(`bench page: ${JSON.stringify(r)}`);
      metrics.benchPage = r;

      // Every number in the report is finite; these must be above zero.
      const walk = (v, at) => {
        if (typeof v === "number") assert.ok(Number.isFinite(v), `${at} = ${v}`);
        else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, `${at}.${k}`);
      };
      walk(r, "report");
      for (const k of ["load_seconds", "prefill_tok_s", "decode_tok_s", "prefill_over_decode", "time_to_first_token",
        "submits_per_decode_step", "dispatches_per_decode_step", "bytes_read_back_per_token", "tokens_per_submit",
        "cpu_record_ms_per_step", "weight_bytes_per_token", "copy_gbps", "copy_bytes", "roofline_fraction"]) {
        assert.equal(typeof r[k], "number", `${k} is reported`);
        assert.ok(r[k] > 0, `${k} = ${r[k]} > 0`);
      }
      // What was asked for, and the file on the server.
      const size = statSync(modelFile(MODEL)).size;
      assert.equal(r.model, MODEL);
      assert.equal(r.prompt_tokens, ask.promptTokens);
      assert.equal(r.gen_tokens, ask.tokens);
      assert.equal(r.context_length, ask.ctx);
      assert.equal(r.limits.requested, "adapter");
      assert.equal(r.options.speculative, "off");
      assert.equal(r.speculative, null, "no drafting asked for");
      assert.equal(r.load.bytes, size);
      assert.equal(r.load.source, "network");
      assert.equal(r.load.fromStore, false);
      assert.ok(r.load.pipelinesCreated > 0, "a fresh page compiles its kernels");
      const sum = Object.values(r.load.phasesMs).reduce((a, b) => a + b, 0);
      assert.ok(sum <= r.load.totalMs + 2 && sum >= r.load.totalMs - 50,
        `phases ${JSON.stringify(r.load.phasesMs)} add up to ${r.load.totalMs} ms`);
      assert.equal(r.load_seconds, r.load.totalMs / 1000);
      // A decode step reads each stored weight at most once.
      assert.ok(r.weight_bytes_per_token <= size, `${r.weight_bytes_per_token} weight bytes a token, file ${size}`);
      const roofline = (r.decode_tok_s * r.weight_bytes_per_token) / (r.copy_gbps * 1e9);
      assert.ok(Math.abs(r.roofline_fraction - roofline) <= 1e-9 * roofline, `roofline ${r.roofline_fraction} vs ${roofline}`);
      // SwiftShader: Chromium's CPU adapter.
      assert.equal(r.adapter_info.isSoftware, true);
      assert.match(r.adapter, /SwiftShader/i);
      assert.equal(r.adapter, r.adapter_info.name);
      assert.equal(typeof r.features.shaderF16, "boolean");
      assert.match(r.user_agent, /Chrome\//);
      // The tables show the report's figures.
      assert.ok((await page.textContent("#speed")).includes(`${r.decode_tok_s.toFixed(2)} tok/s`));
      await page.click("#copy-json");
      await page.waitForFunction(() => document.getElementById("copied").textContent !== "");
      assert.deepEqual(JSON.parse(await page.evaluate(() => navigator.clipboard.readText())), r);
      await page.screenshot({ path: path.join(outDir, "bench.png"), fullPage: true });

      // Run again: the model store now holds the file, and the load reads it there.
      await page.click("#run");
      await page.waitForFunction(() => document.body.dataset.runs === "2", null, { timeout: LOAD_MS });
      assert.equal(await page.isHidden("#error"), true, `second run: ${await page.textContent("#error")}`);
      const again = JSON.parse(await page.textContent("#json"));
      log(`bench page, second run: ${JSON.stringify(again.load)}`);
      assert.equal(again.load.source, "store");
      assert.equal(again.load.fromStore, true);
      assert.equal(again.load.bytes, size);

      // A model the server lacks: the typed error's name and message.
      await page.goto(`${base}/web/demo/bench.html?model=/models/no-such-model.gguf&run=1`);
      await page.waitForFunction(done, null, { timeout: 60_000 });
      const error = await page.textContent("#error");
      log(`bench page, missing model: ${error}`);
      assert.match(error, /^DownloadError: .*404/);
      assert.equal(await page.isHidden("#results"), true);
    } finally {
      await page.close();
    }
  });
});

// ---- chat.completions: logprobs, chat_template_kwargs, reasoning_content ----

describe("chat.completions: logprobs, template kwargs, reasoning", () => {
  let page;
  before(async () => {
    page = await openTestPage(browser, base, log);
    await within(LOAD_MS, page.evaluate(async ({ url, ctx }) => {
      window.chatEngine = await window.wick.Engine.load(url, { contextLength: ctx, kvCache: "f32", warmUp: false });
    }, { url: modelUrl(), ctx: CTX }), "load");
  });
  after(async () => {
    await page?.evaluate(() => window.chatEngine?.dispose()).catch(() => {});
    await page?.close();
  });

  test("logprobs equal the native engine's, streaming and not; bad values are refused", { timeout: 300_000 }, async () => {
    const c = chatTemplateCases().cases[0];
    const n = 3;
    const k = 3;
    const want = nativeLogprobs(c.ids, n, k, CTX);
    const r = await within(280_000, page.evaluate(async ({ messages, n, k }) => {
      const engine = window.chatEngine;
      const create = (body) => engine.chat.completions.create(body);
      const err = (p) => p.then(() => null, (e) => ({ name: e.name, field: e.field, message: e.message }));
      const body = { messages, max_tokens: n, temperature: 0, logprobs: true, top_logprobs: k };
      const whole = await create(body);
      const ids = engine.lastResult.ids;
      const chunks = [];
      for await (const ch of await create({ ...body, stream: true })) chunks.push(ch);
      const plain = await create({ messages, max_tokens: 1, temperature: 0, logprobs: true });
      const refused = {
        topWithout: await err(create({ messages, max_tokens: 1, top_logprobs: 2 })),
        topFalse: await err(create({ messages, max_tokens: 1, logprobs: false, top_logprobs: 2 })),
        top21: await err(create({ messages, max_tokens: 1, logprobs: true, top_logprobs: 21 })),
        notBool: await err(create({ messages, max_tokens: 1, logprobs: 1 })),
      };
      return { whole, ids, chunks, plain, refused };
    }, { messages: c.messages, n, k }), "logprobs");
    assert.deepEqual(r.ids, want.ids, "greedy ids equal the native engine's");
    const lp = r.whole.choices[0].logprobs;
    assert.equal(lp.refusal, null);
    // The same tokens and alternatives as the native engine. The values agree
    // to ~3e-3, not 1e-4: SwiftShader (here) and lavapipe (native) are two
    // f32 implementations whose rounding differs (exp, fused multiply-adds),
    // and 30 layers carry it to the logits (both on an f32 KV cache; the f16
    // default adds its own rounding, ~1e-3 between the two natively).
    const worst = assertLogprobs(lp.content, want.logprobs, "not streamed vs native", 5e-3);
    log(`logprobs: browser vs native (lavapipe) differ by at most ${worst}`);
    // On one device they agree to 1e-4: the first token's, from a prefill of
    // one row (a 1-token reply) and of three (this one).
    const first = r.plain.choices[0].logprobs.content[0];
    assert.equal(first.token, lp.content[0].token);
    assert.ok(Math.abs(first.logprob - lp.content[0].logprob) <= 1e-4, `${first.logprob} vs ${lp.content[0].logprob}`);
    assert.equal(lp.content.map((e) => e.token).join(""), r.whole.choices[0].message.content);

    const streamed = r.chunks.flatMap((ch) => ch.choices[0]?.logprobs?.content ?? []);
    assertLogprobs(streamed, lp.content, "streamed vs not", 1e-6);
    for (const ch of r.chunks) {
      const d = ch.choices[0].delta;
      // Each content chunk carries its own tokens (SmolLM2's are whole characters here).
      if (d.content) assert.equal(ch.choices[0].logprobs.content.map((e) => e.token).join(""), d.content);
    }
    assert.equal(r.chunks.map((ch) => ch.choices[0].delta.content ?? "").join(""), r.whole.choices[0].message.content);
    // logprobs without top_logprobs: no alternatives.
    assert.deepEqual(r.plain.choices[0].logprobs.content[0].top_logprobs, []);
    assert.equal(r.plain.choices[0].logprobs.content[0].token, want.logprobs[0].token);
    for (const [name, e] of Object.entries(r.refused)) {
      assert.equal(e?.name, "InvalidRequestError", `${name}: ${JSON.stringify(e)}`);
    }
    assert.equal(r.refused.topWithout.field, "top_logprobs");
    assert.equal(r.refused.top21.field, "top_logprobs");
    assert.equal(r.refused.notBool.field, "logprobs");
  });

  test("chat_template_kwargs must be an object; tools must be function tools", async () => {
    const r = await page.evaluate(async () => {
      const engine = window.chatEngine;
      const messages = [{ role: "user", content: "Hi" }];
      const err = (p) => p.then(() => null, (e) => ({ name: e.name, field: e.field }));
      const create = (extra) => err(engine.chat.completions.create({ messages, max_tokens: 1, ...extra }));
      return {
        array: await create({ chat_template_kwargs: [1] }),
        string: await create({ chat_template_kwargs: "enable_thinking" }),
        toolType: await create({ tools: [{ type: "code_interpreter" }] }),
        toolName: await create({ tools: [{ type: "function", function: {} }] }),
        applyArray: await err(Promise.resolve().then(() => engine.applyChatTemplate(messages, { kwargs: [1] }))),
      };
    });
    for (const k of ["array", "string", "applyArray"]) {
      assert.equal(r[k]?.name, "InvalidRequestError", `${k}: ${JSON.stringify(r[k])}`);
      assert.equal(r[k].field, "chat_template_kwargs");
    }
    assert.equal(r.toolType?.name, "UnsupportedFieldError");
    assert.equal(r.toolType.field, "tools[0].type");
    assert.equal(r.toolName?.name, "InvalidRequestError");
    assert.equal(r.toolName.field, "tools[0].function.name");
  });

  // The tiny qwen3moe with a template that opens a think block in its
  // generation prompt (as the DeepSeek-R1 distills do) unless the kwarg
  // `enable_thinking: false` closes it (as Qwen3's does): the kwarg changes
  // the prompt, and the reply goes to reasoning_content or to content.
  test("a think template: enable_thinking through chat_template_kwargs, reasoning_content split", { timeout: LOAD_MS + 240_000 }, async () => {
    const template = [
      "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}",
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}",
      "{%- if enable_thinking is defined and enable_thinking is false %}{{- '\\n</think>\\n\\n' }}{%- endif %}{%- endif %}",
    ].join("");
    const fixture = path.join(repoRoot, "tests/fixtures/models/tiny-qwen3moe.q8_0.gguf");
    mkdirSync(outDir, { recursive: true });
    writeFileSync(path.join(outDir, "tiny-qwen3moe-think.gguf"), withChatTemplate(fixture, template));
    const p = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 200_000, p.evaluate(async () => {
        const engine = await window.wick.Engine.load("/test-output/tiny-qwen3moe-think.gguf", { contextLength: 64, warmUp: false });
        const messages = [{ role: "user", content: "What is 2+2?" }];
        const body = { messages, max_tokens: 4, temperature: 0 };
        const create = (extra) => engine.chat.completions.create({ ...body, ...extra });
        const raw = () => engine.decode(engine.lastResult.ids);
        const thinking = await create({});
        const thinkingRaw = raw();
        const chunks = [];
        for await (const c of await create({ stream: true })) chunks.push(c.choices[0]?.delta ?? {});
        const off = await create({ chat_template_kwargs: { enable_thinking: false } });
        const offRaw = raw();
        const prompts = {
          on: engine.applyChatTemplate(messages),
          off: engine.applyChatTemplate(messages, { kwargs: { enable_thinking: false } }),
        };
        await engine.dispose();
        return { thinking, thinkingRaw, chunks, off, offRaw, prompts };
      }), "think template");
      log(`think template: raw ${JSON.stringify(r.thinkingRaw)}; thinking ${JSON.stringify(r.thinking.choices[0].message)}; ` +
        `off ${JSON.stringify(r.off.choices[0].message)}`);
      assert.ok(r.prompts.on.endsWith("<|im_start|>assistant\n<think>\n"), JSON.stringify(r.prompts.on));
      assert.ok(r.prompts.off.endsWith("<think>\n\n</think>\n\n"), JSON.stringify(r.prompts.off));
      assert.ok(r.off.usage.prompt_tokens > r.thinking.usage.prompt_tokens, "the kwarg lengthened the prompt");
      // Thinking: the prompt leaves the reply inside the block, and the
      // random model never closes it: all of it is reasoning.
      assert.ok(!r.thinkingRaw.includes("</think>"));
      const m = r.thinking.choices[0].message;
      assert.equal(m.content, "");
      assert.ok(r.thinkingRaw.trim().length > 0, "the reply has text");
      assert.equal(m.reasoning_content, r.thinkingRaw.trim());
      assert.equal(r.chunks.map((d) => d.reasoning_content ?? "").join(""), m.reasoning_content, "streamed reasoning");
      assert.equal(r.chunks.map((d) => d.content ?? "").join(""), "", "nothing streamed as content");
      // Not thinking: the block is closed in the prompt, the reply is content.
      const off = r.off.choices[0].message;
      assert.equal(off.content, r.offRaw);
      assert.equal(off.reasoning_content, undefined);
    } finally {
      await p.close();
    }
  });
});

describe("chat.completions in a Web Worker: logprobs, kwargs, typed errors", () => {
  test("logprobs cross postMessage; template kwargs and errors stay typed", { timeout: LOAD_MS + 200_000 }, async () => {
    const page = await openTestPage(browser, base, log);
    try {
      const r = await within(LOAD_MS + 180_000, page.evaluate(async ({ url, ctx, messages }) => {
        const { WorkerEngine } = window.wick;
        const engine = await WorkerEngine.load(url, { contextLength: ctx, warmUp: false });
        const body = { messages, max_tokens: 2, temperature: 0, logprobs: true, top_logprobs: 2 };
        const whole = await engine.chat.completions.create(body);
        const chunks = [];
        for await (const c of await engine.chat.completions.create({ ...body, stream: true })) chunks.push(c);
        const err = (p) => p.then(() => null, (e) => ({ name: e.name, field: e.field, typed: e instanceof window.wick.WickError }));
        const refused = await err(engine.chat.completions.create({ messages, top_logprobs: 2 }));
        const kwargsRefused = await err(engine.applyChatTemplate(messages, { kwargs: "x" }));
        // SmolLM2's template reads no extra variable: kwargs leave its prompt as it was.
        const same = (await engine.applyChatTemplate(messages, { kwargs: { enable_thinking: false } })) === (await engine.applyChatTemplate(messages));
        await engine.dispose();
        return { whole, chunks, refused, kwargsRefused, same };
      }, { url: modelUrl(), ctx: CTX, messages: chatTemplateCases().cases[0].messages }), "worker chat");
      const lp = r.whole.choices[0].logprobs.content;
      assert.equal(lp.length, 2);
      assert.equal(lp.map((e) => e.token).join(""), r.whole.choices[0].message.content);
      assert.ok(lp.every((e) => e.top_logprobs.length === 2 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob));
      const streamed = r.chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
      assert.deepEqual(streamed, lp, "streamed logprobs equal the whole reply's");
      assert.equal(r.refused?.name, "InvalidRequestError");
      assert.equal(r.refused.field, "top_logprobs");
      assert.ok(r.refused.typed);
      assert.equal(r.kwargsRefused?.name, "InvalidRequestError");
      assert.equal(r.kwargsRefused.field, "chat_template_kwargs");
      assert.ok(r.same);
    } finally {
      await page.close();
    }
  });
});
