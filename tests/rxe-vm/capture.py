#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""capture.py IFACE OUTFILE: every frame seen on IFACE (both directions),
appended raw to OUTFILE until SIGTERM. A packet tap (AF_PACKET) for the VM,
which has no tcpdump: what is in OUTFILE crossed the wire (a slow reader may
miss frames; the callers check that enough arrived)."""
import signal
import socket
import sys

ETH_P_ALL = 0x0003


def main():
    iface, out = sys.argv[1], sys.argv[2]
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
                f.write(s.recv(65535))
            except socket.timeout:
                continue


if __name__ == "__main__":
    main()
