#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Encrypted tcp data lanes, against real daemons on loopback:
#   1. what a lane sends (the transport's test tee, RDMACP_TEST_LANE_TEE /
#      RDMACPD_TEST_LANE_TEE: tcpdump would need root and a capture parser)
#      holds no plaintext of a known file when sealed (push and pull, the
#      default), and does with --no-encrypt; two sealed sessions of the same
#      file send different bytes (keys differ per session)
#   2. a flipped ciphertext bit, a replayed frame, a frame moved to another
#      slot, a truncated frame (the sender's test hook, RDMACP_TEST_LANE_TAMPER;
#      a pull's through the daemon's RDMACPD_TEST_LANE_TAMPER): the transfer
#      fails with "failed authentication", exit 8, and nothing is committed
#   3. negotiation: default, --encrypt, --no-encrypt against modules with
#      encryption = allowed (the default), required and off, from [global]
#      too; an older client (RDMACP_TEST_CAPS_OFF) and an older daemon
#      (the same, and rawserver.py without the capability: no OPEN sent);
#      --encrypt --transport verbs is not refused for its encryption (the VM
#      test seals verbs lanes); a dry run moves no data and is not refused.
#      What was chosen shows in -v, the --json start event and the daemon's
#      log line.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1

mkdir -p "$T/req" "$T/off" "$T/src"
setup_standard "" "[req]" "path = $T/req" "allow = client" "encryption = required" \
	"" "[off]" "path = $T/off" "allow = client" "encryption = off"

# A known file: 3 MiB of numbered marker lines (several chunks), easy to find in a capture.
awk 'BEGIN { for (i = 0; i < 90000; i++) printf "RDMACP-PLAINTEXT-MARKER-%08d-known-text\n", i }' \
	>"$T/src/known" || die "write known"
MARK=RDMACP-PLAINTEXT-MARKER

# check DESC CMD...: pass when CMD succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then pass "$desc"; else fail "$desc"; fi
}

start_enc() { jq -r 'select(.event == "start") | .encryption' "$T/out"; }
last_lanes() { grep ' lanes, ' "$T/d.log" | tail -1; }

# ---- 1. the wire: ciphertext only ------------------------------------------
rm -f "$T/tee1"
RDMACP_TEST_LANE_TEE=$T/tee1 expect_rc 0 "push, default (sealed), lanes teed" \
	"${CLIENT[@]}" --json "$T/src/known" "$HOST:data/k1"
cmp -s "$T/src/known" "$T/mod/k1" && pass "sealed push arrives intact" || fail "k1 differs"
check "tee captured the lane ($(stat -c %s "$T/tee1" 2>/dev/null) bytes)" \
	test "$(stat -c %s "$T/tee1" 2>/dev/null || echo 0)" -gt 3000000
check "sealed lane: no plaintext on the wire" test "$(grep -c -a "$MARK" "$T/tee1")" -eq 0
check "--json start: encryption $(daemon_cipher "$T/d.log")" test "$(start_enc)" = "$(daemon_cipher "$T/d.log")"
[[ $(last_lanes) == *"push to data: 2 tcp lanes, encrypted ($(daemon_cipher_title "$T/d.log"))" ]] &&
	pass "daemon log: lanes encrypted" || fail "daemon line: $(last_lanes)"

rm -f "$T/tee2"
RDMACP_TEST_LANE_TEE=$T/tee2 expect_rc 0 "the same push again" \
	"${CLIENT[@]}" -q "$T/src/known" "$HOST:data/k2"
differ() { ! cmp -s "$1" "$2"; }
check "another session, other keys: other bytes on the wire" differ "$T/tee1" "$T/tee2"

rm -f "$T/tee3"
RDMACP_TEST_LANE_TEE=$T/tee3 expect_rc 0 "push --no-encrypt, lanes teed" \
	"${CLIENT[@]}" --json --no-encrypt "$T/src/known" "$HOST:data/k3"
check "clear lane: the plaintext is on the wire" test "$(grep -c -a "$MARK" "$T/tee3")" -gt 1000
check "--json start: encryption none" test "$(start_enc)" = none
[[ $(last_lanes) == *"push to data: 2 tcp lanes, in clear" ]] &&
	pass "daemon log: lanes in clear" || fail "daemon line: $(last_lanes)"

# A pull: the daemon sends; a second daemon tees its lanes.
DPORT=$(free_port)
write_conf "$T/d2.conf" "$DPORT" "$T/certs"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d2.conf"
RDMACPD_TEST_LANE_TEE=$T/dtee start_daemon "$T/d2.conf" "$T/d2.log" "$DPORT"
D2=$DAEMON_PID
C2=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$DPORT")
expect_rc 0 "pull, default (sealed)" "${C2[@]}" -q "$HOST:data/k1" "$T/pulled1"
cmp -s "$T/src/known" "$T/pulled1" && pass "sealed pull arrives intact" || fail "pulled1 differs"
check "daemon's lanes: no plaintext on the wire" test "$(grep -c -a "$MARK" "$T/dtee")" -eq 0
: >"$T/dtee"
expect_rc 0 "pull --no-encrypt" "${C2[@]}" -q --no-encrypt "$HOST:data/k1" "$T/pulled2"
check "daemon's clear lanes: plaintext on the wire" test "$(grep -c -a "$MARK" "$T/dtee")" -gt 1000
stop_daemon "$D2"

# ---- 2. spoiled frames: refused, nothing committed --------------------------
for how in flip replay move truncate; do
	# One lane: the first payload frame is the session's first, its neighbour slot unheld.
	RDMACP_TEST_LANE_TAMPER=$how expect_rc 8 "push, a $how frame" \
		"${CLIENT[@]}" --lanes 1 "$T/src/known" "$HOST:data/t_$how"
	grep -q "failed authentication" "$T/err" && pass "$how: says the frame failed authentication" ||
		fail "$how: message: $(cat "$T/err")"
	check "$how: nothing committed" test ! -e "$T/mod/t_$how"
done
grep -q "transfer failed: TRANSPORT: .*failed authentication" "$T/d.log" &&
	pass "daemon log names the failure" || fail "daemon log lacks the failure"
check "no temp file left in the module" test -z "$(find "$T/mod" -name '*t_*' -print -quit)"

DPORT=$(free_port)
write_conf "$T/d3.conf" "$DPORT" "$T/certs"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d3.conf"
RDMACPD_TEST_LANE_TAMPER=flip start_daemon "$T/d3.conf" "$T/d3.log" "$DPORT"
D3=$DAEMON_PID
C3=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$DPORT")
expect_rc 8 "pull, the daemon flips a bit" "${C3[@]}" --lanes 1 "$HOST:data/k1" "$T/pulled_bad"
grep -q "failed authentication" "$T/err" && pass "pull: says the frame failed authentication" ||
	fail "pull: message: $(cat "$T/err")"
check "pull: nothing committed" test ! -e "$T/pulled_bad"
stop_daemon "$D3"

# ---- 3. negotiation ---------------------------------------------------------
expect_rc 0 "--encrypt to an allowed module" "${CLIENT[@]}" --json --encrypt "$T/src/known" \
	"$HOST:data/n1"
check "  sealed" test "$(start_enc)" = "$(daemon_cipher "$T/d.log")"
expect_rc 0 "default to a required module" "${CLIENT[@]}" --json "$T/src/known" "$HOST:req/n2"
check "  sealed" test "$(start_enc)" = "$(daemon_cipher "$T/d.log")"
expect_rc 20 "--no-encrypt to a required module" "${CLIENT[@]}" --no-encrypt "$T/src/known" \
	"$HOST:req/n3"
grep -q "requires encrypted data lanes" "$T/err" && pass "  says so" || fail "  $(cat "$T/err")"
check "  nothing written" test ! -e "$T/req/n3"
expect_rc 0 "--no-encrypt dry run to a required module (no data moves)" \
	"${CLIENT[@]}" -n --no-encrypt "$T/src/known" "$HOST:req/n3"
expect_rc 0 "default to an off module: clear" "${CLIENT[@]}" -v "$T/src/known" "$HOST:off/n4"
grep -q "data lanes not encrypted (the daemon's module has encryption = off)" "$T/err" &&
	pass "  -v says why" || fail "  -v: $(cat "$T/err")"
expect_rc 20 "--encrypt to an off module" "${CLIENT[@]}" --encrypt "$T/src/known" "$HOST:off/n5"
grep -q "does not encrypt data lanes" "$T/err" && pass "  says so" || fail "  $(cat "$T/err")"
expect_rc 0 "-v says sealed" "${CLIENT[@]}" -v "$T/src/known" "$HOST:data/n6"
grep -q "data lanes encrypted ($(daemon_cipher_title "$T/d.log"))" "$T/err" && pass "  -v line" ||
	fail "  $(cat "$T/err")"
# verbs lanes are sealed too (slot by slot, by the engine): what stops this here is
# the missing RDMA device, not the encryption. The Soft-RoCE VM runs them sealed.
expect_rc 13 "--encrypt --transport verbs (no RDMA device here)" "${CLIENT[@]}" --encrypt \
	--transport verbs "$T/src/known" "$HOST:data/n7"
grep -q "encrypt" "$T/err" && fail "  refused for encryption: $(cat "$T/err")" || pass "  not refused for encryption"

# A client from before encryption.
RDMACP_TEST_CAPS_OFF=0x20000 expect_rc 20 "older client to a required module" \
	"${CLIENT[@]}" "$T/src/known" "$HOST:req/n8"
grep -q "this client cannot encrypt them" "$T/err" && pass "  says so" || fail "  $(cat "$T/err")"
RDMACP_TEST_CAPS_OFF=0x20000 expect_rc 0 "older client to an allowed module: clear" \
	"${CLIENT[@]}" --json "$T/src/known" "$HOST:data/n9"
check "  clear" test "$(start_enc)" = none

# A daemon from before encryption, and [global] encryption = required.
DPORT=$(free_port)
write_conf "$T/d4.conf" "$DPORT" "$T/certs"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d4.conf"
RDMACP_TEST_CAPS_OFF=0x20000 start_daemon "$T/d4.conf" "$T/d4.log" "$DPORT"
D4=$DAEMON_PID
C4=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$DPORT")
expect_rc 12 "--encrypt to an older daemon" "${C4[@]}" --encrypt "$T/src/known" "$HOST:data/o1"
grep -q "too old for --encrypt" "$T/err" && pass "  says so" || fail "  $(cat "$T/err")"
expect_rc 0 "default to an older daemon: clear" "${C4[@]}" -v "$T/src/known" "$HOST:data/o2"
grep -q "data lanes not encrypted (the daemon is too old to encrypt them)" "$T/err" &&
	pass "  -v says why" || fail "  -v: $(cat "$T/err")"
stop_daemon "$D4"
DPORT=$(free_port)
write_conf "$T/d5.conf" "$DPORT" "$T/certs" "encryption = required"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d5.conf"
start_daemon "$T/d5.conf" "$T/d5.log" "$DPORT"
C5=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$DPORT")
expect_rc 20 "[global] encryption = required: --no-encrypt refused" \
	"${C5[@]}" --no-encrypt "$T/src/known" "$HOST:data/g1"
expect_rc 0 "[global] encryption = required: default sealed" \
	"${C5[@]}" --json "$T/src/known" "$HOST:data/g2"
check "  sealed" test "$(start_enc)" = "$(daemon_cipher "$T/d5.log")"
stop_daemon "$DAEMON_PID"

# rawserver.py announces every capability before encryption: OPEN never goes.
old_daemon_refuses 0x3fff --encrypt "--encrypt, rawserver without the capability" \
	--encrypt "$T/src/known" "$HOST:data/o3"

finish
