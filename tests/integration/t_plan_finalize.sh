#!/bin/bash
# SPDX-License-Identifier: MIT
#
# finalize's proof, where it takes its word from (docs/MIGRATION.md "What finalize proves"),
# plain processes against a real daemon:
#   1. a plan of 2 shards with a split file, a directory and a symlink: the shards run,
#      finalize exits 0 and makes the directory's mode and the symlink; finalize --jobs 1
#      again (nothing to assemble) reads the plan three times (its list of directories and
#      symlinks made in the first pass; no pass to name unproven files when all are proven;
#      the summary's) and the shards' journals once;
#   2. the assembled split file changed at the destination behind finalize's back (its
#      mtime): finalize exits 15 and names it; its time put back, finalize exits 21 (its
#      parts are gone), marking its ranges to send again; the shards run again and keep
#      every range (the destination has the file): finalize proves the kept file whole and
#      exits 0;
#   3. a file of a shard changed at the destination: finalize exits 15, names it, marks it
#      failed in its shard's journal; the shard runs again, finalize exits 0, identical.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip "strace not installed"
setup_standard "max file size = 64M"
HOST=127.0.0.1

S=$T/src/tree
mkdir -p "$S/d" "$T/plans"
head -c 9000000 /dev/urandom >"$S/big"
for i in $(seq 1 300); do head -c $((i * 7)) /dev/urandom >"$S/d/f$i"; done
ln -s f1 "$S/d/link"
chmod 0750 "$S/d"
touch -d '2022-02-02 02:02:02' "$S/big" "$S/d/f1"
P=$T/plans/p.plan
D=$T/mod/dst/tree

run_shards() {
	expect_rc 0 "$1: shard 0" "${CLIENT[@]}" -q run "$P" --shard 0/2
	expect_rc 0 "$1: shard 1" "${CLIENT[@]}" -q run "$P" --shard 1/2
}

# ---- 1. every file proven: the plan read three times, the journals once ------------------
expect_rc 0 "plan -a --shards 2 --split-size 4M" "${CLIENT[@]}" plan -a --shards 2 --split-size 4M \
	"$S" "$HOST:data/dst" -o "$P"
run_shards "first"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
# Again, nothing left to assemble: the reads of one that proves and makes directories only,
# its proof in one session (--jobs 1: with N, each session reads the plan for its shards).
# (LeakSanitizer cannot run under ptrace: off for this one, in an ASan build.)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -y -e trace=read -o "$T/fin.trace" "${CLIENT[@]}" finalize "$P" --jobs 1 >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && pass "finalize again (exit 0)" || fail "finalize again: exit $rc: $(head -5 "$T/err")"
plan_size=$(stat -c %s "$P")
jsize=$(cat "$P".journal.0 "$P".journal.1 | wc -c)
read -r plan_read journal_read < <(awk -F'= ' '/p\.plan>/ { p += $NF } /p\.plan\.journal\.[01]>/ { j += $NF }
	END { print p + 0, j + 0 }' "$T/fin.trace")
# Three passes, and the opening's first read (this small plan whole): at most four times.
[ "$plan_read" -ge $((3 * plan_size)) ] && [ "$plan_read" -le $((4 * plan_size)) ] &&
	pass "the plan read in three passes ($plan_read bytes, the plan $plan_size)" ||
	fail "the plan: $plan_read bytes read, the plan has $plan_size (three passes and its opening: at most $((4 * plan_size)))"
[ "$journal_read" -eq "$jsize" ] && pass "the shards' journals read once ($jsize bytes)" ||
	fail "the shards' journals: $journal_read bytes read, they have $jsize"
[ "$(stat -c %a "$D/d")" = 750 ] && [ "$(readlink "$D/d/link")" = f1 ] && cmp -s "$S/big" "$D/big" &&
	pass "the directory's mode, the symlink, the split file" ||
	fail "destination: $(stat -c '%n %a' "$D/d"; readlink "$D/d/link")"

# ---- 2. the assembled split file: unproven, then kept by its shards, then proven ---------
touch -d '2001-01-01' "$D/big"
expect_rc 15 "the split file changed at the destination: finalize" "${CLIENT[@]}" finalize "$P"
grep -q "tree/big: not at the destination" "$T/err" && pass "named" || fail "not named: $(cat "$T/err")"
touch -r "$S/big" "$D/big"
expect_rc 21 "its parts gone: finalize" "${CLIENT[@]}" finalize "$P"
grep -q "marked to send again" "$T/err" && pass "its ranges marked to send again" ||
	fail "ranges: $(cat "$T/err")"
run_shards "again"
expect_rc 0 "the file kept by its shards: finalize proves it whole" "${CLIENT[@]}" finalize "$P"
cmp -s "$S/big" "$D/big" && pass "identical" || fail "big differs"

# ---- 3. a shard's file changed at the destination -----------------------------------------
touch -d '2001-01-01' "$D/d/f1"
expect_rc 15 "a file changed at the destination: finalize" "${CLIENT[@]}" finalize "$P"
grep -q "tree/d/f1: not at the destination" "$T/err" && pass "named" || fail "not named: $(cat "$T/err")"
grep -qs '"tree/d/f1".*UNVERIFIED' "$P".journal.0 "$P".journal.1 && pass "marked failed in its journal" ||
	fail "no UNVERIFIED line for tree/d/f1"
run_shards "after"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
[ "$(stat -c %Y "$D/d/f1")" = "$(stat -c %Y "$S/d/f1")" ] && cmp -s "$S/d/f1" "$D/d/f1" &&
	pass "the file sent again, identical" || fail "f1: $(stat -c '%Y %s' "$D/d/f1")"
finish
