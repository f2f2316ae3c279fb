#!/bin/bash
# SPDX-License-Identifier: MIT
#
# zstd plans (rdmacp plan -o PLAN.zst, --compress zstd|none), against a real
# daemon:
#   1. plan -o X.zst writes a zstd frame (its magic; zstdcat reads back the
#      same lines as a plain plan of the tree would have); --compress none
#      writes plain whatever the name, --compress zstd compresses whatever it;
#   2. 3 shards of a zstd plan run at once, finalize exits 0, trees identical;
#      the journals are plain NDJSON next to the plan (X.zst.journal.I);
#      report --json says complete;
#   3. bad input: the plan cut short inside its zstd frame: exit 19, says the
#      stream is cut short and names the line it reached; one byte flipped:
#      exit 19 (corrupt stream or digest); an entry edited by hand and
#      compressed again: the digest is still checked (19); trailing bytes after
#      the frame: 19; a line longer than 64 KiB once decompressed: 19, no
#      matter how small it compresses; a frame asking for a 1 GiB window: 19.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
command -v zstd >/dev/null || skip "the zstd tool is not installed (test input is made with it)"
setup_standard
HOST=127.0.0.1
BG_PIDS=()
cleanup_zstd() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_zstd EXIT

S=$T/src/tree
mkdir -p "$S/a/b" "$S/c"
for i in $(seq 1 60); do head -c $((i * 1531)) /dev/urandom >"$S/a/f$i"; done
for i in $(seq 1 20); do echo "small $i" >"$S/c/s$i"; done
head -c 3000000 /dev/urandom >"$S/a/b/big"
ln -s ../a/f1 "$S/c/sym"
mkdir -p "$T/plans"
P=$T/plans/tree.plan.zst
NENT=$(find "$S" -printf . | wc -c)
is_zstd() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' ')" = "28b52ffd" ]; }

# ---- 1. writing --------------------------------------------------------------------------
expect_rc 0 "plan -a --shards 3 -o tree.plan.zst" "${CLIENT[@]}" plan -a --shards 3 "$S" "$HOST:data/dst" -o "$P"
is_zstd "$P" && pass "PLAN.zst is a zstd frame" || fail "not zstd: $(head -c 40 "$P" | od -c | head -2)"
[ "$(zstdcat "$P" | head -1 | jq -r '"\(.shards) \(.entries)"')" = "3 $NENT" ] &&
	pass "zstdcat: header with 3 shards, $NENT entries" || fail "header: $(zstdcat "$P" | head -1)"
[ "$(zstdcat "$P" | tail -n +2 | wc -l)" -eq "$NENT" ] && pass "zstdcat: one line per entry" || fail "lines"
expect_rc 0 "--compress none -o plain.zst" "${CLIENT[@]}" plan -a --compress none "$S" "$HOST:data/x" -o "$T/plans/plain.zst"
! is_zstd "$T/plans/plain.zst" && head -1 "$T/plans/plain.zst" | jq -e .rdmacp_plan >/dev/null &&
	pass "--compress none: plain NDJSON despite the name" || fail "plain.zst: $(head -c 40 "$T/plans/plain.zst" | od -c | head -2)"
expect_rc 0 "--compress zstd -o named.plan" "${CLIENT[@]}" plan -a --compress zstd "$S" "$HOST:data/x" -o "$T/plans/named.plan"
is_zstd "$T/plans/named.plan" && pass "--compress zstd: zstd whatever the name" || fail "named.plan not zstd"
expect_rc 1 "--compress lz4 refused" "${CLIENT[@]}" plan -a --compress lz4 "$S" "$HOST:data/x" -o "$T/plans/x"
expect_rc 0 "report of a plain plan still reads" "${CLIENT[@]}" report "$T/plans/plain.zst"

# ---- 2. shards of a zstd plan ------------------------------------------------------------
pids=()
for i in 0 1 2; do
	"${CLIENT[@]}" -q run "$P" --shard "$i/3" >"$T/r$i.out" 2>"$T/r$i.err" &
	pids[$i]=$!
	BG_PIDS+=("${pids[$i]}")
done
bad=0
for i in 0 1 2; do
	wait "${pids[$i]}" || { bad=$((bad + 1)); echo "    shard $i: $(tail -3 "$T/r$i.err" | tr '\n' '|')"; }
done
BG_PIDS=()
[ "$bad" -eq 0 ] && pass "3 shards of the zstd plan at once: all exit 0" || fail "$bad shards failed"
jplain=0
for i in 0 1 2; do
	[ -f "$P.journal.$i" ] && ! is_zstd "$P.journal.$i" && head -1 "$P.journal.$i" | jq -e .rdmacp_journal >/dev/null &&
		jplain=$((jplain + 1))
done
[ "$jplain" -eq 3 ] && pass "journals plain NDJSON next to the plan (tree.plan.zst.journal.I)" || fail "journals: $(ls "$T/plans")"
expect_rc 0 "finalize the zstd plan" "${CLIENT[@]}" finalize "$P"
diff -r --no-dereference "$S" "$T/mod/dst/tree" >/dev/null && pass "trees identical" ||
	fail "trees differ: $(diff -r --no-dereference "$S" "$T/mod/dst/tree" 2>&1 | head -3)"
"${CLIENT[@]}" report "$P" --json >"$T/rep.json"
[ "$(jq -r 'select(.event == "report") | "\(.complete) \(.copied + .skipped) \(.pending)"' "$T/rep.json")" = "true $NENT 0" ] &&
	pass "report --json of the zstd plan: complete, $NENT copied" || fail "report: $(grep report "$T/rep.json")"

# ---- 3. bad input ------------------------------------------------------------------------
# A plan big enough for several zstd blocks (128 KiB of text each), so a cut lands after some lines.
B=$T/src/many
mkdir -p "$B"
(cd "$B" && for i in $(seq 1 3000); do : >"file-with-a-rather-long-name-to-fill-the-plan-$i"; done)
BP=$T/plans/many.plan.zst
expect_rc 0 "plan of 3000 names, zstd" "${CLIENT[@]}" plan -r --shards 2 "$B" "$HOST:data/m" -o "$BP"
size=$(stat -c %s "$BP")
head -c $((size * 2 / 3)) "$BP" >"$T/plans/cut.zst"
expect_rc 19 "a zstd plan cut short" "${CLIENT[@]}" report "$T/plans/cut.zst"
grep -Eq 'cut\.zst:[0-9]+: the zstd stream ends inside a frame' "$T/err" &&
	pass "cut short: says so and names the line ($(grep -o 'cut.zst:[0-9]*' "$T/err"))" || fail "cut message: $(cat "$T/err")"
line=$(grep -o 'cut\.zst:[0-9]*' "$T/err" | cut -d: -f2)
[ -n "$line" ] && [ "$line" -gt 1 ] && pass "the line named is past the header ($line)" || fail "line named: '$line'"
expect_rc 19 "run of a cut zstd plan" "${CLIENT[@]}" run "$T/plans/cut.zst" --shard 0/2
python3 - "$BP" "$T/plans/flip.zst" <<'EOF'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[len(d) // 2] ^= 0x5a
open(sys.argv[2], 'wb').write(d)
EOF
expect_rc 19 "a zstd plan with a byte flipped" "${CLIENT[@]}" report "$T/plans/flip.zst"
grep -Eq 'flip\.zst(:[0-9]+)?: ' "$T/err" && pass "flipped byte: error names the plan: $(head -1 "$T/err")" || fail "flip: $(cat "$T/err")"
zstdcat "$BP" | sed '5s/"size":0/"size":1/' | zstd -q >"$T/plans/edited.zst"
expect_rc 19 "an entry edited by hand, compressed again" "${CLIENT[@]}" report "$T/plans/edited.zst"
grep -q "digest does not match" "$T/err" && pass "edited: the digest is checked through zstd" || fail "edited: $(cat "$T/err")"
{ cat "$BP"; printf 'garbage'; } >"$T/plans/trail.zst"
expect_rc 19 "bytes after the zstd frame" "${CLIENT[@]}" report "$T/plans/trail.zst"
{
	zstdcat "$BP" | head -1
	python3 -c 'print("{\"n\":1,\"pad\":\"" + "a" * 200000 + "\"}")'
} | zstd -q >"$T/plans/long.zst"
[ "$(stat -c %s "$T/plans/long.zst")" -lt 4096 ] || fail "long.zst is not small"
expect_rc 19 "a 200 KB line in a tiny zstd plan" "${CLIENT[@]}" report "$T/plans/long.zst"
grep -q "long.zst:2: a line longer than 64 KiB" "$T/err" && pass "the decompressed line is capped (line 2 named)" ||
	fail "long: $(cat "$T/err")"
head -c $((64 << 20)) /dev/zero | zstd -q --long=30 -o "$T/plans/window.zst" 2>/dev/null
expect_rc 19 "a frame that asks for a 1 GiB window" "${CLIENT[@]}" report "$T/plans/window.zst"
grep -q "zstd stream is corrupt" "$T/err" && pass "huge window refused: $(head -1 "$T/err")" || fail "window: $(cat "$T/err")"
finish
