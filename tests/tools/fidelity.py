#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A tree with every entry type and attribute rsync -aHAX --owner keeps, the
changes a migration's cut-over meets, and an attribute-by-attribute compare.

  fidelity.py make DIR      build the tree (run as root: owners)
  fidelity.py meta DIR      metadata-only changes (chmod, chown, touch,
                            xattrs and ACLs added, changed, removed)
  fidelity.py change DIR    after meta: content, file -> dir, symlink
                            retargeted, hard link broken, xattr and ACL
                            changed with the content, deletions
  fidelity.py compare A B   every entry's type, mode, owner, size, mtime (ns),
                            link target, xattrs, ACLs and hard-link group;
                            prints each difference, exit 1 if any
"""
import os
import stat
import struct
import sys

U = 0xFFFFFFFF


def acl(*ents):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in ents)


def mtime(path, sec, nsec):
    os.utime(path, ns=(sec * 10**9 + nsec, sec * 10**9 + nsec), follow_symlinks=False)


def write(path, data, mode=0o644, owner=(0, 0)):
    with open(path, "wb") as f:
        f.write(data)
    os.chown(path, *owner)
    os.chmod(path, mode)


def make(root):
    os.makedirs(root, exist_ok=True)
    j = os.path.join
    os.mkdir(j(root, "open"))
    os.mkdir(j(root, "private"))
    os.mkdir(j(root, "ro"))
    os.mkdir(j(root, "open/deep"))
    write(j(root, "open/a"), b"a" * 1000, 0o644, (1001, 1002))
    write(j(root, "open/b"), b"b" * 5000, 0o640, (1003, 1004))
    write(j(root, "open/deep/c"), os.urandom(70000), 0o600, (1005, 1005))
    write(j(root, "open/suid"), b"#!/bin/sh\n", 0o4755, (0, 0))
    write(j(root, "open/sgid"), b"#!/bin/sh\n", 0o2755, (1001, 1002))
    write(j(root, "private/secret"), b"s" * 300, 0o600, (1006, 1006))
    write(j(root, "ro/file"), b"r" * 10, 0o444, (1001, 1001))
    write(j(root, "tochange"), b"old contents\n", 0o644, (1001, 1002))
    write(j(root, "becomesdir"), b"a file first\n", 0o644, (0, 0))
    write(j(root, "gone"), b"deleted later\n", 0o644, (0, 0))
    # A sparse file: a hole, then data.
    with open(j(root, "sparse"), "wb") as f:
        f.truncate(4 << 20)
        f.seek(2 << 20)
        f.write(b"x" * 4096)
    # Hard links: a group of three, and a pair that will be broken.
    write(j(root, "hl1"), b"linked\n" * 100, 0o644, (1007, 1007))
    os.link(j(root, "hl1"), j(root, "hl2"))
    os.link(j(root, "hl1"), j(root, "open/hl3"))
    write(j(root, "pair1"), b"pair\n" * 50, 0o644, (0, 0))
    os.link(j(root, "pair1"), j(root, "pair2"))
    # Symlinks with owners of their own.
    os.symlink("open/a", j(root, "link-a"))
    os.lchown(j(root, "link-a"), 1008, 1009)
    os.symlink("nowhere", j(root, "open/dangling"))
    os.lchown(j(root, "open/dangling"), 1001, 1002)
    os.symlink("open/b", j(root, "retarget"))
    # Extended attributes and ACLs, on files and a directory.
    os.setxattr(j(root, "open/a"), "user.note", b"hello")
    os.setxattr(j(root, "tochange"), "user.rev", b"1")
    os.setxattr(j(root, "open"), "user.dir", b"d")
    os.setxattr(j(root, "ro/file"), "user.gone", b"removed later")
    os.setxattr(j(root, "private"), "user.gone", b"removed later")
    os.setxattr(j(root, "open/b"), "system.posix_acl_access",
                acl((1, 6, U), (2, 4, 1234), (4, 4, U), (0x10, 6, U), (0x20, 0, U)))
    # Owners and modes of directories, and nanosecond times everywhere (last: contents first).
    os.chown(j(root, "open"), 1001, 1002)
    os.chown(j(root, "private"), 1006, 1006)
    os.chown(j(root, "ro"), 1003, 1003)
    os.chmod(j(root, "private"), 0o700)
    os.chmod(j(root, "ro"), 0o555)
    t = 1_600_000_000
    for i, (dp, dns, fns) in enumerate(sorted(os.walk(root), reverse=True)):
        for n in sorted(fns) + sorted(dns):
            mtime(j(dp, n), t + i * 7 + len(n), 123456789 - i * 1000 - len(n))
    mtime(root, t, 5)


def meta_changes(root):
    """Metadata alone: the data stays, so a re-run sends none of it."""
    j = os.path.join
    os.chmod(j(root, "open"), 0o700)
    os.chmod(j(root, "open/a"), 0o640)
    os.chown(j(root, "open/b"), 1010, 1011)
    os.lchown(j(root, "link-a"), 1012, 1013)
    os.chown(j(root, "private"), 1014, 1014)
    # Attributes alone: changed, added, removed, on kept files and a directory.
    os.setxattr(j(root, "open/a"), "user.note", b"changed, data the same")
    os.setxattr(j(root, "hl1"), "user.added", b"new")
    os.removexattr(j(root, "ro/file"), "user.gone")
    os.removexattr(j(root, "private"), "user.gone")
    os.setxattr(j(root, "sparse"), "system.posix_acl_access",
                acl((1, 6, U), (2, 4, 1234), (4, 4, U), (0x10, 4, U), (0x20, 4, U)))
    st = os.stat(j(root, "open/deep/c"))
    mtime(j(root, "open/deep/c"), int(st.st_mtime) + 100, 42)
    mtime(j(root, "link-a"), 1_650_000_000, 7)


def change(root):
    """After meta_changes: data, types, links and attributes with the data."""
    j = os.path.join
    with open(j(root, "tochange"), "ab") as f:
        f.write(b"new line\n")
    os.setxattr(j(root, "tochange"), "user.rev", b"2")
    os.setxattr(j(root, "open"), "user.dir", b"changed")
    os.setxattr(j(root, "open/b"), "system.posix_acl_access",
                acl((1, 6, U), (2, 6, 4321), (4, 4, U), (0x10, 6, U), (0x20, 0, U)))
    with open(j(root, "open/b"), "ab") as f:
        f.write(b"more")
    os.unlink(j(root, "becomesdir"))
    os.mkdir(j(root, "becomesdir"))
    write(j(root, "becomesdir/inside"), b"now a directory\n", 0o644, (1001, 1001))
    os.unlink(j(root, "retarget"))
    os.symlink("open/deep/c", j(root, "retarget"))
    os.unlink(j(root, "pair2"))
    write(j(root, "pair2"), b"pair\n" * 50, 0o644, (0, 0))
    os.unlink(j(root, "gone"))
    mtime(j(root, "pair2"), 1_600_000_500, 1)
    mtime(j(root, "becomesdir"), 1_600_000_600, 2)
    mtime(j(root, "retarget"), 1_600_000_700, 3)


def entries(root):
    out = {}
    inodes = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
            out[rel] = st
    groups = {}
    for names in inodes.values():
        if len(names) > 1 and not stat.S_ISDIR(out[names[0]].st_mode):
            for n in names:
                groups[n] = " ".join(sorted(names))
    return out, groups


def describe(root, rel, st, groups):
    p = os.path.join(root, rel)
    d = {
        "type": stat.S_IFMT(st.st_mode),
        "owner": "%d:%d" % (st.st_uid, st.st_gid),
        "mtime_ns": st.st_mtime_ns,
        "hardlinks": groups.get(rel, ""),
    }
    if stat.S_ISLNK(st.st_mode):
        d["target"] = os.readlink(p)
        return d
    d["mode"] = "%04o" % stat.S_IMODE(st.st_mode)
    if stat.S_ISREG(st.st_mode):
        d["size"] = st.st_size
        with open(p, "rb") as f:
            d["data"] = hash(f.read())
    for name in sorted(os.listxattr(p)):
        if name.startswith(("user.", "system.posix_acl")):
            d["xattr " + name] = os.getxattr(p, name).hex()
    return d


def compare(a, b):
    ea, ga = entries(a)
    eb, gb = entries(b)
    bad = 0
    for rel in sorted(set(ea) | set(eb)):
        if rel not in ea or rel not in eb:
            print("%s: only in %s" % (rel, a if rel in ea else b))
            bad += 1
            continue
        da, db = describe(a, rel, ea[rel], ga), describe(b, rel, eb[rel], gb)
        for k in sorted(set(da) | set(db)):
            if da.get(k) != db.get(k):
                print("%s: %s %s != %s" % (rel, k, da.get(k), db.get(k)))
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "change":
        change(sys.argv[2])
    elif cmd == "meta":
        meta_changes(sys.argv[2])
    elif cmd == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit("unknown command " + cmd)
