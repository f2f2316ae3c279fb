#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --files-from against a real daemon (a push: names relative to the one
# source directory, their paths kept):
#   1. nested names arrive under their listed paths, byte-identical; parents
#      the destination lacks are made; nothing unlisted is sent
#   2. a listed directory: alone without -r, with its contents with -r; with
#      -r a name inside a listed directory and a name listed twice are sent
#      once (no DUPLICATE failure); ./ and trailing / and // are tidied
#   3. -0: NUL-ended names (one with a newline in it); - reads standard input
#   4. a listed name that doesn't exist: reported (NOT_FOUND, --json error
#      event read by jq), the others copied, exit 9; all of them missing:
#      exit 9; --missing-ok: exit 0, "missing" said with -v
#   5. names that escape the directory (../x, /abs, a/../b) and a symlink in
#      a listed path: refused (BAD_PATH), exit 9, nothing outside sent
#   6. filters apply to listed names and to what is below them; -p keeps a
#      listed file's mode and mtime; --dry-run lists the names
#   7. usage: two sources, a source that is not a directory, a name longer
#      than 4096 bytes, a pull with --files-from (exit 1 or 6)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1

setup_standard
S=$T/src
mkdir -p "$S/a/b" "$S/dir2/g" "$S/empty" || die "mkdir"
for f in a/b/c.txt a/b/d.txt a/e.txt f.txt dir2/g/h.txt "sp ace.txt" dir2/top.txt; do
	head -c $((RANDOM + 1)) /dev/urandom >"$S/$f" || die "write $f"
done
printf 'nl' >"$S/$(printf 'x\ny.txt')"
echo outside >"$T/outside"
ln -s a "$S/lnk"

# what DIR: the entries under DIR, one a line, sorted.
what() { (cd "$1" 2>/dev/null && find . -mindepth 1 | sed 's|^\./||' | sort); }
# same NAME DEST: NAME under DEST is byte-identical to the source's.
same() { cmp -s "$S/$1" "$T/mod/$2/$1"; }
check_eq() {
	[ "$2" = "$3" ] && pass "$1" || {
		fail "$1"
		diff <(echo "$3") <(echo "$2") | sed 's/^/    /'
	}
}

# ---- 1. nested names --------------------------------------------------------------
printf 'a/b/c.txt\nf.txt\n' >"$T/l1"
expect_rc 0 "two names, one nested" "${CLIENT[@]}" -q --files-from "$T/l1" "$S" "$HOST:data/d1/"
check_eq "only the listed names, parents made" "$(what "$T/mod/d1")" "$(printf 'a\na/b\na/b/c.txt\nf.txt')"
same a/b/c.txt d1 && same f.txt d1 && pass "contents identical" || fail "contents differ"

# ---- 2. directories, -r, overlaps ----------------------------------------------------
printf 'dir2\n' >"$T/l2"
expect_rc 0 "a directory without -r" "${CLIENT[@]}" -q --files-from "$T/l2" "$S" "$HOST:data/d2/"
check_eq "the directory alone" "$(what "$T/mod/d2")" "dir2"
expect_rc 0 "a directory with -r" "${CLIENT[@]}" -q -r --files-from "$T/l2" "$S" "$HOST:data/d3/"
check_eq "the directory and its contents" "$(what "$T/mod/d3")" \
	"$(printf 'dir2\ndir2/g\ndir2/g/h.txt\ndir2/top.txt')"
printf './a/b/c.txt\na//b/\na/b/c.txt\nf.txt\nf.txt\n' >"$T/l3"
expect_rc 0 "-r: a name inside a listed directory, a name twice" \
	"${CLIENT[@]}" --json -r --files-from "$T/l3" "$S" "$HOST:data/d4/"
check_eq "each sent once" "$(what "$T/mod/d4")" \
	"$(printf 'a\na/b\na/b/c.txt\na/b/d.txt\nf.txt')"
check_eq "json: no failures" "$(jq -r 'select(.event == "summary") | .failures' "$T/out")" 0
check_eq "json: 4 entries (a/b, its two files, f.txt)" \
	"$(jq -s '[.[] | select(.event == "file")] | length' "$T/out")" 4

# ---- 3. -0 and standard input --------------------------------------------------------
printf 'x\ny.txt\0sp ace.txt\0a/e.txt\0' >"$T/l4"
expect_rc 0 "-0: NUL-ended names" "${CLIENT[@]}" -q -0 --files-from "$T/l4" "$S" "$HOST:data/d5/"
same "$(printf 'x\ny.txt')" d5 && same "sp ace.txt" d5 && same a/e.txt d5 &&
	pass "a name with a newline, one with a space" || fail "-0 names: $(what "$T/mod/d5")"
expect_rc 0 "--files-from - (standard input)" \
	bash -c '"$@" <<<"f.txt"' _ "${CLIENT[@]}" -q --files-from - "$S" "$HOST:data/d6/"
check_eq "standard input's name" "$(what "$T/mod/d6")" "f.txt"

# ---- 4. missing names ------------------------------------------------------------------
printf 'f.txt\nnope\na/e.txt\nnot/there/either\n' >"$T/l5"
expect_rc 9 "missing names: a partial run" \
	"${CLIENT[@]}" --json --files-from "$T/l5" "$S" "$HOST:data/d7/"
check_eq "the others copied" "$(what "$T/mod/d7")" "$(printf 'a\na/e.txt\nf.txt')"
check_eq "json: NOT_FOUND errors for the missing" \
	"$(jq -r 'select(.event == "file" and .action == "failed") | "\(.name) \(.code) \(.local)"' "$T/out" | sort)" \
	"$(printf 'nope NOT_FOUND true\nnot/there/either NOT_FOUND true')"
check_eq "json summary: 2 failures" "$(jq -r 'select(.event == "summary") | .failures' "$T/out")" 2
expect_rc 9 "missing names, text output" "${CLIENT[@]}" --files-from "$T/l5" "$S" "$HOST:data/d7b/"
grep -q "src/nope: listed in --files-from, not found" "$T/err" && pass "the missing name is said" ||
	fail "message: $(cat "$T/err")"
printf 'nope\nnope2\n' >"$T/l6"
expect_rc 9 "every name missing" "${CLIENT[@]}" -q --files-from "$T/l6" "$S" "$HOST:data/d8/"
expect_rc 0 "--missing-ok" "${CLIENT[@]}" -v --missing-ok --files-from "$T/l5" "$S" "$HOST:data/d9/"
check_eq "--missing-ok: the others copied" "$(what "$T/mod/d9")" "$(printf 'a\na/e.txt\nf.txt')"
grep -q "nope: missing (--missing-ok)" "$T/err" && pass "-v says it is missing" ||
	fail "-v: $(cat "$T/err")"

# ---- 5. escapes and symlinks -------------------------------------------------------------
printf 'f.txt\n../outside\n%s\na/../f.txt\nlnk/e.txt\n' "$T/outside" >"$T/l7"
expect_rc 9 "escaping names and a symlink in a path" \
	"${CLIENT[@]}" --json --files-from "$T/l7" "$S" "$HOST:data/d10/"
check_eq "only f.txt sent" "$(what "$T/mod/d10")" "f.txt"
check_eq "each refused as BAD_PATH" \
	"$(jq -r 'select(.event == "file" and .action == "failed") | .code' "$T/out" | sort | uniq -c | awk '{print $1, $2}')" \
	"4 BAD_PATH"
[ -e "$T/mod/outside" ] || [ -e "$T/mod/d10/outside" ] && fail "the outside file was sent" ||
	pass "nothing outside sent"

# ---- 6. filters, -p, dry run ------------------------------------------------------------
printf 'a\nf.txt\ndir2/top.txt\n' >"$T/l8"
expect_rc 0 "filters on listed names and below them" "${CLIENT[@]}" -q -r --exclude d.txt \
	--exclude /dir2/ --exclude 'top.*' --files-from "$T/l8" "$S" "$HOST:data/d11/"
check_eq "d.txt and top.txt left out" "$(what "$T/mod/d11")" \
	"$(printf 'a\na/b\na/b/c.txt\na/e.txt\nf.txt')"
chmod 0640 "$S/a/e.txt" && touch -d '2001-02-03 04:05:06' "$S/a/e.txt"
printf 'a/e.txt\n' >"$T/l9"
expect_rc 0 "-p" "${CLIENT[@]}" -q -p --files-from "$T/l9" "$S" "$HOST:data/d12/"
check_eq "mode and mtime kept" "$(stat -c '%a %Y' "$T/mod/d12/a/e.txt")" "$(stat -c '%a %Y' "$S/a/e.txt")"
expect_rc 0 "--dry-run" "${CLIENT[@]}" -n --files-from "$T/l1" "$S" "$HOST:data/d13/"
check_eq "the plan names the listed paths" "$(awk '{print $3}' "$T/out" | sort)" \
	"$(printf 'a/b/c.txt\nf.txt')"
[ -e "$T/mod/d13" ] && fail "a dry run wrote" || pass "nothing written"

# ---- 7. usage -----------------------------------------------------------------------------
expect_rc 1 "two source directories" "${CLIENT[@]}" --files-from "$T/l1" "$S" "$S/a" "$HOST:data/x/"
expect_rc 6 "a source that is not a directory" "${CLIENT[@]}" --files-from "$T/l1" "$S/f.txt" \
	"$HOST:data/x/"
expect_rc 6 "a list that can't be read" "${CLIENT[@]}" --files-from "$T/nolist" "$S" "$HOST:data/x/"
{
	echo f.txt
	head -c 5000 /dev/zero | tr '\0' a
	echo
} >"$T/l10"
expect_rc 1 "a name longer than 4096 bytes" "${CLIENT[@]}" --files-from "$T/l10" "$S" "$HOST:data/x/"
grep -q "name 2: longer than 4096 bytes" "$T/err" && pass "the long name is numbered" ||
	fail "message: $(cat "$T/err")"
expect_rc 1 "--files-from - and --exclude-from - together" \
	bash -c '"$@" </dev/null' _ "${CLIENT[@]}" --files-from - --exclude-from - "$S" "$HOST:data/x/"
mkdir -p "$T/pulled"
expect_rc 1 "a pull with --files-from" "${CLIENT[@]}" --files-from "$T/l1" "$HOST:data/d1" "$T/pulled/"
grep -q "files-from is for a push" "$T/err" && pass "refused with a reason" || fail "$(cat "$T/err")"
[ -e "$T/mod/x" ] && fail "a refused run wrote data/x" || pass "nothing written by the refusals"

finish
