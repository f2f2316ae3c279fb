#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
rawclient.py: a deliberately misbehaving rdmacp control-channel client for the
integration tests (stdlib only). It speaks TLS 1.3 with a client certificate
(verifying the daemon against --ca and --server-name), then runs the steps
given on the command line IN ORDER, then reads what the daemon answers and
checks it against --expect.

Steps (repeatable, run in command-line order):
  --hello [MIN:MAX]     send HELLO (default 1:1) and require a HELLO back
                        (its capability bits: --caps, default 0x1)
  --send-hello MIN:MAX  send HELLO only (the daemon's answer is left for --expect)
  --frame SPEC          send one frame; SPEC is comma-separated key=value with
                        keys type (number or name), magic, version, res8, flags,
                        res16, len (default: the payload's length), payload (hex)
  --send-hex HEX        send raw bytes
  --fin                 TCP shutdown(SHUT_WR), no TLS close_notify
  --close-notify        send a TLS close_notify (our write side ends)
  --sleep SECS
  --recv NAME           read one frame and require its type (e.g. END after a
                        dry-run OPEN), so that another step can follow it

Modes:
  --source ADDR         connect from this local address (another "host")
  --tcp                 plain TCP connection, no TLS (a silent / slow client)
  --drip SECS           TLS: send our ClientHello one byte every SECS seconds
                        (a slow-loris handshake); only with --expect closed

Expectation (what comes back, within --timeout seconds, default 5):
  error:CODE   the first frame is ERROR with that code (a number or its name, e.g.
               PROTOCOL), then the daemon closes
  closed       no frame at all; the daemon closes the connection
  frame:NAME   the first frame is of that type (e.g. PONG, HELLO)
  --max-close SECS   additionally: "closed" must happen within SECS seconds
                     (measured from the end of the connect / TLS handshake)
  --min-close SECS   additionally: not before SECS seconds (a deadline, not a
                     refusal at accept time)

Prints one line per event ("frame ERROR code=1 (PROTOCOL) text=...",
"closed after 1.02 s") and a verdict. Exit 0: expectation held; 1: it did not;
2: usage or setup failure (e.g. our own TLS handshake failed).
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
    "PING": 12, "PONG": 13, "BYE": 14, "ASSEMBLE": 29, "ASSEMBLED": 30,
}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
PERR = {
    0: "OK", 1: "PROTOCOL", 2: "VERSION_MISMATCH", 3: "AUTH", 4: "NO_MODULE",
    5: "PERMISSION", 6: "BAD_PATH", 7: "IO", 8: "NOSPACE", 9: "INTEGRITY",
    10: "BUSY", 11: "TRANSPORT", 12: "SHUTDOWN", 13: "TIMEOUT",
    14: "SOURCE_CHANGED", 15: "NOT_FOUND", 16: "INTERNAL", 17: "DUPLICATE",
    27: "ASSEMBLY",
}


class Closed(Exception):
    pass


def say(*a):
    print("rawclient:", *a, flush=True)


def hello_payload(vmin, vmax, caps=1, software=b"rawclient"):
    return struct.pack(">HHQH", vmin, vmax, caps, len(software)) + software


def frame(type_, payload=b"", magic=MAGIC, version=1, res8=0, flags=0, res16=0,
          length=None):
    if length is None:
        length = len(payload)
    return HDR.pack(magic, version, res8, type_, flags, res16, length) + payload


def parse_frame_spec(spec):
    kw = {}
    payload = b""
    for item in spec.split(","):
        if not item:
            continue
        k, _, v = item.partition("=")
        if k == "payload":
            payload = bytes.fromhex(v)
        elif k == "type":
            kw["type_"] = TYPES[v.upper()] if v.upper() in TYPES else int(v, 0)
        elif k == "len":
            kw["length"] = int(v, 0)
        elif k in ("magic", "version", "res8", "flags", "res16"):
            kw[k] = int(v, 0)
        else:
            raise ValueError("unknown frame key %r" % k)
    if "type_" not in kw:
        raise ValueError("frame spec needs type=")
    t = kw.pop("type_")
    return frame(t, payload, **kw)


def parse_versions(v):
    lo, _, hi = v.partition(":")
    return int(lo), int(hi or lo)


class Steps(argparse.Action):
    def __call__(self, parser, ns, values, option_string=None):
        ns.steps.append((self.dest, values))


def recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(buf))
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionResetError,
                BrokenPipeError) as e:
            raise Closed("%s%s" % (type(e).__name__, " mid-frame" if buf else ""))
        except ssl.SSLError as e:
            raise Closed("TLS error: %s" % e)
        if not chunk:
            raise Closed("EOF mid-frame" if buf else "EOF")
        buf += chunk
    return buf


def read_frame(sock, deadline):
    """Returns (type, payload) or raises Closed / socket.timeout."""
    h = recv_exact(sock, HDR.size, deadline)
    magic, ver, r8, t, fl, r16, ln = HDR.unpack(h)
    if magic != MAGIC or ln > (1 << 20):
        raise ValueError("daemon sent a bad header: %s" % h.hex())
    return t, recv_exact(sock, ln, deadline) if ln else b""


def describe(t, p):
    name = TYPE_NAMES.get(t, str(t))
    if t == TYPES["ERROR"] and len(p) >= 6:
        code, n = struct.unpack(">IH", p[:6])
        text = p[6:6 + n].decode("utf-8", "replace")
        return "frame ERROR code=%d (%s) text=%r" % (code, PERR.get(code, "?"), text)
    if t == TYPES["HELLO"] and len(p) >= 14:
        lo, hi, caps, n = struct.unpack(">HHQH", p[:14])
        return "frame HELLO versions=%d..%d caps=%#x software=%r" % (
            lo, hi, caps, p[14:14 + n].decode("utf-8", "replace"))
    return "frame %s (%d payload bytes)" % (name, len(p))


def drip_handshake(args, raw, started):
    """Send a real ClientHello one byte at a time; report when the daemon gives up."""
    ctx = make_ctx(args)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False, server_hostname=args.server_name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    data = out.read()
    say("dripping a %d-byte ClientHello, one byte every %.2f s" % (len(data), args.drip))
    raw.settimeout(args.drip)
    for i in range(len(data)):
        try:
            raw.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            return "closed after %d bytes" % i
        try:
            got = raw.recv(4096)
            if not got:
                return "closed after %d bytes" % (i + 1)
        except socket.timeout:
            pass
        except ConnectionResetError:
            return "reset after %d bytes" % (i + 1)
        if time.monotonic() - started > args.timeout:
            return None
    return None


def make_ctx(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(args.ca)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.check_hostname = True
    return ctx


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.set_defaults(steps=[])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--source", help="local address to connect from (e.g. 127.0.0.2)")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--server-name", default="localhost")
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--drip", type=float)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--max-close", type=float)
    ap.add_argument("--min-close", type=float)
    ap.add_argument("--hello", dest="hello", nargs="?", const="1:1", action=Steps)
    ap.add_argument("--caps", type=lambda v: int(v, 0), default=1,
                    help="the capability bits our HELLOs announce (default 0x1, tcp)")
    ap.add_argument("--send-hello", dest="send_hello", action=Steps)
    ap.add_argument("--frame", dest="frame", action=Steps)
    ap.add_argument("--send-hex", dest="send_hex", action=Steps)
    ap.add_argument("--fin", dest="fin", nargs=0, action=Steps)
    ap.add_argument("--close-notify", dest="close_notify", nargs=0, action=Steps)
    ap.add_argument("--sleep", dest="sleep", type=float, action=Steps)
    ap.add_argument("--recv", dest="recv", action=Steps)
    args = ap.parse_args()

    kind, _, arg = args.expect.partition(":")
    if kind not in ("error", "closed", "frame"):
        ap.error("bad --expect %r" % args.expect)
    if not args.tcp and not (args.ca and args.cert and args.key):
        ap.error("TLS needs --ca, --cert and --key")

    try:
        raw = socket.create_connection((args.host, args.port), timeout=args.timeout,
                                       source_address=(args.source, 0) if args.source else None)
    except OSError as e:
        say("connect failed: %s" % e)
        return 2
    started = time.monotonic()

    if args.drip is not None:
        if kind != "closed":
            ap.error("--drip only with --expect closed")
        what = drip_handshake(args, raw, started)
        el = time.monotonic() - started
        if what is None:
            say("still open after %.2f s" % el)
            say("FAILED: wanted the daemon to close a dripping handshake")
            return 1
        say("%s, %.2f s after connect" % (what, el))
        if args.max_close is not None and el > args.max_close:
            say("FAILED: closed after %.2f s, wanted within %.2f s" % (el, args.max_close))
            return 1
        say("as expected")
        return 0

    if args.tcp:
        sock = raw
    else:
        try:
            sock = make_ctx(args).wrap_socket(raw, server_hostname=args.server_name)
        except (ssl.SSLError, OSError) as e:
            say("TLS handshake failed: %s" % e)
            return 2
        started = time.monotonic()

    try:
        for step, val in args.steps:
            if step == "hello":
                lo, hi = parse_versions(val)
                sock.sendall(frame(TYPES["HELLO"], hello_payload(lo, hi, args.caps)))
                t, p = read_frame(sock, time.monotonic() + args.timeout)
                say("sent HELLO %d..%d, got %s" % (lo, hi, describe(t, p)))
                if t != TYPES["HELLO"]:
                    say("FAILED: the daemon did not answer HELLO with HELLO")
                    return 1
            elif step == "send_hello":
                lo, hi = parse_versions(val)
                sock.sendall(frame(TYPES["HELLO"], hello_payload(lo, hi, args.caps)))
                say("sent HELLO %d..%d" % (lo, hi))
            elif step == "frame":
                data = parse_frame_spec(val)
                sock.sendall(data)
                say("sent frame %s (%s)" % (val, data[:24].hex()))
            elif step == "send_hex":
                sock.sendall(bytes.fromhex(val))
                say("sent %d raw bytes" % (len(val) // 2))
            elif step == "fin":
                # On a dup of the fd: SSLSocket.shutdown() would drop the TLS
                # state we still need to read the daemon's answer.
                dup = socket.fromfd(sock.fileno(), socket.AF_INET, socket.SOCK_STREAM)
                dup.shutdown(socket.SHUT_WR)
                dup.close()
                say("sent TCP FIN without close_notify")
            elif step == "close_notify":
                # SSL_shutdown: sends close_notify; with a short timeout it
                # gives up waiting for the daemon's (which is fine).
                sock.settimeout(0.2)
                try:
                    sock = sock.unwrap()
                except (ssl.SSLError, OSError, ValueError):
                    pass
                say("sent TLS close_notify")
            elif step == "sleep":
                time.sleep(val)
            elif step == "recv":
                t, p = read_frame(sock, time.monotonic() + args.timeout)
                say("got %s" % describe(t, p))
                if t != TYPES[val.upper()]:
                    say("FAILED: wanted %s" % val.upper())
                    return 1
    except Closed as e:
        say("connection closed while sending: %s" % e)
        return 1
    except socket.timeout:
        say("FAILED: no frame within %.1f s" % args.timeout)
        return 1
    except (BrokenPipeError, ConnectionResetError) as e:
        say("connection closed while sending: %s" % e)
        if kind != "closed":
            return 1

    # What does the daemon say?
    since = "connect" if args.tcp else "TLS handshake"
    deadline = time.monotonic() + args.timeout
    frames = []
    closed = None
    try:
        while True:
            t, p = read_frame(sock, deadline)
            frames.append((t, p))
            say(describe(t, p))
            if kind == "frame":
                break
    except Closed as e:
        closed = time.monotonic() - started
        say("closed (%s) %.2f s after the %s" % (e, closed, since))
    except socket.timeout:
        say("no more data; connection still open after %.1f s" % args.timeout)
    except ValueError as e:
        say(str(e))
        frames.append((-1, b""))
    except OSError as e:
        closed = time.monotonic() - started
        say("closed (%s) %.2f s after the %s" % (e, closed, since))

    ok = True
    if kind == "error":
        names = {v: k for k, v in PERR.items()}
        want = names[arg.upper()] if arg.upper() in names else int(arg, 0)
        if not frames or frames[0][0] != TYPES["ERROR"]:
            say("FAILED: wanted ERROR %d (%s) first" % (want, PERR.get(want, "?")))
            ok = False
        else:
            code = struct.unpack(">I", frames[0][1][:4])[0]
            if code != want:
                say("FAILED: ERROR code %d, wanted %d (%s)" % (code, want, PERR.get(want)))
                ok = False
        if len(frames) > 1:
            say("FAILED: %d more frame(s) after the ERROR" % (len(frames) - 1))
            ok = False
        if closed is None:
            say("FAILED: the daemon did not close the connection after the ERROR")
            ok = False
    elif kind == "closed":
        if frames:
            say("FAILED: wanted no frame, got %d" % len(frames))
            ok = False
        if closed is None:
            say("FAILED: the daemon did not close the connection")
            ok = False
    else:
        want = TYPES[arg.upper()] if arg.upper() in TYPES else int(arg, 0)
        if not frames or frames[0][0] != want:
            say("FAILED: wanted a %s frame first" % TYPE_NAMES.get(want, want))
            ok = False
    if ok and args.max_close is not None and kind != "frame":
        if closed is None or closed > args.max_close:
            say("FAILED: wanted the close within %.2f s" % args.max_close)
            ok = False
    if ok and args.min_close is not None and kind == "closed":
        if closed is not None and closed < args.min_close:
            say("FAILED: closed after %.2f s, before %.2f s (refused, not timed out?)"
                % (closed, args.min_close))
            ok = False
    say("as expected" if ok else "NOT as expected (--expect %s)" % args.expect)
    try:
        sock.close()
    except OSError:
        pass
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
