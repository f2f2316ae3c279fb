#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Many clients at once against one daemon:
#   1. "max connections = 64" (and 64 per host: all clients come from
#      127.0.0.1): 32 concurrent pushes all succeed, every file intact
#   2. "max connections = 8" (8 per host): 32 concurrent pushes with
#      --wait-busy 0 (no waiting: t_wait_busy waits) each exit 0,
#      11 (turned away at the TCP level) or 5 (busy), nothing else; the
#      daemon survives, no session is killed by a signal, and every file a
#      client reported done is intact
#   3. "memory budget = 8M" with "pool size = 4M" (one transfer pins 4 MiB,
#      so two fit at a time): 16 concurrent rate-limited
#      pushes with --wait-busy 0 each exit 0 or 5 ("busy"), at least one of each
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
M=$((1024 * 1024))
BG_PIDS=()

cleanup_load() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_load EXIT

make_certs "$T/certs"
CLIENT_BASE=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt")

# new_daemon NAME GLOBAL-LINES...: daemon with module "data" at $T/NAME.
new_daemon() {
	local name=$1
	shift
	PORT=$(free_port)
	rm -rf "${T:?}/$name"
	mkdir -p "$T/$name"
	write_conf "$T/$name.conf" "$PORT" "$T/certs" "handshake timeout = 10" "idle timeout = 30" "$@"
	printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/$name" >>"$T/$name.conf"
	start_daemon "$T/$name.conf" "$T/$name.log" "$PORT"
}

# run_many N SIZE ARGS...: N concurrent pushes of distinct SIZE-byte files
# to data/cI/; exit codes in RC[I], output in $T/cI.err.
run_many() {
	local n=$1 size=$2 i pids=()
	shift 2
	mkdir -p "$T/src"
	for i in $(seq 1 "$n"); do
		[ -f "$T/src/f$i" ] && [ "$(stat -c %s "$T/src/f$i")" -eq "$size" ] ||
			head -c "$size" /dev/urandom >"$T/src/f$i"
	done
	for i in $(seq 1 "$n"); do
		"${CLIENT_BASE[@]}" -P "$PORT" "$@" "$T/src/f$i" "$HOST:data/c$i/" >"$T/c$i.out" 2>"$T/c$i.err" &
		pids[$i]=$!
		BG_PIDS+=("${pids[$i]}")
	done
	RC=()
	for i in $(seq 1 "$n"); do
		wait "${pids[$i]}"
		RC[$i]=$?
	done
	BG_PIDS=()
}

# summarize: "rc:count ..." of RC.
summarize() {
	local i
	for i in "${!RC[@]}"; do echo "${RC[$i]}"; done | sort -n | uniq -c | awk '{printf "%s:%s ", $2, $1}'
}

check_done_intact() { # DESC MODDIR N: every client that exited 0 has its file intact
	local i bad=0 ok=0
	for i in $(seq 1 "$3"); do
		if [ "${RC[$i]}" -eq 0 ]; then
			if cmp -s "$T/src/f$i" "$2/c$i/f$i"; then
				ok=$((ok + 1))
			else
				bad=$((bad + 1))
				echo "    client $i: exit 0 but $2/c$i/f$i missing or different"
			fi
		fi
	done
	[ "$bad" -eq 0 ] && pass "$1: all $ok files reported done are intact" || fail "$1: $bad files reported done are not intact"
	local temps
	temps=$(find "$2" -name '.*.rdmacp.*' | head -3)
	[ -z "$temps" ] && pass "$1: no temp files left" || fail "$1: temp files left: $temps"
}

daemon_healthy() { # DESC LOG PID
	kill -0 "$3" 2>/dev/null && pass "$1: daemon alive" || fail "$1: daemon died"
	if grep -qE "killed by signal|AddressSanitizer|runtime error" "$2"; then
		fail "$1: daemon log: $(grep -E "killed by signal|AddressSanitizer|runtime error" "$2" | head -3 | tr '\n' '|')"
	else
		pass "$1: no session killed by a signal, no sanitizer report"
	fi
}

# ---- 1. 32 clients, room for all ---------------------------------------------------
echo "--- 1. 32 concurrent clients, max connections = 64"
new_daemon one "max connections = 64" "max connections per host = 64"
D1=$DAEMON_PID
t0=$(date +%s%N)
run_many 32 $((2 * M + 123)) -q
echo "    exit codes: $(summarize) ($((($(date +%s%N) - t0) / 1000000)) ms)"
n0=0
for i in $(seq 1 32); do
	[ "${RC[$i]}" -eq 0 ] && n0=$((n0 + 1))
	[ "${RC[$i]}" -eq 0 ] || echo "    client $i: exit ${RC[$i]}: $(head -2 "$T/c$i.err" | tr '\n' '|')"
done
[ "$n0" -eq 32 ] && pass "32 clients: all exit 0" || fail "32 clients: only $n0 of 32 exit 0"
check_done_intact "32 clients" "$T/one" 32
daemon_healthy "32 clients" "$T/one.log" "$D1"
expect_rc 0 "after the 32: one more push" "${CLIENT_BASE[@]}" -P "$PORT" -q "$T/src/f1" "$HOST:data/after/"
stop_daemon "$D1"

# ---- 2. 32 clients, 8 allowed ---------------------------------------------------------
echo "--- 2. 32 concurrent clients, max connections = 8"
new_daemon two "max connections = 8" "max connections per host = 8"
D2=$DAEMON_PID
# Rate-limited so that the sessions overlap.
run_many 32 $((4 * M)) -q --wait-busy 0 --bwlimit 16M
echo "    exit codes: $(summarize)"
other=0 n0=0 n11=0 n5=0
for i in $(seq 1 32); do
	case ${RC[$i]} in
	0) n0=$((n0 + 1)) ;;
	11) n11=$((n11 + 1)) ;;
	5) n5=$((n5 + 1)) ;;
	*)
		other=$((other + 1))
		echo "    client $i: exit ${RC[$i]}: $(head -3 "$T/c$i.err" | tr '\n' '|')"
		;;
	esac
done
[ "$other" -eq 0 ] && pass "max 8: every client exits 0, 11 or 5 ($n0 ok, $n11 connect, $n5 busy)" ||
	fail "max 8: $other clients exited with something other than 0, 11 or 5"
[ "$n0" -ge 1 ] && pass "max 8: at least one client succeeded" || fail "max 8: no client succeeded"
[ "$n11" -ge 1 ] && pass "max 8: the limit turned some away ($n11)" ||
	echo "note: max 8: no client was turned away (the sessions did not overlap enough)"
for i in $(seq 1 32); do
	if [ "${RC[$i]}" -eq 11 ] && ! grep -qiE "busy|closed|connect" "$T/c$i.err"; then
		fail "max 8: client $i exit 11 without a reason: $(head -2 "$T/c$i.err" | tr '\n' '|')"
	fi
done
grep -q "max connections reached\|per host" "$T/two.log" && [ "$n11" -ge 1 ] &&
	pass "max 8: the daemon logs the refusals" || [ "$n11" -eq 0 ] ||
	fail "max 8: no refusal in the daemon log"
check_done_intact "max 8" "$T/two" 32
daemon_healthy "max 8" "$T/two.log" "$D2"
# The limit frees up again.
expect_rc 0 "max 8: a push afterwards" "${CLIENT_BASE[@]}" -P "$PORT" -q "$T/src/f1" "$HOST:data/after/"
stop_daemon "$D2"

# ---- 3. memory budget ------------------------------------------------------------------
echo "--- 3. 16 concurrent clients, memory budget = 8M, pool size = 4M"
new_daemon three "max connections = 64" "max connections per host = 64" \
	"memory budget = 8M" "pool size = 4M"
D3=$DAEMON_PID
# 4 MiB at 2 MiB/s: about two seconds each, so they overlap even when the
# clients start slowly (sanitizer builds).
run_many 16 $((4 * M)) -q --wait-busy 0 --bwlimit 2M
echo "    exit codes: $(summarize)"
other=0 n0=0 n5=0
for i in $(seq 1 16); do
	case ${RC[$i]} in
	0) n0=$((n0 + 1)) ;;
	5)
		n5=$((n5 + 1))
		grep -qi busy "$T/c$i.err" || fail "budget: client $i exit 5 without 'busy': $(head -2 "$T/c$i.err" | tr '\n' '|')"
		;;
	*)
		other=$((other + 1))
		echo "    client $i: exit ${RC[$i]}: $(head -3 "$T/c$i.err" | tr '\n' '|')"
		;;
	esac
done
[ "$other" -eq 0 ] && pass "budget: every client exits 0 or 5 ($n0 ok, $n5 busy)" ||
	fail "budget: $other clients exited with something other than 0 or 5"
[ "$n0" -ge 1 ] && pass "budget: at least one transfer ran" || fail "budget: no transfer ran"
[ "$n5" -ge 1 ] && pass "budget: at least one client was told busy" || fail "budget: nobody was told busy"
grep -q "memory budget" "$T/three.log" && pass "budget: the daemon logs 'memory budget'" ||
	fail "budget: no 'memory budget' refusal in the daemon log"
check_done_intact "budget" "$T/three" 16
daemon_healthy "budget" "$T/three.log" "$D3"
expect_rc 0 "budget: a push afterwards (the budget was given back)" \
	"${CLIENT_BASE[@]}" -P "$PORT" -q "$T/src/f1" "$HOST:data/after/"
# Refused clients leave nothing behind.
for i in $(seq 1 16); do
	if [ "${RC[$i]}" -eq 5 ] && [ -e "$T/three/c$i/f$i" ]; then
		fail "budget: client $i was refused but c$i/f$i exists"
	fi
done
stop_daemon "$D3"

finish
