#!/usr/bin/env python3
"""The crates' import graphs: upward edges between the engine's layers, and
cycles in every crate.

usage: scripts/imports.py [--edges]

Reads each crate's src (test files and `#[cfg(test)]` modules left out),
takes each `crate::a::b` and `super::` path a file names, and prints:

- the edges that go up the layers, which run, bottom to top:
  format, tokenizer -> gpu -> kernels -> model -> constrain, tools ->
  pipeline -> preflight -> engine, embedding (the encoders' engine) ->
  completion, hf_folder;
  `error` (WickError) is the engine's, and `testutil` beside the tests;
- the cycles between the top-level modules, and between the files of each
  folder, of the engine, the CLI, the wasm crate and the fuzzer (strongly
  connected components of more than one node);
- with --edges, every edge between top-level modules.

Exits 1 when it finds an upward edge or a cycle.
"""

import os
import re
import sys
from collections import defaultdict

CRATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")
ENGINE = "engine"
OTHERS = ("cli", "web", "fuzz")

LAYERS = {
    "format": 0,
    "tokenizer": 0,
    "gpu": 1,
    "kernels": 2,
    "model": 3,
    "constrain": 4,
    "tools": 4,
    "pipeline": 5,
    "preflight": 6,
    "engine": 7,
    "embedding": 7,
    "completion": 8,
    "hf_folder": 8,
    "error": 7,
}

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*?)\}", re.S)


def module_of(root, path):
    """`kernels/matmul/linear/mod.rs` -> ["kernels", "matmul", "linear"]."""
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def is_test_file(path):
    name = os.path.basename(path)
    return name.endswith("_tests.rs") or name == "tests.rs" or "/tests/" in path or name == "testutil.rs"


def code_of(text):
    """The file without its `#[cfg(test)]` items and its comments."""
    out, skip_depth, depth, pending = [], None, 0, False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        if skip_depth is None and stripped.startswith("#[cfg(test)]"):
            pending = True
            continue
        if pending:
            pending = False
            if stripped.endswith(";"):
                continue  # `mod tests;`, `use ...;`
            skip_depth = depth
        opens, closes = line.count("{"), line.count("}")
        if skip_depth is None:
            out.append(line)
        depth += opens - closes
        if skip_depth is not None and depth <= skip_depth and (opens or closes):
            skip_depth = None
    return "\n".join(out)


def targets(module, code):
    """The modules `code` (of `module`) names, as absolute paths."""
    found = []
    for m in GROUP.finditer(code):
        base = m.group(1), m.group(2)
        for item in re.split(r",(?![^{]*\})", m.group(3)):
            item = item.strip().split(" as ")[0]
            if item:
                found.append((base[0], base[1] + "::" + item.split("::{")[0]))
    for m in PATH.finditer(code):
        found.append((m.group(1), m.group(2)))
    paths = []
    for root, rest in found:
        parts = [p for p in rest.split("::") if p]
        if root == "crate":
            paths.append(parts)
        else:
            up = module[:-1] if module else []
            while parts and parts[0] == "super":
                parts, up = parts[1:], up[:-1]
            paths.append(up + parts)
    return paths


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def graph(crate):
    """The crate's edges between top-level modules, and between the files
    of each folder."""
    root = os.path.join(CRATES, crate, "src")
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if n.endswith(".rs") and not is_test_file(p):
                files[tuple(module_of(root, p))] = p
    modules = set(files)
    top = defaultdict(set)
    folder = defaultdict(lambda: defaultdict(set))
    for module, path in files.items():
        code = code_of(open(path, encoding="utf-8").read())
        for target in targets(list(module), code):
            # The longest known module the path names.
            t = tuple(target)
            while t and t not in modules:
                t = t[:-1]
            if not t or t == module or not module:
                continue
            if t[0] != module[0]:
                top[module[0]].add(t[0])
            # Files of one folder: the children of their common parent.
            n = 0
            while n < min(len(t), len(module)) and t[n] == module[n]:
                n += 1
            if n < len(module) and n < len(t):
                parent = module[:n]
                a, b = module[: n + 1], t[: n + 1]
                if a != b and parent:
                    folder[parent][a[-1]].add(b[-1])
    return top, folder


def main(argv):
    top, folder = graph(ENGINE)
    bad = 0
    print("upward edges between layers:")
    for a in sorted(top):
        for b in sorted(top[a]):
            if a in LAYERS and b in LAYERS and LAYERS[b] > LAYERS[a]:
                print(f"  {a} -> {b}")
                bad += 1
    if not bad:
        print("  none")
    cycles = sccs({k: v for k, v in top.items()})
    print("cycles between top-level modules:")
    for c in cycles:
        print("  " + ", ".join(c))
        bad += 1
    if not cycles:
        print("  none")
    print("cycles between the files of a folder:")
    found = 0
    for parent in sorted(folder):
        for c in sccs(folder[parent]):
            print(f"  {'/'.join(parent)}/: " + ", ".join(c))
            found += 1
    if not found:
        print("  none")
    bad += found
    for crate in OTHERS:
        other_top, other_folder = graph(crate)
        print(f"cycles in crates/{crate}:")
        found = 0
        for c in sccs(dict(other_top)):
            print("  " + ", ".join(c))
            found += 1
        for parent in sorted(other_folder):
            for c in sccs(other_folder[parent]):
                print(f"  {'/'.join(parent)}/: " + ", ".join(c))
                found += 1
        if not found:
            print("  none")
        bad += found
    if "--edges" in argv:
        print("edges between top-level modules:")
        for a in sorted(top):
            print(f"  {a} -> {', '.join(sorted(top[a]))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
