#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fan-out over verbs lanes, inside tests/rxe-vm/run (t_relay_vm, or alone:
#   tests/rxe-vm/run bash -c 'cd SRC && tests/rxe-vm/relay.sh build /tmp/out'):
# a chain of two hops, the client on 10.0.0.1 pushing to daemon A on
# 10.0.0.2 (rxe1), whose relay child pushes on to daemon B on 10.0.0.1
# (rxe0), every hop's lanes verbs. A 12 MiB file and a small tree, in clear
# and sealed: byte-exact at both hops, one copy's bytes from the client, B's
# session relayed by A's relay identity for the client and over verbs lanes.
#
# usage: relay.sh BUILD_DIR OUT_DIR; exit 0 when every check passed.
set -u
B=${1:?usage: relay.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: relay.sh BUILD_DIR OUT_DIR}
PORT=7493
RDMACP=$B/rdmacp
RDMACPD=$B/rdmacpd
W=$(mktemp -d /tmp/rdmacp-relay.XXXXXX)
FAILS=0
PIDS=()

mkdir -p "$OUT"
say() { echo "relay: $*"; echo "relay: $*" >>"$OUT/relay.log"; }
pass() { say "ok: $*"; }
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); }
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	cp "$W"/d*.log "$OUT/" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

"$RDMACP" certs init "$W/certs" --host 10.0.0.1 --host 10.0.0.2 >/dev/null 2>&1 ||
	{ fail "certs init"; exit 1; }
"$RDMACP" certs issue "$W/certs" --client relay >/dev/null 2>&1 || { fail "certs issue"; exit 1; }

# daemon NAME ADDRESS: its config, module data under $W/NAME, up and listening.
daemon() {
	local n=$1 a=$2 i
	mkdir -p "$W/$n"
	cat >"$W/$n.conf" <<-CONF
		[global]
		listen = $a:$PORT
		cert = $W/certs/server.crt
		key = $W/certs/server.key
		ca = $W/certs/ca.crt
		relay certificate = $W/certs/relay.crt
		relay key = $W/certs/relay.key
		relay to = 10.0.0.*
		handshake timeout = 10
		idle timeout = 60
		lanes from other addresses = yes

		[data]
		path = $W/$n
		allow = client
		relay = yes
		relay from = relay
		uid = $(id -u)
		gid = $(id -g)
	CONF
	"$RDMACPD" --config "$W/$n.conf" -v >"$W/d$n.log" 2>&1 &
	PIDS+=("$!")
	for i in $(seq 1 100); do
		(exec 4<>"/dev/tcp/$a/$PORT") 2>/dev/null && return 0
		sleep 0.1
	done
	fail "daemon $n did not listen on $a:$PORT"
	exit 1
}
daemon A 10.0.0.2
daemon B 10.0.0.1

C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --chunk-size 256K --json)
head -c $((12 << 20)) /dev/urandom >"$W/big"
mkdir -p "$W/tree/sub"
for i in 1 2 3; do head -c $((i * 50000)) /dev/urandom >"$W/tree/sub/f$i"; done
ln -s sub/f1 "$W/tree/link"

# chain NAME [OPTIONS...]: the file and the tree through A to B; every check on both hops.
chain() {
	local name=$1 rc h sent
	shift
	"${C[@]}" "$@" -r -p "$W/big" "$W/tree" "10.0.0.2:data/$name/" "10.0.0.1:data/$name/" \
		>"$OUT/$name.json" 2>"$OUT/$name.err"
	rc=$?
	[ "$rc" -eq 0 ] && pass "$name: exit 0" || fail "$name: exit $rc: $(tail -3 "$OUT/$name.err")"
	[ "$(jq -r 'select(.event == "summary") | [.destinations[] | .status] | join(" ")' \
		"$OUT/$name.json")" = "copied copied" ] && pass "$name: both destinations copied (--json)" ||
		fail "$name: destinations: $(jq -c 'select(.event == "summary") | .destinations' "$OUT/$name.json")"
	for h in A B; do
		if cmp -s "$W/big" "$W/$h/$name/big" && diff -r "$W/tree" "$W/$h/$name/tree" >/dev/null; then
			pass "$name: hop $h has the file and the tree, byte-exact"
		else
			fail "$name: hop $h differs or lacks them"
		fi
	done
	sent=$(jq -r 'select(.event == "summary") | .bytes' "$OUT/$name.json")
	[ "${sent:-0}" -eq $((12 * 1048576 + 50000 * 6)) ] && pass "$name: one copy's bytes from the client" ||
		fail "$name: the client sent ${sent:-?} bytes"
	RUNS=$((RUNS + 1))
	# One more session at B for each run: over verbs lanes, done, relayed by A for the client.
	[ "$(grep -c 'push to data: [0-9]* verbs lanes' "$W/dB.log")" -eq "$RUNS" ] &&
		[ "$(grep -c 'push to data done: .*(relayed by relay for client)' "$W/dB.log")" -eq "$RUNS" ] &&
		pass "$name: B's session was relayed by A, over verbs lanes" ||
		fail "$name: B's log: $(grep -m3 'push to' "$W/dB.log")"
}
RUNS=0
chain clear --no-encrypt
chain sealed --encrypt

say "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
