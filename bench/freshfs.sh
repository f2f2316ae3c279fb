#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/freshfs.sh SIZE COMMAND [ARG...]: runs a benchmark on a file system made
# for it: a fresh ext4 with its journal (mkfs.ext4 defaults, as most systems have),
# on a loop device with direct I/O over a sparse image in BENCH_DIR, mounted,
# and given to COMMAND as its BENCH_DIR. Unmounted, detached and removed after.
#
#   bench/freshfs.sh 60G bench/smallfiles.sh --reps 7 --no-flat
#   bench/freshfs.sh 60G bench/ab.sh OLD_BUILD NEW_BUILD --reps 15 --clear --only small
#
# Why: on a file system the benchmarks have used, the state they leave moves the
# results. ext4 without a journal will not reuse an inode freed in the last
# minutes, and after a benchmark's clean-up every create pays for that (see
# docs/PERFORMANCE.md); runs minutes apart then differ by 2-4x. A fresh one starts
# every run from the same state, and every tool in the run gets the same disk.
# What it costs: each journal commit's flush becomes an fsync of the image on the
# file system below, so syncs cost more than on a disk of their own.
#
# Needs root (losetup, mount). Environment: BENCH_DIR (where the image goes,
# default /var/tmp/rdmacp-bench).
set -u
die() {
	echo "freshfs: $*" >&2
	exit 1
}
[ $# -ge 2 ] || die "usage: bench/freshfs.sh SIZE COMMAND [ARG...]"
SIZE=$1
shift
for t in losetup mkfs.ext4 mount umount; do
	command -v "$t" >/dev/null || die "$t not installed"
done
[ "$(id -u)" -eq 0 ] || die "needs root (losetup, mount)"
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
mkdir -p "$BENCH_DIR" || die "cannot create $BENCH_DIR"
IMG=$(mktemp "$BENCH_DIR/freshfs.XXXXXX.img") || die mktemp
MNT=${IMG%.img}.mnt
DEV=
cleanup() {
	trap - EXIT INT TERM
	if mountpoint -q "$MNT" 2>/dev/null; then
		umount "$MNT" || umount -l "$MNT"
	fi
	[ -n "$DEV" ] && losetup -d "$DEV"
	rmdir "$MNT" 2>/dev/null
	rm -f "$IMG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
truncate -s "$SIZE" "$IMG" || die "truncate -s $SIZE $IMG"
DEV=$(losetup --direct-io=on -f --show "$IMG") || die "losetup $IMG"
mkfs.ext4 -q -F "$DEV" || die "mkfs.ext4 $DEV"
mkdir -p "$MNT" || die "mkdir $MNT"
mount "$DEV" "$MNT" || die "mount $DEV"
echo "# freshfs: ext4 (journal) on $DEV, direct I/O, $SIZE, mounted at $MNT" >&2
BENCH_DIR=$MNT "$@"
