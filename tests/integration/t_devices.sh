#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Block devices as sources and targets, on loop devices over files in the
# test's temp dir (a node made with mknod puts a loop device in a module):
#   1. a local device pushed into an image file, byte-identical; a device in
#      a recursive tree is skipped with a warning, never read
#   2. an image pushed onto a device of a 'devices = yes' module, pulled back
#      from it onto a second local device (--write-devices): cmp of the
#      devices; --json file events and summary (jq); the node stays a device
#   3. a target held open O_EXCL by another process, and one with a mounted
#      file system: refused, DEVICE_BUSY, exit 17, device untouched
#   4. a target smaller than the source: DEVICE_SMALL, exit 17, nothing
#      written; a peer without capability 0x8000 hears NOSPACE instead
#      (rawpeer); an image of an odd size (not whole blocks) onto a device
#   5. a device push cut half-way (kill -9 of the client) with --partial: the
#      daemon says the device is incomplete, keeps the journal; the next
#      --partial run sends only the rest (resumed_bytes), cmp identical,
#      journal gone; the same for a pull onto a local device; a kept journal
#      whose device bytes changed is not trusted
#   6. bad input, each with its code and exit status: a character device, a
#      FIFO and a /dev/zero node as targets; a symlink in the module to a
#      device; a path escaping the module; an absolute /dev path; a module
#      with 'devices = no' (push and pull); a pull onto a local device
#      without --write-devices, and onto /dev/zero with it
#   7. --delete into a 'devices = yes' module keeps its device nodes
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MiB=$((1024 * 1024))

[ "$(id -u)" -eq 0 ] || skip "loop devices need root"
command -v losetup >/dev/null || skip "losetup is not installed"
command -v jq >/dev/null || skip "jq is not installed"

MOUNTED=""
devices_cleanup() {
	[ -n "$MOUNTED" ] && umount "$MOUNTED" 2>/dev/null
	cleanup # detaches the loop devices
}
trap devices_cleanup EXIT

# new_loop NAME SIZE: a loop device over $T/NAME.back of SIZE bytes (zeros); its path in LOOP.
new_loop() {
	truncate -s "$2" "$T/$1.back" || die "truncate $1"
	loop_attach "$T/$1.back"
}


sum_of() { head -c "$2" "$1" | md5sum | cut -d' ' -f1; }

mkdir -p "$T/disks" "$T/nodev"
setup_standard "" \
	"[disks]" "path = $T/disks" "allow = client" "devices = yes" \
	"[nodev]" "path = $T/nodev" "allow = client"

SIZE=$((24 * MiB))
head -c $SIZE /dev/urandom >"$T/src.img" || die "write src.img"
new_loop a $SIZE
DEV_A=$LOOP
new_loop b $SIZE
DEV_B=$LOOP
new_loop small $((8 * MiB))
DEV_SMALL=$LOOP
new_loop src $SIZE
DEV_SRC=$LOOP
dd if="$T/src.img" of="$DEV_SRC" bs=1M oflag=direct status=none || die "fill $DEV_SRC"

# ---- 1. a device as a source ----
expect_rc 0 "push of a local device into an image file" \
	"${CLIENT[@]}" --json "$DEV_SRC" "$HOST:data/dev.img"
cmp -s "$T/mod/dev.img" "$T/src.img" && pass "image file identical to the device" ||
	fail "image file differs from the device"
[ "$(jq -r 'select(.event=="file") | .bytes' "$T/out")" = "$SIZE" ] &&
	pass "file event: the device's size" || fail "file event: $(cat "$T/out")"
mkdir -p "$T/tree"
echo x >"$T/tree/f"
block_node "$T/tree/blk" "$DEV_SRC"
expect_rc 0 "a device inside a tree" "${CLIENT[@]}" -r "$T/tree" "$HOST:data/"
[ -f "$T/mod/tree/f" ] && [ ! -e "$T/mod/tree/blk" ] &&
	pass "a device below a root is skipped, not read" || fail "tree: $(ls -l "$T/mod/tree")"
grep -q "blk.*skipped" "$T/err" && pass "its skip is a warning" || fail "no warning: $(cat "$T/err")"

# ---- 2. image -> device (push), device -> device (pull) ----
block_node "$T/disks/a" "$DEV_A"
expect_rc 0 "push of an image onto a module's device" \
	"${CLIENT[@]}" --json "$T/src.img" "$HOST:disks/a"
cmp -s "$DEV_A" "$T/src.img" && pass "device identical to the image" || fail "device differs"
[ "$(jq -r 'select(.event=="summary") | "\(.files) \(.bytes) \(.failed) \(.exit)"' "$T/out")" = \
	"1 $SIZE 0 0" ] && pass "summary: one file, its bytes" || fail "summary: $(cat "$T/out")"
[ -b "$T/disks/a" ] && pass "the node is still a block device" || fail "node replaced"
[ -z "$(ls -A "$T/disks" | grep -v '^a$')" ] && pass "nothing else made in the module" ||
	fail "module holds: $(ls -A "$T/disks")"

expect_rc 0 "pull of the module's device onto a local device (--write-devices)" \
	"${CLIENT[@]}" --json --write-devices "$HOST:disks/a" "$DEV_B"
cmp -s "$DEV_A" "$DEV_B" && pass "the two devices are identical" || fail "devices differ"
[ "$(jq -r 'select(.event=="file") | .action' "$T/out")" = "copied" ] &&
	pass "file event: copied" || fail "file event: $(cat "$T/out")"
ln -s "$DEV_B" "$T/via-link"
dd if=/dev/zero of="$DEV_B" bs=1M count=1 oflag=direct status=none
expect_rc 0 "pull onto a device named through a symlink" \
	"${CLIENT[@]}" --write-devices "$HOST:disks/a" "$T/via-link"
[ -L "$T/via-link" ] && cmp -s "$DEV_A" "$DEV_B" &&
	pass "the device behind the link is written, the link kept" || fail "via a link"

# ---- 3. a held target ----
block_node "$T/disks/b" "$DEV_B"
before=$(sum_of "$DEV_B" $SIZE)
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL)
open(sys.argv[2], "w").close()
time.sleep(60)' "$DEV_B" "$T/held" &
HOLDER=$!
for _ in $(seq 50); do [ -e "$T/held" ] && break; sleep 0.1; done
[ -e "$T/held" ] || die "the holder did not open $DEV_B"
expect_rc 17 "push onto a device held open O_EXCL" \
	"${CLIENT[@]}" --json "$T/src.img" "$HOST:disks/b"
[ "$(jq -r 'select(.event=="file") | .code' "$T/out")" = "DEVICE_BUSY" ] &&
	pass "code DEVICE_BUSY" || fail "held: $(cat "$T/out")"
grep -q "in use" "$T/err" && pass "says the device is in use" || fail "message: $(cat "$T/err")"
expect_rc 17 "pull onto a local device held open O_EXCL" \
	"${CLIENT[@]}" --write-devices "$HOST:disks/a" "$DEV_B"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
[ "$(sum_of "$DEV_B" $SIZE)" = "$before" ] && pass "held device untouched" ||
	fail "held device written"
if command -v mkfs.ext4 >/dev/null && mkfs.ext4 -q -F "$DEV_B" >/dev/null 2>&1 &&
	mkdir -p "$T/mnt" && mount "$DEV_B" "$T/mnt" 2>/dev/null; then
	MOUNTED="$T/mnt"
	expect_rc 17 "push onto a mounted device" "${CLIENT[@]}" "$T/src.img" "$HOST:disks/b"
	grep -q "in use" "$T/err" && pass "mounted: says in use" || fail "mounted: $(cat "$T/err")"
	umount "$T/mnt" && MOUNTED=""
else
	echo "note: no mount here (mkfs.ext4 or mount failed): the mounted case is left out"
fi

# ---- 4. a target smaller than the source ----
block_node "$T/disks/small" "$DEV_SMALL"
mkfifo "$T/mod/fifo"
expect_rc 17 "push onto a smaller device" "${CLIENT[@]}" --json "$T/src.img" "$HOST:disks/small"
[ "$(jq -r 'select(.event=="file") | .code' "$T/out")" = "DEVICE_SMALL" ] &&
	pass "code DEVICE_SMALL" || fail "small: $(cat "$T/out")"
grep -q "smaller than the source" "$T/err" && pass "says it is smaller" ||
	fail "message: $(cat "$T/err")"
[ "$(sum_of "$DEV_SMALL" $((8 * MiB)))" = "$(head -c $((8 * MiB)) /dev/zero | md5sum | cut -d' ' -f1)" ] &&
	pass "nothing written to the small device" || fail "small device written"

# A dry run that asks the receiver (-n --skip) says the same, and writes nothing.
expect_rc 17 "dry run onto a smaller device" \
	"${CLIENT[@]}" -n --skip quick --json "$T/src.img" "$HOST:disks/small"
grep -q "smaller than the source" "$T/err" && pass "dry run: says it is smaller" ||
	fail "dry run small: $(cat "$T/err")"
expect_rc 0 "dry run onto a device that fits" \
	"${CLIENT[@]}" -n --skip quick "$T/src.img" "$HOST:disks/b"
expect_rc 17 "dry run onto a FIFO" "${CLIENT[@]}" -n --skip quick "$T/src.img" "$HOST:data/fifo"
[ -p "$T/mod/fifo" ] && pass "dry run: the FIFO stays" || fail "dry run: FIFO replaced"
# The codes only go to a peer that announced them; one from before hears NOSPACE.
rawpeer_for "$PORT"
rawpeer_rc 0 "a peer without the devices capability: NOSPACE for a smaller device" \
	hello caps=0x3fff open push disks/small lanes ring files "1:small:$SIZE" ack \
	expect "1=NOSPACE" end wait END bye close
rawpeer_rc 0 "a peer with it: DEVICE_SMALL" \
	hello caps=0xbfff open push disks/small lanes ring files "1:small:$SIZE" ack \
	expect "1=DEVICE_SMALL" end wait END bye close
# An odd size (not whole logical blocks): the tail is written and read back too.
head -c $((5 * MiB + 777)) /dev/urandom >"$T/odd.img"
expect_rc 0 "push of an image of an odd size onto a device" \
	"${CLIENT[@]}" "$T/odd.img" "$HOST:disks/a"
cmp -s -n $((5 * MiB + 777)) "$DEV_A" "$T/odd.img" && pass "odd-sized image identical" ||
	fail "odd-sized image differs"
# Back to the full image for the cases below.
expect_rc 0 "push of the image again" "${CLIENT[@]}" "$T/src.img" "$HOST:disks/a"

# ---- 5. a device push cut half-way, resumed with --partial ----
new_loop c $((64 * MiB))
DEV_C=$LOOP
head -c $((64 * MiB)) /dev/urandom >"$T/big.img" || die "write big.img"
block_node "$T/disks/c" "$DEV_C"
"${CLIENT[@]}" --partial --bwlimit 16M "$T/big.img" "$HOST:disks/c" >/dev/null 2>&1 &
CP=$!
for _ in $(seq 100); do
	n=$(stat -c %s "$T/disks/.rdmacp-partial/"*.jnl 2>/dev/null | head -1)
	[ -n "$n" ] && [ "$n" -gt 300 ] && break
	sleep 0.1
done
sleep 0.5
kill -9 $CP
wait $CP 2>/dev/null
for _ in $(seq 50); do grep -q "device is incomplete" "$T/d.log" && break; sleep 0.1; done
grep -q "c: the device is incomplete: a --partial run" "$T/d.log" &&
	pass "the daemon says the cut device is incomplete" || fail "no incomplete notice"
ls "$T/disks/.rdmacp-partial/"*.jnl >/dev/null 2>&1 && pass "the journal is kept" ||
	fail "no journal after the cut"
cmp -s "$DEV_C" "$T/big.img" && fail "the cut copy is complete already (too fast?)"
expect_rc 0 "the --partial run after the cut" \
	"${CLIENT[@]}" --json --partial "$T/big.img" "$HOST:disks/c"
kept=$(jq -r 'select(.event=="summary") | .resumed_bytes' "$T/out")
sent=$(jq -r 'select(.event=="summary") | .bytes' "$T/out")
[ "$kept" -gt 0 ] && [ $((kept + sent)) -eq $((64 * MiB)) ] &&
	pass "resumed: $kept bytes kept, $sent sent" || fail "resume: $(cat "$T/out")"
cmp -s "$DEV_C" "$T/big.img" && pass "resumed device identical" || fail "resumed device differs"
[ ! -e "$T/disks/.rdmacp-partial" ] && pass "journal and store removed" ||
	fail "store left: $(ls -A "$T/disks/.rdmacp-partial")"
# The same for a pull onto a local device (the client keeps the journal next to its node).
new_loop d $((64 * MiB))
DEV_D=$LOOP
mkdir -p "$T/local"
block_node "$T/local/d" "$DEV_D"
"${CLIENT[@]}" --partial --write-devices --bwlimit 16M "$HOST:disks/c" "$T/local/d" \
	>/dev/null 2>&1 &
CP=$!
for _ in $(seq 100); do
	n=$(stat -c %s "$T/local/.rdmacp-partial/"*.jnl 2>/dev/null | head -1)
	[ -n "$n" ] && [ "$n" -gt 300 ] && break
	sleep 0.1
done
sleep 0.5
kill -9 $CP
wait $CP 2>/dev/null
ls "$T/local/.rdmacp-partial/"*.jnl >/dev/null 2>&1 && pass "pull: the journal is kept" ||
	fail "pull: no journal after the cut"
expect_rc 0 "pull: the --partial run after the cut" \
	"${CLIENT[@]}" --json --partial --write-devices "$HOST:disks/c" "$T/local/d"
kept=$(jq -r 'select(.event=="summary") | .resumed_bytes' "$T/out")
[ "$kept" -gt 0 ] && pass "pull resumed: $kept bytes kept" || fail "pull resume: $(cat "$T/out")"
cmp -s "$DEV_D" "$T/big.img" && pass "pull: resumed device identical" ||
	fail "pull: resumed device differs"
[ -b "$T/local/d" ] && [ ! -e "$T/local/.rdmacp-partial" ] &&
	pass "pull: node kept, store removed" || fail "pull: $(ls -lA "$T/local")"
# A kept journal whose device bytes changed meanwhile: re-verified, not trusted.
"${CLIENT[@]}" --partial --bwlimit 16M "$T/src.img" "$HOST:disks/c" >/dev/null 2>&1 &
CP=$!
for _ in $(seq 100); do
	n=$(stat -c %s "$T/disks/.rdmacp-partial/"*.jnl 2>/dev/null | head -1)
	[ -n "$n" ] && [ "$n" -gt 300 ] && break
	sleep 0.1
done
kill -9 $CP
wait $CP 2>/dev/null
sleep 0.5
ls "$T/disks/.rdmacp-partial/"*.jnl >/dev/null 2>&1 && pass "a second cut keeps its journal" ||
	fail "no journal after the second cut"
dd if=/dev/urandom of="$DEV_C" bs=1M count=2 oflag=direct status=none
expect_rc 0 "a --partial run over device bytes changed since the cut" \
	"${CLIENT[@]}" --json --partial "$T/src.img" "$HOST:disks/c"
cmp -s -n $SIZE "$DEV_C" "$T/src.img" && pass "changed bytes were sent again" ||
	fail "device differs after changed bytes"
[ "$(jq -r 'select(.event=="summary") | .resumed_bytes' "$T/out")" = 0 ] &&
	pass "nothing kept from changed bytes" || fail "kept changed bytes: $(cat "$T/out")"

# ---- 6. bad input ----
mknod "$T/disks/chr" c 1 3
mknod "$T/disks/zero" c 1 5
mkfifo "$T/disks/fifo"
for t in chr zero fifo; do
	expect_rc 17 "push onto $t" "${CLIENT[@]}" --json "$T/src.img" "$HOST:disks/$t"
	[ "$(jq -r 'select(.event=="file") | .code' "$T/out")" = "DEVICE_REFUSED" ] &&
		pass "$t: DEVICE_REFUSED" || fail "$t: $(cat "$T/out")"
done
[ -c "$T/disks/chr" ] && [ -c "$T/disks/zero" ] && [ -p "$T/disks/fifo" ] &&
	pass "the special files stay as they were" || fail "special files replaced"
grep -q "a FIFO is there" "$T/err" && pass "says what is there" || fail "fifo: $(cat "$T/err")"

before=$(sum_of "$DEV_A" $SIZE)
ln -s "$DEV_A" "$T/disks/link"
expect_rc 17 "push onto a symlink to a device" "${CLIENT[@]}" "$T/src.img" "$HOST:disks/link"
grep -q "symlink to a block device" "$T/err" && pass "says a link is no device name" ||
	fail "link: $(cat "$T/err")"
[ -L "$T/disks/link" ] && pass "the link stays" || fail "the link was replaced"
expect_rc 5 "a path escaping the module" "${CLIENT[@]}" "$T/src.img" "$HOST:disks/../mod/x"
expect_rc 5 "an absolute device path outside every module" \
	"${CLIENT[@]}" "$T/src.img" "$HOST:$DEV_A"
expect_rc 5 "a pull of an absolute device path" "${CLIENT[@]}" "$HOST:$DEV_A" "$T/x.img"
[ "$(sum_of "$DEV_A" $SIZE)" = "$before" ] && pass "the device outside was not written" ||
	fail "device written through a bad path"

block_node "$T/nodev/d" "$DEV_A"
expect_rc 17 "push onto a device of a module with devices = no" \
	"${CLIENT[@]}" --json "$T/src.img" "$HOST:nodev/d"
grep -q "writing devices is not enabled" "$T/err" && pass "says devices are not enabled" ||
	fail "nodev push: $(cat "$T/err")"
[ -b "$T/nodev/d" ] && pass "the node stays a device" || fail "nodev node replaced"
expect_rc 17 "pull of a device from a module with devices = no" \
	"${CLIENT[@]}" "$HOST:nodev/d" "$T/nodev.img"
grep -q "does not export devices" "$T/err" && pass "says the module exports no devices" ||
	fail "nodev pull: $(cat "$T/err")"
[ ! -e "$T/nodev.img" ] && pass "nothing pulled" || fail "nodev.img made"
[ "$(sum_of "$DEV_A" $SIZE)" = "$before" ] && pass "device untouched by devices = no" ||
	fail "device written in a devices = no module"

before=$(sum_of "$DEV_B" $SIZE)
expect_rc 17 "pull onto a local device without --write-devices" \
	"${CLIENT[@]}" "$HOST:disks/a" "$DEV_B"
grep -q "write-devices" "$T/err" && pass "names --write-devices" || fail "local: $(cat "$T/err")"
[ "$(sum_of "$DEV_B" $SIZE)" = "$before" ] && pass "local device untouched" ||
	fail "local device written"
mknod "$T/zero" c 1 5
expect_rc 17 "pull onto a /dev/zero node with --write-devices" \
	"${CLIENT[@]}" --write-devices "$HOST:disks/a" "$T/zero"
[ -c "$T/zero" ] && pass "the character device stays" || fail "char device replaced"

# ---- 7. --delete leaves a module's devices alone ----
mkdir -p "$T/disks/tree"
block_node "$T/disks/tree/blk" "$DEV_A"
rm -f "$T/tree/blk"
expect_rc 0 "push -r --delete into a devices module" \
	"${CLIENT[@]}" -r --delete "$T/tree" "$HOST:disks/"
[ -b "$T/disks/tree/blk" ] && [ -f "$T/disks/tree/f" ] &&
	pass "--delete keeps a block device of a devices module" ||
	fail "--delete: $(ls -lA "$T/disks/tree")"

# Under a sanitizer build a report in the daemon's sessions ends up in its log.
grep -qE "killed by signal|AddressSanitizer|LeakSanitizer|runtime error" "$T/d.log" &&
	fail "daemon log: $(grep -E "killed by signal|Sanitizer|runtime error" "$T/d.log" | head -3)"
finish
