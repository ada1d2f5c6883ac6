// Helpers of the chat tests in browser.test.mjs: the native engine's
// logprobs, their comparison, and a GGUF with another chat template.

import assert from "node:assert/strict";
import { closeSync, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import path from "node:path";
import { MODEL, modelsDir, nativeJson } from "./harness.mjs";

/** The native engine's `generate --ids ... --logprobs K --json` (greedy). */
export function nativeLogprobs(ids, maxTokens, k, ctx) {
  return nativeJson(["generate", "--model", path.join(modelsDir, MODEL), "--ids", ids.join(","),
    "--max-tokens", String(maxTokens), "--ctx-len", String(ctx), "--logprobs", String(k), "--kv-cache", "f32"]);
}

/**
 * OpenAI-shaped logprobs entries against reference ones: the same tokens and
 * alternatives in the same order, values within `tol`. Returns the largest
 * difference.
 */
export function assertLogprobs(got, want, what, tol) {
  let worst = 0;
  const close = (a, b, where) => {
    worst = Math.max(worst, Math.abs(a - b));
    assert.ok(Math.abs(a - b) <= tol, `${what} ${where}: ${a} vs ${b} (tolerance ${tol})`);
  };
  assert.equal(got.length, want.length, `${what}: one entry per generated token`);
  got.forEach((g, i) => {
    assert.deepEqual(g.bytes, want[i].bytes, `${what} token ${i}`);
    assert.equal(g.token, want[i].token);
    close(g.logprob, want[i].logprob, `token ${i}`);
    assert.deepEqual(g.top_logprobs.map((t) => t.bytes), want[i].top_logprobs.map((t) => t.bytes), `${what} top tokens ${i}`);
    g.top_logprobs.forEach((t, j) => close(t.logprob, want[i].top_logprobs[j].logprob, `top ${j} of token ${i}`));
  });
  return worst;
}

/**
 * A GGUF header's metadata, walked from the start of `buf`: calls
 * `visit({ key, type, start, value, end })` for each entry (where the entry,
 * its value and the next entry start), then returns { at, alignment,
 * tensors }: where the tensor infos begin, the file's alignment and its
 * tensor count. Throws a RangeError if `buf` ends inside the metadata.
 */
function walkMetadata(buf, visit) {
  let at = 0;
  const u32 = () => ((at += 4), buf.readUInt32LE(at - 4));
  const u64 = () => ((at += 8), Number(buf.readBigUInt64LE(at - 8)));
  const str = () => {
    const n = u64();
    at += n;
    if (at > buf.length) throw new RangeError("the buffer ends inside the GGUF metadata");
    return buf.toString("utf8", at - n, at);
  };
  const SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skip = (type) => {
    if (type === 8) str();
    else if (type === 9) {
      const t = u32();
      const n = u64();
      if (t in SIZE) at += n * SIZE[t];
      else for (let i = 0; i < n; i++) skip(t);
    } else at += SIZE[type];
  };
  assert.equal(buf.toString("latin1", 0, 4), "GGUF");
  at = 8;
  const tensors = u64();
  const kvs = u64();
  let alignment = 32;
  for (let i = 0; i < kvs; i++) {
    const start = at;
    const key = str();
    const type = u32();
    const value = at;
    if (key === "general.alignment") alignment = buf.readUInt32LE(at);
    skip(type);
    if (at > buf.length) throw new RangeError("the buffer ends inside the GGUF metadata");
    visit({ key, type, start, value, end: at });
  }
  return { at, alignment, tensors };
}

/** The `tokenizer.chat_template` of a GGUF file, read from its header alone. */
export function chatTemplateOf(file) {
  const fd = openSync(file, "r");
  try {
    // Qwen2.5's header (151,936 tokens and their merges) is about 7 MB.
    const buf = Buffer.alloc(Math.min(fstatSync(fd).size, 32 << 20));
    readSync(fd, buf, 0, buf.length, 0);
    let template = null;
    walkMetadata(buf, ({ key, type, value, end }) => {
      if (key === "tokenizer.chat_template" && type === 8) template = buf.toString("utf8", value + 8, end);
    });
    assert.ok(template, `${file} has a chat template`);
    return template;
  } finally {
    closeSync(fd);
  }
}

/**
 * `file` (a GGUF) with its `tokenizer.chat_template` replaced by `template`:
 * the header is parsed up to the tensor data, which is copied as it is (its
 * tensors' offsets count from the data's start, re-aligned after the header).
 */
export function withChatTemplate(file, template) {
  const buf = readFileSync(file);
  let span = null;
  const header = walkMetadata(buf, ({ key, start, end }) => {
    if (key === "tokenizer.chat_template") span = [start, end];
  });
  assert.ok(span, `${file} has a chat template`);
  let at = header.at;
  for (let i = 0; i < header.tensors; i++) {
    at += 8 + Number(buf.readBigUInt64LE(at)); // the name
    const dims = buf.readUInt32LE(at);
    at += 4 + 8 * dims + 12; // the dims (u64 each), type (u32), offset (u64)
  }
  const alignment = header.alignment;
  const data = Math.ceil(at / alignment) * alignment;
  const key = Buffer.from("tokenizer.chat_template");
  const value = Buffer.from(template);
  const kv = Buffer.alloc(8 + key.length + 4 + 8 + value.length);
  let o = kv.writeBigUInt64LE(BigInt(key.length), 0);
  o += key.copy(kv, o);
  o = kv.writeUInt32LE(8, o);
  o = kv.writeBigUInt64LE(BigInt(value.length), o);
  value.copy(kv, o);
  const head = Buffer.concat([buf.subarray(0, span[0]), kv, buf.subarray(span[1], at)]);
  const pad = Buffer.alloc((alignment - (head.length % alignment)) % alignment);
  return Buffer.concat([head, pad, buf.subarray(data)]);
}
