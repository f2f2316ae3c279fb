#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Rails (PROTO_CAP_RAILS, LANE_DOWN), against a real daemon on loopback over
# tcp: a data lane taken down mid-transfer (the test hook RDMACP_TEST_KILL_LANES
# in the client, RDMACPD_TEST_KILL_LANES in the daemon: the lane's connection
# cut as if lost) while another is up does not end the session: what was in
# flight on it goes again on the others and the copy completes, byte for byte.
#   1. push and pull, the hook on the sender's side and on the receiver's,
#      --lanes 2 and 4 (one lane and three lanes killed), sealed (--encrypt)
#      and clear, a big file of many chunks and a tree of small packed files;
#      --partial and --delta pushes
#   2. every lane killed: the session fails (exit 8), nothing committed
#   3. a peer without the capability (RDMACP_TEST_CAPS_OFF, either end): a
#      lane lost fails the session as before, nothing committed
#   4. a lane that goes silent (the test hook RDMACP_TEST_LANE_TAMPER=stall,
#      RDMACPD_… in the daemon: lane 0 sends nothing more, ACKs included, so
#      nothing completes and nothing fails there): rails' watchdog takes it
#      down after a quarter of the idle timeout (5 s at least) and the copy
#      completes on the other lane; a push (the client's lane) and a pull
#      (the daemon's)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
RAILS_CAP=$((1 << 26))

setup_standard
mkdir -p "$T/src/tree"
head -c $((24 << 20)) /dev/urandom >"$T/src/big" || die "write big"
for d in 1 2 3; do
	mkdir -p "$T/src/tree/d$d"
	for i in $(seq 1 120); do
		head -c $((RANDOM % 6000 + 1)) /dev/urandom >"$T/src/tree/d$d/f$i"
	done
done

# A second daemon whose sessions kill their own lanes: RDMACPD_TEST_KILL_LANES=N.
# kill_daemon N [ENV...]: start it (port KPORT, log $T/k.log), replacing the last one.
KPID=
kill_daemon() {
	local n=$1
	shift
	[ -n "$KPID" ] && stop_daemon "$KPID"
	KPORT=$(free_port)
	write_conf "$T/k.conf" "$KPORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
	printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/k.conf"
	if [ "$n" -gt 0 ]; then
		env RDMACPD_TEST_KILL_LANES="$n" "$@" "$RDMACPD" --config "$T/k.conf" -v \
			>"$T/k.log" 2>&1 &
	else
		env "$@" "$RDMACPD" --config "$T/k.conf" -v >"$T/k.log" 2>&1 &
	fi
	KPID=$!
	DAEMON_PIDS+=("$KPID")
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$KPORT") 2>/dev/null && break
		sleep 0.05
	done
	KCLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt"
		--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$KPORT")
}

# lost_said N DESC: the client said N lanes were lost, and what went again.
lost_said() {
	local n
	n=$(grep -c "data lane [0-9]* lost; [0-9]* \(slots\|credits\) go again" "$T/err")
	[ "$n" -eq "$1" ] && pass "$2: $n lane(s) lost said ($(grep -o '[0-9]* [a-z]* go' "$T/err" |
		tr '\n' ' '))" || fail "$2: $n lost lanes said, wanted $1: $(head -5 "$T/err")"
}
same_tree() { diff -r "$1" "$2" >/dev/null; }
# No final name, no temp or partial left under the destination.
nothing_under() { [ -z "$(ls -A "$1" 2>/dev/null)" ]; }

# push LANES KILL ENC DESC: the client (sender) kills KILL of LANES lanes.
push_case() {
	local lanes=$1 kill=$2 enc=$3 desc=$4 dst=p_${1}_${2}_${3#--}
	RDMACP_TEST_KILL_LANES=$kill expect_rc 0 "push $desc: big file" \
		"${CLIENT[@]}" --transport tcp --lanes "$lanes" "$enc" -q \
		"$T/src/big" "$HOST:data/$dst.big"
	cmp -s "$T/src/big" "$T/mod/$dst.big" && pass "push $desc: big file intact" ||
		fail "push $desc: big file differs"
	lost_said "$kill" "push $desc"
	RDMACP_TEST_KILL_LANES=$kill expect_rc 0 "push $desc: tree of small files" \
		"${CLIENT[@]}" --transport tcp --lanes "$lanes" "$enc" -q -r --chunk-size 64K \
		"$T/src/tree" "$HOST:data/$dst.tree"
	lost_said "$kill" "push $desc, tree"
	same_tree "$T/src/tree" "$T/mod/$dst.tree" && pass "push $desc: tree intact" ||
		fail "push $desc: tree differs"
}

# pull LANES KILL ENC DESC: the daemon (sender) kills KILL of LANES lanes; or,
# with RECV=1, the client (receiver) does.
pull_case() {
	local lanes=$1 kill=$2 enc=$3 desc=$4 dst=$T/out_${1}_${2}_${3#--}_${RECV:-0}
	local env=()
	rm -rf "$dst"
	mkdir -p "$dst"
	cp "$T/src/big" "$T/mod/pull.big"
	rm -rf "$T/mod/pull.tree"
	cp -r "$T/src/tree" "$T/mod/pull.tree"
	[ "${RECV:-0}" = 1 ] && env=(RDMACP_TEST_KILL_LANES="$kill")
	expect_rc 0 "pull $desc: big file" env "${env[@]}" \
		"${KCLIENT[@]}" --transport tcp --lanes "$lanes" "$enc" -q \
		"$HOST:data/pull.big" "$dst/big"
	lost_said "$kill" "pull $desc"
	cmp -s "$T/src/big" "$dst/big" && pass "pull $desc: big file intact" ||
		fail "pull $desc: big file differs"
	expect_rc 0 "pull $desc: tree" env "${env[@]}" \
		"${KCLIENT[@]}" --transport tcp --lanes "$lanes" "$enc" -q -r --chunk-size 64K \
		"$HOST:data/pull.tree" "$dst/tree"
	lost_said "$kill" "pull $desc, tree"
	same_tree "$T/src/tree" "$dst/tree" && pass "pull $desc: tree intact" ||
		fail "pull $desc: tree differs"
}

# ---- 1. a lane lost, the copy completes on the others ------------------------
push_case 2 1 --encrypt "2 lanes, 1 killed by the sender, sealed"
push_case 2 1 --no-encrypt "2 lanes, 1 killed by the sender, clear"
push_case 4 3 --encrypt "4 lanes, 3 killed by the sender, sealed"
push_case 4 1 --no-encrypt "4 lanes, 1 killed by the sender, clear"

# --partial (journaled chunks) and --delta (unchanged chunks not sent): the same.
RDMACP_TEST_KILL_LANES=1 expect_rc 0 "push --partial, 1 of 2 lanes killed" \
	"${CLIENT[@]}" --transport tcp --lanes 2 -q --partial "$T/src/big" "$HOST:data/part.big"
lost_said 1 "push --partial"
cmp -s "$T/src/big" "$T/mod/part.big" && pass "push --partial: intact" ||
	fail "push --partial: differs"
cp "$T/src/big" "$T/src/big2"
# Every other MiB changed: half the chunks go, half are SAME.
for mb in 1 3 5 7 9 11 13 15 17 19 21 23; do
	printf 'changed %d' "$mb" | dd of="$T/src/big2" bs=1M seek="$mb" conv=notrunc status=none
done
cp "$T/src/big" "$T/mod/delta.big"
RDMACP_TEST_KILL_LANES=1 expect_rc 0 "push --delta, 1 of 2 lanes killed" \
	"${CLIENT[@]}" --transport tcp --lanes 2 -q --delta "$T/src/big2" "$HOST:data/delta.big"
lost_said 1 "push --delta"
cmp -s "$T/src/big2" "$T/mod/delta.big" && pass "push --delta: intact" ||
	fail "push --delta: differs"

# The daemon receives and kills its lanes (the receiver's side of a push).
kill_daemon 1
for enc in --encrypt --no-encrypt; do
	RDMACP_TEST_KILL_LANES=0 expect_rc 0 "push, the receiver kills 1 of 2 lanes ($enc)" \
		"${KCLIENT[@]}" --transport tcp --lanes 2 "$enc" -q "$T/src/big" \
		"$HOST:data/rk${enc}.big"
	lost_said 1 "push, receiver-side kill ($enc)"
	cmp -s "$T/src/big" "$T/mod/rk${enc}.big" && pass "push, receiver-side kill ($enc): intact" ||
		fail "push, receiver-side kill ($enc): differs"
	expect_rc 0 "push tree, the receiver kills 1 of 2 lanes ($enc)" \
		"${KCLIENT[@]}" --transport tcp --lanes 2 "$enc" -q -r --chunk-size 64K "$T/src/tree" \
		"$HOST:data/rk${enc}.tree"
	lost_said 1 "push tree, receiver-side kill ($enc)"
	same_tree "$T/src/tree" "$T/mod/rk${enc}.tree" &&
		pass "push tree, receiver-side kill ($enc): intact" ||
		fail "push tree, receiver-side kill ($enc): differs"
done

# Pulls: the daemon sends and kills (1 of 2, 3 of 4); then the client receives and kills.
pull_case 2 1 --encrypt "2 lanes, 1 killed by the sender, sealed"
pull_case 2 1 --no-encrypt "2 lanes, 1 killed by the sender, clear"
kill_daemon 3
pull_case 4 3 --encrypt "4 lanes, 3 killed by the sender, sealed"
kill_daemon 0
RECV=1 pull_case 2 1 --encrypt "2 lanes, 1 killed by the receiver, sealed"
RECV=1 pull_case 4 3 --no-encrypt "4 lanes, 3 killed by the receiver, clear"

# ---- 2. every lane lost: the session fails, nothing committed ---------------
rm -rf "$T/mod/all"
mkdir -p "$T/mod/all"
RDMACP_TEST_KILL_LANES=2 expect_rc 8 "push, both lanes killed: fails" \
	"${CLIENT[@]}" --transport tcp --lanes 2 -q "$T/src/big" "$HOST:data/all/big"
grep -q "every data lane is down" "$T/err" && pass "says every lane is down" ||
	fail "message: $(head -3 "$T/err")"
nothing_under "$T/mod/all" && pass "nothing committed (push)" || fail "left: $(ls -A "$T/mod/all")"
rm -rf "$T/pall" && mkdir -p "$T/pall"
RDMACP_TEST_KILL_LANES=4 expect_rc 8 "pull, all 4 lanes killed by the receiver: fails" \
	"${KCLIENT[@]}" --transport tcp --lanes 4 -q "$HOST:data/pull.big" "$T/pall/big"
nothing_under "$T/pall" && pass "nothing committed (pull)" || fail "left: $(ls -A "$T/pall")"

# ---- 3. a peer without rails: a lost lane fails the session as before -------
rm -rf "$T/mod/old" && mkdir -p "$T/mod/old"
RDMACP_TEST_CAPS_OFF=$RAILS_CAP RDMACP_TEST_KILL_LANES=1 expect_rc 8 \
	"push from a client without rails, 1 of 2 lanes killed: fails" \
	"${CLIENT[@]}" --transport tcp --lanes 2 -q "$T/src/big" "$HOST:data/old/big"
grep -q "every data lane is down" "$T/err" && fail "rails used without the capability" ||
	pass "the lane's failure ends it: $(grep -m1 -o 'data transport: [A-Z_]*' "$T/err")"
nothing_under "$T/mod/old" && pass "nothing committed (old client)" ||
	fail "left: $(ls -A "$T/mod/old")"
kill_daemon 0 RDMACP_TEST_CAPS_OFF=$RAILS_CAP
RDMACP_TEST_KILL_LANES=1 expect_rc 8 "push to a daemon without rails, 1 of 2 lanes killed: fails" \
	"${KCLIENT[@]}" --transport tcp --lanes 2 -q "$T/src/big" "$HOST:data/old/big2"
nothing_under "$T/mod/old" && pass "nothing committed (old daemon)" ||
	fail "left: $(ls -A "$T/mod/old")"

# ---- 4. a lane gone silent: the watchdog takes it down -----------------------
# The client's lane 0 (its idle timeout 60 s: 15 s); the daemon's idle timeout is 20 s: 5 s.
kill_daemon 0
rm -rf "$T/mod/silent" && mkdir -p "$T/mod/silent"
t0=$(date +%s)
RDMACP_TEST_LANE_TAMPER=stall expect_rc 0 "push, the client's lane 0 silent: completes" \
	"${KCLIENT[@]}" --transport tcp --lanes 2 --no-encrypt -q "$T/src/big" \
	"$HOST:data/silent/big"
t1=$(date +%s)
cmp -s "$T/src/big" "$T/mod/silent/big" && pass "push, lane 0 silent: intact" ||
	fail "push, lane 0 silent: differs"
grep -q "data lane 0: no completion for 1[5-9] s with work out; taken down" "$T/err" &&
	pass "the client's watchdog said: $(grep -m1 -o 'data lane 0: no completion.*' "$T/err") ($((t1 - t0)) s in all)" ||
	fail "push, lane 0 silent: no watchdog notice: $(head -4 "$T/err")"
lost_said 1 "push, lane 0 silent"
kill_daemon 0 RDMACPD_TEST_LANE_TAMPER=stall
rm -rf "$T/psilent" && mkdir -p "$T/psilent"
cp "$T/src/big" "$T/mod/pull.big"
expect_rc 0 "pull, the daemon's lane 0 silent: completes" \
	"${KCLIENT[@]}" --transport tcp --lanes 2 --encrypt -q "$HOST:data/pull.big" \
	"$T/psilent/big"
cmp -s "$T/src/big" "$T/psilent/big" && pass "pull, lane 0 silent: intact" ||
	fail "pull, lane 0 silent: differs"
lost_said 1 "pull, the daemon's lane 0 silent"
grep -q "data lane 0: no completion for [5-9] s with work out; taken down" "$T/k.log" &&
	pass "the daemon's watchdog said: $(grep -m1 -o 'data lane 0: no completion.*' "$T/k.log")" ||
	fail "pull, lane 0 silent: no watchdog notice in the daemon's log: $(grep -m3 lane "$T/k.log")"

finish
