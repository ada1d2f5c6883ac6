// chat.completions.create in the shape of OpenAI's API, over an engine's
// encodeChat (the model's chat template) and token stream.

const FINISH = { stop: "stop", length: "length", context_full: "length" };

function completionId() {
  const r = globalThis.crypto?.randomUUID?.() ?? String(Math.random()).slice(2);
  return `chatcmpl-${r.replace(/-/g, "").slice(0, 24)}`;
}

/** Maps OpenAI request fields to generate options. */
export function chatOptions(params) {
  return {
    maxTokens: params.max_completion_tokens ?? params.max_tokens,
    temperature: params.temperature,
    topP: params.top_p,
    topK: params.top_k,
    seed: params.seed,
    signal: params.signal,
  };
}

/** A stream of `chat.completion.chunk` objects; `controller.abort()` stops it. */
export class ChatCompletionStream {
  constructor(start) {
    this.controller = new AbortController();
    this._start = start;
  }
  async *[Symbol.asyncIterator]() {
    yield* this._start(this.controller.signal);
  }
  /** All chunks' content joined. */
  async text() {
    let s = "";
    for await (const c of this) s += c.choices[0]?.delta?.content ?? "";
    return s;
  }
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
 * `engine` provides: promptIds(messages, tools) -> ids, tokens(ids, opts) ->
 * async iterator of { text, tokenId } whose `.result` (after it ends) holds
 * { finishReason, stats, ids }, and modelName().
 */
export function createChat(engine) {
  async function create(params = {}) {
    if (!Array.isArray(params.messages) || params.messages.length === 0) {
      throw new TypeError("chat.completions.create: messages must be a non-empty array");
    }
    const ids = await engine.promptIds(params.messages, params.tools);
    const id = completionId();
    const created = Math.floor(Date.now() / 1000);
    const model = params.model ?? engine.modelName();
    const base = { id, created, model };
    const opts = chatOptions(params);
    if (params.stream) {
      return new ChatCompletionStream(async function* (signal) {
        const run = engine.tokens(ids, { ...opts, signal: anySignal(opts.signal, signal) });
        const chunk = (delta, finish_reason = null) => ({
          ...base,
          object: "chat.completion.chunk",
          choices: [{ index: 0, delta, logprobs: null, finish_reason }],
        });
        yield chunk({ role: "assistant", content: "" });
        for await (const t of run) {
          if (t.text) yield chunk({ content: t.text });
        }
        const r = run.result;
        const last = chunk({}, FINISH[r.finishReason] ?? r.finishReason);
        if (params.stream_options?.include_usage) last.usage = usage(ids, r);
        yield last;
      });
    }
    const run = engine.tokens(ids, opts);
    let content = "";
    for await (const t of run) content += t.text;
    const r = run.result;
    return {
      ...base,
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content },
          logprobs: null,
          finish_reason: FINISH[r.finishReason] ?? r.finishReason,
        },
      ],
      usage: usage(ids, r),
    };
  }
  return { completions: { create } };
}

function usage(ids, r) {
  const completion = r.ids.length;
  return {
    prompt_tokens: ids.length,
    completion_tokens: completion,
    total_tokens: ids.length + completion,
  };
}
