#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sealed transfers on one control connection never share lane keys (issue 5
# item 5: AES-GCM nonces count from 0 in every transfer, so a second transfer
# under the first one's keys would reuse its nonces). A real daemon, and the
# hostile client rawpeer, which keys sealed lanes as rdmacp does:
#   1. a client with transfer keys (0x40000000): two sealed pulls of the same
#      file on one connection both arrive (both ends derived the same keys),
#      and what the daemon's lanes sent (its test tee) holds no run of bytes
#      twice: under repeated keys and nonces the same file would encrypt to
#      the same ciphertext
#   2. a client without them (rawpeer keying its lanes with the v1 secret, as
#      such a client does): its first sealed pull runs, a clear pull after it
#      too; a second sealed pull, and a sealed bench, on that connection are
#      refused (ERROR ENCRYPTION, "upgrade it, or reconnect"), and a new
#      connection may seal again
#   3. rdmacp and rdmacpd where one end plays a peer from before transfer
#      keys (RDMACP_TEST_CAPS_OFF): sealed copies still work (the v1 keys)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
TRANSFER_KEYS=0x40000000
# tcp, pull, trees, bench, sealed lanes, sealed bench; with and without transfer keys.
OLD_CAPS=0x23000d
NEW_CAPS=$((OLD_CAPS | TRANSFER_KEYS))

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/src"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20" \
	"allow bench = client"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d.conf"
RDMACPD_TEST_LANE_TEE=$T/dtee start_daemon "$T/d.conf" "$T/d.log" "$PORT"
rawpeer_for "$PORT"

# Several chunks of random bytes: a ciphertext run seen twice can only be repeated keys.
head -c 300000 /dev/urandom >"$T/mod/f.bin" || die "cannot write the source"

# repeats FILE: the first 64-byte run of FILE that occurs twice in it (offsets), or nothing.
repeats() {
	python3 - "$1" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
W = 64
seen = {}
for off in range(0, len(data) - W + 1, W):
    seen.setdefault(data[off:off + W], off)
for off in range(len(data) - W + 1):
    first = seen.get(data[off:off + W])
    if first is not None and first != off:
        print(f"bytes at {first} and {off}")
        break
EOF
}

pull_steps() {
	echo open pull data/f.bin chunk=65536 slots=4 "$@"
}

# ---- 1. transfer keys: each sealed transfer its own ---------------------------
: >"$T/dtee"
# shellcheck disable=SC2046
rawpeer_rc 0 "transfer keys: two sealed pulls on one connection" \
	hello caps=$NEW_CAPS expect "HELLO" \
	$(pull_steps encrypt=2) expect "OPEN_OK transport=tcp" expect sealed \
	lanes expect sealed get data/f.bin \
	recv-all expect "complete (END) files_ok=1 files_bad=0" drop-lanes \
	$(pull_steps encrypt=2) expect sealed \
	lanes expect sealed get data/f.bin \
	recv-all expect "complete (END) files_ok=1 files_bad=0" \
	bye close
size=$(stat -c %s "$T/dtee" 2>/dev/null || echo 0)
[ "$size" -gt 600000 ] && pass "the daemon's lanes were teed ($size bytes)" ||
	fail "tee holds $size bytes, wanted both pulls"
rep=$(repeats "$T/dtee")
[ -z "$rep" ] && pass "no ciphertext sent twice: each pull had its own keys" ||
	fail "the same 64 bytes went twice ($rep): keys and nonces repeated"
[ "$(grep -c "pull from data: 1 tcp lanes, encrypted" "$T/d.log")" -eq 2 ] &&
	pass "daemon log: both pulls encrypted" || fail "daemon log: $(grep ' lanes, ' "$T/d.log")"

# ---- 2. no transfer keys: the first sealed transfer of a connection only ------
# shellcheck disable=SC2046
rawpeer_rc 0 "no transfer keys: a second sealed pull on one connection is refused" \
	hello caps=$OLD_CAPS expect "HELLO" \
	$(pull_steps encrypt=2) expect sealed lanes v1 expect sealed get data/f.bin \
	recv-all expect "files_ok=1 files_bad=0" drop-lanes \
	$(pull_steps) expect-not sealed lanes get data/f.bin \
	recv-all expect "files_ok=1 files_bad=0" drop-lanes \
	$(pull_steps encrypt=1) expect "ERROR ENCRYPTION" expect "upgrade it, or reconnect" \
	expect-not sealed
grep -q "refused: this client cannot encrypt a second transfer on one connection" "$T/d.log" &&
	pass "daemon log says why" || fail "daemon log lacks the refusal"

# shellcheck disable=SC2046
rawpeer_rc 0 "no transfer keys: a sealed bench after a sealed pull is refused" \
	hello caps=$OLD_CAPS \
	$(pull_steps encrypt=2) expect sealed lanes v1 get data/f.bin \
	recv-all expect "files_ok=1 files_bad=0" drop-lanes \
	bench 1048576 chunk=65536 slots=4 encrypt=2 expect "ERROR ENCRYPTION"

# shellcheck disable=SC2046
rawpeer_rc 0 "no transfer keys: a new connection seals again" \
	hello caps=$OLD_CAPS \
	$(pull_steps encrypt=2) expect sealed lanes v1 expect sealed get data/f.bin \
	recv-all expect "files_ok=1 files_bad=0" bye close

# ---- 3. rdmacp against peers from before transfer keys -------------------------
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")
expect_rc 0 "rdmacp pull, sealed (transfer keys)" "${CLIENT[@]}" -q --encrypt \
	"$HOST:data/f.bin" "$T/src/new.bin"
cmp -s "$T/mod/f.bin" "$T/src/new.bin" && pass "  arrives intact" || fail "  new.bin differs"
RDMACP_TEST_CAPS_OFF=$TRANSFER_KEYS expect_rc 0 "an older rdmacp: sealed push (v1 keys)" \
	"${CLIENT[@]}" -q --encrypt "$T/mod/f.bin" "$HOST:data/old.bin"
cmp -s "$T/mod/f.bin" "$T/mod/old.bin" && pass "  arrives intact" || fail "  old.bin differs"

OPORT=$(free_port)
write_conf "$T/o.conf" "$OPORT" "$T/certs" "allow bench = client"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/o.conf"
RDMACP_TEST_CAPS_OFF=$TRANSFER_KEYS start_daemon "$T/o.conf" "$T/o.log" "$OPORT"
C_OLD=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$OPORT")
expect_rc 0 "an older rdmacpd: sealed pull (v1 keys)" "${C_OLD[@]}" -q --encrypt \
	"$HOST:data/f.bin" "$T/src/old.bin"
cmp -s "$T/mod/f.bin" "$T/src/old.bin" && pass "  arrives intact" || fail "  old.bin differs"
expect_rc 0 "an older rdmacpd: sealed bench (v1 keys)" "${C_OLD[@]}" --encrypt bench \
	--size 8M "$HOST"

finish
