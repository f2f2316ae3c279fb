#!/usr/bin/env bash
# Many small files, in one run, on one machine over loopback (see docs/PERFORMANCE.md):
# N files of S bytes in one directory, pushed into an empty directory, by
#   rdmacp -r (tcp lanes; every file verified, fsynced and renamed into place),
#     sealed (AES-256-GCM, its default) and with --no-encrypt
#   tar -c | nc | tar -x, then one sync -f of the destination
#   rsync -a to an rsync daemon (its default: no fsync), then one sync -f
#   rsync -a --fsync to an rsync daemon (the same durability as rdmacp)
# Each case is timed end to end (sync included); files/s and the ratio
# rdmacp/tool (> 1: rdmacp is faster) are printed, and the peak RSS of the
# rdmacp client and of the daemon's session. The targets read rdmacp in clear:
# tar | nc | tar and the rsync daemon's protocol carry the data in clear too;
# the sealed row prices the encryption beside it.
# Targets (issue 12): rdmacp >= 1.0x tar|nc|tar + sync and >= 1.0x rsync + sync
# on 10,000 x 4 KiB; 100,000 x 1 KiB with both peaks within 10 % of the
# 10,000-file run's.
#
# usage: bench/smallfiles.sh [--quick] [--reps N] [--files N --size S] [--no-flat]
#        bench/smallfiles.sh --tree DIR [--reps N]
#   --quick      1,000 x 4 KiB, no 100,000-file run
#   --reps N     each measurement N times, the median reported (default 3)
#   --files N --size S   the main case (default 10000 x 4096)
#   --no-flat    leave out the 100,000 x 1 KiB memory run
#   --tree DIR   instead: a real tree (e.g. /usr) copied whole with its modes and
#                times, rdmacp -r -p (sealed, its default, and --no-encrypt) vs
#                rsync -aW to the rsync daemon, then one sync (target: rdmacp
#                >= 2x, in clear as the rsync daemon); the tree must fit three
#                times in BENCH_DIR
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; source data cached there),
# RDMACP_BUILD_DIR (default <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

REPS=3 NFILES=10000 FSIZE=4096 FLAT=1 TREE=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) NFILES=1000 FLAT=0 ;;
	--reps) REPS=$2; shift ;;
	--files) NFILES=$2; shift ;;
	--size) FSIZE=$2; shift ;;
	--no-flat) FLAT=0 ;;
	--tree) TREE=$2; shift ;;
	-h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
need rsync nc tar python3 openssl bc /usr/bin/time
mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
bench_workdir small

# gen_tree N SIZE: a cached directory of N files of SIZE random bytes; prints its path.
gen_tree() {
	bench_small "$BENCH_DIR/data/small-${1}x${2}" "$1" "$2"
	echo "$BENCH_DIR/data/small-${1}x${2}"
}

DST=$R/dst
OLD_N=0
# A fresh empty destination on the same file system. The previous one is moved
# aside, not deleted (ext4 skips recently deleted inodes when it allocates, which
# would bill the next run for the previous one's clean-up), and nothing dirty is
# left to be paid by the next run.
fresh_dst() {
	[ -d "$DST" ] && { mkdir -p "$R/old" && mv "$DST" "$R/old/$((OLD_N += 1))" || die "mv $DST"; }
	mkdir -p "$DST" || die "mkdir $DST"
	sync -f "$R"
}
warm() { find "$1" -type f -exec cat {} + >/dev/null; }

bench_rdmacpd "$R"
bench_rsyncd "$R"
RSYNC_FSYNC=
rsync --help 2>&1 | grep -q -- '--fsync' && RSYNC_FSYNC=--fsync

# session_peak N0: the peak RSS (kB) of the session that ended after the log held N0
# "ended:" lines. rdmacpd logs it when it reaps the session (from wait4), so
# nothing samples /proc while the copy is timed, and the peak is not missed.
session_peak() {
	local _ n
	for _ in $(seq 1 100); do
		n=$(grep -c 'ended: .* peak RSS' "$R/d.log")
		[ "$n" -gt "$1" ] && break
		sleep 0.02
	done
	grep 'ended: .* peak RSS' "$R/d.log" | tail -1 | sed -n 's/.*peak RSS \([0-9]*\) KiB.*/\1/p'
}

# one TOOL SRC: one timed copy of SRC's files into a fresh DST; sets T (s).
one() {
	local tool=$1 src=$2 t0 t1 port rp n n0
	fresh_dst
	warm "$src"
	case $tool in
	rdmacp | rdmacp-clear)
		n0=$(grep -c 'ended: .* peak RSS' "$R/d.log")
		t0=$(now)
		/usr/bin/time -f %M -o "$R/c.rss" "${RD[@]}" -q -r ${TREE:+-p} \
			$([ "$tool" = rdmacp-clear ] && echo --no-encrypt) "$src/" "127.0.0.1:bench/dst/" 2>"$R/c.err" ||
			{ cat "$R/c.err" "$R/d.log" >&2; die "rdmacp failed"; }
		t1=$(now)
		session_peak "$n0" >"$R/hwm"
		;;
	nc)
		port=$(free_port)
		(nc -l -s 127.0.0.1 -p "$port" | tar -x -C "$DST") &
		rp=$!
		for _ in $(seq 1 200); do
			ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
			sleep 0.01
		done
		t0=$(now)
		tar -c -C "$src" . | nc -N 127.0.0.1 "$port" || die "tar|nc failed"
		wait "$rp" || die "nc|tar failed"
		sync -f "$DST"
		t1=$(now)
		;;
	rsync)
		t0=$(now)
		rsync -a ${TREE:+-W} "$src/" "rsync://127.0.0.1:$RS_PORT/bench/dst/" || die "rsync failed"
		sync -f "$DST"
		t1=$(now)
		;;
	rsync-fsync)
		t0=$(now)
		rsync -a $RSYNC_FSYNC "$src/" "rsync://127.0.0.1:$RS_PORT/bench/dst/" || die "rsync failed"
		t1=$(now)
		;;
	esac
	n=$(find "$DST" -type f | wc -l)
	[ "$n" -eq "$(find "$src" -type f | wc -l)" ] || die "$tool: $n files arrived"
	T=$(echo "$t1 - $t0" | bc -l)
}

# measure SRC TOOL...: REPS rounds, each running every tool once (so a slow spell of
# the disk is shared, not billed to one tool); MED[TOOL] = median seconds (and the
# rdmacp peaks).
declare -A MED TIMES
C_RSS=0 S_HWM=0
measure() {
	local src=$1 i tool r h
	shift
	for i in $(seq 1 "$REPS"); do
		for tool in "$@"; do
			one "$tool" "$src"
			TIMES[$tool]+="$T "
			if [ "$tool" = rdmacp ]; then
				r=$(cat "$R/c.rss") h=$(cat "$R/hwm" 2>/dev/null || echo 0)
				[ "$r" -gt "$C_RSS" ] && C_RSS=$r
				[ "$h" -gt "$S_HWM" ] && S_HWM=$h
			fi
			log "$tool rep $i: $(printf %.3f "$T") s"
		done
	done
	for tool in "$@"; do
		# shellcheck disable=SC2086 # the times, one word each
		MED[$tool]=$(printf '%s\n' ${TIMES[$tool]} | median)
		TIMES[$tool]=
	done
}

if [ -n "$TREE" ]; then
	[ -d "$TREE" ] || die "no directory $TREE"
	n=$(find "$TREE" -type f | wc -l)
	echo "tree $TREE $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "$n files, $(du -sh "$TREE" 2>/dev/null | cut -f1); reps $REPS (median); NOT RDMA numbers (tcp, loopback)"
	measure "$TREE" rdmacp rdmacp-clear rsync
	printf '| rdmacp -r -p (lanes sealed, the default) | %.2f s | %.2fx |\n' "${MED[rdmacp]}" \
		"$(echo "${MED[rsync]} / ${MED[rdmacp]}" | bc -l)"
	printf '| rdmacp -r -p --no-encrypt | %.2f s | %.2fx |\n' "${MED[rdmacp-clear]}" \
		"$(echo "${MED[rsync]} / ${MED[rdmacp-clear]}" | bc -l)"
	printf '| rsync -aW + sync | %.2f s | 1.00x |\n' "${MED[rsync]}"
	# Like for like: the rsync daemon's protocol carries the data in clear.
	r=$(echo "${MED[rsync]} / ${MED[rdmacp-clear]}" | bc -l)
	printf 'target rdmacp >= 2x rsync daemon + sync on the tree (both in clear): %.2fx %s\n' "$r" \
		"$([ "$(echo "$r >= 2" | bc -l)" = 1 ] && echo MET || echo 'NOT MET')"
	exit 0
fi
SRC=$(gen_tree "$NFILES" "$FSIZE")
echo "small files $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$NFILES files of $FSIZE B, one directory; $(df -T "$R" | awk 'NR==2 {print $2}'); reps $REPS (median)"
echo "transport: rdmacp tcp over loopback -- NOT RDMA numbers"
measure "$SRC" rdmacp rdmacp-clear nc rsync rsync-fsync
echo
echo "| tool | seconds | files/s | rdmacp clear/tool |"
echo "|---|---:|---:|---:|"
for t in rdmacp rdmacp-clear nc rsync rsync-fsync; do
	case $t in
	rdmacp) label="rdmacp -r (verified, fsynced; sealed, the default)" ;;
	rdmacp-clear) label="rdmacp -r --no-encrypt" ;;
	nc) label="tar | nc | tar, then sync" ;;
	rsync) label="rsync daemon, then sync" ;;
	rsync-fsync) label="rsync daemon $RSYNC_FSYNC" ;;
	esac
	printf '| %s | %.3f | %.0f | %.2fx |\n' "$label" "${MED[$t]}" \
		"$(echo "$NFILES / ${MED[$t]}" | bc -l)" "$(echo "${MED[$t]} / ${MED[rdmacp-clear]}" | bc -l)"
done
echo "rdmacp peak RSS (sealed): client $((C_RSS / 1024)) MiB, daemon session $((S_HWM / 1024)) MiB"
ge() { [ "$(echo "$1 >= $2" | bc -l)" = 1 ] && echo MET || echo "NOT MET"; }
r=$(echo "${MED[nc]} / ${MED[rdmacp-clear]}" | bc -l)
printf 'target rdmacp >= 1.0x tar|nc|tar + sync (both in clear): %.2fx %s (sealed: %.2fx)\n' "$r" \
	"$(ge "$r" 1.0)" "$(echo "${MED[nc]} / ${MED[rdmacp]}" | bc -l)"
r=$(echo "${MED[rsync]} / ${MED[rdmacp-clear]}" | bc -l)
printf 'target rdmacp >= 1.0x rsync daemon + sync (both in clear): %.2fx %s (sealed: %.2fx)\n' "$r" \
	"$(ge "$r" 1.0)" "$(echo "${MED[rsync]} / ${MED[rdmacp]}" | bc -l)"

if [ "$FLAT" = 1 ]; then
	C10=$C_RSS S10=$S_HWM
	C_RSS=0 S_HWM=0
	BIGTREE=$(gen_tree 100000 1024)
	REPS=1 measure "$BIGTREE" rdmacp
	echo
	printf '100,000 x 1 KiB: %.3f s (%.0f files/s); peak RSS client %d MiB (%+.1f %%), session %d MiB (%+.1f %%) vs the %d-file run\n' \
		"${MED[rdmacp]}" "$(echo "100000 / ${MED[rdmacp]}" | bc -l)" \
		$((C_RSS / 1024)) "$(echo "($C_RSS - $C10) * 100 / $C10" | bc -l)" \
		$((S_HWM / 1024)) "$(echo "($S_HWM - $S10) * 100 / $S10" | bc -l)" "$NFILES"
fi
