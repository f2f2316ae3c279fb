#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --delete and --max-delete (issue 10, mirror), push and pull, against a real
# daemon:
#   1. push: extra files, nested extra directories and an extra symlink (one
#      to a file outside, one to a directory outside) are removed; the
#      symlinks' targets, a sibling of the mirrored directory, the partial
#      store (.rdmacp-partial) and a temp file stay; -v "deleting NAME",
#      --json file events "action":"deleted" (with the type removed) and
#      summary "deleted" (jq), the
#      daemon's "done" line counts them; a re-run deletes nothing; with -p
#      directories keep their times though entries in them were removed
#   2. --max-delete below the count: exactly N removed, the rest listed as
#      "withheld", exit 16; --max-delete 0 removes nothing, exit 16; above
#      the count: all removed, exit 0
#   3. a failure suppresses deletion: a file over the module's 'max file
#      size' is refused, nothing is deleted, "N failures: nothing deleted"
#   4. pull: the same mirror on the client, --max-delete, and a failure (a
#      directory where a file must go) that suppresses deletion
#   5. into an existing directory (as cp -r): the source's directory in it is
#      mirrored, nothing beside it
#   6. a file system mounted inside the tree, and a bind mount of a directory
#      outside it on the same file system (where this test may mount), are
#      neither walked nor touched
#   7. an entry that can't be removed (immutable, where chattr works) is a
#      failure (error event, exit 9): the others go, its directory stays
#   8. a write-only module refuses --delete (exit 5); --delete without -r,
#      --max-delete without --delete: exit 1 (-n lists, t_dry_run.sh); a daemon without
#      --delete (rawserver.py): refused before OPEN, exit 12
#   9. filters protect what they exclude, as rsync's do: an excluded extra
#      file and an excluded directory (with its contents) stay, the other
#      extras go; push (the rules go to the daemon) and pull
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1

mkdir -p "$T/drop" "$T/small"
setup_standard "" "[drop]" "path = $T/drop" "allow = client" "write only = yes" \
	"[small]" "path = $T/small" "allow = client" "max file size = 1K"

# json_count FILE ACTION: the file events with this action.
json_count() {
	jq -s --arg a "$2" '[.[] | select(.event == "file" and .action == $a)] | length' "$1"
}

# json_summary FILE KEY: a field of the summary event.
json_summary() {
	jq -r --arg k "$2" 'select(.event == "summary") | .[$k]' "$1"
}

last_done() {
	daemon_settled "$T/d.log"
	grep ' done: ' "$T/d.log" | tail -1
}

check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

# make_src DIR: the source tree.
make_src() {
	mkdir -p "$1/a/b" "$1/c"
	echo one >"$1/a/f1"
	echo two >"$1/a/b/f2"
	echo three >"$1/top"
	ln -s f1 "$1/a/link"
}

# add_extras DIR: 8 entries the source lacks (a file, a nested tree of 3
# directories and 2 files, two symlinks pointing outside).
add_extras() {
	echo x >"$1/extra"
	mkdir -p "$1/a/old/deeper/deepest"
	echo y >"$1/a/old/g"
	echo z >"$1/a/old/deeper/deepest/h"
	ln -s "$T/outside/precious" "$1/c/to-file"
	ln -s "$T/outside" "$1/c/to-dir"
}
EXTRAS=8 # extra, a/old, a/old/g, a/old/deeper, a/old/deeper/deepest, .../h, 2 links

mkdir -p "$T/outside"
echo precious >"$T/outside/precious"
make_src "$T/src/tree"

# ---- 1. push ------------------------------------------------------------------
expect_rc 0 "push the tree" "${CLIENT[@]}" -q -r "$T/src/tree" "$HOST:data/"
add_extras "$T/mod/tree"
mkdir -p "$T/mod/sibling" "$T/mod/tree/.rdmacp-partial"
echo keep >"$T/mod/sibling/file"
echo part >"$T/mod/tree/.rdmacp-partial/p"
expect_rc 0 "push --delete -v" "${CLIENT[@]}" -v -r --delete "$T/src/tree" "$HOST:data/"
check_eq "-v: deleting lines" "$(grep -c '^deleting tree/' "$T/err")" $EXTRAS
grep -q '^deleting tree/c/to-dir$' "$T/err" && pass "the symlink to a directory is named" ||
	fail "no 'deleting tree/c/to-dir': $(cat "$T/err")"
# The directories there already are kept ("skipped") before the deletions are counted.
grep -qE ", 0 failed(, [0-9]+ skipped)?, $EXTRAS deleted, over tcp" "$T/err" &&
	pass "text summary counts them" || fail "summary: $(tail -1 "$T/err")"
[[ $(last_done) == *"push to data done: "*", 0 failed, "*", $EXTRAS deleted" ]] &&
	pass "daemon: $EXTRAS deleted" || fail "daemon line: $(last_done)"
diff -r --no-dereference "$T/src/tree" "$T/mod/tree" -x .rdmacp-partial >/dev/null &&
	pass "destination is the source again" ||
	fail "destination differs: $(diff -r --no-dereference "$T/src/tree" "$T/mod/tree")"
check_eq "symlink target survives" "$(cat "$T/outside/precious")" precious
[ -d "$T/outside" ] && [ -f "$T/outside/precious" ] && pass "linked directory untouched" ||
	fail "the directory a symlink pointed to lost entries"
check_eq "sibling of the mirrored directory" "$(cat "$T/mod/sibling/file")" keep
check_eq "partial store kept" "$(cat "$T/mod/tree/.rdmacp-partial/p")" part
rm -r "$T/mod/tree/.rdmacp-partial"

add_extras "$T/mod/tree"
expect_rc 0 "push --delete --json" "${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/"
check_eq "json: deleted events" "$(json_count "$T/out" deleted)" $EXTRAS
check_eq "json: summary deleted" "$(json_summary "$T/out" deleted)" $EXTRAS
check_eq "json: summary delete_withheld" "$(json_summary "$T/out" delete_withheld)" 0
check_eq "json: summary delete_suppressed" "$(json_summary "$T/out" delete_suppressed)" false
jq -r 'select(.event == "file" and .action == "deleted") | .name' "$T/out" >"$T/deleted"
# Each removal says what it removed (the daemon's lstat, carried in DELETED).
check_eq "json: deleted types" "$(jq -r 'select(.event == "file" and .action == "deleted" and
	(.name == "tree/extra" or .name == "tree/a/old" or .name == "tree/c/to-dir")) |
	.name + "=" + .type' "$T/out" | sort | tr '\n' ' ')" \
	"tree/a/old=dir tree/c/to-dir=symlink tree/extra=file "
grep -qx 'tree/a/old/deeper/deepest/h' "$T/deleted" && pass "json names the nested file" ||
	fail "json: no tree/a/old/deeper/deepest/h in: $(cat "$T/deleted")"
# Contents before their directory.
at() { grep -nx "$1" "$T/deleted" | cut -d: -f1; }
[ "$(at tree/a/old/deeper/deepest/h)" -lt "$(at tree/a/old/deeper/deepest)" ] &&
	[ "$(at tree/a/old/deeper/deepest)" -lt "$(at tree/a/old/deeper)" ] &&
	[ "$(at tree/a/old/deeper)" -lt "$(at tree/a/old)" ] &&
	[ "$(at tree/a/old/g)" -lt "$(at tree/a/old)" ] &&
	pass "directories after their contents" || fail "order: $(cat "$T/deleted")"
expect_rc 0 "re-run with --delete" "${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/"
check_eq "re-run: nothing deleted" "$(json_summary "$T/out" deleted)" 0
# With -p the directories' times are set after the removals in them.
add_extras "$T/mod/tree"
touch -d @1500000000 "$T/src/tree/a" "$T/src/tree/c"
expect_rc 0 "push -p --delete" "${CLIENT[@]}" -q -r -p --delete "$T/src/tree" "$HOST:data/"
check_eq "-p: a's mtime after removals in it" "$(stat -c %Y "$T/mod/tree/a")" 1500000000
check_eq "-p: c's mtime after removals in it" "$(stat -c %Y "$T/mod/tree/c")" 1500000000

# ---- 2. --max-delete ------------------------------------------------------------
add_extras "$T/mod/tree"
expect_rc 16 "--max-delete 3 (of $EXTRAS)" \
	"${CLIENT[@]}" --json -r --delete --max-delete 3 "$T/src/tree" "$HOST:data/"
check_eq "max-delete 3: summary deleted" "$(json_summary "$T/out" deleted)" 3
check_eq "max-delete 3: deleted events" "$(json_count "$T/out" deleted)" 3
check_eq "max-delete 3: withheld" "$(json_summary "$T/out" delete_withheld)" $((EXTRAS - 3))
check_eq "max-delete 3: withheld events" "$(json_count "$T/out" withheld)" $((EXTRAS - 3))
left=$( (cd "$T/mod/tree" && find . -mindepth 1 | grep -v rdmacp-partial) | wc -l)
want=$( (cd "$T/src/tree" && find . -mindepth 1) | wc -l)
check_eq "max-delete 3: entries left" "$left" $((want + EXTRAS - 3))
grep -q -- "--max-delete 3 reached: $((EXTRAS - 3)) not deleted" "$T/err" &&
	pass "says how many were not deleted" || fail "stderr: $(cat "$T/err")"

expect_rc 16 "--max-delete 0 -v lists, removes nothing" \
	"${CLIENT[@]}" -v -r --delete --max-delete 0 "$T/src/tree" "$HOST:data/"
check_eq "max-delete 0: not-deleting lines" \
	"$(grep -c '^not deleting tree/.* (--max-delete)$' "$T/err")" $((EXTRAS - 3))
check_eq "max-delete 0: no deleting lines" "$(grep -c '^deleting ' "$T/err")" 0
left=$( (cd "$T/mod/tree" && find . -mindepth 1 | grep -v rdmacp-partial) | wc -l)
check_eq "max-delete 0: entries left" "$left" $((want + EXTRAS - 3))

expect_rc 0 "--max-delete above the count" \
	"${CLIENT[@]}" --json -r --delete --max-delete 100 "$T/src/tree" "$HOST:data/"
check_eq "max-delete 100: the rest deleted" "$(json_summary "$T/out" deleted)" $((EXTRAS - 3))
diff -r --no-dereference "$T/src/tree" "$T/mod/tree" -x .rdmacp-partial >/dev/null &&
	pass "mirrored" || fail "destination differs after --max-delete 100"

# ---- 3. a failure suppresses deletion -----------------------------------------
make_src "$T/src/stree"
expect_rc 0 "push into [small]" "${CLIENT[@]}" -q -r "$T/src/stree" "$HOST:small/"
add_extras "$T/small/stree"
head -c 4096 /dev/urandom >"$T/src/stree/big"
expect_rc 9 "a file over 'max file size' with --delete" \
	"${CLIENT[@]}" --json -r --delete "$T/src/stree" "$HOST:small/"
check_eq "failure: nothing deleted" "$(json_summary "$T/out" deleted)" 0
check_eq "failure: delete_suppressed" "$(json_summary "$T/out" delete_suppressed)" true
grep -q -- "--delete: 1 failure: nothing deleted" "$T/err" && pass "says nothing was deleted" ||
	fail "stderr: $(cat "$T/err")"
[ -f "$T/small/stree/extra" ] && [ -f "$T/small/stree/a/old/deeper/deepest/h" ] &&
	[ -L "$T/small/stree/c/to-file" ] && pass "extras still there" || fail "extras removed"
[[ $(last_done) == *"0 deleted (failures: nothing deleted)" ]] && pass "daemon: nothing deleted" ||
	fail "daemon line: $(last_done)"
# A source that can't be walked here: the daemon is not even asked to delete.
expect_rc 9 "a missing source with --delete" \
	"${CLIENT[@]}" -r --delete "$T/src/stree" "$T/src/nonexistent" "$HOST:small/"
grep -q -- "nothing deleted" "$T/err" && [ -f "$T/small/stree/extra" ] &&
	pass "missing source: nothing deleted" || fail "missing source: $(cat "$T/err")"
rm "$T/src/stree/big"

# ---- 4. pull --------------------------------------------------------------------
mkdir -p "$T/pull"
expect_rc 0 "pull the tree" "${CLIENT[@]}" -q -r "$HOST:data/tree" "$T/pull/"
add_extras "$T/pull/tree"
expect_rc 0 "pull --delete --json" "${CLIENT[@]}" --json -r --delete "$HOST:data/tree" "$T/pull/"
check_eq "pull: deleted events" "$(json_count "$T/out" deleted)" $EXTRAS
check_eq "pull: summary deleted" "$(json_summary "$T/out" deleted)" $EXTRAS
diff -r --no-dereference "$T/mod/tree" "$T/pull/tree" -x .rdmacp-partial >/dev/null &&
	pass "pull: mirrored" || fail "pull: differs: $(diff -r "$T/mod/tree" "$T/pull/tree")"
check_eq "pull: symlink target survives" "$(cat "$T/outside/precious")" precious

add_extras "$T/pull/tree"
expect_rc 16 "pull --max-delete 2" \
	"${CLIENT[@]}" --json -r --delete --max-delete 2 "$HOST:data/tree" "$T/pull/"
check_eq "pull max-delete 2: deleted" "$(json_summary "$T/out" deleted)" 2
check_eq "pull max-delete 2: withheld" "$(json_summary "$T/out" delete_withheld)" $((EXTRAS - 2))

rm -f "$T/pull/tree/a/f1"
mkdir -p "$T/pull/tree/a/f1/in-the-way"
expect_rc 9 "pull with a directory where a file goes" \
	"${CLIENT[@]}" --json -r --delete "$HOST:data/tree" "$T/pull/"
check_eq "pull failure: nothing deleted" "$(json_summary "$T/out" deleted)" 0
check_eq "pull failure: delete_suppressed" "$(json_summary "$T/out" delete_suppressed)" true
[ -f "$T/pull/tree/extra" ] || [ -f "$T/pull/tree/a/old/g" ] && pass "pull: extras still there" ||
	fail "pull: extras removed after a failure"

# ---- 5. into an existing directory: the tree in it is mirrored, nothing beside it --
mkdir -p "$T/mod/into/tree"
echo old >"$T/mod/into/tree/old"
echo beside >"$T/mod/into/beside"
expect_rc 0 "push into an existing directory with --delete" \
	"${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/into"
check_eq "into: one deleted" "$(json_summary "$T/out" deleted)" 1
[ ! -e "$T/mod/into/tree/old" ] && [ -f "$T/mod/into/tree/a/f1" ] && pass "into/tree mirrored" ||
	fail "into: $(ls -R "$T/mod/into")"
check_eq "entry beside it untouched" "$(cat "$T/mod/into/beside")" beside

# ---- 6. another file system inside the tree ------------------------------------
mkdir -p "$T/mod/tree/mnt"
if mount -t tmpfs -o size=1m rdmacp-test "$T/mod/tree/mnt" 2>/dev/null; then
	echo inside >"$T/mod/tree/mnt/file"
	expect_rc 0 "push --delete with a mount point inside the tree" \
		"${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/"
	check_eq "mount: nothing deleted" "$(json_summary "$T/out" deleted)" 0
	check_eq "mount: its file untouched" "$(cat "$T/mod/tree/mnt/file")" inside
	mountpoint -q "$T/mod/tree/mnt" && pass "still mounted" || fail "mount point gone"
	umount "$T/mod/tree/mnt"
	rmdir "$T/mod/tree/mnt"
	mkdir -p "$T/mod/tree/bound"
	mount --bind "$T/outside" "$T/mod/tree/bound"
	expect_rc 0 "push --delete with a bind mount inside the tree" \
		"${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/"
	check_eq "bind mount: nothing deleted" "$(json_summary "$T/out" deleted)" 0
	check_eq "bind mount: what it shows untouched" "$(cat "$T/outside/precious")" precious
	umount "$T/mod/tree/bound"
	rmdir "$T/mod/tree/bound"
else
	echo "note: cannot mount a tmpfs here (not root?): the mount checks are not run"
	rmdir "$T/mod/tree/mnt"
fi

# ---- 7. an entry that can't be removed ------------------------------------------
add_extras "$T/mod/tree"
if chattr +i "$T/mod/tree/a/old/g" 2>/dev/null; then
	expect_rc 9 "push --delete with an immutable extra" \
		"${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:data/"
	chattr -i "$T/mod/tree/a/old/g"
	check_eq "immutable: the others deleted" "$(json_summary "$T/out" deleted)" $((EXTRAS - 2))
	check_eq "immutable: one failure" "$(json_summary "$T/out" failures)" 1
	check_eq "immutable: its error event" \
		"$(jq -r 'select(.event == "file" and .action == "failed") | .name + " " + .code' "$T/out")" \
		"tree/a/old/g PERMISSION"
	[ -f "$T/mod/tree/a/old/g" ] && [ ! -e "$T/mod/tree/a/old/deeper" ] &&
		pass "immutable: it and its directory stay, the rest went" ||
		fail "immutable: $(ls -R "$T/mod/tree/a")"
	rm -r "$T/mod/tree/a/old"
else
	echo "note: chattr +i does not work here: the failed-removal check is not run"
	rm -r "$T/mod/tree/a/old" "$T/mod/tree/extra" "$T/mod/tree/c/to-file" "$T/mod/tree/c/to-dir"
fi

# ---- 8. refusals -------------------------------------------------------------------
echo secret >"$T/drop/there"
expect_rc 5 "write-only module refuses --delete" \
	"${CLIENT[@]}" -r --delete "$T/src/tree" "$HOST:drop/"
grep -q "write only" "$T/err" && pass "says the module is write only" ||
	fail "message: $(cat "$T/err")"
[ ! -e "$T/drop/tree" ] && check_eq "write-only module untouched" "$(cat "$T/drop/there")" secret
expect_rc 1 "--delete without -r" "${CLIENT[@]}" --delete "$T/src/tree/top" "$HOST:data/"
before=$(find "$T/mod" -printf '%p %s %T@ %m\n' | sort)
expect_rc 0 "--delete with -n" "${CLIENT[@]}" -n -r --delete "$T/src/tree" "$HOST:data/"
[ "$before" = "$(find "$T/mod" -printf '%p %s %T@ %m\n' | sort)" ] &&
	pass "-n --delete changed nothing" || fail "-n --delete changed the module"
expect_rc 1 "--max-delete without --delete" "${CLIENT[@]}" -r --max-delete 3 "$T/src/tree" \
	"$HOST:data/"
old_daemon_refuses 0x7f --delete "old daemon, push --delete" \
	-r --delete "$T/src/tree" "$HOST:data/"
old_daemon_refuses 0x7f --delete "old daemon, pull --delete" \
	-r --delete "$HOST:data/tree" "$T/pull/"

# ---- 9. filters protect what they exclude ------------------------------------------
for dir in push pull; do
	if [ $dir = push ]; then
		dst=$T/mod/tree
		run=("$T/src/tree" "$HOST:data/")
	else
		dst=$T/pull/tree
		rm -rf "$dst"
		expect_rc 0 "pull the tree again" "${CLIENT[@]}" -q -r "$HOST:data/tree" "$T/pull/"
		run=("$HOST:data/tree" "$T/pull/")
	fi
	echo log >"$dst/debug.log"
	mkdir -p "$dst/cache/sub"
	echo c >"$dst/cache/sub/x"
	echo gone >"$dst/gone"
	expect_rc 0 "$dir --delete with --exclude '*.log' --exclude cache/" \
		"${CLIENT[@]}" --json -r --delete --exclude '*.log' --exclude cache/ "${run[@]}"
	check_eq "$dir filters: one deleted" "$(json_summary "$T/out" deleted)" 1
	[ ! -e "$dst/gone" ] && [ -f "$dst/debug.log" ] && [ -f "$dst/cache/sub/x" ] &&
		pass "$dir filters: the excluded file and directory stay, the extra went" ||
		fail "$dir filters: $(find "$dst" | sort | tr '\n' ' ')"
	rm -rf "$dst/debug.log" "$dst/cache"
done

finish
