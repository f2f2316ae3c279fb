#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/rxe-vm/faults.sh BUILD_DIR OUT_DIR [SECTION...]: verbs over IPv6 and the
# faults a Soft-RoCE VM can stage. Runs INSIDE the VM (tests/rxe-vm/run); e2e.sh
# calls it before its last step (the link down for good, after which rxe's lanes do
# not connect again). Its own daemon (port 7481) and certificates; logs in OUT_DIR.
#
# Sections, in this order (all by default; name some to run only those):
#  ipv6       fd00::1 on veth0 and fd00::2 on veth1, with policy routing as for IPv4
#             plus the rules the kernel's check of an incoming rdma_cm request
#             needs (see ip6_setup); rping over IPv6 when rdmacm-utils is installed;
#             a verbs push and pull over IPv6, auto picking verbs over IPv6.
#  dualstack  a socket-activated daemon on [::]: an IPv4 client and an IPv6 client,
#             both with --transport auto, get verbs (start event), push and pull.
#  tos        a module with 'tos = 72': the daemon's frames carry TOS 72 on the wire,
#             push and pull, whatever the client's carry (none, or --tos 106).
#  flap       veth0 down for 1 s mid-transfer: the copy still completes.
#  linkdel    `rdma link del rxe0` mid-push (the client's device) and `rdma link del
#             rxe1` mid-pull (the daemon's): both ends fail within seconds, nothing
#             under the final name, the daemon keeps serving; the device is added
#             back and a push works again.
#
# Prints "ok: ..." / "FAIL: ..." / "time: ..." lines. Exit 0 when every check passed.
set -u

B=${1:?usage: faults.sh BUILD_DIR OUT_DIR [SECTION...]}
OUT=${2:?usage: faults.sh BUILD_DIR OUT_DIR [SECTION...]}
shift 2
SECTIONS=${*:-ipv6 dualstack tos flap linkdel}
RDMACP=$B/rdmacp
RDMACPD=$B/rdmacpd
S4=10.0.0.2
S6=fd00::2
PORT=7481
W=$(mktemp -d /tmp/rdmacp-faults.XXXXXX)
FAILS=0
FPID=

mkdir -p "$OUT"
exec 3>>"$OUT/faults.log"

cleanup() {
	if [ -n "$FPID" ]; then
		kill -TERM "$FPID" 2>/dev/null
		wait "$FPID" 2>/dev/null
	fi
	cp "$W"/*.log "$OUT/" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

say() { echo "$*"; echo "$*" >&3; }
pass() { say "ok: $*"; }
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

run() { # NAME CMD...: output to $OUT/NAME.{out,err}; returns CMD's status
	local name=$1 rc
	shift
	echo "+ $*" >&3
	"$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	rc=$?
	echo "  -> rc $rc" >&3
	return $rc
}
same() { # DESC SRC DST
	if [ ! -f "$3" ]; then
		fail "$1: $3 missing"
	elif cmp -s "$2" "$3"; then
		pass "$1: $(basename "$3") ($(stat -c %s "$3") bytes) identical"
	else
		fail "$1: $3 differs"
	fi
}
# start_is NAME WANT: the --json start event's transport.
start_is() { jq -e -s --arg w "$2" 'map(select(.event == "start")) | .[0].transport == $w' \
	"$OUT/$1.out" >/dev/null 2>&1; }
wait_port() { # HOST PORT: until something listens there (10 s)
	for _ in $(seq 1 100); do
		(exec 4<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
rxe_active() { # DEV: port 1 ACTIVE within 10 s
	local s=
	for _ in $(seq 1 100); do
		read -r s <"/sys/class/infiniband/$1/ports/1/state" 2>/dev/null
		[ "$s" = "4: ACTIVE" ] && return 0
		sleep 0.1
	done
	return 1
}
has_gid() { # DEV GID (as sysfs writes it)
	grep -qx "$2" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null
}

# ---- IPv6 on the veth pair ------------------------------------------------------
# As for IPv4 (tests/rxe-vm/run): traffic from one local address to the other must
# cross the veth pair, so rules 10/11 send what leaves this host (iif lo) through
# it, ahead of the local table. rdma_cm needs one thing more. On the passive side it
# checks an incoming connection request against the routing table
# (drivers/infiniband/core/cma.c, validate_ipv6_net_dev): rt6_lookup() of the
# requester's address with oif = the netdev the request came in on, and no iif, must
# give a route whose device is that netdev. Both ends live on this one host, so the
# requester's address is a local one: the lookup lands on its local route, whose
# device is the loopback, and the kernel rejects every request (the requester sees
# RDMA_CM_EVENT_REJECTED, status 28). IPv4's check asks the FIB with the netdev as
# oif, which skips the other device's local route and finds the connected /24 on the
# right one: that is why IPv4 worked and IPv6 did not. On two hosts the requester's
# address is not local and nothing of this applies. Rules 12/13 (oif) answer that
# lookup through tables 100/101, as a second host would.
ip6_setup() {
	local i
	[ -e /proc/sys/net/ipv6/conf/veth0 ] || return 1
	for i in veth0 veth1; do
		# a 1 s link flap must not take the addresses (and their GIDs) away
		echo 1 >/proc/sys/net/ipv6/conf/$i/keep_addr_on_down
	done
	ip -6 -batch - <<'B' >&3 2>&1 || return 1
addr add fd00::1/64 dev veth0 nodad
addr add fd00::2/64 dev veth1 nodad
route add fd00::2/128 dev veth0 src fd00::1 table 100
route add fd00::1/128 dev veth1 src fd00::2 table 101
rule add pref 10 iif lo to fd00::2 lookup 100
rule add pref 11 iif lo to fd00::1 lookup 101
rule add pref 20 lookup local
rule del pref 0
B
	for _ in $(seq 1 50); do
		has_gid rxe0 fd00:0000:0000:0000:0000:0000:0000:0001 &&
			has_gid rxe1 fd00:0000:0000:0000:0000:0000:0000:0002 && return 0
		sleep 0.1
	done
	return 1
}
ip6_oif_rules() { # add|del
	ip -6 rule "$1" pref 12 oif veth1 to fd00::1 lookup 101 &&
		ip -6 rule "$1" pref 13 oif veth0 to fd00::2 lookup 100
}

# rping_try NAME: a minimal rdma-core client/server pair over IPv6; 0 when it pinged.
rping_try() {
	local name=$1 spid rc
	timeout 15 rping -s -a "$S6" -p 7999 -C 2 -v >"$OUT/${name}_server.out" 2>&1 &
	spid=$!
	sleep 1
	timeout 10 rping -c -a "$S6" -I fd00::1 -p 7999 -C 2 -v -d >"$OUT/$name.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return $rc
}

# ---- the daemon --------------------------------------------------------------------
"$RDMACP" certs init "$W/certs" --host "$S4" --host "$S6" >&3 2>&1 || {
	fail "certs init"
	exit 1
}
mkdir -p "$W/mod" "$W/tosmod" "$W/src" "$W/pull"
conf() { # [LISTEN]: the daemon's configuration on stdout (none: socket activation)
	echo "[global]"
	[ $# -eq 0 ] || echo "listen = $1"
	cat <<EOF
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
handshake timeout = 10
idle timeout = 30

[data]
path = $W/mod
allow = client
uid = $(id -u)
gid = $(id -g)

[tos]
path = $W/tosmod
allow = client
uid = $(id -u)
gid = $(id -g)
tos = 72
EOF
}
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress)
head -c $((3 * 1024 * 1024 + 5)) /dev/urandom >"$W/src/f3m"
head -c $((20 * 1024 * 1024)) /dev/urandom >"$W/src/f20m"
mkdir -p "$W/src/tree/sub"
head -c 70000 /dev/urandom >"$W/src/tree/a"
head -c 5 /dev/urandom >"$W/src/tree/sub/b"

IP6=0
if ip6_setup; then
	IP6=1
	ip6_oif_rules add || fail "ip -6 rule add (oif)"
	conf "$S4:$PORT, [$S6]:$PORT" >"$W/f.conf"
else
	say "note: no IPv6 in this VM: IPv6 checks not run"
	conf "$S4:$PORT" >"$W/f.conf"
fi
"$RDMACPD" --config "$W/f.conf" -v >"$W/faults_daemon.log" 2>&1 &
FPID=$!
wait_port "$S4" "$PORT" || {
	fail "the faults daemon did not listen"
	exit 1
}

# ---- ipv6 ----------------------------------------------------------------------------
sec_ipv6() {
	local d=data/ip6
	if [ "$IP6" -ne 1 ]; then
		return
	fi
	if command -v rping >/dev/null; then
		# the kernel's check, shown with rdma-core's own tool: without rules 12/13
		# every request is rejected; with them rping works.
		ip6_oif_rules del
		if rping_try rping6_norules; then
			say "note: rping over IPv6 works here without the oif rules (a kernel whose rdma_cm accepts same-host requests)"
		elif grep -q "RDMA_CM_EVENT_REJECTED" "$OUT/rping6_norules.out"; then
			say "note: rping over IPv6 without the oif rules: $(grep -m1 'event RDMA_CM_EVENT_REJECTED' "$OUT/rping6_norules.out")"
		else
			say "note: rping over IPv6 without the oif rules failed: $(tail -1 "$OUT/rping6_norules.out")"
		fi
		ip6_oif_rules add
		if rping_try rping6; then
			pass "rping over IPv6 (fd00::1 -> fd00::2) with the oif rules"
		else
			fail "rping over IPv6 with the oif rules: $(tail -2 "$OUT/rping6.out" | tr '\n' ' ')"
		fi
	else
		say "note: rping not installed (rdmacm-utils): the rdma-core cross-check over IPv6 not run"
	fi
	wait_port "$S6" "$PORT" || fail "the daemon does not listen on [$S6]:$PORT"
	if run ip6_push "${C[@]}" --transport verbs --json --chunk-size 64K "$W/src/f3m" \
		"[$S6]:$d/" && start_is ip6_push verbs; then
		same "verbs push over IPv6" "$W/src/f3m" "$W/mod/ip6/f3m"
	else
		fail "verbs push over IPv6: rc $? ($(head -3 "$OUT/ip6_push.err"))"
	fi
	if run ip6_tree "${C[@]}" --transport verbs -r "$W/src/tree" "[$S6]:$d/" &&
		diff -r "$W/src/tree" "$W/mod/ip6/tree" >&3 2>&1; then
		pass "verbs push -r over IPv6: tree identical"
	else
		fail "verbs push -r over IPv6: ($(head -3 "$OUT/ip6_tree.err"))"
	fi
	if run ip6_pull "${C[@]}" --transport verbs --json "[$S6]:$d/f3m" "$W/pull/ip6/" &&
		start_is ip6_pull verbs; then
		same "verbs pull over IPv6" "$W/src/f3m" "$W/pull/ip6/f3m"
	else
		fail "verbs pull over IPv6: rc $? ($(head -3 "$OUT/ip6_pull.err"))"
	fi
	if run ip6_auto "${C[@]}" --transport auto --json "$W/src/tree/a" "[$S6]:$d/auto/" &&
		start_is ip6_auto verbs; then
		same "--transport auto over IPv6 chose verbs" "$W/src/tree/a" "$W/mod/ip6/auto/a"
	else
		fail "--transport auto over IPv6: not verbs: $(grep -m1 '"start"' "$OUT/ip6_auto.out") ($(head -2 "$OUT/ip6_auto.err"))"
	fi
	if grep -q "verbs lanes" "$W/faults_daemon.log" &&
		grep "fd00::1" "$W/faults_daemon.log" | grep -q "verbs"; then
		pass "daemon log: verbs sessions from fd00::1"
	else
		fail "daemon log has no verbs session from fd00::1"
	fi
}

# ---- dualstack ---------------------------------------------------------------------------
sec_dualstack() {
	local p=$((PORT + 1)) sapid
	if ! command -v systemd-socket-activate >/dev/null; then
		say "note: systemd-socket-activate not installed: dual-stack checks not run"
		return
	fi
	conf >"$W/f6.conf"
	systemd-socket-activate -l "[::]:$p" "$RDMACPD" --config "$W/f6.conf" -v \
		>"$W/dualstack_daemon.log" 2>&1 &
	sapid=$!
	wait_port "$S4" "$p" || fail "socket-activated daemon: nothing on $S4:$p"
	if run ds4_push "${C[@]}" -P "$p" --transport auto --json "$W/src/f3m" "$S4:data/ds4/" &&
		start_is ds4_push verbs; then
		same "dual-stack daemon, IPv4 client, auto push: verbs" "$W/src/f3m" "$W/mod/ds4/f3m"
	else
		fail "dual-stack daemon, IPv4 client, auto push: $(grep -m1 '"start"' "$OUT/ds4_push.out") ($(head -2 "$OUT/ds4_push.err"))"
	fi
	if run ds4_pull "${C[@]}" -P "$p" --transport auto --json "$S4:data/ds4/f3m" "$W/pull/ds4/" &&
		start_is ds4_pull verbs; then
		same "dual-stack daemon, IPv4 client, auto pull: verbs" "$W/src/f3m" "$W/pull/ds4/f3m"
	else
		fail "dual-stack daemon, IPv4 client, auto pull: $(grep -m1 '"start"' "$OUT/ds4_pull.out") ($(head -2 "$OUT/ds4_pull.err"))"
	fi
	if grep -q "::ffff:10.0.0.1" "$W/dualstack_daemon.log"; then
		pass "dual-stack daemon: the IPv4 client arrived as ::ffff:10.0.0.1 (the mapped case)"
	else
		say "note: the dual-stack daemon's log does not show ::ffff:10.0.0.1"
	fi
	if [ "$IP6" -eq 1 ]; then
		if run ds6_push "${C[@]}" -P "$p" --transport auto --json "$W/src/f3m" \
			"[$S6]:data/ds6/" && start_is ds6_push verbs; then
			same "dual-stack daemon, IPv6 client, auto push: verbs" "$W/src/f3m" "$W/mod/ds6/f3m"
		else
			fail "dual-stack daemon, IPv6 client, auto push: $(grep -m1 '"start"' "$OUT/ds6_push.out") ($(head -2 "$OUT/ds6_push.err"))"
		fi
	fi
	kill -TERM "$sapid" 2>/dev/null
	wait "$sapid" 2>/dev/null
}

# ---- flap ----------------------------------------------------------------------------------
# mid_push NAME DIR [ARGS...]: start a paced 20 MiB verbs push (client pid in CPID) and
# return once its temp file on the daemon's side has grown past 256 KiB (data flows).
mid_push() {
	local name=$1 dir=$2
	shift 2
	"${C[@]}" --transport verbs --bwlimit 2M "$@" "$W/src/f20m" "$S4:data/$dir/" \
		>"$OUT/$name.out" 2>"$OUT/$name.err" &
	CPID=$!
	for _ in $(seq 1 150); do
		sleep 0.1
		[ -n "$(find "$W/mod/$dir" -name '.*.rdmacp.*' -size +256k 2>/dev/null)" ] && return 0
	done
	return 1
}
# The routes of tables 100/101 go with their device's link (an interface taken down
# loses its routes; bringing it up brings back only the connected ones): put them back,
# else traffic between the two addresses goes through lo and both ends use rxe1.
routes_back() {
	ip route replace 10.0.0.2/32 dev veth0 src 10.0.0.1 table 100
	ip route replace 10.0.0.1/32 dev veth1 src 10.0.0.2 table 101
	if [ "$IP6" -eq 1 ]; then
		ip -6 route replace fd00::2/128 dev veth0 src fd00::1 table 100
		ip -6 route replace fd00::1/128 dev veth1 src fd00::2 table 101
	fi
}
# last_peer: where the faults daemon's last session came from (its log).
last_peer() { sed -n 's/.*debug: session [0-9]* from \(.*\):[0-9]* started$/\1/p' \
	"$W/faults_daemon.log" | tail -1; }
# ended_clean NAME DIR T0: after a failed push, the daemon's session ends within 15 s
# and nothing is under the final name.
ended_clean() {
	local name=$1 dir=$2 t0=$3 t2
	for _ in $(seq 1 150); do [ -z "$(pgrep -P "$FPID")" ] && break; sleep 0.1; done
	t2=$(now)
	if [ -z "$(pgrep -P "$FPID")" ]; then
		pass "$name: the daemon's session ended $(secs "$t0" "$t2") s after the fault"
	else
		fail "$name: the daemon's session still runs $(secs "$t0" "$t2") s after the fault"
	fi
	if [ -e "$W/mod/$dir/f20m" ]; then
		fail "$name: a file under the final name"
	else
		pass "$name: nothing under the final name"
	fi
}
# wire_cut / routes_back: frames from 10.0.0.1 to 10.0.0.2 go to a next hop that does
# not exist (they wait for ARP and are dropped); the links stay up.
wire_cut() { ip route replace 10.0.0.2/32 via 10.0.0.99 dev veth0 onlink src 10.0.0.1 table 100; }
# rxe_renew DEV NETDEV: the Soft-RoCE device deleted and made again.
rxe_renew() {
	rdma link del "$1" >&3 2>&1
	rdma link add "$1" type rxe netdev "$2" >&3 2>&1
	rxe_active "$1"
}
# wait_gone PID SECS [kill]: until PID has exited, at most SECS seconds (then, with
# "kill", kill -9 it).
wait_gone() {
	for _ in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	[ "${3:-}" != kill ] || kill -9 "$1" 2>/dev/null
}
sec_flap() {
	local t0 t1 td rc
	# 1. The wire drops every frame from 10.0.0.1 for 1 s: the lanes' retransmissions
	# (7 tries of rdma_cm's ACK timeout) ride it out.
	if ! mid_push wire wire; then
		fail "wire outage: no data flowing after 15 s ($(head -2 "$OUT/wire.err"))"
	fi
	t0=$(now)
	wire_cut
	sleep 1
	routes_back
	say "wire outage: frames from 10.0.0.1 dropped for $(secs "$t0" "$(now)") s"
	wait "$CPID"
	rc=$?
	t1=$(now)
	if [ $rc -eq 0 ]; then
		pass "wire outage of 1 s mid-push: the copy completed $(secs "$t0" "$t1") s after it began"
		same "wire outage" "$W/src/f20m" "$W/mod/wire/f20m"
	else
		fail "wire outage of 1 s mid-push: client rc $rc ($(tail -1 "$OUT/wire.err"))"
	fi
	# 2. The wire cut until the client gives up, with an ACK timeout of 4.096 us << 8
	# (1 ms): the 7 tries run out in seconds (rxe's timers tick in jiffies; 3: the
	# default's ~18 s), the lane fails (RETRY_EXC), nothing committed. With memory windows
	# (the default) as with the copy's fence.
	if mid_push wire_short wire_short --ack-timeout 8; then
		t0=$(now)
		wire_cut
		wait_gone "$CPID" 30 kill
		wait "$CPID"
		rc=$?
		t1=$(now)
		routes_back
		# With two lanes the two ends may each lose a different lane first (each
		# end's retries run out on its own): the lane the client moves its
		# slots to is then one the daemon has taken down, and the client's
		# last lane fails with what rxe answers there (seen under load:
		# IBV_WC_REM_INV_REQ_ERR). Either way the outage ends the copy in
		# bounded time, nothing committed.
		if [ $rc -eq 8 ] && grep -q "RETRY_EXC" "$OUT/wire_short.err" &&
			lt "$(secs "$t0" "$t1")" 10; then
			pass "wire outage with --ack-timeout 8: exit 8 after $(secs "$t0" "$t1") s, IBV_WC_RETRY_EXC_ERR"
		elif [ $rc -eq 8 ] && grep -q "data lane [0-9]* lost" "$OUT/wire_short.err" &&
			grep -q "transfer failed: data transport: IBV_WC" "$OUT/wire_short.err" &&
			lt "$(secs "$t0" "$t1")" 10; then
			pass "wire outage with --ack-timeout 8: exit 8 after $(secs "$t0" "$t1") s, a lane lost at each end ($(tail -1 "$OUT/wire_short.err"))"
		else
			fail "wire outage with --ack-timeout 8: rc $rc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/wire_short.err"))"
		fi
		ended_clean "wire outage with --ack-timeout 8" wire_short "$t0"
	else
		fail "wire outage, short ACK timeout: no data flowing ($(head -2 "$OUT/wire_short.err"))"
	fi
	# 3. The wire dead for good (rdma_cm's ACK timeout): both ends fail in bounded time,
	# from the lanes' retries, not the idle timeout (30 s).
	if mid_push wire_dead wire_dead; then
		t0=$(now)
		wire_cut
		wait_gone "$CPID" 60 kill
		wait "$CPID"
		rc=$?
		t1=$(now)
		routes_back
		if [ $rc -eq 8 ] && grep -q "RETRY_EXC" "$OUT/wire_dead.err" && lt "$(secs "$t0" "$t1")" 30; then
			pass "wire dead for good: exit 8 after $(secs "$t0" "$t1") s, IBV_WC_RETRY_EXC_ERR (7 ACK timeouts)"
		else
			fail "wire dead for good: rc $rc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/wire_dead.err"))"
		fi
		ended_clean "wire dead for good" wire_dead "$t0"
	else
		fail "wire dead: no data flowing ($(head -2 "$OUT/wire_dead.err"))"
	fi
	# 4. veth0 itself down for 1 s. Soft-RoCE looks a route up for every packet it sends
	# and fails the work request when there is none (rxe_requester: IBV_WC_LOC_QP_OP_ERR)
	# instead of sending into the dead link and retransmitting as a NIC does: on rxe the
	# copy fails at once, cleanly. Either outcome is checked; which one is said.
	if ! mid_push flap flap; then
		fail "flap: no data flowing after 15 s ($(head -2 "$OUT/flap.err"))"
	fi
	t0=$(now)
	ip link set veth0 down
	td=
	for _ in $(seq 1 10); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$CPID" 2>/dev/null || td=$(now)
	ip link set veth0 up
	routes_back
	say "flap: veth0 down for $(secs "$t0" "$(now)") s"
	rxe_active rxe0 || fail "flap: rxe0 not ACTIVE again after the link came back"
	wait "$CPID"
	rc=$?
	t1=$(now)
	if [ $rc -eq 0 ]; then
		pass "flap: veth0 down 1 s mid-push: the copy completed $(secs "$t0" "$t1") s after the flap began"
		same "flap" "$W/src/f20m" "$W/mod/flap/f20m"
	elif [ $rc -eq 8 ] && [ -n "$td" ] && grep -q "IBV_WC_LOC_QP_OP_ERR" "$OUT/flap.err"; then
		pass "flap: veth0 down mid-push: Soft-RoCE fails the QP while the link is down (exit 8 after $(secs "$t0" "$td") s, IBV_WC_LOC_QP_OP_ERR)"
		ended_clean flap flap "$t0"
	elif [ $rc -eq 8 ] && grep -q "data lane [0-9]* lost" "$OUT/flap.err" &&
		grep -q "idle timeout: no data progress" "$OUT/flap.err"; then
		# One lane's QP failed while the link was down; its slots went on the other,
		# which had nothing in flight then, and which rxe0 left stalled once the link was
		# back (no completion, no error: what a flap does to rxe0, below). The daemon's
		# idle timeout (30 s here) ends the copy; nothing is committed.
		pass "flap: veth0 down mid-push: $(grep -m1 -o 'data lane [0-9]* lost' "$OUT/flap.err"), the other stalled on Soft-RoCE; the idle timeout ended the copy (exit 8 after $(secs "$t0" "$t1") s)"
		ended_clean flap flap "$t0"
	else
		fail "flap: veth0 down 1 s mid-push: client rc $rc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/flap.err"))"
	fi
	# After a flap that failed a QP mid-transfer, rdma_cm connections from rxe0 time out
	# until the device is made again (an idle flap leaves it working). What shows it:
	# rxe0's GSI QP (QP1) still says RTS, the CM replies reach veth0, and rxe0's
	# rcvd_pkts does not move: rxe drops what arrives for QP1. The likely way there:
	# a MAD send failed while the link was down, rxe put QP1 in error, and the MAD
	# layer's recovery (SQE -> RTS) made its send side ready again but not its
	# receive side.
	rdma resource show qp >"$OUT/flap_qps.txt" 2>&1
	rcvd() { rdma statistic show link rxe0/1 2>/dev/null | sed -n 's/.* rcvd_pkts \([0-9]*\).*/\1/p'; }
	local r0 r1
	r0=$(rcvd)
	if ! run after_flap0 "${C[@]}" --transport verbs "$W/src/f3m" \
		"$S4:data/after_flap0/"; then
		r1=$(rcvd)
		say "flap: verbs lanes from rxe0 do not connect after it ($(tail -1 "$OUT/after_flap0.err")); rxe0 rcvd_pkts ${r0:-?} -> ${r1:-?} meanwhile; $(grep -o 'rxe0/1 lqpn 1 type GSI state [A-Z]*' "$OUT/flap_qps.txt"); rxe0 made again"
		rxe_renew rxe0 veth0 || fail "flap: rxe0 could not be made again"
	fi
	if run after_flap "${C[@]}" --transport verbs "$W/src/f3m" "$S4:data/after_flap/" &&
		[ "$(last_peer)" = 10.0.0.1 ]; then
		same "verbs push from 10.0.0.1 after the flap" "$W/src/f3m" "$W/mod/after_flap/f3m"
	else
		fail "verbs push after the flap: rc $? from $(last_peer) ($(head -2 "$OUT/after_flap.err"))"
	fi
}

# ---- linkdel -------------------------------------------------------------------------------
# linkdel_one NAME DEV DIR: the copy (already running, client pid CPID) loses DEV.
linkdel_one() {
	local name=$1 dev=$2 dir=$3 t0 t1 t2 t3 crc lpid netdev
	netdev=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null)
	t0=$(now)
	rdma link del "$dev" >"$OUT/${name}_del.out" 2>&1 &
	lpid=$!
	for _ in $(seq 1 600); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$CPID" 2>/dev/null; then
		fail "$name: the client still runs 60 s after rdma link del $dev"
		kill -9 "$CPID"
	fi
	wait "$CPID"
	crc=$?
	t1=$(now)
	for _ in $(seq 1 600); do [ -z "$(pgrep -P "$FPID")" ] && break; sleep 0.1; done
	t2=$(now)
	for _ in $(seq 1 600); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.1; done
	wait "$lpid"
	t3=$(now)
	say "time: $name: rdma link del $dev returned after $(secs "$t0" "$t3") s"
	if [ $crc -ne 0 ] && [ $crc -ne 137 ] && lt "$(secs "$t0" "$t1")" 15; then
		pass "$name: the client exits $crc $(secs "$t0" "$t1") s after rdma link del $dev ($(tail -1 "$OUT/$name.err"))"
	else
		fail "$name: client rc $crc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/$name.err"))"
	fi
	if [ -z "$(pgrep -P "$FPID")" ] && lt "$(secs "$t0" "$t2")" 15; then
		pass "$name: the daemon's session ended $(secs "$t0" "$t2") s after rdma link del $dev"
	else
		fail "$name: the daemon's session still runs after $(secs "$t0" "$t2") s"
	fi
	if kill -0 "$FPID" 2>/dev/null; then
		pass "$name: the daemon itself still runs"
	else
		fail "$name: the daemon died"
	fi
	# the device back, for what follows
	rdma link add "$dev" type rxe netdev "${netdev:-veth0}" >&3 2>&1
	if rxe_active "$dev"; then
		say "$name: $dev added back on ${netdev:-?}"
	else
		fail "$name: $dev could not be added back ($(rdma link show 2>&1 | tr '\n' ' '))"
	fi
}
sec_linkdel() {
	local rc
	if ! mid_push del0 del0; then
		fail "linkdel rxe0: no data flowing after 15 s ($(head -2 "$OUT/del0.err"))"
		kill "$CPID" 2>/dev/null
		wait "$CPID"
		return
	fi
	[ "$(last_peer)" = 10.0.0.1 ] || fail "linkdel rxe0: the push came from $(last_peer), not rxe0's 10.0.0.1"
	linkdel_one del0 rxe0 del0
	if [ -e "$W/mod/del0/f20m" ]; then
		fail "rdma link del rxe0: a file under the final name"
	else
		pass "rdma link del rxe0 mid-push: nothing under the final name"
	fi
	# the daemon's device, mid-pull (the daemon writes)
	cp "$W/src/f20m" "$W/mod/f20m"
	mkdir -p "$W/pull/del1"
	"${C[@]}" --transport verbs --bwlimit 2M "$S4:data/f20m" "$W/pull/del1/" \
		>"$OUT/del1.out" 2>"$OUT/del1.err" &
	CPID=$!
	for _ in $(seq 1 150); do
		sleep 0.1
		[ -n "$(find "$W/pull/del1" -name '.*.rdmacp.*' -size +256k 2>/dev/null)" ] && break
	done
	linkdel_one del1 rxe1 del1
	if [ -e "$W/pull/del1/f20m" ]; then
		fail "rdma link del rxe1: a file under the final name"
	else
		pass "rdma link del rxe1 mid-pull: nothing under the final name"
	fi
	# both devices back: a push works again
	if run after_del "${C[@]}" --transport verbs "$W/src/f3m" "$S4:data/after_del/"; then
		same "verbs push after the devices were added back" "$W/src/f3m" "$W/mod/after_del/f3m"
	else
		rc=$?
		fail "verbs push after the devices were added back: rc $rc ($(head -2 "$OUT/after_del.err"))"
	fi
}

# ---- tos ---------------------------------------------------------------------------------------
# A module with 'tos = 72': the daemon's lanes send in that class whatever the client's
# carry (its QPs are taken to RTR with that traffic class), seen on the wire (capture.py
# on veth0). The CM's own MADs (QP 1: replies, disconnects) go in the class of the id that
# sends them: capture.py counts them apart and they are only reported. A slow capture
# may miss frames: at least 3 of each side's lane frames must be seen, none in another
# class.
captured() { # NAME CMD...: CMD under capture of veth0's frames into $W/NAME.cap
	local name=$1 cpid
	shift
	: >"$W/$name.ready"
	python3 "$(dirname "$0")/capture.py" veth0 "$W/$name.cap" >>"$W/$name.ready" 2>&1 &
	cpid=$!
	for _ in $(seq 1 100); do grep -q capturing "$W/$name.ready" && break; sleep 0.1; done
	run "$name" "$@"
	echo "rc $?" >>"$W/$name.ready"
	kill -TERM "$cpid"
	wait "$cpid"
	python3 "$(dirname "$0")/capture.py" tos "$W/$name.cap" >"$OUT/$name.tos"
}
# tos_frames NAME SRC TOS [KIND]: how many of SRC's lane frames (KIND frames, the default;
# cm: the CM's MADs) had TOS; "other T": any but T.
tos_frames() {
	awk -v s="$2" -v t="$3" -v x="${4:-}" -v k="${5:-frames}" \
		'$1 == s && $4 == k && (t == "other" ? $3 != x : $3 == t) { n += $5 }
		END { print n + 0 }' "$OUT/$1.tos"
}
tos_check() { # NAME DESC CLIENT_TOS
	local name=$1 desc=$2 ct=$3 d72 dother cown cother cm
	d72=$(tos_frames "$name" 10.0.0.2 72)
	dother=$(tos_frames "$name" 10.0.0.2 other 72)
	cown=$(tos_frames "$name" 10.0.0.1 "$ct")
	cother=$(tos_frames "$name" 10.0.0.1 other "$ct")
	cm=$(grep " cm " "$OUT/$name.tos" | tr '\n' ';')
	if grep -q "rc 0" "$W/$name.ready" && [ "$d72" -ge 3 ] && [ "$dother" -eq 0 ] &&
		[ "$cown" -ge 3 ] && [ "$cother" -eq 0 ]; then
		pass "$desc: daemon's lane frames TOS 72 ($d72), client's TOS $ct ($cown); CM: ${cm:-none}"
	else
		fail "$desc: $(tail -1 "$W/$name.ready"), frames: $(tr '\n' ';' <"$OUT/$name.tos")"
	fi
}
sec_tos() {
	head -c $((2 * 1024 * 1024)) /dev/urandom >"$W/src/tos2m"
	captured tos_push "${C[@]}" --transport verbs "$W/src/tos2m" "$S4:tos/"
	tos_check tos_push "module tos = 72, push without --tos" 0
	same "module tos = 72, push" "$W/src/tos2m" "$W/tosmod/tos2m"
	mkdir -p "$W/pull/tos"
	captured tos_pull "${C[@]}" --transport verbs --tos 106 "$S4:tos/tos2m" "$W/pull/tos/"
	tos_check tos_pull "module tos = 72, pull with --tos 106" 106
	same "module tos = 72, pull" "$W/src/tos2m" "$W/pull/tos/tos2m"
}

for s in $SECTIONS; do
	case $s in
	ipv6 | dualstack | tos | flap | linkdel) "sec_$s" ;;
	*) fail "unknown section $s" ;;
	esac
done

say "faults: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
