// webpack 5 with no loaders or plugins: its own handling of
// `new Worker(new URL(..., import.meta.url))` and `new URL(..., import.meta.url)`
// emits wick's worker chunk and its .wasm.
import path from "node:path";
import { fileURLToPath } from "node:url";

export default {
  entry: "./src/main.js",
  output: { path: path.join(path.dirname(fileURLToPath(import.meta.url)), "dist"), clean: true },
  // The .wasm is 4 MB: an expected size, not a warning.
  performance: { hints: false },
};
