#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A device that goes and comes back, on Soft-RoCE, inside tests/rxe-vm/run (called from
# e2e.sh after rails3.sh, or alone:
#   tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/readd.sh build /tmp/out').
# The daemon listens on 10.0.0.2 (rxe1) with 'rails = 10.0.0.1' (rxe0); the client
# pushes with --devices rxe1,rxe0 --qps 2: lane 0 from rxe1 to 10.0.0.2, lane 1 from rxe0
# to the rail 10.0.0.1, so both ends have lane 1 on rxe0. `rdma link del rxe0` mid-push:
# both ends lose lane 1 and let go of everything they had on rxe0, so the removal
# returns while the copy still runs (Soft-RoCE waits for every process that has the
# device open); `rdma link add` brings rxe0 back mid-push, and the copy completes on
# rxe1, byte for byte; with memory windows and with the copy's fence. Lane 1 is not
# connected again in that session (the protocol has no way to: docs/ARCHITECTURE.md);
# the same daemon's next session has its lane on the new rxe0 again, seen in
# `rdma res show qp`.
#
# usage: readd.sh BUILD_DIR OUT_DIR; exit 0 when every check passed.
set -u
B=${1:?usage: readd.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: readd.sh BUILD_DIR OUT_DIR}
PORT=7497
NAME=readd
# shellcheck source=tests/rxe-vm/rails-lib.sh
. "$(dirname "$0")/rails-lib.sh"
rails_daemon -vv "rails = 10.0.0.1"
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --qps 2 --chunk-size 64K
	--devices rxe1,rxe0 -v)
head -c $((16 << 20)) /dev/urandom >"$W/big"

# rxe0 added back (the same netdev), up to 5 s for its port to be ACTIVE.
rxe0_add() {
	rdma link add rxe0 type rxe netdev veth0 2>>"$OUT/readd.log"
	for _ in $(seq 50); do
		read -r s0 </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
		[ "${s0:-}" = "4: ACTIVE" ] && return 0
		sleep 0.1
	done
	return 1
}

# del_push NAME ENV...: an 8 s push; once 1 MiB is in its temp file (both lanes carry
# data), rxe0 removed; once the removal returned, rxe0 added back; the push completes.
del_push() {
	local name=$1 cpid delpid rc
	shift
	env "$@" "${C[@]}" --bwlimit 2M "$W/big" "$SERVER:data/$name" >"$OUT/readd_$name.out" \
		2>"$OUT/readd_$name.err" &
	cpid=$!
	for _ in $(seq 1 600); do
		[ -n "$(find "$W/mod" -maxdepth 1 -name ".$name.*" -size +1024k 2>/dev/null)" ] && break
		sleep 0.1
	done
	rdma link del rxe0 2>>"$OUT/readd.log" &
	delpid=$!
	# The removal returns once no process has rxe0 open: both ends let go of it mid-copy.
	for _ in $(seq 1 300); do kill -0 "$delpid" 2>/dev/null || break; sleep 0.1; done
	if ! kill -0 "$delpid" 2>/dev/null && kill -0 "$cpid" 2>/dev/null; then
		pass "$name: rdma link del rxe0 returned mid-push: client and daemon let go of it"
		if rxe0_add && kill -0 "$cpid" 2>/dev/null; then
			pass "$name: rxe0 added back while the push still runs"
		else
			fail "$name: rxe0 not added back (ACTIVE) while the push runs"
		fi
	else
		fail "$name: rdma link del rxe0 still waits (or the push ended first): a dead context kept"
	fi
	for _ in $(seq 1 1200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$cpid" 2>/dev/null && kill -9 "$cpid"
	wait "$cpid"
	rc=$?
	if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/$name" &&
		grep -q "data lane 1 lost" "$OUT/readd_$name.err"; then
		pass "$name: rxe0 gone and back mid-push: $(grep -m1 -o 'data lane 1 lost.*' "$OUT/readd_$name.err"); completed on rxe1, identical"
	else
		fail "$name: rxe0 gone and back mid-push: rc $rc ($(grep -m3 -e lost -e rror -e failed "$OUT/readd_$name.err"))"
	fi
	for _ in $(seq 1 100); do kill -0 "$delpid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$delpid" 2>/dev/null; then
		fail "$name: rdma link del rxe0 still waits after the push"
		kill -9 "$delpid"
	fi
	wait "$delpid"
	[ -e /sys/class/infiniband/rxe0 ] || rxe0_add || fail "$name: rxe0 could not be added back"
}
# With memory windows (the default here: their windows on rxe0 go with it), then with
# the copy's fence (the client without capability 36: WRITE WITH IMMEDIATE lanes).
del_push del
del_push delcopy RDMACP_TEST_CAPS_OFF=0x1000000000

# The same daemon's next session: its lane 1 on the new rxe0 (rdma res show qp every
# 0.5 s during a 3 s push), nothing lost, identical.
"${C[@]}" --bwlimit 4M "$W/big" "$SERVER:data/again" >"$OUT/readd_again.out" \
	2>"$OUT/readd_again.err" &
cpid=$!
: >"$OUT/readd_again_qp.txt"
while kill -0 "$cpid" 2>/dev/null; do
	rdma res show qp >>"$OUT/readd_again_qp.txt" 2>&1
	sleep 0.5
done
wait "$cpid"
rc=$?
devs=$(grep -w rdmacpd "$OUT/readd_again_qp.txt" | grep -o 'link rxe[01]' | sed 's/link //' |
	sort -u | tr '\n' ' ')
if [ "$rc" -eq 0 ] && cmp -s "$W/big" "$W/mod/again" && [ "${devs% }" = "rxe0 rxe1" ] &&
	! grep -q "lost" "$OUT/readd_again.err"; then
	pass "rxe0 back: the daemon's next session has its lane there (QPs on ${devs% }), identical"
else
	fail "rxe0 back: rc $rc, daemon QPs on '${devs% }' ($(grep -m3 -e lost -e rror -e failed "$OUT/readd_again.err"))"
fi

say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
