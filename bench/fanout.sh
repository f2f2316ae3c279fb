#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2046 # a || die after a chain; operand lists split on purpose
# SPDX-License-Identifier: MIT
# bench/fanout.sh: one source, N destinations (issue 36, "Measures"), on one
# machine with a network namespace per host and rate-limited links, so the links,
# not the CPUs, are the limit.
#
# Hosts: namespaces <prefix>-src (10.77.0.1) and <prefix>-d1..dN (10.77.0.11 ..),
# each with one veth ("eth0") to a bridge in a hub namespace <prefix>-hub (the root
# namespace is left alone); both ends of every veth are shaped with tbf at RATE
# (egress of the host end: its upload; egress of the hub end: its download). Each
# host's files are on its own tmpfs: the source data, the module "bench" of the
# rdmacpd in every destination namespace (tcp transport; relay settings when the
# daemon knows them), and, for the peers, a private sshd on port 2222 in every
# destination namespace that sees its own tmpfs at one common path.
#
# Cases, for each N of the list and each data set (one big file, a tree of small
# files), each timed end to end with the bytes that left the source's veth
# (tx_bytes, read in its namespace) and every destination verified (cmp / diff
# -r against the source: any difference stops the bench):
#   one        rdmacp to d1: one copy, the reference
#   fanout     rdmacp SRC d1:bench/ .. dN:bench/: one command, a relay chain;
#              "not available: <why>" while the client or daemons cannot relay
#   ktree      with --fanout K (K >= 2): the same command with --fanout K, a
#              relay tree where each hop forwards to up to K
#   parallel   N rdmacp pushes at once (today's way)
#   sequence   N rdmacp pushes one after the other
#   parallel-scp, pdcp, clush --copy: N ways at once over ssh, each when installed
# Ratios: bytes(fan-out N)/bytes(one copy) (target <= 1.05), time(fan-out
# N)/time(one copy) (target <= 1.3 for N = 4, 8), time(peer N)/time(fan-out N)
# (goal >= N/1.5). Then, for N = the kill N, the big file with --partial: the
# session process of destination --victim killed (kill -9) once the source has
# sent --cut of the copy, the others' time against an undisturbed run (target <=
# 1.2: the hop before the killed one forwards to the one after it), and a --partial
# re-run (fan-out: to all, with --skip quick; parallel: to what was not delivered),
# with the bytes the killed one was sent against what it lacked. With --slow, for
# the same N: destination --victim's link (both ends) shaped to a twentieth of RATE
# from the start, the fan-out with --partial: the daemon before it cuts it out as
# too slow ('relay slow time', --slow-time), the others' time against an
# undisturbed run (target <= 1.2, as for a killed hop), then a --partial re-run
# (to all, --skip quick) with its link restored.
#
# usage: bench/fanout.sh [--rate RATE] [--size MIB] [--files N] [--file-size B]
#                        [--n LIST] [--reps N] [--kill-n N] [--victim K] [--cut F]
#                        [--no-tree] [--no-peers] [--no-kill] [--no-encrypt]
#                        [--fanout K] [--chunk-size SIZE]
#                        [--slow] [--slow-time S]
#   --rate RATE   each link's rate, as tc reads it (default 1gbit; 200mbit makes a
#                 run take seconds on a small machine)
#   --size MIB    the big file (default 256)
#   --files N     the tree's files (default 1000), --file-size B each (default
#                 16384), 100 to a subdirectory
#   --n LIST      the destination counts, comma separated (default 2,4,8; at most 16)
#   --reps N      each case N times, alternating, the medians reported (default 1)
#   --kill-n N    the N of the kill case (default: the largest of --n); --victim K
#                 the destination killed (default 2), --cut F when (default 0.5)
#   --no-tree, --no-peers, --no-kill   leave those out
#   --no-encrypt  rdmacp's lanes in clear (the peers' ssh stays encrypted)
#   --fanout K    also the ktree case, a relay tree of fan-out K (2..16)
#   --chunk-size SIZE  rdmacp's --chunk-size for every case (default: its own)
#   --slow        the slow-hop case (the victim neither the first nor the last);
#                 --slow-time S the daemons' 'relay slow time' (default: theirs, 10)
#
# Run as root (namespaces, tbf, tmpfs). Everything it made (processes,
# namespaces, mounts, files) goes on exit, also on failure or interrupt.
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; source data cached
# there), RDMACP_BUILD_DIR (default <repo>/build). These are tcp-over-veth
# numbers for the relative measures, not RDMA numbers.
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_TOP=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_TOP/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

RATE=1gbit SIZE_MIB=256 NFILES=1000 FSIZE=16384 NLIST=2,4,8 REPS=1
KILL_N='' VICTIM=2 CUT=0.5 TREE=1 PEERS=1 KILL=1 ENCRYPT=() FANOUT=1 CHUNK=() SLOW=0 SLOW_T=''
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2; shift ;;
	--size) SIZE_MIB=$2; shift ;;
	--files) NFILES=$2; shift ;;
	--file-size) FSIZE=$2; shift ;;
	--n) NLIST=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--kill-n) KILL_N=$2; shift ;;
	--victim) VICTIM=$2; shift ;;
	--cut) CUT=$2; shift ;;
	--no-tree) TREE=0 ;;
	--no-peers) PEERS=0 ;;
	--no-kill) KILL=0 ;;
	--no-encrypt) ENCRYPT=(--no-encrypt) ;;
	--fanout) FANOUT=$2; shift ;;
	--chunk-size) CHUNK=(--chunk-size "$2"); shift ;;
	--slow) SLOW=1 ;;
	--slow-time) SLOW_T=$2; shift ;;
	-h | --help) sed -n '4,67p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "fanout: unknown option: $1 (--help)" >&2; exit 1 ;;
	esac
	shift
done

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, tc, tmpfs)"
[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
need ip tc jq python3 openssl cmp diff awk timeout
# Options: numbers where numbers are due, before anything is made.
is_uint() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
is_uint "$SIZE_MIB" || die "--size: a number of MiB, not '$SIZE_MIB'"
is_uint "$NFILES" || die "--files: a count, not '$NFILES'"
is_uint "$FSIZE" || die "--file-size: a number of bytes, not '$FSIZE'"
is_uint "$REPS" || die "--reps: a count, not '$REPS'"
is_uint "$VICTIM" || die "--victim: a destination number, not '$VICTIM'"
is_uint "$FANOUT" && [ "$FANOUT" -le 16 ] || die "--fanout: 1 to 16, not '$FANOUT'"
[[ $CUT =~ ^0?\.[0-9]+$ ]] || die "--cut: a fraction between 0 and 1, not '$CUT'"
IFS=, read -r -a NS_LIST <<<"$NLIST"
MAXN=0
for n in "${NS_LIST[@]}"; do
	is_uint "$n" && [ "$n" -ge 2 ] && [ "$n" -le 16 ] || die "--n: counts from 2 to 16, not '$n'"
	[ "$n" -gt "$MAXN" ] && MAXN=$n
done
[ -n "$KILL_N" ] || KILL_N=$MAXN
is_uint "$KILL_N" && [ "$KILL_N" -ge 2 ] && [ "$KILL_N" -le 16 ] || die "--kill-n: 2 to 16"
[ "$KILL_N" -gt "$MAXN" ] && MAXN=$KILL_N
[ "$VICTIM" -le "$KILL_N" ] || die "--victim $VICTIM: the kill case has only $KILL_N destinations"
[ "$SLOW" = 0 ] || { [ "$VICTIM" -ge 2 ] && [ "$VICTIM" -lt "$KILL_N" ]; } ||
	die "--slow: the victim must be neither the first nor the last of $KILL_N (--victim)"
[ -z "$SLOW_T" ] || [[ $SLOW_T =~ ^[0-9]+$ ]] || die "--slow-time: seconds, not '$SLOW_T'"

# rate_bytes RATE: tc's RATE (NUMBER[bit|kbit|mbit|gbit], decimal units) in bytes/s.
rate_bytes() {
	awk -v r="$1" 'BEGIN {
		if (!match(r, /^[0-9]+(\.[0-9]+)?/)) exit 1
		v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
		m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9
		if (!(u in m) || v <= 0) exit 1
		printf "%.0f\n", v * m[u] / 8 }'
}
RATE_BPS=$(rate_bytes "$RATE") || die "--rate: NUMBER with bit, kbit, mbit or gbit (as tc), not '$RATE'"

mkdir -p "$BENCH_DIR/data" || die "cannot create $BENCH_DIR"
bench_workdir fanout
PFX=rfo$$
NETNS=()
MOUNTS=()
# Everything goes, in the order that lets it go: the processes (those started
# here, then whatever else still runs in these namespaces, by id), the mounts,
# the namespaces (their veths and the bridge with them), the files.
fanout_cleanup() {
	local ns p m
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for ns in "${NETNS[@]}"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	done
	for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done
	for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
	PIDS=()
	bench_cleanup
}
trap fanout_cleanup EXIT

nsx() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}
host_ns() { echo "$PFX-$1"; }
host_ip() { if [ "$1" = src ]; then echo 10.77.0.1; else echo "10.77.0.$((10 + ${1#d}))"; fi; }
host_dir() { echo "$R/host/$1"; }

# ---------------------------------------------------------------- network
# tbf's bucket: 4 ms at RATE, at least 128 KiB (more than a 64 KiB GSO packet,
# so tbf never has to split one); a queue of 20 ms before it drops.
BURST=$(awk -v b="$RATE_BPS" 'BEGIN { v = int(b / 250); printf "%d\n", (v < 131072 ? 131072 : v) }')
shape() { # NS DEV
	nsx "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst "$BURST" latency 20ms ||
		die "tc tbf on $2 in $1"
}
add_host() { # NAME
	local ns
	ns=$(host_ns "$1")
	ip netns add "$ns" || die "ip netns add $ns"
	NETNS+=("$ns")
	ip -n "$PFX-hub" link add "v-$1" type veth peer name eth0 netns "$ns" || die "veth for $1"
	ip -n "$PFX-hub" link set "v-$1" master br0 up || die "v-$1 up"
	ip -n "$ns" addr add "$(host_ip "$1")/24" dev eth0 || die "address of $1"
	ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || die "links of $1"
	shape "$ns" eth0
	shape "$PFX-hub" "v-$1"
	mkdir -p "$(host_dir "$1")" && mount -t tmpfs -o mode=0755 tmpfs "$(host_dir "$1")" ||
		die "tmpfs for $1"
	MOUNTS+=("$(host_dir "$1")")
}
log "hosts: src and d1..d$MAXN in namespaces $PFX-*, links $RATE (tbf burst $BURST), tmpfs"
ip netns add "$PFX-hub" || die "ip netns add (network namespaces unavailable?)"
NETNS+=("$PFX-hub")
ip -n "$PFX-hub" link add br0 type bridge && ip -n "$PFX-hub" link set br0 up || die "bridge"
add_host src
for k in $(seq 1 "$MAXN"); do add_host "d$k"; done
# ns_wait_port NS IP PORT PID: until IP:PORT accepts in NS, or PID is gone.
ns_wait_port() {
	local _
	for _ in $(seq 1 200); do
		nsx "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
		kill -0 "$4" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# ---------------------------------------------------------------- data
BIG_CACHE=$BENCH_DIR/data/big-${SIZE_MIB}M.bin
bench_random "$BIG_CACHE" "$SIZE_MIB"
SRCD=$(host_dir src)
cp "$BIG_CACHE" "$SRCD/big.bin" || die "cp to the source's tmpfs"
if [ "$TREE" = 1 ]; then
	FLAT=$BENCH_DIR/data/small-${NFILES}x${FSIZE}
	bench_small "$FLAT" "$NFILES" "$FSIZE"
	# The source's tree: the files 100 to a subdirectory (sNNN/fNNNNNN).
	mkdir -p "$SRCD/tree" || die "mkdir tree"
	(cd "$FLAT" && find . -type f -name 'f*' | sort) | awk '{ printf "%s s%03d\n", $0, int((NR - 1) / 100) }' |
		while read -r f d; do
			mkdir -p "$SRCD/tree/$d" && cp "$FLAT/$f" "$SRCD/tree/$d/" || exit 1
		done || die "cannot lay out the tree"
fi
KINDS=(big)
[ "$TREE" = 1 ] && KINDS+=(tree)
kind_bytes() { if [ "$1" = big ]; then echo $((SIZE_MIB << 20)); else echo $((NFILES * FSIZE)); fi; }
kind_src() { if [ "$1" = big ]; then echo "$SRCD/big.bin"; else echo "$SRCD/tree"; fi; }
kind_flags() { if [ "$1" = tree ]; then echo -r -a; fi; }

# ---------------------------------------------------------------- rdmacpd
PORT=7471
C=$R/certs
HOSTS=()
for k in $(seq 1 "$MAXN"); do HOSTS+=(--host "$(host_ip "d$k")"); done
"$RDMACP" certs init "$C" "${HOSTS[@]}" >/dev/null || die "rdmacp certs init"
RELAY_FROM=
for k in $(seq 1 "$MAXN"); do
	"$RDMACP" certs issue "$C" --client "relay-d$k" >/dev/null || die "certs issue relay-d$k"
	RELAY_FROM+=" relay-d$k"
done
# daemon_conf K RELAY(0|1): destination K's configuration, with the relay keys
# (issue 36: relay = yes, relay to, relay from, its relay certificate) or without.
daemon_conf() {
	cat <<EOF
[global]
listen = $(host_ip "d$1"):$PORT
cert = $C/server.crt
key = $C/server.key
ca = $C/ca.crt
idle timeout = 120
EOF
	[ "$2" = 1 ] && printf 'relay certificate = %s\nrelay key = %s\nrelay to = 10.77.0.*\n' \
		"$C/relay-d$1.crt" "$C/relay-d$1.key"
	[ "$2" = 1 ] && [ -n "$SLOW_T" ] && printf 'relay slow time = %s\n' "$SLOW_T"
	cat <<EOF

[bench]
path = $(host_dir "d$1")
allow = client
uid = 0
gid = 0
EOF
	[ "$2" = 1 ] && printf 'relay = yes\nrelay from =%s\n' "$RELAY_FROM"
	return 0
}
# Whether this rdmacpd knows the relay keys: its --check on destination 1's file.
RELAY_NA=
daemon_conf 1 1 >"$R/probe.conf"
if out=$("$RDMACPD" --check -c "$R/probe.conf" 2>&1); then
	RELAY_KEYS=1
else
	RELAY_KEYS=0
	RELAY_NA=$(echo "${out//$R\//}" | head -1)
fi
DPID=()
for k in $(seq 1 "$MAXN"); do
	daemon_conf "$k" "$RELAY_KEYS" >"$R/d$k.conf"
	# (ip netns exec execs rdmacpd: $! is the daemon itself, its sessions are its children)
	ip netns exec "$(host_ns "d$k")" "$RDMACPD" -c "$R/d$k.conf" >"$R/d$k.log" 2>&1 &
	PIDS+=($!)
	DPID[k]=$!
done
for k in $(seq 1 "$MAXN"); do
	ns_wait_port "$(host_ns src)" "$(host_ip "d$k")" "$PORT" "${DPID[k]}" || {
		cat "$R/d$k.log" >&2
		die "rdmacpd of d$k did not start"
	}
done
CL=(ip netns exec "$(host_ns src)" "$RDMACP" --config /dev/null --cert "$C/client.crt"
	--key "$C/client.key" --ca "$C/ca.crt" -P "$PORT" --transport tcp "${ENCRYPT[@]}" "${CHUNK[@]}")
# A command's time limit: 8 copies' worth of the larger data set at RATE, plus a minute,
# so a hung case fails the bench instead of holding it.
LIMIT=$(awk -v b="$RATE_BPS" -v s="$(($(kind_bytes big) + $(kind_bytes tree)))" -v n="$MAXN" \
	'BEGIN { printf "%d\n", s * n * 8 / b + 60 }')
rd() { timeout "$LIMIT" "${CL[@]}" "$@"; }
dests() { # N: the operands d1:bench/ .. dN:bench/
	local k
	for k in $(seq 1 "$1"); do echo "$(host_ip "d$k"):bench/"; done
}

# ---------------------------------------------------------------- sshd and peers
COMMON=$R/dst # each sshd's mount namespace shows its host's tmpfs here
PEER_LIST=()
declare -A PEER_NA
peer_find() {
	local p
	if [ "$PEERS" = 0 ]; then
		for p in parallel-scp pdcp clush; do PEER_NA[$p]="left out (--no-peers)"; done
		return
	fi
	if [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null; then
		for p in parallel-scp pdcp clush; do PEER_NA[$p]="no sshd/ssh (apt-get install openssh-server)"; done
		return
	fi
	if command -v parallel-scp >/dev/null; then PSCP=parallel-scp; elif command -v pscp.pssh >/dev/null; then
		PSCP=pscp.pssh; else PSCP=; fi
	if [ -n "$PSCP" ]; then PEER_LIST+=(parallel-scp); else PEER_NA[parallel-scp]="not installed (apt-get install pssh)"; fi
	if ! command -v pdcp >/dev/null; then
		PEER_NA[pdcp]="not installed (apt-get install pdsh)"
	elif ! pdsh -V 2>&1 | grep -q 'rcmd modules:.*ssh'; then
		PEER_NA[pdcp]="pdsh has no ssh rcmd module"
	else
		PEER_LIST+=(pdcp)
	fi
	if command -v clush >/dev/null; then PEER_LIST+=(clush); else PEER_NA[clush]="not installed (apt-get install clustershell)"; fi
}
peer_find
SSH_OPTS=(-oPort=2222 -oIdentityFile="$R/ssh/user_key" -oStrictHostKeyChecking=no
	-oUserKnownHostsFile=/dev/null -oLogLevel=ERROR -oBatchMode=yes)
start_sshd() { # K
	local d=$R/ssh/d$1 ip
	ip=$(host_ip "d$1")
	mkdir -p "$d" && ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || die "ssh-keygen"
	cat >"$d/sshd_config" <<EOF
ListenAddress $ip
Port 2222
HostKey $d/host_key
PidFile $d/sshd.pid
AuthorizedKeysFile $R/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
EOF
	# ip netns exec gives it a mount namespace of its own: there COMMON is d$1's tmpfs.
	# shellcheck disable=SC2016 # expanded by that bash
	ip netns exec "$(host_ns "d$1")" bash -c 'mount --bind "$1" "$2" && exec /usr/sbin/sshd -D -e -f "$3"' \
		sshd "$(host_dir "d$1")" "$COMMON" "$d/sshd_config" 2>"$d/log" &
	PIDS+=($!)
	ns_wait_port "$(host_ns src)" "$ip" 2222 $! || { cat "$d/log" >&2; die "sshd of d$1 did not start"; }
}
if [ "${#PEER_LIST[@]}" -gt 0 ]; then
	mkdir -p "$R/ssh" "$COMMON" /run/sshd || die "mkdir ssh"
	ssh-keygen -q -t ed25519 -N '' -f "$R/ssh/user_key" || die ssh-keygen
	cp "$R/ssh/user_key.pub" "$R/ssh/authorized_keys" && chmod 600 "$R/ssh/authorized_keys" || die "keys"
	for k in $(seq 1 "$MAXN"); do start_sshd "$k"; done
fi
peer_hosts() { # N SEP: the destinations' addresses
	local k out=
	for k in $(seq 1 "$1"); do out+="${out:+$2}$(host_ip "d$k")"; done
	echo "$out"
}
run_parallel-scp() { # N KIND
	local h=() k r=()
	for k in $(seq 1 "$1"); do h+=(-H "$(host_ip "d$k")"); done
	[ "$2" = tree ] && r=(-r)
	# shellcheck disable=SC2046
	timeout "$LIMIT" ip netns exec "$(host_ns src)" "$PSCP" -p "$1" -t 0 -l root \
		$(printf -- '-O %s ' "${SSH_OPTS[@]#-o}") "${h[@]}" "${r[@]}" -e "$R/pscp.err" "$(kind_src "$2")" "$COMMON/" >"$R/peer.out" 2>&1
}
run_pdcp() { # N KIND
	local r=()
	[ "$2" = tree ] && r=(-r)
	PDSH_SSH_ARGS="${SSH_OPTS[*]} -l%u %h" timeout "$LIMIT" ip netns exec "$(host_ns src)" \
		pdcp -R ssh -f "$1" -w "$(peer_hosts "$1" ,)" "${r[@]}" "$(kind_src "$2")" "$COMMON/" >"$R/peer.out" 2>&1
}
run_clush() { # N KIND
	timeout "$LIMIT" ip netns exec "$(host_ns src)" clush -S -f "$1" -l root -o "${SSH_OPTS[*]}" \
		-w "$(peer_hosts "$1" ,)" --copy "$(kind_src "$2")" --dest "$COMMON/" >"$R/peer.out" 2>&1
}

# ---------------------------------------------------------------- one case
src_tx() { nsx "$(host_ns src)" cat /sys/class/net/eth0/statistics/tx_bytes; }
clear_dests() {
	local k
	for k in $(seq 1 "$MAXN"); do find "$(host_dir "d$k")" -mindepth 1 -delete || die "clear d$k"; done
}
# delivered K KIND: 0 when d K holds KIND identical to the source, 1 when it holds
# none of it under its final name, and the bench stops when it holds something else.
delivered() {
	local src dst
	src=$(kind_src "$2")
	dst=$(host_dir "d$1")/$(basename "$src")
	[ -e "$dst" ] || return 1
	if [ "$2" = big ]; then
		cmp -s "$src" "$dst" || die "d$1: $dst differs from the source"
	else
		diff -r -q "$src" "$dst" >"$R/diff" 2>&1 || die "d$1: $dst differs from the source: $(head -3 "$R/diff")"
	fi
	return 0
}
verify_all() { # N KIND CASE
	local k
	for k in $(seq 1 "$1"); do
		delivered "$k" "$2" || die "$3 N=$1 $2: nothing at d$k"
	done
}
run_one() { rd -q $(kind_flags "$2") "$(kind_src "$2")" "$(host_ip d1):bench/"; }
run_fanout() { rd -q $(kind_flags "$2") "$(kind_src "$2")" $(dests "$1"); }
run_ktree() { rd -q --fanout "$FANOUT" $(kind_flags "$2") "$(kind_src "$2")" $(dests "$1"); }
run_parallel() { # N KIND
	local k p=() rc=0
	for k in $(seq 1 "$1"); do
		rd -q $(kind_flags "$2") "$(kind_src "$2")" "$(host_ip "d$k"):bench/" &
		p+=($!)
	done
	for k in "${p[@]}"; do wait "$k" || rc=$?; done
	return $rc
}
run_sequence() { # N KIND
	local k
	for k in $(seq 1 "$1"); do
		rd -q $(kind_flags "$2") "$(kind_src "$2")" "$(host_ip "d$k"):bench/" || return
	done
}
# measure CASE N KIND: one run of run_CASE, a line "KIND CASE N SECONDS TX_BYTES"
# in $R/results, every destination verified.
measure() {
	local t0 t1 tx0 tx1 rc
	clear_dests
	rm -rf "$R/peer.out" "$R/pscp.err"
	tx0=$(src_tx)
	t0=$(now)
	"run_$1" "$2" "$3" 2>"$R/case.err"
	rc=$?
	t1=$(now)
	tx1=$(src_tx)
	if [ "$rc" -ne 0 ]; then
		cat "$R/case.err" "$R/peer.out" "$R"/pscp.err/* 2>/dev/null | head -8 >&2
		die "$1 N=$2 $3 failed (exit $rc)"
	fi
	verify_all "$2" "$3" "$1"
	echo "$3 $1 $2 $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $((tx1 - tx0))" >>"$R/results"
	log "$3 $1 N=$2: $(tail -1 "$R/results" | awk '{ printf "%.2f s, %.0f bytes from the source", $4, $5 }')"
}

# Whether the fan-out works: a 1 MiB file to d1 and d2 (the reason when it does not).
probe_fanout() {
	local rc
	head -c 1048576 "$SRCD/big.bin" >"$SRCD/probe.bin"
	clear_dests
	rd -q "$SRCD/probe.bin" $(dests 2) 2>"$R/probe.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		RELAY_NA="rdmacp exits $rc: $(head -1 "$R/probe.err")${RELAY_NA:+; $RELAY_NA}"
		return
	fi
	for k in 1 2; do
		cmp -s "$SRCD/probe.bin" "$(host_dir "d$k")/probe.bin" || die "fan-out probe: d$k differs"
	done
	RELAY_NA=
}
probe_fanout
rm -f "$SRCD/probe.bin"
if [ -n "$RELAY_NA" ]; then log "fan-out not available: $RELAY_NA"; fi

CASES=(one)
[ -z "$RELAY_NA" ] && CASES+=(fanout)
[ -z "$RELAY_NA" ] && [ "$FANOUT" -gt 1 ] && CASES+=(ktree)
CASES+=(parallel sequence "${PEER_LIST[@]}")
: >"$R/results"
for _ in $(seq 1 "$REPS"); do
	for kind in "${KINDS[@]}"; do
		measure one 1 "$kind"
		for n in "${NS_LIST[@]}"; do
			for c in "${CASES[@]:1}"; do measure "$c" "$n" "$kind"; done
		done
	done
done

# ---------------------------------------------------------------- report
# med KIND CASE N FIELD(4 time, 5 bytes): the median over the repetitions, or "".
med() { awk -v k="$1" -v c="$2" -v n="$3" -v f="$4" '$1 == k && $2 == c && $3 == n { print $f }' "$R/results" | median; }
echo "fan-out bench: links $RATE (tbf), tcp transport over veth (not RDMA), rdmacp ${ENCRYPT[*]:-sealed}${CHUNK[*]:+ ${CHUNK[*]}}," \
	"median of $REPS; big file $SIZE_MIB MiB$([ "$TREE" = 1 ] && echo ", tree $NFILES x $FSIZE B")"
echo "one link moves the big file's bytes in $(awk -v s="$(kind_bytes big)" -v b="$RATE_BPS" \
	'BEGIN { printf "%.2f", s / b }') s (payload alone, at $RATE)"
[ -n "$RELAY_NA" ] && echo "fanout: not available: $RELAY_NA"
for p in parallel-scp pdcp clush; do [ -n "${PEER_NA[$p]:-}" ] && echo "$p: skipped: ${PEER_NA[$p]}"; done
printf '%-5s %-13s %3s %9s %11s %8s %8s  %s\n' data case N "time s" "src MiB" "tx/one" "t/one" verified
for kind in "${KINDS[@]}"; do
	t1=$(med "$kind" one 1 4) b1=$(med "$kind" one 1 5)
	for n in 1 "${NS_LIST[@]}"; do
		for c in "${CASES[@]}"; do
			[ "$n" = 1 ] && [ "$c" != one ] && continue
			[ "$n" != 1 ] && [ "$c" = one ] && continue
			t=$(med "$kind" "$c" "$n" 4) b=$(med "$kind" "$c" "$n" 5)
			awk -v k="$kind" -v c="$c" -v n="$n" -v t="$t" -v b="$b" -v t1="$t1" -v b1="$b1" 'BEGIN {
				printf "%-5s %-13s %3d %9.2f %11.1f %8.3f %8.3f  %d of %d\n", k, c, n, t, b / 1048576,
					b / b1, t / t1, n, n }'
		done
	done
done
echo "ratios (targets of issue 36: bytes <= 1.05x one copy; time <= 1.3x one copy for N = 4, 8;" \
	"peers >= N/1.5 slower than the fan-out):"
for kind in "${KINDS[@]}"; do
	t1=$(med "$kind" one 1 4) b1=$(med "$kind" one 1 5)
	for n in "${NS_LIST[@]}"; do
		if [ -n "$RELAY_NA" ]; then
			echo "  $kind N=$n: fan-out not available; today (N parallel pushes):" \
				"$(awk -v b="$(med "$kind" parallel "$n" 5)" -v t="$(med "$kind" parallel "$n" 4)" \
					-v b1="$b1" -v t1="$t1" 'BEGIN { printf "bytes %.3fx, time %.3fx one copy", b / b1, t / t1 }')"
			continue
		fi
		line=$(awk -v b="$(med "$kind" fanout "$n" 5)" -v t="$(med "$kind" fanout "$n" 4)" -v b1="$b1" \
			-v t1="$t1" 'BEGIN { printf "bytes(fan-out)/bytes(one) %.3f, time(fan-out)/time(one) %.3f", b / b1, t / t1 }')
		for p in parallel sequence "${PEER_LIST[@]}"; do
			line+=$(awk -v p="$p" -v t="$(med "$kind" "$p" "$n" 4)" -v f="$(med "$kind" fanout "$n" 4)" \
				'BEGIN { printf ", time(%s)/time(fan-out) %.2f", p, t / f }')
		done
		echo "  $kind N=$n: $line (goal for the peers >= $(awk -v n="$n" 'BEGIN { printf "%.2f", n / 1.5 }'))"
		[ "$FANOUT" -gt 1 ] && echo "  $kind N=$n: tree of fan-out $FANOUT: $(awk -v b="$(med "$kind" ktree "$n" 5)" \
			-v t="$(med "$kind" ktree "$n" 4)" -v b1="$b1" -v t1="$t1" \
			'BEGIN { printf "bytes(tree)/bytes(one) %.3f, time(tree)/time(one) %.3f", b / b1, t / t1 }')"
	done
done

# ---------------------------------------------------------------- a destination killed
[ "$KILL" = 1 ] || [ "$SLOW" = 1 ] || exit 0
# journaled FILE: the bytes a partial's journal records cover (header, then 32-byte
# records, as bench/resume.sh reads it).
journaled() {
	python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
hl = 4 + 4 + 8 + 8 + 4 + 2 + struct.unpack(">H", b[28:30])[0]
print(sum(struct.unpack(">Q", b[p + 8:p + 16])[0] for p in range(hl, len(b) - 31, 32)))
PY
}
# kill_start MODE N: the copy with --partial in the background; KPIDS, its clients
# (for parallel, KPIDS[k-1] pushes to d k).
kill_start() {
	local k
	KPIDS=()
	if [ "$1" = fanout ]; then
		rd --json -p --partial "$SRCD/big.bin" $(dests "$2") >"$R/kill.json" 2>"$R/kill.err" &
		KPIDS+=($!)
	else
		for k in $(seq 1 "$2"); do
			rd -q --partial "$SRCD/big.bin" "$(host_ip "d$k"):bench/" 2>"$R/kill.$k.err" &
			KPIDS+=($!)
		done
	fi
}
# kill_case MODE N: undisturbed, then with d VICTIM's session killed at CUT of the
# copy; the others' time, and a --partial re-run to what was not delivered.
kill_case() {
	local mode=$1 n=$2 t0 t1 tx0 want p k und dis ok=0 none=() rc jnl lacked='?' json sent rtx list at
	clear_dests
	t0=$(now)
	kill_start "$mode" "$n"
	for p in "${KPIDS[@]}"; do wait "$p" || die "kill case, undisturbed $mode N=$n: exit $?"; done
	t1=$(now)
	verify_all "$n" big "undisturbed $mode"
	und=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	clear_dests
	tx0=$(src_tx)
	want=$(awk -v s="$(kind_bytes big)" -v c="$CUT" -v m="$([ "$mode" = parallel ] && echo "$n" || echo 1)" \
		'BEGIN { printf "%.0f", s * c * m }')
	t0=$(now)
	kill_start "$mode" "$n"
	while at=$(($(src_tx) - tx0)) && [ "$at" -lt "$want" ]; do
		kill -0 "${KPIDS[0]}" 2>/dev/null || die "kill case $mode: the copy ended before $CUT of it was sent"
		sleep 0.02
	done
	p=$(pgrep -P "${DPID[VICTIM]}") || die "kill case $mode: no session of d$VICTIM's rdmacpd to kill"
	# shellcheck disable=SC2086 # one id per line
	kill -KILL $p
	# (the share of the copy sent when the poll saw the cut passed)
	at=$(awk -v t="$at" -v w="$want" -v c="$CUT" 'BEGIN { printf "%.2f", t / w * c }')
	if [ "$mode" = fanout ]; then
		wait "${KPIDS[0]}"
		rc=$?
	else
		for k in $(seq 1 "$n"); do [ "$k" = "$VICTIM" ] || wait "${KPIDS[k - 1]}" || die "kill case: d$k's push failed (exit $?)"; done
	fi
	t1=$(now)
	[ "$mode" = parallel ] && { wait "${KPIDS[VICTIM - 1]}"; rc=$?; }
	dis=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	for k in $(seq 1 "$n"); do
		if delivered "$k" big; then [ "$k" != "$VICTIM" ] && ok=$((ok + 1)); else none+=("$k"); fi
	done
	jnl=$(find "$(host_dir "d$VICTIM")/.rdmacp-partial" -name '*.jnl' 2>/dev/null | head -1)
	[ -n "$jnl" ] && lacked=$(($(kind_bytes big) - $(journaled "$jnl")))
	echo "kill $mode N=$n: d$VICTIM's session killed at $at of the copy (--cut $CUT; client exit $rc);" \
		"the others: $ok of $((n - 1)) delivered (target: all), in $dis s against $und s undisturbed:" \
		"$(awk -v a="$dis" -v b="$und" 'BEGIN { printf "%.3fx", a / b }') (target <= 1.2)"
	# The client's word for each destination (--json "destinations"), beside what is on disk.
	[ "$mode" = fanout ] && jq -r '.. | objects | select(has("destinations")) | .destinations[] |
		"  \(.host):\(.path): \(.status), exit \(.exit), \(.files_ok) ok, \(.files_failed) failed" +
		(if (.error // "") != "" then ": \(.error)" else "" end)' "$R/kill.json" 2>/dev/null
	[ "${#none[@]}" -gt 0 ] || { echo "  d$VICTIM completed before the kill: no re-run"; return; }
	tx0=$(src_tx)
	if [ "$mode" = fanout ]; then
		# The same fan-out again, to all: the complete ones kept (--skip quick), the
		# killed one resumed; its bytes are what the hop before it sent it.
		json=$(rd --json -p --partial --skip quick "$SRCD/big.bin" $(dests "$n") \
			2>"$R/rerun.err") || die "kill case $mode: --partial re-run failed: $(head -1 "$R/rerun.err")"
		list=$(seq -s ' ' 1 "$n")
		sent=$(echo "$json" | jq -r --arg h "$(host_ip "d$VICTIM")" 'select(.event == "summary") |
			.destinations[] | select(.host == $h) | .bytes')
	else
		json=$(rd --json --partial "$SRCD/big.bin" $(for k in "${none[@]}"; do echo "$(host_ip "d$k"):bench/"; done) \
			2>"$R/rerun.err") || die "kill case $mode: --partial re-run failed: $(head -1 "$R/rerun.err")"
		list="${none[*]}"
		sent=$(echo "$json" | jq -r 'select(.event == "summary") | .bytes')
	fi
	rtx=$(($(src_tx) - tx0))
	for k in "${none[@]}"; do delivered "$k" big || die "re-run: nothing at d$k"; done
	list="d${list// /, d}"
	echo "  re-run --partial to $list: d$VICTIM was sent $sent bytes of payload ($rtx bytes left the source);" \
		"it lacked $lacked bytes (its journal): $(awk -v s="$sent" -v l="$lacked" \
			'BEGIN { if (l + 0 > 0) printf "%.3fx", s / l; else print "n/a" }') what it lacked"
}
# slow_shape RATE: d VICTIM's link, both ends, at RATE.
slow_shape() {
	nsx "$(host_ns "d$VICTIM")" tc qdisc change dev eth0 root tbf rate "$1" burst "$BURST" latency 20ms &&
		nsx "$PFX-hub" tc qdisc change dev "v-d$VICTIM" root tbf rate "$1" burst "$BURST" latency 20ms ||
		die "slow case: tc on d$VICTIM's link"
}
# slow_case N: the fan-out undisturbed, then with d VICTIM's link at a twentieth of
# RATE; the others' time, the client's word for each, and a --partial re-run.
slow_case() {
	local n=$1 t0 und dis ok=0 rc sent k
	clear_dests
	t0=$(now)
	rd -q -p --partial "$SRCD/big.bin" $(dests "$n") || die "slow case, undisturbed: exit $?"
	und=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
	verify_all "$n" big "slow case, undisturbed"
	clear_dests
	slow_shape "$(awk -v b="$RATE_BPS" 'BEGIN { printf "%.0fbit", b * 8 / 20 }')"
	t0=$(now)
	rd --json -p --partial "$SRCD/big.bin" $(dests "$n") >"$R/slow.json" 2>"$R/slow.err"
	rc=$?
	dis=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
	slow_shape "$RATE"
	for k in $(seq 1 "$n"); do [ "$k" != "$VICTIM" ] && delivered "$k" big && ok=$((ok + 1)); done
	echo "slow fanout N=$n: d$VICTIM's link at a twentieth of $RATE (client exit $rc); the others:" \
		"$ok of $((n - 1)) delivered, in $dis s against $und s undisturbed:" \
		"$(awk -v a="$dis" -v b="$und" 'BEGIN { printf "%.3fx", a / b }') (target <= 1.2)"
	jq -r '.. | objects | select(has("destinations")) | .destinations[] |
		"  \(.host):\(.path): \(.status), exit \(.exit), \(.files_ok) ok, \(.files_failed) failed" +
		(if (.error // "") != "" then ": \(.error)" else "" end)' "$R/slow.json" 2>/dev/null
	# Its session lets go of its partial once it has heard (over its slow link) that it was cut.
	for k in $(seq 1 600); do pgrep -P "${DPID[VICTIM]}" >/dev/null || break; sleep 0.05; done
	rd --json -p --partial --skip quick "$SRCD/big.bin" $(dests "$n") >"$R/rerun.json" 2>"$R/rerun.err"
	rc=$?
	sent=$(jq -r --arg h "$(host_ip "d$VICTIM")" 'select(.event == "summary") |
		.destinations[] | select(.host == $h) | .bytes' "$R/rerun.json")
	echo "  re-run --partial to all (exit $rc): d$VICTIM was sent $sent bytes of payload"
	if [ "$rc" != 0 ]; then
		jq -r '.. | objects | select(has("destinations")) | .destinations[] |
			"  \(.host):\(.path): \(.status), exit \(.exit)" +
			(if (.error // "") != "" then ": \(.error)" else "" end)' "$R/rerun.json" 2>/dev/null
		tail -5 "$R/rerun.err"
		die "slow case: the --partial re-run did not complete every destination"
	fi
	verify_all "$n" big "slow case, re-run"
}
if [ "$KILL" = 1 ]; then
	if [ -n "$RELAY_NA" ]; then
		echo "kill fanout N=$KILL_N: not available: $RELAY_NA"
	else
		kill_case fanout "$KILL_N"
	fi
	kill_case parallel "$KILL_N"
fi
if [ "$SLOW" = 1 ]; then
	if [ -n "$RELAY_NA" ]; then
		echo "slow fanout N=$KILL_N: not available: $RELAY_NA"
	else
		slow_case "$KILL_N"
	fi
fi
