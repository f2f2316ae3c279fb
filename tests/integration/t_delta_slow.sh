#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A --delta digest pass longer than the sender's idle timeout: the receiver
# sends its digests at least once a second while it reads, and the sender
# takes each as progress. A pull from a daemon whose idle timeout is 2 s,
# the client's pass slowed to 1 s a read (test hook RDMACP_TEST_SLOW_DISK:
# a 24 MiB file, 6 reads of 4 MiB, about 6 s): it completes, identical,
# with only the changed chunk sent. Were the digests held back until the
# pass ends, the daemon would end the session after 2 s of silence.
# Then a pull onto a local loop device whose read back (the commit) is
# held 4 s by the same hook: the daemon waits for the result (a sender
# allows a file whose FILE_DONE is sent as long as reading it at 50 MB/s
# takes), and the device holds the image.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))
SIZE=$((24 * MIB))

command -v jq >/dev/null || skip "jq not installed"
setup_standard
# A second daemon on the same module, with an idle timeout of 2 s.
PORT2=$(free_port)
sed -e "s/^listen = .*/listen = 127.0.0.1:$PORT2/" -e "s/^idle timeout = .*/idle timeout = 2/" \
	"$T/d.conf" >"$T/d2.conf"
grep -q "^idle timeout = 2$" "$T/d2.conf" || die "no idle timeout in $T/d2.conf"
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"

mkdir -p "$T/dst"
head -c $SIZE /dev/urandom >"$T/mod/img" || die "random"
cp "$T/mod/img" "$T/dst/img"
dd if=/dev/urandom of="$T/mod/img" bs=4096 count=1 seek=$((5 * 256 + 9)) conv=notrunc \
	status=none || die "dd"

t0=$(date +%s)
RDMACP_TEST_SLOW_DISK=1 expect_rc 0 "pull --delta with a 6 s digest pass, daemon idle 2 s" \
	"${CLIENT[@]}" -P "$PORT2" --json --chunk-size 1M --delta "$HOST:data/img" "$T/dst/"
t1=$(date +%s)
[ $((t1 - t0)) -ge 5 ] && pass "the pass took $((t1 - t0)) s (the hook held it)" ||
	fail "the run took $((t1 - t0)) s: the slow hook did not hold the pass"
cmp -s "$T/mod/img" "$T/dst/img" && pass "identical" || fail "differs"
[ "$(jq -r 'select(.event == "summary") | "\(.data_bytes) \(.skipped_bytes)"' "$T/out")" = \
	"$MIB $((SIZE - MIB))" ] && pass "one chunk sent, the rest unchanged" ||
	fail "summary: $(cat "$T/out")"
grep -q "idle timeout" "$T/d2.log" && fail "the daemon timed out: $(grep "idle" "$T/d2.log")"

# ---- 2. a receiver's commit longer than the sender's idle timeout ----
# A pull onto a local loop device whose read back waits 4 s (the hook): the
# daemon, idle 2 s, allows a file whose FILE_DONE is sent as long as reading
# it at 50 MB/s takes (256 MiB: 5.4 s more) and hears the result.
if [ "$(id -u)" -ne 0 ] || ! command -v losetup >/dev/null; then
	echo "note: no loop devices here (root and losetup needed): the device case is left out"
	finish
fi
BIG=$((256 * MIB))
head -c $BIG /dev/urandom >"$T/mod/disk.img" || die "random"
truncate -s $BIG "$T/loop.back"
LOOP=$(losetup -f --show "$T/loop.back" 2>"$T/losetup.err") || {
	echo "note: losetup: $(cat "$T/losetup.err"): the device case is left out"
	finish
}
LOOPS+=("$LOOP") # cleanup detaches it
t0=$(date +%s)
RDMACP_TEST_SLOW_DISK=1 expect_rc 0 "pull onto a device whose read back takes 4 s more, daemon idle 2 s" \
	"${CLIENT[@]}" -P "$PORT2" --write-devices "$HOST:data/disk.img" "$LOOP"
t1=$(date +%s)
[ $((t1 - t0)) -ge 4 ] && pass "the commit took $((t1 - t0)) s (the hook held it)" ||
	fail "the run took $((t1 - t0)) s: the slow hook did not hold the read back"
cmp -s "$T/mod/disk.img" "$LOOP" && pass "the device holds the image" || fail "the device differs"
finish
