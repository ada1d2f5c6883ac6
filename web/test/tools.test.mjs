// Tool calls in the browser: chat.completions.create with `tools` and
// `tool_choice` on Qwen2.5 (a Hermes `<tool_call>` template), two tools.
// "required" and a named function decode under the tools' grammar, so the
// call's arguments must validate against its tool's schema (checked here by
// Ajv, an independent validator); "auto" with a greeting gives plain
// content. The "auto" reply is also compared with the native engine's
// (`wick chat --messages --tools --json`, greedy): the same text. (That
// constrained decoding gives the native ids in the browser is checked on
// SmolLM2 in structured.test.mjs; a native run of this 275-token prompt
// costs minutes on lavapipe.)
// The time limits are hang guards, not speed bounds: on a 2-core runner
// whose other core runs the native tests, "required" took 600 s.
//
// run: npm test   (after npm run build)

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Ajv from "ajv";
import { checkBuilt, launch, modelsDir, openTestPage, outDir, repoRoot, startServer, within } from "./harness.mjs";

const log = (s) => console.log(s);
const QWEN = "qwen2.5-coder-0.5b-instruct-awq.gguf";
const CTX = 1024;
const MAX_TOKENS = 40;
let server, base, browser, page;

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 20 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      description: "Add two integers",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"],
        additionalProperties: false,
      },
    },
  },
];
const WEATHER = [{ role: "user", content: "What is the weather like in Paris today?" }];
const HELLO = [{ role: "user", content: "Hi! Who are you?" }];

/** The native engine's greedy chat.completion for the same request. */
function nativeChat(messages, choice, maxTokens) {
  const dir = path.join(outDir, "tools");
  mkdirSync(dir, { recursive: true });
  const m = path.join(dir, "messages.json");
  const t = path.join(dir, "tools.json");
  writeFileSync(m, JSON.stringify(messages));
  writeFileSync(t, JSON.stringify(TOOLS));
  const runtime = process.env.XDG_RUNTIME_DIR || path.join("/tmp", `wick-runtime-${process.getuid()}`);
  mkdirSync(runtime, { recursive: true, mode: 0o700 });
  const env = { ...process.env, WGPU_BACKEND: process.env.WGPU_BACKEND || "vulkan", XDG_RUNTIME_DIR: runtime };
  const args = ["chat", "--model", path.join(modelsDir, QWEN), "--messages", m, "--tools", t,
    "--tool-choice", choice, "--max-tokens", String(maxTokens), "--ctx-len", String(CTX), "--json", "--no-warmup"];
  const out = execFileSync(path.join(repoRoot, "target/release/wick"), args, { cwd: repoRoot, env, encoding: "utf8" });
  return JSON.parse(out.slice(out.indexOf("{")));
}

/** Each call names a tool and its arguments validate against that tool's parameters. */
function assertValidCalls(calls, wantName) {
  assert.ok(Array.isArray(calls) && calls.length > 0, JSON.stringify(calls));
  const ajv = new Ajv({ strict: true });
  for (const call of calls) {
    assert.match(call.id, /^call_/);
    assert.equal(call.type, "function");
    if (wantName) assert.equal(call.function.name, wantName);
    const tool = TOOLS.find((t) => t.function.name === call.function.name);
    assert.ok(tool, `${call.function.name} is not a tool`);
    assert.equal(typeof call.function.arguments, "string");
    const args = JSON.parse(call.function.arguments);
    const valid = ajv.validate(tool.function.parameters, args);
    assert.ok(valid, `${call.function.arguments}: ${ajv.errorsText()}`);
  }
}

before(async () => {
  checkBuilt();
  const model = path.join(modelsDir, QWEN);
  if (!existsSync(model)) throw new Error(`${model} is missing: run scripts/fetch-models.sh qwen2`);
  ({ server, url: base } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
  await within(400_000, page.evaluate(async ([url, ctx]) => {
    window.engine = await window.wick.Engine.load(url, { contextLength: ctx, warmUp: false });
  }, [`/models/${QWEN}`, CTX]), "load Qwen2.5");
});

after(async () => {
  await page?.evaluate(() => window.engine?.dispose()).catch(() => {});
  await browser?.close();
  server?.close();
});

describe("tool calls (Qwen2.5)", () => {
  // First, as it runs nothing: every refusal happens before a prefill.
  test("bad tools and tool_choice are refused by field, before anything runs", { timeout: 120_000 }, async () => {
    const r = await page.evaluate(async ([messages, tools]) => {
      const typed = (p) => p.then(() => null, (e) => ({ name: e.name, field: e.field, message: e.message }));
      const create = (body) => typed(window.engine.chat.completions.create({ messages, max_tokens: 4, temperature: 0, ...body }));
      return {
        requiredNoTools: await create({ tool_choice: "required" }),
        unknownName: await create({ tools, tool_choice: { type: "function", function: { name: "nope" } } }),
        badChoice: await create({ tools, tool_choice: "sometimes" }),
        duplicate: await create({ tools: [tools[0], tools[0]] }),
        withFormat: await create({ tools, tool_choice: "required", response_format: { type: "json_object" } }),
        withLogprobs: await create({ tools, tool_choice: "required", logprobs: true }),
        streamed: await typed((async () => {
          for await (const _ of await window.engine.chat.completions.create({ messages, tools, tool_choice: "sometimes", stream: true })) {
            // never reached: create() itself throws
          }
        })()),
      };
    }, [WEATHER, TOOLS]);
    log(`refusals: ${JSON.stringify(r)}`);
    for (const [what, field] of [["requiredNoTools", "tool_choice"], ["unknownName", "tool_choice"], ["badChoice", "tool_choice"],
      ["duplicate", "tools"], ["withFormat", "tool_choice"], ["streamed", "tool_choice"]]) {
      assert.equal(r[what]?.name, "InvalidRequestError", `${what}: ${JSON.stringify(r[what])}`);
      assert.equal(r[what].field, field, what);
    }
    assert.match(r.unknownName.message, /nope/);
    assert.match(r.duplicate.message, /get_weather/);
    assert.equal(r.withLogprobs?.name, "UnsupportedFieldError", JSON.stringify(r.withLogprobs));
    assert.equal(r.withLogprobs.field, "logprobs");
  });

  test("tool_choice required: a parsed call whose arguments validate", { timeout: 1_600_000 }, async () => {
    const r = await within(1_500_000, page.evaluate(async ([messages, tools, max]) => (
      window.engine.chat.completions.create({ messages, tools, tool_choice: "required", max_tokens: max, temperature: 0 })
    ), [WEATHER, TOOLS, MAX_TOKENS]), "required");
    const choice = r.choices[0];
    log(`required: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    assertValidCalls(choice.message.tool_calls);
  });

  test("a named function, streamed: OpenAI's tool-call deltas add up to one valid call of it", { timeout: 1_600_000 }, async () => {
    const r = await within(1_500_000, page.evaluate(async ([messages, tools, max]) => {
      const chunks = [];
      const stream = await window.engine.chat.completions.create({
        messages, tools, tool_choice: { type: "function", function: { name: "add" } }, max_tokens: max, temperature: 0, stream: true,
      });
      for await (const c of stream) chunks.push(c);
      // The tools prompt of the test before: its K/V were kept.
      return { chunks, cached: window.engine.lastResult.stats.cachedTokens };
    }, [WEATHER, TOOLS, MAX_TOKENS]), "named");
    const deltas = r.chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    log(`named add: ${JSON.stringify(deltas)}`);
    assert.ok(deltas.length > 1, "the arguments stream in pieces");
    const first = deltas[0];
    assert.equal(first.index, 0);
    assert.match(first.id, /^call_/);
    assert.equal(first.type, "function");
    assert.equal(first.function.name, "add");
    assert.ok(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined && d.function.name === undefined),
      "id and name on the call's first delta only");
    const calls = [];
    for (const d of deltas) {
      if (d.index === calls.length) calls.push({ id: d.id, type: d.type, function: { name: d.function.name, arguments: "" } });
      calls[d.index].function.arguments += d.function.arguments;
    }
    assertValidCalls(calls, "add");
    assert.equal(calls.length, 1);
    assert.ok(r.chunks.every((c) => !c.choices[0]?.delta?.content), "no content in a reply of calls");
    assert.equal(r.chunks.at(-1).choices[0].finish_reason, "tool_calls");
    assert.ok(r.cached > 0, `cached tokens: ${r.cached}`);
  });

  test("tool_choice auto and a question no tool answers: plain content", { timeout: 1_100_000 }, async () => {
    const max = 8;
    const r = await within(1_000_000, page.evaluate(async ([messages, tools, max]) => (
      window.engine.chat.completions.create({ messages, tools, tool_choice: "auto", max_tokens: max, temperature: 0 })
    ), [HELLO, TOOLS, max]), "auto");
    const choice = r.choices[0];
    log(`auto: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.message.tool_calls, undefined);
    assert.equal(typeof choice.message.content, "string");
    assert.ok(choice.message.content.length > 0);
    assert.equal(choice.finish_reason, "length");
    const native = nativeChat(HELLO, "auto", max).choices[0];
    assert.equal(choice.message.content, native.message.content);
  });
});
