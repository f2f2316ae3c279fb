#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/loopcpu.sh OLD_BUILD NEW_BUILD [--mib N] [--reps N] [--workers N] [--encrypt]:
# the CPU time of the engine's loop thread per GiB, at both ends, on the receiver's
# copy path (verbs' private copies, forced on tcp by RDMACPD_TEST_COPY_SLOTS), with
# two builds. Each run pushes one file of N MiB (default 1024) over tcp on loopback
# (clear lanes unless --encrypt) to an rdmacpd whose session copies every slot, with
# "hash threads" 0 (everything on the loop) and W (default 2; the client gets
# --hash-threads W too), old and new alternating run by run. Per thread CPU time
# (utime + stime from /proc/PID/task/TID/stat, sampled every 20 ms until the
# process is gone, so a run's last 20 ms may be missed) is summed by kind:
#   loop     the session's engine thread (the daemon's session process's main
#            thread; the client's main thread); (user): its user time alone,
#            without the kernel's (io_uring submissions it runs inline, the
#            page cache copies of buffered writes, polls)
#   workers  threads named rdmacp-worker (engine_workers.c; an old build's
#            hashing threads are not named: they count under "other")
#   other    the rest: the tcp transport's lane threads, io_uring's workers, syncs
# and printed as CPU-seconds per GiB, each run and the medians. These are CPU-time
# numbers of the tcp transport on this machine, never RDMA throughput.
set -u
export LC_ALL=C

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || die "usage: bench/loopcpu.sh OLD_BUILD NEW_BUILD [--mib N] [--reps N] [--workers N] [--encrypt]"
OLD=$(realpath "$1") NEW=$(realpath "$2")
shift 2
MIB=1024 REPS=3 W=2 ENC=(--no-encrypt)
while [ $# -gt 0 ]; do
	case $1 in
	--mib) MIB=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--workers) W=$2; shift ;;
	--encrypt) ENC=() ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
for b in "$OLD" "$NEW"; do
	[ -x "$b/rdmacp" ] && [ -x "$b/rdmacpd" ] || die "no rdmacp and rdmacpd in $b"
done
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
SRC=$BENCH_DIR/data/big-${MIB}M.bin
bench_random "$SRC" "$MIB"
bench_workdir loopcpu

# The sampler: runs the client (the command after the daemon's PID) and samples it
# and the daemon's session children as they appear, until the client exits. Prints
# "side kind seconds" for every thread kind seen; exits with the client's status.
cat >"$R/sample.py" <<'EOF'
import os, sys, time
import subprocess
daemon = int(sys.argv[1])
proc = subprocess.Popen(sys.argv[2:])
client = proc.pid
hz = os.sysconf("SC_CLK_TCK")
seen = {}  # (side, pid, tid) -> (comm, ticks)
def children(pid):
	try:
		with open(f"/proc/{pid}/task/{pid}/children") as f:
			return [int(x) for x in f.read().split()]
	except OSError:
		return []
def sample(side, pid):
	try:
		tids = os.listdir(f"/proc/{pid}/task")
	except OSError:
		return
	for t in tids:
		try:
			with open(f"/proc/{pid}/task/{t}/stat") as f:
				s = f.read()
			with open(f"/proc/{pid}/task/{t}/comm") as f:
				comm = f.read().strip()
		except OSError:
			continue
		rest = s[s.rindex(")") + 2:].split()
		seen[(side, pid, int(t))] = (comm, int(rest[11]), int(rest[12]))
def alive(pid):
	try:
		with open(f"/proc/{pid}/stat") as f:
			s = f.read()
	except OSError:
		return False
	return s[s.rindex(")") + 2] != "Z"
sessions = set()
while alive(client):
	sessions.update(children(daemon))
	sample("sender", client)
	for p in sessions:
		sample("receiver", p)
	time.sleep(0.02)
tot = {}
for (side, pid, tid), (comm, user, sys_) in seen.items():
	kind = "loop" if tid == pid else "workers" if comm == "rdmacp-worker" else "other"
	tot[(side, kind)] = tot.get((side, kind), 0) + user + sys_
	if kind == "loop":
		tot[(side, "loop-user")] = tot.get((side, "loop-user"), 0) + user
for side in ("receiver", "sender"):
	for kind in ("loop", "loop-user", "workers", "other"):
		print(side, kind, tot.get((side, kind), 0) / hz)
sys.exit(proc.wait())
EOF

"$NEW/rdmacp" certs init "$R/certs" >/dev/null || die "certs init"
declare -A PORT DPID
# daemon SIDE WORKERS: an rdmacpd of that build copying slots, with that many workers.
daemon() {
	local side=$1 w=$2 build=$OLD key=$1.$2
	[ "$side" = new ] && build=$NEW
	PORT[$key]=$(free_port)
	mkdir -p "$R/$key"
	cat >"$R/$key.conf" <<EOF
[global]
listen = 127.0.0.1:${PORT[$key]}
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt
hash threads = $w

[bench]
path = $R/$key
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
	RDMACPD_TEST_COPY_SLOTS=1 "$build/rdmacpd" --config "$R/$key.conf" >"$R/$key.log" 2>&1 &
	DPID[$key]=$!
	PIDS+=($!)
	wait_port "${PORT[$key]}" "$!" || die "$key: rdmacpd did not start"
}
for side in old new; do
	daemon "$side" 0
	daemon "$side" "$W"
done

# run SIDE WORKERS: one push; prints "loop_rx workers_rx other_rx loop_tx workers_tx other_tx" per GiB.
run() {
	local side=$1 w=$2 key=$1.$2 build=$OLD
	[ "$side" = new ] && build=$NEW
	rm -rf "$R/$key/dst" && mkdir -p "$R/$key/dst"
	cat "$SRC" >/dev/null
	python3 "$R/sample.py" "${DPID[$key]}" "$build/rdmacp" --config /dev/null \
		--cert "$R/certs/client.crt" --key "$R/certs/client.key" --ca "$R/certs/ca.crt" \
		-P "${PORT[$key]}" --transport tcp -q "${ENC[@]}" --hash-threads "$w" "$SRC" \
		"127.0.0.1:bench/dst/" >"$R/sample.out" || return 1
	cmp -s "$SRC" "$R/$key/dst/$(basename "$SRC")" || return 1
	awk -v gib="$(echo "$MIB / 1024" | bc -l)" '{ v[$1 " " $2] = $3 / gib }
		END { printf "%.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", v["receiver loop"],
			v["receiver loop-user"], v["receiver workers"], v["receiver other"],
			v["sender loop"], v["sender loop-user"], v["sender workers"], v["sender other"] }' \
		"$R/sample.out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "old: $OLD"
echo "new: $NEW"
echo "$MIB MiB per push, $REPS reps, workers 0 and $W, lanes ${ENC[*]:-sealed}; CPU-s per GiB"
echo "case      rep  rx-loop (user) rx-workers rx-other  tx-loop (user) tx-workers tx-other"
for i in $(seq 1 "$REPS"); do
	order="old new"
	[ $((i % 2)) -eq 0 ] && order="new old"
	for w in 0 "$W"; do
		for side in $order; do
			out=$(run "$side" "$w") || die "$side, $w workers: the push failed"
			echo "$out" >>"$R/$side.$w.runs"
			read -r a b c d e f g h <<<"$out"
			printf '%-4s w=%-2s %3d  %7s %6s %10s %8s  %7s %6s %10s %8s\n' "$side" "$w" "$i" \
				"$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"
		done
	done
done
for w in 0 "$W"; do
	for side in old new; do
		printf 'median %-4s w=%-2s' "$side" "$w"
		for col in 1 2 3 4 5 6 7 8; do
			printf ' %9s' "$(awk -v c=$col '{ print $c }' "$R/$side.$w.runs" | median)"
		done
		echo
	done
done
