#!/bin/bash
# The daemon's side of relays (issue 36; SECURITY.md "Relays"), with real
# daemons on 127.0.0.2 (H1, the first hop) and 127.0.0.3 (H2, the next), the
# client and a relay child played by rawpeer with RELAY payloads from
# relaymsg (tickets signed as a client signs them):
#  - RELAY refused without the module's 'relay = yes', with a hop not in
#    'relay to', before a pull, twice, or followed by anything but OPEN;
#  - at H2: a ticket for another path, an expired one and one from another
#    CA refused with the reason logged; a module without 'relay from'
#    refused; a good ticket accepted, the transfer logged as "relayed by
#    <relay> for <client>";
#  - the relay child: its credentials are sealed memfds that the session
#    no longer holds once it runs, owned by the module's user, mode 0400,
#    unreadable by another user; it runs as the module's user with stdin
#    from /dev/null and the OPEN's options; a child that exits without
#    results makes its destinations FAILED with its exit status; a SIGKILLed
#    session leaves no orphan child;
#  - with the real relay client (rdmacp beside rdmacpd, the default): a chain
#    H1 -> H2 delivers to both, H1 reports the next hop copied, H2 logs the
#    push as relayed by relay1 for client, and no relay child is left.
# Needs root (the sessions switch users) and the system user rdmacp.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root: the relay child runs as the module's user"
getent passwd rdmacp >/dev/null || skip "no system user 'rdmacp' (scripts/deps.sh creates it)"
getent passwd nobody >/dev/null || skip "no user 'nobody' to play another local user"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
RELAYMSG=$BUILD_DIR/tests/relaymsg
[ -x "$RELAYMSG" ] || die "relaymsg not built in $BUILD_DIR/tests"
(exec 3<>/dev/tcp/127.0.0.3/1) 2>/dev/null
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.3", 0))' 2>/dev/null ||
	skip "cannot bind 127.0.0.3 (no 127.0.0.0/8 on lo)"

chmod 0711 "$T"
PORT=$(free_port)
"$RDMACP" certs init "$T/certs" --host 127.0.0.2 --host 127.0.0.3 >/dev/null || die "certs init"
"$RDMACP" certs issue "$T/certs" --client relay1 >/dev/null || die "certs issue relay1"
"$RDMACP" certs init "$T/other" >/dev/null || die "certs init (another CA)"
mkdir -p "$T/h1" "$T/h1plain" "$T/h2" "$T/h2plain" "$T/src" "$T/cw"
chown rdmacp:rdmacp "$T/h1" "$T/h2" "$T/h2plain" "$T/cw"
head -c 100000 /dev/urandom >"$T/src/f"

# The relay client: a stand-in that tells what it got and waits (or exits
# with the status in cw/child.exit, without a result), so that what is
# checked is the daemon's side alone.
cat >"$T/child.sh" <<EOF
#!/bin/bash
echo "\$\$" >"$T/cw/child.pid"
echo "\$@" >"$T/cw/child.args"
id -u >"$T/cw/child.uid"
readlink /proc/self/fd/0 >"$T/cw/child.stdin"
[ -f "$T/cw/child.exit" ] && exit "\$(cat "$T/cw/child.exit")"
exec sleep 30
EOF
chmod 0755 "$T/child.sh"

# H1: relays from [relayed] to 127.0.0.3 only.
write_conf "$T/h1.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20" \
	"relay certificate = $T/certs/relay1.crt" "relay key = $T/certs/relay1.key" \
	"relay client = $T/child.sh"
sed -i "s/^listen = .*/listen = 127.0.0.2:$PORT/" "$T/h1.conf"
cat >>"$T/h1.conf" <<EOF

[relayed]
path = $T/h1
allow = client
relay = yes
relay to = 127.0.0.3

[plain]
path = $T/h1plain
allow = client
uid = root
gid = root
EOF
# H2: takes relayed pushes into [in] from relay1 only.
write_conf "$T/h2.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
sed -i "s/^listen = .*/listen = 127.0.0.3:$PORT/" "$T/h2.conf"
cat >>"$T/h2.conf" <<EOF

[in]
path = $T/h2
allow = client
relay from = relay1

[norelay]
path = $T/h2plain
allow = client
EOF

start_on() { # CONF LOG HOST: start_daemon, waiting on HOST:PORT
	"$RDMACPD" --config "$1" -v >"$2" 2>&1 &
	DAEMON_PID=$!
	DAEMON_PIDS+=("$DAEMON_PID")
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/$3/$PORT") 2>/dev/null && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$2"; die "daemon exited"; }
		sleep 0.05
	done
	die "daemon did not listen on $3:$PORT"
}
start_on "$T/h1.conf" "$T/h1.log" 127.0.0.2
H1=$DAEMON_PID
start_on "$T/h2.conf" "$T/h2.log" 127.0.0.3

# peer HOST CERT STEP...: rawpeer as CERT (client or relay1) against HOST.
peer() {
	local host=$1 who=$2
	shift 2
	timeout 60 "$BUILD_DIR/tests/rawpeer" --host "$host" -P "$PORT" --cert "$T/certs/$who.crt" \
		--key "$T/certs/$who.key" --ca "$T/certs/ca.crt" --timeout 10 "$@" >"$T/rp.out" 2>&1
}
# relay_hex ARGS...: a RELAY payload, tickets signed by the client (or --cert/--key after).
relay_hex() { "$RELAYMSG" --cert "$T/certs/client.crt" --key "$T/certs/client.key" "$@"; }
# refused DESC LOG WORDS: rawpeer's answer was an ERROR saying WORDS, LOG says it too.
refused() {
	if grep -q "ERROR.*$3" "$T/rp.out"; then
		pass "$1: refused: $(grep -m1 ERROR "$T/rp.out")"
	else
		fail "$1: not refused with '$3': $(tail -3 "$T/rp.out")"
	fi
	grep -q "refused: .*$3" "$2" && pass "$1: logged" || fail "$1: not in $2"
}
HOP="127.0.0.3:$PORT:in/f"

# ---- RELAY at the first hop: the module's and the daemon's rules ----
peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" open push plain/f
refused "RELAY into a module without 'relay = yes'" "$T/h1.log" "relay"
[ ! -e "$T/h1plain/f" ] && pass "nothing stored" || fail "stored in [plain]"

peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "127.0.0.9:$PORT:in/f")" open push relayed/f
refused "RELAY to a hop not in 'relay to'" "$T/h1.log" "127.0.0.9"

peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" open pull relayed
refused "RELAY before a pull" "$T/h1.log" "push's OPEN"

peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" ping
grep -q "ERROR.*RELAY must come right before" "$T/rp.out" &&
	pass "RELAY then PING: refused" || fail "RELAY then PING: $(tail -2 "$T/rp.out")"

peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" \
	frame 32 "$(relay_hex --hop "$HOP")" open push relayed/f
grep -q "ERROR" "$T/rp.out" && pass "two RELAYs before one OPEN: refused" ||
	fail "two RELAYs: $(tail -2 "$T/rp.out")"

# (a daemon without PROTO_CAP_RELAY: the bit is off in its HELLO and RELAY refused)
sed "s/^listen = .*/listen = 127.0.0.2:$((PORT + 1))/" "$T/h1.conf" >"$T/h1old.conf"
RDMACP_TEST_CAPS_OFF=$((1 << 39)) "$RDMACPD" --config "$T/h1old.conf" -v >"$T/h1old.log" 2>&1 &
OLD=$!
DAEMON_PIDS+=("$OLD")
sleep 0.5
timeout 60 "$BUILD_DIR/tests/rawpeer" --host 127.0.0.2 -P $((PORT + 1)) \
	--cert "$T/certs/client.crt" --key "$T/certs/client.key" --ca "$T/certs/ca.crt" \
	hello frame 32 "$(relay_hex --hop "$HOP")" open push relayed/f >"$T/rp.out" 2>&1
grep -q "ERROR.*does not relay" "$T/rp.out" && pass "a daemon without the capability refuses RELAY" ||
	fail "no capability: $(tail -2 "$T/rp.out")"
stop_daemon "$OLD"

# ---- at the next hop: tickets and 'relay from' ----
peer 127.0.0.3 relay1 hello frame 32 "$(relay_hex --self in/other)" open push in/f
refused "a ticket for another path" "$T/h2.log" "relay ticket refused: the ticket is for in/other"

peer 127.0.0.3 relay1 hello frame 32 "$(relay_hex --self in/f --age 4000)" open push in/f
refused "an expired ticket" "$T/h2.log" "relay ticket refused"

peer 127.0.0.3 relay1 hello frame 32 \
	"$(relay_hex --self in/f --cert "$T/other/client.crt" --key "$T/other/client.key")" \
	open push in/f
refused "a ticket signed by another CA's client" "$T/h2.log" "relay ticket refused"

peer 127.0.0.3 relay1 hello frame 32 "$(relay_hex --self norelay/f)" open push norelay/f
refused "a module without 'relay from'" "$T/h2.log" "relay"

peer 127.0.0.3 client hello frame 32 "$(relay_hex --self in/f)" open push in/f
refused "the client itself as a relay ('relay from' is relay1)" "$T/h2.log" "relay"

peer 127.0.0.3 relay1 hello frame 32 "$(relay_hex --self in/f)" open push in/f lanes ring \
	files 1:f:100000 ack chunk 0 1 0 100000 "$T/src/f" "done" 1 100000 "$T/src/f" result \
	expect "1 OK" end wait END bye close
if grep -q "^END" "$T/rp.out" && cmp -s "$T/src/f" "$T/h2/f"; then
	pass "a good ticket from relay1: the push is stored"
else
	fail "good ticket: $(tail -4 "$T/rp.out")"
fi
grep -q "push to in done: .*(relayed by relay1 for client)" "$T/h2.log" &&
	pass "H2 logs who relayed it for whom" ||
	fail "no 'relayed by ... for ...' in the done line: $(grep 'done:' "$T/h2.log" | tail -1)"

# ---- the relay child ----
# A session at H1 whose child is up: rawpeer holds it after OPEN_OK.
rm -f "$T/cw/child.pid" "$T/cw/child.args" "$T/cw/child.uid" "$T/cw/child.stdin"
peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" open push relayed/g \
	sleep 6 &
RP=$!
SESSION="" CHILD=""
for _ in $(seq 1 100); do
	if [ -s "$T/cw/child.args" ]; then
		CHILD=$(cat "$T/cw/child.pid")
		SESSION=$(awk '/^PPid:/ { print $2 }' "/proc/$CHILD/status")
		break
	fi
	sleep 0.05
done
if [ -z "$CHILD" ]; then
	fail "no relay child under the session ($(tail -3 "$T/rp.out"))"
else
	pass "the session started its relay child: $(cat "$T/cw/child.args")"
	if ls -l "/proc/$SESSION/fd" 2>/dev/null | grep -q memfd; then
		fail "the session still holds memfds: $(ls -l "/proc/$SESSION/fd" | grep memfd)"
	else
		pass "the session holds no credential memfd after the child started"
	fi
	keyfd=$(sed -n 's|.*--key=/proc/self/fd/\([0-9]*\).*|\1|p' "$T/cw/child.args")
	[ -n "$keyfd" ] && cmp -s "/proc/$CHILD/fd/$keyfd" "$T/certs/relay1.key" &&
		pass "the child's --key is the relay key" || fail "the child's key fd $keyfd"
	readlink "/proc/$CHILD/fd/$keyfd" | grep -q "memfd:relay-key" &&
		pass "... a memfd" || fail "key fd is $(readlink "/proc/$CHILD/fd/$keyfd")"
	st=$(stat -L -c '%a %U' "/proc/$CHILD/fd/$keyfd")
	[ "$st" = "400 rdmacp" ] && pass "... mode 0400, the module's user's" || fail "key memfd: $st"
	if setpriv --reuid=nobody --regid=nogroup --clear-groups \
		cat "/proc/$CHILD/fd/$keyfd" >/dev/null 2>&1; then
		fail "another user reads the relay key through /proc"
	else
		pass "another user cannot read the child's key"
	fi
	[ "$(cat "$T/cw/child.uid")" = "$(id -u rdmacp)" ] && pass "the child runs as the module's user" ||
		fail "the child runs as uid $(cat "$T/cw/child.uid")"
	[ "$(cat "$T/cw/child.stdin")" = /dev/null ] && pass "its stdin is /dev/null" ||
		fail "its stdin: $(cat "$T/cw/child.stdin")"
	grep -q -- "--relay-feed=[0-9]" "$T/cw/child.args" && grep -q -- "--port=$PORT" "$T/cw/child.args" &&
		pass "it is given the feed and the next hop's port" || fail "args: $(cat "$T/cw/child.args")"
	kill -KILL "$SESSION"
	for _ in $(seq 1 20); do
		[ -d "/proc/$CHILD" ] && ! grep -q '^State:.*Z' "/proc/$CHILD/status" 2>/dev/null || break
		sleep 0.05
	done
	if [ -d "/proc/$CHILD" ] && ! grep -q '^State:.*Z' "/proc/$CHILD/status" 2>/dev/null; then
		fail "the relay child outlived its SIGKILLed session"
		kill -KILL "$CHILD"
	else
		pass "a SIGKILLed session leaves no relay child (gone within a second)"
	fi
fi
wait "$RP" 2>/dev/null

# SIGTERM to a session (the daemon's drain) reaches its relay child.
rm -f "$T/cw/child.pid" "$T/cw/child.args"
peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" open push relayed/h sleep 8 &
RP=$!
for _ in $(seq 1 100); do
	[ -s "$T/cw/child.args" ] && break
	sleep 0.05
done
CHILD=$(cat "$T/cw/child.pid" 2>/dev/null)
SESSION=$(awk '/^PPid:/ { print $2 }' "/proc/$CHILD/status" 2>/dev/null)
if [ -n "$SESSION" ]; then
	kill -TERM "$SESSION"
	for _ in $(seq 1 100); do
		grep -q "relay client killed by signal 15" "$T/h1.log" && break
		sleep 0.1
	done
	grep -q "relay client killed by signal 15" "$T/h1.log" &&
		pass "SIGTERM to the session reaches its relay child" ||
		fail "SIGTERM: $(grep -i relay "$T/h1.log" | tail -2)"
	[ ! -d "/proc/$CHILD" ] && pass "... which is reaped" || fail "... the child $CHILD is left"
else
	fail "no relay child for the SIGTERM check"
fi
wait "$RP" 2>/dev/null

# A child that exits 3 without a result: its destination FAILED, with why.
echo 3 >"$T/cw/child.exit"
peer 127.0.0.2 client hello frame 32 "$(relay_hex --hop "$HOP")" open push relayed/f lanes ring \
	files 1:f:100000 ack chunk 0 1 0 100000 "$T/src/f" "done" 1 100000 "$T/src/f" result \
	expect "1 OK" end wait END wait RELAY_RESULT bye close
grep -q "^RELAY_RESULT" "$T/rp.out" && pass "H1 sends RELAY_RESULT after END" ||
	fail "no RELAY_RESULT: $(tail -4 "$T/rp.out")"
grep -q "relay destination 1 (127.0.0.3:$PORT): failed.*relay client exited 3" "$T/h1.log" &&
	pass "... FAILED: relay client exited 3" ||
	fail "no FAILED result in the log: $(grep 'relay' "$T/h1.log" | tail -3)"
cmp -s "$T/src/f" "$T/h1/f" && pass "H1 itself stored the file" || fail "H1 did not store it"

# ---- the real relay client: rdmacp beside rdmacpd (the default) ----
stop_daemon "$H1"
sed -i '/^relay client = /d' "$T/h1.conf"
start_on "$T/h1.conf" "$T/h1.log" 127.0.0.2
head -c 3000000 /dev/urandom >"$T/src/big"
expect_rc 0 "a chain H1 -> H2 with the relay client beside rdmacpd" \
	timeout 120 "$RDMACP" --config /dev/null --cert "$T/certs/client.crt" \
	--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$PORT" --transport tcp \
	"$T/src/big" 127.0.0.2:relayed/big 127.0.0.3:in/big
cmp -s "$T/src/big" "$T/h1/big" && cmp -s "$T/src/big" "$T/h2/big" &&
	pass "... the file is at both destinations" || fail "... the file is not at both"
grep -q "relay destination 1 (127.0.0.3:$PORT): copied, 1 files" "$T/h1.log" &&
	pass "... H1 reports the next hop copied" ||
	fail "... H1's result: $(grep 'relay destination' "$T/h1.log" | tail -1)"
grep -q "push to in done: .*(relayed by relay1 for client)" "$T/h2.log" &&
	pass "... H2 took it from relay1 for client" || fail "... H2: $(grep 'done:' "$T/h2.log" | tail -1)"
[ -z "$(pgrep -u rdmacp -f -- --relay-feed)" ] && pass "... no relay child left" ||
	fail "... a relay child is left: $(pgrep -a -u rdmacp -f -- --relay-feed)"
# The OPEN's options reach the child as the client's own options: a tree, -p, --skip, --partial.
mkdir -p "$T/src/tree/d"
echo one >"$T/src/tree/a"
echo two >"$T/src/tree/d/b"
expect_rc 0 "a tree with -r -p --skip quick --partial through the chain" \
	timeout 120 "$RDMACP" --config /dev/null --cert "$T/certs/client.crt" \
	--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$PORT" --transport tcp \
	-r -p --skip quick --partial "$T/src/tree" 127.0.0.2:relayed/ 127.0.0.3:in/
expect_same_tree "... at H2" "$T/src/tree" "$T/h2/tree"

finish
