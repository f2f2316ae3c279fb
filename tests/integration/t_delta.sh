#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --delta re-sync (DELTA, capability 0x40000), real daemons:
#   1. push over a file of the same size with 1 % of its chunks changed:
#      identical, about 1 % crossed (data_bytes), the rest skipped_bytes, in
#      the file event and the summary; the old file was replaced, not written
#      in place (a hard link to it keeps the old contents)
#   2. the same pulled
#   3. a destination of another size: a full copy, nothing skipped
#   4. nothing changed: nothing sent, identical
#   5. a changed last (short) chunk, and a sparse source
#   6. an old daemon (no 0x40000 in HELLO): --delta refused (exit 12), no OPEN
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))
SIZE=$((200 * MIB))

command -v jq >/dev/null || skip "jq not installed"
mkdir -p "$T/src" "$T/pull"
setup_standard

json_file() { jq -r "select(.event == \"file\" and .name == \"$1\") | .$2" "$T/out"; }
json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# change FILE MIB...: 4 KiB of new random bytes at each MiB offset (+ 1000 bytes).
change() {
	local f=$1 m
	shift
	for m in "$@"; do
		dd if=/dev/urandom of="$f" bs=1 count=4096 seek=$((m * MIB + 1000)) conv=notrunc \
			status=none || die "dd $f"
	done
}

# sent_about DESC NAME CHUNKS: CHUNKS chunks of 1 MiB crossed, the rest skipped, in the
# file event and the summary.
sent_about() {
	local b s
	b=$(json_file "$2" data_bytes)
	s=$(json_file "$2" skipped_bytes)
	[ "$b" -eq $(($3 * MIB)) ] && pass "$1: $b bytes sent ($3 chunks)" ||
		fail "$1: data_bytes $b, wanted $(($3 * MIB))"
	[ $((b + s)) -eq "$SIZE" ] && pass "$1: skipped_bytes $s is the rest" ||
		fail "$1: data_bytes $b + skipped_bytes $s != $SIZE"
	[ "$(json_sum skipped_bytes)" = "$s" ] && [ "$(json_sum data_bytes)" = "$b" ] &&
		pass "$1: the summary says the same" ||
		fail "$1: summary data_bytes $(json_sum data_bytes) skipped_bytes $(json_sum skipped_bytes)"
}

# ---- 1. push, 2 of 200 chunks changed ----------------------------------------------------
head -c $SIZE /dev/urandom >"$T/src/img" || die "random"
cp "$T/src/img" "$T/mod/img"
ln "$T/mod/img" "$T/old-link"
cp "$T/src/img" "$T/old-copy"
change "$T/src/img" 17 150
expect_rc 0 "push --delta" "${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src/img" "$HOST:data/"
cmp -s "$T/src/img" "$T/mod/img" && pass "push: identical" || fail "push: differs"
sent_about "push" img 2
cmp -s "$T/old-link" "$T/old-copy" && pass "push: the old file was not written in place" ||
	fail "push: the old file changed under its other name"

# ---- 2. pull, 3 chunks changed -------------------------------------------------------------
cp "$T/src/img" "$T/pull/img"
change "$T/mod/img" 0 99 199
expect_rc 0 "pull --delta" "${CLIENT[@]}" --json --chunk-size 1M --delta "$HOST:data/img" \
	"$T/pull/"
cmp -s "$T/mod/img" "$T/pull/img" && pass "pull: identical" || fail "pull: differs"
sent_about "pull" img 3

# ---- 3. another size: a full copy --------------------------------------------------------
head -c $((SIZE - 4096)) "$T/src/img" >"$T/mod/img"
expect_rc 0 "size changed" "${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src/img" \
	"$HOST:data/"
cmp -s "$T/src/img" "$T/mod/img" && pass "size changed: identical" || fail "size changed: differs"
[ "$(json_file img data_bytes)" = "$SIZE" ] && [ "$(json_file img skipped_bytes)" = 0 ] &&
	pass "size changed: all of it sent" ||
	fail "size changed: data_bytes $(json_file img data_bytes) skipped $(json_file img skipped_bytes)"

# ---- 4. nothing changed ----------------------------------------------------------------------
expect_rc 0 "unchanged" "${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src/img" "$HOST:data/"
cmp -s "$T/src/img" "$T/mod/img" && pass "unchanged: identical" || fail "unchanged: differs"
sent_about "unchanged" img 0

# ---- 5. a short last chunk, and a sparse source --------------------------------------------
head -c $((5 * MIB + 777)) /dev/urandom >"$T/src/tail"
cp "$T/src/tail" "$T/mod/tail"
dd if=/dev/urandom of="$T/src/tail" bs=1 count=10 seek=$((5 * MIB + 700)) conv=notrunc \
	status=none
truncate -s $((64 * MIB)) "$T/src/sparse"
dd if=/dev/urandom of="$T/src/sparse" bs=1M count=2 seek=10 conv=notrunc status=none
cp "$T/src/sparse" "$T/mod/sparse"
change "$T/src/sparse" 11
expect_rc 0 "tail and sparse" "${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src/tail" \
	"$T/src/sparse" "$HOST:data/"
cmp -s "$T/src/tail" "$T/mod/tail" && pass "tail: identical" || fail "tail: differs"
[ "$(json_file tail data_bytes)" = 777 ] && [ "$(json_file tail skipped_bytes)" = $((5 * MIB)) ] &&
	pass "tail: only the short last chunk sent" ||
	fail "tail: data_bytes $(json_file tail data_bytes) skipped $(json_file tail skipped_bytes)"
cmp -s "$T/src/sparse" "$T/mod/sparse" && pass "sparse: identical" || fail "sparse: differs"
[ "$(json_file sparse data_bytes)" = "$MIB" ] && [ "$(json_file sparse skipped_bytes)" = "$MIB" ] &&
	[ "$(json_file sparse zero_bytes)" = $((62 * MIB)) ] &&
	pass "sparse: one chunk sent, one unchanged, the rest zeros" ||
	fail "sparse: data $(json_file sparse data_bytes) skipped $(json_file sparse skipped_bytes) zeros $(json_file sparse zero_bytes)"

# ---- 6. an old daemon ------------------------------------------------------------------------
old_daemon_refuses 0x3ffff --delta "old daemon, push --delta" --delta "$T/src/img" "$HOST:data/"
old_daemon_refuses 0x3ffff --delta "old daemon, pull --delta" --delta "$HOST:data/img" "$T/pull/"

[ "$FAILS" -eq 0 ] || exit 1
echo "all delta tests passed"
