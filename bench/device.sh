#!/usr/bin/env bash
# A full block device copy through rdmacp against a local dd, same run (issue 11:
# rdmacp should reach at least 0.9x of local dd device to device).
#
# usage: bench/device.sh [SIZE_MIB [REPS]]   (default 2048 MiB, 3 repetitions; run as root)
#
# Two loop devices (losetup --direct-io=on, so the backing files' page cache is out of
# the way) over files in a temp dir: SRC filled once with random data, DST the target.
# Each repetition times, alternating:
#   dd      dd if=SRC of=DST bs=1M iflag=direct oflag=direct conv=fsync
#   rdmacp  rdmacp SRC 127.0.0.1:disks/dst  (a real rdmacpd on loopback, tcp transport;
#           module 'devices = yes', dst a node of DST made with mknod; the client reads
#           SRC with O_DIRECT, the daemon writes DST with O_DIRECT, fsyncs it and reads it
#           back over the whole length to verify it before it reports success)
# and prints the median of each and the ratio dd time / rdmacp time (>= 0.9 is the goal).
# cmp checks the devices after the last rdmacp copy. RDMACP_BUILD_DIR picks the build.
set -u
SIZE_MIB=${1:-2048}
REPS=${2:-3}
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/integration/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "loop devices need root"
LOOPS=()
bench_cleanup() {
	local l
	for l in "${LOOPS[@]}"; do
		losetup -d "$l" 2>/dev/null
	done
	cleanup
}
trap bench_cleanup EXIT

new_loop() {
	truncate -s "${SIZE_MIB}M" "$T/$1.back" || die "truncate"
	LOOP=$(losetup -f --show --direct-io=on "$T/$1.back") || skip "losetup failed"
	LOOPS+=("$LOOP")
}

mkdir -p "$T/disks"
setup_standard "" "[disks]" "path = $T/disks" "allow = client" "devices = yes"
new_loop src
SRC=$LOOP
new_loop dst
DST=$LOOP
mknod "$T/disks/dst" b $(stat -Lc '%Hr %Lr' "$DST") || skip "mknod failed"
echo "filling $SRC with $SIZE_MIB MiB of random data"
openssl enc -aes-128-ctr -pass pass:device -nosalt -pbkdf2 </dev/zero 2>/dev/null |
	head -c $((SIZE_MIB * 1024 * 1024)) | dd of="$SRC" bs=1M iflag=fullblock oflag=direct \
	status=none || die "fill"

timed() {
	local t0 t1
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
	t0=$(date +%s.%N)
	"$@" >"$T/out" 2>"$T/err" || die "$*: $(tail -3 "$T/err")"
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

dd_t=() rd_t=()
for i in $(seq 1 "$REPS"); do
	dd_t+=("$(timed dd if="$SRC" of="$DST" bs=1M iflag=direct oflag=direct conv=fsync)")
	rd_t+=("$(timed "${CLIENT[@]}" -q "$SRC" 127.0.0.1:disks/dst)")
	echo "rep $i: dd ${dd_t[-1]} s, rdmacp ${rd_t[-1]} s"
done
cmp "$SRC" "$DST" || die "devices differ after the copy"
dd_m=$(median "${dd_t[@]}")
rd_m=$(median "${rd_t[@]}")
printf 'device copy of %d MiB, median of %d: dd %.2f s (%.0f MiB/s), rdmacp %.2f s (%.0f MiB/s), ratio %.2f\n' \
	"$SIZE_MIB" "$REPS" "$dd_m" "$(echo "$SIZE_MIB / $dd_m" | bc -l)" "$rd_m" \
	"$(echo "$SIZE_MIB / $rd_m" | bc -l)" "$(echo "$dd_m / $rd_m" | bc -l)"
