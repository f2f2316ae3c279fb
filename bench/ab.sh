#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/ab.sh OLD_BUILD NEW_BUILD [--reps N] [--quick] [--only big|small] [--tree DIR] [--clear] [--keep]: is a change
# slower? The same rdmacp pushes (tcp transport, loopback) with two builds, alternating
# old and new run by run (the order swapped every repetition), so that a machine whose
# load drifts bills both alike. Prints each run, its seconds and the machine's busy
# CPU-seconds over it (/proc/stat: both ends, kernel included), and the medians, new/old.
#
#   big:   one file of 2048 MiB (--quick: 256 MiB)
#   small: 10,000 files of 4 KiB (--quick: 1,000), as one directory (-r DIR/)
#   tree:  with --tree DIR, a real tree instead of both (rdmacp -r -p DIR/); its
#          copies are all kept until the end (so leave room for 2 x REPS of it)
#   --clear: data lanes in clear (--no-encrypt), as the comparisons in bench/run.sh
#
# Old destinations are moved aside, not deleted (a big delete slows the next runs'
# inode allocation on some file systems), except their files over 100 MB, which go at
# once (few inodes, and a run of big pushes would fill the disk). All goes at the end,
# unless --keep: then the work directory stays (its path is printed), so that a run
# right after this one does not pay for the delete.
# Same source data, cache warming and fresh destination as bench/run.sh (its
# generated data in $BENCH_DIR/data is reused). Each build gets its own rdmacpd
# and module, both running as the user who runs the script.
set -u
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

die() { echo "ab: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: bench/ab.sh OLD_BUILD NEW_BUILD [--reps N] [--quick] [--only big|small] [--tree DIR] [--clear] [--keep]"
OLD=$1 NEW=$2
shift 2
REPS=5 QUICK=0 ONLY= CLEAR=() KEEP=0 TREE=
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	--tree) TREE=$(realpath "$2") && [ -d "$TREE" ] || die "no directory $2"; ONLY=tree; shift ;;
	--clear) CLEAR=(--no-encrypt) ;;
	--keep) KEEP=1 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
for b in "$OLD" "$NEW"; do
	[ -x "$b/rdmacp" ] && [ -x "$b/rdmacpd" ] || die "no rdmacp and rdmacpd in $b"
done
OLD=$(realpath "$OLD") NEW=$(realpath "$NEW")

BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
if [ "$QUICK" = 1 ]; then BIG_MIB=256 NSMALL=1000; else BIG_MIB=2048 NSMALL=10000; fi
BIG=$BENCH_DIR/data/big-${BIG_MIB}M.bin
SMALL=$BENCH_DIR/data/small-${NSMALL}x4096
bench_random "$BIG" "$BIG_MIB"
bench_small "$SMALL" "$NSMALL" 4096

R=$(mktemp -d "$BENCH_DIR/ab.XXXXXX") || die mktemp
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	if [ "$KEEP" = 1 ]; then
		echo "kept: $R"
	else
		rm -rf "$R"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	local i
	for i in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.025
	done
	return 1
}
now() { date +%s.%N; }
CLK_TCK=$(getconf CLK_TCK)
cpu_busy() { awk -v hz="$CLK_TCK" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat; }

"$NEW/rdmacp" certs init "$R/certs" >/dev/null || die "certs init"
declare -A PORT
for side in old new; do
	build=$OLD
	[ "$side" = new ] && build=$NEW
	PORT[$side]=$(free_port)
	mkdir -p "$R/$side"
	cat >"$R/$side.conf" <<EOF
[global]
listen = 127.0.0.1:${PORT[$side]}
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt

[bench]
path = $R/$side
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
	"$build/rdmacpd" --config "$R/$side.conf" >"$R/$side.log" 2>&1 &
	PIDS+=($!)
	wait_port "${PORT[$side]}" || { cat "$R/$side.log" >&2; die "$side rdmacpd did not start"; }
done

# run SIDE CASE: one timed push into a fresh destination; prints seconds and CPU-seconds.
run() {
	local side=$1 kind=$2 build=$OLD dst=$R/$1/dst t0 t1 c0 c1 rc
	[ "$side" = new ] && build=$NEW
	[ -d "$dst" ] && mv "$dst" "$R/$side/gone.$RANDOM$RANDOM"
	find "$R" -path '*/gone.*' -type f -size +100M -delete
	mkdir -p "$dst"
	sync -f "$R"
	if [ "$kind" = tree ]; then
		find "$TREE" -type f -exec cat {} + >/dev/null 2>&1
	else
		cat "$BIG" >/dev/null
		find "$SMALL" -type f -exec cat {} + >/dev/null
	fi
	local client=("$build/rdmacp" --config /dev/null --cert "$R/certs/client.crt"
		--key "$R/certs/client.key" --ca "$R/certs/ca.crt" -P "${PORT[$side]}" --transport tcp -q "${CLEAR[@]}")
	c0=$(cpu_busy)
	t0=$(now)
	if [ "$kind" = big ]; then
		"${client[@]}" "$BIG" "127.0.0.1:bench/dst/"
		rc=$?
	elif [ "$kind" = tree ]; then
		"${client[@]}" -r -p "$TREE/" "127.0.0.1:bench/dst/"
		rc=$?
	else
		"${client[@]}" -r "$SMALL/" "127.0.0.1:bench/dst/"
		rc=$?
	fi
	t1=$(now)
	c1=$(cpu_busy)
	[ "$rc" -eq 0 ] || return 1
	echo "$(echo "$t1 - $t0" | bc -l) $(echo "$c1 - $c0" | bc -l)"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "old: $OLD"
echo "new: $NEW"
echo "reps: $REPS (alternating; order swapped every repetition)"
for kind in big small tree; do
	[ -n "$ONLY" ] && [ "$ONLY" != "$kind" ] && continue
	# Only with --tree DIR: an empty TREE would push the whole root file system.
	[ "$kind" = tree ] && [ -z "$TREE" ] && continue
	: >"$R/$kind.old" && : >"$R/$kind.new" && : >"$R/$kind.old.cpu" && : >"$R/$kind.new.cpu"
	for i in $(seq 1 "$REPS"); do
		order="old new"
		[ $((i % 2)) -eq 0 ] && order="new old"
		for side in $order; do
			out=$(run "$side" "$kind") || die "$side $kind: rdmacp failed"
			read -r s c <<<"$out"
			printf '%s %-5s rep %d: %.3f s, %.2f CPU-s\n' "$kind" "$side" "$i" "$s" "$c"
			echo "$s" >>"$R/$kind.$side"
			echo "$c" >>"$R/$kind.$side.cpu"
		done
	done
	mo=$(median <"$R/$kind.old") mn=$(median <"$R/$kind.new")
	co=$(median <"$R/$kind.old.cpu") cn=$(median <"$R/$kind.new.cpu")
	printf 'median %-5s old %.3f s  new %.3f s  new/old %.3f;  CPU-s old %.2f  new %.2f  new/old %.3f\n' \
		"$kind" "$mo" "$mn" "$(echo "$mn / $mo" | bc -l)" "$co" "$cn" "$(echo "$cn / $co" | bc -l)"
done
