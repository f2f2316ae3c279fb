#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Recursive push and pull of a real system tree:
#   - a subset of /usr/share/doc (>= 3000 files when the system has them;
#     the count is printed), copied with cp -a, plus: relative, absolute and
#     dangling symlinks, empty directories, odd names (spaces, UTF-8, a
#     newline, a leading dash, a 255-byte name), a FIFO and a sparse file
#   1. push -r: diff -r --no-dereference against the module; the FIFO is
#      skipped with a warning and the exit status is 0 (walk.c only warns)
#   2. push -r -p: also modes and mtimes of files and directories (symlink
#      mtimes are not preserved by rdmacp, so symlinks are left out of that
#      comparison; their targets are still compared by diff)
#   3. pull -r back into fresh local directories (with and without -p),
#      pull of a whole module
#   4. pull of one file renamed, of several files into a directory, and via
#      /ABS/PATH inside the module
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
DOC=/usr/share/doc
command -v diff >/dev/null || skip "no diff"
diff --help 2>/dev/null | grep -q -- --no-dereference || skip "diff is not GNU diff (no --no-dereference)"

# Modes without -p are the source's less the daemon's umask: a known one.
umask 022
# -p keeps set-id bits only where the module says so (t_privs.sh tests the default).
setup_standard "keep setid = yes"

# ---- the source tree ----------------------------------------------------------
SRC=$T/src/tree
mkdir -p "$SRC"
nfiles=0
if [ -d "$DOC" ]; then
	# Whole package directories, in name order, until >= 3000 regular files;
	# directories over 8 MiB are left out to keep the test quick.
	for d in "$DOC"/*; do
		[ "$nfiles" -ge 3000 ] && break
		if [ -d "$d" ] && [ ! -L "$d" ]; then
			kb=$(du -sk "$d" 2>/dev/null | cut -f1)
			[ "${kb:-0}" -gt 8192 ] && continue
		fi
		cp -a "$d" "$SRC/" 2>/dev/null || continue
		nfiles=$(find "$SRC" -type f | wc -l)
	done
fi
if [ "$nfiles" -lt 3000 ]; then
	echo "note: $DOC gave only $nfiles files; adding generated ones up to 3000"
	mkdir -p "$SRC/generated"
	i=0
	while [ "$nfiles" -lt 3000 ]; do
		d=$SRC/generated/d$((i / 100))
		mkdir -p "$d"
		head -c $((i * 37 % 9000)) /dev/urandom >"$d/f$i"
		i=$((i + 1))
		nfiles=$((nfiles + 1))
	done
fi

X=$SRC/zz-extra
mkdir -p "$X/sub/deeper" "$X/empty" "$X/nested/empty2/empty3"
echo "hello" >"$X/sub/file.txt"
head -c 100000 /dev/urandom >"$X/sub/deeper/random.bin"
: >"$X/zero-length"
ln -s ../file.txt "$X/sub/deeper/rel-link"
ln -s sub "$X/rel-dir-link"
ln -s /etc/hostname "$X/abs-link"
ln -s /nonexistent/dangling/target "$X/dangling-link"
echo space >"$X/with space"
mkdir "$X/dir with spaces"
echo "in dir with spaces" >"$X/dir with spaces/a b c"
echo unicode >"$X/ünïcödé-名前-🙂"
echo newline >"$X/new"$'\n'"line"
echo dash >"$X/-leading-dash"
mkdir "$X/--dashdir"
echo tab >"$X/tab"$'\t'"name"
LONG=$(printf 'L%.0s' $(seq 1 255))
echo long >"$X/$LONG" || die "cannot create a 255-byte name"
# 255 bytes of UTF-8 (85 three-byte characters)
LONGU=$(printf '名%.0s' $(seq 1 85))
echo longu >"$X/$LONGU" || die "cannot create a 255-byte UTF-8 name"
mkfifo "$X/the.fifo" || die "mkfifo"
# sparse: 64 MiB with data at 0, 16 MiB and just before the end
truncate -s $((64 * 1024 * 1024)) "$X/sparse.img"
printf 'start' | dd of="$X/sparse.img" conv=notrunc status=none
printf 'middle' | dd of="$X/sparse.img" bs=1 seek=$((16 * 1024 * 1024)) conv=notrunc status=none
printf 'end' | dd of="$X/sparse.img" bs=1 seek=$((64 * 1024 * 1024 - 3)) conv=notrunc status=none
chmod 0640 "$X/sub/file.txt"
chmod 0700 "$X/sub/deeper"
chmod 0751 "$X/nested"
chmod 0444 "$X/zero-length"
chmod 4755 "$X/with space"
touch -h -d '2001-02-03 04:05:06.123456789' "$X/sub/file.txt" "$X/sub/deeper/random.bin"
touch -d '1999-12-31 23:59:59' "$X/empty" "$X/nested/empty2"
touch -d '2010-01-01 00:00:00' "$X/$LONG"

nf=$(find "$SRC" -type f | wc -l)
nd=$(find "$SRC" -type d | wc -l)
nl=$(find "$SRC" -type l | wc -l)
nb=$(du -sb --apparent-size "$SRC" | cut -f1)
echo "source tree: $nf regular files, $nd directories, $nl symlinks, 1 fifo, $nb bytes (apparent)"

# diff_tree DESC A B: GNU diff, symlinks compared as links, the FIFO left out.
diff_tree() {
	if diff -r --no-dereference -x the.fifo "$2" "$3" >"$T/diff.out" 2>&1; then
		pass "$1: diff -r --no-dereference: identical"
	else
		fail "$1: trees differ: $(head -5 "$T/diff.out" | tr '\n' '|')"
	fi
}

# meta DIR: "MODE MTIME NAME" per file and directory (not symlinks, not the
# FIFO), NUL-separated for the newline name, sorted.
meta() {
	(cd "$1" && find . ! -type l ! -name the.fifo -printf '%m %T@ %P\0' | sort -z | tr '\0' '\n')
}

same_meta() {
	meta "$2" >"$T/meta.a"
	meta "$3" >"$T/meta.b"
	if cmp -s "$T/meta.a" "$T/meta.b"; then
		pass "$1: modes and mtimes of $(wc -l <"$T/meta.a") files and directories equal"
	else
		fail "$1: modes/mtimes differ: $(diff "$T/meta.a" "$T/meta.b" | head -6 | tr '\n' '|')"
	fi
}

same_types() {
	(cd "$2" && find . ! -name the.fifo -printf '%y %P\0' | sort -z | tr '\0' '\n') >"$T/ty.a"
	(cd "$3" && find . -printf '%y %P\0' | sort -z | tr '\0' '\n') >"$T/ty.b"
	if cmp -s "$T/ty.a" "$T/ty.b"; then
		pass "$1: same $(wc -l <"$T/ty.a") entries with the same types"
	else
		fail "$1: entry lists differ: $(diff "$T/ty.a" "$T/ty.b" | head -6 | tr '\n' '|')"
	fi
}

no_temps() {
	local left
	left=$(find "$2" -name '.*.rdmacp.*' 2>/dev/null | head -3)
	[ -z "$left" ] && pass "$1: no temp files left" || fail "$1: temp files left: $left"
}

check_extras() { # DESC DIR: the special entries, one by one
	local d=$2/zz-extra
	[ -L "$d/sub/deeper/rel-link" ] && [ "$(readlink "$d/sub/deeper/rel-link")" = ../file.txt ] &&
		[ "$(cat "$d/sub/deeper/rel-link")" = hello ] &&
		pass "$1: relative symlink kept as a link and resolves" || fail "$1: relative symlink"
	[ -L "$d/abs-link" ] && [ "$(readlink "$d/abs-link")" = /etc/hostname ] &&
		pass "$1: absolute symlink kept verbatim" || fail "$1: absolute symlink"
	[ -L "$d/dangling-link" ] && [ ! -e "$d/dangling-link" ] &&
		pass "$1: dangling symlink kept" || fail "$1: dangling symlink"
	[ -L "$d/rel-dir-link" ] && pass "$1: symlink to a directory stays a link" ||
		fail "$1: symlink to a directory"
	[ -d "$d/empty" ] && [ -z "$(ls -A "$d/empty")" ] && [ -d "$d/nested/empty2/empty3" ] &&
		pass "$1: empty directories kept" || fail "$1: empty directories"
	[ -f "$d/$LONG" ] && [ -f "$d/$LONGU" ] && pass "$1: 255-byte names" || fail "$1: 255-byte names"
	[ -f "$d/new"$'\n'"line" ] && [ -f "$d/-leading-dash" ] && [ -f "$d/ünïcödé-名前-🙂" ] &&
		pass "$1: newline, dash and UTF-8 names" || fail "$1: odd names"
	[ ! -e "$d/the.fifo" ] && pass "$1: the FIFO was not copied" || fail "$1: the FIFO exists in $d"
	if cmp -s "$X/sparse.img" "$d/sparse.img"; then
		pass "$1: sparse file content equal ($(du -k "$d/sparse.img" | cut -f1) KiB on disk, 65536 KiB apparent)"
	else
		fail "$1: sparse file differs"
	fi
}

# ---- 0. many directories ------------------------------------------------------
# The receiver keeps a small cache of open destination directories; a tree
# with more directories than that must still arrive whole.
echo "--- 0. 40 directories with one file each"
mkdir -p "$T/src/many"
for i in $(seq 1 40); do
	mkdir "$T/src/many/d$i"
	echo "$i" >"$T/src/many/d$i/f"
done
expect_rc 0 "push -r of 40 directories with one file each" "${CLIENT[@]}" -r "$T/src/many" "$HOST:data/"
diff_tree "push -r of 40 directories" "$T/src/many" "$T/mod/many"
mkdir -p "$T/back-many"
cp -a "$T/src/many" "$T/mod/many2"
expect_rc 0 "pull -r of 40 directories with one file each" "${CLIENT[@]}" -r "$HOST:data/many2" "$T/back-many/"
diff_tree "pull -r of 40 directories" "$T/src/many" "$T/back-many/many2"
rm -rf "$T/mod/many" "$T/mod/many2"

# ---- 1. push -r ---------------------------------------------------------------
echo "--- 1. push -r"
t0=$(date +%s%N)
expect_rc 0 "push -r of the tree (the FIFO only warned about)" \
	"${CLIENT[@]}" -r "$SRC" "$HOST:data/"
echo "    ($((($(date +%s%N) - t0) / 1000000)) ms)"
grep -q 'the.fifo.*skipped' "$T/err" && pass "push -r: FIFO skipped with a warning" ||
	fail "push -r: no warning for the FIFO: $(head -3 "$T/err" | tr '\n' '|')"
diff_tree "push -r" "$SRC" "$T/mod/tree"
same_types "push -r" "$SRC" "$T/mod/tree"
check_extras "push -r" "$T/mod/tree"
no_temps "push -r" "$T/mod"

# The special entries alone (a small tree with few directories), so that they
# are checked even when the big tree fails for another reason.
expect_rc 0 "push -r of the special entries alone" "${CLIENT[@]}" -r "$X" "$HOST:data/small/"
diff_tree "push -r, special entries alone" "$X" "$T/mod/small/zz-extra"
mkdir -p "$T/small-wrap"
ln -s "$T/mod/small/zz-extra" "$T/small-wrap/zz-extra"
check_extras "push -r, special entries alone" "$T/small-wrap"

# --json: one "file" event per entry (files, directories and symlinks)
expect_rc 0 "push -r --json of the tree again (overwrites)" \
	"${CLIENT[@]}" -r --json "$SRC" "$HOST:data/json/"
# -print0: one name here has a newline in it
nent=$(find "$SRC" ! -name the.fifo -print0 | tr -cd '\0' | wc -c)
nev=$(jq -c 'select(.event=="file" and .action=="copied" and (.type=="file" or .type=="dir" or .type=="symlink") and ((.xxh128 != null or .xxh128_tree != null) == (.type=="file")))' "$T/out" | wc -l)
if [ "$nev" -eq "$nent" ]; then
	pass "push -r --json: $nev file events for $nent entries"
else
	fail "push -r --json: $nev file events for $nent entries"
	echo "    stderr of that run:"
	sed 's/^/    /' "$T/err" | head -20
fi
diff_tree "push -r --json" "$SRC" "$T/mod/json/tree"

# ---- 2. push -r -p --------------------------------------------------------------
echo "--- 2. push -r -p (modes and mtimes; symlink mtimes are not preserved, so not compared)"
expect_rc 0 "push -r -p" "${CLIENT[@]}" -r -p "$SRC" "$HOST:data/p/"
diff_tree "push -r -p" "$SRC" "$T/mod/p/tree"
same_meta "push -r -p" "$SRC" "$T/mod/p/tree"
check_extras "push -r -p" "$T/mod/p/tree"
[ "$(stat -c %a "$T/mod/p/tree/zz-extra/with space")" = 4755 ] &&
	pass "push -r -p: set-user-ID bit kept" || fail "push -r -p: mode of 'with space' is $(stat -c %a "$T/mod/p/tree/zz-extra/with space")"

# The same for the special entries alone (few directories).
expect_rc 0 "push -r -p of the special entries alone" "${CLIENT[@]}" -r -p "$X" "$HOST:data/smallp/"
diff_tree "push -r -p, special entries alone" "$X" "$T/mod/smallp/zz-extra"
same_meta "push -r -p, special entries alone" "$X" "$T/mod/smallp/zz-extra"
mkdir -p "$T/back-smallp"
# --owner: a pull as root keeps set-id bits only with it (the owners are root's here anyway).
expect_rc 0 "pull -r -p of the special entries alone" "${CLIENT[@]}" -r -p --owner "$HOST:data/smallp/zz-extra" "$T/back-smallp/"
diff_tree "pull -r -p, special entries alone" "$X" "$T/back-smallp/zz-extra"
same_meta "pull -r -p, special entries alone" "$X" "$T/back-smallp/zz-extra"

# Without -p: the source's permission bits less the daemon's umask (this
# test's, 022), as cp gives them (rdmacp(1)); t_modes.sh tests more.
m=$(stat -c %a "$T/mod/small/zz-extra/zero-length")
[ "$m" = 444 ] && pass "push -r without -p: 0444 file stored as 0444" ||
	fail "push -r without -p: 0444 file stored as $m, wanted 444 (0444 & ~022)"
m=$(stat -c %a "$T/mod/small/zz-extra/with space")
[ "$m" = 755 ] && pass "push -r without -p: 4755 file stored as 0755" ||
	fail "push -r without -p: 4755 file stored as $m, wanted 755"

# ---- 3. pull -r -------------------------------------------------------------------
echo "--- 3. pull -r"
# Pulls read a copy made locally (cp -a, FIFO included: the daemon must skip
# it), so that they do not depend on the pushes above.
cp -a "$SRC" "$T/mod/seed" || die "cp -a into the module"
cp -a "$SRC" "$T/mod/seedp" || die "cp -a into the module"
mkdir -p "$T/back"
expect_rc 0 "pull -r of the tree into a fresh directory" \
	"${CLIENT[@]}" -r "$HOST:data/seed" "$T/back/"
mv "$T/back/seed" "$T/back/tree" 2>/dev/null
diff_tree "pull -r" "$SRC" "$T/back/tree"
same_types "pull -r" "$SRC" "$T/back/tree"
check_extras "pull -r" "$T/back/tree"
no_temps "pull -r" "$T/back"

mkdir -p "$T/backp"
expect_rc 0 "pull -r -p of the preserved tree" \
	"${CLIENT[@]}" -r -p --owner "$HOST:data/seedp" "$T/backp"
diff_tree "pull -r -p" "$SRC" "$T/backp/seedp"
same_meta "pull -r -p" "$SRC" "$T/backp/seedp"

# A pulled directory renamed: DEST does not exist, one source.
expect_rc 0 "pull -r of a subdirectory renamed" \
	"${CLIENT[@]}" -r "$HOST:data/seed/zz-extra" "$T/renamed-extra"
diff_tree "pull -r renamed" "$X" "$T/renamed-extra"

# A whole module arrives under the module's name.
mkdir -p "$T/whole"
rm -rf "$T/mod/json" "$T/mod/p" "$T/mod/tree" "$T/mod/small" "$T/mod/smallp" "$T/mod/seedp"
expect_rc 0 "pull -r of the whole module" "${CLIENT[@]}" -r "$HOST:data" "$T/whole/"
diff_tree "pull -r of the module" "$SRC" "$T/whole/data/seed"

# ---- 4. single and multiple files -------------------------------------------------
echo "--- 4. pull of files"
expect_rc 0 "pull of one file renamed" \
	"${CLIENT[@]}" "$HOST:data/seed/zz-extra/sub/deeper/random.bin" "$T/single.renamed"
cmp -s "$X/sub/deeper/random.bin" "$T/single.renamed" && [ ! -e "$T/random.bin" ] &&
	pass "pull renamed: content equal, stored under the new name" || fail "pull renamed"

mkdir -p "$T/multi"
expect_rc 0 "pull of several files into a directory" \
	"${CLIENT[@]}" "$HOST:data/seed/zz-extra/sub/file.txt" "$HOST:data/seed/zz-extra/with space" \
	"$HOST:data/seed/zz-extra/-leading-dash" "$HOST:data/seed/zz-extra/new"$'\n'"line" "$T/multi"
cmp -s "$X/sub/file.txt" "$T/multi/file.txt" && cmp -s "$X/with space" "$T/multi/with space" &&
	cmp -s "$X/-leading-dash" "$T/multi/-leading-dash" &&
	cmp -s "$X/new"$'\n'"line" "$T/multi/new"$'\n'"line" &&
	[ "$(find "$T/multi" -mindepth 1 -printf x | wc -c)" -eq 4 ] &&
	pass "pull of several files: exactly the 4 files, equal" ||
	fail "pull of several files: $(ls -A "$T/multi" | tr '\n' ' ')"

mkdir -p "$T/abs"
expect_rc 0 "pull via /ABS/PATH inside the module" \
	"${CLIENT[@]}" "$HOST:$T/mod/seed/zz-extra/$LONG" "$HOST:$T/mod/seed/zz-extra/sparse.img" "$T/abs/"
cmp -s "$X/$LONG" "$T/abs/$LONG" && cmp -s "$X/sparse.img" "$T/abs/sparse.img" &&
	pass "pull via /ABS/PATH: both files equal" || fail "pull via /ABS/PATH: $(ls -A "$T/abs" | head -3)"
mkdir -p "$T/absr"
expect_rc 0 "pull -r via /ABS/PATH of a directory" \
	"${CLIENT[@]}" -r "$HOST:$T/mod/seed/zz-extra" "$T/absr/"
diff_tree "pull -r via /ABS/PATH" "$X" "$T/absr/zz-extra"

# Pushing onto the long name again: the temp name must still fit.
expect_rc 0 "push over an existing 255-byte name" \
	"${CLIENT[@]}" "$X/$LONG" "$HOST:data/seed/zz-extra/"
no_temps "push over a 255-byte name" "$T/mod"

finish
