#!/bin/bash
# SPDX-License-Identifier: MIT
#
# finalize --jobs N: the proof in N probe sessions at once (docs/MIGRATION.md "What finalize
# proves"), plain processes against a real daemon. A tree of 8 directories of 100 files and
# a symlink each, migrated with plan -a --shards 4, the shards run; the state (destination,
# plan, journals) kept, and put back before each finalize below:
#   1. finalize --jobs 4 and finalize --jobs 1: exit 0 both, the same outcome lines in
#      finalize's journal and the same --json events (times left out), as --jobs 3 (one
#      session of two shards); the daemon's log: the proof of --jobs 4 in 4 dry-run
#      sessions, at least two of them open at once; that of --jobs 1 in one;
#   2. three files removed at the destination after their runs: --jobs 1 and --jobs 4 exit
#      15, name each, mark the same UNVERIFIED lines in the shards' journals, and change
#      nothing at the destination (every entry's time as it was); the shards that hold them
#      run again, then finalize --jobs 4 exits 0 and the files are back, identical;
#   3. the daemon stopped: finalize --jobs 4 exits 11 (connect), says so, changes nothing
#      (the shards' journals and the destination as they were).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard
HOST=127.0.0.1
S=$T/src/tree
D=$T/mod/dst/tree
P=$T/plans/p.plan
mkdir -p "$S" "$T/plans"
for d in 0 1 2 3 4 5 6 7; do
	mkdir "$S/d$d"
	for i in $(seq 1 100); do head -c $((i * 11 + d)) /dev/urandom >"$S/d$d/f$i"; done
	ln -s f1 "$S/d$d/link"
done
touch -d '2021-03-04 05:06:07' "$S"/d*

expect_rc 0 "plan -a --shards 4" "${CLIENT[@]}" plan -a --shards 4 "$S" "$HOST:data/dst" -o "$P"
for k in 0 1 2 3; do
	expect_rc 0 "shard $k" "${CLIENT[@]}" -q run "$P" --shard "$k/4"
done
cp -a "$T/mod/dst" "$T/keep.dst"
cp -a "$T/plans" "$T/keep.plans"

# put_back: the destination, the plan and the journals as the shards left them.
put_back() {
	rm -rf "$T/mod/dst" "$T/plans"
	cp -a "$T/keep.dst" "$T/mod/dst"
	cp -a "$T/keep.plans" "$T/plans"
}
# outcomes: finalize's journal's outcome lines, in order.
outcomes() { jq -c 'select(.state)' "$P.journal.final"; }
# events: finalize --json's events ($T/out), their times left out.
events() { jq -c 'del(.seconds, .rate)' "$T/out"; }
# stamps: every entry at the destination with its mtime, sorted.
stamps() { (cd "$T/mod/dst" && find . -printf '%p %T@ %s\n' | LC_ALL=C sort); }
# shard_marks: the UNVERIFIED lines of the shards' journals, each with its shard.
shard_marks() { grep -H UNVERIFIED "$P".journal.[0-3] | sed "s|^$T/plans/||" | LC_ALL=C sort; }
# log_from: the daemon log's line count now; dry_runs N: the dry-run sessions of the
# proof logged after line N: how many, and how many were open at once at most.
log_from() { wc -l <"$T/d.log"; }
dry_runs() {
	tail -n +$(($1 + 1)) "$T/d.log" | python3 -c '
import re, sys
start, end, dry = {}, {}, set()
for line in sys.stdin:
    m = re.match(r"(\S+) rdmacpd\[(\d+)\] \w+: (.*)", line)
    if not m:
        continue
    t, pid, text = m.groups()
    s = re.match(r"session (\d+) from \S+ (started|ended)", text)
    if s:
        (start if s.group(2) == "started" else end)[s.group(1)] = t
    elif ": dry run of a push to data" in text:
        dry.add(pid)
ev = sorted([(start[p], 1) for p in dry] + [(end[p], 0) for p in dry])
now = most = 0
for _, up in ev:
    now += 1 if up else -1
    most = max(most, now)
print(len(dry), most)'
}

# ---- 1. the same outcome from 4 sessions as from 1 -----------------------------------------
from=$(log_from)
expect_rc 0 "finalize --jobs 4" "${CLIENT[@]}" --json finalize "$P" --jobs 4
events >"$T/ev4"
outcomes >"$T/out4"
read -r n most < <(dry_runs "$from")
[ "$n" = 4 ] && [ "$most" -ge 2 ] && pass "--jobs 4: the proof in 4 sessions, $most open at once" ||
	fail "--jobs 4: $n dry-run sessions, at most $most open at once (wanted 4, at least 2)"
put_back
from=$(log_from)
expect_rc 0 "finalize --jobs 1" "${CLIENT[@]}" --json finalize "$P" --jobs 1
events >"$T/ev1"
outcomes >"$T/out1"
read -r n most < <(dry_runs "$from")
[ "$n" = 1 ] && pass "--jobs 1: the proof in one session" || fail "--jobs 1: $n dry-run sessions"
# 3 sessions of 4 shards: one proves two of them (shards 0 and 3).
put_back
expect_rc 0 "finalize --jobs 3" "${CLIENT[@]}" --json finalize "$P" --jobs 3
events >"$T/ev3"
outcomes >"$T/out3"
cmp -s "$T/out1" "$T/out3" && cmp -s "$T/ev1" "$T/ev3" && pass "--jobs 3: the same outcomes and events" ||
	fail "--jobs 3 differs: $(diff "$T/out1" "$T/out3" | head -3) $(diff "$T/ev1" "$T/ev3" | head -3)"
[ -s "$T/out1" ] && cmp -s "$T/out1" "$T/out4" && pass "the same journal outcome lines" ||
	fail "journal outcomes differ: $(diff "$T/out1" "$T/out4" | head -5)"
jq -s -e 'map(select(.event == "report"))[0].complete' "$T/ev4" >/dev/null && cmp -s "$T/ev1" "$T/ev4" &&
	pass "the same --json events and summary counts" ||
	fail "--json differs: $(diff "$T/ev1" "$T/ev4" | head -5)"

# ---- 2. files missing at the destination: the same marks, nothing changed ------------------
put_back
rm "$D/d1/f3" "$D/d5/f50" "$D/d7/f99"
rm -rf "$T/keep.dst"
cp -a "$T/mod/dst" "$T/keep.dst"
for jobs in 1 4; do
	stamps >"$T/before"
	expect_rc 15 "3 files gone at the destination: finalize --jobs $jobs" \
		"${CLIENT[@]}" finalize "$P" --jobs "$jobs"
	for f in d1/f3 d5/f50 d7/f99; do
		grep -q "tree/$f: not at the destination" "$T/err" || fail "--jobs $jobs: $f not named"
	done
	grep -q "3 of 800 files are not at the destination" "$T/err" &&
		pass "--jobs $jobs: 3 of 800 files named" || fail "--jobs $jobs: $(tail -2 "$T/err")"
	stamps >"$T/after"
	cmp -s "$T/before" "$T/after" && pass "--jobs $jobs: nothing changed at the destination" ||
		fail "--jobs $jobs: destination changed: $(diff "$T/before" "$T/after" | head -4)"
	shard_marks >"$T/marks$jobs"
	[ "$jobs" = 4 ] || put_back
done
[ "$(wc -l <"$T/marks4")" = 3 ] && cmp -s "$T/marks1" "$T/marks4" &&
	pass "the same 3 UNVERIFIED marks in the shards' journals" ||
	fail "marks: $(cat "$T/marks1") | $(cat "$T/marks4")"
for k in $(sed 's/^p\.plan\.journal\.\([0-3]\):.*/\1/' "$T/marks4" | sort -u); do
	expect_rc 0 "shard $k again" "${CLIENT[@]}" -q run "$P" --shard "$k/4"
done
expect_rc 0 "finalize --jobs 4 after them" "${CLIENT[@]}" finalize "$P" --jobs 4
for f in d1/f3 d5/f50 d7/f99; do
	cmp -s "$S/$f" "$D/$f" || fail "$f not back"
done
pass "the files back"

# ---- 3. the daemon stopped: a clear error, nothing changed ---------------------------------
put_back
stamps >"$T/before"
cat "$P".journal.[0-3] | md5sum >"$T/jbefore"
stop_daemon "$DAEMON_PID"
expect_rc 11 "the daemon stopped: finalize --jobs 4" "${CLIENT[@]}" finalize "$P" --jobs 4
grep -qi "connect" "$T/err" && pass "said: $(head -1 "$T/err")" || fail "unclear: $(cat "$T/err")"
stamps >"$T/after"
cmp -s "$T/before" "$T/after" && cat "$P".journal.[0-3] | md5sum | cmp -s - "$T/jbefore" &&
	pass "nothing changed (destination, shards' journals)" || fail "something changed"
finish
