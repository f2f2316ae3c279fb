#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Hard links (-H) through a relay chain (issue 36): rdmacp -r -a -H SRC
# H1:M/P H2:M/P H3:M/P through three real relaying daemons on 127.0.0.2,
# .3 and .4 (relay_lib.sh). Each hop forwards a link once it made it, naming
# its file, and the next hop makes the same link:
#   1. a tree with a file of three names in three directories, a pair in one
#      directory and a file alone: every hop ends with the source's link
#      structure (names, link counts, which names share an inode) and
#      contents, nothing left under a temp name
#   2. a re-run with --skip quick after changes (a new name of a linked file,
#      a new linked pair, a changed file that had one name, a name gone from
#      the source): the same link structure at every hop again
#   3. the middle hop's daemon killed mid-copy (kill -9) while a large linked
#      file crosses, paced by --bwlimit: the hop before it replays its book
#      to the one after, links included; the others end with the source's
#      link structure, exit 25; with the daemon back, a re-run with --skip
#      quick completes it the same
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/relay_lib.sh"

MIB=$((1 << 20))
relay_daemons 2 3 4
HOPS="2 3 4"
DESTS=(127.0.0.2:data/ 127.0.0.3:data/ 127.0.0.4:data/)

mkdir -p "$T/src/tree/d1" "$T/src/tree/d2" "$T/src/tree/d3/deep"
head -c 70000 /dev/urandom >"$T/src/tree/d1/f"
ln "$T/src/tree/d1/f" "$T/src/tree/d2/g"
ln "$T/src/tree/d1/f" "$T/src/tree/d3/deep/h"
echo pair >"$T/src/tree/d2/p1"
ln "$T/src/tree/d2/p1" "$T/src/tree/d2/p2"
echo alone >"$T/src/tree/alone"
[ "$(stat -c %h "$T/src/tree/d1/f")" = 3 ] || skip "this file system does not keep hard links"

# links DIR: "name links first-name-of-its-inode" lines: two trees print the same when
# their link structure does.
links() {
	(cd "$1" && find . -type f -printf '%i %n %P\n' | LC_ALL=C sort -k3 |
		awk '{ if (!($1 in first)) first[$1] = $3; print $3, $2, first[$1] }' | LC_ALL=C sort)
}

# all_linked DESC: every hop's tree has the source's links, contents, and no temp name.
all_linked() {
	local n dir
	for n in $HOPS; do
		dir=$T/m$n/data/tree
		[ "$(links "$dir")" = "$(links "$T/src/tree")" ] &&
			pass "$1: 127.0.0.$n: the source's links" ||
			fail "$1: 127.0.0.$n: links differ: $(links "$dir" | tr '\n' '|')"
		diff -r "$T/src/tree" "$dir" >/dev/null && pass "$1: 127.0.0.$n: contents equal" ||
			fail "$1: 127.0.0.$n: contents differ"
		[ -z "$(find "$dir" -name '.rdmacp*')" ] && pass "$1: 127.0.0.$n: no temp name left" ||
			fail "$1: 127.0.0.$n: temp names left: $(find "$dir" -name '.rdmacp*')"
	done
}

echo "--- 1. a tree with hard links to three hops"
expect_rc 0 "1: -r -a -H to three" "${CLIENT[@]}" -r -a -H "$T/src/tree" "${DESTS[@]}"
all_linked 1
[ "$(stat -c %h "$T/m4/data/tree/d2/g")" = 3 ] && pass "1: the last hop's d2/g has 3 names" ||
	fail "1: the last hop's d2/g has $(stat -c %h "$T/m4/data/tree/d2/g") names"

echo "--- 2. a re-run with --skip quick after changes"
ln "$T/src/tree/d1/f" "$T/src/tree/d1/f4"
mkdir -p "$T/src/tree/new"
echo "new pair" >"$T/src/tree/new/a"
ln "$T/src/tree/new/a" "$T/src/tree/d3/b"
echo "alone, changed" >"$T/src/tree/alone"
rm "$T/src/tree/d2/p2"
for n in $HOPS; do rm "$T/m$n/data/tree/d2/p2"; done
expect_rc 0 "2: -r -a -H --skip quick to three" "${CLIENT[@]}" -r -a -H --skip quick \
	"$T/src/tree" "${DESTS[@]}"
all_linked 2
[ "$(stat -c %h "$T/m4/data/tree/d1/f")" = 4 ] && pass "2: the last hop's d1/f has 4 names" ||
	fail "2: the last hop's d1/f has $(stat -c %h "$T/m4/data/tree/d1/f") names"
expect_rc 0 "2: the same again, nothing changed" "${CLIENT[@]}" -r -a -H --skip quick \
	"$T/src/tree" "${DESTS[@]}"
all_linked "2, unchanged"

echo "--- 3. the middle hop killed while a linked file crosses"
for n in $HOPS; do find "$T/m$n/data" -mindepth 1 -delete; done
# 64 MiB at 8 MB/s, as t_relay_kill's copy without --partial: the kill lands well before the end.
head -c $((64 * MIB)) /dev/urandom >"$T/src/tree/big" || die "write the source"
ln "$T/src/tree/big" "$T/src/tree/d2/big2"
"${CLIENT[@]}" --json -r -a -H --bwlimit 8M "$T/src/tree" "${DESTS[@]}" >"$T/k.json" \
	2>"$T/k.err" &
pid=$!
wait_opened 4 || fail "3: 127.0.0.4's copy never began"
kill_daemon 3
wait "$pid"
RC=$?
[ "$RC" -eq 25 ] && pass "3: exit 25" || fail "3: exit $RC: $(tail -5 "$T/k.err")"
HOPS="2 4" all_linked 3
[ "$(dest_field "$T/k.json" 127.0.0.3 status)" = failed ] && pass "3: 127.0.0.3 failed" ||
	fail "3: 127.0.0.3: $(dest_field "$T/k.json" 127.0.0.3 status)"
start_relay_daemon 3
expect_rc 0 "3: the re-run with --skip quick" "${CLIENT[@]}" -r -a -H --skip quick \
	"$T/src/tree" "${DESTS[@]}"
all_linked "3, the re-run"

finish
