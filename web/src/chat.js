// chat.completions.create in the shape of OpenAI's API, over an engine's
// chat template and token stream. The request's checks (every field honoured
// or refused by name: UnsupportedFieldError, InvalidRequestError) and the
// reply's objects (chat.completion, chat.completion.chunk) are the engine's
// (crates/engine/src/completion/openai, through chatRequest and
// WasmChatReply); this file adapts them to JavaScript: the abort signals,
// the stream's async iteration, the engine's calls.

import { chatRequest, WasmChatReply } from "../pkg/wick_web.js";
import { call } from "./runtime.js";

/** A stream of `chat.completion.chunk` objects; `controller.abort()` stops it. */
export class ChatCompletionStream {
  constructor(start) {
    this.controller = new AbortController();
    this._start = start;
  }
  async *[Symbol.asyncIterator]() {
    yield* this._start(this.controller.signal);
  }
  /** All chunks' content joined (not the reasoning). */
  async text() {
    let s = "";
    for await (const c of this) s += c.choices[0]?.delta?.content ?? "";
    return s;
  }
}

/**
 * The request as the engine reads it (JSON's values): fields set to
 * `undefined` left out, as JSON.stringify leaves them; a number that is not
 * finite kept as its name, so the engine refuses it by field rather than
 * reading JSON's null (absent) in its place.
 */
function plain(v) {
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    const out = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = plain(x);
    return out;
  }
  return v;
}

/** A signal that aborts when either does. */
export function anySignal(a, b) {
  if (!a) return b;
  if (!b) return a;
  if (AbortSignal.any) return AbortSignal.any([a, b]);
  const ac = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) ac.abort(s.reason);
    else s.addEventListener("abort", () => ac.abort(s.reason), { once: true });
  }
  return ac.signal;
}

/**
 * `engine` provides: checkTools(tools, toolChoice) (throws on a bad pair),
 * promptIds(messages, tools, kwargs) -> ids, tokens(ids, opts) -> async
 * iterator of { text, tokenId, reasoning?, toolCalls? } whose `.result`
 * (after it ends) holds { finishReason, stats, ids, logprobs? },
 * modelName() and contextLength().
 * `create(body, { signal })` as the openai SDK calls it.
 */
export function createChat(engine) {
  async function create(params = {}, requestOptions = {}) {
    // Checked before the template runs, so a bad field fails fast.
    const req = call(() => chatRequest(plain(params)));
    engine.checkTools(req.requestTools, req.toolChoice);
    const ids = await engine.promptIds(req.messages, req.tools ?? undefined, req.kwargs ?? undefined);
    const left = engine.contextLength() - ids.length;
    const opts = { ...req.options, maxTokens: Math.max(1, Math.min(req.options.maxTokens ?? left, left)) };
    const signal = requestOptions?.signal;
    // The loaded model answers whatever `model` names (documented). Made
    // where it is freed: a stream never iterated holds none.
    const newReply = () => new WasmChatReply(engine.modelName(), req.stream, opts.logprobs !== null);
    if (req.stream) {
      return new ChatCompletionStream(async function* (own) {
        const reply = newReply();
        try {
          const run = engine.tokens(ids, { ...opts, signal: anySignal(signal, own) });
          yield call(() => reply.opening());
          for await (const t of run) {
            const chunk = call(() => reply.push(t));
            if (chunk) yield chunk;
          }
          yield* call(() => reply.finish(run.result, ids.length, req.includeUsage));
        } finally {
          reply.free();
        }
      });
    }
    const reply = newReply();
    try {
      for (let index = 0; index < req.n; index++) {
        // Choices differ by seed: the given one plus the index, or random.
        const seed = opts.seed === null ? undefined : opts.seed + index;
        const run = engine.tokens(ids, { ...opts, seed, signal });
        for await (const t of run) call(() => reply.push(t));
        call(() => reply.endChoice(run.result));
      }
      return call(() => reply.completion(ids.length));
    } finally {
      reply.free();
    }
  }
  return { completions: { create } };
}
