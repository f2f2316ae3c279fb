#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Pre-authentication slots (issue 8 item 10, SECURITY.md G47). Before the
# fix, 16 silent TCP connections from 127.0.0.2..5 (4 each: under "max
# connections per host") took every one of "max connections = 16" until the
# handshake deadline, and `rdmacp ping` failed with exit 11. Now connections
# still in TLS/HELLO are capped apart ("max unauthenticated", default half of
# "max connections"; "max unauthenticated per host", default "max connections per host"), the rest is
# a reserve for authenticated sessions, and the handshake deadline covers
# TLS and HELLO together (a HELLO dripped byte by byte is cut off too).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
source "$(dirname "$0")/lib.sh"

RAW=$HERE/rawclient.py
command -v python3 >/dev/null || skip "python3 not found"
python3 -c 'import ssl; ssl.TLSVersion.TLSv1_3' 2>/dev/null || skip "python3 ssl without TLS 1.3"
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.5", 0))' 2>/dev/null ||
	skip "cannot bind 127.0.0.2..5 (no 127.0.0.0/8 on lo)"

HS=3 # handshake timeout of the daemon under test
PORT=$(free_port)
make_certs "$T/certs"
CERTS=$T/certs
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$CERTS" "handshake timeout = $HS" "idle timeout = 20" \
	"max connections = 16"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$CERTS/client.crt" --key "$CERTS/client.key"
	--ca "$CERTS/ca.crt" -P "$PORT")
raw() {
	python3 "$RAW" --ca "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key" \
		--port "$PORT" "$@"
}

# Until every session forked so far (start_daemon's probe included) has ended.
wait_idle() {
	local started ended
	for _ in $(seq 1 100); do
		started=$(grep -c "session [0-9]* from .* started" "$T/d.log")
		ended=$(grep -c "session [0-9]* from .* \(ended\|exited\|killed\)" "$T/d.log")
		[ "$started" -eq "$ended" ] && return 0
		sleep 0.05
	done
	fail "daemon still has $((started - ended)) session(s) before the test"
}

# ---- 1. 16 silent connections from four addresses, then ping ----
wait_idle
mark=$(wc -l <"$T/d.log")
BG=()
for src in 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5; do
	for i in 1 2 3 4; do
		# Each is either refused at once or held and closed by the deadline.
		raw --tcp --source "$src" --expect closed --max-close "$((HS + 2))" --timeout 10 \
			>"$T/silent-$src-$i.out" 2>&1 &
		BG+=("$!:$src-$i")
	done
done
# Until the daemon has seen all 16 (forked or refused them).
for _ in $(seq 1 100); do
	seen=$(tail -n +"$((mark + 1))" "$T/d.log" |
		grep -c "session [0-9]* from 127\.0\.0\.[2-5]:.* started\|refusing connection from 127\.0\.0\.[2-5]")
	[ "$seen" -ge 16 ] && break
	sleep 0.05
done
# Connections the daemon's side still holds open (ESTABLISHED at our port).
held_now() {
	ss -Htn state established "( sport = :$PORT )" 2>/dev/null | grep -c " 127\.0\.0\.[2-5]:"
}
sleep 0.2
held=$(held_now)
echo "    16 silent connections: $held held by the daemon"
t0=$(date +%s%N)
if "${CLIENT[@]}" ping 127.0.0.1 >"$T/out" 2>"$T/err"; then
	el=$((($(date +%s%N) - t0) / 1000000))
	pass "ping from 127.0.0.1 while 16 silent connections from 127.0.0.2..5 are open"
	[ "$el" -lt $((HS * 1000)) ] && pass "ping answered in $el ms, before the silent ones timed out" ||
		fail "ping took $el ms: it waited for the deadline to free a slot"
else
	fail "ping from 127.0.0.1 while 16 silent connections are open: exit $?, wanted 0"
	sed 's/^/    /' "$T/err"
fi
# A copy works too (an authenticated session uses the reserve).
echo payload >"$T/src.txt"
expect_rc 0 "copy while the silent connections are open" \
	"${CLIENT[@]}" "$T/src.txt" 127.0.0.1:data/src.txt
if [ "$held" -le 8 ] && [ "$held" -ge 1 ]; then
	pass "at most 'max connections' / 2 = 8 unauthenticated held ($held)"
else
	fail "$held unauthenticated connections held, wanted 1..8"
fi
grep -q "refusing connection from 127\.0\.0\.[2-5]:[0-9]*: max unauthenticated" "$T/d.log" &&
	pass "daemon logs the unauthenticated cap" || fail "no 'max unauthenticated' refusal logged"

# The held ones are closed by the deadline (the refused ones at once).
for e in "${BG[@]}"; do
	pid=${e%%:*}
	name=${e#*:}
	if ! wait "$pid"; then
		fail "silent $name: not closed within $((HS + 2)) s"
		sed 's/^/    /' "$T/silent-$name.out"
	fi
done
late=$(cat "$T"/silent-*.out | grep -o 'closed ([^)]*) [0-9.]* s' | awk '{ if ($(NF-1) > m) m = $(NF-1) } END { print m + 0 }')
pass "every silent connection closed, the last after $late s (deadline $HS s)"

# ---- 2. per host: five silent from one address, the fifth refused at once ----
# A second daemon: the per-host cap below "max connections per host" (8).
D1_PORT=$PORT D1_PID=$DAEMON_PID
PORT=$(free_port)
write_conf "$T/d2.conf" "$PORT" "$CERTS" "handshake timeout = $HS" "idle timeout = 20" \
	"max connections = 16" "max unauthenticated per host = 4"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d2.conf"
start_daemon "$T/d2.conf" "$T/d.log2" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$CERTS/client.crt" --key "$CERTS/client.key"
	--ca "$CERTS/ca.crt" -P "$PORT")
mv "$T/d.log" "$T/d1.log"
ln -sf "$T/d.log2" "$T/d.log"
wait_idle
BG=()
for i in 1 2 3 4; do
	raw --tcp --source 127.0.0.6 --expect closed --min-close 1 --max-close "$((HS + 2))" \
		--timeout 10 >"$T/host-$i.out" 2>&1 &
	BG+=("$!:host-$i")
done
for _ in $(seq 1 100); do
	[ "$(grep -c "session [0-9]* from 127\.0\.0\.6:.* started" "$T/d.log")" -ge 4 ] && break
	sleep 0.05
done
raw --tcp --source 127.0.0.6 --expect closed --max-close 0.5 --timeout 2 >"$T/host-5.out" 2>&1 &&
	pass "5th silent connection from one address refused at once" ||
	{ fail "5th silent connection from one address not refused at once"; sed 's/^/    /' "$T/host-5.out"; }
grep -q "refusing connection from 127\.0\.0\.6:[0-9]*: max unauthenticated per host" "$T/d.log" &&
	pass "daemon logs the per-host unauthenticated cap" || fail "no per-host refusal logged"
expect_rc 0 "ping from 127.0.0.1 meanwhile" "${CLIENT[@]}" ping 127.0.0.1
for e in "${BG[@]}"; do
	wait "${e%%:*}" || { fail "${e#*:}: not held, then closed by the deadline"; sed 's/^/    /' "$T/${e#*:}.out"; }
done

stop_daemon "$DAEMON_PID"
PORT=$D1_PORT DAEMON_PID=$D1_PID
CLIENT=("$RDMACP" --config /dev/null --cert "$CERTS/client.crt" --key "$CERTS/client.key"
	--ca "$CERTS/ca.crt" -P "$PORT")
ln -sf "$T/d1.log" "$T/d.log"

# ---- 3. one deadline for TLS and HELLO: a dripped HELLO header is cut off ----
# TLS done, then the first byte of a HELLO at once and the second a second
# later: each arrives within the deadline, the frame never completes.
if raw --send-hex 52 --sleep 1 --send-hex 44 --expect closed --max-close "$HS.5" --timeout 12 \
	>"$T/drip.out" 2>&1; then
	pass "HELLO header dripped, closed by the $HS s deadline: $(grep -o 'closed.*' "$T/drip.out" | head -1)"
else
	fail "HELLO header dripped: not closed by the $HS s deadline"
	sed 's/^/    /' "$T/drip.out"
fi

kill -0 "$DAEMON_PID" 2>/dev/null && pass "daemon alive" || fail "daemon died"
finish
