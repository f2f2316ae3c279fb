#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/encrypt.sh BUILD [--reps N] [--quick] [--cipher SUITE] [--big-only]: what sealed
# tcp lanes cost. The same
# rdmacp pushes (tcp transport, loopback, one rdmacpd) with --encrypt and with
# --no-encrypt, alternating run by run (the order swapped every repetition), and scp
# with aes128-gcm@openssh.com to a private sshd on loopback on the big file.
# Prints each run, the medians, encrypted/clear, and the CPU seconds both ends spent
# (client: wait4 rusage; daemon: its reaped sessions' utime+stime) per GiB moved.
#
#   big:   one file of 2048 MiB (--quick: 256 MiB)
#   small: 10,000 files of 4 KiB (--quick: 1,000; not with --big-only, nor scp)
#
# --cipher SUITE pins the daemon's "cipher" (aes-256-gcm, aes-128-gcm,
# chacha20-poly1305; a build from before seal suites refuses it); without it the
# daemon picks (auto: the fastest on one core here, logged, and printed below).
# Before/after on one machine: run it for each build in turn, --reps 1 at a time.
#
# Source data in $BENCH_DIR/data (default /var/tmp/rdmacp-bench, shared with
# bench/run.sh and bench/ab.sh); each run writes into a fresh destination and is
# fsynced by the receiver (scp's receiver is followed by a timed sync -f).
set -u
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

die() { echo "encrypt: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: bench/encrypt.sh BUILD [--reps N] [--quick]"
B=$(realpath "$1")
shift
REPS=3 QUICK=0 CIPHER= BIG_ONLY=0
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--quick) QUICK=1 ;;
	--cipher) CIPHER=$2; shift ;;
	--big-only) BIG_ONLY=1 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
[ -x "$B/rdmacp" ] && [ -x "$B/rdmacpd" ] || die "no rdmacp and rdmacpd in $B"
for t in bc openssl python3; do command -v "$t" >/dev/null || die "needs $t"; done

BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}
if [ "$QUICK" = 1 ]; then BIG_MIB=256 NSMALL=1000; else BIG_MIB=2048 NSMALL=10000; fi
BIG=$BENCH_DIR/data/big-${BIG_MIB}M.bin
SMALL=$BENCH_DIR/data/small-${NSMALL}x4096
bench_random "$BIG" "$BIG_MIB"
bench_small "$SMALL" "$NSMALL" 4096

R=$(mktemp -d "$BENCH_DIR/enc.XXXXXX") || die mktemp
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$R"
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
# The daemon's reaped children's CPU seconds (utime + stime of its sessions).
daemon_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ print ($16 + $17) / hz }' "/proc/$DPID/stat"
}

"$B/rdmacp" certs init "$R/certs" >/dev/null || die "certs init"
PORT=$(free_port)
mkdir -p "$R/mod"
cat >"$R/d.conf" <<EOF
[global]
listen = 127.0.0.1:$PORT
cert = $R/certs/server.crt
key = $R/certs/server.key
ca = $R/certs/ca.crt
${CIPHER:+cipher = $CIPHER}

[bench]
path = $R/mod
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
"$B/rdmacpd" --config "$R/d.conf" >"$R/d.log" 2>&1 &
DPID=$!
PIDS+=("$DPID")
wait_port "$PORT" || { cat "$R/d.log" >&2; die "rdmacpd did not start"; }

fresh_dst() {
	[ -d "$R/mod/dst" ] && rm -rf "$R/mod/dst"
	mkdir -p "$R/mod/dst"
	sync -f "$R"
	cat "$BIG" >/dev/null
	find "$SMALL" -type f -exec cat {} + >/dev/null
}

# run MODE KIND: one timed push (MODE --encrypt or --no-encrypt); prints
# "seconds client_cpu daemon_cpu".
run() {
	local mode=$1 kind=$2 t0 t1 d0 d1 rc
	local client=("$B/rdmacp" --config /dev/null --cert "$R/certs/client.crt"
		--key "$R/certs/client.key" --ca "$R/certs/ca.crt" -P "$PORT" --transport tcp -q "$mode")
	fresh_dst
	d0=$(daemon_cpu)
	t0=$(now)
	if [ "$kind" = big ]; then
		/usr/bin/time -f '%U %S' -o "$R/time" "${client[@]}" "$BIG" "127.0.0.1:bench/dst/"
		rc=$?
	else
		(cd "$SMALL" && /usr/bin/time -f '%U %S' -o "$R/time" "${client[@]}" f* \
			"127.0.0.1:bench/dst/")
		rc=$?
	fi
	t1=$(now)
	sleep 0.2 # the session exits and is reaped after its last reply
	d1=$(daemon_cpu)
	[ "$rc" -eq 0 ] || return 1
	echo "$(echo "$t1 - $t0" | bc -l) $(awk '{ print $1 + $2 }' "$R/time") $(echo "$d1 - $d0" | bc -l)"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "build: $B"
echo "reps: $REPS (alternating; order swapped every repetition); nproc $(nproc)"
echo "each suite on one core (openssl speed, 256 KiB blocks, the lane's piece size):"
for suite in aes-256-gcm aes-128-gcm chacha20-poly1305; do
	openssl speed -evp "$suite" -bytes 262144 -seconds 2 2>/dev/null | tail -1
done
# The daemon's choice (a build from before seal suites: AES-256-GCM, no line).
echo "daemon: $(grep -o 'sealed tcp lanes: .*' "$R/d.log" || echo 'sealed tcp lanes: AES-256-GCM (no seal suites)')"
KINDS="big small"
[ "$BIG_ONLY" = 1 ] && KINDS=big
for kind in $KINDS; do
	: >"$R/$kind.enc"
	: >"$R/$kind.clear"
	for i in $(seq 1 "$REPS"); do
		order="enc clear"
		[ $((i % 2)) -eq 0 ] && order="clear enc"
		for side in $order; do
			mode=--encrypt
			[ "$side" = clear ] && mode=--no-encrypt
			out=$(run "$mode" "$kind") || die "$side $kind: rdmacp failed"
			set -- $out
			printf '%s %-5s rep %d: %.3f s, client cpu %.2f s, daemon cpu %.2f s\n' \
				"$kind" "$side" "$i" "$1" "$2" "$3"
			echo "$out" >>"$R/$kind.$side"
		done
	done
	me=$(awk '{ print $1 }' "$R/$kind.enc" | median)
	mc=$(awk '{ print $1 }' "$R/$kind.clear" | median)
	ce=$(awk '{ print $2 + $3 }' "$R/$kind.enc" | median)
	cc=$(awk '{ print $2 + $3 }' "$R/$kind.clear" | median)
	printf 'median %-5s encrypted %.3f s  clear %.3f s  clear/encrypted (speed ratio) %.3f\n' \
		"$kind" "$me" "$mc" "$(echo "$mc / $me" | bc -l)"
	printf 'median %-5s cpu both ends: encrypted %.2f s  clear %.2f s\n' "$kind" "$ce" "$cc"
	if [ "$kind" = big ]; then
		gib=$(echo "$BIG_MIB / 1024" | bc -l)
		printf 'big: sealing cost %.3f cpu-s per GiB (both ends), %.2f GiB/s per core\n' \
			"$(echo "($ce - $cc) / $gib" | bc -l)" "$(echo "$gib / ($ce - $cc)" | bc -l)"
		BIG_ENC=$me
	fi
done

# scp, aes128-gcm@openssh.com, to a private sshd on loopback.
[ "$BIG_ONLY" = 1 ] && exit 0
if [ ! -x /usr/sbin/sshd ] || ! command -v scp >/dev/null || ! command -v ssh-keygen >/dev/null; then
	echo "scp: not measured (no sshd, scp or ssh-keygen installed)"
	exit 0
fi
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
Ciphers aes128-gcm@openssh.com
Subsystem sftp internal-sftp
EOF
/usr/sbin/sshd -D -e -f "$R/ssh/sshd_config" 2>"$R/ssh/sshd.log" &
PIDS+=($!)
wait_port "$SSH_PORT" || { cat "$R/ssh/sshd.log" >&2; die "sshd did not start"; }
: >"$R/scp"
for i in $(seq 1 "$REPS"); do
	fresh_dst
	t0=$(now)
	scp -q -P "$SSH_PORT" -i "$R/ssh/user_key" -c aes128-gcm@openssh.com \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
		-o BatchMode=yes "$BIG" "$(id -un)@127.0.0.1:$R/mod/dst/" || die "scp failed"
	sync -f "$R/mod/dst"
	t1=$(now)
	s=$(echo "$t1 - $t0" | bc -l)
	printf 'big scp (aes128-gcm) rep %d: %.3f s\n' "$i" "$s"
	echo "$s" >>"$R/scp"
done
ms=$(median <"$R/scp")
printf 'median big   scp %.3f s  encrypted rdmacp %.3f s  scp/rdmacp %.2fx\n' "$ms" "$BIG_ENC" \
	"$(echo "$ms / $BIG_ENC" | bc -l)"
