// A node:test reporter that records where a browser test run's time went:
// each test's own duration, and each test file's span from its first event
// to its last (its hooks included: a browser launch, a model load, which no
// test's duration counts). It writes nothing to its destination; it appends
// tab-separated lines ("test" or "file", seconds, name) to the file named
// by WICK_TEST_TIMINGS, which scripts/slowest.py ranks. Without that
// variable it does nothing, so `npm test` alone is unchanged.
//
// use: node --test --test-reporter=tap --test-reporter-destination=stdout \
//        --test-reporter=./web/test/timings-reporter.mjs --test-reporter-destination=stdout FILES

import { appendFileSync, mkdirSync } from "node:fs";
import path from "node:path";

export default async function* timings(source) {
  const out = process.env.WICK_TEST_TIMINGS;
  const files = new Map();
  const lines = [];
  const name = (file) => (file ? path.relative(process.cwd(), file) : "?");
  for await (const { type, data } of source) {
    if (!out) continue;
    // A file's enqueue comes while the file before it still runs (the
    // runner queues them all at the start); its span starts at its dequeue.
    if (data?.file && type !== "test:enqueue") {
      const now = performance.now();
      const span = files.get(data.file) ?? { first: now, last: now };
      span.last = now;
      files.set(data.file, span);
    }
    if ((type === "test:pass" || type === "test:fail") && data.details?.type !== "suite") {
      const seconds = (data.details?.duration_ms ?? 0) / 1000;
      lines.push(`test\t${seconds.toFixed(2)}\t${name(data.file)}: ${data.name}`);
    }
  }
  if (!out) return;
  for (const [file, span] of files) {
    lines.push(`file\t${((span.last - span.first) / 1000).toFixed(2)}\t${name(file)}`);
  }
  mkdirSync(path.dirname(out), { recursive: true });
  appendFileSync(out, lines.map((l) => `${l}\n`).join(""));
}
