#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) of one push over the tcp transport on
# loopback: load-independent, so two builds compare on a shared, noisy machine
# where wall-clock numbers do not. See docs/PERFORMANCE.md.
#
# usage: bench/callgrind.sh [--size MiB] [BUILD_DIR...]
#   --size MiB   file size (default 256); chunk 1 MiB, one lane, default slots
#   BUILD_DIR    builds to measure in turn (default <repo>/build)
# Prints per build: the receiving session's instructions (rdmacpd's child that
# ran the transfer), the sending client's, and their sum.
#
# valgrind 3.19 does not know openat2(2), which rdmacpd resolves paths with; a
# preload built here emulates it with openat(2) (no RESOLVE_* checks) for the
# measurement only. The counts include TLS, the engine, hashing and the
# transport threads; the kernel's work (socket copies, disk) is not counted.
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
SIZE_MIB=256
if [ "${1:-}" = --size ]; then
	SIZE_MIB=$2
	shift 2
fi
[ $# -gt 0 ] || set -- "$SRC_DIR/build"
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/rdmacp-cg.XXXXXX")
trap 'rm -rf "$W"' EXIT

cat >"$W/shim.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
long syscall(long n, ...)
{
	static long (*real)(long, ...);
	va_list ap;
	long a[6];

	va_start(ap, n);
	for (int i = 0; i < 6; i++) {
		a[i] = va_arg(ap, long);
	}
	va_end(ap);
	if (n == SYS_openat2) {
		const struct open_how *h = (const struct open_how *)a[2];

		return openat((int)a[0], (const char *)a[1], (int)h->flags, (mode_t)h->mode);
	}
	if (!real) {
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	}
	return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
EOF
cc -O2 -shared -fPIC -o "$W/shim.so" "$W/shim.c" -ldl || exit 1
head -c $((SIZE_MIB << 20)) /dev/urandom >"$W/src.bin" || exit 1

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# total_ir FILE: the "totals:" line callgrind writes at the end of a profile.
total_ir() {
	awk '/^totals:/ { print $2 }' "$1"
}

measure() {
	local b=$1 o=$W/run port dpid f ir best=0 session="" client
	rm -rf "$o"
	mkdir -p "$o/mod" "$o/cg"
	"$b/rdmacp" certs init "$o/certs" >/dev/null || return 1
	port=$(free_port)
	cat >"$o/d.conf" <<C
[global]
listen = 127.0.0.1:$port
cert = $o/certs/server.crt
key = $o/certs/server.key
ca = $o/certs/ca.crt
handshake timeout = 60
idle timeout = 600

[data]
path = $o/mod
allow = client
uid = root
gid = root
C
	LD_PRELOAD=$W/shim.so valgrind --tool=callgrind --trace-children=yes \
		--callgrind-out-file="$o/cg/d.%p" "$b/rdmacpd" --config "$o/d.conf" >"$o/d.log" 2>&1 &
	dpid=$!
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.1
	done
	LD_PRELOAD=$W/shim.so valgrind --tool=callgrind --callgrind-out-file="$o/cg/client" \
		"$b/rdmacp" --config /dev/null --cert "$o/certs/client.crt" \
		--key "$o/certs/client.key" --ca "$o/certs/ca.crt" -P "$port" --transport tcp \
		--lanes 1 --chunk-size 1M -q "$W/src.bin" "127.0.0.1:data/" >"$o/c.log" 2>&1 ||
		{ echo "$b: push failed" >&2; tail -5 "$o/c.log" >&2; }
	sleep 1
	kill -TERM "$dpid"
	wait "$dpid"
	cmp -s "$W/src.bin" "$o/mod/src.bin" || { echo "$b: copy differs" >&2; return 1; }
	# The session is the daemon process that ran the most instructions.
	for f in "$o"/cg/d.*; do
		ir=$(total_ir "$f")
		if [ "${ir:-0}" -gt "$best" ]; then
			best=$ir
			session=$f
		fi
	done
	client=$(total_ir "$o/cg/client")
	printf '%s\n  receiver session %15d Ir\n  sender client    %15d Ir\n  sum              %15d Ir\n' \
		"$b" "$best" "$client" $((best + client))
	[ -n "$session" ] && cp "$session" "$b/callgrind.out.receiver" 2>/dev/null
	cp "$o/cg/client" "$b/callgrind.out.sender" 2>/dev/null
	return 0
}

for b in "$@"; do
	measure "$b"
done
