// chat.completions.create in the shape of OpenAI's API, over an engine's
// encodeChat (the model's chat template) and token stream. Every request
// field is either honoured or refused by name (UnsupportedFieldError); values
// out of OpenAI's ranges are refused the same way (InvalidRequestError).

import { InvalidRequestError, UnsupportedFieldError } from "./errors.js";

const FINISH = { stop: "stop", length: "length", context_full: "length" };

/** What the response's `system_fingerprint` carries: the engine and its version. */
let fingerprint = "wick";
export function setFingerprint(version) {
  fingerprint = `wick-${version}`;
}

function completionId() {
  const r = globalThis.crypto?.randomUUID?.() ?? String(Math.random()).slice(2);
  return `chatcmpl-${r.replace(/-/g, "").slice(0, 24)}`;
}

// The fields create() honours. `user` is accepted and has no effect: OpenAI
// uses it for abuse monitoring, which a local engine has no use for.
// Extensions beyond OpenAI's fields (as llama.cpp's and vLLM's servers name
// them): top_k, min_p, repetition_penalty, chat_template_kwargs.
const FIELDS = new Set([
  "messages", "model", "stream", "stream_options", "max_tokens", "max_completion_tokens",
  "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
  "presence_penalty", "logit_bias", "seed", "n", "response_format", "tools", "tool_choice", "user",
  "stop", "logprobs", "top_logprobs", "chat_template_kwargs",
]);

/** OpenAI's limit on `top_logprobs`. */
const MAX_TOP_LOGPROBS = 20;

function number(params, field, lo, hi) {
  const v = params[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < lo || v > hi) {
    throw new InvalidRequestError(field, `must be a number in [${lo}, ${hi}], got ${JSON.stringify(v)}`);
  }
  return v;
}

export function integer(params, field, lo) {
  const v = params[field];
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v < lo) {
    throw new InvalidRequestError(field, `must be an integer >= ${lo}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** OpenAI's `logit_bias` ({ "token id": bias in [-100, 100] }) as [id, bias] pairs. */
function logitBias(bias) {
  if (bias === undefined || bias === null) return [];
  if (typeof bias !== "object" || Array.isArray(bias)) {
    throw new InvalidRequestError("logit_bias", "must be an object of token id -> bias");
  }
  return Object.entries(bias).map(([k, v]) => {
    const id = Number(k);
    if (!Number.isInteger(id) || id < 0) throw new InvalidRequestError("logit_bias", `key ${JSON.stringify(k)} is not a token id`);
    if (typeof v !== "number" || !(v >= -100 && v <= 100)) {
      throw new InvalidRequestError("logit_bias", `bias of ${k} must be in [-100, 100]`);
    }
    return [id, v];
  });
}

/** OpenAI's `stop`: a string or up to 4 strings (the engine refuses more, or an empty one). */
function stopStrings(stop) {
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === "string" ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((s) => typeof s === "string")) {
    throw new InvalidRequestError("stop", "must be a string or an array of strings");
  }
  if (list.length > 4) throw new InvalidRequestError("stop", `at most 4 strings, got ${list.length}`);
  if (list.some((s) => s.length === 0)) throw new InvalidRequestError("stop", "an empty string never ends anything");
  return list;
}

/**
 * `logprobs` / `top_logprobs` as OpenAI checks them: the number of
 * alternatives per token when log-probabilities are asked for, else undefined.
 */
function logprobsOption(params) {
  const { logprobs, top_logprobs: top } = params;
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== "boolean") {
    throw new InvalidRequestError("logprobs", `must be a boolean, got ${JSON.stringify(logprobs)}`);
  }
  if (top === undefined || top === null) return logprobs ? 0 : undefined;
  if (!Number.isInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS) {
    throw new InvalidRequestError("top_logprobs", `must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${JSON.stringify(top)}`);
  }
  if (!logprobs) throw new InvalidRequestError("top_logprobs", "requires logprobs: true");
  return top;
}

/** `chat_template_kwargs`: an object of extra template variables, or undefined. */
export function templateKwargs(kwargs) {
  if (kwargs === undefined || kwargs === null) return undefined;
  if (typeof kwargs !== "object" || Array.isArray(kwargs)) {
    throw new InvalidRequestError("chat_template_kwargs", "must be an object of template variables");
  }
  return kwargs;
}

/**
 * OpenAI's `tools`, handed to the template as they are: Hugging Face's
 * templates take the same list of `{ type: "function", function: { name,
 * description, parameters } }` (apply_chat_template writes Python functions
 * into that shape), so only the shape is checked.
 */
function toolList(tools) {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw new InvalidRequestError("tools", "must be an array");
  tools.forEach((t, i) => {
    if (t?.type !== "function") {
      throw new UnsupportedFieldError(`tools[${i}].type`, `${JSON.stringify(t?.type)} tools are not supported ("function" only)`);
    }
    if (typeof t.function?.name !== "string") {
      throw new InvalidRequestError(`tools[${i}].function.name`, "must be a string");
    }
  });
  return tools;
}

/**
 * Messages as the template takes them: content given as an array of text
 * parts is joined into one string (other part types are refused).
 */
export function templateMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new InvalidRequestError("messages", "must be a non-empty array");
  }
  return messages.map((m, i) => {
    if (!m || typeof m !== "object") throw new InvalidRequestError(`messages[${i}]`, "must be an object");
    if (!Array.isArray(m.content)) return m;
    const text = m.content
      .map((part, j) => {
        if (part?.type !== "text" || typeof part.text !== "string") {
          throw new UnsupportedFieldError(`messages[${i}].content[${j}].type`, `${JSON.stringify(part?.type)} parts are not supported (text only)`);
        }
        return part.text;
      })
      .join("");
    return { ...m, content: text };
  });
}

/** Refuses, by name, every field of `params` outside `fields` (embeddings.create shares it). */
export function checkFields(params, fields) {
  for (const k of Object.keys(params)) {
    if (k === "signal") {
      throw new UnsupportedFieldError("signal", "pass it as create(body, { signal }), as the openai SDK does");
    }
    if (!fields.has(k) && params[k] !== undefined) {
      throw new UnsupportedFieldError(k, "not supported by wick");
    }
  }
}

/**
 * Checks a request and maps it to generate options; refuses what it does not
 * honour. `maxTokens` is the one asked for, if any (`create` caps it to the
 * context the prompt leaves, which is also its default).
 */
export function chatOptions(params) {
  checkFields(params, FIELDS);
  const jsonSchema = responseSchema(params.response_format);
  const options = params.stream_options;
  if (options !== undefined && options !== null) {
    for (const k of Object.keys(options)) {
      if (k !== "include_usage") throw new UnsupportedFieldError(`stream_options.${k}`, "not supported by wick");
    }
    if (!params.stream) throw new InvalidRequestError("stream_options", "is only allowed with stream: true");
  }
  const n = integer(params, "n", 1) ?? 1;
  if (n > 1 && params.stream) throw new UnsupportedFieldError("n", "n > 1 is supported without stream only");
  const max = integer(params, "max_completion_tokens", 1) ?? integer(params, "max_tokens", 1);
  toolList(params.tools);
  templateKwargs(params.chat_template_kwargs);
  return {
    n,
    // The engine computes them once the generation ends (see logprobsOf).
    logprobs: logprobsOption(params),
    // A template with `<think>` blocks: their text goes to reasoning_content.
    reasoning: true,
    maxTokens: max,
    // OpenAI's defaults: temperature 1 and top_p 1 (sampling, no cut).
    temperature: number(params, "temperature", 0, 2) ?? 1,
    topP: number(params, "top_p", 0, 1) ?? 1,
    topK: integer(params, "top_k", 0) ?? 0,
    minP: number(params, "min_p", 0, 1) ?? 0,
    repetitionPenalty: number(params, "repetition_penalty", 0, 10) ?? 1,
    frequencyPenalty: number(params, "frequency_penalty", -2, 2) ?? 0,
    presencePenalty: number(params, "presence_penalty", -2, 2) ?? 0,
    logitBias: logitBias(params.logit_bias),
    stop: stopStrings(params.stop),
    seed: integer(params, "seed", 0),
    jsonSchema,
    // Checked by the engine against the template (engine.checkTools).
    tools: params.tool_choice === "none" ? undefined : params.tools ?? undefined,
    toolChoice: params.tool_choice ?? undefined,
  };
}

/**
 * The JSON schema `response_format` asks for (decoding constrained to it),
 * or undefined for free text: `{ type: "json_schema", json_schema: { name,
 * schema, strict } }`, or `{ type: "json_object" }` (any JSON object).
 */
function responseSchema(format) {
  if (format === undefined || format === null || format.type === "text") return undefined;
  if (typeof format !== "object") throw new InvalidRequestError("response_format", "must be an object");
  if (format.type === "json_object") return { type: "object" };
  if (format.type !== "json_schema") {
    throw new UnsupportedFieldError("response_format.type", `${JSON.stringify(format.type)} is not supported ("text", "json_object" or "json_schema")`);
  }
  const spec = format.json_schema;
  if (typeof spec !== "object" || spec === null) {
    throw new InvalidRequestError("response_format.json_schema", "must be an object with name and schema");
  }
  if (typeof spec.name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name)) {
    throw new InvalidRequestError("response_format.json_schema.name", "must be 1-64 letters, digits, _ or -");
  }
  if (spec.strict !== undefined && spec.strict !== null && typeof spec.strict !== "boolean") {
    throw new InvalidRequestError("response_format.json_schema.strict", "must be a boolean");
  }
  // Decoding always follows the schema, so strict or not, the output matches it.
  const schema = spec.schema ?? {};
  if (typeof schema !== "object" || Array.isArray(schema)) {
    throw new InvalidRequestError("response_format.json_schema.schema", "must be a JSON schema object");
  }
  return schema;
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
  /** All chunks' content joined (not the reasoning). */
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

/** OpenAI's `logprobs` of a choice or chunk from the engine's entries. */
function logprobsOf(entries) {
  return { content: entries, refusal: null };
}

/** A chunk's delta of a step; null when the step released nothing. */
function delta(t) {
  const d = {};
  if (t.reasoning) d.reasoning_content = t.reasoning;
  if (t.text) d.content = t.text;
  if (t.toolCalls?.length) d.tool_calls = t.toolCalls;
  return Object.keys(d).length ? d : null;
}

/** A message's `tool_calls` gathered from streamed call deltas. */
function gatherCalls(calls, deltas) {
  for (const d of deltas ?? []) {
    if (d.index === calls.length) {
      calls.push({ id: d.id, type: "function", function: { name: d.function.name, arguments: "" } });
    }
    calls[d.index].function.arguments += d.function.arguments;
  }
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
    const messages = templateMessages(params.messages);
    // Checked before the template runs, so a bad field fails fast.
    const opts = chatOptions(params);
    // tool_choice "none" leaves tools out of the prompt, kwargs' own included.
    const none = params.tool_choice === "none";
    const tools = none ? undefined : params.tools;
    engine.checkTools(params.tools, params.tool_choice);
    let kwargs = templateKwargs(params.chat_template_kwargs);
    if (none && kwargs && "tools" in kwargs) kwargs = { ...kwargs, tools: undefined };
    const ids = await engine.promptIds(messages, tools, kwargs);
    const left = engine.contextLength() - ids.length;
    opts.maxTokens = Math.max(1, Math.min(opts.maxTokens ?? left, left));
    const signal = requestOptions?.signal;
    const id = completionId();
    const created = Math.floor(Date.now() / 1000);
    // The loaded model answers whatever `model` names (documented).
    const base = { id, created, model: engine.modelName(), system_fingerprint: fingerprint };
    if (params.stream) {
      return new ChatCompletionStream(async function* (own) {
        const run = engine.tokens(ids, { ...opts, signal: anySignal(signal, own) });
        const chunk = (delta, finish_reason = null, logprobs = null) => ({
          ...base,
          object: "chat.completion.chunk",
          choices: [{ index: 0, delta, logprobs, finish_reason }],
        });
        yield chunk({ role: "assistant", content: "", refusal: null });
        // With logprobs the chunks wait for the end of the generation (the
        // engine computes them in one prefill then); each carries the
        // tokens generated since the chunk before it.
        const held = [];
        let count = 0;
        for await (const t of run) {
          if (t.tokenId !== null) count++;
          const d = delta(t);
          if (!d) continue;
          if (opts.logprobs === undefined) yield chunk(d);
          else held.push({ d, upto: count });
        }
        const r = run.result;
        let from = 0;
        for (const { d, upto } of held) {
          yield chunk(d, null, logprobsOf(r.logprobs.slice(from, upto)));
          from = upto;
        }
        // Tokens that released no text (a held-back stop string, an end of
        // turn) go with the finish chunk.
        const rest = opts.logprobs !== undefined && from < r.logprobs.length ? logprobsOf(r.logprobs.slice(from)) : null;
        yield chunk({}, FINISH[r.finishReason] ?? r.finishReason, rest);
        // As OpenAI sends it: usage in a last chunk with no choices.
        if (params.stream_options?.include_usage) {
          yield { ...base, object: "chat.completion.chunk", choices: [], usage: usage(ids, [r]) };
        }
      });
    }
    const choices = [];
    const results = [];
    for (let index = 0; index < opts.n; index++) {
      // Choices differ by seed: the given one plus the index, or random.
      const seed = opts.seed === undefined ? undefined : opts.seed + index;
      const run = engine.tokens(ids, { ...opts, seed, signal });
      let content = "";
      let reasoning = "";
      const calls = [];
      for await (const t of run) {
        content += t.text;
        reasoning += t.reasoning ?? "";
        gatherCalls(calls, t.toolCalls);
      }
      const r = run.result;
      results.push(r);
      // As OpenAI: a reply of calls only has content null.
      const message = { role: "assistant", content: calls.length && !content ? null : content, refusal: null };
      if (calls.length) message.tool_calls = calls;
      if (reasoning) message.reasoning_content = reasoning;
      choices.push({
        index,
        message,
        logprobs: opts.logprobs === undefined ? null : logprobsOf(r.logprobs),
        finish_reason: FINISH[r.finishReason] ?? r.finishReason,
      });
    }
    return { ...base, object: "chat.completion", choices, usage: usage(ids, results) };
  }
  return { completions: { create } };
}

function usage(ids, results) {
  const completion = results.reduce((n, r) => n + r.ids.length, 0);
  const cached = results[0]?.stats?.cachedTokens ?? 0;
  return {
    prompt_tokens: ids.length,
    completion_tokens: completion,
    total_tokens: ids.length + completion,
    prompt_tokens_details: { cached_tokens: cached },
  };
}
