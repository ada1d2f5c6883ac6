#!/usr/bin/env node
// A small static server for the demo and the browser tests: serves the
// repository root (web/demo, web/src, web/pkg ...) and /models/ from
// $WICK_MODELS_DIR (default models/), with Range requests (206) so models
// stream in parts. `?norange` on a URL makes it ignore Range (a plain 200).
// Files carry an ETag and Last-Modified. For the download tests: `?cut=N`
// drops the connection once per URL (`&times=K`: K times), after the bytes
// before offset N of a response that covers N; `?fail=N` answers 503 to a
// Range request over N (once, or `&times=K`); `control.etags` overrides a path's ETag and
// `control.files` the file served at a path (a changed file); `control.requests` logs every
// request with the bytes sent.
// Listens on 127.0.0.1 only.
//
// usage: node web/tools/serve.mjs [--port N] [--root DIR]

import { createReadStream, existsSync, promises as fs } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".ts": "text/plain; charset=utf-8",
  ".md": "text/plain; charset=utf-8",
};

function resolvePath(root, modelsDir, urlPath) {
  const clean = path.posix.normalize(decodeURIComponent(urlPath));
  if (clean.includes("\0") || clean.split("/").includes("..")) return null;
  if (clean.startsWith("/models/")) {
    // The small test models live in the repo (tests/fixtures/models) or
    // beside it (../shared/models): looked for there where models/ lacks them.
    const name = clean.slice("/models/".length);
    const fetched = path.join(modelsDir, name);
    const fixtures = [path.join(root, "tests/fixtures/models", name), path.join(root, "../shared/models", name)];
    return existsSync(fetched) ? fetched : fixtures.find((f) => existsSync(f)) ?? fetched;
  }
  return path.join(root, clean);
}

/**
 * Starts the server; resolves to { server, url, port, control }. control:
 * `requests` ({ method, path, range, status, start, end, sent } per request,
 * `sent` the body bytes written, `etag` the ETag answered), `etags` (a Map
 * of path -> ETag that replaces the file's own), `files` (a Map of path ->
 * the file on disk served there instead: the same URL, other bytes).
 */
export function startServer({ root = repoRoot, port = 0, modelsDir } = {}) {
  modelsDir ??= process.env.WICK_MODELS_DIR || path.join(root, "models");
  const control = { requests: [], etags: new Map(), files: new Map(), cut: new Map() };
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, "http://localhost");
      const entry = { method: req.method, path: url.pathname + url.search, range: req.headers.range ?? null, status: 0, sent: 0 };
      control.requests.push(entry);
      let file = control.files.get(url.pathname) ?? resolvePath(root, modelsDir, url.pathname);
      if (!file) return send(res, 400, "bad path");
      let st = await fs.stat(file).catch(() => null);
      if (st?.isDirectory()) {
        if (!url.pathname.endsWith("/")) {
          res.writeHead(301, { Location: url.pathname + "/" + url.search });
          return res.end();
        }
        file = path.join(file, "index.html");
        st = await fs.stat(file).catch(() => null);
      }
      if (!st?.isFile()) return send(res, 404, `not found: ${url.pathname}`);
      const headers = {
        "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream",
        "Cache-Control": "no-store",
        "Accept-Ranges": url.searchParams.has("norange") ? "none" : "bytes",
        ETag: control.etags.get(url.pathname) ?? `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`,
        "Last-Modified": st.mtime.toUTCString(),
      };
      entry.etag = headers.ETag;
      // The body bytes start..end, cut before `?cut=N` once per URL; or a 503
      // for a range over `?fail=N` (K times with `&times=K`).
      const body = (start, end) => {
        Object.assign(entry, { start, end, sent: req.method === "HEAD" ? 0 : Math.max(0, end - start + 1) });
        // HEAD, and an empty file (end = start - 1: no stream can cover it).
        if (req.method === "HEAD" || end < start) return res.end();
        const cutAt = url.searchParams.has("cut") ? Number(url.searchParams.get("cut")) : NaN;
        const key = url.pathname + url.search;
        const times = Number(url.searchParams.get("times") ?? 1);
        if (cutAt >= start && cutAt <= end && (control.cut.get(key) ?? 0) < times) {
          control.cut.set(key, (control.cut.get(key) ?? 0) + 1);
          entry.sent = cutAt - start;
          const part = createReadStream(file, { start, end: cutAt - 1 });
          part.on("end", () => setTimeout(() => res.destroy(), 20));
          return part.pipe(res, { end: false });
        }
        createReadStream(file, { start, end }).pipe(res);
      };
      const range = url.searchParams.has("norange") ? null : req.headers.range;
      const m = range && /^bytes=(\d*)-(\d*)$/.exec(range);
      if (m && (m[1] || m[2])) {
        let start = m[1] ? Number(m[1]) : Math.max(0, st.size - Number(m[2]));
        let end = m[1] && m[2] ? Math.min(Number(m[2]), st.size - 1) : st.size - 1;
        if (start >= st.size || start > end) {
          res.writeHead(416, { "Content-Range": `bytes */${st.size}` });
          return res.end();
        }
        const failAt = url.searchParams.has("fail") ? Number(url.searchParams.get("fail")) : NaN;
        const key = `fail ${url.pathname}${url.search}`;
        if (failAt >= start && failAt <= end && (control.cut.get(key) ?? 0) < Number(url.searchParams.get("times") ?? 1)) {
          control.cut.set(key, (control.cut.get(key) ?? 0) + 1);
          Object.assign(entry, { start, end, status: 503 });
          return send(res, 503, "failing on purpose (?fail)");
        }
        headers["Content-Range"] = `bytes ${start}-${end}/${st.size}`;
        headers["Content-Length"] = end - start + 1;
        res.writeHead((entry.status = 206), headers);
        return body(start, end);
      }
      headers["Content-Length"] = st.size;
      res.writeHead((entry.status = 200), headers);
      body(0, st.size - 1);
    } catch (e) {
      send(res, 500, String(e));
    }
  });
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const p = server.address().port;
      resolve({ server, port: p, url: `http://127.0.0.1:${p}`, control });
    });
  });
}

function send(res, status, text) {
  if (res.headersSent) return res.destroy();
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(text);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, d) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : d;
  };
  const { url } = await startServer({ port: Number(opt("--port", 8080)), root: opt("--root", repoRoot) });
  console.log(`serving ${opt("--root", repoRoot)} at ${url}`);
}
