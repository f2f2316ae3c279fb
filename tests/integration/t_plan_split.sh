#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Split files (rdmacp plan --split-size, run, finalize), against real daemons:
#   1. plan --split-size 4M --shards 3 of a tree with a 22 MB file (and a
#      sparse one, and small files): each big file is one entry ("ranges")
#      and its ranges right after it, contiguous, adding up to its size,
#      spread over the shards; a small file is not split;
#   2. finalize before any shard ran: exit 9, nothing at the destination;
#   3. every shard but one runs; finalize exits 9 and changes nothing (no
#      final name, the parts kept); report --json has split events with the
#      ranges done; the last shard runs: finalize assembles, exit 0, the
#      trees are identical (cmp), modes and mtimes kept, the staging
#      directory gone; report --json says complete;
#   4. a range's shard killed (kill -9) mid-copy, run again: it resumes the
#      range (--partial), finalize identical;
#   5. a part corrupted at the destination between run and finalize: finalize
#      exits 21, names the bytes that do not match, the final name never
#      appears, the parts are kept; a part removed: 21, "missing"; the ranges
#      are marked failed in their shards' journals, the shards run again send
#      them, finalize assembles the file identical; finalize --delete
#      --max-delete 0 of another plan into the same place while a split plan's
#      parts wait there: exit 0, the parts untouched; that plan then finishes;
#   6. hostile ASSEMBLE requests (rawclient.py): a part name escaping the
#      module, a staging directory that is a symlink out of it, parts that do
#      not add up, too many parts, a size over the module's max file size:
#      refused (PROTOCOL, BAD_PATH, PERMISSION), a wrong digest ASSEMBLY, nothing
#      written outside; a client without the capability is refused; the right
#      request assembles; against a daemon without the capability
#      (RDMACP_TEST_CAPS_OFF) finalize exits 12 and says it is too old;
#   7. hostile ASSEMBLE SEED requests (--delta's old copies of parts): from a
#      client without the capability, with DISCARD too, with parts that
#      overlap: PROTOCOL; a name that is a symlink (leaf or directory) out
#      of the module: nothing read or made (ASSEMBLED); the right one makes
#      each part from its range of the file, 0600 in a 0700 staging
#      directory, and leaves a part there already as it is.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard "max file size = 64M"
HOST=127.0.0.1
BG_PIDS=()
cleanup_split() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_split EXIT

S=$T/src/tree
mkdir -p "$S/a/b" "$S/c"
head -c 22000000 /dev/urandom >"$S/a/b/big"
truncate -s 9M "$S/c/sparse"
printf 'data in the middle' | dd of="$S/c/sparse" bs=1 seek=5000000 conv=notrunc status=none
for i in $(seq 1 12); do head -c $((i * 1000)) /dev/urandom >"$S/c/f$i"; done
chmod 0640 "$S/a/b/big"
touch -d '2021-03-04 05:06:07' "$S/a/b/big"
P=$T/plans/tree.plan
mkdir -p "$T/plans"
D=$T/mod/dst/tree
STAGE_GLOB="$T/mod/dst/.rdmacp-split.*"

# ---- 1. plan --------------------------------------------------------------------------
expect_rc 0 "plan -a --split-size 4M --shards 3" "${CLIENT[@]}" plan --json -a --shards 3 --split-size 4M "$S" "$HOST:data/dst" -o "$P"
[ "$(jq -r 'select(.event == "planned") | .split' "$T/out")" = 2 ] && pass "plan --json: 2 files split" ||
	fail "planned event: $(cat "$T/out")"
tail -n +2 "$P" >"$T/entries"
[ "$(jq -r 'select(.name == "tree/a/b/big" and .type == "file") | .ranges' "$T/entries")" = 6 ] &&
	pass "the 22 MB file: one entry of 6 ranges" || fail "big entry: $(grep '"tree/a/b/big"' "$T/entries" | head -2)"
jq -s -e '[.[] | select(.type == "range" and .name == "tree/a/b/big")] as $r |
	($r | length) == 6 and ($r | map(.size) | add) == 22000000 and
	([range(0; 6)] == ($r | map(.range))) and
	([$r[] | .offset] == [0, 4194304, 8388608, 12582912, 16777216, 20971520])' "$T/entries" >/dev/null &&
	pass "its ranges: numbered, contiguous, adding up to 22000000" || fail "ranges: $(grep '"range"' "$T/entries" | head -3)"
[ "$(jq -r 'select(.type == "range" and .name == "tree/a/b/big") | .shard' "$T/entries" | sort -u | wc -l)" -eq 3 ] &&
	pass "the ranges are spread over the 3 shards" || fail "range shards: $(jq -r 'select(.type == "range") | .shard' "$T/entries" | tr '\n' ' ')"
[ "$(jq -r 'select(.name == "tree/c/sparse" and .type == "file") | .ranges' "$T/entries")" = 3 ] &&
	pass "the 9 MiB sparse file: 3 ranges" || fail "sparse: $(grep sparse "$T/entries" | head -1)"
[ "$(jq -r 'select(.name == "tree/c/f12") | "\(.type) \(.ranges)"' "$T/entries")" = "file null" ] &&
	pass "a small file is not split" || fail "f12 split?"

# ---- 2. finalize before anything ---------------------------------------------------------
expect_rc 9 "finalize before any shard ran" "${CLIENT[@]}" finalize "$P"
[ ! -e "$D" ] && pass "nothing made at the destination" || fail "destination touched: $(ls -R "$T/mod" | head)"

# ---- 3. all shards but one, finalize refuses; then the last -------------------------------
# The shard holding the big file's range 0 goes last.
last=$(jq -r 'select(.type == "range" and .name == "tree/a/b/big" and .range == 0) | .shard' "$T/entries")
for i in 0 1 2; do
	[ "$i" = "$last" ] && continue
	expect_rc 0 "shard $i" "${CLIENT[@]}" -q run "$P" --shard "$i/3"
done
ranges_done=$(cat "$P".journal.* | jq -r 'select(.range != null and .state == "copied") | .xxh128' | grep -cE '^[0-9a-f]{32}$')
ranges_all=$(cat "$P".journal.* | jq -r 'select(.range != null and .state == "copied") | .name' | wc -l)
[ "$ranges_done" -ge 1 ] && [ "$ranges_done" = "$ranges_all" ] &&
	pass "journals: each range done ($ranges_done) with its xxh128" || fail "journal range lines: $ranges_done of $ranges_all: $(grep range "$P".journal.* | head -2)"
before=$(find "$T/mod" -printf '%p %s\n' | sort)
expect_rc 9 "finalize with shard $last's ranges missing" "${CLIENT[@]}" finalize "$P"
[ "$(find "$T/mod" -printf '%p %s\n' | sort)" = "$before" ] && [ ! -e "$D/a/b/big" ] &&
	pass "finalize changed nothing: no final name, the parts kept" || fail "finalize changed things"
"${CLIENT[@]}" report "$P" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "split" and .name == "tree/a/b/big") | "\(.ranges) \(.assembled)"' "$T/rep.json")" = "6 false" ] &&
	pass "report --json: the split file, 6 ranges, not assembled" || fail "split event: $(grep split "$T/rep.json")"
expect_rc 0 "shard $last" "${CLIENT[@]}" -q run "$P" --shard "$last/3"
expect_rc 0 "finalize assembles" "${CLIENT[@]}" finalize "$P"
cmp "$S/a/b/big" "$D/a/b/big" && pass "the big file: identical (cmp)" || fail "big differs"
cmp "$S/c/sparse" "$D/c/sparse" && pass "the sparse file: identical" || fail "sparse differs"
diff -r "$S" "$D" >/dev/null && pass "trees identical" || fail "trees differ: $(diff -r "$S" "$D" 2>&1 | head -3)"
[ "$(stat -c '%a %Y' "$D/a/b/big")" = "$(stat -c '%a %Y' "$S/a/b/big")" ] &&
	pass "mode and mtime kept ($(stat -c '%a %Y' "$D/a/b/big"))" || fail "meta: $(stat -c '%a %Y' "$D/a/b/big")"
[ "$(stat -c %Y "$D/a/b")" = "$(stat -c %Y "$S/a/b")" ] && pass "its directory's mtime set after the assembly" ||
	fail "dir mtime $(stat -c %Y "$D/a/b") vs $(stat -c %Y "$S/a/b")"
! ls -d $STAGE_GLOB >/dev/null 2>&1 && pass "the staging directory is gone" || fail "staging left: $(ls -d $STAGE_GLOB)"
"${CLIENT[@]}" report "$P" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "report") | "\(.complete) \(.pending) \(.failed)"' "$T/rep.json")" = "true 0 0" ] &&
	pass "report --json: complete" || fail "report: $(grep '"report"' "$T/rep.json")"
[ "$(jq -r 'select(.event == "split") | .assembled' "$T/rep.json" | sort -u)" = "true" ] &&
	pass "report --json: both split files assembled" || fail "split events: $(grep split "$T/rep.json")"
expect_rc 0 "finalize again: nothing to do" "${CLIENT[@]}" finalize "$P"

# ---- 4. a range's shard killed mid-copy, resumed ---------------------------------------------
mkdir -p "$T/src/k"
head -c $((40 << 20)) /dev/urandom >"$T/src/k/huge"
P2=$T/plans/k.plan
expect_rc 0 "plan: one 40 MiB file in 2 ranges, 2 shards" "${CLIENT[@]}" plan -r --shards 2 --split-size 20M "$T/src/k" "$HOST:data/k" -o "$P2"
"${CLIENT[@]}" -q run "$P2" --shard 0/2 --bwlimit 8M >"$T/kill.out" 2>&1 &
kp=$!
BG_PIDS+=("$kp")
part=
for _ in $(seq 1 100); do
	part=$(find "$T/mod/k" -path '*rdmacp-partial*' -type f -size +3M 2>/dev/null | head -1)
	[ -n "$part" ] && break
	sleep 0.1
done
kill -KILL "$kp" 2>/dev/null
wait "$kp" 2>/dev/null
[ -n "$part" ] && pass "shard 0 killed (kill -9) with a partial range kept" || fail "no partial seen before the kill"
expect_rc 0 "shard 1" "${CLIENT[@]}" -q run "$P2" --shard 1/2
expect_rc 9 "finalize with range 0 cut" "${CLIENT[@]}" finalize "$P2"
expect_rc 0 "shard 0 again" "${CLIENT[@]}" run "$P2" --shard 0/2
grep -q '"state":"resumed"' "$P2.journal.0" && pass "the range resumed (journal says resumed)" ||
	fail "not resumed: $(tail -3 "$P2.journal.0")"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P2"
cmp "$T/src/k/huge" "$T/mod/k/k/huge" && pass "resumed and assembled: identical" || fail "huge differs"

# ---- 5. a part corrupted, a part missing -------------------------------------------------------
mkdir -p "$T/src/c"
head -c $((12 << 20)) /dev/urandom >"$T/src/c/file"
P3=$T/plans/c.plan
expect_rc 0 "plan: a 12 MiB file in 3 ranges" "${CLIENT[@]}" plan -r --shards 2 --split-size 4M "$T/src/c" "$HOST:data/c" -o "$P3"
expect_rc 0 "shard 0" "${CLIENT[@]}" -q run "$P3" --shard 0/2
expect_rc 0 "shard 1" "${CLIENT[@]}" -q run "$P3" --shard 1/2
cstage=$(ls -d "$T"/mod/c/.rdmacp-split.*)
printf 'X' | dd of="$(ls "$cstage"/*.1)" bs=1 seek=1000 conv=notrunc status=none
expect_rc 21 "finalize with a part corrupted at the destination" "${CLIENT[@]}" finalize "$P3"
grep -q "do not match the digest" "$T/err" && pass "says which bytes do not match: $(grep -o 'bytes [0-9.]* (part [^)]*)' "$T/err")" ||
	fail "message: $(cat "$T/err")"
grep -q "refused: assembling 'c/file'" "$T/d.log" && pass "the daemon logged the refusal" || fail "daemon log"
[ ! -e "$T/mod/c/c/file" ] && pass "the final name never appeared" || fail "c/file exists"
[ "$(ls "$cstage" | wc -l)" -eq 3 ] && pass "the 3 parts are kept" || fail "parts: $(ls "$cstage")"
"${CLIENT[@]}" report "$P3" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "entry" and .type == "file") | "\(.state) \(.code)"' "$T/rep.json")" = "failed ASSEMBLY" ] &&
	pass "report: the file failed, ASSEMBLY" || fail "report entry: $(grep '"file"' "$T/rep.json")"
grep -q '"range":1,.*"code":"ASSEMBLY"' "$P3".journal.* &&
	pass "its ranges are marked failed in their shards' journals" || fail "not marked: $(grep -h range "$P3".journal.* | tail -3)"
expect_rc 9 "finalize again: the ranges are to send again" "${CLIENT[@]}" finalize "$P3"
expect_rc 0 "shard 0 again" "${CLIENT[@]}" -q run "$P3" --shard 0/2
expect_rc 0 "shard 1 again" "${CLIENT[@]}" -q run "$P3" --shard 1/2
rm "$(ls "$cstage"/*.2)"
expect_rc 21 "finalize with a part removed" "${CLIENT[@]}" finalize "$P3"
grep -q "is missing" "$T/err" && pass "says the part is missing" || fail "message: $(cat "$T/err")"
[ ! -e "$T/mod/c/c/file" ] && pass "still no final name" || fail "c/file exists"
expect_rc 0 "shard 0 again" "${CLIENT[@]}" -q run "$P3" --shard 0/2
expect_rc 0 "shard 1 again" "${CLIENT[@]}" -q run "$P3" --shard 1/2
expect_rc 0 "finalize after the shards sent the ranges again" "${CLIENT[@]}" finalize "$P3"
cmp "$T/src/c/file" "$T/mod/c/c/file" && pass "assembled: identical" || fail "c/file differs or is missing"
# finalize --delete of another plan into the same place while this one's parts wait.
P5=$T/plans/c5.plan
P6=$T/plans/c6.plan
expect_rc 0 "plan c5 (split)" "${CLIENT[@]}" plan -r --shards 2 --split-size 4M "$T/src/c" "$HOST:data/c" -o "$P5"
expect_rc 0 "c5 shard 0 only" "${CLIENT[@]}" -q run "$P5" --shard 0/2
stage5=$(ls -d "$T"/mod/c/.rdmacp-split.*)
parts5=$(ls "$stage5" | wc -l)
expect_rc 0 "plan c6 (no split)" "${CLIENT[@]}" plan -r "$T/src/c" "$HOST:data/c" -o "$P6"
expect_rc 0 "c6 run" "${CLIENT[@]}" -q run "$P6" --shard 0/1
expect_rc 0 "c6 finalize --delete --max-delete 0" "${CLIENT[@]}" finalize --delete --max-delete 0 "$P6"
[ -d "$stage5" ] && [ "$(ls "$stage5" | wc -l)" = "$parts5" ] && [ "$parts5" -ge 1 ] &&
	pass "--delete neither removed nor counted the waiting parts ($parts5)" || fail "staging: $(ls -la "$stage5" 2>&1)"
expect_rc 0 "c5 shard 1" "${CLIENT[@]}" -q run "$P5" --shard 1/2
expect_rc 0 "c5 finalize --delete" "${CLIENT[@]}" finalize --delete "$P5"
cmp "$T/src/c/file" "$T/mod/c/c/file" && [ ! -e "$stage5" ] && pass "c5 assembled, its staging directory gone" ||
	fail "c5: $(ls -la "$T/mod/c")"

# ---- 6. hostile requests, an old daemon -----------------------------------------------------
mkdir -p "$T/mod/h/.st" "$T/outside"
head -c 100 /dev/urandom >"$T/mod/h/.st/p0"
head -c 100 /dev/urandom >"$T/outside/secret"
ln -s "$T/outside" "$T/mod/h/.link"
CAPS=0x800001
asm error:PROTOCOL $CAPS data/h out ../../outside 100 1 secret:0:100 &&
	pass "a staging directory escaping the module: refused (PROTOCOL)" || fail "escape: $(cat "$T/rc.out")"
asm error:BAD_PATH $CAPS data/h out .link 100 1 secret:0:100 &&
	pass "a staging directory that is a symlink out of the module: refused (BAD_PATH)" || fail "symlink: $(cat "$T/rc.out")"
asm error:PROTOCOL $CAPS data/h ../out .st 100 1 p0:0:100 &&
	pass "a name escaping the module: refused" || fail "name: $(cat "$T/rc.out")"
asm error:PROTOCOL $CAPS data/h out .st 100 1 ../p0:0:100 &&
	pass "a part name with a slash: refused" || fail "part name: $(cat "$T/rc.out")"
asm error:PROTOCOL $CAPS data/h out .st 220 2 p0:0:100 p0:120:100 &&
	pass "ranges with a gap: refused" || fail "gap: $(cat "$T/rc.out")"
asm error:PROTOCOL $CAPS data/h out .st 150 1 p0:0:100 &&
	pass "ranges that do not add up to the size: refused" || fail "sum: $(cat "$T/rc.out")"
asm error:PROTOCOL $CAPS data/h out .st 100 1025 p0:0:100 &&
	pass "a count over 1024 parts: refused" || fail "count: $(cat "$T/rc.out")"
asm error:PERMISSION $CAPS data/h out .st $((100 << 20)) 1 p0:0:$((100 << 20)) &&
	grep -q "max file size" "$T/rc.out" && pass "a size over the module's max file size: refused" ||
	fail "size: $(cat "$T/rc.out")"
asm error:PROTOCOL 0x1 data/h out .st 100 1 p0:0:100 && grep -q "capability" "$T/rc.out" &&
	pass "from a client without the capability: refused" || fail "caps: $(cat "$T/rc.out")"
asm error:ASSEMBLY $CAPS data/h out .st 100 1 p0:0:100 &&
	pass "a part whose digest does not match: ASSEMBLY" || fail "digest: $(cat "$T/rc.out")"
[ ! -e "$T/mod/h/out" ] && pass "no file left under the name" || fail "h/out exists"
cp "$T/mod/h/.st/p0" "$T/p0.copy"
asm frame:ASSEMBLED $CAPS data/h out .st 100 1 "p0:0:100:$T/mod/h/.st/p0" && cmp "$T/mod/h/out" "$T/p0.copy" &&
	pass "the same by hand with the right digest: assembled" || fail "good request: $(cat "$T/rc.out")"
[ "$(ls "$T/outside")" = secret ] && pass "nothing written outside the module" || fail "outside: $(ls -la "$T/outside")"
# ---- 7. hostile SEED requests ------------------------------------------------------------
SEED=0x200000800001
ASM_FLAGS=4 asm error:PROTOCOL $CAPS data/h out .sd 100 1 s0:0:100 && grep -q "capability" "$T/rc.out" &&
	pass "SEED from a client without the capability: refused" || fail "seed caps: $(cat "$T/rc.out")"
ASM_FLAGS=6 asm error:PROTOCOL $SEED data/h out .sd 100 1 s0:0:100 &&
	pass "SEED with DISCARD: refused" || fail "seed+discard: $(cat "$T/rc.out")"
ASM_FLAGS=4 asm error:PROTOCOL $SEED data/h out .sd 100 2 s0:0:60 s1:50:50 &&
	pass "SEED with parts that overlap: refused" || fail "seed overlap: $(cat "$T/rc.out")"
ASM_FLAGS=4 asm error:PROTOCOL $SEED data/h out .sd 100 1 s0:60:50 &&
	pass "SEED with a part past the size: refused" || fail "seed past: $(cat "$T/rc.out")"
ln -s "$T/outside/secret" "$T/mod/h/lnk"
ASM_FLAGS=4 asm frame:ASSEMBLED $SEED data/h lnk .sd 100 1 s0:0:100 && [ ! -e "$T/mod/h/.sd/s0" ] &&
	pass "SEED of a symlink: nothing read, nothing made" || fail "seed symlink: $(cat "$T/rc.out"; ls -la "$T/mod/h/.sd")"
ASM_FLAGS=4 asm frame:ASSEMBLED $SEED data/h .link/secret .sd 100 1 s0:0:100 && [ ! -e "$T/mod/h/.sd/s0" ] &&
	pass "SEED through a symlinked directory: nothing read, nothing made" ||
	fail "seed through link: $(cat "$T/rc.out"; ls -la "$T/mod/h/.sd")"
ASM_FLAGS=4 asm frame:ASSEMBLED $SEED data/h out .sd 100 2 s0:0:40 s1:60:40 &&
	cmp "$T/mod/h/.sd/s0" <(head -c 40 "$T/mod/h/out") &&
	cmp "$T/mod/h/.sd/s1" <(tail -c 40 "$T/mod/h/out") &&
	[ "$(stat -c %a "$T/mod/h/.sd/s0") $(stat -c %a "$T/mod/h/.sd")" = "600 700" ] &&
	pass "SEED: each part made from its range, 0600 in a 0700 directory" ||
	fail "seed: $(cat "$T/rc.out"; ls -la "$T/mod/h/.sd")"
echo old >"$T/mod/h/.sd/s0"
ASM_FLAGS=4 asm frame:ASSEMBLED $SEED data/h out .sd 100 1 s0:0:40 &&
	[ "$(cat "$T/mod/h/.sd/s0")" = old ] && pass "SEED leaves a part there already" ||
	fail "seed over a part: $(cat "$T/rc.out")"
[ "$(ls "$T/outside")" = secret ] && pass "SEED: nothing written outside the module" || fail "outside: $(ls -la "$T/outside")"
# A daemon from before ASSEMBLE.
stop_daemon "$DAEMON_PID"
RDMACP_TEST_CAPS_OFF=0x800000 start_daemon "$T/d.conf" "$T/d2.log" "$PORT"
expect_rc 0 "plan for the old daemon" "${CLIENT[@]}" plan -r --split-size 4M "$T/src/c" "$HOST:data/o" -o "$T/plans/o.plan"
expect_rc 0 "run against the old daemon (ranges are plain pushes)" "${CLIENT[@]}" -q run "$T/plans/o.plan" --shard 0/1
expect_rc 12 "finalize against a daemon without ASSEMBLE" "${CLIENT[@]}" finalize "$T/plans/o.plan"
grep -q "too old for split files" "$T/err" && pass "says the daemon is too old" || fail "old daemon: $(cat "$T/err")"
[ ! -e "$T/mod/o/c/file" ] && pass "nothing under the final name" || fail "o/c/file exists"
finish
