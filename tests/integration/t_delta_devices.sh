#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --delta onto block devices, and --delta with --partial, real daemons, loop
# devices over files in the test's temp dir (mknod puts one in a module):
#   1. push onto a module's device (larger than the source) whose old content
#      differs in 3 chunks: those chunks' bytes cross (data_bytes), the rest
#      is skipped_bytes; the loop device's write sectors (/sys/block/*/stat)
#      grew by those chunks only; the device equals the source over its
#      length and its bytes past the source's end are untouched
#      a sparse source: zeros go where the source has its hole (a chunk
#      there that held data is zeroed), and the chunks of the hole that read
#      as zeros already take no write
#   1c. with chunk digests (TREE, both ends): the device is read once by the
#      digest pass and the 3 written chunks once more at the commit; an older
#      client: read back whole; identical either way
#   1d. --delta --assume-zero-target onto junk: the unwritten hole is read
#      back at the commit and the copy fails (exit 7)
#   2. the same pulled onto a local device (--write-devices)
#   3. a --delta --partial device push cut half-way (kill -9): the next run
#      keeps what the cut wrote (resumed_bytes), skips the unchanged chunks
#      after it, sends the rest; the device equals the source
#   4. the same for a regular file: a --delta --partial push cut half-way
#      leaves a partial, the next run resumes it and still skips unchanged
#      chunks; identical; no partial left
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))

[ "$(id -u)" -eq 0 ] || skip "loop devices need root"
command -v losetup >/dev/null || skip "losetup is not installed"
command -v jq >/dev/null || skip "jq is not installed"

# new_loop NAME SIZE: a loop device over $T/NAME.back of SIZE bytes; its path in LOOP.
new_loop() {
	truncate -s "$2" "$T/$1.back" || die "truncate $1"
	loop_attach "$T/$1.back"
}


# written DEV: sectors written to DEV so far (its /sys/block stat, field 7).
written() { awk '{ print $7 }' "/sys/block/$(basename "$1")/stat"; }
# read_sectors DEV: sectors read from DEV so far (field 3).
read_sectors() { awk '{ print $3 }' "/sys/block/$(basename "$1")/stat"; }

# change FILE MIB...: 4 KiB of new random bytes inside each of those 1 MiB chunks.
change() {
	local f=$1 m
	shift
	for m in "$@"; do
		dd if=/dev/urandom of="$f" bs=4096 count=1 seek=$((m * 256 + 3)) conv=notrunc \
			status=none || die "dd $f"
	done
}

json_file() { jq -r "select(.event == \"file\") | .$1" "$T/out"; }
json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# wait_jnl DIR: until a journal in DIR/.rdmacp-partial holds a few records (10 s at most).
wait_jnl() {
	local n
	for _ in $(seq 100); do
		n=$(stat -c %s "$1/.rdmacp-partial/"*.jnl 2>/dev/null | head -1)
		[ -n "$n" ] && [ "$n" -gt 300 ] && return 0
		sleep 0.1
	done
	return 1
}

mkdir -p "$T/disks" "$T/local"
setup_standard "" "[disks]" "path = $T/disks" "allow = client" "devices = yes"

SIZE=$((32 * MIB))
head -c $SIZE /dev/urandom >"$T/src.img" || die "random"
head -c $((8 * MIB)) /dev/urandom >"$T/tail.bin" || die "random"

# ---- 1. push onto a device 8 MiB larger than the source, 3 chunks differ ----
new_loop a $((SIZE + 8 * MIB))
DEV_A=$LOOP
cp "$T/src.img" "$T/old.img"
change "$T/old.img" 0 13 31
cat "$T/old.img" "$T/tail.bin" | dd of="$DEV_A" bs=1M oflag=direct status=none ||
	die "fill $DEV_A"
block_node "$T/disks/a" "$DEV_A"
w0=$(written "$DEV_A")
expect_rc 0 "push --delta onto a device" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src.img" "$HOST:disks/a"
w1=$(written "$DEV_A")
cmp -s -n $SIZE "$DEV_A" "$T/src.img" && pass "push: the device equals the source" ||
	fail "push: the device differs"
cmp -s -i $SIZE:0 -n $((8 * MIB)) "$DEV_A" "$T/tail.bin" &&
	pass "push: the device past the source's end is untouched" ||
	fail "push: the device's tail changed"
[ "$(json_file data_bytes)" = $((3 * MIB)) ] && [ "$(json_file skipped_bytes)" = $((29 * MIB)) ] &&
	pass "push: 3 chunks sent, 29 skipped" ||
	fail "push: data_bytes $(json_file data_bytes) skipped_bytes $(json_file skipped_bytes)"
[ "$(json_sum skipped_bytes)" = $((29 * MIB)) ] && pass "push: the summary says the same" ||
	fail "push: summary $(cat "$T/out")"
[ $(((w1 - w0) * 512)) -eq $((3 * MIB)) ] &&
	pass "push: the device took $(((w1 - w0) * 512)) bytes of writes (3 chunks)" ||
	fail "push: the device took $(((w1 - w0) * 512)) bytes of writes, wanted $((3 * MIB))"
[ -b "$T/disks/a" ] && pass "push: the node is still a device" || fail "push: node replaced"

# ---- 1b. a sparse source: zeros the device holds already are not written again ----
truncate -s $SIZE "$T/sparse.img"
dd if=/dev/urandom of="$T/sparse.img" bs=1M count=8 conv=notrunc status=none || die "dd"
dd if=/dev/urandom of="$T/sparse.img" bs=1M count=8 seek=24 conv=notrunc status=none || die "dd"
new_loop s $SIZE
DEV_S=$LOOP
cp "$T/sparse.img" "$T/old.img"
change "$T/old.img" 2 12 # chunk 12 lies in the source's hole: it must become zeros again
dd if="$T/old.img" of="$DEV_S" bs=1M oflag=direct status=none || die "fill $DEV_S"
block_node "$T/disks/s" "$DEV_S"
w0=$(written "$DEV_S")
expect_rc 0 "sparse source: push --delta onto a device" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta "$T/sparse.img" "$HOST:disks/s"
w1=$(written "$DEV_S")
cmp -s "$DEV_S" "$T/sparse.img" && pass "sparse source: the device equals it, zeros in its hole" ||
	fail "sparse source: the device differs"
[ "$(json_file data_bytes)" = $((1 * MIB)) ] && [ "$(json_file zero_bytes)" = $((16 * MIB)) ] &&
	[ "$(json_file skipped_bytes)" = $((15 * MIB)) ] &&
	pass "sparse source: 1 chunk sent, 16 MiB as zeros, 15 MiB unchanged" ||
	fail "sparse source: data $(json_file data_bytes) zeros $(json_file zero_bytes) skipped $(json_file skipped_bytes)"
# The changed chunk and the chunk of the hole that held data: 2 MiB, not the hole's 16.
[ $(((w1 - w0) * 512)) -le $((2 * MIB)) ] && [ $(((w1 - w0) * 512)) -ge $((1 * MIB)) ] &&
	pass "sparse source: the device took $(((w1 - w0) * 512)) bytes of writes" ||
	fail "sparse source: the device took $(((w1 - w0) * 512)) bytes of writes, wanted 1..2 MiB"

# ---- 1c. checked by chunk digests: what the device is read for ----
# Both ends know DELTA SUMS' TREE: the digest pass reads the device once (direct)
# and the commit reads back only the 3 chunks written. An older client (without
# capability 0x1000000): the unchanged chunks are read back into the file's hash
# and the whole device again at the commit. Identical either way.
new_loop t $SIZE
DEV_T=$LOOP
block_node "$T/disks/t" "$DEV_T"
for mode in tree older; do
	cp "$T/src.img" "$T/old.img"
	change "$T/old.img" 4 17 30
	dd if="$T/old.img" of="$DEV_T" bs=1M oflag=direct status=none || die "fill $DEV_T"
	r0=$(read_sectors "$DEV_T")
	if [ $mode = tree ]; then
		expect_rc 0 "$mode: push --delta onto a device" \
			"${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src.img" "$HOST:disks/t"
	else
		RDMACP_TEST_CAPS_OFF=0x1000000 expect_rc 0 "$mode: push --delta onto a device" \
			"${CLIENT[@]}" --json --chunk-size 1M --delta "$T/src.img" "$HOST:disks/t"
	fi
	r1=$(read_sectors "$DEV_T")
	cmp -s "$DEV_T" "$T/src.img" && pass "$mode: the device equals the source" ||
		fail "$mode: the device differs"
	[ "$(json_file data_bytes)" = $((3 * MIB)) ] && pass "$mode: 3 chunks sent" ||
		fail "$mode: data_bytes $(json_file data_bytes)"
	reads=$(((r1 - r0) * 512))
	if [ $mode = tree ]; then
		# The pass's SIZE and the 3 chunks; a little slack for anyone probing the device.
		[ $reads -ge $((SIZE + 3 * MIB)) ] && [ $reads -le $((SIZE + 4 * MIB)) ] &&
			pass "$mode: the device was read for $reads bytes (the digest pass + 3 chunks)" ||
			fail "$mode: the device was read for $reads bytes, wanted $((SIZE + 3 * MIB))"
	else
		[ $reads -ge $((2 * SIZE)) ] &&
			pass "$mode: the device was read for $reads bytes (read back whole)" ||
			fail "$mode: the device was read for $reads bytes, wanted at least $((2 * SIZE))"
	fi
done

# ---- 1d. a chunk left unwritten is still checked: --assume-zero-target over junk ----
# The source's hole is not written (the user says it is zeros there); the device
# holds random bytes in it, which the digest pass saw: those chunks are read back at
# the commit and the copy fails (exit 7), however few bytes crossed.
new_loop j $SIZE
DEV_J=$LOOP
block_node "$T/disks/j" "$DEV_J"
dd if=/dev/urandom of="$DEV_J" bs=1M count=$((SIZE / MIB)) oflag=direct status=none ||
	die "fill $DEV_J"
expect_rc 7 "delta with --assume-zero-target onto a device of random bytes" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta --assume-zero-target "$T/sparse.img" \
	"$HOST:disks/j"
grep -q 'did not read as zeros' "$T/err" && pass "assume-zero: says why" ||
	fail "assume-zero: $(cat "$T/err")"

# ---- 2. pull of that device onto a local one, 2 chunks differ ----
# A device's source length is its whole size: the pulled "file" is source and tail.
cat "$T/src.img" "$T/tail.bin" >"$T/whole.img"
new_loop b $((SIZE + 8 * MIB))
DEV_B=$LOOP
cp "$T/whole.img" "$T/old.img"
change "$T/old.img" 5 35
dd if="$T/old.img" of="$DEV_B" bs=1M oflag=direct status=none || die "fill $DEV_B"
w0=$(written "$DEV_B")
expect_rc 0 "pull --delta onto a local device" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta --write-devices "$HOST:disks/a" "$DEV_B"
w1=$(written "$DEV_B")
cmp -s "$DEV_B" "$T/whole.img" && pass "pull: the device equals the source" ||
	fail "pull: the device differs"
[ "$(json_file data_bytes)" = $((2 * MIB)) ] && [ "$(json_file skipped_bytes)" = $((38 * MIB)) ] &&
	pass "pull: 2 chunks sent, 38 skipped" ||
	fail "pull: data_bytes $(json_file data_bytes) skipped_bytes $(json_file skipped_bytes) ($(cat "$T/err"))"
[ $(((w1 - w0) * 512)) -eq $((2 * MIB)) ] &&
	pass "pull: the device took 2 chunks of writes" ||
	fail "pull: the device took $(((w1 - w0) * 512)) bytes of writes"

# ---- 3. --delta --partial onto a device, cut half-way, resumed ----
BIG=$((64 * MIB))
head -c $BIG /dev/urandom >"$T/big.img" || die "random"
new_loop c $BIG
DEV_C=$LOOP
# Old content: the source with every other chunk changed.
cp "$T/big.img" "$T/old.img"
change "$T/old.img" $(seq 0 2 63)
dd if="$T/old.img" of="$DEV_C" bs=1M oflag=direct status=none || die "fill $DEV_C"
block_node "$T/disks/c" "$DEV_C"
"${CLIENT[@]}" --chunk-size 1M --delta --partial --bwlimit 8M "$T/big.img" "$HOST:disks/c" \
	>/dev/null 2>&1 &
CP=$!
wait_jnl "$T/disks" || fail "device: no journal records after 10 s"
sleep 0.5
kill -9 $CP
wait $CP 2>/dev/null
cmp -s "$DEV_C" "$T/big.img" && fail "device: the cut copy is complete already (too fast?)"
for _ in $(seq 50); do grep -q "device is incomplete" "$T/d.log" && break; sleep 0.1; done
expect_rc 0 "device: the --delta --partial run after the cut" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta --partial "$T/big.img" "$HOST:disks/c"
cmp -s "$DEV_C" "$T/big.img" && pass "device: resumed device identical" ||
	fail "device: resumed device differs"
kept=$(json_sum resumed_bytes)
sent=$(json_sum data_bytes)
same=$(json_sum skipped_bytes)
[ "$kept" -gt 0 ] && [ "$same" -gt 0 ] && [ $((kept + sent + same)) -eq $BIG ] &&
	pass "device: $kept bytes kept, $same unchanged, $sent sent" ||
	fail "device: kept $kept unchanged $same sent $sent: $(cat "$T/out")"
[ ! -e "$T/disks/.rdmacp-partial" ] && pass "device: journal removed" ||
	fail "device: store left: $(ls -A "$T/disks/.rdmacp-partial")"

# ---- 4. --delta --partial onto a regular file, cut half-way, resumed ----
cp "$T/old.img" "$T/mod/big.img"
"${CLIENT[@]}" --chunk-size 1M --delta --partial --bwlimit 8M "$T/big.img" "$HOST:data/" \
	>/dev/null 2>&1 &
CP=$!
wait_jnl "$T/mod" || fail "file: no journal records after 10 s"
sleep 0.5
kill -9 $CP
wait $CP 2>/dev/null
sleep 0.5
ls "$T/mod/.rdmacp-partial/"*.data >/dev/null 2>&1 && pass "file: the cut left a partial" ||
	fail "file: no partial after the cut"
cmp -s "$T/mod/big.img" "$T/old.img" && pass "file: the old file is still there, unchanged" ||
	fail "file: the old file changed before the commit"
expect_rc 0 "file: the --delta --partial run after the cut" \
	"${CLIENT[@]}" --json --chunk-size 1M --delta --partial "$T/big.img" "$HOST:data/"
cmp -s "$T/mod/big.img" "$T/big.img" && pass "file: resumed file identical" ||
	fail "file: resumed file differs"
kept=$(json_sum resumed_bytes)
sent=$(json_sum data_bytes)
same=$(json_sum skipped_bytes)
[ "$kept" -gt 0 ] && [ "$same" -gt 0 ] && [ $((kept + sent + same)) -eq $BIG ] &&
	pass "file: $kept bytes kept, $same unchanged, $sent sent" ||
	fail "file: kept $kept unchanged $same sent $sent: $(cat "$T/out")"
[ "$(json_file action)" = resumed ] && [ "$(json_file skipped_bytes)" = "$same" ] &&
	[ "$(json_file resumed_bytes)" = "$kept" ] &&
	pass "file: its resumed event says the same" || fail "file: event: $(cat "$T/out")"
[ ! -e "$T/mod/.rdmacp-partial" ] && pass "file: no partial left" ||
	fail "file: store left: $(ls -A "$T/mod/.rdmacp-partial")"

grep -qE "killed by signal|AddressSanitizer|LeakSanitizer|runtime error" "$T/d.log" &&
	fail "daemon log: $(grep -E "killed by signal|Sanitizer|runtime error" "$T/d.log" | head -3)"
finish
