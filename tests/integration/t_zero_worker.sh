#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A device's zero writer runs off the receiver's event loop: the daemon's
# test hook RDMACPD_TEST_SLOW_DISK makes each write-zeroes job wait 4 s
# first (a slow device). One push of an image with a big hole onto a
# module's loop device, then a regular file: the regular file is committed
# (its file event) while the device's zeros are still being written, the
# device's own event comes only after the 4 s, and the device holds the
# image, zeros where the image has its hole (its old content was not zero).
# Were the zeros written in the loop, the second file's data would wait
# behind them.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))

[ "$(id -u)" -eq 0 ] || skip "loop devices need root"
command -v losetup >/dev/null || skip "losetup is not installed"
command -v jq >/dev/null || skip "jq is not installed"

SIZE=$((32 * MIB))
head -c $SIZE /dev/urandom >"$T/old.back" || die "random"
loop_attach "$T/old.back"
mkdir -p "$T/disks" "$T/src"
block_node "$T/disks/img" "$LOOP"

export RDMACPD_TEST_SLOW_DISK=1
setup_standard "" "[disks]" "path = $T/disks" "allow = client" "devices = yes"
unset RDMACPD_TEST_SLOW_DISK

# The image: 1 MiB of data, then a 31 MiB hole. The second file: 2 MiB of data.
truncate -s $SIZE "$T/src/img"
dd if=/dev/urandom of="$T/src/img" bs=1M count=1 conv=notrunc status=none || die "dd"
head -c $((2 * MIB)) /dev/urandom >"$T/src/later" || die "random"

t0=$(date +%s.%N)
"${CLIENT[@]}" --json --chunk-size 1M "$T/src/img" "$T/src/later" "$HOST:disks/" 2>"$T/err" |
	while IFS= read -r line; do
		echo "$(date +%s.%N) $line"
	done >"$T/events"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && pass "push of the image and a file (exit 0)" ||
	fail "push: exit $rc: $(cat "$T/err")"

# at NAME: seconds from the start to NAME's file event.
at() {
	local t
	t=$(grep "\"event\":\"file\",\"name\":\"$1\"" "$T/events" | cut -d' ' -f1)
	[ -n "$t" ] || {
		echo 999
		return
	}
	awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.2f\n", a - b }'
}
later=$(at later)
img=$(at img)
echo "note: later committed at ${later} s, img at ${img} s"
awk -v x="$img" 'BEGIN { exit !(x >= 4) }' && pass "the image waited for its slow zeros (${img} s)" ||
	fail "the image committed at ${img} s: the slow zero hook did not hold it"
awk -v x="$later" 'BEGIN { exit !(x < 3) }' &&
	pass "the second file was committed meanwhile (${later} s): the loop kept serving" ||
	fail "the second file came at ${later} s: it waited behind the zeros"
cmp -s "$LOOP" "$T/src/img" && pass "the device holds the image, zeros in its hole" ||
	fail "the device differs from the image"
cmp -s "$T/disks/later" "$T/src/later" && pass "the second file arrived" ||
	fail "the second file differs"
[ "$(jq -r 'select(.event=="file" and .name=="img") | .zero_bytes' <(cut -d' ' -f2- "$T/events"))" = \
	$((31 * MIB)) ] && pass "31 MiB went as zeros" || fail "events: $(cat "$T/events")"
finish
