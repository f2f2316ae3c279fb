#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/mwcpu_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [REPS]: the receiver's CPU per GiB of a
# verbs push fenced by memory windows against the same push fenced by the private copy
# (the client masks capability 36: RDMACP_TEST_CAPS_OFF=0x1000000000), one lane, 1 MiB
# chunks, alternating, in one boot of the Soft-RoCE VM:
#
#   RXEVM_OUT=$PWD/vm-out tests/rxe-vm/run bash bench/mwcpu_vm.sh build $PWD/vm-out
#
# The receiver is rdmacpd on 10.0.0.2 (rxe1); its session's CPU (user + system) is what
# the daemon reaps of it (cutime + cstime in /proc/PID/stat, before and after each push).
# Soft-RoCE under qemu without KVM: the kernel's emulated NIC work is in the numbers too,
# so a proxy for the difference only, never an RDMA figure.
set -u

B=${1:?usage: mwcpu_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [REPS]}
OUT=${2:?usage: mwcpu_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [REPS]}
MIB=${3:-128}
REPS=${4:-3}
SERVER=10.0.0.2
PORT=7473
W=$(mktemp -d /tmp/rdmacp-mwcpu.XXXXXX)
DPID=
mkdir -p "$OUT"
cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

"$B/rdmacp" certs init "$W/certs" --host "$SERVER" >/dev/null 2>&1 || exit 1
mkdir -p "$W/mod"
cat >"$W/d.conf" <<CONF
[global]
listen = $SERVER:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt

[data]
path = $W/mod
allow = client
uid = $(id -u)
gid = $(id -g)
CONF
"$B/rdmacpd" --config "$W/d.conf" >"$OUT/mwcpu-d.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null && break
	sleep 0.1
done
head -c $((MIB << 20)) /dev/urandom >"$W/src"
tck=$(getconf CLK_TCK)
reaped() { awk '{ print $16 + $17 }' "/proc/$DPID/stat"; }

run() { # $1: windows|copy
	local off= before after t0 t1
	[ "$1" = copy ] && off=0x1000000000
	rm -f "$W/mod/src"
	before=$(reaped)
	t0=$(date +%s.%N)
	RDMACP_TEST_CAPS_OFF=$off "$B/rdmacp" --config /dev/null --cert "$W/certs/client.crt" \
		--key "$W/certs/client.key" --ca "$W/certs/ca.crt" -P "$PORT" --no-progress \
		--transport verbs --lanes 1 --chunk-size 1M --json "$W/src" "$SERVER:data/" \
		>"$OUT/mwcpu-$1.log" 2>&1 || { echo "FAIL: $1 push"; return 1; }
	t1=$(date +%s.%N)
	sleep 0.5 # the session is reaped
	after=$(reaped)
	cmp -s "$W/src" "$W/mod/src" || { echo "FAIL: $1 not byte-exact"; return 1; }
	grep -q "\"fence\":\"$1\"" "$OUT/mwcpu-$1.log" || { echo "FAIL: $1 fence not said"; return 1; }
	awk -v c=$((after - before)) -v k="$tck" -v m="$MIB" -v a="$t0" -v b="$t1" -v f="$1" \
		'BEGIN { printf "%s: receiver %.2f CPU-s per GiB, %.1f s\n", f, c / k * 1024 / m, b - a }'
}

for i in $(seq 1 "$REPS"); do
	run windows || exit 1
	run copy || exit 1
done
