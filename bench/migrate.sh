#!/usr/bin/env bash
# Sharded migration (issue 13), in one run, on one machine over loopback (see
# docs/PERFORMANCE.md), the same tree copied three ways into an emptied destination:
#   (a) rdmacp plan --shards 8, then rdmacp run --shard I/8 two at a time against two
#       daemons (127.0.0.1 and 127.0.0.2, one storage behind both, as docs/MIGRATION.md
#       describes), then rdmacp finalize; the plan's walk and finalize are counted
#   (b) one rdmacp -a of the same tree to one daemon
#   (c) rsync -a --files-from over the same 8 shard lists (made from the plan, not
#       counted), two at a time (GNU parallel -j2 if installed, else xargs -P 2), to two
#       rsync daemons (127.0.0.1 and 127.0.0.2, the same module path), then one rsync of
#       the directory list to give the directories their times (as finalize does)
# Every run ends with sync -f of the destination file system, counted in its time.
# Each destination is compared with the source afterwards (cksum of every file, and
# type, size, mode and mtime of every name): a run that copied less fails the script.
#
# usage: bench/migrate.sh [--quick] [--reps N] [--no-encrypt]
#   --quick       2,000 files in 20 directories (smoke run)
#   (default)     20,000 files of 4-64 KiB (1 in 200 of 1-8 MiB) in 320 directories
#   --reps N      each measurement N times, the median reported (default 3)
#   --no-encrypt  rdmacp's tcp lanes in clear, as rsync's (default: sealed, AES-256-GCM)
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; the source tree is cached
# there), RDMACP_BUILD_DIR (default <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

QUICK=0 REPS=3 ENC=--encrypt
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--reps) REPS=$2; shift ;;
	--no-encrypt) ENC=--no-encrypt ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	NFILES=2000 NTOP=4 NSUB=4
else
	NFILES=20000 NTOP=20 NSUB=15
fi
SHARDS=8 PAR=2

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

{ [ -x "$RDMACP" ] && [ -x "$RDMACPD" ]; } || die "binaries not built in $BUILD_DIR"
for t in rsync jq python3 bc xargs cksum; do
	command -v "$t" >/dev/null || die "missing $t (scripts/deps.sh installs it)"
done
ip -4 addr show lo 2>/dev/null | grep -q "127.0.0.1/8" || die "no 127.0.0.0/8 on lo (127.0.0.2 is needed)"

mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
R=$(mktemp -d "$BENCH_DIR/mig.XXXXXX") || die "mktemp"
PIDS=()
cleanup() {
	local p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$R"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # ADDR PORT PID
	local i
	for i in $(seq 1 200); do
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ---------------------------------------------------------------- source tree
# NTOP x NSUB leaf directories below NTOP top ones; file sizes and places from a fixed
# seed, contents random (cut from a 16 MiB random pool at random offsets).
BASE=$BENCH_DIR/data
TREE_NAME=mig-$NFILES
TREE=$BASE/$TREE_NAME
if ! [ -f "$TREE.done" ] || [ "$(find "$TREE" -type f | wc -l)" -ne "$NFILES" ]; then
	log "generating $TREE ($NFILES files)"
	rm -rf "$TREE" "$TREE.tmp" "$TREE.done"
	python3 - "$TREE.tmp" "$NFILES" "$NTOP" "$NSUB" <<'EOF' || die "cannot generate the tree"
import os, random, sys
root, n, ntop, nsub = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(13)
pool = os.urandom(16 << 20)
dirs = [os.path.join(root, "d%02d" % a, "s%02d" % b) for a in range(ntop) for b in range(nsub)]
for d in dirs:
    os.makedirs(d)
for i in range(n):
    if i % 200 == 199:
        size = rng.randint(1 << 20, 8 << 20)
    else:
        size = rng.randint(4 << 10, 64 << 10)
    off = rng.randrange(0, len(pool) - size)
    with open(os.path.join(rng.choice(dirs), "f%05d" % i), "wb") as f:
        f.write(pool[off:off + size])
EOF
	{ mv "$TREE.tmp" "$TREE" && touch "$TREE.done"; } || die "mv"
fi
NDIRS=$(find "$TREE" -type d | wc -l)
BYTES=$(find "$TREE" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
log "tree: $NFILES files, $NDIRS directories, $BYTES bytes"

# What a destination must hold: every file's checksum; every name's type, mode and
# mtime (and a file's size).
listing() { # DIR
	(cd "$1" && find . \( -type f -printf 'f %p %s %m %T@\n' \) -o \( -type d -printf 'd %p %m %T@\n' \) |
		sort && find . -type f -print0 | sort -z | xargs -0 cksum)
}
listing "$TREE" >"$R/src.list"
verify() { # WHAT
	listing "$R/mod/out/$TREE_NAME" >"$R/dst.list" 2>&1
	cmp -s "$R/src.list" "$R/dst.list" ||
		die "$1: the destination differs from the source: $(diff "$R/src.list" "$R/dst.list" | head -5)"
}

# Warm the source page cache the same way for every run.
warm() { find "$TREE" -type f -exec cat {} + >/dev/null; }

# A fresh, empty destination. The previous one is moved aside, not deleted (ext4 makes
# inode allocation scan past inodes deleted in the last minute, see bench/run.sh).
DST=$R/mod/out
OLD_N=0
fresh_dst() {
	if [ -d "$DST" ]; then
		{ mkdir -p "$R/old" && mv "$DST" "$R/old/$((OLD_N += 1))"; } || die "cannot move $DST"
	fi
	mkdir -p "$DST" || die "cannot reset $DST"
	warm
	sync -f "$R"
}

# ---------------------------------------------------------------- daemons
# Two rdmacpd on 127.0.0.1 and 127.0.0.2 (one port), two rsync daemons likewise; every
# daemon serves the module "bench" at $R/mod.
PORT=$(free_port)
RS_PORT=$(free_port)
mkdir -p "$R/mod"
"$RDMACP" certs init "$R/certs" --host 127.0.0.2 >/dev/null || die "rdmacp certs init"
for n in 1 2; do
	cat >"$R/d$n.conf" <<EOF
[global]
listen = 127.0.0.$n:$PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt
idle timeout = 120

[bench]
path = $R/mod
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
	"$RDMACPD" --config "$R/d$n.conf" >"$R/d$n.log" 2>&1 &
	PIDS+=($!)
	wait_port "127.0.0.$n" "$PORT" $! || { cat "$R/d$n.log" >&2; die "rdmacpd on 127.0.0.$n did not start"; }
	cat >"$R/rsyncd$n.conf" <<EOF
pid file = $R/rsyncd$n.pid
use chroot = no
uid = $(id -u)
gid = $(id -g)
[bench]
path = $R/mod
read only = no
EOF
	rsync --daemon --no-detach --address="127.0.0.$n" --port="$RS_PORT" --config="$R/rsyncd$n.conf" \
		--log-file="$R/rsyncd$n.log" &
	PIDS+=($!)
	wait_port "127.0.0.$n" "$RS_PORT" $! || die "rsync daemon on 127.0.0.$n did not start"
done
RD=("$RDMACP" --config /dev/null --cert "$R/certs/client.crt" --key "$R/certs/client.key"
	--ca "$R/certs/ca.crt" -P "$PORT" --transport tcp "$ENC")

if command -v parallel >/dev/null && parallel --version 2>/dev/null | grep -q "GNU parallel"; then
	PAR_TOOL="parallel -j$PAR"
else
	PAR_TOOL="xargs -P $PAR"
fi
# par2 FUNCTION: FUNCTION I for every shard I, $PAR at a time; fails if one did.
par2() {
	if [ "${PAR_TOOL%% *}" = parallel ]; then
		parallel -j"$PAR" "$1" ::: $(seq 0 $((SHARDS - 1)))
	else
		seq 0 $((SHARDS - 1)) | xargs -P "$PAR" -I{} bash -c "$1"' "$@"' _ {}
	fi
}
# The shards run in child shells (xargs, parallel): the client's command line as a script.
printf '#!/bin/bash\nexec %s"$@"\n' "$(printf '%q ' "${RD[@]}")" >"$R/rd" || die "$R/rd"
chmod +x "$R/rd" || die "$R/rd"
rd_shard() { "$R/rd" -q run "$PLAN" --shard "$1/$SHARDS" 2>"$R/run.$1.err"; }
rs_shard() {
	rsync -a --files-from="$R/list.$1" "$BASE/" "rsync://127.0.0.$(($1 % 2 + 1)):$RS_PORT/bench/out/" \
		2>"$R/rs.$1.err"
}
export -f rd_shard rs_shard
export R BASE RS_PORT SHARDS PLAN=

# ---------------------------------------------------------------- the runs
ta=() tap=() taf=() tb=() tc=()
for i in $(seq 1 "$REPS"); do
	# (a) plan, 8 shards 2 at a time over two daemons, finalize
	log "rep $i: (a) rdmacp plan/run/finalize"
	fresh_dst
	PLAN=$R/plan.$i
	export PLAN
	t0=$(now)
	"${RD[@]}" -q plan -a --shards "$SHARDS" "$TREE" "127.0.0.1,127.0.0.2:bench/out/" -o "$PLAN" ||
		die "rdmacp plan failed"
	t1=$(now)
	par2 rd_shard || die "rdmacp run failed: $(cat "$R"/run.*.err | head -5)"
	t2=$(now)
	"${RD[@]}" -q finalize "$PLAN" >"$R/fin.out" 2>&1 || die "rdmacp finalize failed: $(cat "$R/fin.out")"
	sync -f "$DST"
	t3=$(now)
	verify "(a) rdmacp plan/run/finalize"
	"${RD[@]}" report --json "$PLAN" >"$R/report.json" || die "(a) rdmacp report failed"
	[ "$(jq -r 'select(.event == "report") | "\(.complete) \(.copied)"' "$R/report.json")" = \
		"true $((NFILES + NDIRS))" ] || die "(a) report: not every entry copied: $(head -1 "$R/report.json")"
	ta+=("$(echo "$t3 - $t0" | bc -l)")
	tap+=("$(echo "$t1 - $t0" | bc -l)")
	taf+=("$(echo "$t3 - $t2" | bc -l)")

	# (b) one rdmacp -a
	log "rep $i: (b) rdmacp -a"
	fresh_dst
	t0=$(now)
	"${RD[@]}" -q -a "$TREE" 127.0.0.1:bench/out/ || die "rdmacp -a failed"
	sync -f "$DST"
	t1=$(now)
	verify "(b) rdmacp -a"
	tb+=("$(echo "$t1 - $t0" | bc -l)")

	# (c) rsync over the same shard lists, then the directories' times
	log "rep $i: (c) rsync --files-from per shard, $PAR_TOOL"
	for s in $(seq 0 $((SHARDS - 1))); do
		tail -n +2 "$PLAN" | jq -r --argjson s "$s" 'select(.shard == $s) | .name' >"$R/list.$s"
	done
	tail -n +2 "$PLAN" | jq -r 'select(.type == "dir") | .name' >"$R/list.dirs"
	fresh_dst
	t0=$(now)
	par2 rs_shard || die "rsync failed: $(cat "$R"/rs.*.err | head -5)"
	rsync -a --files-from="$R/list.dirs" "$BASE/" "rsync://127.0.0.1:$RS_PORT/bench/out/" ||
		die "rsync of the directories failed"
	sync -f "$DST"
	t1=$(now)
	verify "(c) rsync"
	tc+=("$(echo "$t1 - $t0" | bc -l)")
done
# Every push of every run had its lanes sealed (--encrypt) or in clear (--no-encrypt).
want="encrypted (AES-256-GCM)"
[ "$ENC" = --no-encrypt ] && want="in clear"
n_all=$(cat "$R/d1.log" "$R/d2.log" | grep -c "tcp lanes, ")
n_want=$(cat "$R/d1.log" "$R/d2.log" | grep -c "tcp lanes, $want")
{ [ "$n_all" -gt 0 ] && [ "$n_all" = "$n_want" ]; } || die "pushes with lanes $want: $n_want of $n_all"
A=$(printf '%s\n' "${ta[@]}" | median)
AP=$(printf '%s\n' "${tap[@]}" | median)
AF=$(printf '%s\n' "${taf[@]}" | median)
B=$(printf '%s\n' "${tb[@]}" | median)
C=$(printf '%s\n' "${tc[@]}" | median)

# ---------------------------------------------------------------- report
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1); $PAR_TOOL"
echo "$(nproc) CPUs, $(uname -r), tcp over loopback (rdmacp $ENC), medians of $REPS"
echo "tree: $NFILES files, $NDIRS directories, $(echo "$BYTES / 1000000" | bc) MB; sync -f counted in every run"
row() { # LABEL SECONDS ALL
	printf '%-52s %8.2f s %7.0f files/s %7.1f MB/s  (%s)\n' "$1" "$2" \
		"$(echo "$NFILES / $2" | bc -l)" "$(echo "$BYTES / $2 / 1000000" | bc -l)" "$3"
}
row "(a) plan + run x$SHARDS ($PAR at a time, 2 daemons) + finalize" "$A" "${ta[*]}"
printf '    %-48s %8.2f s\n' "of which plan" "$AP" "of which finalize (+ sync)" "$AF"
row "(b) rdmacp -a, one process, one daemon" "$B" "${tb[*]}"
row "(c) rsync -a --files-from x$SHARDS ($PAR_TOOL, 2 daemons)" "$C" "${tc[*]}"
