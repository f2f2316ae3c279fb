#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The TLS control channel (SECURITY.md D26) and the client's exit codes for
# authentication, version, config and connect failures: TLS 1.2, no client
# certificate, wrong CA (both directions), expired certificate, host name
# mismatch, certificate pins, protocol version mismatch.
#
# Each refusal must give the documented exit code (src/exitcodes.h) and a
# clear message on the client, and a reason in the daemon's log.
#
# Exit 0 pass, 1 fail, 77 skip.
source "$(dirname "$0")/lib.sh"

command -v openssl >/dev/null || skip "openssl command not found"

setup_standard
CERTS=$T/certs

# Log assertions look only at what the daemon logged since mark_log.
mark_log() { LOG_MARK=$(wc -l <"${1:-$T/d.log}"); LOG_FILE=${1:-$T/d.log}; }
log_since_has() {
	local pat=$1 desc=$2
	# The child logs just before it exits: give it a moment.
	for _ in $(seq 1 20); do
		tail -n +"$((LOG_MARK + 1))" "$LOG_FILE" | grep -q -i -- "$pat" && break
		sleep 0.05
	done
	if tail -n +"$((LOG_MARK + 1))" "$LOG_FILE" | grep -q -i -- "$pat"; then
		pass "$desc: daemon log: $(tail -n +"$((LOG_MARK + 1))" "$LOG_FILE" | grep -i -- "$pat" | head -1)"
	else
		fail "$desc: daemon log has no line matching '$pat'"
		tail -n +"$((LOG_MARK + 1))" "$LOG_FILE" | sed 's/^/    log: /'
	fi
}
# stderr_has PATTERN DESC: the last expect_rc's stderr.
stderr_has() {
	if grep -q -i -- "$1" "$T/err"; then
		pass "$2: client says: $(head -1 "$T/err")"
	else
		fail "$2: client stderr lacks '$1'"
		sed 's/^/    stderr: /' "$T/err"
	fi
}
# client CERT KEY CA: rdmacp with other credentials, same port.
client() {
	local cert=$1 key=$2 ca=$3
	shift 3
	"$RDMACP" --config /dev/null --cert "$cert" --key "$key" --ca "$ca" -P "$PORT" "$@"
}

# 1. Happy path.
expect_rc 0 "1 ping 127.0.0.1" "${CLIENT[@]}" ping 127.0.0.1
if grep -q "protocol 1" "$T/out"; then
	pass "1 ping prints 'protocol 1': $(cat "$T/out")"
else
	fail "1 ping output lacks 'protocol 1': $(cat "$T/out")"
fi

# 2. TLS 1.2 (with a valid client certificate) is refused by the daemon.
mark_log
openssl s_client -tls1_2 -connect "127.0.0.1:$PORT" -cert "$CERTS/client.crt" \
	-key "$CERTS/client.key" -CAfile "$CERTS/ca.crt" </dev/null >"$T/s12" 2>&1
rc=$?
# s_client prints an (empty) SSL-Session with "Protocol  : TLSv1.2" even when
# the handshake failed; a success shows a cipher in "New, TLSv1.2, Cipher is X".
if [ "$rc" -ne 0 ] && ! grep -q "^New, TLSv1" "$T/s12" && grep -q "Cipher is (NONE)" "$T/s12"; then
	pass "2 TLS 1.2 handshake refused (s_client exit $rc, $(grep -o 'alert [a-z ]*' "$T/s12" | head -1))"
else
	fail "2 TLS 1.2 handshake not refused (s_client exit $rc)"
	sed 's/^/    /' "$T/s12" | head -20
fi
log_since_has "TLS 1.3 required" "2 TLS 1.2"

# 3a. No client certificate (TLS 1.3). In TLS 1.3 the client's side of the
#     handshake completes before the daemon's verdict, so we judge by the
#     daemon: it must log why it refused, and must not have served a session.
mark_log
openssl s_client -tls1_3 -connect "127.0.0.1:$PORT" -CAfile "$CERTS/ca.crt" </dev/null \
	>"$T/s13" 2>&1
log_since_has "did not send a certificate" "3a no client certificate"
if tail -n +"$((LOG_MARK + 1))" "$T/d.log" | grep -q "connected ("; then
	fail "3a a client without a certificate got a session"
else
	pass "3a no session for a client without a certificate"
fi

# 3b. A client certificate from a different CA.
"$RDMACP" certs init "$T/other" >/dev/null || die "certs init other"
mark_log
expect_rc 3 "3b client certificate from another CA" \
	client "$T/other/client.crt" "$T/other/client.key" "$CERTS/ca.crt" ping 127.0.0.1
stderr_has "refused our certificate" "3b"
log_since_has "unable to get local issuer certificate" "3b"

# 3c. The client does not trust the daemon's CA.
mark_log
expect_rc 3 "3c daemon certificate from a CA the client does not trust" \
	client "$CERTS/client.crt" "$CERTS/client.key" "$T/other/ca.crt" ping 127.0.0.1
stderr_has "certificate verify failed" "3c"
log_since_has "peer rejected our certificate\|unknown ca" "3c"

# 4. Expired client certificate (valid for 1 day, 10 days ago).
"$RDMACP" certs issue "$CERTS" --client old --days 1 --backdate 10 >/dev/null ||
	die "certs issue --backdate"
mark_log
expect_rc 3 "4 expired client certificate" \
	client "$CERTS/old.crt" "$CERTS/old.key" "$CERTS/ca.crt" ping 127.0.0.1
stderr_has "expired" "4"
log_since_has "certificate has expired" "4"

# 5. Host names. The server certificate names localhost, 127.0.0.1 and ::1.
expect_rc 0 "5a ping localhost (in the certificate)" "${CLIENT[@]}" ping localhost
# A second daemon, same certificates, also listening on 127.0.0.2 (loopback,
# but not in the certificate).
P5=$(free_port)
write_conf "$T/d5.conf" "$P5" "$CERTS" "listen = 127.0.0.2:$P5" "handshake timeout = 5"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d5.conf"
start_daemon "$T/d5.conf" "$T/d5.log" "$P5"
mark_log "$T/d5.log"
expect_rc 3 "5b ping 127.0.0.2 (not in the certificate)" "${CLIENT[@]}" -P "$P5" ping 127.0.0.2
stderr_has "mismatch" "5b"
log_since_has "peer rejected our certificate" "5b"
FP=$(openssl x509 -in "$CERTS/server.crt" -outform DER | sha256sum | cut -d' ' -f1)
BADFP=$(echo not-the-server | sha256sum | cut -d' ' -f1)
expect_rc 0 "5c ping 127.0.0.2 --pin sha256:<server.crt> (pin replaces the name check)" \
	"${CLIENT[@]}" -P "$P5" --pin "sha256:$FP" ping 127.0.0.2
expect_rc 3 "5d ping 127.0.0.2 with a wrong pin" "${CLIENT[@]}" -P "$P5" --pin "sha256:$BADFP" ping 127.0.0.2
stderr_has "pin mismatch" "5d"
expect_rc 3 "5e ping localhost (name ok) with a wrong pin" \
	"${CLIENT[@]}" --pin "sha256:$BADFP" ping localhost
stderr_has "pin mismatch" "5e"
# A pin does not replace the CA check: a daemon whose certificate comes from
# a CA the client does not trust is refused even when the pin matches it.
P6=$(free_port)
write_conf "$T/d6.conf" "$P6" "$CERTS" "handshake timeout = 5"
sed -i "s|^cert = .*|cert = $T/other/server.crt|; s|^key = .*|key = $T/other/server.key|" "$T/d6.conf"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d6.conf"
start_daemon "$T/d6.conf" "$T/d6.log" "$P6"
FP6=$(openssl x509 -in "$T/other/server.crt" -outform DER | sha256sum | cut -d' ' -f1)
expect_rc 3 "5f matching pin but untrusted CA" "${CLIENT[@]}" -P "$P6" --pin "sha256:$FP6" ping 127.0.0.1
stderr_has "certificate verify failed" "5f"

# 6. Protocol version mismatch: a client from the future (speaks only 2).
mark_log
expect_rc 12 "6 client speaking only protocol 2" env RDMACP_TEST_PROTO_VERSION=2 \
	"${CLIENT[@]}" ping 127.0.0.1
stderr_has "version" "6"
log_since_has "version mismatch" "6"

# 7. Client config errors.
printf '[client]\nport = %s\nno such key = 1\n' "$PORT" >"$T/BAD"
expect_rc 2 "7a --config with an unknown key on line 3" "$RDMACP" --config "$T/BAD" ping 127.0.0.1
stderr_has "BAD:3:" "7a"
expect_rc 2 "7b nonexistent --cert" client "$T/nonexistent.crt" "$CERTS/client.key" \
	"$CERTS/ca.crt" ping 127.0.0.1
stderr_has "nonexistent.crt" "7b"

# 8. Nothing listening.
NOPORT=$(free_port)
expect_rc 11 "8 connection refused" "${CLIENT[@]}" -P "$NOPORT" ping 127.0.0.1
stderr_has "cannot connect" "8"

if [ "$FAILS" -ne 0 ]; then
	for l in d5 d6; do
		[ -f "$T/$l.log" ] && { echo "$l.log:"; sed 's/^/    /' "$T/$l.log" | tail -15; }
	done
fi
finish
