// Typed errors: every error wick throws on purpose is a WickError subclass
// with a stable `name` and `code`, so callers branch on `instanceof` or
// `code` rather than on message text. The wasm side tags its errors with a
// `code` (crates/web/src/lib.rs, `js_wick_err`); `typedError` turns such an
// error, or one rebuilt from a worker message, into its class.

export class WickError extends Error {
  constructor(message, code, details = {}) {
    super(message);
    this.name = "WickError";
    this.code = code;
    Object.assign(this, details);
  }
}

/** The page has no WebGPU, or no adapter or device could be opened. */
export class WebGPUUnavailableError extends WickError {
  constructor(message, details) {
    super(message, "webgpu_unavailable", details);
    this.name = "WebGPUUnavailableError";
  }
}

/** The file is not a model wick can run: bad bytes, an unsupported architecture or quant type. */
export class ModelLoadError extends WickError {
  constructor(message, details) {
    super(message, "model_load", details);
    this.name = "ModelLoadError";
  }
}

/** The prompt (plus what is already cached) does not fit the context: `promptTokens`, `contextLength`. */
export class ContextWindowExceededError extends WickError {
  constructor(message, details) {
    super(message, "context_window_exceeded", details);
    this.name = "ContextWindowExceededError";
  }
}

/** A request field wick does not implement (or a value of it): `field` names it. */
export class UnsupportedFieldError extends WickError {
  constructor(field, why) {
    super(`${field}: ${why}`, "unsupported_field", { field });
    this.name = "UnsupportedFieldError";
  }
}

/** A request field with a value outside what it accepts: `field` names it. */
export class InvalidRequestError extends WickError {
  constructor(field, why) {
    super(`${field}: ${why}`, "invalid_request", { field });
    this.name = "InvalidRequestError";
  }
}

/**
 * wick's WebAssembly could not be fetched or is not WebAssembly: `url` names
 * where it was looked for. The usual cause is a bundler that did not emit the
 * .wasm where the module looks for it, so the server answered with its HTML page.
 */
export class WasmLoadError extends WickError {
  constructor(message, details) {
    super(message, "wasm_load", details);
    this.name = "WasmLoadError";
  }
}

/** The GPU device was lost; this engine is unusable, `Engine.load` works again. */
export class DeviceLostError extends WickError {
  constructor(message, details) {
    super(message, "device_lost", details);
    this.name = "DeviceLostError";
  }
}

/**
 * The GPU ran out of memory (a buffer the device could not allocate, or the
 * device's uncaptured out-of-memory error): this engine is unusable; free
 * memory (a smaller model or context) and `Engine.load` again.
 */
export class OutOfMemoryError extends WickError {
  constructor(message, details) {
    super(message, "out_of_memory", details);
    this.name = "OutOfMemoryError";
  }
}

/**
 * The GPU reported a validation error (a bug in wick, or a device in a bad
 * state): this engine is unusable, `Engine.load` works again.
 */
export class GpuValidationError extends WickError {
  constructor(message, details) {
    super(message, "gpu_validation", details);
    this.name = "GpuValidationError";
  }
}

/**
 * The model does not fit the browser's storage: `needed` bytes to store
 * it (what is not cached yet), `available` bytes the origin's quota leaves
 * (with what a stale copy of the same file would free). Nothing was
 * downloaded; load with `cache: false` to stream it without storing it.
 */
export class StorageQuotaError extends WickError {
  constructor(message, details) {
    super(message, "storage_quota", details);
    this.name = "StorageQuotaError";
  }
}

/**
 * A model download failed: the server refused it (an HTTP status), or a
 * chunk still failed after every retry. `url` names the file and `offset`
 * the first byte that could not be fetched.
 */
export class DownloadError extends WickError {
  constructor(message, details) {
    super(message, "download", details);
    this.name = "DownloadError";
  }
}

/** Errors after which an engine is unusable: every later call throws them again. */
export function isFatal(e) {
  return e instanceof DeviceLostError || e instanceof OutOfMemoryError || e instanceof GpuValidationError;
}

/** The caller aborted (its AbortSignal). `name` is "AbortError", as fetch's. */
export class AbortError extends WickError {
  constructor(message = "The operation was aborted.") {
    super(message, "aborted");
    this.name = "AbortError";
  }
}

const BY_CODE = {
  webgpu_unavailable: WebGPUUnavailableError,
  model_load: ModelLoadError,
  context_window_exceeded: ContextWindowExceededError,
  device_lost: DeviceLostError,
  out_of_memory: OutOfMemoryError,
  gpu_validation: GpuValidationError,
  wasm_load: WasmLoadError,
  storage_quota: StorageQuotaError,
  download: DownloadError,
};

/**
 * The typed form of `e`: wasm errors tagged with a known `code` (and errors
 * rebuilt from a worker's { name, message, code, details }) become their
 * class; everything else is returned as it is.
 */
export function typedError(e) {
  if (e instanceof WickError) return e;
  if (e?.name === "AbortError") return new AbortError(e.message);
  if (e?.code === "unsupported_field") return new UnsupportedFieldError(e.field ?? "request", e.message);
  if (e?.code === "invalid_request") return new InvalidRequestError(e.field ?? "request", e.message);
  const Class = BY_CODE[e?.code];
  if (!Class) return e;
  return new Class(e.message, { ...(e.details ?? {}), ...detailsOf(e) });
}

/** What crosses from the worker: enough to rebuild the same class. */
export function errorMessage(e) {
  return { name: e?.name ?? "Error", message: e?.message ?? String(e), code: e?.code, field: e?.field, details: detailsOf(e) };
}

/** The details a typed error carries (ContextWindowExceededError's numbers and embeddings' inputIndex, WasmLoadError's url, ModelLoadError's file, StorageQuotaError's needed and available, DownloadError's url, offset and status). */
function detailsOf(e) {
  const details = {};
  for (const k of ["promptTokens", "contextLength", "cachedTokens", "url", "inputIndex", "file", "needed", "available", "offset", "status"]) {
    if (e?.[k] !== undefined) details[k] = e[k];
  }
  return details;
}
