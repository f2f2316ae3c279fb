#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Seal suites of tcp lanes (PROTO_CAP_SEAL_SUITES), against real daemons on loopback:
#   1. each suite the daemon's "cipher" pins (aes-256-gcm, aes-128-gcm,
#      chacha20-poly1305): a push and a pull arrive byte for byte, the wire
#      (the transport's test tee) holds no plaintext, the --json start event,
#      -v and the daemon's log name the suite, and rdmacp bench is sealed
#      with it and verified
#   2. under each suite a flipped, replayed, moved or truncated frame fails
#      the transfer with "failed authentication", exit 8, nothing committed
#   3. a client without the capability (RDMACP_TEST_CAPS_OFF) gets
#      AES-256-GCM from a daemon pinned to another suite, and so does a
#      client of a daemon without it; both arrive intact
#   4. auto: the daemon's start line names the suite it measured fastest,
#      and a transfer uses it
#   5. a lanes byte naming a suite from a daemon the client never told it
#      knows suites, or beyond the suites: protocol error (exit 4); a bad
#      "cipher" value: the configuration is refused (exit 2)
#   6. verbs lanes sealed with a suite (the engines seal slots with it): a
#      client with the capability takes the byte (its lanes then fail to
#      connect here, exit 8, no RDMA device); without it, without slot
#      suites, or without sealed verbs slots, a protocol error (exit 4)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1
SUITES="aes-256-gcm aes-128-gcm chacha20-poly1305"
declare -A TITLE=([aes-256-gcm]=AES-256-GCM [aes-128-gcm]=AES-128-GCM
	[chacha20-poly1305]=ChaCha20-Poly1305)
SEAL_SUITES=$((1 << 35))

make_certs "$T/certs"
mkdir -p "$T/mod" "$T/src"
awk 'BEGIN { for (i = 0; i < 90000; i++) printf "RDMACP-PLAINTEXT-MARKER-%08d-known-text\n", i }' \
	>"$T/src/known" || die "write known"
# Not a multiple of any block or piece size: the last piece of each frame is short.
head -c 5000011 /dev/urandom >"$T/src/odd" || die "write odd"
MARK=RDMACP-PLAINTEXT-MARKER

check() {
	local desc=$1
	shift
	if "$@"; then pass "$desc"; else fail "$desc"; fi
}
start_enc() { jq -r 'select(.event == "start") | .encryption' "$T/out"; }

# daemon NAME [global lines...]: a daemon with module data; its port in DPORT, client in C.
daemon() {
	local name=$1
	shift
	DPORT=$(free_port)
	write_conf "$T/$name.conf" "$DPORT" "$T/certs" "allow bench = client" "$@"
	printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/$name.conf"
	start_daemon "$T/$name.conf" "$T/$name.log" "$DPORT"
	C=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" -P "$DPORT" --transport tcp)
}

# ---- 1. and 2. each suite, pinned ---------------------------------------------
for suite in $SUITES; do
	RDMACPD_TEST_LANE_TEE=$T/dtee.$suite daemon "d_$suite" "cipher = $suite"
	D=$DAEMON_PID
	grep -q "sealed tcp lanes: ${TITLE[$suite]} (cipher)" "$T/d_$suite.log" &&
		pass "$suite: the daemon says it is pinned" || fail "$suite: $(head -5 "$T/d_$suite.log")"
	rm -f "$T/tee.$suite"
	RDMACP_TEST_LANE_TEE=$T/tee.$suite expect_rc 0 "$suite: push" \
		"${C[@]}" --json "$T/src/known" "$T/src/odd" "$HOST:data/$suite/"
	cmp -s "$T/src/known" "$T/mod/$suite/known" && cmp -s "$T/src/odd" "$T/mod/$suite/odd" &&
		pass "$suite: push arrives byte for byte" || fail "$suite: pushed files differ"
	check "$suite: --json start names it" test "$(start_enc)" = "$suite"
	check "$suite: no plaintext on the wire" test "$(grep -c -a "$MARK" "$T/tee.$suite")" -eq 0
	grep -q "push to data: 2 tcp lanes, encrypted (${TITLE[$suite]})" "$T/d_$suite.log" &&
		pass "$suite: the daemon's log names it" || fail "$suite: $(grep ' lanes' "$T/d_$suite.log")"
	expect_rc 0 "$suite: pull, -v" "${C[@]}" -v "$HOST:data/$suite/odd" "$T/pulled.$suite"
	cmp -s "$T/src/odd" "$T/pulled.$suite" && pass "$suite: pull arrives byte for byte" ||
		fail "$suite: pulled file differs"
	grep -q "data lanes encrypted (${TITLE[$suite]})" "$T/err" && pass "$suite: -v names it" ||
		fail "$suite: -v: $(cat "$T/err")"
	check "$suite: daemon's lanes, no plaintext" test "$(grep -c -a "$MARK" "$T/dtee.$suite")" -eq 0
	expect_rc 0 "$suite: bench" "${C[@]}" bench --size 16M --json "$HOST"
	jq -e --arg s "$suite" '.encryption == $s and .verified == true' "$T/out" >/dev/null &&
		pass "$suite: bench sealed with it, verified" || fail "$suite: bench: $(cat "$T/out")"
	for how in flip replay move truncate; do
		RDMACP_TEST_LANE_TAMPER=$how expect_rc 8 "$suite: push, a $how frame" \
			"${C[@]}" --lanes 1 "$T/src/known" "$HOST:data/t_${suite}_$how"
		grep -q "failed authentication" "$T/err" && pass "$suite $how: failed authentication" ||
			fail "$suite $how: message: $(cat "$T/err")"
		check "$suite $how: nothing committed" test ! -e "$T/mod/t_${suite}_$how"
	done
	stop_daemon "$D"
	RDMACPD_TEST_LANE_TAMPER=flip daemon "dt_$suite" "cipher = $suite"
	expect_rc 8 "$suite: pull, the daemon flips a bit" "${C[@]}" --lanes 1 \
		"$HOST:data/$suite/known" "$T/pulled_bad.$suite"
	grep -q "failed authentication" "$T/err" && pass "$suite pull flip: failed authentication" ||
		fail "$suite pull flip: message: $(cat "$T/err")"
	check "$suite pull flip: nothing committed" test ! -e "$T/pulled_bad.$suite"
	stop_daemon "$DAEMON_PID"
done

# ---- 3. peers without the capability: AES-256-GCM -----------------------------
daemon d_old_client "cipher = chacha20-poly1305"
RDMACP_TEST_CAPS_OFF=$SEAL_SUITES expect_rc 0 "old client, daemon pinned to chacha20-poly1305" \
	"${C[@]}" --json "$T/src/odd" "$HOST:data/old_client"
check "  aes-256-gcm" test "$(start_enc)" = aes-256-gcm
cmp -s "$T/src/odd" "$T/mod/old_client" && pass "  arrives intact" || fail "  old_client differs"
grep -q "push to data: 2 tcp lanes, encrypted (AES-256-GCM)" "$T/d_old_client.log" &&
	pass "  the daemon's log says AES-256-GCM" || fail "  $(grep ' lanes' "$T/d_old_client.log")"
stop_daemon "$DAEMON_PID"
RDMACP_TEST_CAPS_OFF=$SEAL_SUITES daemon d_old "cipher = aes-128-gcm"
expect_rc 0 "old daemon (pinned to aes-128-gcm, without the capability)" \
	"${C[@]}" --json "$T/src/odd" "$HOST:data/old_daemon"
check "  aes-256-gcm" test "$(start_enc)" = aes-256-gcm
cmp -s "$T/src/odd" "$T/mod/old_daemon" && pass "  arrives intact" || fail "  old_daemon differs"
stop_daemon "$DAEMON_PID"

# ---- 4. auto ---------------------------------------------------------------------
daemon d_auto
picked=$(sed -n 's/.*sealed tcp lanes: \([^,]*\), the fastest here.*/\1/p' "$T/d_auto.log")
[ -n "$picked" ] && pass "auto: the daemon measured and picked $picked" ||
	fail "auto: no choice logged: $(head -5 "$T/d_auto.log")"
expect_rc 0 "auto: push" "${C[@]}" --json "$T/src/odd" "$HOST:data/auto"
want=$(for s in $SUITES; do [ "${TITLE[$s]}" = "$picked" ] && echo "$s"; done)
check "auto: the transfer uses it ($want)" test "$(start_enc)" = "$want"
cmp -s "$T/src/odd" "$T/mod/auto" && pass "auto: arrives intact" || fail "auto differs"
stop_daemon "$DAEMON_PID"

# ---- 5. lanes bytes the client did not ask for; a bad "cipher" --------------------
# rawserver: every capability up to TRANSFER_KEYS (ENCRYPT included), OPEN_OK's lanes byte 4.
lanes_byte() {
	local code=$1 desc=$2 says=$3
	shift 3
	lanes_byte_rc 1 4 "$code" "$desc" "$says" "$@"
}
lanes_byte_rc() {
	local transport=$1 rc=$2 code=$3 desc=$4 says=$5
	shift 5
	start_rawserver --mode lanes-byte --caps $(((1 << 31) - 1)) --code "$code" \
		--transport "$transport"
	expect_rc "$rc" "$desc" "$@" "$RDMACP" --config /dev/null --cert "$T/certs/client.crt" \
		--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" \
		--transport tcp "$T/src/odd" "$HOST:data/x"
	kill "$RS_PID" 2>/dev/null
	wait "$RS_PID" 2>/dev/null
	grep -q "$says" "$T/err" && pass "  says: $says" || fail "  message: $(cat "$T/err")"
}
lanes_byte 4 "chacha20-poly1305 offered to a client without the capability" \
	"OPEN_OK does not answer what we asked for the data lanes" \
	env RDMACP_TEST_CAPS_OFF=$SEAL_SUITES
lanes_byte 5 "a lanes byte beyond the suites" "control channel: Bad message" env

# ---- 6. verbs lanes sealed with a suite ------------------------------------------
for code in 3 4; do
	lanes_byte_rc 2 8 "$code" "verbs lanes, lanes byte $code: taken" "data connection (verbs" env
	! grep -q "does not answer" "$T/err" && pass "  not a protocol error" ||
		fail "  refused: $(cat "$T/err")"
done
lanes_byte_rc 2 4 4 "verbs lanes, chacha20-poly1305, client without seal suites" \
	"OPEN_OK does not answer what we asked for the data lanes" \
	env RDMACP_TEST_CAPS_OFF=$SEAL_SUITES
lanes_byte_rc 2 4 3 "verbs lanes, aes-128-gcm, client without sealed verbs slots" \
	"OPEN_OK does not answer what we asked for the data lanes" \
	env RDMACP_TEST_CAPS_OFF=$((1 << 22))
lanes_byte_rc 2 4 3 "verbs lanes, aes-128-gcm, client without slot suites (a client of before)" \
	"OPEN_OK does not answer what we asked for the data lanes" \
	env RDMACP_TEST_CAPS_OFF=$((1 << 37))

write_conf "$T/bad.conf" "$(free_port)" "$T/certs" "cipher = aes-512-gcm"
expect_rc 2 "cipher = aes-512-gcm: refused" "$RDMACPD" --config "$T/bad.conf" --check
grep -q "bad 'cipher' 'aes-512-gcm'" "$T/err" && pass "  says so" || fail "  $(cat "$T/err")"

finish
