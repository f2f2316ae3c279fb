#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write seed frames for fuzz_msg: one valid frame per message type, plus a
stream of several frames and a frame followed by slot descriptors.
Encodings follow the encoders in proto/msg_*.c (proto/msg.c lists them by
type); all integers are big-endian.

usage: tests/fuzz/make_seeds.py [OUTDIR]   (default: tests/fuzz/corpus/fuzz_msg)
"""
import os
import struct
import sys

MAGIC = 0x52444D43


def frame(mtype, payload):
    return struct.pack(">IBBHHHI", MAGIC, 1, 0, mtype, 0, 0, len(payload)) + payload


def s16(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def file_entry(fid, ftype, mode, size, sec, nsec, uid, gid, name, link=""):
    return (struct.pack(">IBIQqIII", fid, ftype, mode, size, sec, nsec, uid, gid)
            + s16(name) + s16(link))


def status(sid, st, text):
    return struct.pack(">II", sid, st) + s16(text)


SEEDS = {
    "hello": frame(1, struct.pack(">HHQ", 1, 1, 0x1F) + s16("rdmacp 0.1")),
    "error": frame(2, struct.pack(">I", 4) + s16("no such module")),
    # direction push, transport tcp, 4 lanes, reserved, flags, chunk 1 MiB, 64 slots
    "open": frame(3, struct.pack(">BBBBIII", 1, 1, 4, 0, 0x03, 1 << 20, 64) + s16("mod/dest")),
    "open_ok": frame(4, struct.pack(">BBHII", 1, 4, 40001, 1 << 20, 64) + bytes(range(32))),
    # addr, desc_addr, 16 slots of 1 MiB, 2 rkeys (one per lane)
    "ring": frame(5, struct.pack(">QQIIBII", 0x7F0000001000, 0x7F0000100000, 16, 1 << 20,
                                 2, 0xDEADBEEF, 0x01020304)),
    "files": frame(6, struct.pack(">H", 3)
                   + file_entry(1, 1, 0o644, 12345, 1700000000, 5, 1000, 100, "d/a.bin")
                   + file_entry(2, 2, 0o755, 0, 1700000000, 0, 1000, 100, "d")
                   + file_entry(3, 3, 0o777, 0, 1700000000, 0, 1000, 100, "d/l", "a.bin")),
    "files_ack": frame(7, struct.pack(">H", 2) + status(1, 0, "") + status(2, 8, "no space")),
    "file_done": frame(8, struct.pack(">IIQ", 1, 0, 12345) + bytes(range(16)) + s16("")),
    "file_result": frame(9, struct.pack(">II", 1, 9) + s16("checksum mismatch")),
    "get": frame(10, struct.pack(">H", 2) + s16("mod/a") + s16("mod/b/c")),
    "end": frame(11, struct.pack(">IQ", 3, 12345)),
    "ping": frame(12, struct.pack(">Q", 0x0102030405060708)),
    "pong": frame(13, struct.pack(">Q", 0x0102030405060708)),
    "bye": frame(14, b""),
    # flags (recursive), path; an empty path asks for the modules
    "list": frame(15, struct.pack(">I", 1) + s16("mod/dir")),
    "list_modules": frame(15, struct.pack(">I", 0) + s16("")),
    # per module: flags (0x1 read only, 0x2 write only), name, comment
    "modules": frame(16, struct.pack(">H", 3)
                     + struct.pack(">B", 0) + s16("data") + s16("main data")
                     + struct.pack(">B", 1) + s16("backups") + s16("")
                     + struct.pack(">B", 2) + s16("inbox") + s16("drop files here")),
    # -H: a file, then two more names of it (type 4, link = the first name)
    "files_hardlink": frame(6, struct.pack(">H", 3)
                            + file_entry(1, 1, 0o644, 100, 1700000000, 5, 0, 0, "d/a")
                            + file_entry(2, 4, 0o644, 0, 1700000000, 5, 0, 0, "e/b", "d/a")
                            + file_entry(3, 4, 0o644, 0, 1700000000, 5, 0, 0, "c", "d/a")),
    # XATTRS: id, count, (name str16, value length u32, value bytes)...
    "xattrs": frame(23, struct.pack(">IH", 7, 3)
                    + s16("user.comment") + struct.pack(">I", 5) + b"hello"
                    + s16("system.posix_acl_access") + struct.pack(">I", 28)
                    + bytes.fromhex("02000000" "0100060000000000" "0400040000000000"
                                    "2000040000000000")
                    + s16("trusted.x") + struct.pack(">I", 0)),
    # a pull's rules, right before its OPEN: count, then per rule action (1 include,
    # 2 exclude) and pattern
    "filter": frame(18, struct.pack(">H", 3)
                    + struct.pack(">B", 1) + s16("*/")
                    + struct.pack(">B", 1) + s16("/src/**.c")
                    + struct.pack(">B", 2) + s16("*")),
    # push with --delete (recursive 0x1, delete 0x200): max_delete follows the path
    "open_delete": frame(3, struct.pack(">BBBBIII", 1, 1, 4, 0, 0x201, 1 << 20, 64)
                         + s16("mod/dest") + struct.pack(">Q", 100)),
    # a probe of a pull (dry run 0x8, recursive, delete, skip quick 0x40): the
    # client receives; max_delete follows the path
    "open_probe_pull": frame(3, struct.pack(">BBBBIII", 2, 1, 4, 0, 0x249, 1 << 20, 64)
                             + s16("mod/src") + struct.pack(">Q", 1)),
    # flags (0x1: suppressed), count; per entry: what (1 deleted, 2 withheld,
    # 3 failed), type (1 file, 2 dir, 3 symlink, 0 other), code, name, text
    "deleted": frame(20, struct.pack(">BH", 0, 3)
                     + struct.pack(">BBI", 1, 1, 0) + s16("d/old") + s16("")
                     + struct.pack(">BBI", 2, 2, 0) + s16("d/older") + s16("")
                     + struct.pack(">BBI", 3, 0, 5) + s16("d/busy") + s16("Permission denied")),
    "deleted_suppressed": frame(20, struct.pack(">BH", 1, 0)),
    # OPEN push -r -p --skip checksum (0x80)
    "open_skip_checksum": frame(3, struct.pack(">BBBBIII", 1, 1, 4, 0, 0x83, 1 << 20, 64)
                                + s16("mod/dest")),
    # OPEN push --encrypt (0x8000): the wish byte (2 require) follows the path
    "open_encrypt": frame(3, struct.pack(">BBBBIII", 1, 1, 4, 0, 0x8003, 1 << 20, 64)
                          + s16("mod/dest") + struct.pack(">B", 2)),
    # OPEN_OK to it: the lanes byte (2 sealed) follows the token
    "open_ok_sealed": frame(4, struct.pack(">BBHII", 1, 4, 40001, 1 << 20, 64) + bytes(range(32))
                            + struct.pack(">B", 2)),
    # OPEN_OK with daemon rails (capability 0x8000000): lanes byte (1 clear), 2 more
    # addresses: 10.0.0.1 port 40002, ::1 port 40003
    "open_ok_rails": frame(4, struct.pack(">BBHII", 2, 4, 40001, 1 << 20, 64) + bytes(range(32))
                           + struct.pack(">BB", 1, 2) + struct.pack(">B4sH", 4, bytes([10, 0, 0, 1]), 40002)
                           + struct.pack(">B16sH", 6, bytes(15) + b"\x01", 40003)),
    # OPEN push --assume-zero-target (0x20000): device targets taken to read as zeros
    "open_assume_zero": frame(3, struct.pack(">BBBBIII", 1, 1, 4, 0, 0x20000, 1 << 20, 64)
                              + s16("disks/vm1")),
    # FILES_ACK: SUM_WANTED (20), then later the final answer for the same id
    "files_ack_sum_wanted": frame(7, struct.pack(">H", 1) + status(1, 20, "")),
    # LIST with the sums flag (0x2); per file: id, status, XXH3-128 (zero unless status 0)
    "list_sums": frame(15, struct.pack(">I", 3) + s16("mod/dir")),
    "sums": frame(21, struct.pack(">H", 2) + struct.pack(">II", 1, 0) + bytes(range(16))
                  + struct.pack(">II", 3, 14) + bytes(16)),
    # receiver -> sender: file id, count, then (offset, len) per verified range
    "resume": frame(19, struct.pack(">IH", 1, 2) + struct.pack(">QQ", 0, 4 << 20)
                    + struct.pack(">QQ", 6 << 20, 12345)),
    # rdmacp bench: transport tcp, 4 lanes, reserved u16, chunk 1 MiB, 64 slots, bytes, seed
    "bench": frame(26, struct.pack(">BBHIIQQ", 1, 4, 0, 1 << 20, 64, 10 << 30,
                                   0x0102030405060708)),
    # sender -> receiver: file id, count, then (offset, len) per range of zeros (no payload)
    "zeros": frame(24, struct.pack(">IH", 1, 2) + struct.pack(">QQ", 1 << 20, 3 << 20)
                   + struct.pack(">QQ", 8 << 20, 4321)),
    # --delta: file id, kind (1 SUMS), flags 0, count, first chunk, XXH3-128 per chunk
    "delta_sums": frame(28, struct.pack(">IBBHQ", 1, 1, 0, 2, 0) + bytes(range(16))
                        + bytes(16)),
    # the same with flags TREE (0x1): the file checked by its chunks' digests
    "delta_sums_tree": frame(28, struct.pack(">IBBHQ", 1, 1, 1, 2, 0) + bytes(range(16))
                             + bytes(16)),
    # kind 2 SAME: file id, kind, flags 0, count, then (offset, len) per unchanged range
    "delta_same": frame(28, struct.pack(">IBBH", 1, 2, 0, 2) + struct.pack(">QQ", 0, 2 << 20)
                        + struct.pack(">QQ", 5 << 20, 4321)),
    # finalize: flags (1 OWNER), path, name, staging dir, mode, mtime s, ns, uid, gid, size,
    # count, then per part: name, offset, len, XXH3-128 (contiguous from 0, adding up to size)
    "assemble": frame(29, struct.pack(">I", 1) + s16("mod/dst") + s16("tree/big.img")
                      + s16(".rdmacp-split.0123456789abcdef")
                      + struct.pack(">IqIIIQH", 0o640, 1700000000, 5, 1000, 100, (4 << 20) + 17, 2)
                      + s16("5.0") + struct.pack(">QQ", 0, 4 << 20) + bytes(range(16))
                      + s16("5.1") + struct.pack(">QQ", 4 << 20, 17) + bytes(16)),
    "assembled": frame(30, struct.pack(">Q", (4 << 20) + 17)),
    # rails: lane, reserved u8 and u16 (0), the side's count on that lane
    "lane_down": frame(31, struct.pack(">BBHQ", 1, 0, 0, 37)),
    # relays: self ticket (u32 length, bytes; empty from the original client), count,
    # then per hop: host, port, path, ticket (u32 length, bytes)
    "relay": frame(32, struct.pack(">I", 0) + struct.pack(">B", 2)
                   + s16("node2") + struct.pack(">H", 7777) + s16("data/set")
                   + struct.pack(">I", 4) + b"RDMA"
                   + s16("10.0.0.3") + struct.pack(">H", 7777) + s16("data/set")
                   + struct.pack(">I", 1) + b"T"),
    # from a relay child: the receiver's own ticket, no hops after it
    "relay_last": frame(32, struct.pack(">I", 3) + b"RDM" + struct.pack(">B", 0)),
    # index, status (3 FAILED), exit code, reserved 0, files ok, files failed, bytes, host, text
    "relay_result": frame(33, struct.pack(">BBBBQQQ", 1, 3, 4, 0, 10, 2, 1 << 30)
                          + s16("node2") + s16("upstream node1 failed")),
}
SEEDS["stream"] = SEEDS["hello"] + SEEDS["open"] + SEEDS["files"] + SEEDS["end"] + SEEDS["bye"]
SEEDS["stream_pull"] = (SEEDS["hello"] + SEEDS["filter"] + SEEDS["open"] + SEEDS["get"]
                       + SEEDS["end"] + SEEDS["bye"])
SEEDS["stream_ls"] = (SEEDS["hello"] + SEEDS["list_modules"] + SEEDS["modules"] + SEEDS["end"]
                      + SEEDS["list"] + SEEDS["files"] + SEEDS["end"] + SEEDS["bye"])
SEEDS["stream_assemble"] = (SEEDS["hello"] + SEEDS["assemble"] + SEEDS["assembled"]
                            + SEEDS["bye"])
SEEDS["stream_rails"] = (SEEDS["files"] + SEEDS["lane_down"] + SEEDS["file_done"]
                        + SEEDS["end"])
SEEDS["stream_relay"] = (SEEDS["hello"] + SEEDS["relay"] + SEEDS["open"] + SEEDS["files"]
                        + SEEDS["end"] + SEEDS["relay_result"] + SEEDS["bye"])
SEEDS["stream_bench"] = SEEDS["hello"] + SEEDS["bench"] + SEEDS["end"] + SEEDS["bye"]
SEEDS["stream_check"] = (SEEDS["hello"] + SEEDS["list_sums"] + SEEDS["files"] + SEEDS["sums"]
                         + SEEDS["end"] + SEEDS["bye"])
# Two slot descriptors (32 bytes each: file_id, len, offset, seq, reserved 0);
# the fuzzer reads the input as descriptors at offsets 0, 32, ...
SEEDS["desc"] = (struct.pack(">IIQQQ", 1, 4096, 0, 0, 0)
                 + struct.pack(">IIQQQ", 2, 100, 1 << 20, 7, 0))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "fuzz_msg")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
