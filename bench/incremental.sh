#!/usr/bin/env bash
# Incremental runs, in one run, on one machine over loopback (see docs/PERFORMANCE.md):
#   (a) rdmacp check --level checksum of a 2 GiB file (source here, its copy in a
#       module) vs xxhsum -H128 run on each side at the same time (what a user would
#       do by hand on two hosts): target rdmacp >= 0.9x (time of xxhsum / time of check)
#   (b) re-run over an unchanged 10,000-file tree: rdmacp -r -p --skip quick vs the
#       rsync daemon's re-run (rsync -a, its default quick check), files/s:
#       target rdmacp >= 2x rsync
#
# usage: bench/incremental.sh [--quick] [--reps N]
#   --quick    256 MiB and 1,000 files (smoke run)
#   --reps N   each measurement N times, the median reported (default 3)
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; source data cached there,
# shared with bench/run.sh), RDMACP_BUILD_DIR (default <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

QUICK=0 REPS=3
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--reps) REPS=$2; shift ;;
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	BIG_MIB=256 NSMALL=1000
else
	BIG_MIB=2048 NSMALL=10000
fi
SMALL_SIZE=4096

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
need rsync xxhsum python3 openssl bc
mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
bench_workdir inc

# ---------------------------------------------------------------- source data (as bench/run.sh)
BIG=$BENCH_DIR/data/big-${BIG_MIB}M.bin
SMALL=$BENCH_DIR/data/small-${NSMALL}x${SMALL_SIZE}
bench_random "$BIG" "$BIG_MIB"
bench_small "$SMALL" "$NSMALL" "$SMALL_SIZE"

# ---------------------------------------------------------------- daemons
mkdir -p "$R/mod"
bench_rdmacpd "$R/mod"
bench_rsyncd "$R/mod"

# ---------------------------------------------------------------- (a) check vs xxhsum
log "(a) copying the ${BIG_MIB} MiB file into the module"
cp "$BIG" "$R/mod/big.bin" || die "cp"
sync -f "$R/mod"
cat "$BIG" "$R/mod/big.bin" >/dev/null # both in the page cache, for both tools alike
ta=() tx=()
for i in $(seq 1 "$REPS"); do
	t0=$(now)
	"${RD[@]}" check --level checksum "$BIG" 127.0.0.1:bench/big.bin 2>"$R/check.err" ||
		die "check failed: $(cat "$R/check.err")"
	t1=$(now)
	ta+=("$(echo "$t1 - $t0" | bc -l)")
	t0=$(now)
	xxhsum -H128 "$BIG" >"$R/x1" &
	p=$!
	xxhsum -H128 "$R/mod/big.bin" >"$R/x2"
	wait $p
	t1=$(now)
	tx+=("$(echo "$t1 - $t0" | bc -l)")
	[ "$(cut -d' ' -f1 "$R/x1")" = "$(cut -d' ' -f1 "$R/x2")" ] || die "xxhsum: the files differ"
done
A_RD=$(printf '%s\n' "${ta[@]}" | median)
A_XX=$(printf '%s\n' "${tx[@]}" | median)

# ---------------------------------------------------------------- (b) unchanged re-run
log "(b) first copies of the $NSMALL-file tree (rdmacp -r -p, rsync -a)"
"${RD[@]}" -q -r -p "$SMALL/" 127.0.0.1:bench/rd/ || die "rdmacp first copy"
rsync -a "$SMALL/" "rsync://127.0.0.1:$RS_PORT/bench/rs/" || die "rsync first copy"
tb=() ts=()
for i in $(seq 1 "$REPS"); do
	# Quiet, as rsync is by default (no line per file); what it did is checked
	# in the daemon's log line for the session: nothing sent, every file kept.
	t0=$(now)
	"${RD[@]}" -q -r -p --skip quick "$SMALL/" 127.0.0.1:bench/rd/ ||
		die "rdmacp re-run failed"
	t1=$(now)
	tb+=("$(echo "$t1 - $t0" | bc -l)")
	done_line=""
	for _ in $(seq 1 100); do
		done_line=$(grep 'push to bench done' "$R/d.log" | sed -n "$((i + 1))p")
		[ -n "$done_line" ] && break
		sleep 0.02
	done
	case $done_line in
	*" 0 bytes, 0 failed, $NSMALL skipped"*) ;;
	*) die "rdmacp re-run $i: the daemon says: ${done_line:-nothing}" ;;
	esac
	t0=$(now)
	rsync -a --stats "$SMALL/" "rsync://127.0.0.1:$RS_PORT/bench/rs/" >"$R/rs.stats" ||
		die "rsync re-run failed"
	t1=$(now)
	ts+=("$(echo "$t1 - $t0" | bc -l)")
	grep -q 'Number of regular files transferred: 0' "$R/rs.stats" || die "rsync re-run copied files"
done
B_RD=$(printf '%s\n' "${tb[@]}" | median)
B_RS=$(printf '%s\n' "${ts[@]}" | median)

# ---------------------------------------------------------------- report
ge() { [ "$(echo "$1 >= $2" | bc -l)" = 1 ] && echo PASS || echo MISS; }
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1); $(xxhsum --version 2>&1 | head -1)"
echo "$(nproc) CPUs, $(uname -r), medians of $REPS"
printf '(a) %-44s %8.3f s (%s)\n' "rdmacp check --level checksum, ${BIG_MIB} MiB" "$A_RD" "${ta[*]}"
printf '(a) %-44s %8.3f s (%s)\n' "xxhsum -H128 on both copies at once" "$A_XX" "${tx[*]}"
printf '(b) %-44s %8.3f s %9.0f files/s (%s)\n' "rdmacp -r -p --skip quick, $NSMALL files" "$B_RD" \
	"$(echo "$NSMALL / $B_RD" | bc -l)" "${tb[*]}"
printf '(b) %-44s %8.3f s %9.0f files/s (%s)\n' "rsync -a (daemon), $NSMALL files" "$B_RS" \
	"$(echo "$NSMALL / $B_RS" | bc -l)" "${ts[*]}"
ra=$(echo "$A_XX / $A_RD" | bc -l)
rb=$(echo "$B_RS / $B_RD" | bc -l)
printf 'target %-48s %6.2fx  %s\n' "check --level checksum >= 0.9x xxhsum" "$ra" "$(ge "$ra" 0.9)"
printf 'target %-48s %6.2fx  %s\n' "re-run --skip quick >= 2x rsync files/s" "$rb" "$(ge "$rb" 2.0)"
