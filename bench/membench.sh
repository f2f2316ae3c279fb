#!/usr/bin/env bash
# rdmacp bench (memory to memory, no disk) against iperf3 -P N on loopback, with the CPU
# each spends per GiB moved. See docs/PERFORMANCE.md.
#
# usage: bench/membench.sh [--size SIZE] [--lanes N] [--chunk-size S] [--transport T]
#   --size       bytes each tool moves (default 10G; K, M, G suffixes)
#   --lanes      rdmacp lanes and iperf3 parallel streams (default 2)
#   --chunk-size rdmacp chunk (default: rdmacp's, 1M)
#   --transport  rdmacp transport (default tcp; iperf3 is always TCP)
#
# rdmacp's lanes in clear (--no-encrypt), as iperf3's streams are.
# Both on 127.0.0.1: rdmacpd ('allow bench = client') and an iperf3 server the script
# starts and stops. Rates are each tool's own (rdmacp: first chunk posted to last one
# checked by the daemon; iperf3: receiver's end sum). CPU: machine-wide busy time from
# /proc/stat (user, nice, system, irq, softirq, steal: both ends, kernel included)
# between just before and just after each run, per GiB (2^30 bytes) moved. Anything
# else running on the machine counts too: run it on an idle machine.
# tcp on loopback: NOT RDMA numbers.
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd

SIZE=10G LANES=2 CHUNK='' TRANSPORT=tcp
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift ;;
	--lanes) LANES=$2; shift ;;
	--chunk-size) CHUNK=$2; shift ;;
	--transport) TRANSPORT=$2; shift ;;
	-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done

die() { echo "membench: $*" >&2; exit 1; }
[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
for t in iperf3 jq python3; do
	command -v "$t" >/dev/null || die "missing $t (apt-get install -y iperf3 jq python3)"
done
BYTES=$(numfmt --from=iec "$SIZE") || die "bad --size $SIZE"

R=$(mktemp -d "${TMPDIR:-/tmp}/rdmacp-membench.XXXXXX") || die mktemp
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$R"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # PORT PID
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}
HZ=$(getconf CLK_TCK)
# Machine-wide busy CPU seconds since boot (guest time is inside user already).
cpu_busy() {
	awk -v hz="$HZ" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat
}
per_gib() { echo "$1 / ($BYTES / 1073741824)" | bc -l; }

PORT=$(free_port)
"$RDMACP" certs init "$R/certs" >/dev/null || die "rdmacp certs init"
cat >"$R/d.conf" <<EOF
[global]
listen = 127.0.0.1:$PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt
idle timeout = 60
allow bench = client
EOF
"$RDMACPD" --config "$R/d.conf" >"$R/d.log" 2>&1 &
PIDS+=($!)
wait_port "$PORT" $! || { cat "$R/d.log" >&2; die "rdmacpd did not start"; }

echo "membench $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, kernel $(uname -r)"
echo "$(numfmt --to=iec "$BYTES")B moved by each, $LANES lanes / streams, 127.0.0.1 (loopback: NOT RDMA numbers)"
c0=$(cpu_busy)
sleep 2
echo "background: $(echo "($(cpu_busy) - $c0) / 2" | bc -l | xargs printf %.2f) of $(nproc) CPUs busy before the runs (counted in every CPU figure below)"

CMD=("$RDMACP" --config /dev/null --cert "$R/certs/client.crt" --key "$R/certs/client.key"
	--ca "$R/certs/ca.crt" -P "$PORT" --transport "$TRANSPORT" --lanes "$LANES"
	--no-encrypt ${CHUNK:+--chunk-size "$CHUNK"} bench --size "$BYTES" --json 127.0.0.1)
echo "+ ${CMD[*]}"
c0=$(cpu_busy)
"${CMD[@]}" >"$R/bench.json" || die "rdmacp bench failed: $(cat "$R/bench.json")"
c1=$(cpu_busy)
RD_GBIT=$(jq -r .gbit_per_second "$R/bench.json")
RD_CPU=$(per_gib "$(echo "$c1 - $c0" | bc -l)")

IPORT=$(free_port)
iperf3 -s -B 127.0.0.1 -p "$IPORT" -1 >"$R/iperf3.server" 2>&1 &
IPID=$!
PIDS+=("$IPID")
# Listening, without connecting to it (-1: it serves one client, a probe would be it).
for _ in $(seq 1 200); do
	ss -Hltn "sport = :$IPORT" 2>/dev/null | grep -q . && break
	sleep 0.01
done
ICMD=(iperf3 -c 127.0.0.1 -p "$IPORT" -P "$LANES" -n "$BYTES" -J)
echo "+ ${ICMD[*]}"
c0=$(cpu_busy)
"${ICMD[@]}" >"$R/iperf3.json" || die "iperf3 failed: $(tail -5 "$R/iperf3.json")"
c1=$(cpu_busy)
wait "$IPID" 2>/dev/null
IP_GBIT=$(jq -r '.end.sum_received.bits_per_second / 1e9' "$R/iperf3.json")
IP_CPU=$(per_gib "$(echo "$c1 - $c0" | bc -l)")

echo
echo "| tool                                 |  Gbit/s | CPU-s per GiB (machine) |"
echo "|--------------------------------------|--------:|------------------------:|"
printf '| %-36s | %7.2f | %23.2f |\n' "rdmacp bench ($TRANSPORT, $LANES lanes)" "$RD_GBIT" "$RD_CPU"
printf '| %-36s | %7.2f | %23.2f |\n' "iperf3 -P $LANES" "$IP_GBIT" "$IP_CPU"
echo
ratio=$(echo "$RD_GBIT / $IP_GBIT" | bc -l)
printf 'ratio rdmacp bench / iperf3 -P %s: %.2fx throughput (target >= 0.9: %s), %.2fx CPU per GiB\n' \
	"$LANES" "$ratio" "$([ "$(echo "$ratio >= 0.9" | bc -l)" = 1 ] && echo MET || echo 'NOT MET')" \
	"$(echo "$RD_CPU / $IP_CPU" | bc -l)"
