#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --delta and --assume-zero-target kept in a migration plan (rdmacp plan),
# so that rdmacp run uses them:
#   1. plan --delta --assume-zero-target: the header says both (jq); a plan
#      without them has neither key
#   2. run of that plan over a destination that holds an older copy of a big
#      file (3 chunks changed): the daemon reports the unchanged bytes
#      (--delta), the payload is about the changed chunks, the file is
#      identical; the run of the plan without --delta sends the file whole
#   3. a split file (3 ranges over 2 shards) migrated, then 3 blocks of it
#      changed (one in each range) and planned again with --delta: the runs
#      send about the changed chunks (each range against an old copy the
#      daemon made of it, ASSEMBLE SEED), not the ranges; finalize
#      assembles it, identical; the staging directory is gone
#   4. the same against a daemon without the capability (RDMACP_TEST_CAPS_OFF):
#      each shard's run says once that it can't make old copies and sends
#      the file's ranges whole; finalize assembles the file, identical
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard
HOST=127.0.0.1
MIB=$((1 << 20))
SIZE=$((48 * MIB))

S=$T/src/tree
D=$T/mod/dst/tree
mkdir -p "$S" "$D" "$T/plans"
head -c $SIZE /dev/urandom >"$S/big" || die "random"
echo small >"$S/small"

# old_copy: the destination's big is the source's with 4 KiB changed at 3 places.
old_copy() {
	local m
	cp "$S/big" "$D/big"
	for m in 1 20 40; do
		dd if=/dev/urandom of="$D/big" bs=4096 count=1 seek=$((m * 256 + 1)) conv=notrunc \
			status=none || die "dd"
	done
}

# ---- 1. the header ----
P=$T/plans/delta.plan
expect_rc 0 "plan --delta --assume-zero-target" \
	"${CLIENT[@]}" plan -r --delta --assume-zero-target "$S" "$HOST:data/dst" -o "$P"
[ "$(head -1 "$P" | jq -r '"\(.delta) \(.assume_zero_target)"')" = "true true" ] &&
	pass "header: delta and assume_zero_target kept" || fail "header: $(head -1 "$P")"
Q=$T/plans/plain.plan
expect_rc 0 "plan without them" "${CLIENT[@]}" plan -r "$S" "$HOST:data/dst" -o "$Q"
[ "$(head -1 "$Q" | jq -r '"\(.delta) \(.assume_zero_target)"')" = "null null" ] &&
	pass "header: neither key without the options" || fail "header: $(head -1 "$Q")"

# ---- 2. the runs ----
old_copy
lines=$(wc -l <"$T/d.log")
expect_rc 0 "run of the --delta plan" "${CLIENT[@]}" run "$P" --shard 0/1
cmp -s "$S/big" "$D/big" && pass "delta run: identical" || fail "delta run: differs"
done_line=$(tail -n +$((lines + 1)) "$T/d.log" | grep "push to data done" | tail -1)
unchanged=$(echo "$done_line" | sed -n 's/.*, \([0-9]*\) bytes unchanged (--delta).*/\1/p')
sent=$(echo "$done_line" | sed -n 's/.*done: [0-9]* files, \([0-9]*\) bytes.*/\1/p')
[ -n "$unchanged" ] && [ "$unchanged" -ge $((SIZE / 2)) ] &&
	pass "delta run: $unchanged bytes unchanged, not sent" ||
	fail "delta run: daemon says: $done_line"
[ -n "$sent" ] && [ "$sent" -lt $((SIZE / 4)) ] && pass "delta run: $sent bytes sent" ||
	fail "delta run: $sent bytes sent"

old_copy
lines=$(wc -l <"$T/d.log")
expect_rc 0 "run of the plan without --delta" "${CLIENT[@]}" run "$Q" --shard 0/1
cmp -s "$S/big" "$D/big" && pass "plain run: identical" || fail "plain run: differs"
done_line=$(tail -n +$((lines + 1)) "$T/d.log" | grep "push to data done" | tail -1)
[ -n "$done_line" ] && ! echo "$done_line" | grep -q "unchanged (--delta)" &&
	pass "plain run: the file sent whole" || fail "plain run: daemon says: $done_line"
# ---- 3. a split file changed in a few blocks, planned again with --delta ----
SP=$T/src/split
SD=$T/mod/dst/split
mkdir -p "$SP"
head -c $((24 * MIB)) /dev/urandom >"$SP/huge" || die "random"
echo x >"$SP/small"
# split_runs NAME [OPTIONS]: a plan of the split tree (8 MiB ranges, 2 shards), both run.
split_runs() {
	local p=$T/plans/$1 i
	shift
	expect_rc 0 "plan $(basename "$p")" "${CLIENT[@]}" plan -r --split-size 8M --shards 2 "$@" "$SP" \
		"$HOST:data/dst" -o "$p"
	for i in 0 1; do
		expect_rc 0 "$(basename "$p") shard $i" "${CLIENT[@]}" --json run "$p" --shard "$i/2"
		cp "$T/out" "$p.out$i"
		cp "$T/err" "$p.err$i"
	done
	expect_rc 0 "$(basename "$p") finalize" "${CLIENT[@]}" finalize "$p"
}
split_runs s1
cmp -s "$SP/huge" "$SD/huge" && pass "split: first migration identical" || fail "split: differs"
for m in 1 9 20; do
	dd if=/dev/urandom of="$SP/huge" bs=4096 count=1 seek=$((m * 256 + 3)) conv=notrunc \
		status=none || die "dd"
done
split_runs s2 --delta
sent=$(cat "$T"/plans/s2.out* | jq -s '[.[] | select(.event == "summary") | .bytes] | add')
# 3 changed chunks of 1 MiB (the default chunk size), not 24 MiB of ranges.
[ -n "$sent" ] && [ "$sent" -le $((4 * MIB)) ] &&
	pass "split --delta: the runs sent $sent bytes (3 chunks changed)" ||
	fail "split --delta: the runs sent $sent bytes: $(cat "$T"/plans/s2.out*)"
cmp -s "$SP/huge" "$SD/huge" && pass "split --delta: identical after finalize" ||
	fail "split --delta: differs after finalize"
! ls -d "$T"/mod/dst/split/.rdmacp-split.* "$T"/mod/dst/.rdmacp-split.* >/dev/null 2>&1 &&
	pass "split --delta: no staging directory left" ||
	fail "staging left: $(ls -d "$T"/mod/dst/split/.rdmacp-split.* "$T"/mod/dst/.rdmacp-split.* 2>&1)"

# ---- 4. a daemon that can't make old copies -------------------------------------------
stop_daemon "$DAEMON_PID"
RDMACP_TEST_CAPS_OFF=0x200000000000 start_daemon "$T/d.conf" "$T/d2.log" "$PORT"
for m in 2 12; do
	dd if=/dev/urandom of="$SP/huge" bs=4096 count=1 seek=$((m * 256 + 3)) conv=notrunc \
		status=none || die "dd"
done
split_runs s3 --delta
sent=$(cat "$T"/plans/s3.out* | jq -s '[.[] | select(.event == "summary") | .bytes] | add')
[ "$sent" -eq $((24 * MIB)) ] && pass "old daemon: the file's ranges sent whole ($sent bytes)" ||
	fail "old daemon: the runs sent $sent bytes"
[ "$(cat "$T"/plans/s3.err0 "$T"/plans/s3.err1 | grep -c "can't make old copies")" = 2 ] &&
	pass "old daemon: each shard says it can't make old copies" ||
	fail "old daemon: $(cat "$T"/plans/s3.err0 "$T"/plans/s3.err1)"

cmp -s "$SP/huge" "$SD/huge" && pass "old daemon: identical after finalize" ||
	fail "old daemon: differs after finalize"
finish
