// The demo page: load a model (URL or local file) with a progress bar, then
// chat with streamed tokens, sampling controls, a stop button and tokens/s.
// Query parameters: ?model=URL preselects a model, &autoload loads it at once,
// &worker=0 runs the engine on the page instead of in a Web Worker.

import { Engine, NO_WEBGPU, WorkerEngine } from "../src/index.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

let engine = null;
let history = [];
let abort = null;

function showError(msg) {
  const el = $("error");
  el.textContent = msg;
  el.hidden = !msg;
}

function mb(n) {
  return `${(n / (1 << 20)).toFixed(1)} MB`;
}

function setBusy(busy) {
  $("send").disabled = busy || !engine;
  $("prompt").disabled = !engine;
  $("stop").disabled = !busy;
  $("load").disabled = busy;
}

function addMessage(role, text = "") {
  const el = document.createElement("div");
  el.className = `msg ${role}`;
  el.textContent = text;
  $("messages").append(el);
  $("messages").scrollTop = $("messages").scrollHeight;
  return el;
}

for (const id of ["temperature", "top-p"]) {
  $(id).addEventListener("input", () => ($(`${id}-out`).value = $(id).value));
}
if (params.get("model")) $("model-url").value = params.get("model");
if (params.get("worker") === "0") $("use-worker").checked = false;

async function load() {
  showError("");
  const file = $("model-file").files[0];
  const source = file ?? $("model-url").value.trim();
  if (!source) return showError("Give a model URL or choose a .gguf file.");
  setBusy(true);
  $("load").disabled = true;
  const old = engine;
  engine = null;
  await old?.dispose().catch(() => {});
  const started = performance.now();
  const onProgress = ({ phase, loaded, total }) => {
    if (total) $("progress").value = loaded / total;
    const of = total ? ` / ${mb(total)}` : "";
    $("progress-label").textContent = phase === "ready" ? "ready" : `${phase} ${mb(loaded)}${of}`;
  };
  const options = {
    onProgress,
    cache: $("use-cache").checked,
    contextLength: Number($("ctx-len").value) || undefined,
  };
  try {
    engine = $("use-worker").checked
      ? await WorkerEngine.load(source, options)
      : await Engine.load(source, options);
    const secs = (performance.now() - started) / 1000;
    const i = engine.info();
    $("progress").value = 1;
    $("progress-label").textContent = `loaded in ${secs.toFixed(1)} s`;
    $("info").textContent =
      `${i.model.name ?? i.model.architecture} · ${i.adapter.name || i.adapter.backend}` +
      `${i.adapter.isSoftware ? " (software)" : ""} · ${i.computePath} path` +
      ` (shader-f16 ${i.features.shaderF16 ? "available" : "not available"})` +
      ` · context ${i.model.contextLength}`;
    if (!i.model.hasChatTemplate) showError("This model has no chat template: the chat view cannot format a conversation for it.");
    document.body.dataset.loaded = "1";
  } catch (e) {
    engine = null;
    $("progress").value = 0;
    $("progress-label").textContent = "";
    showError(`Could not load the model: ${e.message}`);
  } finally {
    setBusy(false);
  }
}

async function send() {
  const text = $("prompt").value.trim();
  if (!text || !engine) return;
  $("prompt").value = "";
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const out = addMessage("assistant");
  out.classList.add("streaming");
  abort = new AbortController();
  setBusy(true);
  let reply = "";
  let tokens = 0;
  let first = 0;
  let finish = "";
  try {
    const stream = await engine.chat.completions.create({
      messages: history,
      stream: true,
      max_tokens: Number($("max-tokens").value) || 128,
      temperature: Number($("temperature").value),
      top_p: Number($("top-p").value),
    }, { signal: abort.signal });
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      const delta = choice.delta.content ?? "";
      if (delta) {
        tokens += 1;
        if (tokens === 1) first = performance.now();
        reply += delta;
        out.textContent = reply;
        $("messages").scrollTop = $("messages").scrollHeight;
        if (tokens > 1) {
          const tps = (tokens - 1) / ((performance.now() - first) / 1000);
          $("tps").textContent = `${tps.toFixed(2)} tokens/s`;
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else showError(`Generation failed: ${e.message}`);
  } finally {
    out.classList.remove("streaming");
    const s = engine?.lastResult?.stats;
    if (s && finish !== "stopped") {
      $("tps").textContent = `${s.decodeTokensPerSecond.toFixed(2)} tokens/s` +
        ` · prefill ${s.prefillTokensPerSecond.toFixed(1)} tokens/s`;
    }
    const meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = finish ? `(${finish})` : "";
    out.append(meta);
    history.push({ role: "assistant", content: reply });
    abort = null;
    setBusy(false);
    document.body.dataset.replies = String(Number(document.body.dataset.replies ?? 0) + 1);
  }
}

$("load-form").addEventListener("submit", (e) => {
  e.preventDefault();
  load();
});
$("model-file").addEventListener("change", () => {
  if ($("model-file").files[0]) load();
});
$("chat-form").addEventListener("submit", (e) => {
  e.preventDefault();
  send();
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    if (!$("send").disabled) send();
  }
});
$("stop").addEventListener("click", () => abort?.abort());
$("clear").addEventListener("click", () => {
  history = [];
  $("messages").replaceChildren();
});

if (!navigator.gpu) {
  showError(`${NO_WEBGPU}.`);
  $("load").disabled = true;
  document.body.dataset.nowebgpu = "1";
} else if (params.has("autoload")) {
  load();
}
