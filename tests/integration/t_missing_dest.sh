#!/bin/bash
# A destination directory that does not exist (issue 15 item 10): never
# "not a directory". The last component is made, as cp -r makes a single
# directory's copy under a new name (rdmacp -r dir host:mod/new -> mod/new
# holds dir's contents) and as a push into host:mod/new/ makes new/; a
# missing parent is reported as "does not exist". Both directions.
. "$(dirname "$0")/lib.sh"

setup_standard
HOST=127.0.0.1
C=("${CLIENT[@]}" --transport tcp --no-progress)
mkdir -p "$T/src/dir/sub" "$T/mod/rdir/sub" "$T/pl"
echo a >"$T/src/dir/a"
echo b >"$T/src/dir/sub/b"
echo ra >"$T/mod/rdir/a"
echo rb >"$T/mod/rdir/sub/b"
echo one >"$T/src/one"
echo two >"$T/src/two"
echo r1 >"$T/mod/r1"
echo r2 >"$T/mod/r2"

# has DESC REGEX: the last command's stderr matches.
has() {
	if grep -qE -- "$2" "$T/err"; then
		pass "$1"
	else
		fail "$1: no /$2/ in:"
		sed 's/^/    /' "$T/err" | head -10
	fi
}
hasnt() {
	if grep -qiE -- "$2" "$T/err"; then
		fail "$1: /$2/ in: $(cat "$T/err")"
	else
		pass "$1"
	fi
}

# ---- push
expect_rc 0 "push -r dir host:mod/new makes new with dir's contents" "${C[@]}" -r "$T/src/dir" \
	"$HOST:data/new"
cmp -s "$T/src/dir/sub/b" "$T/mod/new/sub/b" && [ ! -e "$T/mod/new/dir" ] ||
	fail "push -r: mod/new does not hold dir's contents"
expect_rc 0 "push of two files into a missing host:mod/made/" "${C[@]}" "$T/src/one" "$T/src/two" \
	"$HOST:data/made/"
cmp -s "$T/src/two" "$T/mod/made/two" || fail "push: made/two missing"
expect_rc 5 "push into host:mod/nosuch/new (missing parent)" "${C[@]}" -r "$T/src/dir" \
	"$HOST:data/nosuch/new"
has "push: a missing parent is said to not exist" "does not exist"
hasnt "push: a missing parent is not 'not a directory'" "not a directory"
[ ! -e "$T/mod/nosuch" ] || fail "push made the missing parent"

# ---- pull
expect_rc 0 "pull -r host:mod/rdir newlocal makes newlocal with rdir's contents" \
	sh -c 'cd "$1" && shift && "$@"' sh "$T/pl" "${C[@]}" -r "$HOST:data/rdir" newlocal
cmp -s "$T/mod/rdir/sub/b" "$T/pl/newlocal/sub/b" && [ ! -e "$T/pl/newlocal/rdir" ] ||
	fail "pull -r: newlocal does not hold rdir's contents"
expect_rc 0 "pull of two files into a missing local made/" "${C[@]}" "$HOST:data/r1" \
	"$HOST:data/r2" "$T/pl/made/"
cmp -s "$T/mod/r2" "$T/pl/made/r2" || fail "pull: made/r2 missing"
expect_rc 0 "pull of two files into a missing local made2 (no slash)" "${C[@]}" "$HOST:data/r1" \
	"$HOST:data/r2" "$T/pl/made2"
cmp -s "$T/mod/r1" "$T/pl/made2/r1" || fail "pull: made2/r1 missing"
expect_rc 6 "pull into a local nosuch/x (missing parent)" "${C[@]}" "$HOST:data/r1" \
	"$T/pl/nosuch/x"
has "pull: the missing parent is named and said to not exist" "$T/pl/nosuch does not exist"
hasnt "pull: a missing parent is not 'not a directory'" "not a directory"
expect_rc 6 "pull of two files into a local nosuch/made/ (missing parent)" "${C[@]}" \
	"$HOST:data/r1" "$HOST:data/r2" "$T/pl/nosuch/made/"
has "pull: the missing parent of a directory destination does not exist" \
	"$T/pl/nosuch does not exist"
hasnt "pull: ... and is not 'not a directory'" "not a directory"
[ ! -e "$T/pl/nosuch" ] || fail "pull made the missing parent"
# A file where a directory is wanted is still "not a directory".
expect_rc 6 "pull of two files into an existing file" "${C[@]}" "$HOST:data/r1" "$HOST:data/r2" \
	"$T/src/one"
has "pull into a file: not a directory" "not a directory"
# A refused pull leaves no directory behind.
expect_rc 5 "pull of missing files into a missing directory" "${C[@]}" "$HOST:data/nope1" \
	"$HOST:data/nope2" "$T/pl/left/"
[ ! -e "$T/pl/left" ] || fail "a refused pull left its new directory behind"

finish
