#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What a fan-out carries (issue 36 item 5): rdmacp SRC H1:M/P H2:M/P H3:M/P
# through three real relaying daemons on 127.0.0.2, .3, .4 (relay_lib.sh):
#   1. a single file and a tree (-r -a), in clear and sealed: byte-exact
#      at every hop, modes and times kept; each hop's log says its lanes
#      were sealed, or in clear, as asked
#   2. a sparse image: byte-exact and sparse at every hop (du)
#   3. block devices (loop devices, nodes in 'devices = yes' modules): an
#      image onto a device at every hop, and a device as the source
#   4. --skip quick where each destination holds a different old version
#      (the first the same tree, the second an older file, the third
#      nothing): the client sends nothing, every hop ends byte-exact
#   5. --delta where each destination holds a different old version: the
#      client sends a fraction of the file, every hop ends byte-exact
#   6. -X -A: user.* attributes and ACLs (access and default) on files and
#      directories of a tree, and on a single file, the same at every hop
#      (read back with Python's os.listxattr/getxattr: getfattr and getfacl
#      need not be installed); and again into the same tree with --skip
#      quick, after the source's attributes changed (kept entries brought in
#      line at every hop; -v itemizes the kept directory's changed attribute)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/relay_lib.sh"

MIB=$((1 << 20))
relay_daemons 2 3 4
HOPS="2 3 4"

# to_all SRC... REL: pushes to data/REL at the three destinations (extra options before).
to_all() {
	local rel=${*: -1}
	set -- "${@:1:$#-1}"
	"${CLIENT[@]}" "$@" "127.0.0.2:data/$rel" "127.0.0.3:data/$rel" "127.0.0.4:data/$rel"
}

# summary_bytes FILE: the --json summary's bytes (what left the client).
summary_bytes() { jq -r 'select(.event == "summary") | .bytes' "$1"; }

mkdir -p "$T/src/tree/sub/deeper"
head -c $((5 * MIB)) /dev/urandom >"$T/src/one.bin"
for i in 1 2 3 4 5; do head -c $((i * 7777)) /dev/urandom >"$T/src/tree/f$i"; done
echo small >"$T/src/tree/sub/deeper/leaf"
: >"$T/src/tree/sub/empty"
ln -s f1 "$T/src/tree/link"
chmod 640 "$T/src/tree/f2"
touch -d '2001-02-03 04:05:06' "$T/src/tree/f3" "$T/src/tree/sub/deeper"

for mode in clear sealed; do
	echo "--- 1. a file and a tree, $mode"
	opt=--no-encrypt want="in clear"
	[ $mode = sealed ] && opt=--encrypt want="encrypted"
	expect_rc 0 "1: $mode: a single file" to_all --transport tcp "$opt" "$T/src/one.bin" \
		"$mode.bin"
	expect_rc 0 "1: $mode: a tree (-r -a)" to_all --transport tcp "$opt" -a "$T/src/tree" \
		"$mode/"
	for n in $HOPS; do
		cmp -s "$T/src/one.bin" "$T/m$n/data/$mode.bin" &&
			pass "1: $mode: 127.0.0.$n: the file byte-exact" ||
			fail "1: $mode: 127.0.0.$n: the file differs or is missing"
		expect_same_tree "1: $mode: 127.0.0.$n: the tree" "$T/src/tree" \
			"$T/m$n/data/$mode/tree"
		same_meta "1: $mode: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/$mode/tree"
		got=$(grep "push to data: .* tcp lanes" "$T/d$n.log" | tail -1)
		[[ $got == *"$want"* ]] && pass "1: $mode: 127.0.0.$n's lanes $want" ||
			fail "1: $mode: 127.0.0.$n's lanes: '$got'"
	done
done

echo "--- 2. a sparse image, sparse at every hop"
truncate -s $((256 * MIB)) "$T/src/sparse.img"
for off in 1 100 200; do
	head -c $MIB /dev/urandom | dd of="$T/src/sparse.img" bs=$MIB seek=$off conv=notrunc \
		status=none
done
expect_rc 0 "2: the sparse image to three" to_all "$T/src/sparse.img" s.img
for n in $HOPS; do
	cmp -s "$T/src/sparse.img" "$T/m$n/data/s.img" && pass "2: 127.0.0.$n: byte-exact" ||
		fail "2: 127.0.0.$n: differs"
	kib=$(du -k "$T/m$n/data/s.img" | cut -f1)
	[ "$kib" -le $((16 * 1024)) ] && pass "2: 127.0.0.$n: sparse ($kib KiB on disk of 256 MiB)" ||
		fail "2: 127.0.0.$n: $kib KiB on disk: not sparse"
done

echo "--- 3. block devices"
if [ "$(id -u)" -ne 0 ] || ! command -v losetup >/dev/null; then
	echo "3: skipped: loop devices need root and losetup"
else
	SIZE=$((24 * MIB))
	head -c $SIZE /dev/urandom >"$T/src.img"
	for n in $HOPS; do
		truncate -s $SIZE "$T/back$n" && loop_attach "$T/back$n"
		block_node "$T/m$n/dev/d" "$LOOP"
		eval "DEV$n=$LOOP"
	done
	truncate -s $SIZE "$T/backsrc" && loop_attach "$T/backsrc"
	DEV_SRC=$LOOP
	dd if="$T/src.img" of="$DEV_SRC" bs=1M oflag=direct status=none || die "fill $DEV_SRC"
	expect_rc 0 "3: an image onto a device at every hop" "${CLIENT[@]}" "$T/src.img" \
		127.0.0.2:dev/d 127.0.0.3:dev/d 127.0.0.4:dev/d
	for n in $HOPS; do
		eval "dev=\$DEV$n"
		cmp -s "$dev" "$T/src.img" && pass "3: 127.0.0.$n: the device holds the image" ||
			fail "3: 127.0.0.$n: the device differs"
		[ -b "$T/m$n/dev/d" ] && pass "3: 127.0.0.$n: still a device node" ||
			fail "3: 127.0.0.$n: the node was replaced"
	done
	expect_rc 0 "3: a device as the source" to_all "$DEV_SRC" dev.img
	for n in $HOPS; do
		cmp -s "$T/m$n/data/dev.img" "$T/src.img" &&
			pass "3: 127.0.0.$n: an image of the device" ||
			fail "3: 127.0.0.$n: the image differs"
	done
fi

echo "--- 4. --skip quick, a different old version at each destination"
mkdir -p "$T/m2/data/k" "$T/m3/data/k"
cp -a "$T/src/tree" "$T/m2/data/k/"
cp -a "$T/src/tree" "$T/m3/data/k/"
head -c 999 /dev/urandom >"$T/m3/data/k/tree/f4"
touch -d '1999-01-01' "$T/m3/data/k/tree/f4"
to_all --json -a --skip quick "$T/src/tree" k/ >"$T/k.json" 2>"$T/k.err"
rc=$?
[ "$rc" -eq 0 ] && pass "4: exit 0" || fail "4: exit $rc: $(tail -3 "$T/k.err")"
for n in $HOPS; do
	expect_same_tree "4: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/k/tree"
	same_meta "4: 127.0.0.$n" "$T/src/tree" "$T/m$n/data/k/tree"
done
sent=$(summary_bytes "$T/k.json")
[ "$sent" = 0 ] && pass "4: the first hop had it all: the client sent nothing" ||
	fail "4: the client sent '$sent' bytes"

echo "--- 5. --delta, a different old version at each destination"
head -c $((32 * MIB)) /dev/urandom >"$T/src/big"
cp "$T/src/big" "$T/m2/data/big"
cp "$T/src/big" "$T/m3/data/big"
# The first hop: an old version with 64 KiB changed at 3 MiB; the second: at 20 MiB, and
# longer; the third: none.
head -c 65536 /dev/urandom | dd of="$T/m2/data/big" bs=64K seek=48 conv=notrunc status=none
head -c 65536 /dev/urandom | dd of="$T/m3/data/big" bs=64K seek=320 conv=notrunc status=none
head -c $MIB /dev/urandom >>"$T/m3/data/big"
to_all --json --delta "$T/src/big" big >"$T/dl.json" 2>"$T/dl.err"
rc=$?
[ "$rc" -eq 0 ] && pass "5: exit 0" || fail "5: exit $rc: $(tail -3 "$T/dl.err")"
for n in $HOPS; do
	cmp -s "$T/src/big" "$T/m$n/data/big" && pass "5: 127.0.0.$n: byte-exact" ||
		fail "5: 127.0.0.$n: differs"
done
sent=$(summary_bytes "$T/dl.json")
[ -n "$sent" ] && [ "$sent" -lt $((8 * MIB)) ] &&
	pass "5: the client sent $sent bytes of a 32 MiB file (what the first hop lacked)" ||
	fail "5: the client sent '$sent' bytes"

echo "--- 6. -X -A: attributes and ACLs at every hop"
# xdump DIR: "path name hex-value" for every user.* and ACL attribute beneath DIR.
xdump() {
	python3 - "$1" <<'PY'
import os, sys
root = sys.argv[1]
for dp, dn, fn in os.walk(root):
    for n in sorted([""] + fn):
        p = os.path.join(dp, n) if n else dp
        if os.path.islink(p):
            continue
        for a in sorted(os.listxattr(p)):
            if a.startswith("user.") or a.startswith("system.posix_acl_"):
                print(os.path.relpath(p, root), a, os.getxattr(p, a).hex())
PY
}
touch "$T/xprobe"
if ! python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.p", b"1")' "$T/xprobe" \
	2>/dev/null; then
	echo "6: skipped: the file system of $T keeps no user.* attributes"
else
	mkdir -p "$T/src/xt/sub"
	python3 - "$T/src/xt" <<'PY' || die "could not make the -X -A source"
import os, struct, sys
root, U = sys.argv[1], 0xffffffff
def acl(*ents):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in ents)
def w(p, data):
    with open(os.path.join(root, p), "wb") as f:
        f.write(data)
    return os.path.join(root, p)
a = w("a.bin", os.urandom(3 << 20))
os.setxattr(a, "user.color", b"blue")
os.setxattr(a, "user.bin", b"\0\1\2\0\xff" * 100)
b = w("sub/b", b"bee")
os.setxattr(b, "system.posix_acl_access",
            acl((1, 6, U), (2, 6, 1234), (4, 4, U), (8, 4, 999), (0x10, 6, U), (0x20, 0, U)))
os.setxattr(b, "user.b", b"two")
for i in range(300):  # sub's attributes then come in an earlier FILES batch than some files
    w("sub/n%03d" % i, b"n")
sub = os.path.join(root, "sub")
os.setxattr(sub, "user.dirattr", b"on a directory")
os.setxattr(sub, "system.posix_acl_access",
            acl((1, 7, U), (2, 5, 1234), (4, 5, U), (0x10, 7, U), (0x20, 0, U)))
os.setxattr(sub, "system.posix_acl_default",
            acl((1, 7, U), (2, 7, 4321), (4, 5, U), (0x10, 7, U), (0x20, 5, U)))
os.setxattr(root, "user.top", b"the tree's own")
PY
	xdump "$T/src/xt" >"$T/x.src"
	grep -q posix_acl_default "$T/x.src" && grep -q "sub/b system.posix_acl_access" "$T/x.src" ||
		die "6: the source's ACLs did not take: $(head -3 "$T/x.src")"
	expect_rc 0 "6: a tree with -X -A" to_all --transport tcp -a -X -A "$T/src/xt" x/
	expect_rc 0 "6: a single file with -X" to_all -X "$T/src/xt/a.bin" xa.bin
	python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.color").hex())' \
		"$T/src/xt/a.bin" >"$T/xa.src"
	for n in $HOPS; do
		expect_same_tree "6: 127.0.0.$n: the tree" "$T/src/xt" "$T/m$n/data/x/xt"
		same_meta "6: 127.0.0.$n" "$T/src/xt" "$T/m$n/data/x/xt"
		xdump "$T/m$n/data/x/xt" >"$T/x.$n"
		diff "$T/x.src" "$T/x.$n" >"$T/x.diff" &&
			pass "6: 127.0.0.$n: every attribute and ACL as the source's" ||
			fail "6: 127.0.0.$n: attributes differ: $(head -4 "$T/x.diff" | tr '\n' ' ')"
		got=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.color").hex())' \
			"$T/m$n/data/xa.bin" 2>&1)
		[ "$got" = "$(cat "$T/xa.src")" ] && pass "6: 127.0.0.$n: the single file's attribute" ||
			fail "6: 127.0.0.$n: the single file: '$got'"
	done
	echo "--- 6. -X -A with --skip quick: kept entries brought in line at every hop"
	python3 - "$T/src/xt" <<'PY' || die "could not change the source's attributes"
import os, sys
root = sys.argv[1]
os.setxattr(os.path.join(root, "a.bin"), "user.color", b"green")
os.removexattr(os.path.join(root, "sub/b"), "user.b")
os.setxattr(os.path.join(root, "sub"), "user.dirattr", b"changed")
PY
	xdump "$T/src/xt" >"$T/x.src"
	to_all --transport tcp -a -X -A --skip quick -v "$T/src/xt" x/ >"$T/xk.out" 2>"$T/xk.err"
	rc=$?
	[ "$rc" -eq 0 ] && pass "6: --skip quick: exit 0" ||
		fail "6: --skip quick: exit $rc: $(tail -3 "$T/xk.err")"
	# The first hop's answers: the kept directory's changed attribute itemized (capability 48).
	grep -q '^\.d\.\.\.\.\.\.\.\.x .*xt/sub/\?$' "$T/xk.out" "$T/xk.err" &&
		pass "6: --skip quick -v: sub itemized .d........x" ||
		fail "6: --skip quick -v: no .d........x line for sub: $(cat "$T/xk.out" "$T/xk.err")"
	for n in $HOPS; do
		xdump "$T/m$n/data/x/xt" >"$T/x.$n"
		diff "$T/x.src" "$T/x.$n" >"$T/x.diff" &&
			pass "6: --skip quick: 127.0.0.$n: attributes brought in line" ||
			fail "6: --skip quick: 127.0.0.$n: $(head -4 "$T/x.diff" | tr '\n' ' ')"
	done
fi

finish
