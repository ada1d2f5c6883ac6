// The benchmark page: loads a model (URL, local file, or a split model's
// shards) with progress, prefills a prompt and greedy-decodes on the page's
// GPU, times buffer copies for the roofline fraction, and reports it all as
// tables and as JSON whose field names are `wick bench --json`'s where the
// two report the same figure (crates/cli/src/bench.rs).
//
// Query parameters (each presets its field; run=1 starts at once):
//   model=URL  ctx=N  promptTokens=N  prompt=TEXT  tokens=N  speculative=off|lookup
//   limits=adapter|default  cache=0|1  run=1
// e.g. bench.html?model=/models/X.gguf&tokens=16&run=1
// The page sets data-state on <body>: "running", then "done" or "error";
// data-runs counts the runs that ended.

import { Engine, InvalidRequestError, NO_WEBGPU, WebGPUUnavailableError } from "../src/index.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

// The text a token-count prompt repeats, after "Once upon a time": the
// native bench's (bench_prompt), so both prefill the same kind of tokens.
const FILLER = "The quick brown fox jumps over the lazy dog while the engine measures itself. ";
// Buffer copies as the native bench times them (copy_bandwidth): 256 MiB
// capped at one storage binding, at least 8 copies in 4 timed batches, a
// batch under 25 ms doubled; the fastest batch's time a copy.
const COPY_BYTES = 256 << 20;
const COPY_BATCHES = 4;
const COPY_MIN_ITEMS = 2;
const COPY_MIN_BATCH_SECONDS = 0.025;
const COPY_MAX_BATCH = 1 << 14;

let running = false;

function setState(state) {
  document.body.dataset.state = state;
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

/** "Name: message" of a typed error (the class's name, e.g. ModelLoadError). */
function describeError(e) {
  return `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;
}

function mb(n) {
  return `${(n / (1 << 20)).toFixed(1)} MB`;
}

const fixed = (v, digits) => (Number.isFinite(v) ? v.toFixed(digits) : "—");

/** A whole number at least `min` from input `id`, or an InvalidRequestError naming the field. */
function intField(id, label, min) {
  const raw = $(id).value.trim();
  const n = Number(raw);
  if (raw === "" || !Number.isInteger(n) || n < min) {
    throw new InvalidRequestError(label, `must be a whole number of at least ${min}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

// Query parameters preset the form.
const presets = { model: "model-url", ctx: "ctx-len", promptTokens: "prompt-tokens", prompt: "prompt-text", tokens: "gen-tokens" };
for (const [key, id] of Object.entries(presets)) {
  if (params.has(key)) $(id).value = params.get(key);
}
// An unknown limits value stays as given, for Engine.load to refuse by name.
if (params.has("limits")) {
  const value = params.get("limits");
  if (![...$("limits").options].some((o) => o.value === value)) $("limits").add(new Option(value, value));
  $("limits").value = value;
}
if (params.has("cache")) $("use-cache").checked = params.get("cache") !== "0";
// As limits: an unknown value stays, for generate to refuse by name.
if (params.has("speculative")) {
  const value = params.get("speculative");
  if (![...$("speculative").options].some((o) => o.value === value)) $("speculative").add(new Option(value, value));
  $("speculative").value = value;
}

/** What Engine.load is given and the model's name for the report. */
function chosenSource() {
  const files = [...$("model-file").files].sort((a, b) => a.name.localeCompare(b.name));
  if (files.length > 0) {
    // Several files are a split model's shards, in name order.
    return { source: files.length === 1 ? files[0] : files, name: files[0].name, url: null };
  }
  const url = $("model-url").value.trim();
  if (!url) throw new InvalidRequestError("model", "give a model URL or choose a .gguf file");
  const name = decodeURIComponent(new URL(url, location.href).pathname.split("/").pop() || url);
  return { source: url, name, url };
}

/**
 * The prompt's token ids: the text's (with the model's BOS where it asks
 * for one), or `n` ids as the native bench builds them: "Once upon a time",
 * then FILLER repeated, cut at n.
 */
function promptIds(engine, text, n) {
  if (text) return engine.tokenize(text);
  const unit = engine.tokenize(FILLER, { addSpecial: false });
  const ids = engine.tokenize("Once upon a time");
  while (ids.length < n) ids.push(...unit);
  return ids.slice(0, n);
}

/**
 * GB/s (1e9 bytes a second) of buffer-to-buffer copies on a device of the
 * page's own, as `wick bench` measures natively: what decode speed is
 * compared with (a decode step reads every weight once). `maxBinding`: the
 * engine's storage binding limit, which caps the copy as natively.
 */
async function copyBandwidth(maxBinding) {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new WebGPUUnavailableError(NO_WEBGPU);
  const device = await adapter.requestDevice();
  const bytes = Math.floor(Math.min(COPY_BYTES, maxBinding, device.limits.maxBufferSize) / 4) * 4;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const src = device.createBuffer({ size: bytes, usage });
  const dst = device.createBuffer({ size: bytes, usage });
  try {
    const run = async (n) => {
      const enc = device.createCommandEncoder();
      for (let i = 0; i < n; i++) enc.copyBufferToBuffer(src, 0, dst, 0, bytes);
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
    };
    await run(2);
    let batch = COPY_MIN_ITEMS;
    let best = Infinity;
    for (let timed = 0; timed < COPY_BATCHES;) {
      const t = performance.now();
      await run(batch);
      const seconds = (performance.now() - t) / 1000;
      if (seconds < COPY_MIN_BATCH_SECONDS && batch < COPY_MAX_BATCH) {
        batch = Math.min(batch * 2, COPY_MAX_BATCH);
        continue;
      }
      best = Math.min(best, seconds / batch);
      timed += 1;
    }
    return { gbps: bytes / best / 1e9, bytes };
  } finally {
    device.destroy();
  }
}

/**
 * Where the model's bytes came from, by the load's progress phases:
 * "store" (the browser's model store), "network", "store+network" (a
 * download resumed from its stored part) or "file" (a local file).
 */
function bytesSource(phases) {
  if (phases.has("read")) return "file";
  if (phases.has("cache")) return phases.has("fetch") ? "store+network" : "store";
  return "network";
}

/** The report: `wick bench --json`'s names where the figure is the same; the info() objects as the JS API names them. */
function buildReport({ name, info, stats, finishReason, phases, copy, options }) {
  const s = stats;
  const roofline = s.weightBytesPerToken > 0 ? (s.decodeTokensPerSecond * s.weightBytesPerToken) / (copy.gbps * 1e9) : null;
  return {
    model: name,
    adapter: info.adapter.name,
    load_seconds: info.load.totalMs / 1000,
    prompt_tokens: s.promptTokens,
    gen_tokens: s.generatedTokens,
    prefill_tok_s: s.prefillTokensPerSecond,
    decode_tok_s: s.decodeTokensPerSecond,
    prefill_over_decode: s.prefillTokensPerSecond / s.decodeTokensPerSecond,
    time_to_first_token: s.timeToFirstToken,
    submits_per_decode_step: s.submitsPerDecodeStep,
    dispatches_per_decode_step: s.dispatchesPerDecodeStep,
    bytes_read_back_per_token: s.bytesReadBackPerToken,
    tokens_per_submit: s.tokensPerSubmit,
    kv_cache: info.kvCache,
    activations: info.activations,
    weight_store: info.weightStore,
    cpu_record_ms_per_step: s.cpuRecordMsPerStep,
    weight_bytes_per_token: s.weightBytesPerToken,
    copy_gbps: copy.gbps,
    roofline_fraction: roofline,
    // With drafting: as `wick bench --json`'s "speculative" (camelCase as the JS stats name it).
    speculative: s.speculative ?? null,
    // The page's own: what the native report has no field for.
    copy_bytes: copy.bytes,
    prefill_seconds: s.prefillSeconds,
    decode_seconds: s.decodeSeconds,
    finish_reason: finishReason,
    context_length: info.model.contextLength,
    options,
    load: { ...info.load, source: bytesSource(phases), fromStore: bytesSource(phases) === "store" },
    adapter_info: info.adapter,
    features: info.features,
    limits: info.limits,
    compute_path: info.computePath,
    decode_gemv_reduce: info.decodeGemvReduce,
    architecture: info.model.architecture,
    wick_version: info.version,
    user_agent: navigator.userAgent,
    date: new Date().toISOString(),
  };
}

function fillTable(id, rows) {
  $(id).tBodies[0].replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    const td = document.createElement("td");
    th.textContent = k;
    td.textContent = v;
    tr.append(th, td);
    return tr;
  }));
}

function showReport(r) {
  const p = r.load.phasesMs;
  fillTable("speed", [
    ["prompt", `${r.prompt_tokens} tokens`],
    ["prefill", `${fixed(r.prefill_tok_s, 2)} tok/s`],
    ["decode", `${fixed(r.decode_tok_s, 2)} tok/s (${r.gen_tokens} tokens, ${r.finish_reason})`],
    ["time to first token", `${fixed(r.time_to_first_token * 1000, 0)} ms`],
    ["per decode step", `${fixed(r.dispatches_per_decode_step, 1)} dispatches, ${fixed(r.submits_per_decode_step, 2)} submits`],
    ["read back per token", `${fixed(r.bytes_read_back_per_token, 1)} bytes`],
    ["weights per token", mb(r.weight_bytes_per_token)],
    ...(r.speculative ? [["drafting", `${r.speculative.drafter}: ${r.speculative.accepted} of ${r.speculative.drafted} drafts kept ` +
      `(${fixed(100 * r.speculative.acceptanceRate, 0)} %), ${fixed(r.speculative.tokensPerPass, 1)} tokens a pass`]] : []),
    ["roofline", r.roofline_fraction === null ? "— (no weight bytes reported)"
      : `${fixed(100 * r.roofline_fraction, 1)} % of ${fixed(r.copy_gbps, 2)} GB/s copy bandwidth`],
  ]);
  fillTable("load", [
    ["total", `${fixed(r.load_seconds, 2)} s`],
    ["open (wasm, device, first request)", `${p.open} ms`],
    ["bytes (read and uploaded)", `${p.bytes} ms`],
    ["build", `${p.build} ms`],
    ["warm-up (kernels compiled, one step)", `${p.warmUp} ms`],
    ["bytes", mb(r.load.bytes)],
    ["from", { store: "the model store", network: "the network", "store+network": "the model store and the network (resumed)", file: "a local file" }[r.load.source]],
    ["pipelines created", String(r.load.pipelinesCreated ?? "—")],
    ["of them compiled while the weights downloaded", String(r.load.pipelinesAhead ?? "—")],
  ]);
  const a = r.adapter_info;
  const on = Object.entries(r.features).filter(([, v]) => v).map(([k]) => k);
  fillTable("gpu", [
    ["adapter", `${a.name || "(unnamed)"}${a.isSoftware ? " (software)" : ""}`],
    ["backend, device type", `${a.backend}, ${a.deviceType}`],
    ["driver", a.driver || "—"],
    ["features", on.length ? on.join(", ") : "none of those wick uses"],
    ["limits", `${r.limits.requested}: buffer ${mb(r.limits.maxBufferSize)}, binding ${mb(r.limits.maxStorageBufferBindingSize)}`],
    ["compute path", `${r.compute_path}, KV cache ${r.kv_cache}, activations ${r.activations}`],
    ["browser", r.user_agent],
  ]);
  $("json").textContent = JSON.stringify(r, null, 2);
  $("results").hidden = false;
}

async function run() {
  if (running) return;
  running = true;
  showError("");
  $("run").disabled = true;
  $("copied").textContent = "";
  setState("running");
  let engine = null;
  try {
    const { source, name } = chosenSource();
    const contextLength = intField("ctx-len", "context", 1);
    const text = $("prompt-text").value;
    const nPrompt = text ? null : intField("prompt-tokens", "prompt tokens", 1);
    // Decode speed needs two tokens (the first comes from the prefill).
    const nGen = intField("gen-tokens", "tokens to generate", 2);
    const limits = $("limits").value;
    const cache = $("use-cache").checked;
    const speculative = $("speculative").value;

    const phases = new Set();
    const onProgress = ({ phase, loaded, total }) => {
      phases.add(phase);
      if (total) $("progress").value = loaded / total;
      const of = total ? ` / ${mb(total)}` : "";
      $("progress-label").textContent = phase === "ready" ? "loaded" : `${phase} ${mb(loaded)}${of}`;
    };
    $("progress").value = 0;
    engine = await Engine.load(source, { onProgress, contextLength, limits, cache });
    const info = engine.info();

    $("progress-label").textContent = "prefill and decode…";
    const ids = promptIds(engine, text, nPrompt);
    // Every token must have its position: a generation cut short by the
    // context would time fewer tokens than asked for.
    if (ids.length + nGen > contextLength) {
      throw new InvalidRequestError("context", `${ids.length} prompt tokens and ${nGen} to generate need more than ${contextLength} positions`);
    }
    // Greedy; the model's end-of-generation ids still stop it (finish_reason says so).
    const tokens = engine.generate(ids, { maxTokens: nGen, temperature: 0, speculative });
    let out = "";
    for await (const chunk of tokens) out += chunk.text;
    const { stats, finishReason } = tokens.result;
    if (stats.generatedTokens < 2) {
      // The first token comes from the prefill: decode speed needs a second.
      throw new InvalidRequestError("prompt", `the model ended its reply after ${stats.generatedTokens} token(s) (${finishReason}), so there is no decode speed to report: try another prompt`);
    }
    $("output").textContent = `generated: ${JSON.stringify(out)}`;
    await engine.dispose();
    engine = null;

    $("progress-label").textContent = "copy bandwidth…";
    const copy = await copyBandwidth(info.limits.maxStorageBufferBindingSize);
    const options = { contextLength, promptTokens: nPrompt, promptText: text || null, tokens: nGen, limits, cache, speculative };
    showReport(buildReport({ name, info, stats, finishReason, phases, copy, options }));
    $("progress-label").textContent = "done";
    setState("done");
  } catch (e) {
    console.error(e);
    $("progress").value = 0;
    $("progress-label").textContent = "";
    showError(describeError(e));
    setState("error");
  } finally {
    await engine?.dispose().catch(() => {});
    running = false;
    $("run").disabled = !navigator.gpu;
    document.body.dataset.runs = String(Number(document.body.dataset.runs ?? 0) + 1);
  }
}

$("bench-form").addEventListener("submit", (e) => {
  e.preventDefault();
  run();
});
$("copy-json").addEventListener("click", async () => {
  try {
    await navigator.clipboard.writeText($("json").textContent);
    $("copied").textContent = "copied";
  } catch (e) {
    // No clipboard (an insecure origin, or permission refused): select it for Ctrl+C.
    getSelection().selectAllChildren($("json"));
    $("copied").textContent = `select and copy by hand (${e.name})`;
  }
});

if (!navigator.gpu) {
  showError(describeError(new WebGPUUnavailableError(NO_WEBGPU)));
  $("run").disabled = true;
  setState("error");
} else if (params.get("run") === "1") {
  run();
}
