#!/usr/bin/env bash
# Profile one rdmacp copy (tcp transport, loopback) of the cached big file made by
# bench/run.sh: system-wide perf (cpu-clock, call graphs) and strace -c of client
# and daemon session. Output in $BENCH_DIR/profile/ (kept).
#
# usage: bench/profile.sh [SIZE_MIB (default 2048)] [rdmacp options...]
set -u
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$HERE/../build}
RDMACP=$BUILD_DIR/rdmacp RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
MIB=${1:-2048}
shift || true
BIG=$BENCH_DIR/data/big-${MIB}M.bin
[ -f "$BIG" ] || { echo "no $BIG: run bench/run.sh first" >&2; exit 1; }
P=$BENCH_DIR/profile
rm -rf "$P" && mkdir -p "$P/dst" || exit 1
DPID=
cleanup() { [ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null; rm -rf "$P/dst"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$RDMACP" certs init "$P/certs" >/dev/null || exit 1
cat >"$P/d.conf" <<EOF
[global]
listen = 127.0.0.1:$PORT
cert = $P/certs/server.crt
key = $P/certs/server.key
ca = $P/certs/ca.crt
[bench]
path = $P
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
C=("$RDMACP" --config /dev/null --cert "$P/certs/client.crt" --key "$P/certs/client.key"
	--ca "$P/certs/ca.crt" -P "$PORT" --transport tcp -q "$@")

# daemon_up LOG: a fresh empty destination and the daemon listening; daemon_down stops it.
daemon_up() {
	rm -rf "$P/dst" && mkdir "$P/dst" && sync -f "$P"
	"$RDMACPD" --config "$P/d.conf" 2>"$1" &
	DPID=$!
	until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do sleep 0.05; done
}
daemon_down() { kill -TERM "$DPID"; wait "$DPID" 2>/dev/null; DPID=; }

# 1. perf, system wide, while one copy runs
cat "$BIG" >/dev/null
daemon_up "$P/d-perf.log"
perf record -e cpu-clock -F 999 -a -g -o "$P/perf.data" -- sleep 3600 >/dev/null 2>&1 &
PERF=$!
sleep 1
t0=$(date +%s.%N)
"${C[@]}" "$BIG" "127.0.0.1:bench/dst/"
t1=$(date +%s.%N)
kill -INT "$PERF"; wait "$PERF"
daemon_down
echo "perf: $(echo "$t1 - $t0" | bc -l | cut -c1-6) s"
perf report -i "$P/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -15 >"$P/by-comm.txt"
perf report -i "$P/perf.data" --no-children --sort comm,dso,sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -60 >"$P/by-sym.txt"
echo "== CPU by process"; cat "$P/by-comm.txt"
echo "== top symbols"; head -40 "$P/by-sym.txt"

# 2. syscall counts: daemon (incl. the session child) and client, separate runs;
# strace attaches to the running daemon, so the daemon is stopped as usual.
daemon_up /dev/null
strace -f -c -o "$P/strace-daemon.txt" -p "$DPID" 2>/dev/null &
SP=$!
sleep 1
"${C[@]}" "$BIG" "127.0.0.1:bench/dst/"
sleep 0.5
kill -INT "$SP"; wait "$SP" 2>/dev/null
daemon_down
daemon_up /dev/null
strace -f -c -o "$P/strace-client.txt" "${C[@]}" "$BIG" "127.0.0.1:bench/dst/"
daemon_down
echo "== daemon syscalls"; head -15 "$P/strace-daemon.txt"
echo "== client syscalls"; head -15 "$P/strace-client.txt"
