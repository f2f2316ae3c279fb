#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/verbs_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [LANES] [CHUNK_KIB]: rdmacp bench over
# verbs against perftest's ib_write_bw, at the same message size and QP count, in one
# boot of the Soft-RoCE VM. Run it through the VM:
#
#   RXEVM_OUT=$PWD/vm-out tests/rxe-vm/run bash bench/verbs_vm.sh build $PWD/vm-out
#
# rdmacpd listens on 10.0.0.2 (rxe1, 'allow bench = client'), rdmacp bench runs from
# 10.0.0.1 (rxe0); then ib_write_bw serves on rxe1 and writes from rxe0 (GID index 1,
# RoCE v2 over the veth pair), -s CHUNK -q LANES, as many iterations per QP as the bench
# sends chunks per lane. Prints both rates and their ratio.
#
# Soft-RoCE under qemu without KVM: an emulator's rates (tens of MB/s), a proxy for the
# ratio only, never an RDMA figure. On real hardware run the same two commands (printed
# with "+") between two hosts, with the daemon's real address.
set -u

B=${1:?usage: verbs_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [LANES] [CHUNK_KIB]}
OUT=${2:?usage: verbs_vm.sh BUILD_DIR OUT_DIR [SIZE_MIB] [LANES] [CHUNK_KIB]}
MIB=${3:-64}
LANES=${4:-2}
CHUNK=$((${5:-1024} * 1024))
SERVER=10.0.0.2
PORT=7471
W=$(mktemp -d /tmp/rdmacp-vmbench.XXXXXX)
DPID=
mkdir -p "$OUT"

cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	[ -f "$W/d.log" ] && cp "$W/d.log" "$OUT/daemon.log"
	rm -rf "$W"
}
trap cleanup EXIT

"$B/rdmacp" certs init "$W/certs" --host "$SERVER" >/dev/null || exit 1
cat >"$W/d.conf" <<EOF
[global]
listen = $SERVER:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
idle timeout = 60
allow bench = client
EOF
"$B/rdmacpd" --config "$W/d.conf" -v >"$W/d.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null && break
	sleep 0.1
done

bench=("$B/rdmacp" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --transport verbs --lanes "$LANES" --chunk-size "$CHUNK"
	bench --size "$((MIB * 1024 * 1024))" --json "$SERVER")
echo "+ ${bench[*]}"
"${bench[@]}" >"$OUT/bench.json" 2>"$OUT/bench.err"
echo "rdmacp bench exit $?: $(cat "$OUT/bench.json")"
ours=$(jq -r '.gbit_per_second // empty' "$OUT/bench.json")

if ! command -v ib_write_bw >/dev/null; then
	echo "ib_write_bw: not installed (apt-get install perftest): no ratio"
	exit 0
fi
iters=$((MIB * 1024 * 1024 / CHUNK / LANES))
wbw=(ib_write_bw -x 1 -s "$CHUNK" -q "$LANES" -n "$iters" --report_gbits -F)
echo "+ ${wbw[*]} -d rxe1   (server)"
echo "+ ${wbw[*]} -d rxe0 $SERVER"
"${wbw[@]}" -d rxe1 >"$OUT/wbw_server.out" 2>&1 &
SPID=$!
sleep 1
"${wbw[@]}" -d rxe0 "$SERVER" >"$OUT/wbw_client.out" 2>&1
echo "ib_write_bw exit $?"
wait "$SPID"
cat "$OUT/wbw_client.out"
# The result line: bytes, iterations, BW peak, BW average, MsgRate.
theirs=$(awk -v s="$CHUNK" '$1 == s && NF >= 5 { print $4 }' "$OUT/wbw_client.out" | tail -1)
echo "rdmacp bench: ${ours:-?} Gbit/s; ib_write_bw: ${theirs:-?} Gbit/s (${CHUNK} B, $LANES QPs)"
if [ -n "$ours" ] && [ -n "$theirs" ]; then
	awk -v a="$ours" -v b="$theirs" 'BEGIN { if (b > 0) printf "ratio rdmacp/ib_write_bw: %.2f (emulated Soft-RoCE: a proxy only)\n", a / b }'
fi
