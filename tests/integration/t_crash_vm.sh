#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Durability across a crash of the receiver's kernel. Nothing is reported
# done before it is verified, durable and renamed into place, and no file
# is ever under its final name unless it is whole: a kill -9 of the
# processes (t_pack, t_connection_lost) cannot tell, since the kernel still
# writes back what they left in its page cache. A kernel that stops can.
#
# The VM of tests/rxe-vm (its own kernel; no RDMA is used here) mounts an
# ext4 image that lives on this machine, runs a daemon with a module on it
# and pushes a tree into it over tcp (tests/rxe-vm/crash.sh). Once the
# client has reported CUT files copied, sysrq reboots the guest on the spot:
# what its kernel had not written to the device is gone. Here the image is
# then mounted (the journal replayed) and:
#   - every file the client reported copied is there and equals its source
#     (it was durable when it was reported);
#   - every regular file under a final name equals its source (no partial
#     file under a final name); leftover temp names are counted, not files;
#   - the crash came mid-run: files of the tree are missing;
#   - e2fsck finds the file system clean.
# The tree mixes small files (packed slots, committed in groups after one
# syncfs) and files of several chunks (fsync each).
#
# Skips (77, reason printed) where the VM cannot run (as t_verbs_vm), or
# where its kernel cannot load ext4 and loop. Runs in the normal build only.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RUN=$SRC_DIR/tests/rxe-vm/run
CACHE=${RXEVM_CACHE:-/var/tmp/rxevm}
FILES=1500
BIG=12
CUT=300

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
FAILS=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

. "$SRC_DIR/tests/rxe-vm/host-lib.sh"

rxevm_skip_asan
[ -x "$BUILD_DIR/rdmacp" ] && [ -x "$BUILD_DIR/rdmacpd" ] || die "rdmacp/rdmacpd not built in $BUILD_DIR"
[ "$(id -u)" -eq 0 ] || skip "mounting the image needs root"
for t in qemu-system-x86_64 cpio xz rdma mkfs.ext4 e2fsck losetup python3; do
	command -v "$t" >/dev/null || skip "$t not installed (apt-get install qemu-system-x86 cpio xz-utils iproute2 e2fsprogs mount python3)"
done
[ -x /bin/busybox ] || skip "/bin/busybox missing (apt-get install busybox-static)"

T=$(mktemp -d "${TMPDIR:-/tmp}/rdmacp-crash.XXXXXX")
MNT=
cleanup() {
	if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
		umount "$MNT"
	fi
	rm -rf "$T"
}
trap cleanup EXIT

export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-900}
start=$(date +%s)

rxevm_require_kernel
KMODS=$(ls -d "$CACHE"/kernel/lib/modules/*/ 2>/dev/null | head -1)
[ -n "$KMODS" ] || skip "the VM's kernel package has no modules in $CACHE/kernel"

# ---- the tree ------------------------------------------------------------------------
python3 - "$T/src/tree" "$FILES" "$BIG" <<'EOF' || die "make the tree"
import os, sys, random
d, n, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(5)
for i in range(n):
    sub = os.path.join(d, "d%02d" % (i % 10))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%04d" % i), "wb") as f:
        f.write(r.randbytes(0 if i % 250 == 0 else r.randint(1, 12000)))
for i in range(big):
    with open(os.path.join(d, "big%02d" % i), "wb") as f:
        f.write(r.randbytes(r.randint(3 << 20, 6 << 20)))
EOF
total=$(find "$T/src/tree" -type f | wc -l)

# ---- the run, cut by the crash ---------------------------------------------------------
OUT=$T/vm
mkdir -p "$OUT" "$T/mnt"
truncate -s 512M "$OUT/disk.img" && mkfs.ext4 -q -F "$OUT/disk.img" || die "mkfs.ext4"
RXEVM_OUT=$OUT RXEVM_ENV=RXEVM_KMODS RXEVM_KMODS=$KMODS "$RUN" \
	bash "$SRC_DIR/tests/rxe-vm/crash.sh" "$BUILD_DIR" "$OUT" "$T/src/tree" "$CUT" >"$T/vm.log" 2>&1
rc=$?
state=$(cat "$OUT/state" 2>/dev/null)
echo "VM: rc $rc, $(($(date +%s) - start)) s, state: ${state:-none}"
case $state in
"crashing after "*)
	# The VM ended with no exit status, as it should here: its run folder was kept.
	kept=$(sed -n 's/^rxevm: kept //p' "$T/vm.log")
	case $kept in "$CACHE"/runs/?*) rm -rf "$kept" ;; esac
	;;
"setup failed: no kernel modules"* | "setup failed: module "* | "setup failed: insmod "* | \
	"setup failed: no ext4"* | "setup failed: no sysrq"*)
	skip "the VM cannot hold the module's file system: ${state#setup failed: }"
	;;
*)
	tail -n 30 "$T/vm.log"
	[ -f "$OUT/client.err" ] && tail -n 5 "$OUT/client.err"
	[ -f "$OUT/daemon.log" ] && tail -n 10 "$OUT/daemon.log"
	die "the run did not reach the crash (state: ${state:-none})"
	;;
esac

# ---- what the disk holds ---------------------------------------------------------------
MNT=$T/mnt
mount -o loop "$OUT/disk.img" "$MNT" || die "mount the image after the crash"
D=$MNT/mod

python3 - "$OUT/client.json" >"$T/reported" <<'EOF' || die "read client.json"
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        ev = json.loads(line)
    except ValueError:
        continue  # the last line, cut by the crash
    if ev.get("event") == "file" and ev.get("action") == "copied" and ev.get("type") == "file":
        print(ev["name"])
EOF
nrep=$(wc -l <"$T/reported")
[ "$nrep" -ge "$CUT" ] && pass "the client reported $nrep files copied before the crash" ||
	fail "only $nrep files reported (cut at $CUT)"

bad=0
while IFS= read -r name; do
	if ! cmp -s "$T/src/$name" "$D/$name"; then
		bad=$((bad + 1))
		[ $bad -le 3 ] && echo "    reported but not whole: $name"
	fi
done <"$T/reported"
[ $bad -eq 0 ] && pass "all $nrep reported files are there and whole" ||
	fail "$bad of $nrep reported files are missing or differ"

whole=0 temps=0 bad=0
while IFS= read -r -d '' f; do
	rel=${f#"$D"/}
	case ${rel##*/} in
	.*.rdmacp.????????)
		temps=$((temps + 1))
		continue
		;;
	esac
	if cmp -s "$T/src/$rel" "$f"; then
		whole=$((whole + 1))
	else
		bad=$((bad + 1))
		[ $bad -le 3 ] && echo "    under its final name, not whole: $rel ($(stat -c %s "$f") bytes)"
	fi
done < <(find "$D" -type f -print0)
[ $bad -eq 0 ] && pass "every file under a final name is whole ($whole files; $temps temp names left)" ||
	fail "$bad files under their final names are not whole"
[ "$whole" -lt "$total" ] && pass "the crash came mid-run: $whole of $total files there" ||
	fail "all $total files were there: the crash came too late to test anything"

umount "$MNT" || die "umount"
MNT=
e2fsck -fn "$OUT/disk.img" >"$T/fsck.log" 2>&1 && pass "e2fsck: the file system is clean" ||
	fail "e2fsck: $(tail -n 5 "$T/fsck.log" | tr '\n' ' ')"

echo "time: $(($(date +%s) - start)) s"
[ $FAILS -eq 0 ] || exit 1
