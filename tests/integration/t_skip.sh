#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --skip none|exists|quick, push and pull, against a real daemon:
#   1. a 300-file tree pushed with -p, then again with --skip quick: every
#      file and directory reported skipped (-vv ".f          NAME", as rsync
#      -ii; -v lists only what changed; --json, as -v, no file event, and
#      --json -vv one "action":"skipped" event each; summary "skipped"), 0
#      payload bytes (the summary and the daemon's "done" line), exit 0
#   2. a file changed in place with its size and mtime restored (touch -r) is
#      kept by quick (the documented limitation); --skip none copies it
#   3. a file whose size changed is copied by quick, the others kept
#   4. --skip exists keeps an existing file whatever its size and mtime
#   5. the same for a pull (the client is the receiver)
#   6. a symlink at the destination name is not "exists": it is replaced by
#      the file, as without --skip; its target is untouched
#   7. a write-only module refuses a push with --skip (each SKIPPED would
#      tell a client that may not read it what it holds): exit 5
#   8. a daemon without skip levels (rawserver.py, as a daemon from before):
#      refused before OPEN, "too old", exit 12; --skip with -n lists what
#      would be kept and writes nothing (t_dry_run.sh has the rest)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
N=300

mkdir -p "$T/drop"
echo secret >"$T/drop/there"
setup_standard "" "[drop]" "path = $T/drop" "allow = client" "write only = yes"
mkdir -p "$T/src/tree/a" "$T/src/tree/b"
for i in $(seq 1 $N); do
	d=a
	[ $((i % 2)) -eq 0 ] && d=b
	head -c $((i * 13 + 1)) /dev/urandom >"$T/src/tree/$d/f$i" || die "write f$i"
done

# json_count FILE ACTION: the file events with this action.
json_count() {
	python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "file" and e.get("action") == sys.argv[2]:
        n += 1
print(n)' "$1" "$2"
}

# json_summary FILE KEY: a field of the summary event.
json_summary() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "summary":
        print(e[sys.argv[2]])' "$1" "$2"
}

# last_done: the daemon's last "done:" line.
last_done() {
	daemon_settled "$T/d.log"
	grep ' done: ' "$T/d.log" | tail -1
}

# check_eq DESC GOT WANT
check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

# ---- 1. push, then re-run with --skip quick ---------------------------------
expect_rc 0 "push a $N-file tree with -p" "${CLIENT[@]}" -q -r -p "$T/src/tree" "$HOST:data/"
diff -r "$T/src/tree" "$T/mod/tree" >/dev/null && pass "tree identical" || fail "tree differs"

expect_rc 0 "re-run with --skip quick --json" \
	"${CLIENT[@]}" --json -r -p --skip quick "$T/src/tree" "$HOST:data/"
# The 3 directories there already are kept too (unchanged), not made again.
# As -v lists: nothing that was unchanged (the summary counts it).
check_eq "quick: no event for what was unchanged" "$(json_count "$T/out" skipped)" 0
check_eq "quick: nothing reported copied" "$(json_count "$T/out" copied)" 0
check_eq "quick: summary skipped" "$(json_summary "$T/out" skipped)" $((N + 3))
check_eq "quick: summary bytes" "$(json_summary "$T/out" bytes)" 0
check_eq "quick: summary failures" "$(json_summary "$T/out" failures)" 0
[[ $(last_done) == *"push to data done: 0 files, 0 bytes, 0 failed, 0 updated, $((N + 3)) unchanged" ]] &&
	pass "daemon: 0 bytes, $((N + 3)) unchanged" || fail "daemon line: $(last_done)"

expect_rc 0 "re-run with --skip quick -v" \
	"${CLIENT[@]}" -v -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "-v: nothing changed, nothing listed" "$(grep -c '^\.f' "$T/err")" 0
grep -q ", 0 failed, $((N + 3)) skipped, over tcp" "$T/err" &&
	pass "text summary says $((N + 3)) skipped" ||
	fail "text summary: $(tail -1 "$T/err")"
expect_rc 0 "re-run with --skip quick -vv" \
	"${CLIENT[@]}" -vv -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "-vv: skipped lines" "$(grep -cE '^\.f {10}tree/[ab]/f[0-9]*$' "$T/err")" $N
grep -q ", 0 failed, $((N + 3)) skipped, over tcp" "$T/err" && pass "-vv: the same summary" ||
	fail "text summary: $(tail -1 "$T/err")"
expect_rc 0 "re-run with --skip quick --json -vv" \
	"${CLIENT[@]}" --json -vv -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "--json -vv: files reported skipped" "$(json_count "$T/out" skipped)" $((N + 3))
check_eq "--json -vv: summary skipped" "$(json_summary "$T/out" skipped)" $((N + 3))

# ---- 2. same size and mtime, new content: quick keeps it, none copies ------
cp -p "$T/src/tree/a/f1" "$T/f1.orig"
printf 'X' | dd of="$T/src/tree/a/f1" bs=1 seek=0 conv=notrunc status=none
cmp -s "$T/src/tree/a/f1" "$T/f1.orig" && printf 'Y' | dd of="$T/src/tree/a/f1" bs=1 seek=0 \
	conv=notrunc status=none
touch -r "$T/f1.orig" "$T/src/tree/a/f1"
expect_rc 0 "in-place change, size and mtime kept: --skip quick" \
	"${CLIENT[@]}" --json -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "quick keeps it (documented limitation)" "$(json_summary "$T/out" skipped)" $((N + 3))
cmp -s "$T/mod/tree/a/f1" "$T/f1.orig" && pass "destination f1 still the old content" ||
	fail "destination f1 was rewritten"
expect_rc 0 "--skip none" "${CLIENT[@]}" --json -r -p --skip none "$T/src/tree" "$HOST:data/"
check_eq "none: only the directories kept" "$(json_summary "$T/out" skipped)" 3
check_eq "none: every file copied" "$(json_count "$T/out" copied)" $N
cmp -s "$T/mod/tree/a/f1" "$T/src/tree/a/f1" && pass "none copied the new f1" ||
	fail "f1 not copied by --skip none"

# ---- 3. a size change: quick copies that file only -------------------------
echo more >>"$T/src/tree/b/f2"
expect_rc 0 "size change: --skip quick" \
	"${CLIENT[@]}" --json -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "quick: skipped all but one" "$(json_summary "$T/out" skipped)" $((N + 2))
check_eq "quick: bytes of the changed file" "$(json_summary "$T/out" bytes)" \
	"$(stat -c %s "$T/src/tree/b/f2")"
cmp -s "$T/mod/tree/b/f2" "$T/src/tree/b/f2" && pass "f2 copied" || fail "f2 not copied"

# ---- 4. exists: kept whatever size and mtime -------------------------------
echo changed >"$T/src/tree/b/f4"
expect_rc 0 "--skip exists (no -p)" \
	"${CLIENT[@]}" --json -r --skip exists "$T/src/tree" "$HOST:data/"
check_eq "exists: every file skipped" "$(json_summary "$T/out" skipped)" $((N + 3))
check_eq "exists: 0 bytes" "$(json_summary "$T/out" bytes)" 0
cmp -s "$T/mod/tree/b/f4" "$T/src/tree/b/f4" && fail "exists rewrote f4" ||
	pass "exists left f4 as it was"
echo new >"$T/src/tree/a/new1"
expect_rc 0 "--skip exists copies a new file" \
	"${CLIENT[@]}" --json -r --skip exists "$T/src/tree" "$HOST:data/"
check_eq "exists: new file copied" "$(json_summary "$T/out" bytes)" 4
cmp -s "$T/mod/tree/a/new1" "$T/src/tree/a/new1" && pass "new1 arrived" || fail "new1 missing"

# ---- 5. pull ----------------------------------------------------------------
mkdir -p "$T/pull"
expect_rc 0 "pull the tree with -p" "${CLIENT[@]}" -q -r -p "$HOST:data/tree" "$T/pull/"
expect_rc 0 "pull again with --skip quick" \
	"${CLIENT[@]}" --json -r -p --skip quick "$HOST:data/tree" "$T/pull/"
check_eq "pull quick: all skipped" "$(json_summary "$T/out" skipped)" $((N + 4))
check_eq "pull quick: 0 bytes" "$(json_summary "$T/out" bytes)" 0
[[ $(last_done) == *"pull from data done: 0 files, 0 bytes, 0 failed, 0 updated, $((N + 4)) unchanged" ]] &&
	pass "daemon sent 0 bytes" || fail "daemon line: $(last_done)"
echo grown >>"$T/mod/tree/a/f3"
cp -p "$T/mod/tree/a/f5" "$T/f5.orig"
printf 'Z' | dd of="$T/mod/tree/a/f5" bs=1 seek=0 conv=notrunc status=none
cmp -s "$T/mod/tree/a/f5" "$T/f5.orig" && printf 'W' | dd of="$T/mod/tree/a/f5" bs=1 seek=0 \
	conv=notrunc status=none
touch -r "$T/f5.orig" "$T/mod/tree/a/f5"
expect_rc 0 "pull --skip quick after a size change and an in-place change" \
	"${CLIENT[@]}" --json -r -p --skip quick "$HOST:data/tree" "$T/pull/"
check_eq "pull quick: all but the grown file skipped" "$(json_summary "$T/out" skipped)" $((N + 3))
cmp -s "$T/pull/tree/a/f3" "$T/mod/tree/a/f3" && pass "pull: f3 copied" || fail "pull: f3 not"
cmp -s "$T/pull/tree/a/f5" "$T/f5.orig" && pass "pull: f5 kept (same size and mtime)" ||
	fail "pull: f5 rewritten"
expect_rc 0 "pull --skip exists" \
	"${CLIENT[@]}" --json -r --skip exists "$HOST:data/tree" "$T/pull/"
check_eq "pull exists: all skipped" "$(json_summary "$T/out" skipped)" $((N + 4))
expect_rc 0 "pull --skip none" "${CLIENT[@]}" --json -r -p "$HOST:data/tree" "$T/pull/"
check_eq "pull none: only the directories kept" "$(json_summary "$T/out" skipped)" 3
cmp -s "$T/pull/tree/a/f5" "$T/mod/tree/a/f5" && pass "pull none: f5 copied" ||
	fail "pull none: f5 not copied"

# ---- 6. a symlink by the destination name is not "exists" -------------------
echo target >"$T/mod/victim"
echo payload >"$T/src/one"
ln -s ../victim "$T/mod/tree/one"
expect_rc 0 "push over a symlink with --skip exists" \
	"${CLIENT[@]}" --json --skip exists "$T/src/one" "$HOST:data/tree/"
check_eq "symlink: not skipped" "$(json_summary "$T/out" skipped)" 0
[ ! -L "$T/mod/tree/one" ] && cmp -s "$T/mod/tree/one" "$T/src/one" &&
	pass "the symlink was replaced by the file" || fail "symlink not replaced"
check_eq "symlink target untouched" "$(cat "$T/mod/victim")" target
ln -s "$T/mod/victim" "$T/pull/one"
expect_rc 0 "pull over a symlink with --skip exists" \
	"${CLIENT[@]}" --json --skip exists "$HOST:data/tree/one" "$T/pull/"
check_eq "pull symlink: not skipped" "$(json_summary "$T/out" skipped)" 0
[ ! -L "$T/pull/one" ] && cmp -s "$T/pull/one" "$T/src/one" &&
	pass "pull: the symlink was replaced by the file" || fail "pull: symlink not replaced"
check_eq "pull: symlink target untouched" "$(cat "$T/mod/victim")" target

# ---- 7. a write-only module: no probing through --skip ----------------------
echo probe >"$T/src/there"
for level in exists quick; do
	expect_rc 5 "write-only module, push --skip $level" \
		"${CLIENT[@]}" -p --skip $level "$T/src/there" "$HOST:drop/"
	grep -q "write only" "$T/err" && pass "says the module is write only" ||
		fail "message: $(cat "$T/err")"
done
check_eq "write-only module's file untouched" "$(cat "$T/drop/there")" secret
expect_rc 0 "write-only module, plain push" "${CLIENT[@]}" -q "$T/src/there" "$HOST:drop/"
check_eq "plain push overwrote it" "$(cat "$T/drop/there")" probe
# A tree pushed twice with -a: the second push's answers show nothing of what is there
# (no directory or symlink kept, no "changes": every entry as if new).
mkdir -p "$T/src/wo/sub"
echo w >"$T/src/wo/sub/f"
ln -s sub/f "$T/src/wo/link"
for pass in 1 2; do
	expect_rc 0 "write-only module, push -a of a tree ($pass)" \
		"${CLIENT[@]}" --json -a "$T/src/wo" "$HOST:drop/"
done
check_eq "write-only module: the second push's actions" \
	"$(jq -r 'select(.event == "file") | .action' "$T/out" | sort | uniq -c | tr -s ' ' | tr '\n' '|')" \
	" 4 copied|"
check_eq "write-only module: no changes told" "$(jq -r 'select(.changes) | .name' "$T/out")" ""

# ---- 8. an old daemon, and -n -----------------------------------------------
before=$(find "$T/mod" -printf '%p %s %T@ %m\n' | sort)
expect_rc 0 "--skip with -n -v" "${CLIENT[@]}" -n -v --skip quick -r -p "$T/src/tree" "$HOST:data/"
grep -q "^would skip tree/" "$T/out" && pass "lists what would be kept" ||
	fail "no 'would skip': $(head -5 "$T/out")"
[ "$before" = "$(find "$T/mod" -printf '%p %s %T@ %m\n' | sort)" ] &&
	pass "-n --skip wrote nothing" || fail "-n --skip changed the module"
old_daemon_refuses 0x3f --skip "old daemon, push --skip" \
	--skip quick "$T/src/one" "$HOST:data/"
old_daemon_refuses 0x3f --skip "old daemon, pull --skip" \
	--skip quick "$HOST:data/one" "$T/pull/x"

finish
