#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/archcheck.py [--strict]: the measures of the code's shape.

Prints, for src/ client/ daemon/ proto/:
  - .c files over 800 lines;
  - functions over 60 lines on the data path (src/engine*, src/xport*, proto/)
    and over 100 lines anywhere (extents from ctags);
  - call cycles between files: a file calls another when it names a function
    defined there (and not static); a cycle is a strongly connected set;
  - the members of struct engine and struct efile.
--strict: exit 1 when a file, a function or a cycle is over its measure.
Needs universal-ctags.
"""
import json
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["src", "client", "daemon", "proto"]
FILE_MAX, FN_DATA_MAX, FN_MAX = 800, 60, 100


def sources():
    out = []
    for d in DIRS:
        for root, _, names in os.walk(os.path.join(TOP, d)):
            out += [os.path.relpath(os.path.join(root, n), TOP) for n in names
                    if n.endswith(".c") or n.endswith(".h")]
    return sorted(out)


def data_path(path):
    base = os.path.basename(path)
    return (path.startswith("proto/") or base.startswith("engine")
            or base.startswith("xport") or "/xport" in path)


def tags(files):
    r = subprocess.run(["ctags", "--output-format=json", "--fields=+neS", "--c-kinds=f",
                        "-o", "-"] + files, cwd=TOP, capture_output=True, text=True,
                       check=True)
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def links(f, g):
    """Can f's program reach g? client/ and daemon/ are two programs over src/ and proto/."""
    top_f, top_g = f.split("/")[0], g.split("/")[0]
    return top_g == top_f or top_g in ("src", "proto")


def cycles(files, fns):
    defined = {}
    for t in fns:
        if t.get("file") is True or "static" in t.get("pattern", "")[:20]:
            continue
        defined.setdefault(t["name"], set()).add(t["path"])
    unit = lambda p: p[:-2] if p.endswith((".c", ".h")) else p
    own = {}
    for t in fns:
        own.setdefault(unit(t["path"]), set()).add(t["name"])
    edges = {}
    for f in files:
        if not f.endswith(".c"):
            continue
        with open(os.path.join(TOP, f), errors="replace") as fh:
            words = set(re.findall(r"(?<![.>\w])([A-Za-z_]\w*)\s*\(", strip(fh.read())))
        for w in words - own.get(unit(f), set()):
            for g in defined.get(w, ()):
                if unit(g) != unit(f) and links(f, g):
                    edges.setdefault(unit(f), set()).add(unit(g))
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def members(struct):
    text = ""
    for name in ("src/engine-internal.h", "src/engine_file.h"):
        with open(os.path.join(TOP, name)) as fh:
            text += "\n" + strip(fh.read())
    m = re.search(r"\nstruct %s \{(.*?)\n\};" % struct, text, re.S)
    if not m:
        return 0
    body = re.sub(r"\{[^{}]*\}", ";", m.group(1))
    count = 0
    for decl in body.split(";"):
        decl = decl.strip()
        if decl:
            count += decl.count(",") + 1
    return count


def main():
    strict = "--strict" in sys.argv[1:]
    files = sources()
    over = []
    total = 0
    for f in files:
        with open(os.path.join(TOP, f), errors="replace") as fh:
            lines = sum(1 for _ in fh)
        if f.endswith(".c"):
            total += lines
        if f.endswith(".c") and lines > FILE_MAX:
            over.append((lines, f))
    fns = [t for t in tags(files) if t.get("kind") == "function" and "end" in t]
    long_data, long_any = [], []
    for t in fns:
        n = t["end"] - t["line"] + 1
        if data_path(t["path"]) and n > FN_DATA_MAX:
            long_data.append((n, t["name"], t["path"]))
        if n > FN_MAX:
            long_any.append((n, t["name"], t["path"]))
    cyc = cycles(files, fns)
    print("C in %s: %d lines, %d .c files" % (" ".join(DIRS), total,
                                            sum(f.endswith(".c") for f in files)))
    print(".c files over %d lines: %d" % (FILE_MAX, len(over)))
    for lines, f in sorted(over, reverse=True):
        print("  %5d %s" % (lines, f))
    print("data-path functions over %d lines: %d" % (FN_DATA_MAX, len(long_data)))
    for n, name, path in sorted(long_data, reverse=True)[:15]:
        print("  %5d %s (%s)" % (n, name, path))
    print("functions over %d lines: %d" % (FN_MAX, len(long_any)))
    for n, name, path in sorted(long_any, reverse=True)[:15]:
        print("  %5d %s (%s)" % (n, name, path))
    print("call cycles between files: %d" % len(cyc))
    for c in cyc:
        print("  %d files: %s" % (len(c), " ".join(c) if len(c) <= 12 else
                                   " ".join(c[:12]) + " ..."))
    print("struct engine members: %d; struct efile members: %d" %
          (members("engine"), members("efile")))
    if strict and (over or long_data or long_any or cyc):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
