#!/bin/bash
# SPDX-License-Identifier: MIT
#
# SRC/. copies a directory's contents, dotfiles included, as cp -r SRC/. DEST
# does (issue 32 item 10), against a real daemon:
#   1. push: rdmacp -r src/. host:data/dst makes dst and puts src's entries in
#      it (not src itself, no "." name); into an existing directory too; src/
#      still copies the directory itself; without -r it is a directory (exit 6)
#   2. pull: rdmacp -r host:data/dir/. dst, into a new and an existing
#      directory; host:data/. brings the module's entries; without -r, or with
#      a wildcard before the dot, the daemon refuses it (exit 5)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

H=127.0.0.1
setup_standard
mkdir -p "$T/src/sub"
echo a >"$T/src/a"
echo hidden >"$T/src/.hidden"
echo s >"$T/src/sub/s"
ln -s a "$T/src/ln"

# same DESC A B: the same names, types and bytes.
same() {
	diff -r --no-dereference "$2" "$3" >"$T/diff" 2>&1 && pass "$1" ||
		fail "$1: $(head -5 "$T/diff" | tr '\n' ' ')"
}

# ---- 1. push ----
expect_rc 0 "push -r src/. to a new directory" "${CLIENT[@]}" -r "$T/src/." "$H:data/dst"
same "its contents, dotfiles too, not src itself" "$T/src" "$T/mod/dst"
mkdir "$T/mod/have"
expect_rc 0 "push -r src/./ into an existing directory" "${CLIENT[@]}" -r "$T/src/./" "$H:data/have/"
same "the contents in it" "$T/src" "$T/mod/have"
expect_rc 0 "push -r src/ (a slash alone: the directory itself, as cp)" \
	"${CLIENT[@]}" -r "$T/src/" "$H:data/have/"
[ -f "$T/mod/have/src/.hidden" ] && pass "src/ arrives as have/src" || fail "have: $(ls -A "$T/mod/have")"
expect_rc 6 "push src/. without -r" "${CLIENT[@]}" "$T/src/." "$H:data/nor"
grep -q "is a directory (use -r)" "$T/err" && pass "says use -r" || fail "no -r: $(cat "$T/err")"

# ---- 2. pull ----
expect_rc 0 "pull -r data/dst/. to a new directory" "${CLIENT[@]}" -r "$H:data/dst/." "$T/p1"
same "its contents, dotfiles too" "$T/src" "$T/p1"
mkdir "$T/p2"
expect_rc 0 "pull -r data/dst/. into an existing directory" "${CLIENT[@]}" -r "$H:data/dst/." "$T/p2/"
same "the contents in it" "$T/src" "$T/p2"
expect_rc 0 "pull -r data/. (a module's entries)" "${CLIENT[@]}" -r "$H:data/." "$T/p3"
same "the module's entries" "$T/mod" "$T/p3"
expect_rc 5 "pull data/dst/. without -r" "${CLIENT[@]}" "$H:data/dst/." "$T/p4"
grep -q "is a directory (use -r)" "$T/err" && pass "says use -r" || fail "no -r: $(cat "$T/err")"
expect_rc 5 "pull -r 'data/d*/.' (a wildcard and the dot)" "${CLIENT[@]}" -r "$H:data/d*/." "$T/p4"
[ ! -e "$T/p4" ] && pass "nothing made" || fail "p4 made: $(ls -A "$T/p4")"

finish
