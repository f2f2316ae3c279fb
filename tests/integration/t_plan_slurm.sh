#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A sharded migration as a Slurm job array, on a one-node cluster started
# for the test (slurm-local.sh), with docs/MIGRATION.md's own lines: its
# scripts (migrate.sbatch, migrate-retry.sbatch) and sbatch lines are taken
# from the document as written, only the site's values replaced (the plan's
# path, the source and destination, 512 shards -> 8, %32 -> %2, 4 CPUs -> 1,
# shards 17,230 -> 3,6); `rdmacp` is a wrapper giving our certificates;
#   1. the plan, the array and its retry job: one task (shard 5) fails once
#      (the wrapper exits 3 before rdmacp runs: a stand-in for a task that
#      crashed); the retry job submits that shard alone (no other), then
#      finalizes: report complete, the trees identical, 8 journals, one per
#      task; the recovery line (sbatch --array=3,6 --wrap ... --shards 8) runs
#      shards 3 and 6, no other, both tasks exit 0 (the task ID is the shard:
#      it was SLURM_ARRAY_TASK_ID less SLURM_ARRAY_TASK_MIN, shards 0 and 3);
#      then its finalize exits 0; a second plan, shard 2 failing every time,
#      RETRIES=1: shard 2 runs twice, the last retry job fails (exit 1) naming
#      it, and nothing is finalized;
#   2. a second plan with a big file: its task is cancelled mid-copy
#      (scancel JOB_I); finalize exits 9 and names that shard; the task is
#      submitted again alone (sbatch --array=I, --shards 8), it resumes the
#      big file; finalize exits 0; the trees are identical.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed: Slurm not installed or its
# daemons would not start).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm-local.sh"

command -v jq >/dev/null || skip "jq not installed"
trap 'slurm_stop "$T/slurm"; cleanup' EXIT
slurm_start "$T/slurm" || skip "Slurm: $SLURM_WHY"
setup_standard

# job FILE ARGS...: a job script running rdmacp ARGS (with our certificates and port).
job() {
	local f=$1 a
	shift
	{
		echo '#!/bin/bash'
		printf 'exec'
		for a in "${CLIENT[@]}" "$@"; do printf ' %q' "$a"; done
		echo
	} >"$f"
}
# wait_job ID: until squeue no longer lists it (at most 120 s).
wait_job() {
	for _ in $(seq 1 600); do
		[ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

# ---- 1. docs/MIGRATION.md's Slurm lines, as written -------------------------------------
DOC=$SRC_DIR/docs/MIGRATION.md
S=$T/src/tree
mkdir -p "$S/a/b" "$S/c"
for i in $(seq 1 60); do head -c $((i * 1499)) /dev/urandom >"$S/a/f$i"; done
for i in $(seq 1 20); do echo "$i" >"$S/a/b/g$i"; done
P=$T/mig/data.plan
W=$T/work
mkdir -p "$W" "$T/bin"
# rdmacp, with our certificates and port; the first run of shard 5's task fails.
{
	echo '#!/bin/bash'
	echo "echo \"\${SLURM_ARRAY_JOB_ID:--} \${SLURM_ARRAY_TASK_ID:--} \$*\" >>$(printf %q "$T/calls")"
	echo "case \" \$* \" in *' run '*) [ \"\${SLURM_ARRAY_TASK_ID:-}\" = 5 ] &&"
	echo "	mkdir $(printf %q "$T/failed-once") 2>/dev/null && { echo 'the test fails this task once' >&2; exit 3; }"
	echo "	[ \"\${SLURM_ARRAY_TASK_ID:-}\" = 2 ] && [ -e $(printf %q "$T/fail-always") ] && { echo 'the test fails this task' >&2; exit 3; } ;; esac"
	printf 'exec'
	printf ' %q' "${CLIENT[@]}"
	echo ' "$@"'
} >"$T/bin/rdmacp"
chmod +x "$T/bin/rdmacp"
export PATH=$T/bin:$PATH
# doc_block N: the Nth indented block of the Slurm section, the site's values replaced.
doc_block() {
	awk -v want="$1" '
		/^## / { on = ($0 == "## Slurm") }
		!on { next }
		/^    / { if (!inb) { n++; inb = 1 } if (n == want) print substr($0, 5); next }
		{ inb = 0 }' "$DOC" |
		sed -e "s|/shared/mig/data.plan|$P|g" -e "s|/srv/data dm1,dm2:archive/|$S 127.0.0.1:data/dst/|" \
			-e 's/512/8/g; s/0-511/0-7/; s/%32/%2/g; s/--cpus-per-task=4/--cpus-per-task=1/; s/17,230/3,6/'
}
# wait_all: until this cluster runs no job (at most 120 s).
wait_all() {
	for _ in $(seq 1 600); do
		[ -z "$(squeue -h 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}
doc_block 1 >"$W/migrate.sbatch"
doc_block 2 >"$W/migrate-retry.sbatch"
doc_block 3 >"$W/submit.sh"
doc_block 4 >"$W/recover.sh"
grep -q -- '--shards 8$' "$W/migrate.sbatch" && grep -q 'afterany' "$W/submit.sh" &&
	grep -q 'rdmacp report' "$W/migrate-retry.sbatch" && [ "$(wc -l <"$W/recover.sh")" -eq 2 ] ||
	die "docs/MIGRATION.md's Slurm section is not as this test reads it: $(cat "$W"/*)"
sed 's/^/    | /' "$W/submit.sh"
cd "$W" || die "cd $W"
t0=$(date +%s)
bash -e "$W/submit.sh" >"$T/submit.out" 2>&1 && pass "the documented plan and sbatch lines: exit 0" ||
	fail "submit: $(cat "$T/submit.out")"
wait_all || fail "jobs still queued after 120 s: $(squeue)"
echo "    array of 8, 2 at a time, a retry, finalize: $(($(date +%s) - t0)) s"
[ -d "$T/failed-once" ] && pass "shard 5's task failed once" || fail "shard 5's task never failed"
# Array jobs' run calls, by job: the first ran 0..7, the retry's only 5.
runs=$(awk '/ run / && $1 != "-" { print $1, $2 }' "$T/calls" | sort -n -k1,1 -k2,2 |
	awk '$1 != j { printf "%s%s", (j == "" ? "" : "|"), $2; j = $1; next } { printf " %s", $2 } END { print "|" }')
[ "$runs" = "0 1 2 3 4 5 6 7|5|" ] &&
	pass "the retry job submitted shard 5 alone" || fail "tasks run, by array job: '$runs'"
[ "$("${CLIENT[@]}" report "$P" --json | jq -r 'select(.event == "report") | .complete')" = true ] &&
	[ -s "$P.journal.final" ] && pass "the retry job finalized: report complete" ||
	fail "not finalized: $(tail -3 "$W"/slurm-*.out | tr '\n' '|')"
n=0
for i in $(seq 0 7); do [ "$(head -1 "$P.journal.$i" 2>/dev/null | jq -r .shard)" = "$i" ] && n=$((n + 1)); done
[ "$n" -eq 8 ] && pass "8 journals, one per task" || fail "$n journals of 8"
diff -r "$S" "$T/mod/dst/tree" >/dev/null && pass "trees identical" || fail "trees differ"
# The recovery line: the shards it names run, no other.
starts() { for i in $(seq 0 7); do printf '%s ' "$(grep -c '"run":"start"' "$P.journal.$i")"; done; }
before=$(starts)
jid=$(bash -e <(head -1 "$W/recover.sh") | awk '{ print $NF }')
wait_all || fail "the recovery job still queued"
ran=$(paste -d' ' <(echo "$before" | tr ' ' '\n') <(starts | tr ' ' '\n') | awk 'NF == 2 && $2 > $1 { printf "%d ", NR - 1 }')
[ "$ran" = "3 6 " ] && pass "sbatch --array=3,6 ... --shards 8 ran shards 3 and 6, no other" ||
	fail "the recovery line ran shards '$ran' (journals' runs $before -> $(starts))"
st=$(scontrol show job "$jid" 2>/dev/null | grep -oE '\b(JobState=[A-Z]+|ExitCode=[0-9:]+)' | sort | uniq -c | tr -s ' \n' ' ')
[ "$st" = " 2 ExitCode=0:0 2 JobState=COMPLETED " ] && pass "its 2 tasks exit 0" || fail "its tasks: '$st'"
expect_rc 0 "the recovery's finalize" bash -e <(tail -1 "$W/recover.sh")
# A shard that fails every time: the retries end, the last retry job failed, no finalize.
P=$T/mig2/data.plan
W=$T/work2
mkdir -p "$W"
touch "$T/fail-always"
doc_block 1 >"$W/migrate.sbatch"
doc_block 2 >"$W/migrate-retry.sbatch"
doc_block 3 >"$W/submit.sh"
cd "$W" || die "cd $W"
: >"$T/calls"
RETRIES=1 bash -e "$W/submit.sh" >"$T/submit.out" 2>&1 && pass "again, shard 2 failing every time, RETRIES=1: submitted" ||
	fail "submit: $(cat "$T/submit.out")"
wait_all || fail "jobs still queued after 120 s: $(squeue)"
last=$(grep -l "shards 2 not done after the retries" "$W"/slurm-*.out 2>/dev/null)
[ "$(grep -c ' 2 .* run ' "$T/calls")" -eq 2 ] && [ -n "$last" ] && [ ! -e "$P.journal.final" ] &&
	pass "shard 2 tried twice, then the retry job gave up, naming it; no finalize" ||
	fail "give up: tries $(grep -c ' 2 .* run ' "$T/calls"), $(tail -2 "$W"/slurm-*.out | tr '\n' '|')"
jid=${last##*slurm-}
st=$(scontrol show job "${jid%.out}" 2>/dev/null | grep -oE '\b(JobState=[A-Z]+|ExitCode=[0-9:]+)' | tr '\n' ' ')
[ "$st" = "JobState=FAILED ExitCode=1:0 " ] && pass "the last retry job failed (exit 1)" || fail "the last retry job: '$st'"
cd "$T" || die "cd $T"

# ---- 2. a task cancelled mid-copy, submitted again ---------------------------------------
K=$T/src/k
mkdir -p "$K/s"
head -c $((40 << 20)) /dev/urandom >"$K/big"
for i in $(seq 1 30); do echo "$i" >"$K/s/f$i"; done
P2=$T/k.plan
expect_rc 0 "plan of a tree with a big file, 8 shards" \
	"${CLIENT[@]}" plan -a --shards 8 "$K" "127.0.0.1:data/k" -o "$P2"
I=$(tail -n +2 "$P2" | jq -r 'select(.name == "k/big") | .shard')
job "$T/job2.sh" -q run "$P2" --shard auto --bwlimit 8M
JOB=$(sbatch --parsable --array=0-7%2 -o "$T/k-%a.out" "$T/job2.sh")
for _ in $(seq 1 600); do
	[ -n "$(find "$T/mod/k" \( -name '.big.rdmacp.*' -o -path '*partial*' \) -type f -size +4M 2>/dev/null)" ] && break
	sleep 0.1
done
scancel "${JOB}_$I"
wait_job "$JOB" || fail "the array did not end"
cmp -s "$K/big" "$T/mod/k/k/big" && fail "the big file was done before scancel" ||
	pass "task $I cancelled mid-copy"
expect_rc 9 "finalize with task $I cut" "${CLIENT[@]}" finalize "$P2"
grep -q "shard $I:" "$T/err" && pass "finalize names shard $I" || fail "finalize said: $(cat "$T/err")"
job "$T/job3.sh" --json run "$P2" --shard auto --shards 8
timeout 120 sbatch --wait --array="$I" -o "$T/again.out" "$T/job3.sh" >/dev/null 2>&1 &&
	pass "task $I submitted again alone: exit 0" || fail "again: $(tail -3 "$T/again.out")"
grep '^{' "$T/again.out" | jq -c 'select(.event == "file" and .action == "resumed" and .resumed_bytes > 0)' | grep -q . &&
	pass "the big file resumed" || echo "note: no data was kept before scancel"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P2"
diff -r "$K" "$T/mod/k/k" >/dev/null && pass "trees identical" || fail "trees differ"
finish
