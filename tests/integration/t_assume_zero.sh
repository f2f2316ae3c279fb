#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --assume-zero-target (OPEN flag 0x20000, capability 0x100000) and the zeros a
# device target gets without it, on loop devices over files in the test's temp
# dir (nodes made with mknod put them in a 'devices = yes' module):
#   1. a sparse image pushed onto a zeroed device with the option: cmp
#      identical, zero_bytes and data_bytes as without it, and only about the
#      data written to the device (sectors written in /sys/block/loopN/stat),
#      where a push without it writes the whole device
#   2. the same onto a device full of random bytes: the read back catches it,
#      INTEGRITY, exit 7, the message says the device did not read as zeros
#      and is incomplete, nothing reported done; the same push without the
#      option then gives the device zeros where the source has holes (cmp), and
#      where the loop device offers write-zeroes, the zeros are unmapped: its
#      backing file holds about the data only (du)
#   3. an old daemon (RDMACP_TEST_CAPS_OFF=0x100000): refused, exit 12, says
#      too old, the device untouched; a raw client sending the flag without
#      the capability, and the flag on a pull: ERROR PROTOCOL
#   4. a pull onto a local device with --write-devices --assume-zero-target:
#      identical, only the data written; onto random bytes: exit 7, nothing
#      reported done; without --write-devices: a usage error (exit 1)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MiB=$((1024 * 1024))
SIZE=$((64 * MiB))

[ "$(id -u)" -eq 0 ] || skip "loop devices need root"
command -v losetup >/dev/null || skip "losetup is not installed"
command -v jq >/dev/null || skip "jq is not installed"

# new_loop NAME [random]: a loop device over $T/NAME.back of SIZE bytes (zeros, or
# random bytes, written through the file); its path in LOOP.
new_loop() {
	if [ "${2:-}" = random ]; then
		head -c $SIZE /dev/urandom >"$T/$1.back" || die "write $1.back"
	else
		truncate -s $SIZE "$T/$1.back" || die "truncate $1"
	fi
	loop_attach "$T/$1.back"
}


# written DEV: bytes written to DEV so far (its sectors written, /sys/block/*/stat field 7).
written() {
	local s
	s=$(awk '{ print $7 }' "/sys/block/$(basename "$1")/stat") || die "no stat for $1"
	echo $((s * 512))
}

json_file() { jq -r "select(.event == \"file\") | .$1" "$T/out"; }
json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }
sum_of() { md5sum <"$1" | cut -d' ' -f1; }

mkdir -p "$T/disks" "$T/local"
setup_standard "" "[disks]" "path = $T/disks" "allow = client" "devices = yes"

# A sparse image: 1 MiB of random bytes at three offsets that are not on chunks.
truncate -s $SIZE "$T/mod/sparse.img" || die "truncate sparse.img"
for o in 1000 7000 14000; do
	dd if=/dev/urandom of="$T/mod/sparse.img" bs=4k count=256 seek=$o conv=notrunc \
		status=none || die "dd sparse.img"
done
IMG=$T/mod/sparse.img

new_loop base
DEV_BASE=$LOOP
new_loop zero
DEV_ZERO=$LOOP
new_loop junk random
DEV_JUNK=$LOOP
block_node "$T/disks/base" "$DEV_BASE"
block_node "$T/disks/zero" "$DEV_ZERO"
block_node "$T/disks/junk" "$DEV_JUNK"

# ---- 1. onto a zeroed device ----
w0=$(written "$DEV_BASE")
expect_rc 0 "push of a sparse image onto a zeroed device, without the option" \
	"${CLIENT[@]}" --json "$IMG" "$HOST:disks/base"
base_written=$(($(written "$DEV_BASE") - w0))
base_data=$(json_file data_bytes)
base_zero=$(json_file zero_bytes)
cmp -s "$DEV_BASE" "$IMG" && pass "without: identical" || fail "without: differs"
[ "$base_zero" -ge $((SIZE - 8 * MiB)) ] && [ $((base_data + base_zero)) -eq $SIZE ] &&
	pass "without: $base_data data bytes, $base_zero zero bytes" ||
	fail "without: data $base_data zeros $base_zero"
[ "$base_written" -ge $((SIZE - MiB)) ] &&
	pass "without: the zeros are written too ($base_written bytes to the device)" ||
	fail "without: only $base_written bytes written to the device"

w0=$(written "$DEV_ZERO")
expect_rc 0 "push with --assume-zero-target onto a zeroed device" \
	"${CLIENT[@]}" --json --assume-zero-target "$IMG" "$HOST:disks/zero"
zw=$(($(written "$DEV_ZERO") - w0))
cmp -s "$DEV_ZERO" "$IMG" && pass "assumed: identical" || fail "assumed: differs"
[ "$(json_file action)" = copied ] && pass "assumed: file event copied" ||
	fail "assumed: $(cat "$T/out")"
[ "$(json_file zero_bytes)" = "$base_zero" ] && [ "$(json_file data_bytes)" = "$base_data" ] &&
	[ "$(json_sum zero_bytes)" = "$base_zero" ] && [ "$(json_sum data_bytes)" = "$base_data" ] &&
	pass "assumed: zero_bytes and data_bytes as without it (file and summary)" ||
	fail "assumed: $(cat "$T/out")"
[ "$zw" -le $((base_data + MiB)) ] && [ "$zw" -lt $((base_written / 4)) ] &&
	pass "assumed: only the data written ($zw bytes to the device, $base_written without)" ||
	fail "assumed: $zw bytes written to the device (data $base_data, without $base_written)"

# ---- 2. onto random bytes: the read back is the safety net ----
before=$(sum_of "$DEV_JUNK")
expect_rc 7 "push with --assume-zero-target onto a device of random bytes" \
	"${CLIENT[@]}" --json --assume-zero-target "$IMG" "$HOST:disks/junk"
[ "$(json_file code)" = INTEGRITY ] && pass "wrong assumption: code INTEGRITY" ||
	fail "wrong assumption: $(cat "$T/out")"
grep -q "most likely it did not read as zeros where --assume-zero-target left" "$T/err" &&
	pass "wrong assumption: says the device did not read as zeros" ||
	fail "wrong assumption: message: $(cat "$T/err")"
grep -q "the device is incomplete" "$T/err" && pass "wrong assumption: says incomplete" ||
	fail "wrong assumption: no 'incomplete': $(cat "$T/err")"
[ "$(json_file action)" = failed ] &&
	[ "$(json_sum files)" = 0 ] && [ "$(json_sum failed)" = 1 ] &&
	pass "wrong assumption: nothing reported done" || fail "wrong assumption: $(cat "$T/out")"
[ "$(sum_of "$DEV_JUNK")" != "$before" ] || fail "the device was not written at all"

wz=$(cat "/sys/block/$(basename "$DEV_JUNK")/queue/write_zeroes_max_bytes" 2>/dev/null || echo 0)
expect_rc 0 "the same push without the option" "${CLIENT[@]}" --json "$IMG" "$HOST:disks/junk"
cmp -s "$DEV_JUNK" "$IMG" && pass "old random bytes replaced by zeros where the source has holes" ||
	fail "random bytes left where the source has holes"
# A device's write-zeroes that may unmap: a loop device punches its backing file.
if [ "$wz" -gt 0 ]; then
	du_k=$(du -k "$T/junk.back" | cut -f1)
	[ "$du_k" -le $(((base_data + 2 * MiB) / 1024)) ] &&
		pass "the zeros were unmapped: the backing file holds $du_k KiB" ||
		fail "the zeros were written, not unmapped: the backing file holds $du_k KiB"
else
	echo "note: this loop device has no write-zeroes: the unmapping check is left out"
fi

# ---- 3. older peers ----
OLD_PORT=$(free_port)
mkdir -p "$T/olddisks"
block_node "$T/olddisks/zero" "$DEV_ZERO"
write_conf "$T/old.conf" "$OLD_PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[disks]\npath = %s\nallow = client\ndevices = yes\n' "$T/olddisks" |
	as_root_modules >>"$T/old.conf"
RDMACP_TEST_CAPS_OFF=0x100000 start_daemon "$T/old.conf" "$T/old.log" "$OLD_PORT"
OLD=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$OLD_PORT")
before=$(sum_of "$DEV_ZERO")
expect_rc 12 "--assume-zero-target to a daemon without 0x100000" \
	"${OLD[@]}" --assume-zero-target "$IMG" "$HOST:disks/zero"
grep -q "daemon is too old for --assume-zero-target" "$T/err" && pass "old daemon: says too old" ||
	fail "old daemon: message: $(cat "$T/err")"
[ "$(sum_of "$DEV_ZERO")" = "$before" ] && pass "old daemon: device untouched" ||
	fail "old daemon: device written"

rawpeer_for "$PORT"
rawpeer_rc 0 "the flag from a client without 0x100000: ERROR PROTOCOL" \
	hello caps=0xfffff open push disks/zero flags=0x20000 expect "ERROR PROTOCOL" \
	expect "assume-zero capability" wait closed
rawpeer_rc 0 "the flag on a pull: ERROR PROTOCOL" \
	hello caps=0x1fffff open pull disks/zero flags=0x20000 expect "ERROR PROTOCOL" \
	wait closed
[ "$(sum_of "$DEV_ZERO")" = "$before" ] && pass "raw clients: device untouched" ||
	fail "raw clients: device written"

# ---- 4. a pull onto a local device ----
new_loop lzero
DEV_LZERO=$LOOP
new_loop ljunk random
DEV_LJUNK=$LOOP
w0=$(written "$DEV_LZERO")
expect_rc 0 "pull onto a zeroed local device, --write-devices --assume-zero-target" \
	"${CLIENT[@]}" --json --write-devices --assume-zero-target "$HOST:data/sparse.img" \
	"$DEV_LZERO"
lw=$(($(written "$DEV_LZERO") - w0))
cmp -s "$DEV_LZERO" "$IMG" && pass "pull assumed: identical" || fail "pull assumed: differs"
[ "$(json_sum zero_bytes)" = "$base_zero" ] && [ "$(json_file action)" = copied ] &&
	pass "pull assumed: copied, zero_bytes $base_zero" || fail "pull assumed: $(cat "$T/out")"
[ "$lw" -le $((base_data + MiB)) ] &&
	pass "pull assumed: only the data written ($lw bytes to the device)" ||
	fail "pull assumed: $lw bytes written to the device (data $base_data)"

expect_rc 7 "pull onto a local device of random bytes with --assume-zero-target" \
	"${CLIENT[@]}" --json --write-devices --assume-zero-target "$HOST:data/sparse.img" \
	"$DEV_LJUNK"
[ "$(json_file code)" = INTEGRITY ] && [ "$(json_file action)" = failed ] &&
	[ "$(json_sum files)" = 0 ] && pass "pull, wrong assumption: INTEGRITY, nothing done" ||
	fail "pull, wrong assumption: $(cat "$T/out")"
grep -q "did not read as zeros" "$T/err" && grep -q "the device is incomplete" "$T/err" &&
	pass "pull, wrong assumption: says why, and incomplete" ||
	fail "pull, wrong assumption: message: $(cat "$T/err")"

expect_rc 1 "a pull with --assume-zero-target, no --write-devices" \
	"${CLIENT[@]}" --assume-zero-target "$HOST:data/sparse.img" "$T/local/x.img"
grep -q "only with --write-devices" "$T/err" && pass "says it needs --write-devices" ||
	fail "no --write-devices: $(cat "$T/err")"
[ ! -e "$T/local/x.img" ] && pass "nothing pulled" || fail "x.img made"

grep -qE "killed by signal|AddressSanitizer|LeakSanitizer|runtime error" "$T/d.log" "$T/old.log" &&
	fail "daemon log: $(grep -hE "killed by signal|Sanitizer|runtime error" "$T/d.log" | head -3)"
finish
