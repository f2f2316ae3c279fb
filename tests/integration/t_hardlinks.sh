#!/bin/bash
# SPDX-License-Identifier: MIT
#
# -H keeps hard links (issue 10, metadata fidelity), push and pull:
#   - a file with 3 names in different directories arrives as one inode with
#     3 links; a pair in one directory as one inode with 2; a file with one
#     name stays alone; without -H the names arrive as separate files;
#   - a re-run with -H over what is there keeps one inode (nothing left under
#     a temp name);
#   - a link whose file is refused (over the module's max file size) fails
#     too: reported, exit 9, nothing made under its name;
#   - a hostile client: a hard link to a module file not copied in the session
#     is refused, and one in a session without -H ends the session; where it
#     marks its linked files (PROTO_CAP_LINKED_FILES), one to a file it did
#     not mark is refused too;
#   - a client that does not mark them (a peer from before the marks) still
#     has its links made.
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
setup_standard "max file size = 1M"

mkdir -p "$T/src/tree/d1" "$T/src/tree/d2" "$T/src/tree/d3/deep"
head -c 70000 /dev/urandom >"$T/src/tree/d1/f"
ln "$T/src/tree/d1/f" "$T/src/tree/d2/g"
ln "$T/src/tree/d1/f" "$T/src/tree/d3/deep/h"
echo pair >"$T/src/tree/d2/p1"
ln "$T/src/tree/d2/p1" "$T/src/tree/d2/p2"
echo alone >"$T/src/tree/alone"
[ "$(stat -c %h "$T/src/tree/d1/f")" = 3 ] || skip "this file system does not keep hard links"

# links DIR: "name links inode-class" lines, the inode replaced by the first
# name that has it, so two trees compare equal when their link structure does.
links() {
	(cd "$1" && find . -type f -printf '%i %n %P\n' | LC_ALL=C sort -k3 |
		awk '{ if (!($1 in first)) first[$1] = $3; print $3, $2, first[$1] }' | LC_ALL=C sort)
}
temps() { find "$1" -name '.rdmacp*' 2>/dev/null; }

check_linked() {
	local desc=$1 dir=$2
	if [ "$(links "$dir")" = "$(links "$T/src/tree")" ]; then
		pass "$desc: the same links as the source ($(stat -c %h "$dir/d1/f") names of d1/f)"
	else
		fail "$desc: links differ: $(links "$dir" | tr '\n' '|')"
	fi
	diff -r "$T/src/tree" "$dir" >/dev/null && pass "$desc: contents equal" ||
		fail "$desc: contents differ"
	[ "$(stat -c %i "$dir/d1/f")" = "$(stat -c %i "$dir/d3/deep/h")" ] &&
		[ "$(stat -c %h "$dir/d2/g")" = 3 ] && pass "$desc: d1/f, d2/g, d3/deep/h one inode" ||
		fail "$desc: d1/f, d2/g, d3/deep/h are not one inode with 3 links"
	[ -z "$(temps "$dir")" ] && pass "$desc: no temp file left" ||
		fail "$desc: temp files left: $(temps "$dir")"
}

expect_rc 0 "push -r -H" "${CLIENT[@]}" -r -H "$T/src/tree" "$HOST:data/push/"
check_linked "push -r -H" "$T/mod/push/tree"
expect_rc 0 "push -r -H again, over it" "${CLIENT[@]}" -r -H "$T/src/tree" "$HOST:data/push/"
check_linked "push -r -H again" "$T/mod/push/tree"
expect_rc 0 "push -r -H --skip quick -p" "${CLIENT[@]}" -r -p -H --skip quick --json \
	"$T/src/tree" "$HOST:data/push/"
check_linked "push -r -H --skip quick" "$T/mod/push/tree"
expect_rc 0 "push -r -H --skip quick -p, unchanged" "${CLIENT[@]}" -r -p -H --skip quick --json \
	-vv "$T/src/tree" "$HOST:data/push/"
# Of d1/f, d2/g, d3/deep/h the one the sender sent as the file (walk order), and a link.
first=$(jq -r 'select(.event == "file" and .type == "file") | .name' "$T/out" |
	grep -m1 -E '^tree/(d1/f|d2/g|d3/deep/h)$')
link=$(jq -r 'select(.event == "file" and .type == "hardlink") | .name' "$T/out" |
	grep -m1 -E '^tree/(d1/f|d2/g|d3/deep/h)$')
jq -e -s '.[-1].skipped == 11 and .[-1].files == 0 and (.[-1].failures // .[-1].failed) == 0' \
	"$T/out" >/dev/null &&
	pass "unchanged: the 3 files, 3 links and 5 directories kept (skipped)" ||
	fail "unchanged re-run: $(tail -1 "$T/out")"
check_linked "push -r -H --skip quick, unchanged" "$T/mod/push/tree"
# A link broken at the destination (a file of its own there, the same bytes and times),
# its file kept with another name still: that link is made again, the other one kept.
D=$T/mod/push
[ -n "$first" ] && [ -n "$link" ] || fail "the unchanged re-run's -vv events: '$first' '$link'"
cp -p "$D/$link" "$D/$link.new" && mv "$D/$link.new" "$D/$link"
[ "$(stat -c %h "$D/$first")" = 2 ] || fail "setup: $first should have 2 names there"
expect_rc 0 "push -r -H --skip quick -p, a link broken there" "${CLIENT[@]}" -r -p -H --skip quick \
	--json "$T/src/tree" "$HOST:data/push/"
jq -e -s '.[-1].files == 1 and .[-1].failed == 0' "$T/out" >/dev/null &&
	[ "$(jq -r 'select(.event == "file" and .action == "copied") | "\(.name) \(.type)"' "$T/out")" = "$link hardlink" ] &&
	pass "a link broken there: $link made again, the other names kept" ||
	fail "a link broken there: $(jq -c 'select(.event == "file" or .event == "summary")' "$T/out" | tr '\n' ' ')"
check_linked "push -r -H --skip quick, a link broken there" "$D/tree"

# A client from before the marks (PROTO_CAP_LINKED_FILES off): every file remembered, as then.
RDMACP_TEST_CAPS_OFF=0x2000000000000 expect_rc 0 "push -r -H from a client without the marks" \
	"${CLIENT[@]}" -r -H "$T/src/tree" "$HOST:data/nomarks/"
check_linked "push -r -H, no marks" "$T/mod/nomarks/tree"

mkdir -p "$T/pull"
expect_rc 0 "pull -r -H" "${CLIENT[@]}" -r --hard-links "$HOST:data/push/tree" "$T/pull/"
check_linked "pull -r -H" "$T/pull/tree"

expect_rc 0 "push -r without -H" "${CLIENT[@]}" -r "$T/src/tree" "$HOST:data/plain/"
n=$(find "$T/mod/plain/tree" -type f -links 1 | wc -l)
[ "$n" = 6 ] && pass "without -H: 6 separate files" || fail "without -H: $n files with one link"
mkdir -p "$T/pullplain"
expect_rc 0 "pull -r without -H" "${CLIENT[@]}" -r "$HOST:data/push/tree" "$T/pullplain/"
n=$(find "$T/pullplain/tree" -type f -links 1 | wc -l)
[ "$n" = 6 ] && pass "pull without -H: 6 separate files" || fail "pull without -H: $n single"

# A link whose file is refused (over 'max file size = 1M') fails with it.
mkdir -p "$T/src/big/a" "$T/src/big/b"
head -c 2000000 /dev/zero >"$T/src/big/a/huge"
ln "$T/src/big/a/huge" "$T/src/big/b/link"
echo ok >"$T/src/big/small"
expect_rc 9 "push -r -H: the linked file is refused" "${CLIENT[@]}" -r -H --json \
	"$T/src/big" "$HOST:data/"
[ ! -e "$T/mod/big/a/huge" ] && [ ! -e "$T/mod/big/b/link" ] && [ -f "$T/mod/big/small" ] &&
	pass "neither name of the refused file exists; the rest arrived" ||
	fail "refused file: $(find "$T/mod/big" | tr '\n' ' ')"
jq -e -s '[.[] | select(.event == "file" and .action == "failed" and .name == "big/b/link")] | length == 1' \
	"$T/out" >/dev/null && pass "the link's failure is reported" ||
	fail "no error event for big/b/link: $(cat "$T/out")"
[ -z "$(temps "$T/mod/big")" ] && pass "no temp file left" || fail "temp files left"

# A hostile client: links to what it did not send in this session.
echo secret >"$T/mod/secret"
rawpeer_for "$PORT"
rawpeer_rc 0 "a hard link to a file not sent in the session" \
	hello open push data/ dir recursive flags=0x411 lanes ring \
	files 1:evil:0:0644:hardlink:secret \
	ack expect "1=NOT_FOUND" expect "not copied in this session" \
	files 2:evil2:0:0644:hardlink:evil \
	ack expect "2=NOT_FOUND" end wait END bye close
[ ! -e "$T/mod/evil" ] && [ "$(stat -c %h "$T/mod/secret")" = 1 ] &&
	pass "no link made to the module's file" || fail "a link to secret was made"
rawpeer_rc 0 "a hard link in a session without -H" \
	hello open push data/ dir recursive lanes ring \
	files 1:evil:0:0644:hardlink:secret wait closed expect-seen "ERROR PROTOCOL" \
	expect closed
[ ! -e "$T/mod/evil" ] && pass "still no link" || fail "a link was made without -H"
# A peer that marks its linked files (PROTO_CAP_LINKED_FILES, mode bit 0200000): only a
# file it marked may be linked to; the daemon remembers no other name of the session.
rawpeer_rc 0 "linked files: a link to a file the peer did not mark" \
	hello caps=0x200000000080d open push data/ dir recursive flags=0x411 lanes ring \
	files 1:lk:0:0755:dir 2:lk/plain:0:0644:file 3:lk/marked:0:0200644:file ack \
	done 2 0 /dev/null done 3 0 /dev/null result result \
	files 4:lk/l1:0:0644:hardlink:lk/plain ack expect "4=NOT_FOUND" \
	files 5:lk/l2:0:0644:hardlink:lk/marked ack expect "5=OK" \
	result end wait END bye close
[ -f "$T/mod/lk/plain" ] && [ ! -e "$T/mod/lk/l1" ] &&
	[ "$(stat -c %i "$T/mod/lk/l2")" = "$(stat -c %i "$T/mod/lk/marked")" ] &&
	pass "linked files: the marked file linked, the unmarked one not" ||
	fail "linked files: $(find "$T/mod/lk" -printf '%P:%i ' 2>&1)"
rawpeer_rc 0 "a hard link to a name with .." \
	hello open push data/ dir recursive flags=0x411 lanes ring \
	files 1:evil:0:0644:hardlink:a/../secret wait closed expect-seen "ERROR PROTOCOL" \
	expect closed

finish
