#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A sharded migration as a Slurm job array, on a one-node cluster started
# for the test (slurm-local.sh):
#   1. a plan of 8 shards, `sbatch --wait --array=0-7%2` of a job running
#      `rdmacp run PLAN --shard auto` (SLURM_ARRAY_TASK_ID/COUNT): every task
#      exits 0; finalize; the trees are identical;
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

S=$T/src/tree
mkdir -p "$S/a/b" "$S/c"
for i in $(seq 1 60); do head -c $((i * 1499)) /dev/urandom >"$S/a/f$i"; done
for i in $(seq 1 20); do echo "$i" >"$S/a/b/g$i"; done
P=$T/tree.plan
expect_rc 0 "plan -a --shards 8" "${CLIENT[@]}" plan -a --shards 8 "$S" "127.0.0.1:data/dst" -o "$P"
job "$T/job.sh" -q run "$P" --shard auto
t0=$(date +%s)
timeout 180 sbatch --wait --array=0-7%2 -o "$T/task-%a.out" "$T/job.sh" >"$T/sbatch.out" 2>&1
rc=$?
echo "    array of 8, 2 at a time: $(($(date +%s) - t0)) s"
[ "$rc" -eq 0 ] && pass "sbatch --wait --array=0-7%2: every task exits 0" ||
	fail "sbatch: exit $rc: $(cat "$T/sbatch.out" "$T"/task-*.out | tail -5 | tr '\n' '|')"
n=0
for i in $(seq 0 7); do [ "$(head -1 "$P.journal.$i" 2>/dev/null | jq -r .shard)" = "$i" ] && n=$((n + 1)); done
[ "$n" -eq 8 ] && pass "8 journals, one per task" || fail "$n journals of 8"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
diff -r "$S" "$T/mod/dst/tree" >/dev/null && pass "trees identical" || fail "trees differ"

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
