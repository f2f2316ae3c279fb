#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Malformed and out-of-order control frames (SECURITY.md A1, A2, A5, A6) and
# slow/silent clients against the connection caps (F34), sent by
# rawclient.py over real TLS 1.3 with the test client certificate.
#
# For every bad frame we assert: the daemon answers with exactly one ERROR
# frame carrying the expected code (PROTOCOL=1, VERSION_MISMATCH=2), then
# closes the connection; and afterwards a normal `rdmacp ping` still works
# (the daemon keeps serving others).
#
# Exit 0 pass, 1 fail, 77 skip.
source "$(dirname "$0")/lib.sh"

RAW=$HERE/rawclient.py
command -v python3 >/dev/null || skip "python3 not found"
python3 -c 'import ssl; ssl.TLSVersion.TLSv1_3' 2>/dev/null || skip "python3 ssl without TLS 1.3"

setup_standard
CERTS=$T/certs
raw() {
	python3 "$RAW" --ca "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key" "$@"
}

# check DESC RAWCLIENT-ARGS...: rawclient must report its expectation held.
check() {
	local desc=$1 rc
	shift
	raw --port "$PORT" "$@" >"$T/raw.out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass "$desc: $(grep -E '^rawclient: (frame |closed)' "$T/raw.out" | head -1 | sed 's/^rawclient: //')"
	else
		fail "$desc (rawclient exit $rc)"
		sed 's/^/    /' "$T/raw.out"
	fi
}

# ping_ok DESC [PORT]: a normal client is still served.
ping_ok() {
	local p=${2:-$PORT}
	expect_rc 0 "$1: rdmacp ping still works" "${CLIENT[@]}" -P "$p" ping 127.0.0.1
}

# log_has PATTERN DESC [LOG]
log_has() {
	if grep -q -- "$1" "${3:-$T/d.log}"; then
		pass "$2: daemon log has '$1'"
	else
		fail "$2: daemon log lacks '$1'"
	fi
}

PING_PAYLOAD=0000000000000001
# OPEN: push, transport 0, 1 lane, flags 0, chunk 1M, 16 slots, path "data".
OPEN_PAYLOAD=010001000000000000100000000000100004$(printf data | od -An -tx1 | tr -d ' \n')

# Positive control: the raw client itself is right (HELLO, PING -> PONG).
check "control: HELLO then PING" --hello --frame "type=PING,payload=$PING_PAYLOAD" --expect frame:PONG

# a. Truncated frame: a header claiming 100 bytes, 10 sent, then the write
#    side ends. Both with close_notify and with a bare TCP FIN the daemon
#    must close without answering anything, and log the broken channel.
check "a1 truncated frame + close_notify" --hello \
	--frame "type=PING,len=100,payload=00112233445566778899" --close-notify --expect closed
check "a2 truncated frame + TCP FIN" --hello \
	--frame "type=PING,len=100,payload=00112233445566778899" --fin --expect closed
log_has "control channel: Connection reset by peer" "a truncated frame"
ping_ok "a"

# b. Length over the 1 MiB cap (0x00200000): refused from the header alone.
check "b1 length 2 MiB after HELLO" --hello --frame "type=PING,len=0x00200000" --expect error:1
check "b2 length 2 MiB as first frame" --frame "type=HELLO,len=0x00200000" --expect error:1
check "b3 length 4 GiB-1" --hello --frame "type=PING,len=0xffffffff" --expect error:1
ping_ok "b"

# c. Unknown type.
check "c1 type 99" --hello --frame "type=99,payload=$PING_PAYLOAD" --expect error:1
check "c2 type 0" --hello --frame "type=0" --expect error:1
ping_ok "c"

# d. Bad magic.
check "d1 bad magic after HELLO" --hello --frame "type=PING,magic=0x52444d44,payload=$PING_PAYLOAD" --expect error:1
check "d2 bad magic as first frame" --frame "type=HELLO,magic=0,payload=0001000100000000000000010000" --expect error:1
ping_ok "d"

# e. Reserved fields and undefined flag bits must be zero.
check "e1 flags=0x0001" --hello --frame "type=PING,flags=1,payload=$PING_PAYLOAD" --expect error:1
check "e2 flags=0x8000" --hello --frame "type=PING,flags=0x8000,payload=$PING_PAYLOAD" --expect error:1
check "e3 reserved u8=1" --hello --frame "type=PING,res8=1,payload=$PING_PAYLOAD" --expect error:1
check "e4 reserved u16=0x8000" --hello --frame "type=PING,res16=0x8000,payload=$PING_PAYLOAD" --expect error:1
ping_ok "e"

# f. Wrong state: a well-formed OPEN (or PING) before HELLO; HELLO twice.
check "f1 OPEN before HELLO" --frame "type=OPEN,payload=$OPEN_PAYLOAD" --expect error:1
log_has "expected HELLO, got OPEN" "f1"
check "f2 PING before HELLO" --frame "type=PING,payload=$PING_PAYLOAD" --expect error:1
check "f3 HELLO twice" --hello --send-hello 1:1 --expect error:1
log_has "unexpected HELLO" "f3"
# Malformed payloads (trailing bytes, min > max) are protocol errors too.
check "f4 HELLO with a trailing byte" \
	--frame "type=HELLO,payload=000100010000000000000001000000" --expect error:1
check "f5 HELLO min 2 > max 1" --send-hello 2:1 --expect error:1
ping_ok "f"

# g. Header version 2 as the very first frame: VERSION_MISMATCH, not PROTOCOL.
check "g header version 2" --frame "type=HELLO,version=2,payload=0002000200000000000000010000" --expect error:2
ping_ok "g"

# h. HELLO offering only version 7.
check "h HELLO 7..7" --send-hello 7:7 --expect error:2
log_has "protocol version mismatch: client speaks 7..7" "h"
ping_ok "h"

# j. OPEN's write-send flag (0x40000) from a client whose HELLO lacks its
#    capability (0x2000000; rawclient announces tcp only): refused, not guessed.
OPEN_WS_PAYLOAD=010001000004000000100000000000100004$(printf data | od -An -tx1 | tr -d ' \n')
check "j OPEN write-send without the capability" --hello \
	--frame "type=OPEN,payload=$OPEN_WS_PAYLOAD" --expect error:1
log_has "WRITE + SEND verbs path from a client without its capability" "j"
ping_ok "j"

if kill -0 "$DAEMON_PID" 2>/dev/null; then pass "daemon survived all bad frames"; else fail "daemon died"; fi
stop_daemon "$DAEMON_PID"

# i. Slow and silent clients (F34). Daemons with max connections 4 and max
#    connections per host 2; handshake timeout 1 s for i1-i3, 4 s for i4-i5
#    (those start several processes while the silent ones must stay held; a
#    loaded machine must not let the deadline free a slot too early).
#    What we assert:
#  i1 a silent TCP client (no ClientHello) is closed by the daemon within 3 s,
#     and while it is connected, a normal ping succeeds (it only holds 1 of 2
#     per-host slots);
#  i2 a client that completes TLS but never sends HELLO is closed within 3 s
#     (the HELLO falls under the same deadline);
#  i3 a client dripping a real ClientHello one byte every 0.3 s is closed
#     within 3 s: the deadline is absolute, not reset by each byte;
#  i4 with 2 silent connections from 127.0.0.1 held (each held >= 2 s and
#     closed by the 4 s deadline within 6 s), a 3rd connection from
#     127.0.0.1 is refused at once: `rdmacp ping` fails with exit 11
#     (EXIT_CONNECT: the daemon closes the TCP connection before TLS, the
#     documented "busy"; 3 = EXIT_AUTH would blame the certificates, 141 =
#     killed by SIGPIPE says nothing at all), the same for a copy, and the
#     daemon logs "max connections per host reached"; once the deadline has
#     dropped the silent ones, ping works again;
#  i5 with 2 authenticated sessions (HELLO done) and 2 silent connections
#     (from 127.0.0.1 and 127.0.0.2; "max unauthenticated" is 2 here, so
#     silent ones alone can't fill the slots: t_preauth_slots) holding 4 = max
#     connections, a connection from 127.0.0.3 is closed at once (< 0.5 s,
#     long before the 4 s deadline) and the daemon logs "max connections
#     reached"; afterwards ping works again.
PORT2=$(free_port)
write_conf "$T/d2.conf" "$PORT2" "$CERTS" "handshake timeout = 1" "idle timeout = 20" \
	"max connections = 4" "max connections per host = 2"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d2.conf"
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
D2=$DAEMON_PID

# bg_silent NAME [rawclient args...]: a silent TCP client in the background
# against daemon $SPORT (log $SLOG); it passes if the daemon closes it after
# $SMIN..$SMAX s (by the handshake deadline), not at once (that would be a
# refusal: the slot was never held).
BG=()
bg_silent() {
	local name=$1
	shift
	raw --port "$SPORT" --tcp --expect closed --min-close "$SMIN" --max-close "$SMAX" \
		--timeout "$((${SMAX%.*} + 2))" "$@" >"$T/$name.out" 2>&1 &
	BG+=("$!:$name")
}
# wait_idle: until every session the daemon forked has ended (start_daemon's
# readiness probe is a connection too: its session must not hold a slot, and
# on a loaded machine it may not even be logged yet when this starts, so at
# least that one must have been seen starting and ending).
wait_idle() {
	local started ended
	for _ in $(seq 1 100); do
		started=$(grep -c "session [0-9]* from .* started" "$SLOG")
		ended=$(grep -c "session [0-9]* from .* \(ended\|exited\|killed\)" "$SLOG")
		[ "$started" -ge 1 ] && [ "$started" -eq "$ended" ] && return 0
		sleep 0.05
	done
	fail "daemon still has $((started - ended)) session(s) before the test"
}
# wait_started N: until the daemon has forked N sessions since mark_d2.
mark_d2() { wait_idle; D2_MARK=$(wc -l <"$SLOG"); }
wait_started() {
	local n=0
	for _ in $(seq 1 100); do
		n=$(tail -n +"$((D2_MARK + 1))" "$SLOG" | grep -c "session [0-9]* from .* started")
		[ "$n" -ge "$1" ] && return 0
		sleep 0.05
	done
	fail "only $n of $1 silent connections reached the daemon"
}
wait_bg() {
	local e pid name
	for e in "${BG[@]}"; do
		pid=${e%%:*}
		name=${e#*:}
		if wait "$pid"; then
			pass "$name: silent connection held, then closed by the deadline ($(grep -o 'closed.*' "$T/$name.out" | head -1))"
		else
			fail "$name: silent connection not held $SMIN s and closed within $SMAX s"
			sed 's/^/    /' "$T/$name.out"
		fi
	done
	BG=()
}

SPORT=$PORT2 SLOG=$T/d2.log SMIN=0.5 SMAX=3
mark_d2
bg_silent i1-silent
wait_started 1
ping_ok "i1 while a silent connection is held" "$PORT2"
wait_bg

check "i2 TLS done, no HELLO" --port "$PORT2" --expect closed --max-close 3 --timeout 5
check "i3 ClientHello dripped 1 byte/0.3 s" --port "$PORT2" --drip 0.3 --expect closed --max-close 3 --timeout 6

# i4 and i5 start several processes while the silent ones must stay held:
# a third daemon, same caps, with a 4 s deadline, so that a slow machine
# cannot let the deadline expire before the over-the-cap connection is made.
PORT3=$(free_port)
write_conf "$T/d3.conf" "$PORT3" "$CERTS" "handshake timeout = 4" "idle timeout = 20" \
	"max connections = 4" "max connections per host = 2"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d3.conf"
start_daemon "$T/d3.conf" "$T/d3.log" "$PORT3"
D3=$DAEMON_PID
SPORT=$PORT3 SLOG=$T/d3.log SMIN=2 SMAX=6
mark_d2
bg_silent i4-silent-1
bg_silent i4-silent-2
wait_started 2
expect_rc 11 "i4 3rd connection from 127.0.0.1 over 'max connections per host = 2'" \
	"${CLIENT[@]}" -P "$PORT3" ping 127.0.0.1
sed 's/^/    client said: /' "$T/err" | head -2
# The same refusal seen by a copy.
echo payload >"$T/src.txt"
expect_rc 11 "i4 copy over 'max connections per host = 2' (--wait-busy 0)" \
	"${CLIENT[@]}" -P "$PORT3" --wait-busy 0 "$T/src.txt" 127.0.0.1:data/src.txt
sed 's/^/    client said: /' "$T/err" | head -2
log_has "max connections per host reached" "i4" "$T/d3.log"
wait_bg
ping_ok "i4 after the deadline dropped the silent ones" "$PORT3"

mark_d2
# Two authenticated sessions, idle until they say goodbye: 10 s, long enough for
# the silent ones to start and the fifth to be refused on a loaded machine.
raw --port "$PORT3" --hello --sleep 10 --close-notify --expect closed --timeout 5 \
	>"$T/i5-auth-1.out" 2>&1 &
I5_AUTH1=$!
raw --port "$PORT3" --hello --sleep 10 --close-notify --expect closed --timeout 5 \
	--source 127.0.0.2 >"$T/i5-auth-2.out" 2>&1 &
I5_AUTH2=$!
wait_started 2
# Both through HELLO (authenticated) before the silent ones come.
for _ in $(seq 1 100); do
	[ "$(tail -n +"$((D2_MARK + 1))" "$SLOG" | grep -c '): connected (')" -ge 2 ] && break
	sleep 0.05
done
bg_silent i5-silent-1
bg_silent i5-silent-2 --source 127.0.0.2
wait_started 4
check "i5 5th connection (from 127.0.0.3) over 'max connections = 4' closed at once" \
	--port "$PORT3" --tcp --source 127.0.0.3 --expect closed --max-close 0.5 --timeout 2
log_has "max connections reached" "i5" "$T/d3.log"
wait_bg
wait "$I5_AUTH1" "$I5_AUTH2"
ping_ok "i5 after the deadline dropped the silent ones" "$PORT3"

for d in "$D2" "$D3"; do
	if kill -0 "$d" 2>/dev/null; then pass "daemon $d alive"; else fail "daemon $d died"; fi
done
if [ "$FAILS" -ne 0 ]; then
	for l in d2 d3; do
		echo "$l.log:"
		sed 's/^/    /' "$T/$l.log" | tail -25
	done
fi
finish
