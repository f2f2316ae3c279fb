#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Rails on Soft-RoCE, inside tests/rxe-vm/run (called from e2e.sh, or alone:
#   tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/rails.sh build /tmp/out'):
# a push whose two lanes leave from two devices (--devices rxe0,rxe1: lane 0
# from rxe0 = 10.0.0.1 over veth0, lane 1 from rxe1 = 10.0.0.2, the daemon's
# own device), and `ip link set veth0 down` in the middle of it: lane 0's QP
# fails (its retries run out), LANE_DOWN goes over the control connection
# once the link is back, and the copy completes on lane 1, byte for byte.
# Then rxe0 is made again (rdma link del/add), so that later sections have
# a device whose lanes connect (rxe does not connect new lanes on a device
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

# veth0 down 3 s into a 6 s push, for 4 s; then up. Lane 0's QP fails: at once when rxe
# cannot send, else when its retries run out (--ack-timeout 14: 67 ms each; the system's
# may be none). Taking veth0 down deletes the policy route 10.0.0.1 -> 10.0.0.2 through it
# (tests/rxe-vm/run); it is put back with the link, for the control connection and for
# what runs after this.
"${C[@]}" --bwlimit 2M --ack-timeout 14 "$W/big" "$SERVER:data/down" >"$OUT/rails_down.out" \
	2>"$OUT/rails_down.err" &
cpid=$!
sleep 3
ip link set veth0 down
sleep 4
veth0_up
for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$cpid" 2>/dev/null; then
	kill -9 "$cpid"
fi
wait "$cpid"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/down"; then
	pass "veth0 down mid-push: the copy completed on rxe1, identical (cmp)"
else
	fail "veth0 down mid-push: rc $rc ($(head -3 "$OUT/rails_down.err"))"
fi
if grep -q "data lane 0 lost" "$OUT/rails_down.err"; then
	pass "the client said: $(grep -m1 -o 'data lane 0 lost.*' "$OUT/rails_down.err")"
else
	fail "no lane said lost: $(head -3 "$OUT/rails_down.err")"
fi

# rxe0 made again for what runs after this.
printf 'link del rxe0\nlink add rxe0 type rxe netdev veth0\n' | rdma -b - 2>>"$OUT/rails.log"
for _ in $(seq 50); do
	read -r s0 </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
	[ "${s0:-}" = "4: ACTIVE" ] && break
	sleep 0.1
done
if "${C[@]}" "$W/big" "$SERVER:data/again" >"$OUT/rails_again.out" 2>"$OUT/rails_again.err" &&
	cmp -s "$W/big" "$W/mod/again"; then
	pass "rxe0 made again: a push over both rails works again"
else
	fail "rxe0 made again: $(head -3 "$OUT/rails_again.err")"
fi

say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
