#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/resume.sh [BUILD_DIR] [--size MiB] [--reps N] [--cut FRACTION] [--rate RATE]:
# the cost of a verified resume (issue 10, "Resume"). A push of one file
# (default 2048 MiB) with --partial and --bwlimit RATE (default size/4 per second),
# its client killed with kill -9 once the receiver's partial holds FRACTION
# (default 0.5) of the file; then the same push with --partial, unpaced.
#
#   missing = size - the bytes the receiver's journal says it had written (and
#             hashed) when the client died: what a perfect resume would send
#   sent    = the resumed run's payload bytes (--json summary "bytes")
#   ratio   = sent / missing       target <= 1.05
#
# Also printed: the resumed run's wall time and the file verified byte for byte
# (cmp). Tcp transport on loopback, a daemon of BUILD_DIR (default <repo>/build)
# running as the user who runs the script; data in $BENCH_DIR (/var/tmp/rdmacp-bench).
set -u
export LC_ALL=C

die() { echo "resume: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "$HERE/.." && pwd)/build
SIZE_MIB=2048 REPS=3 CUT=0.5 RATE=
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE_MIB=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--cut) CUT=$2; shift ;;
	--rate) RATE=$2; shift ;;
	-*) die "unknown option $1" ;;
	*) B=$1 ;;
	esac
	shift
done
[ -x "$B/rdmacp" ] && [ -x "$B/rdmacpd" ] || die "no rdmacp and rdmacpd in $B"
command -v jq >/dev/null || die "jq not installed"
B=$(realpath "$B")
SIZE=$((SIZE_MIB << 20))
[ -n "$RATE" ] || RATE="$((SIZE_MIB / 4))M"

BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
SRC=$BENCH_DIR/data/big-${SIZE_MIB}M.bin
mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
if [ ! -f "$SRC" ] || [ "$(stat -c %s "$SRC")" -ne $SIZE ]; then
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-resume-$RANDOM" </dev/zero 2>/dev/null |
		head -c $SIZE >"$SRC.tmp" && mv "$SRC.tmp" "$SRC" || die "cannot generate $SRC"
fi

R=$(mktemp -d "$BENCH_DIR/resume.XXXXXX") || die mktemp
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$R"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/rdmacp" certs init "$R/certs" >/dev/null || die "certs init"
mkdir -p "$R/mod"
cat >"$R/d.conf" <<EOF
[global]
listen = 127.0.0.1:$PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt

[bench]
path = $R/mod
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
"$B/rdmacpd" --config "$R/d.conf" >"$R/d.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
	sleep 0.025
done
CLIENT=("$B/rdmacp" --config /dev/null --cert "$R/certs/client.crt" --key "$R/certs/client.key"
	--ca "$R/certs/ca.crt" -P "$PORT" --transport tcp)

# journaled: the bytes the journal's records cover (header, then 32-byte records).
journaled() {
	python3 - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
hl = 4 + 4 + 8 + 8 + 4 + 2 + struct.unpack(">H", b[28:30])[0]
print(sum(struct.unpack(">Q", b[p + 8:p + 16])[0] for p in range(hl, len(b) - 31, 32)))
EOF
}

cat "$SRC" >/dev/null
echo "file: $SIZE_MIB MiB, cut at $CUT, paced at $RATE/s, build $B"
for i in $(seq 1 "$REPS"); do
	rm -rf "$R/mod/"* "$R/mod/.rdmacp-partial"
	"${CLIENT[@]}" -q --partial --bwlimit "$RATE" "$SRC" "127.0.0.1:bench/" >/dev/null 2>&1 &
	c=$!
	want=$(awk -v s=$SIZE -v f="$CUT" 'BEGIN { printf "%d", s * f }')
	for _ in $(seq 1 6000); do
		d=$(ls "$R/mod/.rdmacp-partial/"*.data 2>/dev/null | head -1)
		[ -n "$d" ] && [ "$(stat -c %s "$d")" -ge "$want" ] && break
		sleep 0.01
	done
	kill -9 $c 2>/dev/null
	wait $c 2>/dev/null
	sleep 1 # the daemon's session sees the connection go, appends its last records
	j=$(ls "$R/mod/.rdmacp-partial/"*.jnl 2>/dev/null | head -1)
	[ -n "$j" ] || die "no journal after the kill"
	missing=$((SIZE - $(journaled "$j")))
	t0=$(date +%s.%N)
	"${CLIENT[@]}" --json --partial "$SRC" "127.0.0.1:bench/" >"$R/out" 2>"$R/err" ||
		die "resumed push failed: $(cat "$R/err")"
	t1=$(date +%s.%N)
	sent=$(jq -r 'select(.event == "summary") | .bytes' "$R/out")
	kept=$(jq -r 'select(.event == "summary") | .resumed_bytes' "$R/out")
	cmp -s "$SRC" "$R/mod/$(basename "$SRC")" && same=identical || same=DIFFERENT
	awk -v i="$i" -v m="$missing" -v s="$sent" -v k="$kept" -v t="$(echo "$t1 - $t0" | bc -l)" \
		-v same="$same" 'BEGIN {
		printf "rep %d: missing %d, sent %d (kept %d): ratio %.4f, resumed run %.2f s, %s\n",
			i, m, s, k, (m > 0 ? s / m : 0), t, same }'
done
