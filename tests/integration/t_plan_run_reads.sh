#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A shard's run reads its plan once (issue 32: the plan's parsing was a third of a cut-over's
# client time), plain processes against a real daemon:
#   1. a plan of 2 shards (nested directories of their own modes, files in each, hard links,
#      a split file): each shard's run, traced, reads the plan's bytes once and its opening's
#      read at most (the skeleton's directories kept in memory, not found in a second pass,
#      the entries in a third); the destination is the source, the directories' modes too;
#      no list file of the run is left beside the journal;
#   2. each shard again: again one reading, every entry done before, none this run.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip "strace not installed"
setup_standard "max file size = 64M"
HOST=127.0.0.1

S=$T/src/tree
mkdir -p "$S/a/b/c" "$S/a/e" "$S/x/y" "$T/plans"
head -c 9000000 /dev/urandom >"$S/a/big"
for d in a a/b a/b/c a/e x x/y; do
	for i in $(seq 1 40); do head -c $((i * 13)) /dev/urandom >"$S/$d/f$i"; done
done
ln "$S/a/f1" "$S/x/y/hard"
chmod 0750 "$S/a/b"
chmod 0705 "$S/a/b/c"
chmod 0711 "$S/x/y"
P=$T/plans/p.plan
D=$T/mod/dst/tree

# run_traced SHARD LABEL: the shard's run under strace; sets plan_read to the plan's bytes read.
run_traced() {
	# (LeakSanitizer cannot run under ptrace: off for this one, in an ASan build.)
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f -y -e trace=read -o "$T/run.trace" "${CLIENT[@]}" run "$P" --shard "$1/2" \
		>"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 0 ] && pass "$2: shard $1 (exit 0)" || fail "$2: shard $1: exit $rc: $(head -5 "$T/err")"
	plan_read=$(awk -F'= ' '/p\.plan>/ { p += $NF } END { print p + 0 }' "$T/run.trace")
	# One pass, and the opening's first read (this small plan whole): at most twice its size.
	[ "$plan_read" -ge "$plan_size" ] && [ "$plan_read" -le $((2 * plan_size)) ] &&
		pass "$2: shard $1 read the plan once ($plan_read bytes, the plan $plan_size)" ||
		fail "$2: shard $1 read $plan_read bytes of the plan, which has $plan_size (one pass and its opening: at most $((2 * plan_size)))"
}

# ---- 1. the first runs ------------------------------------------------------------------
expect_rc 0 "plan -a -H --shards 2 --split-size 4M" "${CLIENT[@]}" plan -a -H --shards 2 \
	--split-size 4M "$S" "$HOST:data/dst" -o "$P"
plan_size=$(stat -c %s "$P")
for i in 0 1; do
	run_traced "$i" "first"
	grep -Eq "shard $i of 2: 0 entries done before, [1-9][0-9]* this run, exit 0" "$T/err" &&
		pass "first: shard $i's summary" || fail "first: shard $i's summary: $(tail -2 "$T/err")"
done
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
expect_same_tree "the destination" "$S" "$D"
[ "$(stat -c %a "$D/a/b") $(stat -c %a "$D/a/b/c") $(stat -c %a "$D/x/y")" = "750 705 711" ] &&
	pass "the directories' modes" ||
	fail "modes: $(stat -c '%n %a' "$D/a/b" "$D/a/b/c" "$D/x/y" | tr '\n' ' ')"
[ "$(stat -c %i "$D/a/f1")" = "$(stat -c %i "$D/x/y/hard")" ] && pass "the hard link" ||
	fail "a/f1 and x/y/hard are two files"
left=$(find "$T/plans" -name 'p.plan.journal.*.*' | head -3)
[ -z "$left" ] && pass "no list file left" || fail "left: $left"

# ---- 2. again: nothing to send --------------------------------------------------------------
for i in 0 1; do
	run_traced "$i" "again"
	grep -Eq "shard $i of 2: [1-9][0-9]* entries done before, 0 this run, exit 0" "$T/err" &&
		pass "again: shard $i's summary" || fail "again: shard $i's summary: $(tail -2 "$T/err")"
done
finish
