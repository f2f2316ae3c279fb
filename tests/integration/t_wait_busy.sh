#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Busy is not failure (--wait-busy): 48 clients started at once against one
# daemon with "max connections per host = 4":
#   1. with the default wait every client exits 0 and every destination tree
#      is identical to the source; those that were turned away said once on
#      stderr that they wait, and --json printed one "wait" event;
#   2. with --wait-busy 0 (the old behaviour) some exit 11 at once, saying
#      why ("busy");
#   3. --wait-busy 1 against a daemon whose only per-host slot is held gives
#      up after about a second with exit 11 and says how long it waited;
#      one client waiting 12 s costs the daemon's log at most 2 notice lines
#      (the first refusal, then one line per 10 s with how many more), and
#      every repeat counted is said by the time the daemon stops;
#   4. SIGINT during the wait ends it with exit 10;
#   5. a bad duration is a usage error (exit 1);
#   6. BUSY at OPEN (the memory budget held by another transfer) is waited
#      out too: the second push exits 0 once the first is done; its retries
#      cost the daemon's log one notice, the repeats counted and said.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
N=48
BG_PIDS=()
cleanup_wait() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_wait EXIT

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 10" "idle timeout = 30" \
	"max connections = 64" "max connections per host = 4"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

mkdir -p "$T/src/tree/sub"
head -c 300000 /dev/urandom >"$T/src/tree/a"
head -c 1000 /dev/urandom >"$T/src/tree/sub/b"
ln -s a "$T/src/tree/link"

# run_many ARGS...: N pushes of the tree at once, to data/cI; exit codes in RC[I].
run_many() {
	local i pids=()
	for i in $(seq 1 $N); do
		"${CLIENT[@]}" -a "$@" "$T/src/tree" "$HOST:data/c$i/" >"$T/c$i.out" 2>"$T/c$i.err" &
		pids[$i]=$!
		BG_PIDS+=("${pids[$i]}")
	done
	RC=()
	for i in $(seq 1 $N); do
		wait "${pids[$i]}"
		RC[$i]=$?
	done
	BG_PIDS=()
}
count_rc() { # WANT: how many RC are WANT
	local i n=0
	for i in $(seq 1 $N); do [ "${RC[$i]}" -eq "$1" ] && n=$((n + 1)); done
	echo $n
}

# ---- 1. the default wait -----------------------------------------------------------
echo "--- 1. $N clients at once, 4 per host, default --wait-busy"
t0=$(date +%s%N)
# --bwlimit: each session lasts a while, so they overlap and the limit bites.
run_many --json --bwlimit 2M
echo "    $((($(date +%s%N) - t0) / 1000000)) ms"
n0=$(count_rc 0)
[ "$n0" -eq $N ] && pass "all $N clients exit 0" || {
	fail "only $n0 of $N exit 0"
	for i in $(seq 1 $N); do
		[ "${RC[$i]}" -eq 0 ] || echo "    client $i: exit ${RC[$i]}: $(head -2 "$T/c$i.err" | tr '\n' '|')"
	done
}
bad=0
for i in $(seq 1 $N); do
	diff -r --no-dereference "$T/src/tree" "$T/mod/c$i/tree" >/dev/null 2>&1 || bad=$((bad + 1))
done
[ "$bad" -eq 0 ] && pass "all $N destination trees identical to the source" || fail "$bad trees differ"
waited=0 bad=0
for i in $(seq 1 $N); do
	nsaid=$(grep -c "waiting up to 60 s" "$T/c$i.err")
	nev=$(jq -c 'select(.event == "wait")' "$T/c$i.out" | wc -l)
	if [ "$nsaid" -gt 0 ]; then
		waited=$((waited + 1))
		{ [ "$nsaid" -eq 1 ] && [ "$nev" -eq 1 ] &&
			[ "$(jq -r 'select(.event == "wait") | "\(.reason) \(.wait_busy_s) \(.host)"' "$T/c$i.out")" = "busy 60 $HOST" ]; } ||
			{ bad=$((bad + 1)); echo "    client $i: said $nsaid times, $nev wait events"; }
	elif [ "$nev" -ne 0 ]; then
		bad=$((bad + 1))
	fi
done
[ "$waited" -ge 1 ] && pass "$waited clients were turned away and waited" ||
	fail "no client waited (the limit did not bite)"
[ "$bad" -eq 0 ] && pass "each waiting client said so once (stderr and one --json wait event)" ||
	fail "$bad clients said it wrongly"
grep -q "max connections per host reached" "$T/d.log" && pass "the daemon logged its refusals" ||
	fail "no refusal in the daemon log"

# ---- 2. --wait-busy 0 ----------------------------------------------------------------
echo "--- 2. $N clients at once, --wait-busy 0"
rm -rf "$T/mod"/c*
run_many --wait-busy 0 --bwlimit 2M -q
n11=$(count_rc 11)
n0=$(count_rc 0)
echo "    $n0 exit 0, $n11 exit 11"
[ "$n11" -ge 1 ] && pass "--wait-busy 0: $n11 clients exit 11 at once" || fail "--wait-busy 0: no client exit 11"
[ $((n0 + n11)) -eq $N ] && pass "--wait-busy 0: every client exits 0 or 11" || fail "--wait-busy 0: other exit codes"
bad=0
for i in $(seq 1 $N); do
	if [ "${RC[$i]}" -eq 11 ]; then
		grep -q "busy" "$T/c$i.err" || bad=$((bad + 1))
		grep -q "waiting up to" "$T/c$i.err" && bad=$((bad + 1))
	fi
done
[ "$bad" -eq 0 ] && pass "--wait-busy 0: each exit 11 says busy, none waits" || fail "--wait-busy 0: $bad wrong messages"
stop_daemon "$DAEMON_PID"

# ---- 3. the time runs out ----------------------------------------------------------------
echo "--- 3. one slot, held: --wait-busy 1 gives up"
PORT=$(free_port)
write_conf "$T/d1.conf" "$PORT" "$T/certs" "handshake timeout = 30" "idle timeout = 30" \
	"max connections = 4" "max connections per host = 1"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d1.conf"
start_daemon "$T/d1.conf" "$T/d1.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")
# A silent TCP connection holds the one slot (until the 30 s handshake
# deadline), once start_daemon's probe connection is gone; ping (which never
# waits) is turned away then.
for _ in $(seq 1 20); do
	exec 5<>"/dev/tcp/127.0.0.1/$PORT"
	sleep 0.2
	"${CLIENT[@]}" ping "$HOST" >/dev/null 2>&1
	[ $? -eq 11 ] && break
	exec 5>&-
	sleep 0.2
done
t0=$(date +%s%N)
expect_rc 11 "--wait-busy 1 against a held slot" "${CLIENT[@]}" --wait-busy 1 "$T/src/tree/a" "$HOST:data/one/"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -ge 900 ] && [ "$ms" -lt 5000 ] && pass "gave up after $ms ms (about 1 s)" || fail "gave up after $ms ms"
grep -q "still busy after 1 s of --wait-busy" "$T/err" && pass "says how long it waited" ||
	fail "message: $(cat "$T/err")"
[ "$(grep -c "waiting up to 1 s" "$T/err")" -eq 1 ] && pass "said once that it waits" || fail "wait said: $(cat "$T/err")"
[ ! -e "$T/mod/one/a" ] && pass "nothing written" || fail "one/a exists"

# ---- 3b. the daemon's log while one client waits: bounded -----------------------------
echo "--- 3b. one client waiting 12 s: one log line per 10 s, the rest counted"
mark=$(wc -l <"$T/d1.log")
expect_rc 11 "--wait-busy 12 against a held slot" "${CLIENT[@]}" --wait-busy 12 "$T/src/tree/a" "$HOST:data/one/"
tail -n +"$((mark + 1))" "$T/d1.log" >"$T/d1.part"
tries=$(grep -c "refusing connection from .*max connections per host reached" "$T/d1.part")
notices=$(grep -c " notice: refus" "$T/d1.part")
echo "    $tries refusals while it waited, $notices notice lines"
[ "$tries" -ge 4 ] && pass "the waiting client was refused $tries times" ||
	fail "only $tries refusals in 12 s of --wait-busy: $(cat "$T/d1.part")"
[ "$notices" -le 2 ] && pass "at most 2 notice lines for them ($notices)" ||
	fail "$notices notice lines for $tries refusals: $(grep " notice: refus" "$T/d1.part")"
# The first refusal (section 3) was logged less than 10 s before this wait began, and
# the wait outlasts that interval: its count is said meanwhile, not only at the stop.
grep -qE " notice: refused [0-9]+ more connections? in the last 1[0-9] s: max connections per host" \
	"$T/d1.part" && pass "the count of repeats is said once the interval is over" ||
	fail "no 'refused N more' line while it waited: $(grep " notice: refus" "$T/d1.part")"

# ---- 4. SIGINT while waiting ------------------------------------------------------------
"${CLIENT[@]}" --wait-busy 30 "$T/src/tree/a" "$HOST:data/one/" >"$T/int.out" 2>"$T/int.err" &
ip=$!
BG_PIDS+=("$ip")
for _ in $(seq 1 50); do grep -q "waiting up to" "$T/int.err" && break; sleep 0.1; done
kill -INT "$ip"
wait "$ip"
rc=$?
BG_PIDS=()
[ "$rc" -eq 10 ] && pass "SIGINT while waiting: exit 10" || fail "SIGINT while waiting: exit $rc: $(cat "$T/int.err")"
exec 5>&-
# The slot is free again: a copy goes through.
sleep 0.3
expect_rc 0 "the slot given back: a copy works" "${CLIENT[@]}" "$T/src/tree/a" "$HOST:data/one/"

# ---- 5. bad values -------------------------------------------------------------------
expect_rc 1 "--wait-busy 5x is a usage error" "${CLIENT[@]}" --wait-busy 5x "$T/src/tree/a" "$HOST:data/one/"
grep -q "wait-busy" "$T/err" && pass "names --wait-busy" || fail "message: $(cat "$T/err")"
expect_rc 1 "--wait-busy 25h is a usage error" "${CLIENT[@]}" --wait-busy 25h "$T/src/tree/a" "$HOST:data/one/"
expect_rc 0 "--wait-busy 1500ms is taken" "${CLIENT[@]}" --wait-busy 1500ms "$T/src/tree/a" "$HOST:data/two/"
stop_daemon "$DAEMON_PID"
# Every refusal counted is said by the end (at the latest at the stop): the sum of
# the "refused N more" lines is the number of repeats logged at debug level.
counted=$(grep -c "refusing connection from .*(repeated: counted)" "$T/d1.log")
said=$(grep -oE "refused [0-9]+ more connections? in the last [0-9]+ s: max connections per host reached \(1\)" \
	"$T/d1.log" | awk '{ n += $2 } END { print n + 0 }')
[ "$counted" -ge 4 ] && [ "$said" -eq "$counted" ] &&
	pass "the repeats were counted and said: $said in $(grep -c "refused [0-9]* more" "$T/d1.log") line(s)" ||
	fail "$counted repeats counted, $said said: $(grep "refus" "$T/d1.log")"

# ---- 6. BUSY at OPEN: the memory budget ----------------------------------------------
echo "--- 6. memory budget = pool size: one transfer at a time"
PORT=$(free_port)
write_conf "$T/d2.conf" "$PORT" "$T/certs" "handshake timeout = 10" "idle timeout = 30" \
	"memory budget = 4M" "pool size = 4M"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d2.conf"
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")
head -c $((3 << 20)) /dev/urandom >"$T/src/big"
"${CLIENT[@]}" -q --bwlimit 2M "$T/src/big" "$HOST:data/first/" >"$T/first.out" 2>"$T/first.err" &
fp=$!
BG_PIDS+=("$fp")
sleep 0.4
expect_rc 0 "a second push while the budget is held waits, then copies" \
	"${CLIENT[@]}" --wait-busy 20 "$T/src/big" "$HOST:data/second/"
grep -q "busy.*memory budget.*waiting up to 20 s" "$T/err" && pass "it said it waits for the memory budget" ||
	fail "second push said: $(cat "$T/err")"
wait "$fp"
rc=$?
BG_PIDS=()
[ "$rc" -eq 0 ] && pass "the first push exits 0" || fail "the first push: exit $rc"
cmp -s "$T/src/big" "$T/mod/second/big" && cmp -s "$T/src/big" "$T/mod/first/big" &&
	pass "both copies intact" || fail "a copy differs"
# Its retries cost the log one notice; the repeats are counted, and said by the stop.
stop_daemon "$DAEMON_PID"
busy=$(grep -c "refused: busy: memory budget in use" "$T/d2.log")
busy_notices=$(grep -c " notice: .*refused: busy: memory budget in use" "$T/d2.log")
counted=$(grep -c "refused: busy: memory budget in use.*(repeated: counted)" "$T/d2.log")
said=$(grep -oE "refused [0-9]+ more transfers? since the last such line: busy: memory budget" \
	"$T/d2.log" | awk '{ n += $2 } END { print n + 0 }')
echo "    $busy BUSY refusals, $busy_notices notice lines, $counted counted, $said said"
[ "$busy" -ge 2 ] && [ "$busy_notices" -eq 1 ] && pass "$busy BUSY refusals at OPEN, one notice line" ||
	fail "$busy BUSY refusals, $busy_notices notice lines: $(grep "busy" "$T/d2.log")"
[ "$said" -eq "$counted" ] && pass "the $counted repeats were said" ||
	fail "$counted BUSY repeats counted, $said said: $(grep "busy" "$T/d2.log")"

finish
