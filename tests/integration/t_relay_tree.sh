#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fan-out as a tree (issue 36, --fanout K): seven real daemons on 127.0.0.2
# .. .8 (relay_lib.sh), the destinations in that order at fan-out 2: the
# client pushes to .2; .2 forwards to .3 and .6 (one process each, teeing
# its feed); .3 to .4 and .5, .6 to .7 and .8:
#   a. a 24 MiB file and a small tree (-r -a): byte-exact everywhere, modes
#      and times kept, --json's destinations: seven copied, exit 0; the
#      client sent one copy; each daemon relays to its own subtree only
#      (its log's relay destinations), the leaves to none
#   b. an inner hop (.3) killed mid-copy with --partial: its subtree is
#      bypassed (.2 pushes to .4 with .5 below it), its sibling's subtree
#      (.6, .7, .8) completes, every other destination byte-exact, .3 a
#      resumable partial with its cause, exit 25; a --partial re-run to all
#      completes it
#   c. a first daemon from before trees: said, the tree below it goes as a
#      chain, every destination byte-exact
#   d. the command line: --fanout 0 and 17 refused, a destination named twice
#      refused (a loop), --fanout 1 is the chain
#   e. a plan to every host (plan --every-host), run with --fanout 2: every
#      host byte-exact, the first daemon given a tree of fan-out 2
#   f. hostile RELAYs (rawpeer, tickets from relaymsg): a tree trailer with a
#      fan-out of 17, 1 or reserved bytes set, a destination named twice: each
#      refused before anything is stored; a daemon from before trees refuses
#      a tree (and says so), takes the same RELAY as a chain
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
SIZE=$((24 * MIB))
HOSTS=(2 3 4 5 6 7 8)

. "$(dirname "$0")/relay_lib.sh"

relay_daemons "${HOSTS[@]}"
DESTS=()
for n in "${HOSTS[@]}"; do DESTS+=("127.0.0.$n:data/"); done

# all_exact CASE [SKIP]: every destination but SKIP holds the sources byte-exact, copied.
all_exact() {
	local n
	for n in "${HOSTS[@]}"; do
		[ "$n" = "${2:-}" ] && continue
		if cmp -s "$T/src/big" "$T/m$n/data/big" && [ "$(dest_field "$T/$1.json" \
			127.0.0.$n status)" = copied ]; then
			pass "$1: 127.0.0.$n copied, byte-exact"
		else
			fail "$1: 127.0.0.$n: $(dest_field "$T/$1.json" 127.0.0.$n status):" \
				"$(dest_field "$T/$1.json" 127.0.0.$n error)"
		fi
	done
}

# relayed_to N [LINE]: the hosts 127.0.0.N's sessions reported as relay destinations (in its
# log from LINE on), sorted.
relayed_to() {
	tail -n +"${2:-1}" "$T/d$1.log" |
		sed -n 's/.*relay destination [0-9]* (\(127\.0\.0\.[0-9]*\):.*/\1/p' |
		sort -u | tr '\n' ' '
}

# kill_daemon N: the daemon on 127.0.0.N and its sessions (and their relay children), kill -9.
kill_daemon() {
	local p
	for p in $(pgrep -P "${DPID[$1]}"); do kill -KILL "$p" 2>/dev/null; done
	kill -KILL "${DPID[$1]}" 2>/dev/null
	wait "${DPID[$1]}" 2>/dev/null
}

mkdir -p "$T/src/tree/sub/deeper"
head -c $SIZE /dev/urandom >"$T/src/big" || die "write the source"
for i in 1 2 3 4 5; do head -c $((i * 7919)) /dev/urandom >"$T/src/tree/f$i"; done
head -c 300000 /dev/urandom >"$T/src/tree/sub/deeper/g"
: >"$T/src/tree/sub/empty"
ln -s f1 "$T/src/tree/link"
chmod 0640 "$T/src/tree/f2"
touch -d '2021-03-04 05:06:07' "$T/src/tree/f3" "$T/src/tree/sub"

echo "--- a. a file and a tree to seven destinations at fan-out 2"
"${CLIENT[@]}" --json -r -a --fanout 2 "$T/src/big" "$T/src/tree" "${DESTS[@]}" \
	>"$T/a.json" 2>"$T/a.err"
RC=$?
[ "$RC" -eq 0 ] && pass "a: exit 0" || fail "a: exit $RC: $(tail -5 "$T/a.err")"
all_exact a
for n in "${HOSTS[@]}"; do
	expect_same_tree "a: 127.0.0.$n's tree" "$T/src/tree" "$T/m$n/data/tree"
done
same_meta "a: 127.0.0.8 (two hops below the first)" "$T/src/tree" "$T/m8/data/tree"
n=$(jq -r 'select(.event == "summary") | [.destinations[] | select(.status == "copied")] |
	length' "$T/a.json")
[ "$n" = 7 ] && pass "a: --json: seven destinations copied" || fail "a: --json: $n copied"
want=$((SIZE + $(find "$T/src/tree" -type f -printf '%s+' | sed 's/+$//')))
sent=$(jq -r 'select(.event == "summary") | .bytes' "$T/a.json")
if [ "$sent" -ge "$want" ] && [ "$sent" -le $((want * 105 / 100)) ]; then
	pass "a: the client sent $sent bytes for $want bytes of sources to seven destinations"
else
	fail "a: the client sent $sent bytes for $want bytes of sources"
fi
# The shape: each hop reports on its own subtree only.
got=$(relayed_to 2)
[ "$got" = "127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6 127.0.0.7 127.0.0.8 " ] &&
	pass "a: 127.0.0.2 relays to the six below it" || fail "a: 127.0.0.2 relayed to: $got"
got=$(relayed_to 3)
[ "$got" = "127.0.0.4 127.0.0.5 " ] && pass "a: 127.0.0.3 relays to .4 and .5 only" ||
	fail "a: 127.0.0.3 relayed to: $got"
got=$(relayed_to 6)
[ "$got" = "127.0.0.7 127.0.0.8 " ] && pass "a: 127.0.0.6 relays to .7 and .8 only" ||
	fail "a: 127.0.0.6 relayed to: $got"
for n in 4 5 7 8; do
	[ -z "$(relayed_to $n)" ] && pass "a: 127.0.0.$n is a leaf" ||
		fail "a: 127.0.0.$n relayed to: $(relayed_to $n)"
done

echo "--- b. an inner hop killed mid-copy: its subtree bypassed, its sibling's completes"
clear_dests "${HOSTS[@]}"
"${CLIENT[@]}" --json -a --partial --bwlimit 4M --fanout 2 "$T/src/big" "${DESTS[@]}" \
	>"$T/b.json" 2>"$T/b.err" &
pid=$!
for i in $(seq 1 2400); do
	[ "$(held 4)" -ge $((SIZE / 8)) ] && break
	sleep 0.05
done
h3=$(held 3) h4=$(held 4)
[ "$h3" -lt "$SIZE" ] || fail "b: 127.0.0.3 had the whole file before the kill (.4 had $h4)"
kill_daemon 3
wait "$pid"
RC=$?
[ "$RC" -eq 25 ] && pass "b: exit 25" || fail "b: exit $RC: $(tail -5 "$T/b.err")"
all_exact b 3
st=$(dest_field "$T/b.json" 127.0.0.3 status)
why=$(dest_field "$T/b.json" 127.0.0.3 error)
[ "$st" = partial ] && echo "$why" | grep -q "cut out of the chain mid-copy, its partial kept" &&
	pass "b: 127.0.0.3 a resumable partial, with its cause: $why" ||
	fail "b: 127.0.0.3: status '$st', error '$why'"
grep -q "127.0.0.3: cut out of the chain (partial): 127.0.0.4 takes its place" "$T/d2.log" &&
	pass "b: the relay on 127.0.0.2 says it bypassed it" || fail "b: nothing in 127.0.0.2's log"
start_relay_daemon 3
"${CLIENT[@]}" --json -a --partial --skip quick --fanout 2 "$T/src/big" "${DESTS[@]}" \
	>"$T/b.re.json" 2>"$T/b.re.err"
RC=$?
[ "$RC" -eq 0 ] && pass "b: the re-run: exit 0" || fail "b: the re-run: exit $RC: $(tail -3 "$T/b.re.err")"
all_exact b.re
sent=$(dest_field "$T/b.re.json" 127.0.0.3 bytes)
[ -n "$sent" ] && [ "$sent" -lt "$SIZE" ] && pass "b: the re-run sent 127.0.0.3 only what it lacked ($sent)" ||
	fail "b: the re-run sent 127.0.0.3 '$sent' bytes"

echo "--- c. a first daemon from before trees: the rest goes as a chain"
clear_dests "${HOSTS[@]}"
kill_daemon 2
RDMACP_TEST_CAPS_OFF=$((1 << 43)) start_relay_daemon 2
"${CLIENT[@]}" --json --fanout 2 "$T/src/big" "${DESTS[@]}" >"$T/c.json" 2>"$T/c.err"
RC=$?
[ "$RC" -eq 0 ] && pass "c: exit 0" || fail "c: exit $RC: $(tail -5 "$T/c.err")"
all_exact c
grep -q "127.0.0.2 relays as a chain only" "$T/c.err" && pass "c: said" || fail "c: not said: $(cat "$T/c.err")"
kill_daemon 2
start_relay_daemon 2

echo "--- d. the command line"
expect_rc 1 "d: --fanout 0 refused" "${CLIENT[@]}" --fanout 0 "$T/src/big" "${DESTS[@]:0:2}"
expect_rc 1 "d: --fanout 17 refused" "${CLIENT[@]}" --fanout 17 "$T/src/big" "${DESTS[@]:0:2}"
expect_rc 1 "d: a destination named twice refused" "${CLIENT[@]}" --fanout 2 "$T/src/big" \
	127.0.0.2:data/x 127.0.0.3:data/x 127.0.0.2:data/x/
grep -q "named twice" "$T/err" && pass "d: the loop is said" || fail "d: $(cat "$T/err")"
clear_dests "${HOSTS[@]}"
from=$(($(wc -l <"$T/d3.log") + 1))
expect_rc 0 "d: --fanout 1 is a chain" "${CLIENT[@]}" --fanout 1 "$T/src/big" "${DESTS[@]:0:4}"
got=$(relayed_to 3 "$from")
[ "$got" = "127.0.0.4 127.0.0.5 " ] && pass "d: the chain: 127.0.0.3 relayed to .4 and .5" ||
	fail "d: the chain: 127.0.0.3 relayed to '$got'"

echo "--- e. a plan to every host, run with --fanout 2"
clear_dests "${HOSTS[@]}"
mkdir -p "$T/plans"
expect_rc 0 "e: plan --every-host" "${CLIENT[@]}" plan -a --skip quick --shards 1 --every-host \
	"$T/src/tree" "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5:data/p/" -o "$T/plans/p.plan"
from=$(($(wc -l <"$T/d2.log") + 1))
expect_rc 0 "e: run --fanout 2" "${CLIENT[@]}" -q run --fanout 2 "$T/plans/p.plan" --shard 0/1
for n in 2 3 4 5; do
	expect_same_tree "e: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/p/tree"
done
tail -n +"$from" "$T/d2.log" | grep -q "RELAY: 3 hops after this one, fan-out 2" &&
	pass "e: 127.0.0.2 was given a tree of fan-out 2" || fail "e: no tree at 127.0.0.2"

echo "--- f. hostile RELAYs"
RAWPEER=$BUILD_DIR/tests/rawpeer RELAYMSG=$BUILD_DIR/tests/relaymsg
[ -x "$RAWPEER" ] && [ -x "$RELAYMSG" ] || die "rawpeer or relaymsg not built in $BUILD_DIR/tests"
# peer STEP...: rawpeer as the client against 127.0.0.2; its answers in $T/rp.out.
peer() {
	timeout 60 "$RAWPEER" --host 127.0.0.2 -P "$PORT" --cert "$T/certs/client.crt" \
		--key "$T/certs/client.key" --ca "$T/certs/ca.crt" --timeout 10 "$@" >"$T/rp.out" 2>&1
}
relay_hex() { "$RELAYMSG" --cert "$T/certs/client.crt" --key "$T/certs/client.key" "$@"; }
H3="127.0.0.3:$PORT:data/hf" H4="127.0.0.4:$PORT:data/hf"
# The control: the same RELAY with a good trailer is taken (the OPEN answered).
peer hello frame 32 "$(relay_hex --hop "$H3" --hop "$H4")02000000" open push data/hf
cp "$T/rp.out" "$T/rp.good"
grep -q "ERROR" "$T/rp.out" && fail "f: a good tree RELAY: $(cat "$T/rp.out")" ||
	pass "f: a good tree RELAY taken: $(grep -c . "$T/rp.out") lines, no ERROR"
for bad in 11000000 01000000 00000000 02010000 02000001 0200; do
	peer hello frame 32 "$(relay_hex --hop "$H3" --hop "$H4")$bad" open push data/hf
	grep -q "ERROR PROTOCOL" "$T/rp.out" && [ ! -e "$T/m2/data/hf" ] &&
		pass "f: a tree trailer $bad refused" || fail "f: trailer $bad: $(tail -2 "$T/rp.out")"
done
peer hello frame 32 "$(relay_hex --hop "$H3" --hop "$H4" --hop "$H3")02000000" open push data/hf
grep -q "ERROR PROTOCOL" "$T/rp.out" && pass "f: a destination named twice refused" ||
	fail "f: named twice: $(tail -2 "$T/rp.out")"
kill_daemon 2
RDMACP_TEST_CAPS_OFF=$((1 << 43)) start_relay_daemon 2
peer hello frame 32 "$(relay_hex --hop "$H3" --hop "$H4")02000000" open push data/hf
grep -q "ERROR.*relays as a chain only" "$T/rp.out" &&
	pass "f: a daemon from before trees refuses a tree, and says so" ||
	fail "f: before trees: $(tail -2 "$T/rp.out")"
kill_daemon 2
start_relay_daemon 2

finish
