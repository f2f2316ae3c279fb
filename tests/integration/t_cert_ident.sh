#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Issue 15 item 8: which certificate is wrong?
#   1. two "rdmacp certs init" runs make two CAs with different names
#      ("rdmacp CA HOST DATE ID"), as "rdmacp certs show" prints them
#   2. certs show: subject, issuer, SANs, validity, and the fingerprint
#      exactly as openssl computes it, in the form 'allow' takes
#   3. a client that trusts the other CA is told which CA signed the
#      daemon's certificate (its name, from 1), exit 3
#   4. --pin and the config file's pin with colons between the pairs (as
#      openssl prints it) work; a wrong one still fails (3)
#   5. the daemon logs the client's whole fingerprint (64 hex digits), the
#      one certs show prints
#   5b. the daemon logs a client that sends HTTP as not speaking TLS
#   6. ping against a port where something else answers, an SSH banner or an
#      HTTP reply: "is not an rdmacp daemon", its first line quoted, exit 11
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v openssl >/dev/null || skip "no openssl"
command -v python3 >/dev/null || skip "no python3"

# ---- 1. two CAs, two names ----
make_certs "$T/a"
make_certs "$T/b"
"$RDMACP" certs show "$T/a/ca.crt" >"$T/show.a" 2>&1 || fail "certs show a/ca.crt: $(cat "$T/show.a")"
"$RDMACP" certs show "$T/b/ca.crt" >"$T/show.b" 2>&1 || fail "certs show b/ca.crt: $(cat "$T/show.b")"
NAME_A=$(sed -n 's/^subject: *CN=//p' "$T/show.a")
NAME_B=$(sed -n 's/^subject: *CN=//p' "$T/show.b")
NAME_RE="^rdmacp CA [A-Za-z0-9._-]+ $(date -u +%Y-%m-%d) [0-9a-f]{6}\$"
if [[ $NAME_A =~ $NAME_RE ]] && [[ $NAME_B =~ $NAME_RE ]] && [ "$NAME_A" != "$NAME_B" ]; then
	pass "two CAs: '$NAME_A' and '$NAME_B'"
else
	fail "CA names not distinct or not 'rdmacp CA HOST DATE ID': '$NAME_A', '$NAME_B'"
fi

# ---- 2. certs show ----
"$RDMACP" certs show "$T/a/server.crt" >"$T/show.srv" 2>&1 || fail "certs show server.crt"
want_fp=$(openssl x509 -in "$T/a/server.crt" -outform DER | sha256sum | cut -d' ' -f1)
if grep -qx "fingerprint: sha256:$want_fp" "$T/show.srv" &&
	grep -qx "subject: *CN=localhost" "$T/show.srv" &&
	grep -qx "issuer: *CN=$NAME_A" "$T/show.srv" &&
	grep -q "^SANs: *DNS:localhost, IP:127.0.0.1, IP:::1" "$T/show.srv" &&
	grep -Eq "^valid: *[0-9-]{10} [0-9:]{8} UTC to [0-9-]{10} [0-9:]{8} UTC$" "$T/show.srv"; then
	pass "certs show server.crt: subject, issuer, SANs, validity, sha256:$want_fp"
else
	fail "certs show server.crt: $(cat "$T/show.srv")"
fi
"$RDMACP" certs show "$T/a/server.key" >"$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no PEM certificate" "$T/out" && pass "certs show on a key: exit 2, says why" ||
	fail "certs show on a key: exit $rc: $(cat "$T/out")"

# ---- a daemon with CA a ----
PORT=$(free_port)
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/a" "handshake timeout = 5"
printf '[data]\npath = %s\nuid = root\ngid = root\nallow = client\n' "$T/mod" >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
as() { # as DIR ARGS...: rdmacp with DIR's client certificate and CA
	local d=$1
	shift
	"$RDMACP" --config /dev/null --cert "$d/client.crt" --key "$d/client.key" --ca "$d/ca.crt" \
		-P "$PORT" "$@"
}

# ---- 3. the wrong CA is named ----
expect_rc 3 "a client of CA b pings the daemon of CA a" as "$T/b" ping 127.0.0.1
[ -n "$NAME_A" ] && grep -qF "$NAME_A" "$T/err" && pass "the error names the daemon's CA: $(head -1 "$T/err")" ||
	fail "the error does not name '$NAME_A': $(cat "$T/err")"

# ---- 4. --pin with colons ----
PIN_COLONS=$(openssl x509 -in "$T/a/server.crt" -noout -fingerprint -sha256 | sed 's/.*=//')
expect_rc 0 "--pin AB:CD:... (openssl's form)" as "$T/a" --pin "$PIN_COLONS" ping 127.0.0.1
expect_rc 0 "--pin sha256:AB:CD:..." as "$T/a" --pin "sha256:$PIN_COLONS" ping 127.0.0.1
BAD_COLONS=$(echo "$PIN_COLONS" | sed 's/^../00/')
[ "$BAD_COLONS" != "$PIN_COLONS" ] || BAD_COLONS=$(echo "$PIN_COLONS" | sed 's/^../11/')
expect_rc 3 "--pin with colons, wrong" as "$T/a" --pin "$BAD_COLONS" ping 127.0.0.1
# The client's config file reads it with the same parser.
printf '[client]\ncert = %s\nkey = %s\nca = %s\nport = %s\npin = %s\n' "$T/a/client.crt" \
	"$T/a/client.key" "$T/a/ca.crt" "$PORT" "$PIN_COLONS" >"$T/client.conf"
expect_rc 0 "pin = AB:CD:... in the client's config file" "$RDMACP" --config "$T/client.conf" ping 127.0.0.1
sed -i "s/^pin = .*/pin = $BAD_COLONS/" "$T/client.conf"
expect_rc 3 "a wrong pin with colons in the client's config file" "$RDMACP" --config "$T/client.conf" ping 127.0.0.1

# ---- 5. the whole fingerprint in the daemon's log ----
client_fp=$(sed -n 's/^fingerprint: //p' <("$RDMACP" certs show "$T/a/client.crt"))
sleep 0.2
if [[ $client_fp =~ ^sha256:[0-9a-f]{64}$ ]] && grep -q "CN=client $client_fp)" "$T/d.log"; then
	pass "the daemon log names the client by its whole fingerprint $client_fp"
else
	fail "no '$client_fp' in the daemon log: $(grep -m1 'CN=client' "$T/d.log")"
fi

# ---- 5b. the daemon says the same of a client that is no TLS client ----
# The sessions of the pings above may still be reaped: a connection over the
# per-host limit is closed before it is read, so try again (SIGPIPE ignored).
for attempt in $(seq 10); do
	(
		trap '' PIPE
		exec 5<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' >&5
		timeout 5 cat <&5 >/dev/null
	) 2>/dev/null
	for i in $(seq 20); do grep -q "does not speak TLS" "$T/d.log" && break 2; sleep 0.05; done
done
grep -q "TLS handshake failed: the peer does not speak TLS (it sent 'GET / HTTP/1.1')" "$T/d.log" &&
	pass "the daemon logs an HTTP client as not speaking TLS, with its request line" ||
	fail "no 'does not speak TLS' line in the daemon log for an HTTP request"

# ---- 6. not an rdmacp daemon ----
# fake_server PORT ANSWER FIRST: a TCP server that answers once (FIRST=1: before reading).
fake_server() {
	python3 - "$@" <<'PY' &
import socket, sys
port, answer, first = int(sys.argv[1]), sys.argv[2].encode().decode("unicode_escape").encode("latin-1"), sys.argv[3] == "1"
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(1)
print("listening", flush=True)
s.settimeout(20)
c, _ = s.accept()
c.settimeout(5)
if first:
    c.sendall(answer)
try:
    c.recv(4096)
except OSError:
    pass
if not first:
    c.sendall(answer)
c.close()
PY
	FAKE_PID=$!
	DAEMON_PIDS+=("$FAKE_PID")
}
not_rdmacp() { # DESC ANSWER FIRST WANT
	local p
	p=$(free_port)
	fake_server "$p" "$2" "$3" >"$T/fake.out"
	for i in $(seq 100); do grep -q listening "$T/fake.out" && break; sleep 0.05; done
	"$RDMACP" --config /dev/null --cert "$T/a/client.crt" --key "$T/a/client.key" \
		--ca "$T/a/ca.crt" -P "$p" ping 127.0.0.1 >"$T/out" 2>"$T/err"
	rc=$?
	wait "$FAKE_PID" 2>/dev/null
	if [ $rc -eq 11 ] && grep -q "127.0.0.1 port $p is not an rdmacp daemon" "$T/err" &&
		grep -qF "$4" "$T/err"; then
		pass "$1: exit 11, $(cat "$T/err")"
	else
		fail "$1: exit $rc (wanted 11), stderr: $(cat "$T/err")"
	fi
}
not_rdmacp "an sshd" 'SSH-2.0-OpenSSH_9.2\r\n' 1 "(it sent 'SSH-2.0-OpenSSH_9.2')"
not_rdmacp "a web server" 'HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n' 0 \
	"(it sent 'HTTP/1.1 400 Bad Request')"

[ "$FAILS" -eq 0 ] || {
	echo "daemon log:"
	sed 's/^/    /' "$T/d.log" | tail -20
	exit 1
}
exit 0
