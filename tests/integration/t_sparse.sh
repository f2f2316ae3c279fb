#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sparse files and zero extents (ZEROS, capability 0x4000), real daemons:
#   1. push of a 1 GiB sparse file with 3 data extents (not on chunk
#      boundaries): byte-identical, the same SEEK_DATA/SEEK_HOLE map and du,
#      payload about the 3 extents (--json bytes = data_bytes, zero_bytes the
#      rest, in the file event and the summary)
#   2. the same pulled
#   3. a file of written zeros (not sparse): identical, no payload, no blocks
#   4. an existing non-sparse destination replaced by a sparse source:
#      identical, with the source's holes
#   5. -r: a tree of sparse and zero files, pushed and pulled
#   6. --partial: a sparse push cut half-way, resumed: identical, holes kept
#   7. an old daemon (no 0x4000 in HELLO): a push still gets a full, correct
#      copy (all payload, no zeros); and an old client pulling from ours
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
GIB=$((1 << 30))
MIB=$((1 << 20))
EXTENTS="$HERE/../tools/extents.py"

command -v jq >/dev/null || skip "jq not installed"
mkdir -p "$T/src" "$T/pull"
# Holes need a file system that has them (tmpfs, ext4, xfs, btrfs do).
truncate -s 16M "$T/src/probe" || die "truncate"
[ "$(python3 "$EXTENTS" "$T/src/probe")" = "size $((16 * MIB))" ] ||
	skip "the temp directory's file system has no holes"
rm -f "$T/src/probe"
setup_standard

# make_sparse FILE SIZE OFF_4K... : SIZE bytes of hole with 4 MiB of random data at each offset (in 4 KiB blocks).
make_sparse() {
	local f=$1 size=$2 o
	shift 2
	rm -f "$f"
	truncate -s "$size" "$f" || die "truncate $f"
	for o in "$@"; do
		dd if=/dev/urandom of="$f" bs=4k count=1024 seek="$o" conv=notrunc status=none ||
			die "dd $f"
	done
}

json_file() { jq -r "select(.event == \"file\" and .name == \"$1\") | .$2" "$T/out"; }
json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# same_sparse DESC SRC DST: byte-identical, the same data map, the same blocks used.
same_sparse() {
	cmp -s "$2" "$3" && pass "$1: byte-identical" || fail "$1: contents differ"
	python3 "$EXTENTS" "$2" >"$T/a.map"
	python3 "$EXTENTS" "$3" >"$T/b.map"
	diff -q "$T/a.map" "$T/b.map" >/dev/null && pass "$1: same SEEK_DATA/SEEK_HOLE map" ||
		fail "$1: maps differ: $(diff "$T/a.map" "$T/b.map" | head -5 | tr '\n' ' ')"
	# The same data blocks; the file system's own extent blocks may differ by a few.
	local a b
	a=$(du -k "$2" | cut -f1)
	b=$(du -k "$3" | cut -f1)
	[ "$b" -le $((a + 64)) ] && [ "$a" -le $((b + 64)) ] && pass "$1: same du ($a, $b KiB)" ||
		fail "$1: du $a vs $b KiB"
}

# zeros_hole DESC SRC DST: written zeros arrive identical, as a hole.
zeros_hole() {
	cmp -s "$2" "$3" && pass "$1: identical" || fail "$1: differ"
	[ "$(python3 "$EXTENTS" "$3")" = "size $(stat -c %s "$2")" ] && pass "$1: a hole, no data" ||
		fail "$1: data in $(python3 "$EXTENTS" "$3" | head -3 | tr '\n' ' ')"
	[ "$(du -k "$3" | cut -f1)" -le 64 ] && pass "$1: no blocks" ||
		fail "$1: $(du -k "$3" | cut -f1) KiB used"
}

# payload_about DESC NAME SIZE DATA: the file event and summary say DATA bytes (give or
# take a chunk at each end of 3 extents) crossed, the rest went as zeros.
payload_about() {
	local b z sb sz
	b=$(json_file "$2" bytes)
	z=$(json_file "$2" zero_bytes)
	[ "$(json_file "$2" data_bytes)" = "$b" ] && pass "$1: data_bytes = bytes" ||
		fail "$1: data_bytes $(json_file "$2" data_bytes), bytes $b"
	[ "$b" -ge "$4" ] && [ "$b" -le $(($4 + 6 * MIB)) ] &&
		pass "$1: payload $b bytes, about the data ($4)" ||
		fail "$1: payload $b, data $4"
	[ $((b + z)) -eq "$3" ] && pass "$1: zero_bytes $z is the rest" ||
		fail "$1: bytes $b + zero_bytes $z != $3"
	sb=$(json_sum data_bytes)
	sz=$(json_sum zero_bytes)
	[ "$(json_sum bytes)" = "$b" ] && [ "$sb" = "$b" ] && [ "$sz" = "$z" ] &&
		pass "$1: summary bytes, data_bytes, zero_bytes" ||
		fail "$1: summary bytes $(json_sum bytes) data_bytes $sb zero_bytes $sz"
}

# ---- 1. push of a 1 GiB sparse file ------------------------------------------------
make_sparse "$T/src/disk.img" $GIB 2563 128003 230411
expect_rc 0 "sparse push" "${CLIENT[@]}" --json "$T/src/disk.img" "$HOST:data/"
same_sparse "sparse push" "$T/src/disk.img" "$T/mod/disk.img"
payload_about "sparse push" disk.img $GIB $((12 * MIB))

# ---- 2. pulled -----------------------------------------------------------------------
expect_rc 0 "sparse pull" "${CLIENT[@]}" --json "$HOST:data/disk.img" "$T/pull/"
same_sparse "sparse pull" "$T/src/disk.img" "$T/pull/disk.img"
payload_about "sparse pull" disk.img $GIB $((12 * MIB))

# ---- 3. written zeros ------------------------------------------------------------------
head -c $((64 * MIB)) /dev/zero >"$T/src/zeros"
expect_rc 0 "written zeros" "${CLIENT[@]}" --json "$T/src/zeros" "$HOST:data/"
zeros_hole "written zeros" "$T/src/zeros" "$T/mod/zeros"
[ "$(json_file zeros bytes)" = 0 ] && [ "$(json_file zeros zero_bytes)" = $((64 * MIB)) ] &&
	pass "written zeros: no payload" ||
	fail "written zeros: bytes $(json_file zeros bytes) zero_bytes $(json_file zeros zero_bytes)"

# ---- 4. a dense destination replaced by a sparse source ----------------------------
make_sparse "$T/src/over.img" $((256 * MIB)) 100 40000
head -c $((256 * MIB)) /dev/urandom >"$T/mod/over.img"
expect_rc 0 "over a dense file" "${CLIENT[@]}" --json "$T/src/over.img" "$HOST:data/"
same_sparse "over a dense file" "$T/src/over.img" "$T/mod/over.img"

# ---- 5. -r trees ------------------------------------------------------------------------
mkdir -p "$T/src/tree/sub"
make_sparse "$T/src/tree/a.img" $((128 * MIB)) 7 20000
make_sparse "$T/src/tree/sub/b.img" $((64 * MIB + 12345)) 3
head -c $((8 * MIB)) /dev/zero >"$T/src/tree/sub/z"
echo small >"$T/src/tree/small"
expect_rc 0 "tree push" "${CLIENT[@]}" --json -r "$T/src/tree" "$HOST:data/"
for f in a.img sub/b.img small; do
	same_sparse "tree push $f" "$T/src/tree/$f" "$T/mod/tree/$f"
done
zeros_hole "tree push sub/z" "$T/src/tree/sub/z" "$T/mod/tree/sub/z"
expect_rc 0 "tree pull" "${CLIENT[@]}" --json -r "$HOST:data/tree" "$T/pull/"
for f in a.img sub/b.img small; do
	same_sparse "tree pull $f" "$T/src/tree/$f" "$T/pull/tree/$f"
done
zeros_hole "tree pull sub/z" "$T/src/tree/sub/z" "$T/pull/tree/sub/z"

# ---- 6. --partial, cut and resumed ---------------------------------------------------
# 256 MiB with 1 MiB of data every 8 MiB: 32 MiB of payload at 8 MiB/s.
rm -f "$T/src/cut.img"
truncate -s $((256 * MIB)) "$T/src/cut.img"
for i in $(seq 0 31); do
	dd if=/dev/urandom of="$T/src/cut.img" bs=1M count=1 seek=$((i * 8 + 3)) conv=notrunc \
		status=none
done
"${CLIENT[@]}" -q --partial --bwlimit 8M "$T/src/cut.img" "$HOST:data/" >/dev/null 2>&1 &
c=$!
half=0
for _ in $(seq 1 400); do
	d=$(ls "$T/mod/.rdmacp-partial/"*.data 2>/dev/null | head -1)
	if [ -n "$d" ] && [ "$(stat -c %s "$d")" -ge $((128 * MIB)) ]; then
		half=1
		break
	fi
	sleep 0.05
done
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
[ $half = 1 ] && pass "partial: cut half-way" || fail "partial: never reached half the file"
sleep 0.5
expect_rc 0 "partial resumed" "${CLIENT[@]}" --json --partial "$T/src/cut.img" "$HOST:data/"
[ "$(json_file cut.img action)" = resumed ] && pass "partial: resumed" ||
	fail "partial: action $(json_file cut.img action)"
kept=$(json_file cut.img resumed_bytes)
sent=$(json_file cut.img bytes)
zero=$(json_file cut.img zero_bytes)
[ "$kept" -ge $((64 * MIB)) ] && pass "partial: $kept bytes kept" || fail "partial: kept $kept"
[ $((kept + sent + zero)) -eq $((256 * MIB)) ] && [ "$sent" -le $((20 * MIB)) ] &&
	pass "partial: sent $sent + zeros $zero + kept = the file" ||
	fail "partial: sent $sent, zeros $zero, kept $kept"
same_sparse "partial" "$T/src/cut.img" "$T/mod/cut.img"

# ---- 7. old peers ---------------------------------------------------------------------
OLD_PORT=$(free_port)
mkdir -p "$T/oldmod"
write_conf "$T/old.conf" "$OLD_PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[data]\npath = %s\nallow = client\n' "$T/oldmod" | as_root_modules >>"$T/old.conf"
RDMACP_TEST_CAPS_OFF=0x4000 start_daemon "$T/old.conf" "$T/old.log" "$OLD_PORT"
OLD=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$OLD_PORT")
expect_rc 0 "old daemon push" "${OLD[@]}" --json "$T/src/over.img" "$HOST:data/"
cmp -s "$T/src/over.img" "$T/oldmod/over.img" && pass "old daemon: identical" ||
	fail "old daemon: differs"
[ "$(json_file over.img bytes)" = $((256 * MIB)) ] && [ "$(json_sum zero_bytes)" = 0 ] &&
	pass "old daemon: all of it sent as data" ||
	fail "old daemon: bytes $(json_file over.img bytes) zero_bytes $(json_sum zero_bytes)"
rm -f "$T/pull/over.img"
RDMACP_TEST_CAPS_OFF=0x4000 expect_rc 0 "old client pull" "${CLIENT[@]}" --json \
	"$HOST:data/over.img" "$T/pull/"
cmp -s "$T/src/over.img" "$T/pull/over.img" && pass "old client: identical" ||
	fail "old client: differs"
[ "$(json_sum bytes)" = $((256 * MIB)) ] && [ "$(json_sum zero_bytes)" = 0 ] &&
	pass "old client: all of it sent as data" ||
	fail "old client: bytes $(json_sum bytes) zero_bytes $(json_sum zero_bytes)"

[ "$FAILS" -eq 0 ] || exit 1
echo "all sparse tests passed"
