#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""planforge.py IN OUT EDIT: a plan rewritten as a hostile editor would.

EDIT is Python run with `header` (the header line, a dict) and `entries`
(the entry lines, a list of dicts) in scope; it may change, add, remove or
reorder them. The entries are then numbered again from 1 ("n"), the header's
"entries" set to their count and its digest computed again (XXH3-128 over
the entry lines, then id, shards and entries, via xxh128sum), so the plan
reader's own checks (order, count, digest) pass: only what the plan's names
and numbers say is left to refuse. --keep-n leaves the numbers as EDIT set
them. Plain plans only.
"""
import json
import subprocess
import sys


def main():
    args = sys.argv[1:]
    keep_n = "--keep-n" in args
    args = [a for a in args if a != "--keep-n"]
    if len(args) != 3:
        sys.exit(__doc__)
    src, dst, edit = args
    with open(src, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    header = json.loads(lines[0].decode("utf-8", "surrogateescape"))
    entries = [json.loads(l.decode("utf-8", "surrogateescape")) for l in lines[1:]]
    exec(edit, {"header": header, "entries": entries, "json": json})
    if not keep_n:
        for i, e in enumerate(entries):
            e["n"] = i + 1
    header["entries"] = len(entries)
    body = b"".join(
        json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")
        + b"\n"
        for e in entries
    )
    tail = "\n%s\n%d\n%d\n" % (header["id"], header["shards"], header["entries"])
    out = subprocess.run(["xxh128sum"], input=body + tail.encode(), capture_output=True, check=True)
    header["digest"] = out.stdout.split()[0].decode()
    with open(dst, "wb") as f:
        f.write(json.dumps(header, separators=(",", ":")).encode() + b"\n" + body)


main()
