// Split GGUF in the page (llama.cpp's gguf-split shards), in Chromium: the
// tiny qwen3 fixture cut into 3 shards by the native CLI (`wick split`, into
// test-output/split/) loads by its first shard's URL and by a list of Files,
// and gives the same greedy ids as the unsplit file in the same page; with
// `cache: true` each shard is kept and a second load (a list of URLs) reads
// them from the cache; the worker engine takes a list too; progress counts
// the bytes of all shards; a shard the server does not have (404) is a
// ModelLoadError naming it. The check is in split-checks.mjs (Firefox runs
// it too, firefox.test.mjs).
//
// run: node --test web/test/split.test.mjs   (after npm run build)

import { after, before, test } from "node:test";
import { checkBuilt, launch, openTestPage, startServer } from "./harness.mjs";
import { checkSplitLoads, writeShards } from "./split-checks.mjs";

const log = (s) => console.log(s);
let server, browser, page, sizes;

before(async () => {
  checkBuilt();
  sizes = writeShards();
  let base;
  ({ server, url: base } = await startServer());
  browser = await launch();
  page = await openTestPage(browser, base, log);
});

after(async () => {
  await browser?.close();
  server?.close();
});

test("a split model loads by its first shard's URL and by a list, as its unsplit file", { timeout: 240_000 }, () =>
  checkSplitLoads(page, sizes, log));
