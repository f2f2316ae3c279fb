#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What rdmacp tells the user around a copy (issue 33's small items), against a
# real daemon on loopback:
#   1. -v says the transport auto chose once, plainly ("transport: tcp (no RDMA
#      device on this host)"), never ibv_get_device_list's errno; -vv adds it
#   2. --progress shows the entries done of how many, and the file being sent
#   3. the rate and seconds count from the transfer's start: a --wait-busy
#      wait of ~2.5 s before it is not in the summary's seconds
#   4. HOST: (no module) and HOST:nope/x say which module is missing and
#      hint 'rdmacp ls HOST'; exit 5; HOST: alone (no DST) points at ls, exit 1
#   5. SIGINT says how to pick the copy up again: "re-run with --partial"
#      without --partial, "re-run the same command to resume" with it; exit 10
#   6. rdmacpd --check prints one line on success: modules and listeners
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
BG_PIDS=()
cleanup_msgs() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_msgs EXIT
command -v jq >/dev/null || skip "no jq"

mkdir -p "$T/src" "$T/mod2"
setup_standard "" "[other]" "path = $T/mod2" "allow = client"
head -c 6000000 /dev/urandom >"$T/src/big"
echo small >"$T/src/small"

# ---- 1. the transport auto chose, once and plainly ----
echo "--- 1. transport: said once, plainly"
if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	echo "note: this host has RDMA devices ($(ls /sys/class/infiniband | tr '\n' ' ')):" \
		"auto picks verbs here, the tcp fallback line is not checked"
else
	expect_rc 0 "1: -v push" "${CLIENT[@]}" -v "$T/src/small" "$HOST:data/"
	n=$(grep -c "transport: tcp (no RDMA device on this host)" "$T/err")
	[ "$n" -eq 1 ] && pass "1: said once, plainly" || fail "1: said $n times: $(cat "$T/err")"
	grep -q "ibv_get_device_list\|transport auto" "$T/err" &&
		fail "1: -v shows the detail: $(cat "$T/err")" || pass "1: -v keeps the detail back"
	expect_rc 0 "1: -vv push" "${CLIENT[@]}" -vv "$T/src/small" "$HOST:data/"
	grep -q "transport auto: tcp: " "$T/err" && pass "1: -vv has the detail" ||
		fail "1: -vv has no detail: $(grep -i transport "$T/err")"
fi

# ---- 2. the progress line ----
echo "--- 2. --progress"
for i in 1 2 3; do head -c 2000000 /dev/urandom >"$T/src/f$i"; done
expect_rc 0 "2: push with --progress" "${CLIENT[@]}" --progress --bwlimit 4M \
	"$T/src/f1" "$T/src/f2" "$T/src/f3" "$HOST:data/p/"
tr '\r' '\n' <"$T/err" >"$T/prog"
grep -qE ' 0/3 f1' "$T/prog" && pass "2: entries done of 3, and f1 named while sent" ||
	fail "2: progress lines: $(head -c 600 "$T/prog" | cat -v)"
grep -qE ' [12]/3 f[23]' "$T/prog" && pass "2: the count moves on, and the name with it" ||
	fail "2: no count past 0: $(tail -c 400 "$T/prog" | cat -v)"

# ---- 3. the rate's clock ----
echo "--- 3. seconds from the transfer's start, not the wait"
PORT2=$(free_port)
write_conf "$T/d2.conf" "$PORT2" "$T/certs" "handshake timeout = 30" \
	"max connections = 4" "max connections per host = 1"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d2.conf"
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
C2=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT2")
# A silent connection holds the one slot for 2.5 s, once start_daemon's probe
# connection is gone: ping (which never waits) is turned away then.
held=0
for _ in $(seq 1 20); do
	(exec 5<>"/dev/tcp/127.0.0.1/$PORT2" && sleep 2.5) &
	holder=$!
	BG_PIDS+=("$holder")
	sleep 0.2
	"${C2[@]}" ping "$HOST" >/dev/null 2>&1
	[ $? -eq 11 ] && { held=1; break; }
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	sleep 0.2
done
[ "$held" -eq 1 ] || fail "3: could not hold the daemon's one slot"
t0=$(date +%s%N)
expect_rc 0 "3: push waits for the slot" "${C2[@]}" --json --wait-busy 20 "$T/src/small" \
	"$HOST:data/w/"
wall_ms=$((($(date +%s%N) - t0) / 1000000))
secs=$(jq -r 'select(.event == "summary") | .seconds' "$T/out")
waited=$(jq -r 'select(.event == "wait") | .event' "$T/out")
echo "    wall ${wall_ms} ms, summary seconds $secs, wait event: ${waited:-none}"
if [ "$waited" != wait ] || [ "$wall_ms" -lt 1500 ]; then
	fail "3: the push did not wait for the held slot (wall ${wall_ms} ms): $(cat "$T/out")"
elif awk -v s="$secs" 'BEGIN { exit !(s < 1.0) }'; then
	pass "3: summary seconds $secs, the ${wall_ms} ms wait left out"
else
	fail "3: summary seconds $secs include the wait (wall ${wall_ms} ms)"
fi

# ---- 4. a missing module ----
echo "--- 4. no module"
mkdir -p "$T/here"
expect_rc 5 "4: HOST: names no module" "${CLIENT[@]}" "$HOST:" "$T/here/"
grep -q "no module given" "$T/err" && grep -qF "'rdmacp ls $HOST'" "$T/err" &&
	pass "4: says none given, hints rdmacp ls" || fail "4: $(cat "$T/err")"
grep -q "no module for ''" "$T/err" && fail "4: the bare daemon text: $(cat "$T/err")"
expect_rc 5 "4: HOST:nope/x" "${CLIENT[@]}" "$T/src/small" "$HOST:nope/x"
grep -q "no module 'nope'" "$T/err" && grep -qF "'rdmacp ls $HOST'" "$T/err" &&
	pass "4: names the module, hints rdmacp ls" || fail "4: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -le 2 ] && pass "4: two lines" || fail "4: $(cat "$T/err")"
expect_rc 1 "4: HOST: alone (rsync's HOST:: lists modules)" "${CLIENT[@]}" "$HOST:"
grep -qF "rdmacp ls $HOST:" "$T/err" && pass "4: points at rdmacp ls" || fail "4: $(cat "$T/err")"

# ---- 5. Ctrl-C ----
echo "--- 5. SIGINT hints"
interrupt() { # DESC ARGS...: a slow push cut by SIGINT after 1 s; stderr in $T/int.err
	local desc=$1 pid rc
	shift
	"${CLIENT[@]}" --bwlimit 1M "$@" "$T/src/big" "$HOST:data/int/" >/dev/null 2>"$T/int.err" &
	pid=$!
	BG_PIDS+=("$pid")
	sleep 1.2
	kill -INT "$pid"
	wait "$pid"
	rc=$?
	[ "$rc" -eq 10 ] && pass "5: $desc: exit 10" || fail "5: $desc: exit $rc: $(cat "$T/int.err")"
}
interrupt "without --partial"
grep -q "re-run with --partial to keep what was copied" "$T/int.err" &&
	pass "5: hints --partial" || fail "5: no --partial hint: $(cat "$T/int.err")"
interrupt "with --partial" --partial
grep -q "re-run the same command to resume" "$T/int.err" &&
	pass "5: says a re-run resumes" || fail "5: no resume hint: $(cat "$T/int.err")"
grep -q "re-run with --partial" "$T/int.err" && fail "5: --partial hint though given"

# ---- 6. rdmacpd --check ----
echo "--- 6. rdmacpd --check"
expect_rc 0 "6: --check" "$RDMACPD" --config "$T/d.conf" --check
[ "$(wc -l <"$T/out")" -eq 1 ] &&
	grep -qE "^$T/d.conf: OK: 2 modules, listen 127\.0\.0\.1:$PORT\$" "$T/out" &&
	pass "6: one line: $(cat "$T/out")" || fail "6: stdout: $(cat "$T/out")"
finish
