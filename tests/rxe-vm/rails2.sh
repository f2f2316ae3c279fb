#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Daemon rails on Soft-RoCE, inside tests/rxe-vm/run (called from e2e.sh after rails.sh,
# or alone: tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/rails2.sh build /tmp/out').
# The daemon listens on 10.0.0.2 (rxe1) with 'rails = 10.0.0.1' (rxe0): a client with
# --devices rxe0,rxe1 --qps 2 connects lane 0 from rxe0 to 10.0.0.2 and lane 1 from rxe1
# to 10.0.0.1, so the daemon's lanes sit on both its devices. Proved with `rdma res show
# qp` (the daemon's QPs, by device) during a slow push, against the same push from a
# client without the capability (all the daemon's QPs on rxe1, as before). Then a push
# and a pull byte for byte; a fatal QP event on one lane (test hook); the daemon's rail
# lost mid-push (lane 1 from rxe0 to the rail 10.0.0.1 on rxe0, lane 0 from rxe1 to
# 10.0.0.2 on rxe1; veth0 down for 4 s): lane 1 is lost, the copy completes on lane 0.
# rxe0 is made again at the end.
#
# usage: rails2.sh BUILD_DIR OUT_DIR; exit 0 when every check passed.
set -u
B=${1:?usage: rails2.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: rails2.sh BUILD_DIR OUT_DIR}
PORT=7493
NAME=rails2
# shellcheck source=tests/rxe-vm/rails-lib.sh
. "$(dirname "$0")/rails-lib.sh"
rails_daemon -vv "rails = 10.0.0.1"
mkdir -p "$W/pull"
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --qps 2 --chunk-size 64K
	-v)
head -c $((12 << 20)) /dev/urandom >"$W/big"

# The daemon's QPs by device, seen every 0.5 s during a 6 s push: "rxe0 rxe1" (sorted, unique).
daemon_qp_devices() { # name, env for the client...
	local name=$1 cpid devs
	shift
	env "$@" "${C[@]}" --devices rxe0,rxe1 --bwlimit 2M "$W/big" "$SERVER:data/$name" \
		>"$OUT/rails2_$name.out" 2>"$OUT/rails2_$name.err" &
	cpid=$!
	: >"$OUT/rails2_${name}_qp.txt"
	while kill -0 "$cpid" 2>/dev/null; do
		rdma res show qp >>"$OUT/rails2_${name}_qp.txt" 2>&1
		sleep 0.5
	done
	devs=$(grep -w rdmacpd "$OUT/rails2_${name}_qp.txt" | grep -o 'link rxe[01]' |
		sed 's/link //' | sort -u | tr '\n' ' ')
	wait "$cpid"
	echo "$? ${devs% }"
}

# A client without the capability: as before, every daemon lane on rxe1 (10.0.0.2).
daemon_qp_devices norails RDMACP_TEST_CAPS_OFF=0x8000000 >"$W/res"
read -r rc devs <"$W/res"
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/norails" && [ "$devs" = "rxe1" ]; then
	pass "client without daemon rails: identical, the daemon's lanes on rxe1 only"
else
	fail "client without daemon rails: rc $rc, daemon QPs on '$devs' ($(head -3 "$OUT/rails2_norails.err"))"
fi

# With it: the daemon's lanes on both its devices.
daemon_qp_devices rails >"$W/res"
read -r rc devs <"$W/res"
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/rails" && [ "$devs" = "rxe0 rxe1" ]; then
	pass "push with daemon rails: identical, the daemon's lanes on rxe0 and rxe1"
else
	fail "push with daemon rails: rc $rc, daemon QPs on '$devs' ($(head -3 "$OUT/rails2_rails.err"))"
fi
if grep -q "daemon rails: lanes over 2 daemon addresses" "$OUT/rails2_rails.err"; then
	pass "the client said: $(grep -m1 -o 'daemon rails: .*' "$OUT/rails2_rails.err")"
else
	fail "the client did not say it took the daemon's rails"
fi

if "${C[@]}" --devices rxe0,rxe1 "$SERVER:data/rails" "$W/pull/" >"$OUT/rails2_pull.out" \
	2>"$OUT/rails2_pull.err" && cmp -s "$W/big" "$W/pull/rails" &&
	grep -q "lanes over 2 daemon addresses" "$OUT/rails2_pull.err"; then
	pass "pull with daemon rails: identical"
else
	fail "pull with daemon rails: $(head -3 "$OUT/rails2_pull.err")"
fi

# A fatal async event on one lane's QP (the hook RDMACP_TEST_QP_FATAL=1: lane 1's QP
# fails through the event's path once 64 completions are in): with rails that lane is
# lost and the copy completes on the other; without them (a peer without LANE_DOWN,
# capability 0x4000000) the session fails as before, exit 8, nothing committed.
if RDMACP_TEST_QP_FATAL=1 "${C[@]}" --devices rxe0,rxe1 "$W/big" "$SERVER:data/fatal" \
	>"$OUT/rails2_fatal.out" 2>"$OUT/rails2_fatal.err" && cmp -s "$W/big" "$W/mod/fatal" &&
	grep -q "data lane 1 lost" "$OUT/rails2_fatal.err"; then
	pass "QP_FATAL on lane 1: $(grep -m1 -o 'data lane 1 lost.*' "$OUT/rails2_fatal.err"); identical"
else
	fail "QP_FATAL on lane 1 with rails: $(grep -m3 -e lost -e rror -e failed "$OUT/rails2_fatal.err")"
fi
RDMACP_TEST_QP_FATAL=1 RDMACP_TEST_CAPS_OFF=0x4000000 "${C[@]}" --devices rxe0,rxe1 "$W/big" \
	"$SERVER:data/fatal_old" >"$OUT/rails2_fatal_old.out" 2>"$OUT/rails2_fatal_old.err"
rc=$?
if [ "$rc" -eq 8 ] && ! [ -e "$W/mod/fatal_old" ] &&
	grep -q "lane 1: rxe[01]: local work queue catastrophic error" "$OUT/rails2_fatal_old.err"; then
	pass "QP_FATAL on lane 1 without rails: exit 8, nothing committed, '$(grep -m1 -o 'lane 1: rxe.*' "$OUT/rails2_fatal_old.err")'"
else
	fail "QP_FATAL on lane 1 without rails: rc $rc ($(head -3 "$OUT/rails2_fatal_old.err"))"
fi

# The daemon's rail lost mid-push: --devices rxe1,rxe0, so lane 0 goes from rxe1 to the
# daemon's 10.0.0.2 (rxe1) and lane 1 from rxe0 to its rail 10.0.0.1 (rxe0). veth0 down
# once data flows in a 6 s push (flowing: a fixed sleep could come before the lanes, on a
# loaded machine), for 4 s: rxe0, which carries the rail, can send nothing, lane 1's QPs
# fail (the client's at once or when its retries run out, --ack-timeout 14), and the
# copy completes on lane 0 inside rxe1. Then rxe0 is made again, as rails.sh does.
# With memory windows (the default), as in rails.sh's down_push: lane 1's slots waiting at
# the daemon for credits count as its work out for rails' watchdog too.
"${C[@]}" --devices rxe1,rxe0 --bwlimit 2M --ack-timeout 14 "$W/big" "$SERVER:data/down" \
	>"$OUT/rails2_down.out" 2>"$OUT/rails2_down.err" &
cpid=$!
flowing down
ip link set veth0 down
sleep 4
veth0_up
for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$cpid" 2>/dev/null; then
	kill -9 "$cpid"
fi
wait "$cpid"
rc=$?
# With windows the client may have nothing posted on lane 1 while veth0 is down (its
# slots wait at the daemon for credits), so the daemon's credits are retried through the
# 4 s outage and the lane rides it out: identical with no lane lost is right too.
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/down" &&
	grep -q "data lane 1 lost" "$OUT/rails2_down.err"; then
	pass "the daemon's rail lost mid-push: $(grep -m1 -o 'data lane 1 lost.*' "$OUT/rails2_down.err"); completed on rxe1, identical"
elif [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/down" && ! grep -q "lost" "$OUT/rails2_down.err"; then
	pass "the daemon's rail down 4 s mid-push: ridden out on both lanes (no lane lost), identical"
else
	fail "the daemon's rail lost mid-push: rc $rc ($(grep -m3 -e lost -e rror -e failed "$OUT/rails2_down.err"))"
fi

# rxe0 made again for what runs after this (rxe connects no new lanes on a device whose
# link went down and up).
printf 'link del rxe0\nlink add rxe0 type rxe netdev veth0\n' | rdma -b - 2>>"$OUT/rails2.log"
for _ in $(seq 50); do
	read -r s0 </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
	[ "${s0:-}" = "4: ACTIVE" ] && break
	sleep 0.1
done

say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
