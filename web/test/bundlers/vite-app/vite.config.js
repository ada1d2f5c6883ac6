import { defineConfig } from "vite";

export default defineConfig({
  // The setting wick needs under the dev server: its pre-bundling copies
  // wick's modules into node_modules/.vite/deps/, away from the .wasm and
  // worker they find with `new URL(..., import.meta.url)`. `vite build` does
  // not need it.
  optimizeDeps: { exclude: ["wick"] },
  // The test serves the model from its own server (same origin for the page).
  server: { proxy: { "/models": process.env.WICK_MODEL_SERVER ?? "http://127.0.0.1:8080" } },
  logLevel: "warn",
});
