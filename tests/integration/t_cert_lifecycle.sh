#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Issue 33 item 6: certificates for the second year, with a real daemon.
#   1. certs issue --server --host 127.0.0.1: a server certificate of the
#      existing CA that the client accepts for 127.0.0.1
#   2. crl = (certs revoke FILE): the revoked client fails the handshake,
#      exit 24 and "certificate revoked"; the daemon's log names the
#      certificate and why; a good client still copies
#   3. deny = in [global] (a name): refused at connection, exit 3 and
#      "denied by the daemon's deny list", logged with the certificate
#   4. deny = in a module (a fingerprint): refused there (3, same words),
#      the same certificate still copies to another module
#   5. certs revoke FINGERPRINT --ca-dir and a reload: the next connection
#      of that certificate is refused as revoked
#   6. the start line says when the certificate expires, and 'cert warn
#      days' makes it a warning at start and at reload
#   7. certs renew of the server certificate, reload: clients still copy
#   8. --check refuses a CRL of another CA and a 'deny' entry that can't be one
#  10. a running daemon looks again on its own (daily; here every 300 ms
#      through the test hook RDMACP_TEST_CERT_CHECK_MS)
#   9. rdmacp doctor: a client certificate expiring within 30 days is a
#      warning, an expired one an error (exit 6); the daemon's certificate,
#      read from its config, is warned of within its 'cert warn days'
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
PORT=$(free_port)
C=$T/certs
make_certs "$C"
for who in bob carol dave; do
	"$RDMACP" certs issue "$C" --client "$who" >/dev/null || die "certs issue $who"
done
expect_rc 0 "certs issue --server --host 127.0.0.1" "$RDMACP" certs issue "$C" --server --host 127.0.0.1
expect_rc 1 "certs issue --server without --host" "$RDMACP" certs issue "$C" --server
expect_rc 0 "certs revoke bob.crt" "$RDMACP" certs revoke "$C/bob.crt"
expect_rc 1 "certs revoke bob.crt again (already revoked)" "$RDMACP" certs revoke "$C/bob.crt"
grep -q "already revoked" "$T/err" && pass "a second revoke says 'already revoked'" ||
	fail "a second revoke: $(cat "$T/err")"
DAVE_FP=$("$RDMACP" certs show "$C/dave.crt" | awk '/^fingerprint:/ { print $2 }')
[ ${#DAVE_FP} -eq 71 ] || die "no fingerprint of dave: $DAVE_FP"

mkdir -p "$T/data" "$T/other"
{
	echo "[global]"
	echo "listen = $HOST:$PORT"
	echo "cert = $C/127.0.0.1.crt"
	echo "key = $C/127.0.0.1.key"
	echo "ca = $C/ca.crt"
	echo "crl = $C/crl.pem"
	echo "deny = carol"
	echo "cert warn days = 3650"
	echo "handshake timeout = 5"
	echo "idle timeout = 20"
} >"$T/d.conf"
as_root_modules >>"$T/d.conf" <<EOF

[data]
path = $T/data
allow = client bob carol dave
deny = $DAVE_FP

[other]
path = $T/other
allow = dave client
EOF
"$RDMACPD" --check --config "$T/d.conf" >"$T/out" 2>"$T/err" || die "--check: $(cat "$T/err")"
grep -q "expires in" "$T/err" && pass "--check warns of the certificate's expiry" ||
	fail "--check: no expiry warning: $(cat "$T/err")"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"

as() { # as NAME ARGS...: rdmacp with NAME's certificate
	local who=$1
	shift
	"$RDMACP" --config /dev/null --cert "$C/$who.crt" --key "$C/$who.key" --ca "$C/ca.crt" \
		-P "$PORT" "$@"
}
# wait_reloads N: until the daemon has logged N reloads.
wait_reloads() {
	for _ in $(seq 1 100); do
		[ "$(grep -c "reloaded" "$T/d.log")" -ge "$1" ] && return 0
		sleep 0.05
	done
	fail "no reload logged: $(tail -3 "$T/d.log")"
}
echo "payload $RANDOM" >"$T/f"

# ---- 1 ----
expect_rc 0 "client copies to a daemon with the issued server certificate" as client "$T/f" "$HOST:data/c1"
cmp -s "$T/f" "$T/data/c1" && pass "the file arrived" || fail "the file did not arrive"

# ---- 2 ----
expect_rc 24 "revoked bob is refused" as bob "$T/f" "$HOST:data/b1"
grep -q "certificate revoked" "$T/err" && pass "bob is told 'certificate revoked'" ||
	fail "bob's message: $(cat "$T/err")"
[ ! -e "$T/data/b1" ] && pass "nothing of bob's arrived" || fail "bob's file arrived"
sleep 0.3
grep -q "certificate revoked.*CN=bob" "$T/d.log" && pass "the daemon logs bob's certificate as revoked" ||
	fail "no log line naming bob as revoked: $(tail -5 "$T/d.log")"

# ---- 3 ----
expect_rc 3 "carol, on [global]'s deny list, is refused" as carol "$T/f" "$HOST:data/k1"
grep -q "denied by the daemon's deny list" "$T/err" && pass "carol is told she is denied" ||
	fail "carol's message: $(cat "$T/err")"
[ ! -e "$T/data/k1" ] && pass "nothing of carol's arrived" || fail "carol's file arrived"
grep -q "CN=carol.*deny list" "$T/d.log" && pass "the daemon logs carol's refusal" ||
	fail "no log line naming carol: $(tail -5 "$T/d.log")"

# ---- 4 ----
expect_rc 3 "dave, on [data]'s deny list by fingerprint, is refused there" as dave "$T/f" "$HOST:data/d1"
grep -q "denied by the daemon's deny list" "$T/err" && pass "dave is told he is denied" ||
	fail "dave's message: $(cat "$T/err")"
grep -q "(CN=dave sha256:.*refused: module 'data': this client's certificate is denied by the daemon's deny list" \
	"$T/d.log" && pass "the daemon logs dave's refusal in [data]" ||
	fail "no log line naming dave: $(tail -5 "$T/d.log")"
expect_rc 0 "dave copies to [other]" as dave "$T/f" "$HOST:other/d1"
as dave ls "$HOST:" >"$T/ls" 2>&1
grep -q "other" "$T/ls" || fail "dave's module list: $(cat "$T/ls")"
grep -q "^data" "$T/ls" && fail "dave sees [data] in the module list" ||
	pass "dave does not see [data] in the module list"

# ---- 5 ----
expect_rc 1 "revoke by fingerprint without --ca-dir" "$RDMACP" certs revoke "$DAVE_FP"
expect_rc 0 "certs revoke FINGERPRINT --ca-dir" "$RDMACP" certs revoke "$DAVE_FP" --ca-dir "$C"
kill -HUP "$DAEMON_PID"
wait_reloads 1
expect_rc 24 "after the reload, dave is refused as revoked" as dave "$T/f" "$HOST:other/d2"
expect_rc 0 "client still copies" as client "$T/f" "$HOST:data/c2"

# ---- 6 ----
grep -q "ready, certificate CN=127.0.0.1 expires 20" "$T/d.log" &&
	pass "the start line says when the certificate expires" ||
	fail "start line: $(grep ready "$T/d.log")"
n=$(grep -c "certificate $C/127.0.0.1.crt (CN=127.0.0.1) expires in 82[0-9] days" "$T/d.log")
[ "$n" -ge 2 ] && pass "warned of the expiry at start and at reload ($n)" ||
	fail "expiry warnings: $n: $(grep -i expire "$T/d.log")"

# ---- 7 ----
cp "$C/127.0.0.1.crt" "$T/srv.before"
expect_rc 0 "certs renew the server certificate" "$RDMACP" certs renew "$C/127.0.0.1.crt" --days 400
cmp -s "$T/srv.before" "$C/127.0.0.1.crt.old" && pass "the old certificate is kept as .old" ||
	fail "no .old copy of the old certificate"
kill -HUP "$DAEMON_PID"
wait_reloads 2
grep -qE "expires in (399|400) days" "$T/d.log" && pass "the reload sees the renewed certificate" ||
	fail "no warning for the renewed certificate: $(grep -i expire "$T/d.log" | tail -2)"
expect_rc 0 "client copies after the renewal" as client "$T/f" "$HOST:data/c3"
expect_rc 0 "client pins the renewed certificate" as client --pin \
	"$("$RDMACP" certs show "$C/127.0.0.1.crt" | awk '/^fingerprint:/ { print $2 }')" \
	"$T/f" "$HOST:data/c4"

# ---- 8 ----
"$RDMACP" certs init "$T/other-ca" >/dev/null || die "certs init other-ca"
"$RDMACP" certs revoke "$T/other-ca/client.crt" >/dev/null || die "revoke in other-ca"
sed "s|^crl = .*|crl = $T/other-ca/crl.pem|" "$T/d.conf" >"$T/bad.conf"
expect_rc 2 "--check refuses a CRL of another CA" "$RDMACPD" --check --config "$T/bad.conf"
grep -q "not signed by a CA" "$T/err" && pass "and says why" || fail "message: $(cat "$T/err")"
sed "s|^deny = carol|deny = carol, bad/name|" "$T/d.conf" >"$T/bad.conf"
expect_rc 2 "--check refuses a bad 'deny' entry" "$RDMACPD" --check --config "$T/bad.conf"

# ---- 9 ----
"$RDMACP" certs issue "$C" --client soon --days 10 >/dev/null || die "certs issue soon"
"$RDMACP" certs issue "$C" --client gone --days 1 --backdate 3 >/dev/null || die "certs issue gone"
doc() { # doc NAME ARGS...: rdmacp doctor with NAME's certificate
	local who=$1
	shift
	"$RDMACP" --config /dev/null --cert "$C/$who.crt" --key "$C/$who.key" --ca "$C/ca.crt" doctor "$@"
}
expect_rc 0 "doctor with a certificate good for 825 days" doc client
grep -q "expires in" "$T/out" && fail "doctor warns of a far expiry: $(grep expires "$T/out")" ||
	pass "no expiry warning for a far expiry"
expect_rc 0 "doctor with a certificate good for 10 days (a warning)" doc soon
grep -qE "^warning: client certificate $C/soon.crt \(CN=soon\) expires in (9|10) days" "$T/out" &&
	pass "doctor warns of the client certificate expiring in 10 days" ||
	fail "doctor: $(grep -i cert "$T/out")"
expect_rc 6 "doctor with an expired certificate (an error)" doc gone
grep -q "^ERROR: client certificate $C/gone.crt (CN=gone) expired on" "$T/out" &&
	pass "doctor says the client certificate expired" || fail "doctor: $(grep -i cert "$T/out")"
expect_rc 0 "doctor with the daemon's config" doc client --json "$T/d.conf"
jq -e '.problems[] | select(.what | test("daemon certificate .*127.0.0.1.crt .* expires in"))' \
	"$T/out" >/dev/null && pass "doctor warns of the daemon's certificate within 'cert warn days'" ||
	fail "doctor --json: $(jq -c .problems "$T/out")"
expect_rc 1 "doctor with a daemon config that is not there" doc client "$T/no-such.conf"

stop_daemon "$DAEMON_PID"

# ---- 10 ----
PORT=$(free_port)
sed "s|^listen = .*|listen = $HOST:$PORT|" "$T/d.conf" >"$T/d2.conf"
RDMACP_TEST_CERT_CHECK_MS=300 start_daemon "$T/d2.conf" "$T/d2.log" "$PORT"
sleep 1.5
n=$(grep -c "certificate $C/127.0.0.1.crt (CN=127.0.0.1) expires in" "$T/d2.log")
[ "$n" -ge 3 ] && pass "a running daemon warns again on its own ($n warnings in 1.5 s)" ||
	fail "the periodic look: $n warnings: $(cat "$T/d2.log")"
grep -q "reloaded" "$T/d2.log" && fail "the daemon reloaded (the warnings are not the periodic look's)"
stop_daemon "$DAEMON_PID"
finish
