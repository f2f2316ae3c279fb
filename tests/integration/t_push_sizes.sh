#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Push: file sizes around every boundary (0, 1, page, packed, chunk; the
# receiver writes whole pages direct from just past the packed size), a 300 MiB file,
# a sparse file, 2000 small files in one command, rename of a single file,
# into an existing / a not-yet-existing directory, 1 and 4 lanes. Every file
# is compared byte for byte with cmp, and no temp file (".*.rdmacp.*") may
# remain in the module afterwards.
#
# Sizes stay small on purpose to keep CI time low: "several GiB" files belong
# in the benchmark (bench/), not here.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1

# rand_file PATH SIZE: SIZE random bytes.
rand_file() {
	head -c "$2" /dev/urandom >"$1" || die "cannot write $1"
}

# check_same DESC SRC DST: byte-for-byte equal (cmp) and a regular file.
check_same() {
	local desc=$1 src=$2 dst=$3
	if [ -L "$dst" ] || [ ! -f "$dst" ]; then
		fail "$desc: $dst missing or not a regular file"
	elif ! cmp -s "$src" "$dst"; then
		fail "$desc: $dst differs from $src ($(cmp "$src" "$dst" 2>&1 | head -1))"
	else
		pass "$desc: $(basename "$dst") ($(stat -c %s "$dst") bytes) identical"
	fi
}

# no_temps DESC: no ".*.rdmacp.*" anywhere in the module.
no_temps() {
	local left
	left=$(find "$T/mod" -name '.*.rdmacp.*' 2>/dev/null | head -5)
	if [ -n "$left" ]; then
		fail "$1: temp files left in the module: $left"
	else
		pass "$1: no temp files left"
	fi
}

setup_standard
mkdir -p "$T/src"

# ---- 1. sizes around page and chunk boundaries, --chunk-size 64K --------
K=1024
C=$((64 * K))
SIZES64=(0 1 4095 4096 4097 $((C - 1)) $C $((C + 1)) $((3 * C)) $((3 * C + 7)))
files=()
for s in "${SIZES64[@]}"; do
	rand_file "$T/src/s64_$s" "$s"
	files+=("$T/src/s64_$s")
done
expect_rc 0 "sizes around 4K and 64K chunk boundaries, --chunk-size 64K" \
	"${CLIENT[@]}" -q --chunk-size 64K "${files[@]}" "$HOST:data/c64/"
for s in "${SIZES64[@]}"; do
	check_same "chunk 64K" "$T/src/s64_$s" "$T/mod/c64/s64_$s"
done

# ---- 2. the same kind of boundaries with the default 1M chunk ------------
M=$((1024 * 1024))
SIZES1M=(0 1 4095 4096 4097 $((256 * 1024)) $((256 * 1024 + 1)) 300000 409600 $((M - 4095)) $((M - 1)) $M $((M + 1)) $((5 * M + 3)))
files=()
for s in "${SIZES1M[@]}"; do
	rand_file "$T/src/s1m_$s" "$s"
	files+=("$T/src/s1m_$s")
done
expect_rc 0 "sizes around 4K and the default 1M chunk" \
	"${CLIENT[@]}" -q "${files[@]}" "$HOST:data/c1m/"
for s in "${SIZES1M[@]}"; do
	check_same "chunk 1M" "$T/src/s1m_$s" "$T/mod/c1m/s1m_$s"
done

# ---- 3. one file at a time, each size alone (a session per file) --------
for s in 0 1 4097 $((C + 1)); do
	expect_rc 0 "single file of $s bytes, --chunk-size 64K" \
		"${CLIENT[@]}" -q --chunk-size 64K "$T/src/s64_$s" "$HOST:data/single/"
	check_same "single $s" "$T/src/s64_$s" "$T/mod/single/s64_$s"
done

# ---- 4. a 300 MiB file (several GiB: see bench/) --------------------------
rand_file "$T/src/big" $((300 * M))
expect_rc 0 "300 MiB file" "${CLIENT[@]}" -q "$T/src/big" "$HOST:data/big/"
check_same "300 MiB" "$T/src/big" "$T/mod/big/big"
rm -f "$T/mod/big/big"

# ---- 5. a sparse file: 200 MiB of holes with a few written blocks ---------
truncate -s 200M "$T/src/sparse"
for off in 0 4097 $((1 * M - 3)) $((77 * M + 12345)) $((200 * M - 100)); do
	head -c 100 /dev/urandom | dd of="$T/src/sparse" bs=1 seek="$off" conv=notrunc status=none
done
[ "$(stat -c %s "$T/src/sparse")" -eq $((200 * M)) ] || die "sparse source has the wrong size"
expect_rc 0 "sparse 200 MiB file" "${CLIENT[@]}" -q "$T/src/sparse" "$HOST:data/sparse/"
check_same "sparse" "$T/src/sparse" "$T/mod/sparse/sparse"
rm -f "$T/mod/sparse/sparse"

# ---- 6. 2000 files of 4 KiB in one command --------------------------------
mkdir -p "$T/many"
head -c $((2000 * 4096)) /dev/urandom >"$T/many.bin"
(cd "$T/many" && split -b 4096 -a 4 -d "$T/many.bin" f) || die "split"
rm -f "$T/many.bin"
n=$(find "$T/many" -type f | wc -l)
[ "$n" -eq 2000 ] || die "expected 2000 small source files, made $n"
expect_rc 0 "2000 x 4 KiB files in one command" \
	"${CLIENT[@]}" -q "$T/many"/f* "$HOST:data/many/"
got=$(find "$T/mod/many" -type f 2>/dev/null | wc -l)
if [ "$got" -ne 2000 ]; then
	fail "2000 small files: $got arrived"
elif ! diff -r "$T/many" "$T/mod/many" >"$T/diff" 2>&1; then
	fail "2000 small files: contents differ: $(head -3 "$T/diff")"
else
	pass "2000 small files: all 2000 present and identical (cmp via diff -r)"
fi

# ---- 7. a single file renamed: rdmacp a host:data/newname -----------------
expect_rc 0 "single file renamed" "${CLIENT[@]}" -q "$T/src/s64_4097" "$HOST:data/newname"
check_same "renamed" "$T/src/s64_4097" "$T/mod/newname"
[ ! -e "$T/mod/s64_4097" ] || fail "renamed: the source name also appeared in the module"
# Renamed into an existing subdirectory's file name.
mkdir -p "$T/mod/sub"
expect_rc 0 "single file renamed inside a subdirectory" \
	"${CLIENT[@]}" -q "$T/src/s64_1" "$HOST:data/sub/renamed2"
check_same "renamed in sub" "$T/src/s64_1" "$T/mod/sub/renamed2"
# Overwrite an existing file of another size.
expect_rc 0 "single file renamed over an existing file" \
	"${CLIENT[@]}" -q "$T/src/s64_$((C + 1))" "$HOST:data/newname"
check_same "renamed over existing" "$T/src/s64_$((C + 1))" "$T/mod/newname"

# ---- 8. into an existing subdirectory (with and without the slash) -------
mkdir -p "$T/mod/exist/deeper"
expect_rc 0 "into an existing subdirectory, no trailing slash" \
	"${CLIENT[@]}" -q "$T/src/s64_4096" "$HOST:data/exist"
check_same "existing dir" "$T/src/s64_4096" "$T/mod/exist/s64_4096"
expect_rc 0 "into an existing nested subdirectory, trailing slash" \
	"${CLIENT[@]}" -q "$T/src/s64_4095" "$T/src/s64_4096" "$HOST:data/exist/deeper/"
check_same "existing nested dir" "$T/src/s64_4095" "$T/mod/exist/deeper/s64_4095"
check_same "existing nested dir" "$T/src/s64_4096" "$T/mod/exist/deeper/s64_4096"

# ---- 9. a destination with a trailing slash that does not exist yet -------
expect_rc 0 "trailing slash, directory does not exist yet" \
	"${CLIENT[@]}" -q "$T/src/s64_4097" "$HOST:data/fresh/"
if [ -d "$T/mod/fresh" ] && [ ! -L "$T/mod/fresh" ]; then
	pass "trailing slash: directory created"
else
	fail "trailing slash: $T/mod/fresh was not created as a directory"
fi
check_same "fresh dir" "$T/src/s64_4097" "$T/mod/fresh/s64_4097"
expect_rc 0 "trailing slash, nested directories do not exist yet" \
	"${CLIENT[@]}" -q "$T/src/s64_4097" "$HOST:data/fresh2/a/b/"
check_same "fresh nested dirs" "$T/src/s64_4097" "$T/mod/fresh2/a/b/s64_4097"

# ---- 10. 1 and 4 lanes -----------------------------------------------------
rand_file "$T/src/lanes" $((20 * M + 12345))
for l in 1 4; do
	expect_rc 0 "$l lane(s), 64K chunks" \
		"${CLIENT[@]}" -q --lanes "$l" --chunk-size 64K "$T/src/lanes" "$T/src/s64_$((C + 1))" \
		"$HOST:data/lanes$l/"
	check_same "$l lane(s)" "$T/src/lanes" "$T/mod/lanes$l/lanes"
	check_same "$l lane(s)" "$T/src/s64_$((C + 1))" "$T/mod/lanes$l/s64_$((C + 1))"
	expect_rc 0 "$l lane(s), default chunk" \
		"${CLIENT[@]}" -q --lanes "$l" "$T/src/lanes" "$HOST:data/lanes${l}_1m"
	check_same "$l lane(s), 1M" "$T/src/lanes" "$T/mod/lanes${l}_1m"
done

# ---- no temp files anywhere ------------------------------------------------
no_temps "after all pushes"

finish
