#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/rxe-vm/crash.sh BUILD_DIR OUT_DIR SRC CUT: the receiving half of
# t_crash_vm.sh, run INSIDE the VM (tests/rxe-vm/run). The module lives on
# an ext4 file system on a loop device over OUT_DIR/disk.img, a host file
# (OUT_DIR is shared with the host), so what the guest's kernel wrote to the
# device outlives the guest and what it still held in memory does not. The
# daemon listens on 127.0.0.1, the client pushes SRC into the module with
# --json (its lines go straight to OUT_DIR/client.json on the host), and as
# soon as the client has reported CUT files copied, the guest's kernel is
# rebooted on the spot by sysrq: no sync, no unmount, no process told. The
# host then looks at what the disk holds.
#
# The kernel modules ext4 needs, and loop, are not in the VM's initramfs:
# they are loaded from the Debian kernel package the VM booted (RXEVM_KMODS,
# the package's lib/modules/VERSION). Writes OUT_DIR/state: "setup failed:
# why", "mounted", then "crashing after N files". Exits only on a failure
# before the crash (the reboot ends it otherwise).
set -u

B=${1:?usage: crash.sh BUILD_DIR OUT_DIR SRC CUT}
OUT=${2:?}
SRC=${3:?}
CUT=${4:?}
W=$(mktemp -d /tmp/rdmacp-crash.XXXXXX)
PORT=7471

state() { echo "$*" >"$OUT/state"; }
setup_failed() {
	state "setup failed: $*"
	exit 1
}

# ---- ext4 on a loop device over the host's file ------------------------------------
KM=${RXEVM_KMODS:-}
[ -d "$KM" ] || setup_failed "no kernel modules at '$KM' (RXEVM_KMODS)"
for m in crc16 crc32c_generic mbcache jbd2 ext4 loop; do
	[ -d "/sys/module/$m" ] && continue # built in, or loaded
	f=$(find "$KM" -name "$m.ko*" | head -1)
	[ -n "$f" ] || setup_failed "module $m not found under $KM"
	# busybox's insmod: the host (whose root the guest runs on) may have no kmod.
	/bin/busybox insmod "$f" 2>"$W/insmod.err" || setup_failed "insmod $m: $(cat "$W/insmod.err")"
done
grep -qw ext4 /proc/filesystems || setup_failed "no ext4 in the guest's kernel"
DEV=$(losetup -f --show "$OUT/disk.img" 2>"$W/losetup.err") ||
	setup_failed "losetup: $(cat "$W/losetup.err")"
mkdir -p /mnt/crash
mount -t ext4 "$DEV" /mnt/crash 2>"$W/mount.err" ||
	setup_failed "mount $DEV: $(head -1 "$W/mount.err"); $(ls -l "$DEV" /mnt 2>&1 | tr '\n' ' '); $(dmesg | tail -n 5 | tr '\n' ' ')"
mkdir -p /mnt/crash/mod
echo 1 >/proc/sys/kernel/sysrq || setup_failed "no sysrq"
state mounted

# ---- daemon and client -------------------------------------------------------------
"$B/rdmacp" certs init "$W/certs" --host 127.0.0.1 >"$W/certs.log" 2>&1 ||
	setup_failed "certs init: $(tail -1 "$W/certs.log")"
cat >"$W/d.conf" <<EOF
[global]
listen = 127.0.0.1:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
idle timeout = 60

[data]
path = /mnt/crash/mod
allow = client
uid = 0
gid = 0
EOF
"$B/rdmacpd" --config "$W/d.conf" -v >"$OUT/daemon.log" 2>&1 &
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
	sleep 0.1
done
(exec 4<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || setup_failed "the daemon did not listen"

"$B/rdmacp" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key" \
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport tcp --json -r \
	"$SRC" "127.0.0.1:data/" >"$OUT/client.json" 2>"$OUT/client.err" &
CPID=$!

# ---- the crash -----------------------------------------------------------------------
# Whole lines of regular files only, as t_crash_vm.sh counts them: --json
# goes out a buffer at a time, so the file's last line may be cut, and
# directories are reported too.
copied() { grep -c '"type":"file","action":"copied".*}$' "$OUT/client.json"; }
while :; do
	n=$(copied)
	[ "$n" -ge "$CUT" ] && break
	kill -0 "$CPID" 2>/dev/null || break
	sleep 0.02
done
n=$(copied)
if ! kill -0 "$CPID" 2>/dev/null; then
	wait "$CPID"
	state "setup failed: the client ended (rc $?) after $n files, before the crash"
	exit 1
fi
state "crashing after $n files"
echo b >/proc/sysrq-trigger
sleep 60
state "setup failed: sysrq did not reboot the guest"
exit 1
