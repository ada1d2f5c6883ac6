// Types of chat.completions.create (OpenAI's chat API as wick honours it),
// re-exported by index.d.ts.

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool" | string;
  /** A string, or an array of text parts (joined). */
  content: string | { type: "text"; text: string }[];
  [key: string]: unknown;
}

/**
 * OpenAI's request fields that wick honours; any other field (or value)
 * throws UnsupportedFieldError naming it, and values outside OpenAI's ranges
 * InvalidRequestError. Defaults are OpenAI's: temperature 1, top_p 1,
 * max_tokens the rest of the context.
 */
export interface ChatCompletionParams {
  messages: ChatMessage[];
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  /** { "token id": bias in [-100, 100] }. */
  logit_bias?: Record<string, number>;
  seed?: number;
  /** Up to 4 strings that end the reply (matched across tokens, never emitted). */
  stop?: string | string[];
  /** Choices to generate (seeds seed, seed + 1, ...); without stream only. */
  n?: number;
  /** The loaded model answers whatever this names; the response gives the loaded model's name. */
  model?: string;
  /**
   * Rendered into the prompt by the model's chat template, as given (the
   * shape Hugging Face's templates take): `{ type: "function", function: {
   * name, description?, parameters? } }` each.
   */
  tools?: { type: "function"; function: { name: string; description?: string; parameters?: unknown; [key: string]: unknown } }[];
  /**
   * Each generated token's log-probability, in `choices[].logprobs.content`
   * (and each chunk's, for its tokens; a stream's chunks then arrive when the
   * generation ends, which computes them in one prefill).
   */
  logprobs?: boolean;
  /** 0..20 most likely alternatives per token; needs `logprobs: true`. */
  top_logprobs?: number;
  /**
   * Extension (as vLLM's): more variables for the chat template, e.g.
   * `{ enable_thinking: false }` for Qwen3. `tools` in the request wins
   * over a `tools` here.
   */
  chat_template_kwargs?: Record<string, unknown>;
  /**
   * "auto" (the default: the model may call tools; its calls are parsed in
   * the template's format), "none" (tools left out of the prompt),
   * "required" (one or more calls, decoding constrained so each names a tool
   * and its arguments validate against the tool's `parameters`), or a named
   * function (exactly one call of it).
   */
  tool_choice?: "auto" | "none" | "required" | { type: "function"; function: { name: string } };
  /** `json_schema` and `json_object` constrain decoding (the output always
   * parses and, for a schema, validates); `logprobs` is refused with them. */
  response_format?:
    | { type: "text" }
    | { type: "json_object" }
    | { type: "json_schema"; json_schema: { name: string; schema?: object; strict?: boolean; description?: string } };
  stream_options?: { include_usage?: boolean };
  /** Accepted, no effect (OpenAI uses it for abuse monitoring). */
  user?: string;
  /** Extension: wick's top-k cut (0 = off). */
  top_k?: number;
  /** Extension: min-p cut (0 = off). */
  min_p?: number;
  /** Extension: repetition penalty (1 = off). */
  repetition_penalty?: number;
}

/** One token in OpenAI's logprobs shape: its text, log-probability and bytes. */
export interface TopLogprob {
  token: string;
  logprob: number;
  /** The token's exact UTF-8 bytes (`token` is lossy where it holds part of a character). */
  bytes: number[];
}

export interface TokenLogprob extends TopLogprob {
  /** The `top_logprobs` most likely tokens at its position, most likely first. */
  top_logprobs: TopLogprob[];
}

export interface ChoiceLogprobs {
  content: TokenLogprob[];
  refusal: null;
}

/** The second argument of create, as the openai SDK passes it. */
export interface RequestOptions {
  signal?: AbortSignal;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  system_fingerprint: string;
  /** Empty in the usage chunk that stream_options.include_usage adds last. */
  choices: {
    index: number;
    /**
     * `reasoning_content`: text of the reply's `<think>` block, for templates
     * that write one (Qwen3, DeepSeek-R1 distills); never in `content`.
     */
    delta: {
      role?: "assistant";
      content?: string;
      reasoning_content?: string;
      refusal?: null;
      /** As OpenAI streams calls: the first delta of a call has `id`, `type` and the name; later ones append to `arguments`. */
      tool_calls?: ToolCallDelta[];
    };
    /**
     * With `logprobs: true`: the tokens of this delta (tokens that released no
     * text, such as an end of turn, go with the finish chunk).
     */
    logprobs: ChoiceLogprobs | null;
    finish_reason: "stop" | "length" | "tool_calls" | null;
  }[];
  usage?: ChatCompletionUsage;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

export interface ToolCall {
  id: string;
  type: "function";
  /** `arguments`: JSON text, as the model wrote it (validated when tool_choice forces the call). */
  function: { name: string; arguments: string };
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** cached_tokens: prompt tokens whose K/V were reused. */
  prompt_tokens_details: { cached_tokens: number };
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  system_fingerprint: string;
  choices: {
    index: number;
    /** `reasoning_content`: the `<think>` block's text, where the reply had one. */
    /** `content` is null when the reply is tool calls only. */
    message: { role: "assistant"; content: string | null; reasoning_content?: string; refusal: null; tool_calls?: ToolCall[] };
    /** With `logprobs: true`, else null. */
    logprobs: ChoiceLogprobs | null;
    finish_reason: "stop" | "length" | "tool_calls";
  }[];
  usage: ChatCompletionUsage;
}

export declare class ChatCompletionStream implements AsyncIterable<ChatCompletionChunk> {
  controller: AbortController;
  [Symbol.asyncIterator](): AsyncIterator<ChatCompletionChunk>;
  text(): Promise<string>;
}

export interface Chat {
  completions: {
    create(params: ChatCompletionParams & { stream: true }, options?: RequestOptions): Promise<ChatCompletionStream>;
    create(params: ChatCompletionParams & { stream?: false }, options?: RequestOptions): Promise<ChatCompletion>;
    create(params: ChatCompletionParams, options?: RequestOptions): Promise<ChatCompletion | ChatCompletionStream>;
  };
}
