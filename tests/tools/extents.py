#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print a file's data extents as SEEK_DATA/SEEK_HOLE see them: one
"OFFSET LENGTH" line per data run, then "size SIZE". Two files with the same
holes print the same lines (for the sparse tests)."""
import os
import sys


def extents(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        out, off = [], 0
        while off < size:
            try:
                data = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:  # ENXIO: nothing but a hole to the end
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            out.append((data, min(hole, size) - data))
            off = hole
        return out, size
    finally:
        os.close(fd)


def main():
    if len(sys.argv) != 2:
        print("usage: extents.py FILE", file=sys.stderr)
        return 2
    ext, size = extents(sys.argv[1])
    for off, length in ext:
        print(off, length)
    print("size", size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
