#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The control connection on a management address, inside tests/rxe-vm/run (called from
# e2e.sh after rails2.sh, or alone: tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/rails3.sh
# build /tmp/out'). The daemon listens on 10.9.0.2, an address put on lo (no RDMA device:
# rdma_cm cannot bind it), with 'rails = 10.0.0.2' (rxe1). A client with
# --devices rxe0,rxe1 reaches 10.9.0.2 for the control connection, and the daemon puts
# every lane on its rail (OPEN_OK's rails flag, capability 0x4000000000): lane 0 from rxe0
# and lane 1 from rxe1, both to 10.0.0.2. Then:
#   - a push and a pull, byte for byte;
#   - veth0 down for 20 s once data flows: lane 0 is lost and, the control connection
#     not sharing its path, the copy completes on lane 1 while veth0 is still down;
#   - a client without the capability: no lanes on the address it reached, so verbs is
#     refused there (as before this change), nothing committed.
#
# usage: rails3.sh BUILD_DIR OUT_DIR; exit 0 when every check passed.
set -u
B=${1:?usage: rails3.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: rails3.sh BUILD_DIR OUT_DIR}
PORT=7495
NAME=rails3
SERVER=10.9.0.2
ip addr add "$SERVER/32" dev lo 2>/dev/null
# shellcheck source=tests/rxe-vm/rails-lib.sh
. "$(dirname "$0")/rails-lib.sh"
rails_daemon -vv "rails = 10.0.0.2"
mkdir -p "$W/pull"
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --devices rxe0,rxe1
	--qps 2 --chunk-size 64K -v)
head -c $((12 << 20)) /dev/urandom >"$W/big"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# 1. Push and pull with every lane on the rail.
if "${C[@]}" "$W/big" "$SERVER:data/push" >"$OUT/rails3_push.out" 2>"$OUT/rails3_push.err" &&
	cmp -s "$W/big" "$W/mod/push"; then
	pass "push, control on $SERVER, lanes on the rail: identical"
else
	fail "push, control on $SERVER: $(head -3 "$OUT/rails3_push.err")"
fi
if grep -q "none on the address reached" "$OUT/rails3_push.err"; then
	pass "the client said: $(grep -m1 -o 'daemon rails: .*' "$OUT/rails3_push.err")"
else
	fail "the client did not say the rails only: $(grep -m1 'rails' "$OUT/rails3_push.err")"
fi
grep -q "on the rails only" "$W/d.log" && pass "the daemon said: lanes on the rails only" ||
	fail "the daemon's log does not say the rails only"
if "${C[@]}" "$SERVER:data/push" "$W/pull/back" >"$OUT/rails3_pull.out" \
	2>"$OUT/rails3_pull.err" && cmp -s "$W/big" "$W/pull/back"; then
	pass "pull, control on $SERVER, lanes on the rail: identical"
else
	fail "pull, control on $SERVER: $(head -3 "$OUT/rails3_pull.err")"
fi

# 2. veth0 down 20 s once data flows: the copy completes before the link is back.
"${C[@]}" --bwlimit 2M --ack-timeout 14 "$W/big" "$SERVER:data/down" >"$OUT/rails3_down.out" \
	2>"$OUT/rails3_down.err" &
cpid=$!
for _ in $(seq 1 600); do
	[ -n "$(find "$W/mod" -maxdepth 1 -name '.down.*' -size +1024k 2>/dev/null)" ] && break
	sleep 0.1
done
t0=$(now)
ip link set veth0 down
for _ in $(seq 1 200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
t1=$(now)
veth0_up
for _ in $(seq 1 600); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cpid" 2>/dev/null && kill -9 "$cpid"
wait "$cpid"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/down" &&
	grep -q "data lane 0 lost" "$OUT/rails3_down.err"; then
	pass "veth0 down mid-push: $(grep -m1 -o 'data lane 0 lost.*' "$OUT/rails3_down.err"); identical"
else
	fail "veth0 down mid-push: rc $rc ($(head -4 "$OUT/rails3_down.err"))"
fi
if awk -v d="$(secs "$t0" "$t1")" 'BEGIN { exit !(d < 19.5) }'; then
	pass "the copy ended $(secs "$t0" "$t1") s into the 20 s outage: control did not wait for veth0"
else
	fail "the copy outlived the 20 s outage of veth0 ($(secs "$t0" "$t1") s)"
fi
# rxe does not connect new lanes on a device whose link went down and up: make it again.
rdma link del rxe0 2>/dev/null
rdma link add rxe0 type rxe netdev veth0 2>>"$OUT/$NAME.log"
for _ in $(seq 50); do
	read -r s0 </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
	[ "${s0:-}" = "4: ACTIVE" ] && break
	sleep 0.1
done

# 3. A client that does not know rails-only lanes: verbs cannot go to the address reached.
mkdir -p "$W/mod/old"
RDMACP_TEST_CAPS_OFF=0x4000000000 "${C[@]}" "$W/big" "$SERVER:data/old/" \
	>"$OUT/rails3_old.out" 2>"$OUT/rails3_old.err"
rc=$?
if [ "$rc" -ne 0 ] && grep -q "no RDMA device on the daemon" "$OUT/rails3_old.err" &&
	[ -z "$(ls -A "$W/mod/old")" ]; then
	pass "a client without the capability: refused (rc $rc, '$(grep -m1 -o 'no RDMA device.*' "$OUT/rails3_old.err")'), nothing committed"
else
	fail "a client without the capability: rc $rc ($(head -3 "$OUT/rails3_old.err"))"
fi

ip addr del "$SERVER/32" dev lo 2>/dev/null
say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
