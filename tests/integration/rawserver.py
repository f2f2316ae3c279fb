#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
rawserver.py: a deliberately hostile rdmacp daemon for the integration tests
(stdlib only). It listens on 127.0.0.1, speaks TLS 1.3 with the daemon's
test certificate (--cert/--key; client certificates are requested and checked
against --ca), answers the client's HELLO, then misbehaves as --mode says,
serving one connection after another until --count connections were served
(or --timeout seconds pass without one).

Modes (what the client gets):
  hello         HELLO, then nothing but reading until the client leaves (for
                `rdmacp ping` against a certificate with a hostile name)
  error-hello   ERROR (code --code) with --text instead of HELLO
  error-open    HELLO, then ERROR with --text in answer to OPEN
  error-get     HELLO; OPEN (a dry-run pull) is answered with END, then GET
                with ERROR carrying --text
  list          HELLO; OPEN (a dry-run pull) is answered with END, then GET
                with FILES listing --name under each requested path's last
                component (so the client accepts it with -r), then END
  glob          as list, but GET is answered with one regular file named
                --name at the top, whatever was asked for (a daemon that
                "expands" a wildcard into a name the pattern can't match)
  ls            HELLO with the LIST capability; LIST is answered with one
                MODULES entry (an empty path) or one FILES entry (a path)
                named --name, then END
  sums          HELLO (give --caps 0x47f: with check); LIST (with the sums
                flag) is answered with FILES "a" (a 5-byte file, id 1) and
                "d" (a directory, id 2), then per --code: 1 SUMS for id 9
                (not listed), 2 SUMS for the directory, 3 no SUMS at all,
                4 "a" listed twice (with its SUMS), 5 SUMS for id 1 twice;
                then END

--caps sets the HELLO capabilities (default 0xd: tcp, pull, trees; no LIST,
as a daemon from before LIST).

--text-hex / --name-hex give the hostile bytes (default: ESC [ 2 J, a
newline, "<0>FORGED", a C1 CSI 0x9b and ESC ] 0 ; title BEL).

Prints "rawserver: listening on PORT" once ready (use --port-file to get
the port), one line per frame it sees or sends.
"""
import argparse
import socket
import ssl
import struct
import sys
import time

MAGIC = 0x52444D43
HDR = struct.Struct(">IBBHHHI")
TYPES = {
    "HELLO": 1, "ERROR": 2, "OPEN": 3, "OPEN_OK": 4, "RING": 5, "FILES": 6,
    "FILES_ACK": 7, "FILE_DONE": 8, "FILE_RESULT": 9, "GET": 10, "END": 11,
    "PING": 12, "PONG": 13, "BYE": 14, "LIST": 15, "MODULES": 16, "SUMS": 21,
}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
HOSTILE = b"\x1b[2J\n<0>FORGED \xc2\x9b2J \x9b31m \x1b]0;pwned\x07end"


def say(*a):
    print("rawserver:", *a, flush=True)


def frame(type_, payload=b""):
    return HDR.pack(MAGIC, 1, 0, type_, 0, 0, len(payload)) + payload


def str16(b):
    return struct.pack(">H", len(b)) + b


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("EOF")
        buf += chunk
    return buf


def read_frame(sock):
    magic, ver, r8, t, fl, r16, ln = HDR.unpack(recv_exact(sock, HDR.size))
    if magic != MAGIC or ln > (1 << 20):
        raise ValueError("bad header")
    return t, recv_exact(sock, ln) if ln else b""


def expect(sock, want):
    t, p = read_frame(sock)
    say("got %s (%d bytes)" % (TYPE_NAMES.get(t, t), len(p)))
    if t != TYPES[want]:
        raise ValueError("wanted %s" % want)
    return p


def send(sock, name, payload):
    sock.sendall(frame(TYPES[name], payload))
    say("sent %s (%d bytes)" % (name, len(payload)))


def hello_payload(caps):
    sw = b"rawserver"
    return struct.pack(">HHQ", 1, 1, caps) + str16(sw)


def error_payload(code, text):
    return struct.pack(">I", code) + str16(text)


def get_paths(p):
    (count,) = struct.unpack(">H", p[:2])
    off, paths = 2, []
    for _ in range(count):
        (n,) = struct.unpack(">H", p[off:off + 2])
        paths.append(p[off + 2:off + 2 + n])
        off += 2 + n
    return paths


def files_payload(names):
    out = struct.pack(">H", len(names))
    for i, (name, ftype) in enumerate(names):
        mode = 0o755 if ftype == 2 else 0o644
        size = 0 if ftype == 2 else 5
        out += struct.pack(">IBIQqIII", i + 1, ftype, mode, size, 0, 0, 0, 0)
        out += str16(name) + str16(b"")
    return out


def serve(sock, args, text, name):
    expect(sock, "HELLO")
    if args.mode == "error-hello":
        send(sock, "ERROR", error_payload(args.code, text))
        return
    send(sock, "HELLO", hello_payload(args.caps))
    if args.mode == "ls":
        p = expect(sock, "LIST")
        (plen,) = struct.unpack(">H", p[4:6])
        if plen == 0:
            send(sock, "MODULES", struct.pack(">HB", 1, 0) + str16(name) + str16(name))
        else:
            send(sock, "FILES", files_payload([(name, 1)]))
        send(sock, "END", struct.pack(">IQ", 1, 0))
        try:
            t, _ = read_frame(sock)
            say("got %s" % TYPE_NAMES.get(t, t))
        except (EOFError, OSError, ValueError):
            pass
        return
    if args.mode == "sums":
        expect(sock, "LIST")
        names = [(b"a", 1), (b"d", 2)] + ([(b"a", 1)] if args.code == 4 else [])
        send(sock, "FILES", files_payload(names))
        ids = {1: [9], 2: [2], 3: [], 4: [1, 3], 5: [1, 1]}.get(args.code, [1])
        if ids:
            send(sock, "SUMS", struct.pack(">H", len(ids)) +
                 b"".join(struct.pack(">II", i, 0) + bytes(range(16)) for i in ids))
        send(sock, "END", struct.pack(">IQ", len(names), 0))
        try:
            t, _ = read_frame(sock)
            say("got %s" % TYPE_NAMES.get(t, t))
        except (EOFError, OSError, ValueError):
            pass
        return
    if args.mode == "hello":
        while True:
            t, _ = read_frame(sock)
            say("got %s" % TYPE_NAMES.get(t, t))
    expect(sock, "OPEN")
    if args.mode == "error-open":
        send(sock, "ERROR", error_payload(args.code, text))
        return
    if args.mode == "rails-tcp":
        # OPEN_OK for tcp lanes with daemon rails (only verbs may have them): lanes byte 1
        # (clear), 1 rail 127.0.0.1 port 40002
        send(sock, "OPEN_OK", struct.pack(">BBHII", 1, 1, 40001, 1 << 16, 2) + bytes(32)
             + struct.pack(">BBB4sH", 1, 1, 4, bytes([127, 0, 0, 1]), 40002))
        try:
            t, _ = read_frame(sock)
            say("got %s" % TYPE_NAMES.get(t, t))
        except (EOFError, OSError, ValueError):
            pass
        return
    if args.mode == "lanes-byte":
        # OPEN_OK for 1 lane of --transport (1 tcp, 2 verbs) whose lanes byte is --code
        # (a seal suite, say)
        send(sock, "OPEN_OK", struct.pack(">BBHII", args.transport, 1, 40001, 1 << 16, 2)
             + bytes(32)
             + struct.pack(">B", args.code))
        try:
            t, _ = read_frame(sock)
            say("got %s" % TYPE_NAMES.get(t, t))
        except (EOFError, OSError, ValueError):
            pass
        return
    # error-get, list: accept the (dry-run) OPEN, wait for GET.
    send(sock, "END", struct.pack(">IQ", 0, 0))
    paths = get_paths(expect(sock, "GET"))
    if args.mode == "error-get":
        send(sock, "ERROR", error_payload(args.code, text))
        return
    entries = []
    if args.mode == "glob":
        paths = []
        entries.append((name, 1))
    for p in paths:
        top = p.rstrip(b"/").rsplit(b"/", 1)[-1]
        entries.append((top, 2))
        entries.append((top + b"/" + name, 1))
    send(sock, "FILES", files_payload(entries))
    send(sock, "END", struct.pack(">IQ", len(entries), 0))
    try:
        t, _ = read_frame(sock)
        say("got %s" % TYPE_NAMES.get(t, t))
    except (EOFError, OSError, ValueError):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--mode", required=True,
                    choices=("hello", "error-hello", "error-open", "error-get", "list", "glob",
                             "ls", "sums", "rails-tcp", "lanes-byte"))
    ap.add_argument("--caps", type=lambda v: int(v, 0), default=0xD)
    ap.add_argument("--code", type=int, default=5)
    ap.add_argument("--transport", type=int, default=1)
    ap.add_argument("--text-hex")
    ap.add_argument("--name-hex")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    text = bytes.fromhex(args.text_hex) if args.text_hex else HOSTILE
    name = bytes.fromhex(args.name_hex) if args.name_hex else HOSTILE.replace(b"\n", b"\t")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(args.cert, args.key)
    ctx.load_verify_locations(args.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED

    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(8)
    lsock.settimeout(args.timeout)
    port = lsock.getsockname()[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        import os
        os.rename(args.port_file + ".tmp", args.port_file)
    say("listening on %d" % port)

    for _ in range(args.count):
        try:
            raw, peer = lsock.accept()
        except socket.timeout:
            say("no client within %.0f s" % args.timeout)
            return 1
        raw.settimeout(args.timeout)
        try:
            sock = ctx.wrap_socket(raw, server_side=True)
            serve(sock, args, text, name)
            time.sleep(0.2)  # let the client read before close_notify
            try:
                sock.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass
        except (ssl.SSLError, OSError, EOFError, ValueError) as e:
            say("connection ended: %s" % e)
        finally:
            raw.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
