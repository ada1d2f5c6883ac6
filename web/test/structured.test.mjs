// Structured output in the browser: generate({ jsonSchema | regex }) and
// chat.completions.create({ response_format }) decode under llguidance's
// mask, as `wick generate --json-schema / --regex` does natively. Greedy
// ids must equal the native engine's under the same grammar (the native
// schema suite, tests/tests/end_to_end/constrained_json.rs, validates those outputs
// with a JSON-schema validator); here the text must also parse and obey
// the schema's constraints we can check by hand.
//
// run: npm test   (after npm run build)

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  checkBuilt, launch, MODEL, modelsDir, openTestPage, outDir, repoRoot, startServer, within,
} from "./harness.mjs";

const log = (s) => console.log(s);
const CTX = 256;
const MAX_TOKENS = 48;
let server, base, browser, page;

/** Native `wick generate` under a grammar: { ids, text, finish_reason }. */
function nativeConstrained(prompt, flag, value) {
  const runtime = process.env.XDG_RUNTIME_DIR || path.join("/tmp", `wick-runtime-${process.getuid()}`);
  mkdirSync(runtime, { recursive: true, mode: 0o700 });
  const env = { ...process.env, WGPU_BACKEND: process.env.WGPU_BACKEND || "vulkan", XDG_RUNTIME_DIR: runtime };
  const args = ["generate", "--model", path.join(modelsDir, MODEL), "--prompt", prompt,
    "--max-tokens", String(MAX_TOKENS), "--ctx-len", String(CTX), "--json", "--no-warmup", flag, value];
  const out = execFileSync(path.join(repoRoot, "target/release/wick"), args, { cwd: repoRoot, env, encoding: "utf8" });
  return JSON.parse(out.slice(out.indexOf("{")));
}

const CASES = [
  {
    what: "an enum",
    prompt: "Is the sky blue? Answer in JSON:",
    schema: { type: "object", properties: { answer: { enum: ["yes", "no"] } }, required: ["answer"], additionalProperties: false },
    check: (v) => assert.ok(["yes", "no"].includes(v.answer), JSON.stringify(v)),
  },
  {
    what: "a bounded integer and a short string",
    prompt: "A person as JSON:",
    schema: {
      type: "object",
      properties: { name: { type: "string", maxLength: 10 }, age: { type: "integer", minimum: 0, maximum: 120 } },
      required: ["name", "age"],
      additionalProperties: false,
    },
    check: (v) => {
      assert.equal(typeof v.name, "string");
      assert.ok(v.name.length <= 10, v.name);
      assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, String(v.age));
    },
  },
  {
    what: "an array with 1 to 3 items",
    prompt: "Three small prime numbers as a JSON array:",
    schema: { type: "array", items: { type: "integer", minimum: 0, maximum: 99 }, minItems: 1, maxItems: 3 },
    check: (v) => {
      assert.ok(Array.isArray(v) && v.length >= 1 && v.length <= 3, JSON.stringify(v));
      assert.ok(v.every((n) => Number.isInteger(n) && n >= 0 && n <= 99), JSON.stringify(v));
    },
  },
];

before(async () => {
  checkBuilt();
  ({ server, url: base } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
  await within(240_000, page.evaluate(async (url) => {
    window.engine = await window.wick.Engine.load(url, { contextLength: 256, warmUp: false });
  }, `/models/${MODEL}`), "load SmolLM2");
});

after(async () => {
  await page?.evaluate(() => window.engine?.dispose()).catch(() => {});
  await browser?.close();
  server?.close();
});

describe("structured output", () => {
  test("generate({ jsonSchema }) gives the native ids, and the text obeys the schema", { timeout: 600_000 }, async () => {
    const dir = path.join(outDir, "structured");
    mkdirSync(dir, { recursive: true });
    for (const c of CASES) {
      const file = path.join(dir, `${c.what.replaceAll(" ", "_")}.json`);
      writeFileSync(file, JSON.stringify(c.schema));
      const want = nativeConstrained(c.prompt, "--json-schema", file);
      const got = await within(240_000, page.evaluate(async ([prompt, schema, max]) => {
        const ids = [];
        let text = "";
        const run = window.engine.generate(prompt, { jsonSchema: schema, temperature: 0, maxTokens: max });
        for await (const ch of run) {
          if (ch.tokenId !== null) ids.push(ch.tokenId);
          text += ch.text;
        }
        return { ids, text, finish: run.result.finishReason };
      }, [c.prompt, c.schema, MAX_TOKENS]), c.what);
      log(`${c.what}: ${JSON.stringify(got.text)} (${got.finish})`);
      assert.equal(want.finish_reason, "stop", `native ${c.what}: ${want.text}`);
      assert.deepEqual(got.ids, want.ids, `${c.what}: the browser's ids are not the native engine's`);
      assert.equal(got.finish, "stop");
      c.check(JSON.parse(got.text));
    }
  });

  test("generate({ regex }) matches the pattern and the native ids", { timeout: 300_000 }, async () => {
    const prompt = "The year the Berlin Wall fell:";
    const regex = "(19|20)[0-9]{2}";
    const want = nativeConstrained(prompt, "--regex", regex);
    const got = await within(240_000, page.evaluate(async ([prompt, regex]) => {
      const ids = [];
      let text = "";
      for await (const ch of window.engine.generate(prompt, { regex, temperature: 0, maxTokens: 8 })) {
        if (ch.tokenId !== null) ids.push(ch.tokenId);
        text += ch.text;
      }
      return { ids, text };
    }, [prompt, regex]), "regex");
    assert.match(got.text, /^(19|20)[0-9]{2}$/);
    assert.deepEqual(got.ids, want.ids.slice(0, got.ids.length));
    assert.equal(got.ids.length, want.ids.length);
  });

  test("chat.completions.create: response_format json_schema and json_object; bad formats refused", { timeout: 400_000 }, async () => {
    const r = await within(360_000, page.evaluate(async ([schema, max]) => {
      const engine = window.engine;
      const messages = [{ role: "user", content: "Is water wet? Reply in JSON." }];
      const typed = (p) => p.then(() => null, (e) => ({ name: e.name, field: e.field, message: e.message }));
      const bySchema = await engine.chat.completions.create({
        messages, max_tokens: max, temperature: 0,
        response_format: { type: "json_schema", json_schema: { name: "answer", schema, strict: true } },
      });
      const chunks = [];
      const stream = await engine.chat.completions.create({
        messages, max_tokens: max, temperature: 0, stream: true,
        response_format: { type: "json_schema", json_schema: { name: "answer", schema } },
      });
      for await (const c of stream) chunks.push(c.choices[0]?.delta?.content ?? "");
      const anyObject = await engine.chat.completions.create({
        messages, max_tokens: max, temperature: 0, response_format: { type: "json_object" },
      });
      const errors = {
        type: await typed(engine.chat.completions.create({ messages, response_format: { type: "xml" } })),
        noName: await typed(engine.chat.completions.create({ messages, response_format: { type: "json_schema", json_schema: { schema } } })),
        badSchema: await typed(engine.chat.completions.create({
          messages, max_tokens: 4, response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/nowhere" } } },
        })),
        withLogprobs: await typed(engine.chat.completions.create({
          messages, max_tokens: 4, logprobs: true, response_format: { type: "json_object" },
        })),
        twoGrammars: await typed((async () => {
          for await (const _ of engine.generate("x", { regex: "a", grammar: "start: \"a\"" })) { /* refused first */ }
        })()),
      };
      return { bySchema, streamed: chunks.join(""), anyObject, errors };
    }, [CASES[0].schema, MAX_TOKENS]), "chat with response_format");
    const content = r.bySchema.choices[0].message.content;
    log(`json_schema: ${content}; json_object: ${r.anyObject.choices[0].message.content}`);
    assert.equal(r.bySchema.choices[0].finish_reason, "stop");
    CASES[0].check(JSON.parse(content));
    assert.equal(r.streamed, content, "streamed content equals the whole reply");
    // json_object allows any object, so a small model may still be writing
    // one at max_tokens: then it is cut short, but still an object's start.
    const any = r.anyObject.choices[0];
    assert.match(any.message.content, /^\{/);
    if (any.finish_reason === "stop") {
      const obj = JSON.parse(any.message.content);
      assert.ok(obj !== null && typeof obj === "object" && !Array.isArray(obj), "json_object gives an object");
    } else {
      assert.equal(any.finish_reason, "length");
      assert.equal(r.anyObject.usage.completion_tokens, MAX_TOKENS);
    }
    assert.deepEqual([r.errors.type?.name, r.errors.type?.field], ["UnsupportedFieldError", "response_format.type"]);
    assert.deepEqual([r.errors.noName?.name, r.errors.noName?.field], ["InvalidRequestError", "response_format.json_schema.name"]);
    assert.equal(r.errors.badSchema?.name, "InvalidRequestError", JSON.stringify(r.errors.badSchema));
    assert.equal(r.errors.badSchema.field, "grammar");
    assert.match(r.errors.badSchema.message, /does not compile/);
    assert.deepEqual([r.errors.withLogprobs?.name, r.errors.withLogprobs?.field], ["UnsupportedFieldError", "logprobs"]);
    assert.deepEqual([r.errors.twoGrammars?.name, r.errors.twoGrammars?.field], ["InvalidRequestError", "grammar"]);
  });
});
