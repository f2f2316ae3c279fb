#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Rails on Soft-RoCE, inside tests/rxe-vm/run (called from e2e.sh, or alone:
#   tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/rails.sh build /tmp/out'):
# a push whose two lanes leave from two devices (--devices rxe0,rxe1: lane 0
# from rxe0 = 10.0.0.1 over veth0, lane 1 from rxe1 = 10.0.0.2, the daemon's
# own device), and `ip link set veth0 down` in the middle of it, for 12 s and
# for 4 s: lane 0 fails (its retries run out, or rails' watchdog takes it
# down), LANE_DOWN goes over the control connection once the link is back,
# and the copy completes on lane 1, byte for byte. Then `rdma link del rxe0`
# mid-push: the device's lanes are lost, the copy completes on rxe1. rxe0 is
# made again (rdma link del/add) after each, so that what follows has a
# device whose lanes connect (rxe does not connect new lanes on a device
# whose link went down and up).
#
# usage: rails.sh BUILD_DIR OUT_DIR; exit 0 when every check passed.
set -u
B=${1:?usage: rails.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: rails.sh BUILD_DIR OUT_DIR}
PORT=7491
NAME=rails
# shellcheck source=tests/rxe-vm/rails-lib.sh
. "$(dirname "$0")/rails-lib.sh"
rails_daemon -v
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --devices rxe0,rxe1
	--qps 2 --chunk-size 64K)

head -c $((12 << 20)) /dev/urandom >"$W/big"
# A first push on both rails: they connect and carry data.
if "${C[@]}" "$W/big" "$SERVER:data/warm" >"$OUT/rails_warm.out" 2>"$OUT/rails_warm.err" &&
	cmp -s "$W/big" "$W/mod/warm"; then
	pass "push over rxe0 and rxe1: identical"
else
	fail "push over rxe0 and rxe1: $(head -3 "$OUT/rails_warm.err")"
fi

# down_push NAME SECONDS: veth0 down once a 6 s push is under way, for SECONDS; then up. Lane 0 is
# lost and the copy completes on lane 1. Lane 0's QP fails at once when rxe cannot send,
# else when its retries run out (--ack-timeout 14: 67 ms each; the daemon's are the
# system's); a QP that does neither (Soft-RoCE: a credit WRITE sent into the dead link can
# stay outstanding for good) is taken down by rails' watchdog (no completion for a quarter
# of the idle timeout: 15 s here). Taking veth0 down deletes the policy route 10.0.0.1 ->
# 10.0.0.2 through it (tests/rxe-vm/run); it is put back with the link, for the control
# connection (which shares the link here) and for what runs after this.
#
# With memory windows (the default here) a slot goes only on the lane its credit came
# on. Lane 0 is lost as with the copy's fence when the client has a slot there (rxe fails
# the post, or its WRITE stays outstanding for the watchdog); when all of lane 0's slots
# wait at the daemon for credits stuck in the dead link, the watchdog counts those as
# lane 0's work out (no credit for 15 s while lane 1 moves).
down_push() {
	local name=$1 secs=$2 cpid rc
	"${C[@]}" --bwlimit 2M --ack-timeout 14 "$W/big" "$SERVER:data/$name" \
		>"$OUT/rails_$name.out" 2>"$OUT/rails_$name.err" &
	cpid=$!
	flowing "$name"
	ip link set veth0 down
	sleep "$secs"
	veth0_up
	for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$cpid" 2>/dev/null; then
		kill -9 "$cpid"
	fi
	wait "$cpid"
	rc=$?
	if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/$name"; then
		pass "veth0 down $secs s mid-push: the copy completed on rxe1, identical (cmp)"
	else
		fail "veth0 down $secs s mid-push: rc $rc ($(head -3 "$OUT/rails_$name.err"))"
	fi
	if grep -q "data lane 0 lost" "$OUT/rails_$name.err"; then
		pass "the client said: $(grep -m1 -o 'data lane 0 lost.*' "$OUT/rails_$name.err")"
	else
		fail "veth0 down $secs s: no lane said lost: $(head -3 "$OUT/rails_$name.err")"
	fi
}
# rxe0 made again (rdma link del/add; rxe does not connect new lanes on a device whose
# link went down and up), up to 5 s for its port to be ACTIVE.
rxe0_renew() {
	rdma link del rxe0 2>/dev/null
	rdma link add rxe0 type rxe netdev veth0 2>>"$OUT/rails.log"
	for _ in $(seq 50); do
		read -r s0 </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
		[ "${s0:-}" = "4: ACTIVE" ] && break
		sleep 0.1
	done
}
down_push down12 12
rxe0_renew
down_push down 4
rxe0_renew

# rxe0 removed mid-push (issue: a NIC lost, not the copy): its async event, CM event or
# descriptors say so; the lanes on it fail with their work flushed from our own
# bookkeeping (a dead device's CQ never flushes), and the copy completes on rxe1.
# Soft-RoCE cannot let go of a device a process still has open, so `rdma link del`
# returns only once the client has let go of it (its lanes there lost and drained;
# readd.sh checks that this happens mid-copy): it runs in the background.
"${C[@]}" --bwlimit 2M "$W/big" "$SERVER:data/del" >"$OUT/rails_del.out" \
	2>"$OUT/rails_del.err" &
cpid=$!
flowing del
rdma link del rxe0 2>>"$OUT/rails.log" &
delpid=$!
for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$cpid" 2>/dev/null; then
	kill -9 "$cpid"
fi
wait "$cpid"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/del" &&
	grep -q "data lane 0 lost" "$OUT/rails_del.err"; then
	pass "rdma link del rxe0 mid-push: $(grep -m1 -o 'data lane 0 lost.*' "$OUT/rails_del.err"); completed on rxe1, identical"
else
	fail "rdma link del rxe0 mid-push: rc $rc ($(head -4 "$OUT/rails_del.err"))"
fi
for _ in $(seq 1 100); do kill -0 "$delpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$delpid" 2>/dev/null && fail "rdma link del rxe0 still waits after the client exited"
wait "$delpid"

# rxe0 made again for what runs after this.
rxe0_renew
if "${C[@]}" "$W/big" "$SERVER:data/again" >"$OUT/rails_again.out" 2>"$OUT/rails_again.err" &&
	cmp -s "$W/big" "$W/mod/again"; then
	pass "rxe0 made again: a push over both rails works again"
else
	fail "rxe0 made again: $(head -3 "$OUT/rails_again.err")"
fi

say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
