# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# What the comparison benchmarks share (sourced, not run): messages, the tools
# a run needs, a work directory removed on exit with the processes it started,
# free loopback ports, medians, cached random source data, and an rdmacpd and an
# rsync daemon on 127.0.0.1.
# The script sets RDMACP, RDMACPD and BENCH_DIR before it calls these.

die() {
	echo "bench: $*" >&2
	exit 1
}
log() { echo "# $*" >&2; }

# need TOOL...: each must be on PATH.
need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null || die "missing $t (scripts/deps.sh installs it)"
	done
}

# bench_workdir NAME: R, a fresh directory under BENCH_DIR, and PIDS, the
# processes to stop; both go when the script exits or is interrupted.
bench_workdir() {
	mkdir -p "$BENCH_DIR" || die "cannot create $BENCH_DIR"
	R=$(mktemp -d "$BENCH_DIR/$1.XXXXXX") || die "mktemp"
	PIDS=()
	LOOPS=()
	trap bench_cleanup EXIT
	trap 'echo "bench: interrupted" >&2; exit 130' INT TERM
}
bench_cleanup() {
	local p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for p in "${LOOPS[@]}"; do losetup -d "$p" 2>/dev/null; done
	rm -rf "$R"
}

# bench_random FILE MIB: FILE holds MIB MiB of random bytes; made once, then reused
# while its size is right (BENCH_DIR/data keeps the scripts' source data).
bench_random() {
	[ -f "$1" ] && [ "$(stat -c %s "$1")" -eq $(($2 << 20)) ] && return 0
	log "generating $1 ($2 MiB of random data)"
	mkdir -p "$(dirname "$1")" || die "cannot create $(dirname "$1")"
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-bench-$RANDOM$RANDOM" </dev/zero 2>/dev/null |
		head -c $(($2 << 20)) >"$1.tmp" && mv "$1.tmp" "$1" || die "cannot generate $1"
}

# bench_small DIR N SIZE: DIR holds N files of SIZE random bytes; made once, as above.
bench_small() {
	[ -d "$1" ] && [ "$(find "$1" -type f | wc -l)" -eq "$2" ] && return 0
	log "generating $1 ($2 files of $3 bytes)"
	rm -rf "$1" "$1.tmp" && mkdir -p "$1.tmp" || die "mkdir $1.tmp"
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-bench-$RANDOM" </dev/zero 2>/dev/null |
		head -c $(($2 * $3)) | (cd "$1.tmp" && split -b "$3" -a 6 -d - f) ||
		die "cannot generate $1"
	mv "$1.tmp" "$1"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# wait_port PORT PID: until 127.0.0.1:PORT accepts, or PID is gone.
wait_port() {
	local _
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}
now() { date +%s.%N; }
# The middle one of the numbers on stdin (the higher middle one of an even count).
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# bench_rdmacpd MODPATH [IDLE_TIMEOUT_S [MODULE_LINES]]: certificates and an rdmacpd on
# 127.0.0.1 whose module "bench" is MODPATH; RD_PORT, and RD, the client's
# command line to it over tcp. Its log is $R/d.log.
bench_rdmacpd() {
	RD_PORT=$(free_port)
	"$RDMACP" certs init "$R/certs" >/dev/null || die "rdmacp certs init"
	cat >"$R/d.conf" <<EOF
[global]
listen = 127.0.0.1:$RD_PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt
idle timeout = ${2:-120}

[bench]
path = $1
allow = client
uid = $(id -u)
gid = $(id -g)
${3:-}
EOF
	"$RDMACPD" --config "$R/d.conf" >"$R/d.log" 2>&1 &
	PIDS+=($!)
	wait_port "$RD_PORT" $! || {
		cat "$R/d.log" >&2
		die "rdmacpd did not start"
	}
	# shellcheck disable=SC2034 # for the script that sources this
	RD=("$RDMACP" --config /dev/null --cert "$R/certs/client.crt" --key "$R/certs/client.key"
		--ca "$R/certs/ca.crt" -P "$RD_PORT" --transport tcp)
}

# bench_rsyncd MODPATH [MODULE_LINES]: an rsync daemon on 127.0.0.1, module "bench" =
# MODPATH; RS_PORT.
bench_rsyncd() {
	RS_PORT=$(free_port)
	cat >"$R/rsyncd.conf" <<EOF
pid file = $R/rsyncd.pid
use chroot = no
uid = $(id -u)
gid = $(id -g)
[bench]
path = $1
read only = no
${2:-}
EOF
	rsync --daemon --no-detach --address=127.0.0.1 --port="$RS_PORT" --config="$R/rsyncd.conf" \
		--log-file="$R/rsyncd.log" &
	PIDS+=($!)
	wait_port "$RS_PORT" $! || die "rsync daemon did not start"
}
