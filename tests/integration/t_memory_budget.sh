#!/bin/bash
# SPDX-License-Identifier: MIT
#
# "memory budget" counts exactly what each session pins (SECURITY.md G, issue 8
# item 4). A daemon with "memory budget = 8M" and "pool size = 8M"; clients
# with --chunk-size 64K, so that the old reservation, (slots + 1) x chunk =
# 2.06 MiB, was far below what a session really pins (a pull's pool of
# pool size / 2 plus a descriptor chunk, a push's ring plus a descriptor
# chunk, each rounded up to whole 2 MiB pages: 6 MiB and 4 MiB here).
#   1. pulls: three pulls one after the other, each held mid-transfer (the
#      client stopped with SIGSTOP, so the daemon's session keeps its pool);
#      the second and third get BUSY (exit 5, "busy"), and the VmPin of the
#      daemon's session processes never adds up to more than the budget
#   2. pushes: three rate-limited pushes (--bwlimit) at once: every client
#      exits 0 or 5, at least one is told busy, the sessions' VmPin, sampled
#      while they run, never adds up to more than the budget, and every file
#      a client reported done is intact
#   3. a dry run pins nothing: with the budget taken by a held pull, dry runs
#      of a pull and a push still succeed
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
M=$((1024 * 1024))
BUDGET_KB=8192
BG_PIDS=()

cleanup_budget() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_budget EXIT

grep -q '^VmPin:' /proc/self/status || skip "this kernel has no VmPin in /proc/PID/status"

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 30" \
	"memory budget = 8M" "pool size = 8M"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
D=$DAEMON_PID
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" --chunk-size 64K)

# The daemon's session processes, one pid a line.
sessions() { cat /proc/"$D"/task/*/children 2>/dev/null | tr ' ' '\n' | grep .; }
vmpin_kb() { awk '/^VmPin:/ { print $2 }' /proc/"$1"/status 2>/dev/null; }
# The VmPin of every session now, summed (kB).
pinned_kb() {
	local p sum=0 v
	for p in $(sessions); do
		v=$(vmpin_kb "$p")
		sum=$((sum + ${v:-0}))
	done
	echo "$sum"
}
MAX_PINNED=0
sample_pinned() {
	local now
	now=$(pinned_kb)
	[ "$now" -gt "$MAX_PINNED" ] && MAX_PINNED=$now
}

# ---- 1. pulls --------------------------------------------------------------------
echo "--- 1. three pulls held mid-transfer, memory budget = 8M"
# Sparse: the daemon reads zeros quickly, the held clients write only a little.
# Data, not a hole: a sparse file crosses as zero extents with nothing to read or pin.
yes 0123456789abcdef | head -c $((512 * M)) >"$T/mod/big"

# hold_pull I: start pull I; once a new session of the daemon has pinned
# memory, stop the client there (the session keeps its pool while the client
# neither reads nor returns credits). PULL_RC[I] is its exit status if it
# ended first (a refusal), HELD[I]=1 if it was stopped mid-transfer.
declare -A PULL_PID PULL_RC HELD
hold_pull() {
	local i=$1 before p v
	before=" $(sessions | tr '\n' ' ') "
	mkdir -p "$T/p$i"
	"${CLIENT[@]}" -q --wait-busy 0 "$HOST:data/big" "$T/p$i/" >"$T/p$i.out" 2>"$T/p$i.err" &
	PULL_PID[$i]=$!
	BG_PIDS+=("${PULL_PID[$i]}")
	for _ in $(seq 1 1000); do
		for p in $(sessions); do
			case $before in *" $p "*) continue ;; esac
			v=$(vmpin_kb "$p")
			if [ "${v:-0}" -gt 0 ]; then
				kill -STOP "${PULL_PID[$i]}" 2>/dev/null && HELD[$i]=1
				sample_pinned
				[ -n "${HELD[$i]:-}" ] && return 0
			fi
		done
		if ! kill -0 "${PULL_PID[$i]}" 2>/dev/null; then
			wait "${PULL_PID[$i]}"
			PULL_RC[$i]=$?
			return 0
		fi
		sleep 0.01
	done
	fail "pull $i: neither refused nor seen pinning memory within 10 s"
}

hold_pull 1
[ -n "${HELD[1]:-}" ] && pass "pull 1: held mid-transfer" ||
	fail "pull 1: not held mid-transfer (exit ${PULL_RC[1]:-?}: $(head -2 "$T/p1.err" | tr '\n' '|'))"
hold_pull 2
hold_pull 3
sample_pinned
echo "    pinned by the sessions: $((MAX_PINNED / 1024)) MiB at most, budget $((BUDGET_KB / 1024)) MiB"
for i in 2 3; do
	if [ "${PULL_RC[$i]:-}" = 5 ] && grep -qi busy "$T/p$i.err"; then
		pass "pull $i: refused busy (exit 5) while pull 1 holds its pool"
	else
		fail "pull $i: exit ${PULL_RC[$i]:-none (held mid-transfer)}, wanted 5 busy: $(head -2 "$T/p$i.err" | tr '\n' '|')"
	fi
done
[ "$MAX_PINNED" -le "$BUDGET_KB" ] && pass "pulls: sessions pinned $MAX_PINNED kB <= budget $BUDGET_KB kB" ||
	fail "pulls: sessions pinned $MAX_PINNED kB > budget $BUDGET_KB kB"

# ---- 3. a dry run pins nothing (pull 1 still holds its pool) ------------------------
echo "--- 3. dry runs while a held pull takes the budget"
echo x >"$T/small"
expect_rc 0 "dry run of a pull with the budget taken" "${CLIENT[@]}" -n "$HOST:data/big" "$T/dry/"
expect_rc 0 "dry run of a push with the budget taken" "${CLIENT[@]}" -n "$T/small" "$HOST:data/dry/"

for i in 1 2 3; do
	if [ -n "${HELD[$i]:-}" ]; then
		kill -KILL "${PULL_PID[$i]}" 2>/dev/null
		wait "${PULL_PID[$i]}" 2>/dev/null
	fi
done
# The killed clients' sessions end (EOF) and give their memory back.
for _ in $(seq 1 200); do
	[ -z "$(sessions)" ] && break
	sleep 0.05
done
[ -z "$(sessions)" ] && pass "pulls: every session ended after its client was killed" ||
	fail "pulls: sessions still running: $(sessions | tr '\n' ' ')"
rm -f "$T/mod/big"

# ---- 2. pushes -------------------------------------------------------------------
echo "--- 2. three rate-limited pushes at once, memory budget = 8M"
MAX_PINNED=0
mkdir -p "$T/src"
declare -A PUSH_PID PUSH_RC
for i in 1 2 3; do
	head -c $((3 * M)) /dev/urandom >"$T/src/f$i"
	"${CLIENT[@]}" -q --wait-busy 0 --bwlimit 1M "$T/src/f$i" "$HOST:data/c$i/" >"$T/c$i.out" 2>"$T/c$i.err" &
	PUSH_PID[$i]=$!
	BG_PIDS+=("${PUSH_PID[$i]}")
done
running=3
while [ "$running" -gt 0 ]; do
	sample_pinned
	running=0
	for i in 1 2 3; do
		kill -0 "${PUSH_PID[$i]}" 2>/dev/null && running=$((running + 1))
	done
	sleep 0.05
done
n0=0 n5=0 other=0
for i in 1 2 3; do
	wait "${PUSH_PID[$i]}"
	PUSH_RC[$i]=$?
	case ${PUSH_RC[$i]} in
	0)
		n0=$((n0 + 1))
		cmp -s "$T/src/f$i" "$T/mod/c$i/f$i" || fail "push $i: exit 0 but c$i/f$i missing or different"
		;;
	5)
		n5=$((n5 + 1))
		grep -qi busy "$T/c$i.err" || fail "push $i: exit 5 without 'busy': $(head -2 "$T/c$i.err" | tr '\n' '|')"
		;;
	*)
		other=$((other + 1))
		echo "    push $i: exit ${PUSH_RC[$i]}: $(head -2 "$T/c$i.err" | tr '\n' '|')"
		;;
	esac
done
echo "    exit codes: ${PUSH_RC[*]}; pinned by the sessions: $((MAX_PINNED / 1024)) MiB at most"
[ "$other" -eq 0 ] && pass "pushes: every client exits 0 or 5 ($n0 ok, $n5 busy)" ||
	fail "pushes: $other clients exited with something other than 0 or 5"
[ "$n0" -ge 1 ] && pass "pushes: at least one ran" || fail "pushes: none ran"
[ "$n5" -ge 1 ] && pass "pushes: at least one was told busy" || fail "pushes: nobody was told busy"
[ "$MAX_PINNED" -le "$BUDGET_KB" ] && pass "pushes: sessions pinned $MAX_PINNED kB <= budget $BUDGET_KB kB" ||
	fail "pushes: sessions pinned $MAX_PINNED kB > budget $BUDGET_KB kB"
expect_rc 0 "afterwards: a push (the budget was given back)" "${CLIENT[@]}" -q "$T/src/f1" "$HOST:data/after/"

finish
