#!/usr/bin/env bash
# Delta re-sync of a file with 1 % changed, in one run, on one machine over loopback
# (see docs/PERFORMANCE.md): a 2 GiB file of random data, of which 1 % (20 regions of
# 1 MiB, at chunk offsets spread over the file) is then rewritten; the old version is
# at the destination, and the new one is pushed
#   - by rdmacp --delta (tcp transport, 1 MiB chunks) into a module,
#   - by rsync --no-whole-file --inplace --ignore-times (-I: the same size and, to the
#     second, mtime would otherwise skip it) into an rsync daemon module,
# each result checked byte-identical; for reference also rdmacp without --delta (a full
# copy over the old file). Printed: the wall time of each, rdmacp's
# speed-up, and each tool's payload (rdmacp: data_bytes; rsync: "Total bytes sent")
# against the changed bytes. Targets: payload <= 1.1 x the changed bytes; rdmacp >= 3x
# faster than rsync.
#
# With --device the destinations are loop devices of the same size holding the old
# version (rdmacp: a module with devices = yes; rsync: --write-devices), restored before
# each run: the issue's "delta re-sync of a 2 GiB loop device" (root, losetup).
#
# usage: bench/delta.sh [--quick] [--reps N] [--device]
#   --quick    a 256 MiB file (smoke run)
#   --reps N   each measurement N times, the median reported (default 1)
#   --device   loop device targets instead of files
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

QUICK=0 REPS=1 DEVICE=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--reps) REPS=$2; shift ;;
	--device) DEVICE=1 ;;
	-h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done
MIB=$((1 << 20))
FILE_MIB=2048
[ "$QUICK" = 1 ] && FILE_MIB=256
NCHANGE=$((FILE_MIB / 100)) # 1 %, in whole MiB
[ "$NCHANGE" -ge 1 ] || NCHANGE=1
CHANGED=$((NCHANGE * MIB))

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
need rsync python3 openssl bc cmp jq
bench_workdir delta

# ---------------------------------------------------------------- the files
OLD=$R/old.img
NEW=$R/src/vm.img
mkdir -p "$R/src" "$R/mod" "$R/rs"
log "making a ${FILE_MIB} MiB file, then changing $NCHANGE MiB of it"
openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-delta-old" </dev/zero 2>/dev/null |
	head -c $((FILE_MIB * MIB)) >"$OLD" || die "cannot make $OLD"
cp "$OLD" "$NEW" || die "cp"
for i in $(seq 0 $((NCHANGE - 1))); do
	# Spread over the file, at MiB offsets (whole chunks of rdmacp's 1 MiB).
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-delta-$i" </dev/zero 2>/dev/null |
		head -c $MIB |
		dd of="$NEW" bs=1M seek=$((i * FILE_MIB / NCHANGE + 7 * i % 13)) conv=notrunc \
			status=none || die "dd"
done

# ---------------------------------------------------------------- daemons
if [ "$DEVICE" = 1 ]; then
	need losetup mknod
	bench_rdmacpd "$R/mod" 300 "devices = yes"
	# A loop device per destination, its node in the module under the file's name.
	for d in mod rs; do
		cp "$OLD" "$R/$d.backing" || die "cp"
		dev=$(losetup -f --show "$R/$d.backing") || die "losetup (needs root)"
		LOOPS+=("$dev")
		mknod "$R/$d/vm.img" b "$((0x$(stat -c %t "$dev")))" "$((0x$(stat -c %T "$dev")))" ||
			die "mknod"
	done
	RS_WD=(--write-devices)
else
	bench_rdmacpd "$R/mod" 300
	RS_WD=()
fi
RD+=(--chunk-size 1M)
# rsyncd refuses --write-devices unless a module lifts it.
bench_rsyncd "$R/rs" "$([ "$DEVICE" = 1 ] && echo 'refuse options = !write-devices')"

# restore PATH: the old version at a destination (a file copied, a device overwritten).
restore() {
	if [ "$DEVICE" = 1 ]; then
		dd if="$OLD" of="$1" bs=1M oflag=direct conv=notrunc status=none || die "dd"
	else
		cp "$OLD" "$1" || die "cp"
	fi
}

# ---------------------------------------------------------------- runs
tr_=() ts=() tf=()
for i in $(seq 1 "$REPS"); do
	restore "$R/mod/vm.img"
	restore "$R/rs/vm.img"
	sync -f "$R"
	cat "$NEW" "$R/mod/vm.img" "$R/rs/vm.img" >/dev/null # page cache, for both alike
	t0=$(now)
	"${RD[@]}" --json --delta "$NEW" 127.0.0.1:bench/ >"$R/rd.json" || die "rdmacp failed"
	t1=$(now)
	tr_+=("$(echo "$t1 - $t0" | bc -l)")
	t0=$(now)
	rsync "${RS_WD[@]}" --no-whole-file --inplace --ignore-times --stats "$NEW" \
		"rsync://127.0.0.1:$RS_PORT/bench/" \
		>"$R/rs.stats" || die "rsync failed"
	t1=$(now)
	ts+=("$(echo "$t1 - $t0" | bc -l)")
	cmp -s "$NEW" "$R/mod/vm.img" || die "rdmacp's copy differs"
	cmp -s "$NEW" "$R/rs/vm.img" || die "rsync's copy differs"
	restore "$R/mod/vm.img"
	sync -f "$R"
	cat "$NEW" "$R/mod/vm.img" >/dev/null
	t0=$(now)
	"${RD[@]}" -q "$NEW" 127.0.0.1:bench/ || die "rdmacp (full) failed"
	t1=$(now)
	tf+=("$(echo "$t1 - $t0" | bc -l)")
	cmp -s "$NEW" "$R/mod/vm.img" || die "rdmacp's full copy differs"
done
RD_DATA=$(jq -r 'select(.event == "summary") | .data_bytes' "$R/rd.json")
RD_SKIP=$(jq -r 'select(.event == "summary") | .skipped_bytes' "$R/rd.json")
RS_SENT=$(awk -F': ' '/^Total bytes sent/ { gsub(",", "", $2); print $2 }' "$R/rs.stats")

T_RD=$(printf '%s\n' "${tr_[@]}" | median)
T_RS=$(printf '%s\n' "${ts[@]}" | median)
T_FULL=$(printf '%s\n' "${tf[@]}" | median)

# ---------------------------------------------------------------- report
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1)"
echo "$(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), medians of $REPS"
echo "a ${FILE_MIB} MiB file, $CHANGED bytes changed ($NCHANGE regions of 1 MiB)$([ "$DEVICE" = 1 ] && echo ", onto loop devices")"
printf '%-40s %8.3f s  payload %s (%.3fx changed), unchanged %s (%s)\n' "rdmacp --delta (tcp)" \
	"$T_RD" "$RD_DATA" "$(echo "$RD_DATA / $CHANGED" | bc -l)" "$RD_SKIP" "${tr_[*]}"
printf '%-40s %8.3f s  payload %s (%.3fx changed) %6.2fx (%s)\n' \
	"rsync --no-whole-file --inplace" "$T_RS" "$RS_SENT" \
	"$(echo "$RS_SENT / $CHANGED" | bc -l)" "$(echo "$T_RS / $T_RD" | bc -l)" "${ts[*]}"
printf '%-40s %8.3f s  payload %s (%s)\n' "rdmacp, full copy (no --delta)" "$T_FULL" \
	$((FILE_MIB * MIB)) "${tf[*]}"
ratio=$(echo "$T_RS / $T_RD" | bc -l)
printf 'target %-40s %6.3fx  %s\n' "rdmacp payload <= 1.1x changed" \
	"$(echo "$RD_DATA / $CHANGED" | bc -l)" \
	"$([ "$(echo "$RD_DATA <= 1.1 * $CHANGED" | bc -l)" = 1 ] && echo PASS || echo MISS)"
printf 'target %-40s %6.2fx  %s\n' "rdmacp >= 3x faster than rsync" "$ratio" \
	"$([ "$(echo "$ratio >= 3" | bc -l)" = 1 ] && echo PASS || echo MISS)"
