#!/usr/bin/env node
// Regenerates the fixture apps' package-lock.json after a change to their
// package.json, without the "resolved" fields: those name a registry host,
// and `npm ci` fetches each package from the configured registry by name,
// version and "integrity" without them.
//
// usage: node web/test/bundlers/relock.mjs

import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
for (const app of ["vite-app", "webpack-app"]) {
  const dir = path.join(here, app);
  execFileSync("npm", ["install", "--package-lock-only", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
  const file = path.join(dir, "package-lock.json");
  const lock = JSON.parse(readFileSync(file, "utf8"));
  for (const entry of Object.values(lock.packages ?? {})) delete entry.resolved;
  writeFileSync(file, JSON.stringify(lock, null, 2) + "\n");
  console.log(`${file}: ${Object.keys(lock.packages).length - 1} packages, no "resolved"`);
}
