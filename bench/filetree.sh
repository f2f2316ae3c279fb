#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/filetree.sh BUILD [--reps N] [--mib M] [--copy] [--hash-threads N] [--clear] [--threads]
# [--tree-only]: a file's
# end-to-end digest as its chunk tree (bit 41, PROTO_CAP_FILE_TREE) against the stream of its
# bytes: the same push of one big file (tcp, loopback), the client's bit masked
# (RDMACP_TEST_CAPS_OFF, "stream") or not ("tree"), alternating run by run with the order
# swapped every repetition. Prints each run's seconds and CPU-seconds (the daemon's and the
# client's, from /proc: both ends, kernel time included), and the medians, tree/stream.
#   --copy: the daemon's receiver takes the verbs way on tcp (RDMACPD_TEST_COPY_SLOTS:
#           private copies made on its workers, where the tree's chunks hash apart)
#   --hash-threads N: the daemon's workers (its "hash threads" key); the client's too
#   --threads: also each thread's CPU-seconds by name, the client's (the sender) and the
#           daemon's session's (the receiver), sampled from /proc/PID/task/*/stat every 50 ms
#   --tree-only: only the tree runs (to compare two builds, run alternately)
set -u
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || die "usage: bench/filetree.sh BUILD [--reps N] [--mib M] [--copy] [--hash-threads N] [--clear] [--threads] [--tree-only]"
B=$(realpath "$1")
shift
REPS=5 MIB=2048 COPY=0 HT= CLEAR=() THREADS=0 KINDS=(stream tree)
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--mib) MIB=$2; shift ;;
	--copy) COPY=1 ;;
	--hash-threads) HT=$2; shift ;;
	--clear) CLEAR=(--no-encrypt) ;;
	--threads) THREADS=1 ;;
	--tree-only) KINDS=(tree) ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
RDMACP=$B/rdmacp RDMACPD=$B/rdmacpd
[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "no rdmacp and rdmacpd in $B"
need openssl bc
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
BIG=$BENCH_DIR/data/big-${MIB}M.bin
bench_random "$BIG" "$MIB"
bench_workdir filetree
mkdir -p "$R/mod"
CLK_TCK=$(getconf CLK_TCK)
# cpu_busy SHELL: the CPU-seconds of this run's processes, not the machine's (a shared host):
# the daemon's (its sessions' children reaped) and the reaped children (the client) of SHELL,
# the one that waits for the client (run's, a subshell: its $BASHPID, not $$).
cpu_busy() {
	awk -v hz="$CLK_TCK" '{ t += $14 + $15 + $16 + $17 } END { printf "%.2f\n", t / hz }' \
		"/proc/${PIDS[-1]}/stat" <(awk '{ print 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,$16,$17 }' "/proc/$1/stat")
}
if [ "$COPY" = 1 ]; then export RDMACPD_TEST_COPY_SLOTS=1; fi
bench_rdmacpd "$R/mod" 120
if [ -n "$HT" ]; then
	# The workers are a [global] key: the daemon again with it.
	kill -TERM "${PIDS[-1]}" && wait "${PIDS[-1]}" 2>/dev/null
	sed -i "/^idle timeout/a hash threads = $HT" "$R/d.conf"
	"$RDMACPD" --config "$R/d.conf" >"$R/d.log" 2>&1 &
	PIDS+=($!)
	wait_port "$RD_PORT" $! || die "rdmacpd did not start: $(cat "$R/d.log")"
fi
unset RDMACPD_TEST_COPY_SLOTS

# sample CLIENT: "side pid tid comm ticks" of every thread of the client and of the daemon's
# session processes (its children), while the client runs; tasks_sum prints each thread's
# last sample, the event loop (the process's first thread) named "loop".
sample() {
	local p
	while kill -0 "$1" 2>/dev/null; do
		awk -v p="$1" '{ print "client", p, $1, $2, $14 + $15 }' /proc/"$1"/task/*/stat 2>/dev/null
		for p in $(pgrep -P "${PIDS[-1]}"); do
			awk -v p="$p" '{ print "daemon", p, $1, $2, $14 + $15 }' /proc/"$p"/task/*/stat 2>/dev/null
		done
		sleep 0.05
	done
}
tasks_sum() {
	awk -v hz="$CLK_TCK" '{ k = $1 " " ($2 == $3 ? "loop" : $4) " " $3; last[k] = $5 }
		END { for (k in last) { split(k, a, " "); printf "  %s %s %.2f\n", a[1], a[2], last[k] / hz } }' \
		"$1" | sort -k1,1 -k2,2 -k3,3nr
}

# run KIND: one push; prints "seconds cpu-seconds" (--threads: each thread's to stderr).
run() {
	local t0 t1 c0 c1 rc env=() pid
	local me=$BASHPID # this subshell, which waits for the client
	rm -rf "$R/mod/dst" && mkdir -p "$R/mod/dst" && sync -f "$R/mod"
	cat "$BIG" >/dev/null
	[ "$1" = stream ] && env=(RDMACP_TEST_CAPS_OFF=$((1 << 41)))
	c0=$(cpu_busy "$me")
	t0=$(now)
	env "${env[@]}" "${RD[@]}" -q "${CLEAR[@]}" ${HT:+--hash-threads "$HT"} "$BIG" "127.0.0.1:bench/dst/" &
	pid=$!
	[ "$THREADS" = 1 ] && sample "$pid" >"$R/tasks"
	wait "$pid"
	rc=$?
	t1=$(now)
	[ "$THREADS" = 1 ] && { echo "$1: each thread's CPU-s (side, name, CPU-s):"; tasks_sum "$R/tasks"; } >&2
	# The daemon reaps its session's process (its CPU time goes to cutime): at most 5 s.
	for _ in $(seq 50); do pgrep -P "${PIDS[-1]}" >/dev/null || break; sleep 0.1; done
	c1=$(cpu_busy "$me")
	[ "$rc" -eq 0 ] || die "push ($1) failed: exit $rc"
	echo "$(echo "$t1 - $t0" | bc -l) $(echo "$c1 - $c0" | bc -l)"
}

echo "build: $B; ${MIB} MiB, reps $REPS, copy path $COPY, hash threads ${HT:-auto}, ${CLEAR[*]:-sealed}"
declare -A S C
for i in $(seq 1 "$REPS"); do
	order=("${KINDS[@]}")
	[ $((i % 2)) = 0 ] && [ ${#KINDS[@]} = 2 ] && order=(tree stream)
	for k in "${order[@]}"; do
		read -r s c < <(run "$k")
		printf '%-6s rep %d: %.2f s, %.2f CPU-s\n' "$k" "$i" "$s" "$c"
		S[$k]+="$s "
		C[$k]+="$c "
	done
done
for k in "${KINDS[@]}"; do
	ms=$(tr ' ' '\n' <<<"${S[$k]}" | grep . | median)
	mc=$(tr ' ' '\n' <<<"${C[$k]}" | grep . | median)
	printf '%-6s median: %.2f s, %.2f CPU-s\n' "$k" "$ms" "$mc"
	eval "M_$k=$ms N_$k=$mc"
done
[ ${#KINDS[@]} = 2 ] || exit 0
printf 'tree/stream: %.3fx the time, %.3fx the CPU-s\n' "$(echo "$M_tree / $M_stream" | bc -l)" \
	"$(echo "$N_tree / $N_stream" | bc -l)"
