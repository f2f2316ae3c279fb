#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The README's "Migrating a tree", run as written against a real daemon:
#   1. the copy (-a -H --partial --skip quick), its client killed with
#      kill -9 while a big file is half-way: nothing under a final name is
#      partial, the big file's data is kept in the partial store
#   0. an earlier run copied the documents (-a)
#   2. the same command again: exit 0; the files already there are
#      skipped, the big file is resumed (resumed_bytes > 0, bytes sent less
#      than its size), everything byte-identical, the hard link one inode
#   3. the check (-r -p --level checksum): exit 0, identical (directories
#      the cut run made have their modes too)
#   4. the source changes: a file removed, one added, one rewritten with its
#      size and mtime kept: the quick check can't see the rewrite (exit 15
#      for the other two), the checksum check names all three
#   5. the cut-over with --skip checksum --delete --max-delete: the new and
#      the rewritten file copied, the removed one deleted, the others
#      skipped; the check says identical again
# Every JSON summary is read with jq.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
BIG=$((256 << 20))
RATE=64M
# Sanitizer builds are slower: a smaller file at a lower rate.
if [[ "${RDMACP_BUILD_DIR:-}" == *asan* ]]; then
	BIG=$((48 << 20))
	RATE=12M
fi

setup_standard
SRC=$T/src/data
mkdir -p "$SRC/docs/old" "$SRC/img"
for i in $(seq 1 40); do
	head -c $((i * 101)) /dev/urandom >"$SRC/docs/f$i"
done
echo "first version" >"$SRC/docs/old/note"
ln "$SRC/docs/f1" "$SRC/img/f1-link"
ln -s ../docs/f2 "$SRC/img/link"
head -c "$BIG" /dev/urandom >"$SRC/img/big.img"
touch -d @1600000000 "$SRC/img/big.img"

# summary FILE KEY: a field of the last summary event.
summary() {
	jq -s -r --arg k "$2" '[.[] | select(.event == "summary")] | last | .[$k]' "$1"
}

check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

COPY=(-a -H --partial --skip quick)

# ---- 0. an earlier run copied the documents ---------------------------------------------
mkdir -p "$T/mod/data"
expect_rc 0 "an earlier run: the documents" "${CLIENT[@]}" -q -a "$SRC/docs" "$HOST:data/data/"

# ---- 1. the copy, cut -----------------------------------------------------------------
"${CLIENT[@]}" -q "${COPY[@]}" --bwlimit $RATE "$SRC" "$HOST:data/" >/dev/null 2>&1 &
c=$!
for _ in $(seq 1 1200); do
	f=$(ls "$T/mod/data/img/.rdmacp-partial/"*.data 2>/dev/null | head -1)
	if [ -n "$f" ] && [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -ge $((BIG / 2)) ]; then
		break
	fi
	sleep 0.05
done
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
[ ! -e "$T/mod/data/img/big.img" ] && pass "cut: no big.img under its name" ||
	fail "cut: big.img exists after the kill"
[ -n "$(ls "$T/mod/data/img/.rdmacp-partial/"*.data 2>/dev/null)" ] &&
	pass "cut: the partial is kept" || fail "cut: no partial kept"
before=$(find "$T/mod/data" -type f ! -path '*/.rdmacp-partial/*' | wc -l)

# ---- 2. the same command again ----------------------------------------------------------
expect_rc 0 "the same command again" "${CLIENT[@]}" --json "${COPY[@]}" "$SRC" "$HOST:data/"
jq -e -s '[.[] | select(.event == "file" and .action == "resumed" and .name == "data/img/big.img"
	and .type == "file" and .resumed_bytes > 0)] | length == 1' "$T/out" >/dev/null &&
	pass "big.img resumed" || fail "no resumed event: $(grep -v '"copied"' "$T/out" | head -5)"
sent=$(summary "$T/out" bytes)
kept=$(summary "$T/out" resumed_bytes)
[ "$kept" -ge $((BIG / 2)) ] && [ "$sent" -lt $((BIG - BIG / 4)) ] &&
	pass "resume sent $sent bytes, kept $kept" || fail "sent $sent, kept $kept of $BIG"
# All but a name -H may link again to the other name of its file.
[ "$before" -ge 41 ] && [ "$(summary "$T/out" skipped)" -ge $((before - 1)) ] &&
	pass "the files already there skipped ($(summary "$T/out" skipped) of $before)" ||
	fail "skipped $(summary "$T/out" skipped), $before were there"
diff -r --no-dereference "$SRC" "$T/mod/data" >/dev/null && pass "byte-identical" ||
	fail "differs: $(diff -r --no-dereference "$SRC" "$T/mod/data" | head -3)"
check_eq "hard link kept" "$(stat -c %i "$T/mod/data/docs/f1")" "$(stat -c %i "$T/mod/data/img/f1-link")"
check_eq "big.img mtime" "$(stat -c %Y "$T/mod/data/img/big.img")" 1600000000
[ -z "$(ls -A "$T/mod/data/img/.rdmacp-partial" 2>/dev/null)" ] &&
	pass "the partial is gone once committed" || fail "partial left: $(ls -A "$T/mod/data/img/.rdmacp-partial")"

# ---- 3. the check -------------------------------------------------------------------------
expect_rc 0 "check -r -p --level checksum" \
	"${CLIENT[@]}" --json check -r -p --level checksum "$SRC" "$HOST:data/data"
check_eq "check: identical" "$(summary "$T/out" identical)" true

# ---- 4. the source changes ----------------------------------------------------------------
rm "$SRC/docs/old/note"
echo new >"$SRC/docs/new"
f7=$SRC/docs/f7
cp -p "$f7" "$T/f7.orig"
head -c "$(stat -c %s "$f7")" /dev/urandom >"$f7"
touch -r "$T/f7.orig" "$f7"
expect_rc 15 "check, quick: differs" "${CLIENT[@]}" check -r "$SRC" "$HOST:data/data"
grep -q '^missing  *docs/new$' "$T/out" && grep -q '^extra  *docs/old/note$' "$T/out" &&
	pass "quick: missing new, extra note" || fail "quick: $(cat "$T/out")"
grep -q 'f7' "$T/out" && fail "quick saw the rewrite (size and mtime kept)" ||
	pass "quick does not see the rewrite"
expect_rc 15 "check, checksum: differs" \
	"${CLIENT[@]}" --json check -r --level checksum "$SRC" "$HOST:data/data"
jq -e -s '[.[] | select(.event == "check" and .name == "docs/f7" and .difference == "differs"
	and (.attributes | index("content")))] | length == 1' "$T/out" >/dev/null &&
	pass "checksum: f7 differs in content" || fail "checksum: $(cat "$T/out")"

# ---- 5. the cut-over -----------------------------------------------------------------------
expect_rc 0 "cut-over with --skip checksum --delete --max-delete 10" \
	"${CLIENT[@]}" --json -a -H --partial --skip checksum --delete --max-delete 10 "$SRC" "$HOST:data/"
jq -r 'select(.event == "file" and .action == "copied" and .type == "file") | .name' "$T/out" |
	sort >"$T/copied"
check_eq "cut-over: copied" "$(tr '\n' ' ' <"$T/copied")" "data/docs/f7 data/docs/new "
jq -r 'select(.event == "file" and .action == "deleted") | .name' "$T/out" >"$T/deleted"
check_eq "cut-over: deleted" "$(tr '\n' ' ' <"$T/deleted")" "data/docs/old/note "
check_eq "cut-over: summary deleted" "$(summary "$T/out" deleted)" 1
check_eq "cut-over: exit in the summary" "$(summary "$T/out" exit)" 0
expect_rc 0 "check after the cut-over" \
	"${CLIENT[@]}" check -r -p --level checksum "$SRC" "$HOST:data/data"

finish
