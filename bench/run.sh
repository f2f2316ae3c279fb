#!/usr/bin/env bash
# rdmacp benchmark: rdmacp (tcp transport) vs rsync daemon, scp, nc and cp, all on
# one machine over loopback (127.0.0.1), destination on the same file system as
# the source. Each tool's time and machine-wide CPU-seconds per GiB moved (/proc/stat:
# both ends, kernel included). See docs/PERFORMANCE.md.
#
# usage: bench/run.sh [--quick] [--full] [--explore] [--reps N] [--vm]
#   --quick    256 MiB file and 1,000 small files (smoke run, about a minute)
#   (default)  2 GiB file and 10,000 files of 4 KiB
#   --full     also the RSS-flatness run on an 8 GiB file (needs >= 20 GiB free)
#   --explore  also rdmacp --lanes 1/2/4 x --chunk-size 256K/1M/4M on the big file
#   --reps N   run every measurement N times and report the median (default 1)
#   --vm       also rdmacp bench over verbs vs ib_write_bw in the Soft-RoCE VM (emulated)
#
# Environment: BENCH_DIR (work dir, default /var/tmp/rdmacp-bench; the generated
# source data is cached there between runs, everything else is removed on exit),
# RDMACP_BUILD_DIR (default <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

QUICK=0 FULL=0 EXPLORE=0 REPS=1 VM=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--full) FULL=1 ;;
	--explore) EXPLORE=1 ;;
	--reps) REPS=$2; shift ;;
	--vm) VM=1 ;;
	-h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done

if [ "$QUICK" = 1 ]; then
	BIG_MIB=256 NSMALL=1000 FLAT_MIB=1024
else
	BIG_MIB=2048 NSMALL=10000 FLAT_MIB=8192
fi
SMALL_SIZE=4096

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
for t in rsync scp ssh-keygen nc tar python3 /usr/sbin/sshd /usr/bin/time openssl; do
	command -v "$t" >/dev/null || die "missing $t (apt-get install -y rsync openssh-server openssh-client netcat-openbsd time openssl python3)"
done

mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
R=$(mktemp -d "$BENCH_DIR/run.XXXXXX") || die "mktemp"
PIDS=()
RD_PID=

cleanup() {
	local p
	trap - EXIT INT TERM
	[ -n "$RD_PID" ] && stop_rdmacpd
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$R"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM

# A random free port on 127.0.0.1 (kernel-chosen ephemeral port, bind-and-release).
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # PORT PID
	local i
	for i in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}

now() { date +%s.%N; }
# Machine-wide busy CPU seconds since boot from /proc/stat (user, nice, system, irq,
# softirq, steal: every process and the kernel, both ends of a loopback copy).
CLK_TCK=$(getconf CLK_TCK)
cpu_busy() { awk -v hz="$CLK_TCK" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat; }

# ---------------------------------------------------------------- source data
BIG=$BENCH_DIR/data/big-${BIG_MIB}M.bin
SMALL=$BENCH_DIR/data/small-${NSMALL}x${SMALL_SIZE}

bench_random "$BIG" "$BIG_MIB"
bench_small "$SMALL" "$NSMALL" "$SMALL_SIZE"

# Warm the source page cache the same way for every tool: read it all once
# (before each measurement, so one tool's runs cannot evict the next one's source).
warm() {
	cat "$BIG" >/dev/null
	find "$SMALL" -type f -exec cat {} + >/dev/null
}

DST=$R/dst # every tool writes below here; same file system as the source
OLD_N=0
# A fresh, empty destination. A previous small-files destination is moved aside, not
# deleted: ext4 makes inode allocation scan past inodes deleted in the last minute
# ("recently_deleted"), so deleting 10,000 files right before a run would bill the next
# tool for the previous one's clean-up. Everything is deleted when the script exits.
fresh_dst() {
	if [ -d "$DST" ] && [ "$(find "$DST" -maxdepth 2 | head -n 20 | wc -l)" -ge 20 ]; then
		mkdir -p "$R/old" && mv "$DST" "$R/old/$((OLD_N += 1))" || die "cannot move $DST"
	else
		rm -rf "$DST"
	fi
	mkdir -p "$DST" || die "cannot reset $DST"
	sync -f "$R" # nothing of the previous run left dirty to be paid by this one
}

# ---------------------------------------------------------------- rdmacp
RD_PORT=$(free_port)
mkdir -p "$R/rdmacp"
"$RDMACP" certs init "$R/rdmacp/certs" >/dev/null || die "rdmacp certs init"
cat >"$R/rdmacp/d.conf" <<EOF
[global]
listen = 127.0.0.1:$RD_PORT
cert = $R/rdmacp/certs/server.crt
key = $R/rdmacp/certs/server.key
ca = $R/rdmacp/certs/ca.crt
handshake timeout = 10
idle timeout = 60

[bench]
path = $R
allow = client
# As the rsync daemon below: sessions run as the user running the benchmark.
uid = $(id -u)
gid = $(id -g)
EOF
RD_CLIENT=("$RDMACP" --config /dev/null --cert "$R/rdmacp/certs/client.crt"
	--key "$R/rdmacp/certs/client.key" --ca "$R/rdmacp/certs/ca.crt" -P "$RD_PORT" --transport tcp)

# The daemon runs under GNU time for each rdmacp measurement, so that its max RSS
# (wait4's ru_maxrss, which also covers the session children it reaped) can be
# read after it stops. The daemon's log gives the session's own peak too (the
# "session N ... ended: ..., peak RSS K KiB" line, also from wait4), as a
# cross-check; nothing samples /proc while a copy is timed.
RD_PID=
start_rdmacpd() {
	/usr/bin/time -v -o "$R/rdmacp/d.time" "$RDMACPD" --config "$R/rdmacp/d.conf" >"$R/rdmacp/d.log" 2>&1 &
	RD_PID=$!
	PIDS+=("$RD_PID")
	wait_port "$RD_PORT" "$RD_PID" || { cat "$R/rdmacp/d.log" >&2; die "rdmacpd did not start"; }
}
stop_rdmacpd() {
	kill -TERM "$(pgrep -P "$RD_PID" -x rdmacpd | head -1)" 2>/dev/null # the daemon under time
	wait "$RD_PID" 2>/dev/null
	RD_PID=
}
maxrss_of() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }

# run_rdmacp CASE [rdmacp options...]: one timed copy; sets T_SEC, C_RSS, D_RSS, D_HWM (kB)
run_rdmacp() {
	local kind=$1 t0 t1 rc
	shift
	fresh_dst
	warm
	start_rdmacpd
	t0=$(now)
	C0=$(cpu_busy)
	if [ "$kind" = big ]; then
		/usr/bin/time -v -o "$R/rdmacp/c.time" "${RD_CLIENT[@]}" -q "$@" "$BIG" "127.0.0.1:bench/dst/" 2>"$R/rdmacp/c.err"
		rc=$?
	else
		/usr/bin/time -v -o "$R/rdmacp/c.time" "${RD_CLIENT[@]}" -q "$@" -r "$SMALL/" "127.0.0.1:bench/dst/" 2>"$R/rdmacp/c.err"
		rc=$?
	fi
	t1=$(now)
	CPU_SEC=$(echo "$(cpu_busy) - $C0" | bc -l)
	stop_rdmacpd
	[ "$rc" -eq 0 ] || { cat "$R/rdmacp/c.err" "$R/rdmacp/d.log" >&2; die "rdmacp failed (exit $rc)"; }
	T_SEC=$(echo "$t1 - $t0" | bc -l)
	C_RSS=$(maxrss_of "$R/rdmacp/c.time")
	D_RSS=$(maxrss_of "$R/rdmacp/d.time")
	D_HWM=$(sed -n 's/.* ended: .*peak RSS \([0-9]*\) KiB.*/\1/p' "$R/rdmacp/d.log" | sort -n | tail -1)
	D_HWM=${D_HWM:-0}
}

# ---------------------------------------------------------------- rsync daemon
RS_PORT=$(free_port)
RSYNC_FSYNC=
rsync --help 2>&1 | grep -q -- '--fsync' && RSYNC_FSYNC=--fsync
mkdir -p "$R/rsync"
cat >"$R/rsync/rsyncd.conf" <<EOF
pid file = $R/rsync/rsyncd.pid
use chroot = no
uid = $(id -u)
gid = $(id -g)
max connections = 4
[bench]
path = $R
read only = no
EOF
rsync --daemon --no-detach --address=127.0.0.1 --port="$RS_PORT" --config="$R/rsync/rsyncd.conf" \
	--log-file="$R/rsync/rsyncd.log" &
PIDS+=($!)
wait_port "$RS_PORT" $! || die "rsync daemon did not start"

run_rsync() {
	local kind=$1 t0 t1
	fresh_dst
	warm
	t0=$(now)
	C0=$(cpu_busy)
	if [ "$kind" = big ]; then
		rsync -W -a $RSYNC_FSYNC "$BIG" "rsync://127.0.0.1:$RS_PORT/bench/dst/" || die "rsync failed"
	else
		rsync -W -a $RSYNC_FSYNC "$SMALL/" "rsync://127.0.0.1:$RS_PORT/bench/dst/" || die "rsync failed"
	fi
	[ -z "$RSYNC_FSYNC" ] && sync -f "$DST"
	t1=$(now)
	CPU_SEC=$(echo "$(cpu_busy) - $C0" | bc -l)
	T_SEC=$(echo "$t1 - $t0" | bc -l)
}

# ---------------------------------------------------------------- scp / sshd
SSH_PORT=$(free_port)
mkdir -p "$R/ssh" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$R/ssh/host_key" || die ssh-keygen
ssh-keygen -q -t ed25519 -N '' -f "$R/ssh/user_key" || die ssh-keygen
cp "$R/ssh/user_key.pub" "$R/ssh/authorized_keys"
chmod 600 "$R/ssh/authorized_keys"
cat >"$R/ssh/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey $R/ssh/host_key
PidFile $R/ssh/sshd.pid
AuthorizedKeysFile $R/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
EOF
/usr/sbin/sshd -D -e -f "$R/ssh/sshd_config" 2>"$R/ssh/sshd.log" &
PIDS+=($!)
wait_port "$SSH_PORT" $! || { cat "$R/ssh/sshd.log" >&2; die "sshd did not start"; }
SCP=(scp -q -P "$SSH_PORT" -i "$R/ssh/user_key" -o StrictHostKeyChecking=no
	-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes)

run_scp() {
	local kind=$1 t0 t1
	fresh_dst
	warm
	t0=$(now)
	C0=$(cpu_busy)
	if [ "$kind" = big ]; then
		"${SCP[@]}" "$BIG" "$(id -un)@127.0.0.1:$DST/" || die "scp failed"
	else
		"${SCP[@]}" -r "$SMALL" "$(id -un)@127.0.0.1:$DST/" || die "scp failed"
	fi
	sync -f "$DST" # scp cannot fsync: the receiver's sync is timed
	t1=$(now)
	CPU_SEC=$(echo "$(cpu_busy) - $C0" | bc -l)
	T_SEC=$(echo "$t1 - $t0" | bc -l)
}

# ---------------------------------------------------------------- nc
run_nc() {
	local kind=$1 t0 t1 port rp
	fresh_dst
	warm
	port=$(free_port)
	if [ "$kind" = big ]; then
		nc -l -s 127.0.0.1 -p "$port" >"$DST/big.bin" &
	else
		(nc -l -s 127.0.0.1 -p "$port" | tar -x -C "$DST") &
	fi
	rp=$!
	# wait until the listener is up without connecting to it (it accepts only once)
	for _ in $(seq 1 200); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		sleep 0.01
	done
	t0=$(now)
	C0=$(cpu_busy)
	if [ "$kind" = big ]; then
		nc -N 127.0.0.1 "$port" <"$BIG" || die "nc failed"
	else
		tar -c -C "$SMALL" . | nc -N 127.0.0.1 "$port" || die "nc|tar failed"
	fi
	wait "$rp" || die "nc receiver failed"
	sync -f "$DST" # nc cannot fsync: the receiver's sync is timed
	t1=$(now)
	CPU_SEC=$(echo "$(cpu_busy) - $C0" | bc -l)
	T_SEC=$(echo "$t1 - $t0" | bc -l)
}

# ---------------------------------------------------------------- cp (local, no network)
run_cp() {
	local kind=$1 t0 t1
	fresh_dst
	warm
	t0=$(now)
	C0=$(cpu_busy)
	if [ "$kind" = big ]; then
		cp "$BIG" "$DST/" || die "cp failed"
	else
		cp -r "$SMALL" "$DST/" || die "cp failed"
	fi
	sync -f "$DST"
	t1=$(now)
	CPU_SEC=$(echo "$(cpu_busy) - $C0" | bc -l)
	T_SEC=$(echo "$t1 - $t0" | bc -l)
}

# ---------------------------------------------------------------- measuring
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# measure TOOL CASE -> prints the median seconds; for rdmacp also sets RSS vars (max over reps)
declare -A SEC
RD_C_RSS=0 RD_D_RSS=0 RD_D_HWM=0
declare -A CPU
measure() {
	local tool=$1 kind=$2 i ts=() cs=()
	shift 2
	for i in $(seq 1 "$REPS"); do
		case $tool in
		rdmacp)
			run_rdmacp "$kind" "$@"
			[ "$C_RSS" -gt "$RD_C_RSS" ] && RD_C_RSS=$C_RSS
			[ "$D_RSS" -gt "$RD_D_RSS" ] && RD_D_RSS=$D_RSS
			[ "$D_HWM" -gt "$RD_D_HWM" ] && RD_D_HWM=$D_HWM
			;;
		rdmacp-clear) run_rdmacp "$kind" --no-encrypt "$@" ;;
		*) "run_$tool" "$kind" ;;
		esac
		ts+=("$T_SEC")
		cs+=("$CPU_SEC")
		log "$tool $kind $* rep $i: $(printf %.3f "$T_SEC") s, $(printf %.2f "$CPU_SEC") CPU-s"
	done
	SEC[$tool,$kind]=$(printf '%s\n' "${ts[@]}" | median)
	CPU[$tool,$kind]=$(printf '%s\n' "${cs[@]}" | median)
}

BIG_BYTES=$((BIG_MIB << 20))
SMALL_BYTES=$((NSMALL * SMALL_SIZE))

echo "rdmacp benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM, kernel $(uname -r)"
echo "work dir $BENCH_DIR ($(df -T "$BENCH_DIR" | awk 'NR==2 {print $2" on "$1}')); reps $REPS (median)"
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1); $(ssh -V 2>&1)"
echo "cases: (a) one file of $BIG_MIB MiB, (b) $NSMALL files of $SMALL_SIZE B in one directory"
echo "source page cache warmed (read once) before every measurement; fresh empty destination each run"
echo "receiver durability: rdmacp fsyncs each file; rsync ${RSYNC_FSYNC:-(no --fsync: sync -f timed)}; scp and nc: 'sync -f DST' inside the timing"
echo "transport: rdmacp tcp over loopback, 2 lanes, its default (lanes sealed, AES-256-GCM) and --no-encrypt -- these are NOT RDMA numbers"
C0=$(cpu_busy)
sleep 2
echo "background: $(echo "($(cpu_busy) - $C0) / 2" | bc -l | xargs printf %.2f) of $(nproc) CPUs busy before the runs (machine-wide CPU figures count it)"
echo

for kind in big small; do
	measure rdmacp "$kind"
	measure rdmacp-clear "$kind"
	measure rsync "$kind"
	measure scp "$kind"
	measure nc "$kind"
	measure cp "$kind"
done

row() { # TOOL CASE LABEL
	local s=${SEC[$1,$2]} bytes files mbs fps ratio
	if [ "$2" = big ]; then bytes=$BIG_BYTES files=1; else bytes=$SMALL_BYTES files=$NSMALL; fi
	mbs=$(echo "$bytes / $s / 1000000" | bc -l)
	fps=$(echo "$files / $s" | bc -l)
	ratio=$(echo "$s / ${SEC[rdmacp,$2]}" | bc -l)
	if [ "$2" = big ]; then
		printf '| %-22s | %-18s | %8.2f | %8.1f | %9s | %11.2fx |\n' "$3" "$BIG_MIB MiB x 1" "$s" "$mbs" "-" "$ratio"
	else
		printf '| %-22s | %-18s | %8.2f | %8.1f | %9.0f | %11.2fx |\n' "$3" "$NSMALL x 4 KiB" "$s" "$mbs" "$fps" "$ratio"
	fi
}
echo "| tool                   | case               |  seconds |     MB/s |   files/s | rdmacp/tool |"
echo "|------------------------|--------------------|---------:|---------:|----------:|------------:|"
for kind in big small; do
	row rdmacp "$kind" "rdmacp (sealed)"
	row rdmacp-clear "$kind" "rdmacp --no-encrypt"
	row rsync "$kind" "rsync daemon ${RSYNC_FSYNC:+--fsync}"
	row scp "$kind" "scp + sync"
	if [ "$kind" = big ]; then row nc big "nc + sync"; else row nc small "tar|nc|tar + sync"; fi
	row cp "$kind" "cp + sync (local)"
done
echo
echo "(rdmacp/tool = tool seconds / rdmacp seconds: > 1 means rdmacp is faster; MB = 10^6 bytes)"
echo

# ---------------------------------------------------------------- targets
ge() { [ "$(echo "$1 >= $2" | bc -l)" = 1 ] && echo MET || echo "NOT MET"; }
r_nc=$(echo "${SEC[nc,big]} / ${SEC[rdmacp,big]}" | bc -l)
r_rs=$(echo "${SEC[rsync,big]} / ${SEC[rdmacp,big]}" | bc -l)
r_sm=$(echo "${SEC[rsync,small]} / ${SEC[rdmacp,small]}" | bc -l)
printf 'target %-48s %6.2fx  %s\n' "big file: rdmacp >= 1.0x nc" "$r_nc" "$(ge "$r_nc" 1.0)"
printf 'target %-48s %6.2fx  %s\n' "big file: rdmacp >= 1.5x rsync daemon" "$r_rs" "$(ge "$r_rs" 1.5)"
r_tar=$(echo "${SEC[nc,small]} / ${SEC[rdmacp,small]}" | bc -l)
printf 'target %-48s %6.2fx  %s\n' "small files: rdmacp >= 2x rsync daemon files/s" "$r_sm" "$(ge "$r_sm" 2.0)"
printf 'target %-48s %6.2fx  %s\n' "small files: rdmacp >= 1.0x tar|nc|tar + sync" "$r_tar" "$(ge "$r_tar" 1.0)"
echo "(rsync without --fsync, then one sync: bench/smallfiles.sh, which also checks 100,000 x 1 KiB RSS)"
echo

# ---------------------------------------------------------------- CPU per byte
# Machine-wide busy CPU between the start and the end of each timed run (median), per
# GiB (2^30 bytes) of payload moved: both ends and the kernel. Anything else running
# on the machine counts too: run on an idle machine.
echo "CPU-seconds per GiB moved (machine-wide, /proc/stat; both ends, kernel included):"
echo "| tool                   | $BIG_MIB MiB x 1 | $NSMALL x 4 KiB |"
echo "|------------------------|---------:|---------:|"
cpu_row() { # TOOL LABEL
	printf '| %-22s | %8.2f | %8.2f |\n' "$2" \
		"$(echo "${CPU[$1,big]} / ($BIG_BYTES / 1073741824)" | bc -l)" \
		"$(echo "${CPU[$1,small]} / ($SMALL_BYTES / 1073741824)" | bc -l)"
}
cpu_row rdmacp "rdmacp (sealed)"
cpu_row rdmacp-clear "rdmacp --no-encrypt"
cpu_row rsync "rsync daemon ${RSYNC_FSYNC:+--fsync}"
cpu_row scp "scp + sync"
cpu_row nc "nc (tar|nc|tar) + sync"
cpu_row cp "cp + sync (local)"
# The target is for a verified copy; sealing (the default on tcp) is priced on top:
# the clear run is the one the other tools, none of which encrypts, compare with.
rd_cpu=$(echo "${CPU[rdmacp-clear,big]} / ($BIG_BYTES / 1073741824)" | bc -l)
printf 'target %-48s %6.2f   %s\n' "big file: rdmacp --no-encrypt <= 1.0 CPU-s/GiB" "$rd_cpu" \
	"$([ "$(echo "$rd_cpu <= 1.0" | bc -l)" = 1 ] && echo MET || echo 'NOT MET')"
echo
echo "memory to memory, no disk (bench/membench.sh: rdmacp bench vs iperf3 -P 2, $BIG_MIB MiB each):"
if command -v iperf3 >/dev/null; then
	"$HERE/membench.sh" --size "${BIG_MIB}M" --lanes 2 | sed -n '/^background/p; /^| /,$p'
else
	echo "  skipped: iperf3 not installed (apt-get install -y iperf3)"
fi
if [ "$VM" = 1 ]; then
	echo "verbs in the Soft-RoCE VM (EMULATED, a proxy only): rdmacp bench vs ib_write_bw, 32 MiB, 2 QPs, 1 MiB"
	mkdir -p "$R/vm"
	RXEVM_OUT=$R/vm "$SRC_DIR/tests/rxe-vm/run" bash "$HERE/verbs_vm.sh" "$BUILD_DIR" "$R/vm" 32 2 1024 |
		grep -E '^(rdmacp bench:|ratio|ib_write_bw:)' || echo "  the VM run failed"
fi
echo

# ---------------------------------------------------------------- memory
POOL_KB=$((64 * 1024)) # client default: pool of 64 chunks of 1 MiB
echo "peak RSS (default settings, chunk 1 MiB; client pool 64 MiB, daemon ring 32 slots = 32 MiB):"
printf '  rdmacp client (time -v max RSS)      %7d KiB  (limit pool + 32 MiB = %d KiB: %s)\n' \
	"$RD_C_RSS" $((POOL_KB + 32768)) "$([ "$RD_C_RSS" -le $((POOL_KB + 32768)) ] && echo MET || echo 'NOT MET')"
printf '  rdmacpd session (time -v on daemon)  %7d KiB  (the session alone, from its log: %d KiB)\n' \
	"$RD_D_RSS" "$RD_D_HWM"
echo

if [ "$QUICK" = 1 ] || [ "$FULL" = 1 ]; then
	FLAT=$BENCH_DIR/data/big-${FLAT_MIB}M.bin
	need=$(((FLAT_MIB * 2 + 4096) >> 10)) # the source, one copy, slack (GiB)
	[ "$FLAT_MIB" -ge 8192 ] && need=20
	free_g=$(df -P -BG "$BENCH_DIR" | awk 'NR==2 {sub("G","",$4); print $4}')
	if [ ! -f "$FLAT" ] && [ "$free_g" -lt "$need" ]; then
		echo "RSS flatness: skipped, $free_g GiB free in $BENCH_DIR (< $need GiB)"
	else
		bench_random "$FLAT" "$FLAT_MIB"
		BIG_SAVE=$BIG
		c1=$RD_C_RSS d1=$RD_D_RSS
		BIG=$FLAT
		run_rdmacp big
		BIG=$BIG_SAVE
		log "rdmacp $FLAT_MIB MiB: $(printf %.2f "$T_SEC") s"
		printf 'RSS flatness: %d MiB file: client %d KiB, daemon %d KiB; %d MiB file (%.2f s, %.1f MB/s): client %d KiB, daemon %d KiB\n' \
			"$BIG_MIB" "$c1" "$d1" "$FLAT_MIB" "$T_SEC" "$(echo "($FLAT_MIB * 1048576) / $T_SEC / 1000000" | bc -l)" "$C_RSS" "$D_RSS"
		dc=$(echo "100 * ($C_RSS - $c1) / $c1" | bc -l)
		dd=$(echo "100 * ($D_RSS - $d1) / $d1" | bc -l)
		printf 'target RSS flat within 10%%: client %+.1f%%, daemon %+.1f%%  %s\n' "$dc" "$dd" \
			"$([ "$(echo "$dc <= 10 && $dc >= -10 && $dd <= 10 && $dd >= -10" | bc -l)" = 1 ] && echo MET || echo 'NOT MET')"
	fi
else
	echo "RSS flatness: the $FLAT_MIB MiB run needs --full (skipped)"
fi
echo

# ---------------------------------------------------------------- exploration
if [ "$EXPLORE" = 1 ]; then
	echo "exploration (rdmacp only, $BIG_MIB MiB file; median of $REPS):"
	echo "| lanes | chunk | seconds |     MB/s | client RSS KiB | daemon RSS KiB |"
	echo "|------:|------:|--------:|---------:|---------------:|---------------:|"
	for lanes in 1 2 4; do
		for chunk in 256K 1M 4M; do
			RD_C_RSS=0 RD_D_RSS=0 RD_D_HWM=0
			measure rdmacp big --lanes "$lanes" --chunk-size "$chunk"
			s=${SEC[rdmacp,big]}
			printf '| %5s | %5s | %7.2f | %8.1f | %14d | %14d |\n' "$lanes" "$chunk" "$s" \
				"$(echo "$BIG_BYTES / $s / 1000000" | bc -l)" "$RD_C_RSS" "$RD_D_RSS"
		done
	done
	echo
fi
