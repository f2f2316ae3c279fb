#!/usr/bin/env bash
# A sparse VM image, in one run, on one machine over loopback (see docs/PERFORMANCE.md):
# a 4 GiB image with 10 % data (41 extents of 10 MiB, none on a chunk boundary), pushed
#   - by rdmacp (tcp transport) into a module,
#   - by rsync --sparse into an rsync daemon module,
#   - by dd | nc into dd conv=sparse on the other end,
# each result checked byte-identical (and, for rdmacp, with the source's holes); the
# wall time of each and rdmacp's speed-up over the faster of the other two are printed.
# Target: rdmacp >= 5x the faster.
#
# usage: bench/sparse.sh [--quick] [--reps N]
#   --quick    a 512 MiB image (smoke run)
#   --reps N   each measurement N times, the median reported (default 1)
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench), RDMACP_BUILD_DIR (default
# <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
EXTENTS=$SRC_DIR/tests/tools/extents.py

QUICK=0 REPS=1
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--reps) REPS=$2; shift ;;
	-h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done
IMG_MIB=4096
[ "$QUICK" = 1 ] && IMG_MIB=512
# 40 extents, each a 400th of the image (10 % in all), one every 40th of it, in 4 KiB blocks.
NEXT=40
EXT_BLK=$((IMG_MIB * 256 / 400))
STEP_BLK=$((IMG_MIB * 256 / NEXT))

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
need rsync nc dd python3 openssl bc cmp
bench_workdir sparse

# ---------------------------------------------------------------- the image
IMG=$R/src/vm.img
mkdir -p "$R/src" "$R/mod" "$R/rs" "$R/nc"
truncate -s $((IMG_MIB << 20)) "$IMG" || die "truncate"
[ "$(python3 "$EXTENTS" "$IMG")" = "size $((IMG_MIB << 20))" ] ||
	die "$BENCH_DIR has no holes: set BENCH_DIR to a file system that has them"
log "making a ${IMG_MIB} MiB image with $NEXT extents of $((EXT_BLK * 4)) KiB"
for i in $(seq 0 $((NEXT - 1))); do
	# Each 12 KiB past its 40th of the image: off every chunk boundary.
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-bench-$i" </dev/zero 2>/dev/null |
		head -c $((EXT_BLK * 4096)) |
		dd of="$IMG" bs=4k seek=$((i * STEP_BLK + 3)) conv=notrunc status=none || die "dd"
done
DATA=$(python3 "$EXTENTS" "$IMG" | awk '$1 != "size" { s += $2 } END { print s }')
log "data: $DATA bytes of $((IMG_MIB << 20))"

# ---------------------------------------------------------------- daemons
bench_rdmacpd "$R/mod"
bench_rsyncd "$R/rs"

# ---------------------------------------------------------------- runs
tr_=() ts=() tn=()
for i in $(seq 1 "$REPS"); do
	rm -f "$R/mod/vm.img" "$R/rs/vm.img" "$R/nc/vm.img"
	cat "$IMG" >/dev/null # the data in the page cache, for every tool alike
	t0=$(now)
	"${RD[@]}" --json "$IMG" 127.0.0.1:bench/ >"$R/rd.json" || die "rdmacp failed"
	t1=$(now)
	tr_+=("$(echo "$t1 - $t0" | bc -l)")
	t0=$(now)
	rsync --sparse "$IMG" "rsync://127.0.0.1:$RS_PORT/bench/" || die "rsync failed"
	t1=$(now)
	ts+=("$(echo "$t1 - $t0" | bc -l)")
	NC_PORT=$(free_port)
	nc -l 127.0.0.1 "$NC_PORT" | dd of="$R/nc/vm.img" bs=1M conv=sparse status=none &
	p=$!
	sleep 0.2
	t0=$(now)
	dd if="$IMG" bs=1M status=none | nc -N 127.0.0.1 "$NC_PORT" || die "dd | nc failed"
	wait $p
	t1=$(now)
	tn+=("$(echo "$t1 - $t0" | bc -l)")
	truncate -s $((IMG_MIB << 20)) "$R/nc/vm.img" # dd conv=sparse leaves a trailing hole out
done
for d in mod rs nc; do
	cmp -s "$IMG" "$R/$d/vm.img" || die "the copy in $d differs"
done
[ "$(python3 "$EXTENTS" "$IMG")" = "$(python3 "$EXTENTS" "$R/mod/vm.img")" ] ||
	die "rdmacp's copy has other holes"
PAYLOAD=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") == "summary": print(e["bytes"], e["zero_bytes"])' "$R/rd.json")

T_RD=$(printf '%s\n' "${tr_[@]}" | median)
T_RS=$(printf '%s\n' "${ts[@]}" | median)
T_NC=$(printf '%s\n' "${tn[@]}" | median)
FASTER=$T_RS
[ "$(echo "$T_NC < $T_RS" | bc -l)" = 1 ] && FASTER=$T_NC

# ---------------------------------------------------------------- report
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1)"
echo "$(nproc) CPUs, $(uname -r), medians of $REPS; a ${IMG_MIB} MiB image, $DATA bytes of data"
echo "rdmacp payload and zero bytes: $PAYLOAD"
printf '%-40s %8.3f s (%s)\n' "rdmacp (tcp)" "$T_RD" "${tr_[*]}"
printf '%-40s %8.3f s %6.2fx (%s)\n' "rsync --sparse (daemon)" "$T_RS" \
	"$(echo "$T_RS / $T_RD" | bc -l)" "${ts[*]}"
printf '%-40s %8.3f s %6.2fx (%s)\n' "dd | nc, dd conv=sparse" "$T_NC" \
	"$(echo "$T_NC / $T_RD" | bc -l)" "${tn[*]}"
ratio=$(echo "$FASTER / $T_RD" | bc -l)
printf 'target %-40s %6.2fx  %s\n' "rdmacp >= 5x the faster" "$ratio" \
	"$([ "$(echo "$ratio >= 5" | bc -l)" = 1 ] && echo PASS || echo MISS)"
