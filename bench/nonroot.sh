#!/usr/bin/env bash
# rdmacp as an ordinary user: the same copy by root's client and by an
# unprivileged user's client (RLIMIT_MEMLOCK 8 MiB, Debian's default, no
# CAP_IPC_LOCK), tcp transport over loopback, runs alternating, median of N.
# The daemon runs as root in both cases. See docs/PERFORMANCE.md.
#
# usage: bench/nonroot.sh [--quick] [--reps N] [--user NAME] [--memlock KIB] [--pull]
#   --quick     256 MiB file instead of 2 GiB
#   --reps N    runs per client (default 5), alternating root / user
#   --user      the unprivileged user (default nobody)
#   --memlock   its RLIMIT_MEMLOCK in KiB (default 8192)
#   --pull      also measure pulls (the client receives)
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; the source file is
# cached in $BENCH_DIR/data, as bench/run.sh does), RDMACP_BUILD_DIR.
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

MIB=2048 REPS=5 USER_NAME=nobody MEMLOCK_KIB=8192 PULL=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) MIB=256 ;;
	--reps) REPS=$2; shift ;;
	--user) USER_NAME=$2; shift ;;
	--memlock) MEMLOCK_KIB=$2; shift ;;
	--pull) PULL=1 ;;
	-h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

[ "$(id -u)" -eq 0 ] || die "run as root (the daemon, and setpriv to become $USER_NAME)"
[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
for t in setpriv prlimit openssl python3 bc; do
	command -v "$t" >/dev/null || die "missing $t"
done
UGROUP=$(id -gn "$USER_NAME") || die "no user $USER_NAME"

mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
BIG=$BENCH_DIR/data/big-${MIB}M.bin
if ! [ -f "$BIG" ] || [ "$(stat -c %s "$BIG")" -ne $((MIB << 20)) ]; then
	log "generating $BIG ($MIB MiB of random data)"
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-bench-$RANDOM$RANDOM" </dev/zero 2>/dev/null |
		head -c $((MIB << 20)) >"$BIG.tmp" && mv "$BIG.tmp" "$BIG" || die "cannot generate $BIG"
fi
chmod 0644 "$BIG"

R=$(mktemp -d "$BENCH_DIR/nonroot.XXXXXX") || die mktemp
chmod 0711 "$R"
RD_PID=
cleanup() {
	[ -n "$RD_PID" ] && kill -TERM "$RD_PID" 2>/dev/null && wait "$RD_PID" 2>/dev/null
	rm -rf "$R"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$RDMACP" certs init "$R/certs" >/dev/null || die "certs init"
chmod 0755 "$R/certs" && chmod 0644 "$R/certs"/* # throw-away certificates, readable by the user
mkdir -p "$R/mod" "$R/pull"
chown "$USER_NAME:$UGROUP" "$R/pull"
cat >"$R/d.conf" <<EOF2
[global]
listen = 127.0.0.1:$PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt

[bench]
path = $R/mod
allow = client
uid = root
gid = root
EOF2
"$RDMACPD" --config "$R/d.conf" >"$R/d.log" 2>&1 &
RD_PID=$!
for _ in $(seq 1 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
	sleep 0.025
done
kill -0 "$RD_PID" 2>/dev/null || { cat "$R/d.log" >&2; die "rdmacpd did not start"; }

CLIENT=("$RDMACP" --config /dev/null --cert "$R/certs/client.crt" --key "$R/certs/client.key"
	--ca "$R/certs/ca.crt" -P "$PORT" --transport tcp)
AS_USER=(prlimit --memlock=$((MEMLOCK_KIB * 1024)):$((MEMLOCK_KIB * 1024))
	setpriv --reuid="$USER_NAME" --regid="$UGROUP" --clear-groups --inh-caps=-all --)

# one WHO DIR: one timed copy; prints seconds
one() {
	local who=$1 dir=$2 pre=() t0 t1 rc
	[ "$who" = user ] && pre=("${AS_USER[@]}")
	rm -f "$R/mod/big.bin" "$R/pull/big.bin"
	[ "$dir" = pull ] && cp "$BIG" "$R/mod/src.bin"
	sync -f "$R"
	cat "$BIG" >/dev/null # source in the page cache, as bench/run.sh
	t0=$(date +%s.%N)
	if [ "$dir" = push ]; then
		"${pre[@]}" "${CLIENT[@]}" -q -v "$BIG" 127.0.0.1:bench/big.bin 2>"$R/c.err"
	else
		"${pre[@]}" "${CLIENT[@]}" -q -v 127.0.0.1:bench/src.bin "$R/pull/big.bin" 2>"$R/c.err"
	fi
	rc=$?
	t1=$(date +%s.%N)
	[ "$rc" -eq 0 ] || { cat "$R/c.err" >&2; die "$who $dir failed (exit $rc)"; }
	grep -h "buffer pool fitted" "$R/c.err" | sort -u >>"$R/fitted.$dir"
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "rdmacp root vs unprivileged client $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, kernel $(uname -r)"
echo "file $MIB MiB (page cache warm), tcp over loopback, daemon as root; user $USER_NAME with RLIMIT_MEMLOCK $MEMLOCK_KIB KiB, no CAP_IPC_LOCK"
echo "runs alternate root / user, $REPS each, median"
DIRS=(push)
[ "$PULL" = 1 ] && DIRS+=(pull)
for dir in "${DIRS[@]}"; do
	root=() user=()
	for i in $(seq 1 "$REPS"); do
		s=$(one root "$dir") || exit 1
		root+=("$s")
		s=$(one user "$dir") || exit 1
		user+=("$s")
		log "$dir rep $i: root $(printf %.3f "${root[-1]}") s, $USER_NAME $(printf %.3f "${user[-1]}") s"
	done
	mr=$(printf '%s\n' "${root[@]}" | median)
	mu=$(printf '%s\n' "${user[@]}" | median)
	ratio=$(echo "$mr / $mu" | bc -l)
	printf '%s: root %.2f s (%.1f MB/s) [%s]; %s %.2f s (%.1f MB/s) [%s]; user/root throughput %.2fx %s\n' \
		"$dir" "$mr" "$(echo "($MIB * 1048576) / $mr / 1000000" | bc -l)" \
		"$(printf '%.2f ' "${root[@]}" | sed 's/ $//')" "$USER_NAME" "$mu" \
		"$(echo "($MIB * 1048576) / $mu / 1000000" | bc -l)" \
		"$(printf '%.2f ' "${user[@]}" | sed 's/ $//')" "$ratio" \
		"$([ "$(echo "$ratio >= 0.9" | bc -l)" = 1 ] && echo "(>= 0.9: MET)" || echo "(< 0.9: NOT MET)")"
	[ -s "$R/fitted.$dir" ] && echo "  $USER_NAME's client: $(head -1 "$R/fitted.$dir")"
done
