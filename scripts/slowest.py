#!/usr/bin/env python3
"""Where a test run's time went: the slowest tests and the slowest files.

usage: scripts/slowest.py native LOG   (cargo test's output, with --report-time)
       scripts/slowest.py web TSV      (web/test/timings-reporter.mjs's lines)
       option: --top N (default 15)

Reads what scripts/test.sh keeps of each part (lines may carry a
"[native] " or "[web] " prefix) and prints two tables: the N slowest
tests, and every test binary (cargo) or test file (node) with its own time.
A file's time includes its before/after hooks (a browser launch, a model
load), which no single test's time does.
"""

import re
import sys

PREFIX = re.compile(r"^\[(native|unit|integration|encoders|web)\] ")


def lines_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            yield PREFIX.sub("", line.rstrip("\n"))


def native(path):
    """(tests, binaries): [(seconds, name)] from cargo test's output (the
    binaries that took under 0.05 s are left out: most hold no tests)."""
    running = re.compile(r"^\s*Running (.+?) \((?:.*/)?([^/]+?)(?:-[0-9a-f]{16})?\)$")
    doc = re.compile(r"^\s*Doc-tests (\S+)")
    test = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)(?: <([0-9.]+)s>)?$")
    finished = re.compile(r"^test result: .*finished in ([0-9.]+)s")
    tests, binaries, current = [], [], "?"
    for line in lines_of(path):
        if m := running.match(line):
            what, binary = m.groups()
            current = what if what.startswith("tests/") else f"{binary} {what}"
        elif m := doc.match(line):
            current = f"doc-tests {m.group(1)}"
        elif (m := test.match(line)) and m.group(3):
            tests.append((float(m.group(3)), f"{current}: {m.group(1)}"))
        elif (m := finished.match(line)) and float(m.group(1)) >= 0.05:
            binaries.append((float(m.group(1)), current))
    return tests, binaries


def web(path):
    """(tests, files): [(seconds, name)] from web/test/timings-reporter.mjs's
    tab-separated lines ("test" or "file", seconds, name)."""
    tests, files = [], []
    for line in lines_of(path):
        kind, _, rest = line.partition("\t")
        seconds, _, name = rest.partition("\t")
        if kind in ("test", "file") and name:
            (tests if kind == "test" else files).append((float(seconds), name))
    return tests, files


def table(title, rows, top):
    rows = sorted(rows, reverse=True)[:top] if top else sorted(rows, reverse=True)
    print(f"{title}:")
    if not rows:
        print("  (none found)")
    for seconds, name in rows:
        print(f"  {seconds:8.1f} s  {name}")


def main(argv):
    top = 15
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        del argv[i : i + 2]
    if len(argv) != 2 or argv[0] not in ("native", "web"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, path = argv
    if kind == "native":
        tests, groups = native(path)
        table(f"the {top} slowest native tests", tests, top)
        table("native test binaries", groups, 0)
    else:
        tests, groups = web(path)
        table(f"the {top} slowest browser tests", tests, top)
        table("browser test files (hooks included)", groups, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
