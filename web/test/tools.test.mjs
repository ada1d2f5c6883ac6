// Tool calls in the browser: chat.completions.create with `tools` and
// `tool_choice`, two tools, under Qwen2.5's own chat template (a Hermes
// `<tool_call>` format, read from the Qwen2.5 GGUF) on a copy of the tiny
// qwen3moe fixture (random weights, the Qwen2 tokenizer). What this file
// checks is the page's plumbing: requests refused by field, the grammar's
// calls parsed into OpenAI's `tool_calls` (their arguments validated by Ajv,
// an independent validator), the streamed deltas, the cached tools prefix,
// and the same reply as the native engine (`wick chat --messages --tools
// --json`, greedy) on the same file. A real model's calls (Qwen2.5 0.5B,
// the same prompts) are checked natively: tests/tests/end_to_end/tool_calls.rs
// and crates/cli/tests/commands/chat_tools.rs. On SwiftShader a real model's
// 275-token tools prompt took minutes to prefill; the tiny model's takes
// seconds, so the prompt is the same.
//
// run: npm test   (after npm run build)

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Ajv from "ajv";
import { checkBuilt, launch, modelsDir, openTestPage, outDir, repoRoot, startServer, within } from "./harness.mjs";
import { chatTemplateOf, withChatTemplate } from "./chat-helpers.mjs";

const log = (s) => console.log(s);
const QWEN = "qwen2.5-coder-0.5b-instruct-awq.gguf";
const TINY = path.join(repoRoot, "tests/fixtures/models/tiny-qwen3moe.q8_0.gguf");
const FIXTURE = "tiny-qwen3moe-tools.gguf"; // in test-output/, served at /test-output/
const CTX = 1024;
const MAX_TOKENS = 64;
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
        // Bounded, so that a random model's digits end within MAX_TOKENS.
        properties: { a: { type: "integer", minimum: -999, maximum: 999 }, b: { type: "integer", minimum: -999, maximum: 999 } },
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
  const args = ["chat", "--model", path.join(outDir, FIXTURE), "--messages", m, "--tools", t,
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
  const qwen = path.join(modelsDir, QWEN);
  if (!existsSync(qwen)) throw new Error(`${qwen} is missing: run scripts/fetch-models.sh qwen2`);
  writeFileSync(path.join(outDir, FIXTURE), withChatTemplate(TINY, chatTemplateOf(qwen)));
  ({ server, url: base } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
  await within(240_000, page.evaluate(async ([url, ctx]) => {
    window.engine = await window.wick.Engine.load(url, { contextLength: ctx, warmUp: false });
  }, [`/test-output/${FIXTURE}`, CTX]), "load the tools fixture");
});

after(async () => {
  await page?.evaluate(() => window.engine?.dispose()).catch(() => {});
  await browser?.close();
  server?.close();
});

describe("tool calls (Qwen2.5's template)", () => {
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

  test("tool_choice required: a parsed call whose arguments validate", { timeout: 300_000 }, async () => {
    const r = await within(280_000, page.evaluate(async ([messages, tools, max]) => (
      window.engine.chat.completions.create({ messages, tools, tool_choice: "required", max_tokens: max, temperature: 0 })
    ), [WEATHER, TOOLS, MAX_TOKENS]), "required");
    const choice = r.choices[0];
    log(`required: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    assertValidCalls(choice.message.tool_calls);
  });

  test("a named function, streamed: OpenAI's tool-call deltas add up to one valid call of it", { timeout: 300_000 }, async () => {
    const r = await within(280_000, page.evaluate(async ([messages, tools, max]) => {
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

  test("tool_choice auto: the native engine's reply, content or calls", { timeout: 300_000 }, async () => {
    const max = 8;
    const r = await within(280_000, page.evaluate(async ([messages, tools, max]) => (
      window.engine.chat.completions.create({ messages, tools, tool_choice: "auto", max_tokens: max, temperature: 0 })
    ), [HELLO, TOOLS, max]), "auto");
    const choice = r.choices[0];
    log(`auto: ${JSON.stringify(choice.message)}`);
    const native = nativeChat(HELLO, "auto", max).choices[0];
    log(`auto, native: ${JSON.stringify(native.message)}`);
    // Whatever the random model wrote, the page parsed it as the CLI did:
    // the same content, the same calls (their ids are random), the same end.
    assert.equal(choice.message.content, native.message.content);
    const calls = (m) => (m.tool_calls ?? []).map((c) => c.function);
    assert.deepEqual(calls(choice.message), calls(native.message));
    assert.equal(choice.finish_reason, native.finish_reason);
  });
});
