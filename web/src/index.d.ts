// Types of the "wick" npm package. See docs/javascript.md.

import type { Chat, ChatMessage, TokenLogprob } from "./chat-types.js";
export * from "./chat-types.js";

/**
 * What Engine.load accepts: a GGUF file (its URL, or its bytes), a split GGUF
 * (`SplitGgufSource`), or a Hugging Face checkpoint folder (`HfFolderSource`:
 * a URL ending in "/", a FileList, an array of Files, or
 * `{ "path/in/folder": Blob }`).
 */
export type ModelSource =
  | string
  | URL
  | Blob
  | File
  | ArrayBuffer
  | ArrayBufferView
  | Response
  | ReadableStream<Uint8Array>
  | SplitGgufSource
  | HfFolderSource;

/**
 * A model split into shards by llama.cpp's gguf-split (NAME-00001-of-0000N.gguf
 * ...): the first shard's URL as a plain string or URL (the others' URLs are
 * derived from its name; a later shard's URL is a ModelLoadError), or an array
 * of every shard in order: URLs, Files named *.gguf (an array of other Files
 * is a checkpoint folder), Blobs or buffers. Every shard's header is read
 * before any weight is uploaded; a shard that is missing (HTTP 404) or not of
 * the same model is a ModelLoadError naming it (`file`). Progress counts the
 * bytes of all shards together, and `cache: true` keeps each shard.
 */
export type SplitGgufSource = Array<string | URL | Blob | File | ArrayBuffer | ArrayBufferView>;

export interface LoadProgress {
  /**
   * "fetch" (network bytes), "cache" (bytes from the model store), "read"
   * (File/Blob/ArrayBuffer bytes), "parse" (the header is parsed), "upload"
   * (file bytes whose tensors are on the GPU), "ready" (done). A checkpoint
   * folder counts the bytes of its safetensors files, a split GGUF the bytes
   * of its shards, every shard together.
   */
  phase: "fetch" | "cache" | "read" | "parse" | "upload" | "warmup" | "ready";
  /**
   * Bytes so far, never going back: a resumed download's "cache" phase
   * counts the stored part and "fetch" goes on from there to the total; a
   * retried range counts each byte once.
   */
  loaded: number;
  /** null when the size is not known (no Content-Length). */
  total: number | null;
}

export interface LoadOptions {
  onProgress?: (p: LoadProgress) => void;
  /** KV cache positions (default: the model's context, capped by the GPU and 4096). */
  contextLength?: number;
  /** Most prompt tokens per prefill step (default 32). */
  prefillChunk?: number;
  /**
   * Decode steps per GPU submit (default 4, at most 32): sampled tokens feed
   * the next step on the GPU and their ids are read back once per submit, so
   * tokens stream in groups of this size. Tokens past a stop are discarded.
   */
  tokensPerSubmit?: number;
  /**
   * How the KV cache stores K and V (default "f16", as llama.cpp: half the
   * memory and half the bytes attention reads; needs no shader-f16).
   */
  kvCache?: "f16" | "f32";
  /**
   * What decode steps feed the matrix-vector products after a norm: "f32"
   * (the default) or "q8", 8-bit blocks of 32 values with a scale each (as
   * llama.cpp's CPU backend rounds activations; faster decode on lavapipe
   * and on SwiftShader, where a step's logits then differ from a prefilled
   * position's by up to ~1: see docs/kernels.md).
   */
  activations?: "q8" | "f32";
  /**
   * A Hugging Face checkpoint folder only: store every matrix as Q8_0 as it
   * is uploaded (about a quarter of an F32 checkpoint's GPU memory). Given
   * for a GGUF file, or another type, it is an InvalidRequestError.
   */
  quantize?: "q8_0";
  /**
   * The GPU limits the engine asks for: "adapter" (default: the largest the
   * adapter offers, which big models need) or "default" (WebGPU's defaults:
   * 128 MiB per storage binding, 256 MiB per buffer, as a phone grants).
   * Weight matrices are split by rows to fit a binding either way;
   * `info().limits.requested` says which is in force.
   */
  limits?: "adapter" | "default";
  /**
   * Speculative decoding for every generation that does not say otherwise:
   * "off" (default), "lookup" (prompt lookup: the tokens that followed
   * the last earlier occurrence of the text's last few tokens are drafted
   * and checked in one pass over the weights, several tokens a pass where
   * the reply copies: code edits, quotes) or "draft" (a smaller model with
   * the same vocabulary drafts: `draftModel`). The output is the same as
   * without drafting (greedy, and seed for seed when sampling, up to
   * rounding at near ties). Under a grammar (jsonSchema, regex, grammar,
   * tool calls) a pass checks only the drafts the grammar allows.
   */
  speculative?: "off" | "lookup" | "draft";
  /** Most tokens a pass drafts with `speculative` (1..=16, and below the prefill chunk). Default 7 (a pass of 8 rows). */
  draftTokens?: number;
  /**
   * The draft model of `speculative: "draft"`: a GGUF source as for `load`
   * (a URL, File ...), loaded with this load's `limits`, `cache`,
   * `download`, `contextLength` and warm-up settings and attached
   * (`setDraftModel`); its progress events carry `draft: true`. Its
   * vocabulary must be the model's, token for token.
   */
  draftModel?: ModelSource;
  /**
   * GPU memory the model may take, in bytes: the memory preflight refuses a
   * model (or a context) over it before the first upload, with the numbers.
   * WebGPU reports no device memory, so without it only the buffer limits
   * are checked.
   */
  memoryBudget?: number;
  /**
   * URL sources: keep the file in the browser's persistent model store
   * (default true; see `modelCache`). The store is the Origin Private File
   * System, or the Cache API where OPFS is missing; where neither exists
   * the file streams as with false. A stored copy loads with no model byte
   * fetched (one HEAD request checks the server's size, ETag and
   * Last-Modified; a changed file is fetched again, an unreachable server
   * leaves the copy in use); a download cut short resumes from its stored
   * chunks. A file that does not fit the storage quota is a
   * StorageQuotaError before its download starts; each shard of a split GGUF
   * is kept on its own. false: stream only.
   */
  cache?: boolean;
  /** How a URL is downloaded (Range requests where the server answers 206). */
  download?: DownloadOptions;
  /**
   * Compile every GPU pipeline a generation can use, and run one step, before
   * load resolves (default true), so the first token does not wait for
   * compiles. false: each pipeline compiles when first used (as llama.cpp's
   * --no-warmup): a quicker load, a slower first generation, and no
   * "warmup" progress phase.
   */
  warmUp?: boolean;
  signal?: AbortSignal;
  /** Where to fetch wick_web_bg.wasm from (default: beside the package's JS). */
  wasmUrl?: string | URL;
}

export interface DownloadOptions {
  /** Bytes per Range request, and per stored chunk (default 16 MiB, at least 64 KiB). */
  chunkSize?: number;
  /** Range requests at once (default 4, 1 to 16); at most this many chunks wait ahead of the loader. */
  parallel?: number;
  /** Tries again per chunk after a failure, with a doubling pause (default 5; then a DownloadError). */
  retries?: number;
  /** The first pause in milliseconds (default 500). */
  retryDelay?: number;
}

/** The `download` defaults: `{ chunkSize: 16 MiB, parallel: 4, retries: 5, retryDelay: 500 }`. */
export declare const DOWNLOAD_DEFAULTS: Readonly<Required<DownloadOptions>>;

/** A model in the store, as `modelCache.list()` gives it. */
export interface CachedModel {
  /** The absolute URL it was loaded from (its key). */
  url: string;
  /** The file's size in bytes (null while a size-less download is partial). */
  size: number | null;
  /** Bytes stored: `size` when complete, less for a download cut short. */
  bytes: number;
  /** false: a partial download the next load of `url` resumes. */
  complete: boolean;
  /** When it was stored whole, in ms since the epoch (null while partial). */
  cachedAt: number | null;
  /** "opfs" (Origin Private File System) or "cache" (the Cache API). */
  store: "opfs" | "cache";
}

/**
 * The persistent model store that `load` fills (`cache`, default true), per
 * origin: the same from a page and from a worker.
 */
export declare const modelCache: {
  /** Every stored model, whole or partial, sorted by URL. */
  list(): Promise<CachedModel[]>;
  /** Whether `url` is stored whole (a load reads it from the store). */
  has(url: string | URL): Promise<boolean>;
  /** The stored file as a Blob (read lazily from the store), or null unless it is stored whole. */
  get(url: string | URL): Promise<Blob | null>;
  /** Removes `url`, whole or partial; true if anything was stored. */
  delete(url: string | URL): Promise<boolean>;
  /** Removes every stored model; true if there was any. */
  clear(): Promise<boolean>;
  /**
   * `bytes`: what the stored models hold; `models`: how many are whole;
   * `usage` and `quota`: the origin's, from navigator.storage.estimate()
   * (null where the browser has none).
   */
  usage(): Promise<{ bytes: number; models: number; usage: number | null; quota: number | null }>;
};

export interface GenerateOptions {
  /** Default 256. */
  maxTokens?: number;
  /** 0 is greedy. Default 0.7. */
  temperature?: number;
  /** 0 keeps every token. Default 40. */
  topK?: number;
  /** Default 0.95. */
  topP?: number;
  /** Default: random. */
  seed?: number;
  /** Ids to stop at besides the model's end-of-generation ids. */
  stopIds?: number[];
  /** Drops tokens whose probability is below minP times the top one's. Default 0 (off). */
  minP?: number;
  /** Divides (or multiplies, if negative) the logits of recent tokens. Default 1 (off). */
  repetitionPenalty?: number;
  /** OpenAI's frequency penalty. Default 0. */
  frequencyPenalty?: number;
  /** OpenAI's presence penalty. Default 0. */
  presencePenalty?: number;
  /** [token id, bias] pairs added to the logits. */
  logitBias?: [number, number][];
  /** Constrained decoding (at most one of the three): every token keeps the
   * output a prefix of something the grammar accepts; the generation ends
   * when it is complete. One token a submit; a grammar that does not compile
   * throws InvalidRequestError (field "grammar"). */
  jsonSchema?: object;
  /** A regular expression the whole output matches (Rust regex syntax). */
  regex?: string;
  /** A Lark grammar (llguidance's dialect, `%json` included). */
  grammar?: string;
  /** Up to 4 strings that end the text; never emitted, even in part (finishReason "stop"). */
  stop?: string | string[];
  /** This generation's drafting (see LoadOptions.speculative; default the load's). */
  speculative?: "off" | "lookup" | "draft";
  /** Most tokens a pass drafts (see LoadOptions.draftTokens). */
  draftTokens?: number;
  /** Aborting ends the iteration with an AbortError. */
  signal?: AbortSignal;
}

export interface TokenChunk {
  text: string;
  /** null for a final piece of held-back text. */
  tokenId: number | null;
  /** Chat only: text of the reply's `<think>` block (then not in `text`). */
  reasoning?: string;
}

export interface GenerationStats {
  promptTokens: number;
  /** Leading prompt tokens whose KV cache the last generation left, not prefilled again. */
  cachedTokens: number;
  generatedTokens: number;
  prefillSeconds: number;
  decodeSeconds: number;
  timeToFirstToken: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  submitsPerDecodeStep: number;
  dispatchesPerDecodeStep: number;
  /** Decode steps per GPU submit in this generation (at most the `tokensPerSubmit` load option). */
  tokensPerSubmit: number;
  /** Bytes read back from the GPU per decode step. */
  bytesReadBackPerToken: number;
  /** CPU time to record and submit one decode step, in milliseconds. */
  cpuRecordMsPerStep: number;
  /** Stored weight bytes one decode step reads: times decodeTokensPerSecond, the memory traffic decode sustains. */
  weightBytesPerToken: number;
  /** With speculative decoding: the verifying passes (one step over the weights each), the tokens drafted and
   * accepted, and decode steps run with nothing drafted. */
  speculative?: {
    drafter: "lookup" | "draft";
    /** Whether the passes ran each row as a decode step would (the output bit for bit plain decoding's: GPUs) or
     * as a prompt chunk (CPU adapters such as SwiftShader: cheaper there, and where two tokens tie within rounding
     * the output can part from plain decoding's). */
    exact: boolean;
    passes: number;
    drafted: number;
    accepted: number;
    acceptanceRate: number;
    tokensPerPass: number;
    plainSteps: number;
  };
}

export interface GenerationResult {
  finishReason: "stop" | "length" | "context_full" | "cancelled";
  stats: GenerationStats;
  ids: number[];
  /** Chat with `logprobs: true` only: one entry per id. */
  logprobs?: TokenLogprob[];
}

export interface TokenRun extends AsyncIterable<TokenChunk> {
  /** Set once the iteration finished. */
  result: GenerationResult | null;
  /** Runs to the end and returns all text. */
  text(): Promise<string>;
}

export interface EngineInfo {
  version: string;
  adapter: { name: string; backend: string; deviceType: string; driver: string; isSoftware: boolean };
  /** packedDot4: WGSL's dot4I8Packed, which decode's GEMVs use for 8-bit activations (`activations: "q8"`). */
  features: { shaderF16: boolean; subgroups: boolean; timestampQuery: boolean; packedDot4: boolean };
  /** Always "f32" today: f16 and quantized weights are unpacked in the shader. */
  computePath: "f32" | "f16";
  computePathNote: string;
  /** How the KV cache stores K and V (the `kvCache` load option). */
  kvCache: "f16" | "f32";
  /** What decode steps feed the projections (the `activations` load option). */
  activations: "q8" | "f32";
  /** How a decode matrix-vector workgroup sums each row's lanes: "serial"
   * on CPU adapters, "subgroup" where the device has subgroups, else "tree". */
  decodeGemvReduce: "serial" | "tree" | "subgroup";
  /** Where weight matrices live: always "buffers" (storage buffers) in the
   * browser; natively on lavapipe the engine keeps them in textures. */
  weightStore: "buffers" | "textures";
  /** `deviceMemory` is null where the adapter reports none (always in the browser): the memory preflight then checks the buffer limits only. */
  limits: { requested: "adapter" | "default"; maxBufferSize: number; maxStorageBufferBindingSize: number; maxComputeInvocationsPerWorkgroup: number; deviceMemory: number | null };
  /** The engine's own count of what it holds on the GPU now (buffers of every kind, their bytes, cached bind groups). */
  gpuMemory: { liveBytes: number; liveBuffers: number; liveBindGroups: number };
  /**
   * How the load went, by phase in milliseconds: `open` (the wasm module,
   * the GPU device, the first request), `bytes` (read and uploaded, one
   * stream), `build` (the engine over the uploaded weights), `warmUp` (the
   * pipelines created, then one step: where the kernels compile; 0 with
   * `warmUp: false`). `pipelinesCreated` counts the pipelines the warm-up
   * created: the page's engines share one GPU device (see releaseGpu), so a
   * second load of the same model creates none. `pipelinesAhead`: how many
   * of them the load asked for (`createComputePipelineAsync`) as soon as the
   * model's header was read, so they compiled while the weights downloaded
   * (in Chromium, whose WebGPU keeps one pipeline per descriptor; 0 in
   * other browsers, where the warm-up compiles them all). `notStored`: the files
   * (with `cache: true`) the model store could not keep, and why: a write
   * it refused after the quota check passed (Chromium's incognito storage is
   * in memory and fills at about 1.6 GB while estimate() reports 10 GiB),
   * another failure of the store; the load went on streaming them. Absent
   * on a HF folder's embedder.
   */
  load?: {
    totalMs: number;
    phasesMs: { open: number; bytes: number; build: number; warmUp: number };
    bytes: number;
    pipelinesCreated: number | null;
    pipelinesAhead: number | null;
    notStored: { url: string; reason: string }[];
  };
  /** The GGUF architectures (`general.architecture`) this build runs: llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3, smollm3. */
  supportedArchitectures: string[];
  model: {
    name: string | null;
    architecture: string;
    nLayers: number;
    dModel: number;
    nHeads: number;
    nKvHeads: number;
    headDim: number;
    ffnDim: number;
    /** Soft-caps of attention scores and output logits (Gemma 2: 50 and 30), null where the model has none. */
    attentionSoftcap: number | null;
    finalSoftcap: number | null;
    /** The local layers' sliding window, null where every layer attends globally. */
    slidingWindow: number | null;
    /** RoPE frequency divisors in use: "llama3" (Llama 3.1/3.2), LongRoPE's "long" or "short" set (Phi-3.5: long when contextLength is past the original context), or "none". */
    ropeFactors: "none" | "llama3" | "long" | "short";
    /** Layers with no position embedding at all (SmolLM3: every 4th). */
    unrotatedLayers: number[];
    /** Mixture of experts (null for a dense model): experts per layer, experts each token uses, their MLP width, and the shared expert's width where there is one. */
    experts: { count: number; used: number; ffnDim: number; sharedFfnDim: number | null } | null;
    vocabSize: number;
    contextTrain: number;
    contextLength: number;
    hasChatTemplate: boolean;
    bosId: number | null;
    eosId: number | null;
    stopIds: number[];
  };
  /** How generations draft tokens unless they say otherwise (the load's `speculative`, `draftTokens`). */
  speculative: { kind: "off" | "lookup" | "draft"; draftTokens: number; draftModel: boolean };
}

/** Base of wick's typed errors: `code` is stable, `name` the class's. */
export declare class WickError extends Error {
  code: string;
}
/** No WebGPU in this page, or no adapter/device. code "webgpu_unavailable". */
export declare class WebGPUUnavailableError extends WickError {}
/** Not a model wick can run (bad file, architecture, quant type). code "model_load". */
export declare class ModelLoadError extends WickError {
  /** The folder's file at fault, where one is (a checkpoint folder's, in Engine.load or EmbeddingEngine.load). */
  file?: string;
}
/** The prompt does not fit the context. code "context_window_exceeded". */
export declare class ContextWindowExceededError extends WickError {
  promptTokens: number;
  contextLength: number;
  cachedTokens: number;
  /** embeddings.create: which input is too long. */
  inputIndex?: number;
}
/** A request field wick does not implement. code "unsupported_field". */
export declare class UnsupportedFieldError extends WickError {
  field: string;
}
/** A request field's value outside what it accepts. code "invalid_request". */
export declare class InvalidRequestError extends WickError {
  field: string;
}
/** The GPU device was lost; load again. code "device_lost". */
export declare class DeviceLostError extends WickError {}
/**
 * The GPU ran out of memory; the engine is unusable, free memory (a smaller
 * model or context) and load again. code "out_of_memory".
 */
export declare class OutOfMemoryError extends WickError {}
/** The GPU reported a validation error; the engine is unusable, load again. code "gpu_validation". */
export declare class GpuValidationError extends WickError {}
/**
 * wick's .wasm could not be fetched, or the server answered with something
 * else (an HTML page: a bundler did not emit it there). code "wasm_load".
 */
export declare class WasmLoadError extends WickError {
  url: string;
}
/**
 * The model does not fit the browser's storage; nothing was downloaded.
 * Free space (modelCache.delete / clear) or load with `cache: false`.
 * code "storage_quota".
 */
export declare class StorageQuotaError extends WickError {
  url: string;
  /** Bytes still to store (the file less what a partial copy holds). */
  needed: number;
  /** quota - usage from navigator.storage.estimate(), plus what a stale copy of the file frees. */
  available: number;
}
/**
 * A download failed: an HTTP status (`status`), or a chunk that failed
 * every retry. `offset`: the first byte not fetched; what was stored
 * whole stays for the next load to resume. code "download".
 */
export declare class DownloadError extends WickError {
  url: string;
  offset: number;
  status?: number;
}
/** An aborted request (name "AbortError"). code "aborted". */
export declare class AbortError extends WickError {}

export declare const NO_WEBGPU: string;
export declare const DEFAULTS: Readonly<{ maxTokens: number; temperature: number; topK: number; topP: number }>;

/** The options `preflight` takes: the load's that size the model on the GPU, and how to read the headers. */
export interface PreflightOptions {
  contextLength?: number;
  prefillChunk?: number;
  tokensPerSubmit?: number;
  kvCache?: "f16" | "f32";
  activations?: "q8" | "f32";
  limits?: "adapter" | "default";
  memoryBudget?: number;
  /** URL sources: read the header from the model store where it holds those bytes (default true). */
  cache?: boolean;
  signal?: AbortSignal;
  wasmUrl?: string | URL;
}

/** What `preflight` found: what the load would hold on this page's GPU, and whether it fits. */
export interface Preflight {
  fits: boolean;
  /**
   * Why not, where it does not fit: "context_too_large" (a shorter context
   * fits: `largestContext`), "model_too_large" (no context fits: the
   * weights and fixed buffers alone are over the memory), "buffer_too_large"
   * (one buffer is over a binding or buffer limit whatever the context; the
   * sizes are then null). `message` is the load's refusal, word for word.
   */
  reason: { code: "context_too_large" | "model_too_large" | "buffer_too_large"; message: string } | null;
  /** The context the load would allocate: `contextLength`, or the default (the model's, capped at 4096 and by what fits). */
  contextLength: number | null;
  /** The largest context that fits (0: none does). Without `memoryBudget` only the KV cache's binding bounds it. */
  largestContext: number | null;
  /** The largest context whose K (or V) cache fits one storage binding. */
  largestContextByBinding: number | null;
  kvCache: "f16" | "f32" | null;
  /** Bytes on the GPU by what they hold, at `contextLength`: the load's own sums (weights in their GPU layout). */
  bytes: { weights: number; kvCache: number; activations: number; readback: number; sampler: number; total: number } | null;
  /** One K (or V) cache buffer, bound whole. */
  kvBufferBytes: number | null;
  /**
   * What was checked: the adapter's buffer limits, its device memory (null
   * in the browser), `memoryBudget`, the memory left (`available`: the budget
   * less `inUse`, what the page's engines already hold; null: only the
   * buffer limits were checked).
   */
  limits: {
    requested: "adapter" | "default";
    adapter: string;
    maxBufferSize: number;
    maxStorageBufferBindingSize: number;
    deviceMemory: number | null;
    memoryBudget: number | null;
    available: number | null;
    inUse: number;
  };
  /** Bytes of the files read: their headers only (every shard's for a split model). */
  headerBytes: number;
}

/**
 * What `Engine.load(source, options)` would hold on this page's GPU and
 * whether it fits, from the model's header alone (every shard's for a split
 * model: the first shard's URL or the list of shards), before a byte of
 * its weights is downloaded: a Range request of the first 8 MiB (64 KiB of
 * a later shard), twice as much while the header goes on. Opens the page's GPU with `limits`. A file that is
 * not a model wick runs is a ModelLoadError, as its load would be; a server
 * that refuses the file a DownloadError.
 */
export declare function preflight(
  source: string | URL | Blob | ArrayBuffer | ArrayBufferView | Array<string | URL | Blob | ArrayBuffer | ArrayBufferView>,
  options?: PreflightOptions,
): Promise<Preflight>;

/** Instantiates the wasm module now; resolves to its version. */
export declare function init(wasmUrl?: string | URL): Promise<string>;
/** Live GPU memory as the engine counts it, over every Engine on this page (after init() or a load). */
export declare function liveGpuMemory(): { liveBytes: number; liveBuffers: number; liveBindGroups: number };
/**
 * Lets go of the page's GPU device and the kernels compiled on it (kept
 * between loads, so a second load compiles only what the first did not);
 * loaded engines keep theirs until disposed. Call after init() or a load.
 */
export declare function releaseGpu(): void;
/** The old name of `modelCache.delete(url)` (with a URL) and `modelCache.clear()` (without). */
export declare function clearCache(url?: string | URL): Promise<boolean>;

export declare class Engine {
  static load(source: ModelSource, options?: LoadOptions): Promise<Engine>;
  readonly chat: Chat;
  lastResult: GenerationResult | null;
  info(): EngineInfo;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): number[];
  decode(ids: ArrayLike<number>, options?: { skipSpecial?: boolean }): string;
  applyChatTemplate(messages: ChatMessage[], options?: { addGenerationPrompt?: boolean; tools?: unknown[]; kwargs?: Record<string, unknown> }): string;
  generate(prompt: string | ArrayLike<number>, options?: GenerateOptions): TokenRun;
  /**
   * Attaches `draft` (another Engine of this page, loaded with the same
   * `limits` and the same vocabulary) as the draft model of `speculative:
   * "draft"`; `draft` is taken (disposed from the caller's side) and goes
   * with this engine. A refusal names the first token that differs.
   */
  setDraftModel(draft: Engine): Promise<void>;
  dispose(): Promise<void>;
}

/** The same API, with the engine in a Web Worker; sync methods become async. */
export declare class WorkerEngine {
  constructor(workerUrl?: string | URL);
  static load(source: ModelSource, options?: LoadOptions & { workerUrl?: string | URL }): Promise<WorkerEngine>;
  /** An EmbeddingEngine in the worker: use `embeddings.create`; `info()` is then an EmbeddingInfo. */
  static loadEmbeddings(source: HfFolderSource, options?: EmbeddingLoadOptions & { workerUrl?: string | URL }): Promise<WorkerEngine>;
  load(source: ModelSource, options?: LoadOptions): Promise<WorkerEngine>;
  /** `preflight` on the worker's GPU: headers only, the loaded model (if any) stays. */
  preflight(source: Parameters<typeof preflight>[0], options?: PreflightOptions): Promise<Preflight>;
  readonly chat: Chat;
  /** After loadEmbeddings only (else it rejects). */
  readonly embeddings: { create(params: EmbeddingCreateParams): Promise<CreateEmbeddingResponse> };
  lastResult: GenerationResult | null;
  info(): EngineInfo | EmbeddingInfo;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  decode(ids: ArrayLike<number>, options?: { skipSpecial?: boolean }): Promise<string>;
  applyChatTemplate(messages: ChatMessage[], options?: { addGenerationPrompt?: boolean; tools?: unknown[]; kwargs?: Record<string, unknown> }): Promise<string>;
  generate(prompt: string | ArrayLike<number>, options?: GenerateOptions): TokenRun;
  dispose(): Promise<void>;
  terminate(): void;
}

export declare function createWorkerEngine(workerUrl?: string | URL): WorkerEngine;

/**
 * A Hugging Face / sentence-transformers folder: its URL (files fetched
 * beside it), a folder picker's FileList or an array of Files (paths from
 * `webkitRelativePath`, the top folder dropped), or `{ "path/in/folder": Blob }`.
 */
export type HfFolderSource = string | URL | FileList | ArrayLike<File> | Record<string, Blob> | Map<string, Blob>;

export interface EmbeddingLoadOptions {
  onProgress?: (p: LoadProgress) => void;
  signal?: AbortSignal;
  /** Keep model.safetensors in the model store (URL sources; default true, as Engine.load). */
  cache?: boolean;
  download?: DownloadOptions;
  wasmUrl?: string | URL;
  /** The responses' `model` (default: the folder's name). */
  name?: string;
  /**
   * The model was trained for Matryoshka truncation: `dimensions` below its
   * own cut and renormalise. Default false: any other `dimensions` is refused.
   */
  matryoshka?: boolean;
}

export interface EmbeddingInfo {
  name: string;
  dimensions: number;
  /** Longest input in tokens, special tokens included. */
  maxTokens: number;
  vocabSize: number;
  layers: number;
  pooling: "mean" | "first" | "last";
  normalize: boolean;
  matryoshka: boolean;
}

export interface EmbeddingCreateParams {
  /** Text or texts (at most 2048, none empty); token-id inputs are refused (UnsupportedFieldError). */
  input: string | string[];
  /** Accepted; the loaded model answers (the response names it). */
  model?: string;
  /** The model's own, or fewer where it was loaded with `matryoshka: true`. */
  dimensions?: number;
  encoding_format?: "float" | "base64";
  user?: string;
}

export interface Embedding {
  object: "embedding";
  index: number;
  /** Numbers, or with encoding_format "base64" the little-endian f32 bytes in base64. */
  embedding: number[] | string;
}

export interface CreateEmbeddingResponse {
  object: "list";
  data: Embedding[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** An encoder model (BERT: all-MiniLM-L6-v2 and its kin) and OpenAI-shaped embeddings. */
export declare class EmbeddingEngine {
  static load(source: HfFolderSource, options?: EmbeddingLoadOptions): Promise<EmbeddingEngine>;
  readonly embeddings: { create(params: EmbeddingCreateParams): Promise<CreateEmbeddingResponse> };
  info(): EmbeddingInfo;
  /** Each text's vector at the model's dimensions, and its token count. */
  embed(texts: string[]): Promise<{ vectors: Float32Array[]; tokens: number[] }>;
  dispose(): Promise<void>;
}
