#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A migration made again (a cut-over): what a new plan's run costs, and names
# the source loses while it runs (plan/run/finalize against a real daemon):
#   1. plan -a --skip quick --split-size 4M --shards 2 of a 12 MiB file (3
#      ranges) and 6 small files; run, finalize: identical;
#   2. 6 small files changed, a new plan: its runs send the 27,000 bytes of
#      the small files and no byte of the big file (the summaries' "bytes";
#      run --json's "ranges_kept" is 3); its ranges are journaled skipped, no
#      staging directory is made; finalize keeps the file (no assembly),
#      exit 0; report --json: the split file unchanged, in place, complete;
#      the same under --delta without a skip level (compared by content);
#   3. the big file changed (same size, new mtime), a new plan: its ranges
#      are sent and assembled, identical;
#   4. the big file changes after one shard kept its ranges and before the
#      other sends its own: finalize exits 9, says it changed, marks the kept
#      ranges failed (CHANGED); that shard run again sends them; finalize
#      assembles the file, identical;
#   5. a file removed from the source after the plan: run exits 0, says it
#      vanished (never "--files-from"), run --json "vanished":1, journal
#      "vanished"; finalize exits 9 saying so, changing nothing; finalize
#      --delete exits 0 and removes the copy; report --json "vanished":1,
#      complete; run --missing-ok: journaled MISSING_OK, finalize exits 0
#      with no flag; plan --missing-ok: its header says so, finalize exits 0;
#   6. a split file removed from the source between its shards: the parts
#      the first shard sent are in staging; finalize --delete removes them
#      (ASSEMBLE DISCARD) and the staging directory with them.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard
HOST=127.0.0.1
S=$T/src/tree
D=$T/mod/dst/tree
mkdir -p "$S/d" "$T/plans"
head -c $((12 << 20)) /dev/urandom >"$S/big"
touch -d '2022-02-03 04:05:06' "$S/big"
small() { for i in 1 2 3 4 5 6; do head -c 4500 /dev/urandom >"$S/d/f$i"; done; }
small

# plan_runs NAME [PLAN OPTIONS...]: a plan of the tree, both shards run (--json, outputs kept).
plan_runs() {
	local p=$T/plans/$1
	shift
	expect_rc 0 "plan $(basename "$p")" "${CLIENT[@]}" plan -a --skip quick --shards 2 \
		--split-size 4M "$@" "$S" "$HOST:data/dst" -o "$p"
	for i in 0 1; do
		expect_rc 0 "$(basename "$p") shard $i" "${CLIENT[@]}" --json run "$p" --shard "$i/2"
		cp "$T/out" "$p.out$i"
		cp "$T/err" "$p.err$i"
	done
}
# sum FIELD EVENT PLAN: the field summed over both runs' events of that kind.
sum() { cat "$T/plans/$3".out* | jq -s "[.[] | select(.event == \"$2\") | .$1] | add"; }

# ---- 1. a first migration ------------------------------------------------------------
plan_runs p1
expect_rc 0 "p1 finalize" "${CLIENT[@]}" finalize "$T/plans/p1"
cmp "$S/big" "$D/big" && diff -r "$S" "$D" >/dev/null && pass "p1: identical" || fail "p1 differs"

# ---- 2. a cut-over: small files changed, the big one not -------------------------------
sleep 1
small
plan_runs p2
sent=$(sum bytes summary p2)
[ "$sent" -eq 27000 ] && pass "p2: the runs sent $sent bytes (the 6 small files, no range)" ||
	fail "p2 sent $sent bytes"
[ "$(sum ranges_kept run p2)" = 3 ] && pass "p2: run --json: 3 ranges kept" ||
	fail "run events: $(cat "$T"/plans/p2.out* | grep '"run"')"
[ "$(cat "$T"/plans/p2.journal.[01] | jq -r 'select(.range != null) | "\(.state) \(.xxh128)"' | sort -u)" = "skipped null" ] &&
	pass "p2: its ranges journaled skipped, no digest" || fail "journals: $(grep range "$T"/plans/p2.journal.[01])"
! ls -d "$T"/mod/dst/.rdmacp-split.* >/dev/null 2>&1 && pass "p2: no staging directory made" ||
	fail "staging: $(ls -d "$T"/mod/dst/.rdmacp-split.*)"
ino=$(stat -c %i "$D/big")
expect_rc 0 "p2 finalize" "${CLIENT[@]}" finalize "$T/plans/p2"
grep -q "0 assembled, 1 kept" "$T/err" && [ "$(stat -c %i "$D/big")" = "$ino" ] &&
	pass "p2 finalize: the file kept, not assembled again" || fail "finalize said: $(cat "$T/err")"
cmp "$S/big" "$D/big" && diff -r "$S" "$D" >/dev/null && [ "$(stat -c %Y "$D/big")" = "$(stat -c %Y "$S/big")" ] &&
	pass "p2: identical, mtime kept" || fail "p2 differs"
grep -q '"state":"skipped","name":"tree/big"' "$T/plans/p2.journal.final" &&
	pass "p2: finalize's journal: the file skipped" || fail "final journal: $(cat "$T/plans/p2.journal.final")"
"${CLIENT[@]}" report "$T/plans/p2" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "split") | "\(.assembled) \(.unchanged)"' "$T/rep.json")" = "true true" ] &&
	[ "$(jq -r 'select(.event == "report") | .complete' "$T/rep.json")" = true ] &&
	pass "p2 report --json: unchanged, in place, complete" || fail "report: $(grep -E 'split|report' "$T/rep.json")"

# --delta without a skip level: an unchanged split file is compared by content, not sent.
plan_runs p2d --skip none --delta
[ "$(sum ranges_kept run p2d)" = 3 ] && [ "$(sum bytes summary p2d)" -lt $((1 << 20)) ] &&
	pass "p2d (--delta, no skip level): ranges kept, $(sum bytes summary p2d) bytes sent" ||
	fail "p2d: $(sum bytes summary p2d) bytes, $(sum ranges_kept run p2d) ranges kept"
expect_rc 0 "p2d finalize" "${CLIENT[@]}" finalize "$T/plans/p2d"
cmp "$S/big" "$D/big" && pass "p2d: identical" || fail "p2d: big differs"

# ---- 3. the big file changed ---------------------------------------------------------------
printf 'X' | dd of="$S/big" bs=1 seek=5000000 conv=notrunc status=none
plan_runs p3
[ "$(sum bytes summary p3)" -ge $((12 << 20)) ] && pass "p3: the changed file's ranges sent" ||
	fail "p3 sent $(sum bytes summary p3)"
expect_rc 0 "p3 finalize" "${CLIENT[@]}" finalize "$T/plans/p3"
cmp "$S/big" "$D/big" && pass "p3: assembled, identical" || fail "p3: big differs"

# ---- 4. the file changes between the shards -------------------------------------------------
P4=$T/plans/p4
expect_rc 0 "plan p4" "${CLIENT[@]}" plan -a --skip quick --shards 2 --split-size 4M "$S" "$HOST:data/dst" -o "$P4"
[ "$(tail -n +2 "$P4" | jq -r 'select(.type == "range") | .shard' | sort -u | wc -l)" = 2 ] ||
	fail "p4: the ranges are not in both shards"
expect_rc 0 "p4 shard 0 (keeps its ranges)" "${CLIENT[@]}" -q run "$P4" --shard 0/2
printf 'Y' | dd of="$S/big" bs=1 seek=1000 conv=notrunc status=none
touch -d '2023-01-01' "$S/big"
expect_rc 0 "p4 shard 1 (sends its ranges)" "${CLIENT[@]}" -q run "$P4" --shard 1/2
expect_rc 9 "p4 finalize: the file changed meanwhile" "${CLIENT[@]}" finalize "$P4"
grep -q "changed during the migration" "$T/err" && grep -q '"code":"CHANGED"' "$P4.journal.0" &&
	pass "p4: said, the kept ranges marked to send again" || fail "p4: $(cat "$T/err")"
expect_rc 0 "p4 shard 0 again" "${CLIENT[@]}" -q run "$P4" --shard 0/2
expect_rc 0 "p4 finalize" "${CLIENT[@]}" finalize "$P4"
cmp "$S/big" "$D/big" && pass "p4: assembled, identical" || fail "p4: big differs"

# ---- 5. names the source loses after the plan ---------------------------------------------
plan_vanish() { # NAME FILE [PLAN OPTIONS...]: planned, FILE removed from the source, both shards run
	local p=$T/plans/$1 f=$2
	shift 2
	expect_rc 0 "plan $(basename "$p")" "${CLIENT[@]}" plan -a --skip quick --shards 2 "$@" "$S" "$HOST:data/dst" -o "$p"
	rm "$S/d/$f"
}
plan_vanish p5 f1
for i in 0 1; do
	expect_rc 0 "p5 shard $i, d/f1 gone" "${CLIENT[@]}" --json run "$T/plans/p5" --shard "$i/2"
	cp "$T/out" "$T/plans/p5.out$i"
	cat "$T/err" >>"$T/p5.err"
done
[ "$(sum vanished run p5)" = 1 ] && grep -q "tree/d/f1: vanished from the source since the plan" "$T/p5.err" &&
	! grep -q -- "--files-from" "$T/p5.err" && pass "p5: run says d/f1 vanished (not --files-from), vanished 1" ||
	fail "p5: $(cat "$T/p5.err") $(grep '"run"' "$T"/plans/p5.out*)"
grep -q '"state":"vanished","name":"tree/d/f1"' "$T"/plans/p5.journal.[01] && pass "p5: journaled vanished" ||
	fail "p5 journals"
expect_rc 9 "p5 finalize: a vanished name, no --delete" "${CLIENT[@]}" finalize "$T/plans/p5"
grep -q "1 entries vanished from the source" "$T/err" && [ -e "$D/d/f1" ] && pass "p5: said, nothing changed" ||
	fail "p5: $(cat "$T/err")"
expect_rc 0 "p5 finalize --delete" "${CLIENT[@]}" finalize --delete "$T/plans/p5"
[ ! -e "$D/d/f1" ] && pass "p5: the copy removed" || fail "p5: d/f1 still there"
"${CLIENT[@]}" report "$T/plans/p5" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "report") | "\(.vanished) \(.complete) \(.failed)"' "$T/rep.json")" = "1 true 0" ] &&
	pass "p5 report --json: vanished 1, complete" || fail "report: $(grep report "$T/rep.json")"
plan_vanish p6 f2
for i in 0 1; do expect_rc 0 "p6 shard $i --missing-ok" "${CLIENT[@]}" -q run "$T/plans/p6" --shard "$i/2" --missing-ok; done
grep -q '"state":"vanished","name":"tree/d/f2","code":"MISSING_OK"' "$T"/plans/p6.journal.[01] &&
	pass "p6: run --missing-ok journals the vanished name accepted" || fail "p6 journals: $(grep f2 "$T"/plans/p6.journal.*)"
expect_rc 0 "p6 finalize (the runs accepted it)" "${CLIENT[@]}" finalize "$T/plans/p6"
plan_vanish p7 f3 --missing-ok
[ "$(head -1 "$T/plans/p7" | jq -r .missing_ok)" = true ] && pass "p7: plan --missing-ok in the header" ||
	fail "p7 header: $(head -1 "$T/plans/p7")"
for i in 0 1; do expect_rc 0 "p7 shard $i" "${CLIENT[@]}" run "$T/plans/p7" --shard "$i/2"; done
! grep -q "vanished from the source" "$T/err" && expect_rc 0 "p7 finalize (the plan accepts it)" "${CLIENT[@]}" finalize "$T/plans/p7"

# ---- 6. a split file the source loses between its shards --------------------------------------
head -c $((12 << 20)) /dev/urandom >"$S/big2"
P8=$T/plans/p8
expect_rc 0 "plan p8" "${CLIENT[@]}" plan -a --skip quick --shards 2 --split-size 4M "$S" "$HOST:data/dst" -o "$P8"
staged() { find "$T/mod/dst" -maxdepth 2 -name '.rdmacp-split.*' | head -1; }
expect_rc 0 "p8 shard 0" "${CLIENT[@]}" -q run "$P8" --shard 0/2
stage=$(staged)
[ -n "$stage" ] && [ -n "$(ls -A "$stage")" ] && pass "p8: shard 0's parts of big2 are in staging" ||
	fail "p8: no parts staged: $(ls -a "$T/mod/dst")"
rm "$S/big2"
expect_rc 0 "p8 shard 1, big2 gone" "${CLIENT[@]}" -q run "$P8" --shard 1/2
expect_rc 0 "p8 finalize --delete" "${CLIENT[@]}" -v finalize --delete "$P8"
[ -z "$(staged)" ] && [ ! -e "$D/big2" ] && grep -q "removed the parts of tree/big2" "$T/err" &&
	pass "p8: the vanished file's parts and staging removed" ||
	fail "p8: $(ls -a "$T/mod/dst" "$stage" 2>&1) $(cat "$T/err")"
finish
