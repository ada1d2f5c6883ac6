#!/usr/bin/env bash
# cargo's runner for the test binaries of scripts/test.sh: runs one with
# libtest's `--report-time`, so each test's line carries its seconds
# ("test x ... ok <12.345s>") and scripts/slowest.py can rank them.
#
# The flag is unstable in libtest; RUSTC_BOOTSTRAP=1 lets a stable test
# binary accept it. It is set here, for the test binary alone, and never for
# cargo: build scripts (proc-macro2's, anyhow's, thiserror's) read it, so
# setting it for the build would rebuild the dependency tree.
RUSTC_BOOTSTRAP=1 exec "$@" -Z unstable-options --report-time
