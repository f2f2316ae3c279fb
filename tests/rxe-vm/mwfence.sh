#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/rxe-vm/mwfence.sh BUILD_DIR OUT_DIR: the zero-copy slot fence by memory
# windows (issue 35 item 3) on real verbs. Runs INSIDE the Soft-RoCE VM
# (tests/rxe-vm/run; t_verbs_mw_vm.sh starts it).
#
# 1. What this kernel's Soft-RoCE offers: uname -r, and whether rxe0 binds
#    type-2 windows (device_cap_flags); a kernel without them (before 5.14)
#    makes the test skip with the reason, never pass.
# 2. tests/unit/test_verbs_window over rxe0 -> rxe1 (10.0.0.1 -> 10.0.0.2):
#    a slot written through its window and its descriptor sent as WRITE +
#    SEND_WITH_INV lands byte-exact and the receive completion names exactly
#    the slot's key; a late write into the slot (a hostile peer rewriting it
#    after its SEND_WITH_INV) gets IBV_WC_REM_ACCESS_ERR and the slot's
#    bytes are unchanged; a reopened window has a new key and the old one is
#    refused; a window answers only its own lane; window_close closes it; a
#    window whose lane was lost is closed from another lane and opened there
#    (rails), the slot lands and is fenced again; a descriptor that closes
#    another window is reported as such (the receiver takes nothing); the
#    registration's own key writes nothing; xport_verbs_windows says yes for
#    rxe0/rxe1; teardown with windows open takes seconds, not rxe's 50 s
#    wait per QP.
# 3. Sessions with windows (rdmacp/rdmacpd, rxe0 -> rxe1, one lane): a push
#    and a pull byte-exact, the --json start event and -v saying the fence is
#    windows (the daemon's log too); a mixed pair (the client masks
#    capability 36) keeps the copy; rails with windows (--devices rxe0,rxe1):
#    a push and a pull, and each with lane 0 lost mid-copy (the lost lane's
#    windows opened again on the other under fresh keys), byte-exact; a
#    sender rewriting a fenced slot through the key its descriptor closed
#    gets IBV_WC_REM_ACCESS_ERR and nothing is committed (one lane), or
#    with rails loses that lane and completes byte-exact on the other; a
#    lane whose slots all wait at a stopped receiver, its link then cut, is
#    found dead by the sender's probe while the receiver is still stopped.
#    The daemon asks its devices about windows once, at start (no HELLO
#    does); its handshake timeout stays 30 s for TLS alone on a loaded host.
#
# Prints "ok: ..." / "FAIL: ..." lines; logs go to OUT_DIR. Exit 0 when every
# check passed, 1 otherwise, 77 when the kernel's rxe has no type-2 windows.
set -u

B=${1:?usage: mwfence.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: mwfence.sh BUILD_DIR OUT_DIR}
SERVER=10.0.0.2
PORT=7479
W=$(mktemp -d /tmp/rdmacp-mw.XXXXXX)
FAILS=0
DPID=

mkdir -p "$OUT"
cleanup() {
	if [ -n "$DPID" ]; then
		kill -TERM "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	[ -f "$W/d.log" ] && cp "$W/d.log" "$OUT/daemon.log"
	rm -rf "$W"
}
trap cleanup EXIT
ok() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

echo "kernel: $(uname -r)"
VERBS_LOOP_IP=$SERVER "$B/tests/test_verbs_window" >"$OUT/window.log" 2>&1
rc=$?
grep -E "^(ok|FAIL|SKIP)|windows:|PASSED|FAILED" "$OUT/window.log"
case $rc in
0) ok "memory-window fence on Soft-RoCE (test_verbs_window)" ;;
77)
	echo "SKIP: $(grep SKIP "$OUT/window.log") (kernel $(uname -r))"
	exit 77
	;;
*) fail "test_verbs_window (rc $rc; $OUT/window.log)" ;;
esac

# 3. Sessions with windows.
"$B/rdmacp" certs init "$W/certs" --host "$SERVER" >"$OUT/certs.log" 2>&1 || {
	fail "certs init"
	exit 1
}
mkdir -p "$W/mod" "$W/src"
cat >"$W/d.conf" <<CONF
[global]
listen = $SERVER:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
# Rails: lanes to 10.0.0.1 (rxe0) too, from either device of the client.
rails = 10.0.0.1
lanes from other addresses = yes
# No HELLO asks a device any more, but on a host with ~20 runnable tasks the emulator's
# TLS handshakes alone ran past 10 s and 20 s.
handshake timeout = 30

[data]
path = $W/mod
allow = client
uid = $(id -u)
gid = $(id -g)
CONF
t_start=$(date +%s.%N)
"$B/rdmacpd" --config "$W/d.conf" -v >"$W/d.log" 2>&1 &
DPID=$!
# Ready once it has asked its devices whether they bind windows (once per daemon, at
# start: seconds each under the emulator, 20 on a loaded host); no HELLO asks them again.
for _ in $(seq 1 600); do
	grep -q "rdmacpd .*ready" "$W/d.log" && break
	sleep 0.1
done
echo "daemon ready $(echo "$(date +%s.%N) - $t_start" | bc) s after start: $(grep -c 'memory windows: ' "$W/d.log") device answer(s) logged"
head -c 3000123 /dev/urandom >"$W/src/f"
head -c 1234567 /dev/urandom >"$W/mod/g"
C=("$B/rdmacp" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --chunk-size 64K)

# 3a. A push with windows agreed (rxe0 and rxe1 bind them; one lane: a lost one ends
# the session anyway): byte-exact, no copy.
if "${C[@]}" --json --lanes 1 "$W/src/f" "$SERVER:data/" >"$OUT/push.log" 2>&1 &&
	cmp -s "$W/src/f" "$W/mod/f"; then
	ok "verbs push byte-exact with windows"
else
	fail "verbs push with windows ($OUT/push.log)"
fi
grep -q '"fence":"windows"' "$OUT/push.log" && ok "push: --json start says fence windows" ||
	fail "push: no \"fence\":\"windows\" in $OUT/push.log"
grep -q "fenced by memory windows" "$W/d.log" && ok "daemon log: lanes fenced by memory windows" ||
	fail "daemon log does not say memory windows"

# 3b. A pull with windows (the client receives): byte-exact, -v says so.
mkdir -p "$W/dst"
if "${C[@]}" -v --lanes 1 "$SERVER:data/g" "$W/dst/" >"$OUT/pull.log" 2>&1 &&
	cmp -s "$W/mod/g" "$W/dst/g"; then
	ok "verbs pull byte-exact with windows"
else
	fail "verbs pull with windows ($OUT/pull.log)"
fi
grep -q "held slots fenced by memory windows" "$OUT/pull.log" && ok "pull: -v says memory windows" ||
	fail "pull: -v does not say memory windows ($OUT/pull.log)"

# 3c. A mixed pair (the client plays an end without the bit): the copy, byte-exact.
rm -f "$W/mod/f"
if RDMACP_TEST_CAPS_OFF=0x1000000000 "${C[@]}" --json --lanes 1 "$W/src/f" "$SERVER:data/" \
	>"$OUT/mixed.log" 2>&1 && cmp -s "$W/src/f" "$W/mod/f" &&
	grep -q '"fence":"copy"' "$OUT/mixed.log"; then
	ok "mixed pair falls back to the copy, byte-exact"
else
	fail "mixed pair ($OUT/mixed.log)"
fi

# 3c'. Rails with windows: two lanes on two devices at each end (--devices rxe0,rxe1;
# the daemon's rails: lane 1 to 10.0.0.1), a push and a pull byte-exact, fenced by windows.
rm -f "$W/mod/f"
if "${C[@]}" --json --devices rxe0,rxe1 "$W/src/f" "$SERVER:data/" >"$OUT/rails_push.log" 2>&1 &&
	cmp -s "$W/src/f" "$W/mod/f" && grep -q '"fence":"windows"' "$OUT/rails_push.log"; then
	ok "rails push (rxe0,rxe1) byte-exact, fenced by memory windows"
else
	fail "rails push with windows ($OUT/rails_push.log)"
fi
grep -Eq "2 verbs lanes.*fenced by memory windows" "$W/d.log" &&
	ok "daemon with rails (rxe1, rxe0): 2 lanes fenced by memory windows" ||
	fail "daemon log: no 2 lanes fenced by memory windows"
rm -rf "$W/dst" && mkdir -p "$W/dst"
if "${C[@]}" -v --devices rxe0,rxe1 "$SERVER:data/g" "$W/dst/" >"$OUT/rails_pull.log" 2>&1 &&
	cmp -s "$W/mod/g" "$W/dst/g" &&
	grep -q "held slots fenced by memory windows" "$OUT/rails_pull.log"; then
	ok "rails pull (rxe0,rxe1) byte-exact, -v says memory windows"
else
	fail "rails pull with windows ($OUT/rails_pull.log)"
fi

# 3c''. A lane lost mid-copy (the test's lane kill after 4 slots, work in flight): the
# lost lane's windows are opened again on the other lane under fresh keys, its slots go
# there, byte-exact; a push (the daemon receives) and a pull (the client does).
head -c 8000123 /dev/urandom >"$W/src/k"
rm -f "$W/mod/k"
if RDMACP_TEST_KILL_LANES=1 "${C[@]}" --json --devices rxe0,rxe1 "$W/src/k" "$SERVER:data/" \
	>"$OUT/rails_kill_push.log" 2>&1 && cmp -s "$W/src/k" "$W/mod/k" &&
	grep -q '"fence":"windows"' "$OUT/rails_kill_push.log" &&
	grep -q "data lane 0 lost" "$OUT/rails_kill_push.log"; then
	ok "lane 0 lost mid-push with windows: $(grep -o 'data lane 0 lost[^"]*' "$OUT/rails_kill_push.log" | head -1); byte-exact"
else
	fail "lane lost mid-push with windows ($OUT/rails_kill_push.log)"
fi
rm -f "$W/dst/k"
if RDMACP_TEST_KILL_LANES=1 "${C[@]}" -v --devices rxe0,rxe1 "$SERVER:data/k" "$W/dst/" \
	>"$OUT/rails_kill_pull.log" 2>&1 && cmp -s "$W/src/k" "$W/dst/k" &&
	grep -q "held slots fenced by memory windows" "$OUT/rails_kill_pull.log" &&
	grep -q "data lane 0 lost" "$OUT/rails_kill_pull.log"; then
	ok "lane 0 lost mid-pull with windows: $(grep -o 'data lane 0 lost.*' "$OUT/rails_kill_pull.log" | head -1); byte-exact"
else
	fail "lane lost mid-pull with windows ($OUT/rails_kill_pull.log)"
fi
rm -f "$W/mod/k"

# 3d. A sender rewriting a fenced slot through the key its descriptor closed: the NIC
# refuses it (IBV_WC_REM_ACCESS_ERR), the session fails, nothing is committed.
rm -f "$W/mod/h"
cp "$W/src/f" "$W/src/h"
# The writer's IBV_WC_REM_ACCESS_ERR and the receiver's failed lane race to be the
# error said first (the receiver's comes as "peer: ... FLUSH_ERR"): either, exit 8.
RDMACP_TEST_MW_REWRITE=1 "${C[@]}" --lanes 1 "$W/src/h" "$SERVER:data/" >"$OUT/rewrite.log" 2>&1
rc=$?
if [ "$rc" -eq 8 ] && [ ! -e "$W/mod/h" ] &&
	grep -Eq "REM_ACCESS_ERR|peer: data transport: IBV_WC_WR_FLUSH_ERR" "$OUT/rewrite.log" &&
	[ -z "$(ls -A "$W/mod" | grep -v '^[fg]$')" ]; then
	ok "a fenced slot rewritten: $(grep -Eo 'IBV_WC_[A-Z_]+' "$OUT/rewrite.log" | head -1), exit 8, nothing committed"
else
	fail "rewrite of a fenced slot (rc $rc; $OUT/rewrite.log; $(ls -A "$W/mod" | tr '\n' ' '))"
fi

# 3e. The same rewrite with rails: the write through the closed key is refused
# (the lane it went on is lost), nothing of it lands; the slots of that lane go again
# on the other under fresh keys and the copy completes byte-exact.
rm -f "$W/mod/h"
RDMACP_TEST_MW_REWRITE=1 "${C[@]}" --devices rxe0,rxe1 "$W/src/h" "$SERVER:data/" \
	>"$OUT/rewrite_rails.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$W/src/h" "$W/mod/h" && grep -q "data lane . lost" "$OUT/rewrite_rails.log"; then
	ok "a fenced slot rewritten with rails: $(grep -o 'data lane . lost[^;]*' "$OUT/rewrite_rails.log" | head -1), byte-exact"
else
	fail "rewrite of a fenced slot with rails (rc $rc; $OUT/rewrite_rails.log)"
fi

# The daemon's session of the last client, stopped once data flows (its temp file past
# 1 MiB; SIGSTOP: it credits nothing, its kernel still answers for its queue pairs);
# 3 s later the client has used its credits (39 slots of 64 KiB at 2 MB/s: 1.3 s) and
# its writes completed.
stop_session() {
	for _ in $(seq 1 600); do
		[ -n "$(find "$W/mod" -name '.*.rdmacp.*' -size +1024k 2>/dev/null)" ] && break
		sleep 0.1
	done
	spid=$(pgrep -n -P "$DPID")
	kill -STOP "$spid"
	sleep 3
}
# wait_line FILE TEXT SECS: until TEXT is in FILE, at most SECS seconds.
wait_line() {
	for _ in $(seq 1 $(($3 * 10))); do
		grep -q "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# 3f. One lane with windows, its slots all waiting at a stopped daemon, then the wire
# cut (frames from 10.0.0.1 to 10.0.0.2 go to a next hop that does not exist; the link
# stays up): only the client's probe can find the queue pair dead, when its 7 tries of
# --ack-timeout 8 (1 ms; rxe's timers tick in jiffies) run out; the last lane lost ends
# the session (exit 8) while the daemon is still stopped; nothing committed.
head -c 20000123 /dev/urandom >"$W/src/p"
"${C[@]}" -v --lanes 1 --bwlimit 2M --ack-timeout 8 "$W/src/p" "$SERVER:data/" \
	>"$OUT/probe_one.log" 2>&1 &
cpid=$!
stop_session
ip route replace 10.0.0.2/32 via 10.0.0.99 dev veth0 onlink src 10.0.0.1 table 100
t0=$(date +%s.%N)
for _ in $(seq 1 150); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
t1=$(date +%s.%N)
kill -0 "$cpid" 2>/dev/null && kill -9 "$cpid"
wait "$cpid"
rc=$?
ip route replace 10.0.0.2/32 dev veth0 src 10.0.0.1 table 100
kill -CONT "$spid"
# The daemon's session ends too (its client gone) before the next one starts.
for _ in $(seq 1 300); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
if [ "$rc" -eq 8 ] && grep -q "its probe failed (IBV_WC_RETRY_EXC_ERR)" "$OUT/probe_one.log" &&
	[ ! -e "$W/mod/p" ]; then
	ok "one waiting windows lane, the wire cut: its probe failed (IBV_WC_RETRY_EXC_ERR), exit 8 $(echo "$t1 - $t0" | bc) s after the cut, the daemon stopped; nothing committed"
else
	fail "one waiting windows lane, the wire cut (rc $rc after $(echo "$t1 - $t0" | bc) s; $OUT/probe_one.log)"
fi

# 3g. A windows lane whose slots all wait at the receiver, its queue pair broken: the
# daemon's session is stopped, so the client has nothing out on either lane; then veth0
# goes down, which breaks lane 1 (rxe0, to the rail 10.0.0.1; rxe fails a request at
# once while its link is down). Only the client's probe (a zero-length write after a
# second of quiet) can find lane 1 dead now: it must say so within 6 s with the daemon
# still stopped. Then the daemon goes on, lane 1 is resolved and the copy completes on
# lane 0, byte-exact.
find "$W/mod" -name '.*.rdmacp.*' -delete
"${C[@]}" -v --devices rxe1,rxe0 --bwlimit 2M --ack-timeout 14 "$W/src/p" "$SERVER:data/" \
	>"$OUT/probe.log" 2>&1 &
cpid=$!
stop_session
ip link set veth0 down
t0=$(date +%s.%N)
wait_line "$OUT/probe.log" "its probe failed" 6 && seen=yes || seen=no
t1=$(date +%s.%N)
kill -CONT "$spid"
ip link set veth0 up
ip route replace 10.0.0.2/32 dev veth0 src 10.0.0.1 table 100
for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cpid" 2>/dev/null && kill -9 "$cpid"
wait "$cpid"
rc=$?
if [ "$seen" = yes ] && [ "$rc" -eq 0 ] && cmp -s "$W/src/p" "$W/mod/p" &&
	grep -q "data lane 1 lost" "$OUT/probe.log"; then
	ok "a waiting windows lane's QP broken: $(grep -o 'data lane 1: its probe failed[^;]*' "$OUT/probe.log" | head -1) $(echo "$t1 - $t0" | bc) s after the link went down, the daemon stopped; completed on lane 0, byte-exact"
else
	fail "a waiting windows lane's QP broken (probe seen: $seen, rc $rc; $OUT/probe.log)"
fi
# rxe0 made again (rxe connects no new lanes on a device whose link went down and up).
printf 'link del rxe0\nlink add rxe0 type rxe netdev veth0\n' | rdma -b - 2>>"$OUT/probe.log"

[ "$FAILS" -eq 0 ] && echo "mwfence: all checks passed" && exit 0
echo "mwfence: $FAILS check(s) failed"
exit 1
