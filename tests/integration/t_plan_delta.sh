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
finish
