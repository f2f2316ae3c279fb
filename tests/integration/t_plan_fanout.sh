#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Plans to every destination (issue 36 item 1): rdmacp plan --every-host
# SRC H1,H2,H3:MOD/PATH/, three real relaying daemons on 127.0.0.2, .3, .4
# (relay_lib.sh):
#   1. plan (2 shards), run each shard, finalize: every destination
#      byte-exact with modes and times; each shard's journal has one
#      destination line per host and push, all copied; report --json has a
#      destination event per host, no push failed; the source sent one copy
#      (the runs' bytes are the tree's bytes, not three times them)
#   2. a re-run after a change (a new plan of the changed tree, --skip
#      quick): only the changed file is sent, once, and every destination
#      has it
#   3. a destination down during a run: the run exits 25, its journal says
#      which destination failed and marks the push's entries failed
#      (DEST_FAILED); report says so per destination; finalize exits 9; with
#      the daemon back the shard runs again, finalize exits 0, and the lost
#      destination is byte-exact
#   4. finalize proves each destination: a file lost at one of them only is
#      named with that destination, exit 15
#   5. -H with --every-host (2 shards): a file of three names in two
#      directories is one inode of three links at every destination; refused
#      at plan time: --every-host with 18 hosts (exit 1, saying why); a
#      header edited to 18 hosts is refused by run (exit 19)
#   6. split files (--split-size): every range relayed, each destination
#      assembles its own parts; byte-exact everywhere, no staging left
#   7. the same with the first destination down: the ranges go to the
#      others (exit 25); with it back the shard again and finalize: all
#      byte-exact
#   8. split files changed in a block each, planned again with --delta:
#      every destination is asked for old copies of its own parts (ASSEMBLE
#      SEED), so the client sends about the changed chunks, not the ranges;
#      all byte-exact after finalize
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/relay_lib.sh"

relay_daemons 2 3 4
HOSTS=127.0.0.2,127.0.0.3,127.0.0.4

# every_dest DESC: the tree byte-exact at each destination.
every_dest() {
	local n
	for n in 2 3 4; do
		expect_same_tree "$1: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/p/tree"
	done
}

# run_bytes PLAN: the bytes each shard's last run says it sent, added.
run_bytes() {
	local j sum=0 b
	for j in "$1".journal.[0-9]*; do
		b=$(jq -r 'select(.run == "end") | .bytes' "$j" | tail -1)
		sum=$((sum + ${b:-0}))
	done
	echo "$sum"
}

# has_line FILE FILTER: some line of the NDJSON file matches jq's FILTER.
has_line() { jq -c "select($2)" "$1" 2>/dev/null | grep -q .; }

echo "--- 1. plan, run, finalize to three destinations"
mkdir -p "$T/src/tree/sub/deeper"
head -c $((3 << 20)) /dev/urandom >"$T/src/tree/big"
for i in 1 2 3 4 5 6; do head -c $((i * 9001)) /dev/urandom >"$T/src/tree/f$i"; done
echo leaf >"$T/src/tree/sub/deeper/leaf"
: >"$T/src/tree/sub/empty"
ln -s f1 "$T/src/tree/link"
chmod 640 "$T/src/tree/f2"
chmod 750 "$T/src/tree/sub"
touch -d '2001-02-03 04:05:06' "$T/src/tree/f3" "$T/src/tree/sub/deeper"
P=$T/plans/p.plan
expect_rc 0 "plan --every-host, 2 shards" "${CLIENT[@]}" plan -a --skip quick --shards 2 \
	--every-host "$T/src/tree" "$HOSTS:data/p/" -o "$P"
grep -q '"every_host":true' "$P" && pass "1: the header says every_host" ||
	fail "1: header: $(head -1 "$P")"
for s in 0 1; do
	expect_rc 0 "1: run shard $s/2" "${CLIENT[@]}" -q run "$P" --shard "$s/2"
done
expect_rc 0 "1: finalize" "${CLIENT[@]}" -q finalize "$P"
every_dest 1
for n in 2 3 4; do same_meta "1: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/p/tree"; done
for s in 0 1; do
	got=$(jq -r 'select(.dest) | .dest + "=" + .status' "$P.journal.$s" | sort -u | tr '\n' ' ')
	[ "$got" = "127.0.0.2:data/p/=copied 127.0.0.3:data/p/=copied 127.0.0.4:data/p/=copied " ] &&
		pass "1: shard $s's journal: each destination copied" ||
		fail "1: shard $s's destination lines: '$got'"
done
"${CLIENT[@]}" report "$P" --json >"$T/r1.json" 2>"$T/r1.err" || fail "1: report: $(cat "$T/r1.err")"
got=$(jq -r 'select(.event == "destination") | .dest + "=" + (.pushes_failed | tostring)' \
	"$T/r1.json" | sort | tr '\n' ' ')
[ "$got" = "127.0.0.2:data/p/=0 127.0.0.3:data/p/=0 127.0.0.4:data/p/=0 " ] &&
	pass "1: report: three destinations, no push failed" || fail "1: report: '$got'"
"${CLIENT[@]}" report "$P" >"$T/r1.txt" 2>&1
grep -q '^  destination 127.0.0.3:data/p/: [1-9][0-9]* pushes copied, 0 not' "$T/r1.txt" &&
	pass "1: report's text: a line per destination" || fail "1: report: $(cat "$T/r1.txt")"
want=$(($(find "$T/src/tree" -type f -printf '%s+')0))
sent=$(run_bytes "$P")
[ "$sent" = "$want" ] && pass "1: the source sent one copy ($sent bytes)" ||
	fail "1: the runs sent '$sent' bytes for a tree of $want"

echo "--- 2. a re-run after a change sends the change once"
head -c 70000 /dev/urandom >"$T/src/tree/f4"
P2=$T/plans/p2.plan
expect_rc 0 "2: a new plan of the changed tree" "${CLIENT[@]}" plan -a --skip quick --shards 2 \
	--every-host "$T/src/tree" "$HOSTS:data/p/" -o "$P2"
for s in 0 1; do
	expect_rc 0 "2: run shard $s/2" "${CLIENT[@]}" -q run "$P2" --shard "$s/2"
done
expect_rc 0 "2: finalize" "${CLIENT[@]}" -q finalize "$P2"
every_dest 2
sent=$(run_bytes "$P2")
[ "$sent" = 70000 ] && pass "2: only the changed file was sent, once ($sent bytes)" ||
	fail "2: the runs sent '$sent' bytes for a change of 70000"

echo "--- 3. a destination down during a run"
stop_daemon "${DAEMON_PIDS[2]}"
head -c 50000 /dev/urandom >"$T/src/tree/f5"
head -c 40000 /dev/urandom >"$T/src/tree/sub/new"
P3=$T/plans/p3.plan
expect_rc 0 "3: a new plan" "${CLIENT[@]}" plan -a --skip quick --shards 1 --every-host \
	"$T/src/tree" "$HOSTS:data/p/" -o "$P3"
expect_rc 25 "3: run with 127.0.0.4 down" "${CLIENT[@]}" -q run "$P3" --shard 0/1
has_line "$P3.journal.0" '.dest == "127.0.0.4:data/p/" and .state == "failed"' &&
	pass "3: the journal says 127.0.0.4 did not copy" ||
	fail "3: journal: $(grep dest "$P3.journal.0")"
has_line "$P3.journal.0" '.name == "tree/f5" and .code == "DEST_FAILED"' &&
	pass "3: the push's entries marked failed (DEST_FAILED)" ||
	fail "3: journal: $(cat "$P3.journal.0")"
cmp -s "$T/src/tree/f5" "$T/m3/data/p/tree/f5" && pass "3: 127.0.0.3 has the change all the same" ||
	fail "3: 127.0.0.3 lacks the change"
"${CLIENT[@]}" report "$P3" --json >"$T/r3.json" 2>/dev/null
got=$(jq -r 'select(.event == "destination" and .dest == "127.0.0.4:data/p/") |
	"\(.pushes_failed) \(.last_failure)"' "$T/r3.json")
# Failed or unreached: its relay finds it down either when it starts or when it connects.
case "$got" in "1 failed" | "1 unreached") pass "3: report: 127.0.0.4 not copied once ($got)" ;;
*) fail "3: report: '$got'" ;; esac
expect_rc 9 "3: finalize: not finished" "${CLIENT[@]}" -q finalize "$P3"
start_relay_daemon 4
expect_rc 0 "3: the shard again, 127.0.0.4 back" "${CLIENT[@]}" -q run "$P3" --shard 0/1
expect_rc 0 "3: finalize" "${CLIENT[@]}" -q finalize "$P3"
every_dest 3

echo "--- 4. finalize proves each destination"
rm "$T/m3/data/p/tree/f6"
expect_rc 15 "4: a file lost at 127.0.0.3 only" "${CLIENT[@]}" finalize "$P3"
grep -q "tree/f6: not at the destination 127.0.0.3:data/p/ as the source has it" "$T/err" &&
	pass "4: named with its destination" || fail "4: $(cat "$T/err")"
expect_rc 0 "4: the shard again" "${CLIENT[@]}" -q run "$P3" --shard 0/1
expect_rc 0 "4: finalize" "${CLIENT[@]}" -q finalize "$P3"
every_dest 4

echo "--- 5. -H with --every-host; refused past 17 hosts"
mkdir -p "$T/src/ltree/a" "$T/src/ltree/b"
head -c 50000 /dev/urandom >"$T/src/ltree/a/f"
ln "$T/src/ltree/a/f" "$T/src/ltree/b/g"
ln "$T/src/ltree/a/f" "$T/src/ltree/a/h"
echo one >"$T/src/ltree/one"
PL=$T/plans/l.plan
expect_rc 0 "5: plan -H --every-host, 2 shards" "${CLIENT[@]}" plan -a -H --shards 2 \
	--every-host "$T/src/ltree" "$HOSTS:data/l/" -o "$PL"
for s in 0 1; do
	expect_rc 0 "5: run shard $s/2" "${CLIENT[@]}" -q run "$PL" --shard "$s/2"
done
expect_rc 0 "5: finalize" "${CLIENT[@]}" -q finalize "$PL"
for n in 2 3 4; do
	d=$T/m$n/data/l/ltree
	[ "$(stat -c %i "$d/a/f")" = "$(stat -c %i "$d/b/g")" ] &&
		[ "$(stat -c %i "$d/a/f")" = "$(stat -c %i "$d/a/h")" ] &&
		[ "$(stat -c %h "$d/a/f")" = 3 ] && cmp -s "$T/src/ltree/a/f" "$d/b/g" &&
		pass "5: 127.0.0.$n: a/f, a/h, b/g one inode of 3 links" ||
		fail "5: 127.0.0.$n: a/f, a/h, b/g are not one inode of 3 links"
done
h=127.0.0.2
for i in $(seq 2 18); do h="$h,127.0.0.2"; done
expect_rc 1 "5: --every-host with 18 hosts" "${CLIENT[@]}" plan -a --every-host \
	"$T/src/tree" "$h:data/q/" -o "$T/plans/q.plan"
[ ! -e "$T/plans/q.plan" ] && pass "5: no plan written" || fail "5: a plan was written"
# The header's hosts may be edited (a host moved), but not past what one fan-out reaches.
sed "1s/\"hosts\":\"[^\"]*\"/\"hosts\":\"$h\"/" "$P" >"$T/plans/e.plan"
expect_rc 19 "5: a header edited to 18 hosts" "${CLIENT[@]}" run "$T/plans/e.plan" --shard 0/2
grep -q "every_host.*more than 17 hosts" "$T/err" && pass "5: says why" ||
	fail "5: $(cat "$T/err")"

echo "--- 6. split files: ranges relayed, assembled at every destination"
P6=$T/plans/p6.plan
expect_rc 0 "6: plan --every-host --split-size 1M, 3 shards" "${CLIENT[@]}" plan -a \
	--skip quick --shards 3 --split-size 1M --every-host "$T/src/tree" "$HOSTS:data/s/" -o "$P6"
grep -q '"ranges":3' "$P6" && pass "6: the 3 MiB file in 3 ranges" || fail "6: not split"
for s in 0 1 2; do
	expect_rc 0 "6: run shard $s/3" "${CLIENT[@]}" -q run "$P6" --shard "$s/3"
done
expect_rc 0 "6: finalize" "${CLIENT[@]}" -q finalize "$P6"
for n in 2 3 4; do
	expect_same_tree "6: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/s/tree"
	[ -z "$(ls -A "$T/m$n/data/s" | grep -v '^tree$')" ] &&
		pass "6: 127.0.0.$n: no staging directory left" ||
		fail "6: 127.0.0.$n holds: $(ls -A "$T/m$n/data/s")"
done

echo "--- 7. split files with the first destination down: the next takes its place"
stop_daemon "${DAEMON_PIDS[0]}"
head -c $((2 << 20)) /dev/urandom >"$T/src/tree/big2"
P7=$T/plans/p7.plan
expect_rc 0 "7: plan, 1 shard" "${CLIENT[@]}" plan -a --shards 1 --split-size 1M --every-host \
	"$T/src/tree" "$HOSTS:data/s7/" -o "$P7"
expect_rc 25 "7: run with 127.0.0.2 down" "${CLIENT[@]}" -q run "$P7" --shard 0/1
for n in 3 4; do
	parts=$(find "$T/m$n/data/s7" -path '*.rdmacp-split.*' -type f 2>/dev/null | wc -l)
	[ "$parts" = 5 ] && pass "7: 127.0.0.$n got the 5 ranges all the same" ||
		fail "7: 127.0.0.$n has $parts parts"
done
start_relay_daemon 2
expect_rc 0 "7: the shard again, 127.0.0.2 back" "${CLIENT[@]}" -q run "$P7" --shard 0/1
expect_rc 0 "7: finalize" "${CLIENT[@]}" -q finalize "$P7"
for n in 2 3 4; do
	expect_same_tree "7: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/s7/tree"
done

echo "--- 8. split files changed in a block each, planned again with --delta: seeded at every host"
dd if=/dev/urandom of="$T/src/tree/big" bs=4096 count=1 seek=384 conv=notrunc status=none
dd if=/dev/urandom of="$T/src/tree/big2" bs=4096 count=1 seek=128 conv=notrunc status=none
P8=$T/plans/p8.plan
expect_rc 0 "8: plan --delta, 1 shard" "${CLIENT[@]}" plan -a --skip quick --delta --shards 1 \
	--split-size 1M --every-host "$T/src/tree" "$HOSTS:data/s7/" -o "$P8"
expect_rc 0 "8: run" "${CLIENT[@]}" --json run "$P8" --shard 0/1
sent=$(jq -s '[.[] | select(.event == "summary") | .bytes] | add' "$T/out")
# Two changed chunks of 1 MiB (the default chunk), not the 5 MiB of the two files' ranges.
[ -n "$sent" ] && [ "$sent" != null ] && [ "$sent" -le $((3 << 20)) ] &&
	pass "8: the run sent $sent bytes (2 chunks changed)" ||
	fail "8: the run sent $sent bytes: $(cat "$T/out" "$T/err")"
grep -q "can't make old copies" "$T/err" && fail "8: a daemon said it cannot seed" ||
	pass "8: every daemon made old copies"
# Each hop sent the next only the changed chunks too: every host had its own old copies.
most=$(jq -s '[.[] | select(.event == "summary") | .destinations[]? | .bytes] | max' "$T/out")
n=$(jq -s '[.[] | select(.event == "summary") | .destinations[]?] | length' "$T/out")
[ "$n" -ge 3 ] && [ "$most" -le $((3 << 20)) ] &&
	pass "8: each of the $n destinations was sent at most $most bytes" ||
	fail "8: destinations $n, most bytes $most: $(cat "$T/out")"
expect_rc 0 "8: finalize" "${CLIENT[@]}" -q finalize "$P8"
for n in 2 3 4; do
	expect_same_tree "8: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/s7/tree"
done

finish
