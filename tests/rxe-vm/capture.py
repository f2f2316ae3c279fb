#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A packet tap for the Soft-RoCE VM, which has no tcpdump.

capture.py IFACE OUTFILE   every frame seen on IFACE (both directions), each
                           written as its length (u32, big-endian) and its
                           bytes, until SIGTERM. A slow reader may miss frames:
                           the callers check that enough arrived.
capture.py tos OUTFILE     of the RoCE v2 frames in OUTFILE (IPv4, UDP port
                           4791): one line per source address, IP TOS byte
                           and kind, with the number of frames: "SRC tos T
                           frames N" for the lanes' own, "SRC tos T cm N" for
                           the connection manager's MADs (to QP 1: requests,
                           replies, disconnects), which rdma_cm sends in the
                           class of its own id, not the lane's.
"""
import signal
import socket
import struct
import sys
from collections import Counter

ETH_P_ALL = 0x0003
ROCE_V2_PORT = 4791


def capture(iface, out):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    # An emulated CPU drains slowly: a deep buffer loses fewer frames.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind((iface, 0))
    s.settimeout(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out, "wb") as f:
        # Ready: the caller waits for this line before it sends anything.
        print("capturing", flush=True)
        while not stop:
            try:
                frame = s.recv(65535)
            except socket.timeout:
                continue
            f.write(struct.pack(">I", len(frame)) + frame)


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at + 4 <= len(data):
        (n,) = struct.unpack_from(">I", data, at)
        yield data[at + 4:at + 4 + n]
        at += 4 + n


def tos(path):
    seen = Counter()
    for fr in frames(path):
        # Ethernet II, IPv4 without options or with: IHL says; UDP to 4791.
        if len(fr) < 14 + 20 + 8 or fr[12:14] != b"\x08\x00":
            continue
        ip = fr[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 17 or len(ip) < ihl + 8:
            continue
        (dport,) = struct.unpack_from(">H", ip, ihl + 2)
        if dport != ROCE_V2_PORT:
            continue
        # The BTH after the UDP header: its destination QP in bytes 5..7.
        bth = ip[ihl + 8:]
        kind = "cm" if len(bth) >= 8 and bth[5:8] == b"\x00\x00\x01" else "frames"
        seen[(socket.inet_ntoa(ip[12:16]), ip[1], kind)] += 1
    for (src, t, kind), n in sorted(seen.items()):
        print(f"{src} tos {t} {kind} {n}")


def main():
    if sys.argv[1] == "tos":
        tos(sys.argv[2])
    else:
        capture(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
