#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Temp files of a dead writer at the destination (rx_dir_sweep): a receiver
# reads a directory for them once, before the first file it writes there.
#   1. a re-run that keeps every file of a directory (--skip quick, nothing
#      changed) does not read it: a stale temp there stays;
#   2. a run that writes a file there removes the stale temp (old by mtime and
#      ctime, unlocked);
#      a temp a live writer holds (flock) stays;
#   3. another directory of the same push, only looked at, keeps its own.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v flock >/dev/null || skip "flock not installed"
setup_standard
HOST=127.0.0.1

S=$T/src/tree
mkdir -p "$S/a" "$S/b"
for i in 1 2 3; do
	echo "a $i" >"$S/a/f$i"
	echo "b $i" >"$S/b/f$i"
done
expect_rc 0 "first copy" "${CLIENT[@]}" -q -r -p "$S" "$HOST:data/"
D=$T/mod/tree
STALE_A=$D/a/.f1.rdmacp.Stale001
HELD_A=$D/a/.f3.rdmacp.Held0001
STALE_B=$D/b/.f1.rdmacp.Stale002
for f in "$STALE_A" "$HELD_A" "$STALE_B"; do echo dead >"$f"; done
touch -d '1 hour ago' "$STALE_A" "$HELD_A" "$STALE_B"
# Stale means unchanged for 2 s by ctime too (which touch can't set back): let them age.
sleep 3
# A live writer: its lock held by the process itself (killed at the end).
(
	exec 9<"$HELD_A" >/dev/null 2>&1
	flock -x 9 && exec sleep 600
) &
HOLDER=$!
cleanup_holder() {
	kill "$HOLDER" 2>/dev/null
	wait "$HOLDER" 2>/dev/null
	cleanup
}
trap cleanup_holder EXIT

# ---- 1. only looked at ---------------------------------------------------------------
expect_rc 0 "re-run, nothing changed (--skip quick)" "${CLIENT[@]}" -q -r -p --skip quick "$S" "$HOST:data/"
[ -e "$STALE_A" ] && [ -e "$STALE_B" ] && pass "a directory only looked at is not read: its stale temps stay" ||
	fail "a stale temp went in a directory nothing was written in"

# ---- 2. a file written in a/ ---------------------------------------------------------------
echo "a 2, changed" >"$S/a/f2"
expect_rc 0 "re-run, a/f2 changed" "${CLIENT[@]}" -q -r -p --skip quick "$S" "$HOST:data/"
[ -e "$STALE_A" ] && fail "a/: the stale temp stayed though a file was written there" ||
	pass "a/: the stale temp removed before the file was written"
[ -e "$HELD_A" ] && pass "a/: a temp a live writer holds kept" || fail "a/: a held temp removed"
cmp -s "$S/a/f2" "$D/a/f2" && pass "a/f2 copied" || fail "a/f2 differs"

# ---- 3. b/ only looked at again --------------------------------------------------------------
[ -e "$STALE_B" ] && pass "b/, only looked at: its stale temp stays until a file is written there" ||
	fail "b/: its stale temp went"
echo "b 1, changed" >"$S/b/f1"
expect_rc 0 "re-run, b/f1 changed" "${CLIENT[@]}" -q -r -p --skip quick "$S" "$HOST:data/"
[ -e "$STALE_B" ] && fail "b/: the stale temp stayed though a file was written there" ||
	pass "b/: the stale temp removed with the first file written there"

finish
