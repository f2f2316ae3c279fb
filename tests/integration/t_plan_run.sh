#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A migration in shards (rdmacp plan / run / finalize / report), plain
# processes against a real daemon:
#   1. plan -a -H --shards 4 -o DIR/PLAN makes DIR (as mkdir -p; beneath a
#      file: exit 6, naming it and why); of a tree with nested and empty
#      directories, a symlink, hard links, a name with a newline and one that is not UTF-8:
#      the header says 4 shards and the entry count (jq), every entry has a
#      shard below 4, the names of one inode share a shard, the shards hold
#      about as many entries each;
#   2. the 4 shards run at once, as plain processes, all exit 0 (with
#      --shard auto taking JOB_COMPLETION_INDEX, a Kubernetes Indexed Job's);
#      finalize exits 0; the trees are identical (contents, modes, directory
#      mtimes, the hard link one inode); report --json says complete, with
#      every entry copied; report --csv has one row per entry;
#   3. a shard run again copies no file (its journal proves them done);
#   4. a shard killed (kill -9) while it copies a big file: finalize exits 9
#      and names the shard; report --watch follows the re-run and ends once
#      nothing is pending; run again, it resumes the big file (--partial),
#      finalize exits 0, identical; finalize --delete removes what the source
#      no longer has (--max-delete honoured: exit 16 first);
#   5. bad input: a plan cut short, two entries swapped, a header whose
#      shard count was changed, a digest that no longer matches: exit 19
#      naming the line; --shard 0/5 or --shards 5 against a plan of 4
#      shards: exit 1 saying 4 were expected; Slurm's variables set by hand:
#      with --shards the task ID is the shard (--array=3: shard 3), without it
#      the task's place in an array of the plan's count; two runs
#      of one shard at once: the second exits 18; a journal from another plan
#      next to the plan: run and finalize exit 19; --shard auto without a
#      launcher: exit 1.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard
HOST=127.0.0.1
BG_PIDS=()
cleanup_plan() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_plan EXIT

S=$T/src/tree
mkdir -p "$S/a/b/c" "$S/empty" "$S/d"
for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom >"$S/a/f$i"; done
for i in $(seq 1 10); do echo "small $i" >"$S/d/s$i"; done
head -c 2000000 /dev/urandom >"$S/a/b/c/two-meg"
ln "$S/a/b/c/two-meg" "$S/d/same-inode"
ln -s ../a/f1 "$S/d/sym"
printf 'x' >"$S/d/new
line"
printf 'y' >"$S/d/$(printf 'bad\xffname')"
chmod 0750 "$S/a/b"
touch -d '2020-01-02 03:04:05' "$S/a" "$S/a/b" "$S/empty"

P=$T/plans/tree.plan
# ---- 1. plan ----------------------------------------------------------------------
# -o in a directory not there yet: made, as mkdir -p makes it (0777 less the umask).
expect_rc 0 "plan -a -H --shards 4" "${CLIENT[@]}" plan -a -H --shards 4 "$S" "$HOST:data/dst" -o "$P"
[ "$(stat -c %a "$T/plans")" = "$(printf %o $((0777 & ~$(umask))))" ] && pass "-o: its missing directory made" ||
	fail "-o: $T/plans: $(stat -c %a "$T/plans" 2>&1)"
touch "$T/not-a-dir"
expect_rc 6 "-o beneath a regular file" "${CLIENT[@]}" plan -a --shards 4 "$S" "$HOST:data/dst" -o "$T/not-a-dir/x/p.plan"
grep -q "can't make the directory .*not-a-dir/x: Not a directory" "$T/err" && pass "-o: says which directory and why" ||
	fail "-o: message: $(cat "$T/err")"
NENT=$(find "$S" -printf . | wc -c)
[ "$(head -1 "$P" | jq -r '"\(.shards) \(.entries) \(.hardlinks) \(.preserve)"')" = "4 $NENT true true" ] &&
	pass "header: 4 shards, $NENT entries, -H and -p kept" || fail "header: $(head -1 "$P")"
[ "$(tail -n +2 "$P" | wc -l)" -eq "$NENT" ] && pass "one line per entry" || fail "lines: $(wc -l <"$P")"
[ "$(tail -n +2 "$P" | jq -s '[.[] | select(.shard < 0 or .shard > 3)] | length')" -eq 0 ] &&
	pass "every entry in shard 0..3" || fail "shards out of range"
link=$(tail -n +2 "$P" | jq -r 'select(.type == "hardlink") | "\(.shard) \(.link)"')
first=$(tail -n +2 "$P" | jq -r --arg n "${link#* }" 'select(.name == $n) | .shard')
[ -n "$link" ] && [ "${link%% *}" = "$first" ] && pass "the hard link is in its file's shard ($first)" ||
	fail "hard link: '$link' vs '$first'"
[ "$(grep -c '"name_hex":' "$P")" -eq 1 ] && pass "a name that is not UTF-8 is kept in hex" ||
	fail "no name_hex entry"
counts=$(tail -n +2 "$P" | jq -r .shard | sort | uniq -c | awk '{print $1}' | sort -n | tr '\n' ' ')
echo "    entries per shard: $counts"
set -- $counts
[ "$#" -eq 4 ] && [ "$1" -ge 3 ] && pass "all 4 shards have entries, balanced ($counts)" || fail "balance: $counts"

# ---- 2. the shards at once -----------------------------------------------------------
pids=()
for i in 0 1 2 3; do
	JOB_COMPLETION_INDEX=$i "${CLIENT[@]}" -q run "$P" --shard auto >"$T/r$i.out" 2>"$T/r$i.err" &
	pids[$i]=$!
	BG_PIDS+=("${pids[$i]}")
done
bad=0
for i in 0 1 2 3; do
	wait "${pids[$i]}" || { bad=$((bad + 1)); echo "    shard $i: $(tail -3 "$T/r$i.err" | tr '\n' '|')"; }
done
BG_PIDS=()
[ "$bad" -eq 0 ] && pass "4 shards (JOB_COMPLETION_INDEX, --shard auto) at once: all exit 0" || fail "$bad shards failed"
for i in 0 1 2 3; do
	[ -f "$P.journal.$i" ] || fail "no journal for shard $i"
done
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
D=$T/mod/dst/tree
diff -r --no-dereference "$S" "$D" >/dev/null && pass "trees identical" || fail "trees differ: $(diff -r --no-dereference "$S" "$D" 2>&1 | head -3)"
same_meta() { # the modes and mtimes of every directory
	(cd "$1" && find . -type d -printf '%p %m %T@\n' | sort)
}
[ "$(same_meta "$S")" = "$(same_meta "$D")" ] && pass "directory modes and mtimes kept (set by finalize)" ||
	fail "directory times: $(diff <(same_meta "$S") <(same_meta "$D") | head -4)"
[ "$(stat -c %i "$D/a/b/c/two-meg")" = "$(stat -c %i "$D/d/same-inode")" ] && pass "the hard link is one inode" ||
	fail "hard link broken"
"${CLIENT[@]}" report "$P" --json >"$T/rep.json"
# A directory another shard made first (as a parent) is kept by its own shard: skipped.
[ "$(jq -r 'select(.event == "report") | "\(.complete) \(.copied + .skipped) \(.pending) \(.failed)"' "$T/rep.json")" = "true $NENT 0 0" ] &&
	pass "report --json: complete, $NENT copied or kept" || fail "report: $(grep report "$T/rep.json")"
[ "$(jq -c 'select(.event == "shard")' "$T/rep.json" | wc -l)" -eq 4 ] && pass "report --json: 4 shard lines" || fail "shard lines"
[ "$(jq -c 'select(.event == "entry" and (.state == "copied" or (.state == "skipped" and .type == "dir")))' "$T/rep.json" | wc -l)" -eq "$NENT" ] &&
	pass "report --json: every entry copied (or a directory kept)" || fail "entry lines"
"${CLIENT[@]}" report "$P" --csv >"$T/rep.csv"
[ "$(head -1 "$T/rep.csv")" = "name,type,shard,state,size,code" ] && python3 -c '
import csv,sys
rows=list(csv.reader(open(sys.argv[1], newline="", errors="surrogateescape")))[1:]
sys.exit(0 if len(rows)==int(sys.argv[2]) and all(r[3]=="copied" or (r[3]=="skipped" and r[1]=="dir") for r in rows) else 1)' "$T/rep.csv" "$NENT" &&
	pass "report --csv: one row per entry" || fail "csv: $(head -3 "$T/rep.csv")"

# ---- 3. a shard again ---------------------------------------------------------------------
before=$(wc -l <"$P.journal.1")
expect_rc 0 "shard 1 again" "${CLIENT[@]}" run "$P" --shard 1/4
# Only its directories again (the skeleton a shard makes first, each time), no file.
again=$(tail -n +$((before + 1)) "$P.journal.1" | jq -r 'select(.state != null) | .name' | sort -u)
dirs=$(tail -n +2 "$P" | jq -r 'select(.type == "dir") | .name' | sort -u)
grep -q " 0 this run" "$T/err" && [ -z "$(comm -23 <(echo "$again") <(echo "$dirs") | grep .)" ] &&
	pass "shard 1 again: no file copied again" || fail "again: $(cat "$T/err"): $again"

# ---- 4. a killed shard ----------------------------------------------------------------------
BIG=$((48 << 20))
mkdir -p "$T/src/k/sub"
head -c $BIG /dev/urandom >"$T/src/k/big"
for i in $(seq 1 5); do echo "$i" >"$T/src/k/sub/f$i"; done
P2=$T/plans/k.plan
expect_rc 0 "plan with one big file, 1 shard" "${CLIENT[@]}" plan -a --shards 1 "$T/src/k" "$HOST:data/k" -o "$P2"
"${CLIENT[@]}" -q run "$P2" --shard 0/1 --bwlimit 16M >"$T/kill.out" 2>"$T/kill.err" &
kp=$!
BG_PIDS+=("$kp")
for _ in $(seq 1 100); do
	p=$(find "$T/mod/k" -path '*rdmacp-partial*' -type f -size +4M 2>/dev/null | head -1)
	[ -n "$p" ] && break
	t=$(find "$T/mod/k" -name '.big.rdmacp.*' -size +4M 2>/dev/null | head -1)
	[ -n "$t" ] && break
	sleep 0.1
done
kill -9 "$kp"
wait "$kp" 2>/dev/null
BG_PIDS=()
[ ! -e "$T/mod/k/k/big" ] || ! cmp -s "$T/src/k/big" "$T/mod/k/k/big" && pass "killed mid-copy: big not complete" ||
	fail "the big file was done before the kill"
expect_rc 9 "finalize after the kill" "${CLIENT[@]}" finalize "$P2"
grep -q "shard 0:" "$T/err" && grep -q "not finished" "$T/err" && pass "finalize names the unfinished shard" ||
	fail "finalize said: $(cat "$T/err")"
# report --watch follows the re-run and ends by itself once nothing is pending.
"${CLIENT[@]}" report --watch --json "$P2" >"$T/watch.out" 2>"$T/watch.err" &
wp=$!
BG_PIDS+=("$wp")
sleep 1
expect_rc 0 "the killed shard run again" "${CLIENT[@]}" --json run "$P2" --shard 0/1
for _ in $(seq 1 150); do kill -0 "$wp" 2>/dev/null || break; sleep 0.1; done
kill -0 "$wp" 2>/dev/null && fail "report --watch still runs with nothing pending"
wait "$wp"
wrc=$?
BG_PIDS=()
rounds=$(jq -c 'select(.event == "report")' "$T/watch.out" | wc -l)
[ "$wrc" -eq 0 ] && [ "$rounds" -ge 2 ] &&
	[ "$(jq -r 'select(.event == "report") | .complete' "$T/watch.out" | sed -n '1p;$p' | tr '\n' ' ')" = "false true " ] &&
	pass "report --watch: $rounds rounds, pending then complete, exit 0" ||
	fail "report --watch: exit $wrc, $rounds rounds: $(jq -r 'select(.event == "report") | .complete' "$T/watch.out" | tr '\n' ' ')"
jq -c 'select(.event == "file" and .action == "resumed" and .resumed_bytes > 0)' "$T/out" | grep -q . &&
	pass "the big file resumed (--partial)" || echo "note: the kill came before any data was kept: $(grep big "$T/out" | head -2)"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P2"
diff -r "$T/src/k" "$T/mod/k/k" >/dev/null && pass "identical after the re-run" || fail "differs after the re-run"
# The source loses two files: finalize --delete mirrors it.
rm "$T/src/k/sub/f4" "$T/src/k/sub/f5"
expect_rc 16 "finalize --delete --max-delete 1" "${CLIENT[@]}" finalize "$P2" --delete --max-delete 1
expect_rc 0 "finalize --delete" "${CLIENT[@]}" finalize "$P2" --delete
[ ! -e "$T/mod/k/k/sub/f5" ] && [ ! -e "$T/mod/k/k/sub/f4" ] && [ -e "$T/mod/k/k/sub/f3" ] &&
	pass "finalize --delete removed what the source lost" || fail "after --delete: $(ls "$T/mod/k/k/sub")"
"${CLIENT[@]}" report "$P2" --json >"$T/rep2.json"
[ "$(jq -r 'select(.event == "report") | .deleted' "$T/rep2.json")" -ge 2 ] && pass "report: the deletions" ||
	fail "report: $(grep report "$T/rep2.json")"

# ---- 5. bad input -------------------------------------------------------------------------
bad_plan() { # DESC WANT-IN-MESSAGE EDIT (commands writing the edited plan) [SUBCOMMAND ARGS...]
	local desc=$1 want=$2 edit=$3
	shift 3
	[ $# -gt 0 ] || set -- run "$T/plans/bad.plan" --shard 0/4
	cp "$P" "$T/plans/bad.plan"
	eval "$edit"
	expect_rc 19 "$desc" "${CLIENT[@]}" "$@"
	set -- "$desc" "$want"
	grep -q "$2" "$T/err" && pass "$1: '$(head -1 "$T/err")'" || fail "$1: message: $(cat "$T/err")"
	rm -f "$T/plans/bad.plan"*
}
bad_plan "a plan cut short mid-line" "bad.plan:$((NENT + 1)): the last line is cut short" \
	'head -c -20 "$P" >"$T/plans/bad.plan"'
bad_plan "a plan missing its last lines" "ends after $((NENT - 3)) entries" \
	'head -n -3 "$P" >"$T/plans/bad.plan"'
bad_plan "two entries swapped" "bad.plan:5: entry number 5 where 4 was due" \
	'awk "NR == 5 { held = \$0; next } NR == 6 { print; print held; next } { print }" "$P" >"$T/plans/bad.plan"'
bad_plan "the header's shard count lowered to 2" "bad.plan:[0-9]*: shard [23], but the plan has 2 shards" \
	'sed "1s/\"shards\":4/\"shards\":2/" "$P" >"$T/plans/bad.plan"' report "$T/plans/bad.plan"
bad_plan "an entry moved to another shard" "digest does not match" \
	'sed "3s/\"shard\":\([0-9]\)/\"shard\":9/;3s/\"shard\":9/\"shard\":0/" "$P" >"$T/plans/bad.plan"; sed -i "4s/\"shard\":[0-9]/\"shard\":3/" "$T/plans/bad.plan"'
bad_plan "not a plan" "not an rdmacp plan" 'echo "{\"hello\":1}" >"$T/plans/bad.plan"'
# A count that is not the plan's is a usage error, saying the plan's (not 19: the plan is fine).
expect_rc 1 "--shard 0/5 against a plan of 4 shards" "${CLIENT[@]}" run "$P" --shard 0/5
grep -q "5 shards, but the plan has 4: expected 4" "$T/err" && pass "says the plan has 4" || fail "message: $(cat "$T/err")"
expect_rc 1 "--shard auto --shards 5 against a plan of 4" env JOB_COMPLETION_INDEX=0 "${CLIENT[@]}" run "$P" --shard auto --shards 5
grep -q "^rdmacp: --shards: 5 shards, but the plan has 4: expected 4" "$T/err" && pass "says --shards is not the plan's" ||
	fail "message: $(cat "$T/err")"
# Slurm (its variables set by hand): with --shards the task ID is the shard, whatever the array.
starts() { grep -c '"run":"start"' "$P.journal.$1"; }
b3=$(starts 3)
expect_rc 0 "sbatch --array=3's task, --shards 4" env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=3 \
	SLURM_ARRAY_TASK_COUNT=1 "${CLIENT[@]}" run "$P" --shard auto --shards 4
[ "$(starts 3)" -eq $((b3 + 1)) ] && pass "it ran shard 3 (not 0)" || fail "shard 3's runs: $b3 -> $(starts 3)"
expect_rc 1 "sbatch --array=3's task without --shards" env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=3 \
	SLURM_ARRAY_TASK_COUNT=1 "${CLIENT[@]}" run "$P" --shard auto
grep -q "SLURM_ARRAY_TASK_COUNT: 1 shards, but the plan has 4: expected 4" "$T/err" &&
	pass "says the array is not the plan's, expected 4" || fail "message: $(cat "$T/err")"
expect_rc 1 "--array=4 with --shards 4: no shard 4" env SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=4 \
	SLURM_ARRAY_TASK_COUNT=1 "${CLIENT[@]}" run "$P" --shard auto --shards 4
# Without --shards, an array of the plan's count from 1 (--array=1-4): its place in it.
b3=$(starts 3)
expect_rc 0 "--array=1-4's task 4, no --shards" env SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=1 \
	SLURM_ARRAY_TASK_COUNT=4 "${CLIENT[@]}" run "$P" --shard auto
[ "$(starts 3)" -eq $((b3 + 1)) ] && pass "it ran shard 3" || fail "shard 3's runs: $b3 -> $(starts 3)"
expect_rc 1 "--shard 4/4" "${CLIENT[@]}" run "$P" --shard 4/4
expect_rc 1 "--shard auto with no launcher" env -u JOB_COMPLETION_INDEX -u SLURM_ARRAY_TASK_ID -u SLURM_PROCID \
	-u OMPI_COMM_WORLD_RANK -u PMI_RANK "${CLIENT[@]}" run "$P" --shard auto
# Two processes claim shard 2: the second is turned away while the first holds it.
P3=$T/plans/two.plan
expect_rc 0 "plan for the claim test" "${CLIENT[@]}" plan -a --shards 1 "$T/src/k" "$HOST:data/two" -o "$P3"
"${CLIENT[@]}" -q run "$P3" --shard 0/1 --bwlimit 16M >"$T/first.out" 2>"$T/first.err" &
fp=$!
BG_PIDS+=("$fp")
for _ in $(seq 1 50); do grep -q '"run":"start"' "$P3.journal.0" 2>/dev/null && break; sleep 0.1; done
expect_rc 18 "a second process claiming shard 0 while it runs" "${CLIENT[@]}" run "$P3" --shard 0/1
grep -q "running already" "$T/err" && pass "says the shard is running already" || fail "message: $(cat "$T/err")"
kill -9 "$fp"
wait "$fp" 2>/dev/null
BG_PIDS=()
# A journal from another plan where this plan's would be.
cp "$P2.journal.0" "$P3.journal.0"
expect_rc 19 "run with a journal of another plan" "${CLIENT[@]}" run "$P3" --shard 0/1
grep -q "the journal of another plan" "$T/err" && pass "run: names the other plan's journal" || fail "message: $(cat "$T/err")"
expect_rc 19 "finalize with a journal of another plan" "${CLIENT[@]}" finalize "$P3"
expect_rc 19 "report with a journal of another plan" "${CLIENT[@]}" report "$P3"

finish
