#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The chunk tree as a file's end-to-end digest (PROTO_CAP_FILE_TREE, bit 41),
# against a real daemon:
#   1. a push of a file of many chunks: --json says xxh128_tree and its
#      tree_chunk, and the digest is the XXH3-128 of the chunks' XXH3-128
#      (made here with libxxhash through python3 ctypes); a file of one
#      chunk or less keeps "xxh128", the stream of its bytes
#   2. the bit masked on the client, then on the daemon (RDMACP_TEST_CAPS_OFF,
#      as an old peer): the stream, "xxh128" equal to libxxhash's
#   3. a byte changed on the way under the tree: the push (the daemon's
#      receiver) and the pull (the client's) fail with exit 7, nothing committed
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v jq >/dev/null || skip "jq is not installed"
TREE_BIT=$((1 << 41))

# xxh FILE [CHUNK]: XXH3-128 hex of FILE's bytes, or (CHUNK) of its chunks' digests.
xxh() {
	python3 - "$@" <<'PY' 2>/dev/null
import ctypes, ctypes.util, sys
class H(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_128bits.restype = H
lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
def x(b):
    h = lib.XXH3_128bits(b, len(b))
    return h.high64.to_bytes(8, "big") + h.low64.to_bytes(8, "big")
data = open(sys.argv[1], "rb").read()
if len(sys.argv) > 2:
    cs = int(sys.argv[2])
    data = b"".join(x(data[i:i + cs]) for i in range(0, len(data), cs))
print(x(data).hex())
PY
}
[ -n "$(xxh /dev/null)" ] || skip "no libxxhash through python3 ctypes"

setup_standard
mkdir -p "$T/src" "$T/mod/out"
head -c $((5 * 1048576 + 333)) /dev/urandom >"$T/src/big" || die "write big"
head -c 70000 /dev/urandom >"$T/src/small" || die "write small"
head -c $((3 * 1048576)) /dev/urandom >"$T/mod/out/pulled" || die "write pulled"

# field FILE KEY: the file event's KEY for FILE in $T/out.
field() { jq -r "select(.event == \"file\" and .name == \"$1\") | .$2" "$T/out"; }

# ---- 1. the tree where both ends announce it ---------------------------------
"${CLIENT[@]}" --json "$T/src/big" "$T/src/small" "$HOST:data/in/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] && pass "1: push (exit 0)" || fail "1: push exit $rc: $(head -3 "$T/err")"
cmp -s "$T/src/big" "$T/mod/in/big" && pass "1: big arrived" || fail "1: big differs"
cs=$(field big tree_chunk)
[[ "$cs" =~ ^[0-9]+$ ]] && [ "$cs" -ge 4096 ] && [ "$cs" -lt $((5 * 1048576)) ] &&
	pass "1: big: tree_chunk $cs" || fail "1: big: tree_chunk '$cs' ($(grep big "$T/out"))"
want=$(xxh "$T/src/big" "$cs")
[ "$(field big xxh128_tree)" = "$want" ] && pass "1: big: xxh128_tree is its chunks' ($want)" ||
	fail "1: big: xxh128_tree $(field big xxh128_tree), chunks' $want"
[ "$(field big xxh128)" = null ] && pass "1: big: no xxh128 (not the stream's)" ||
	fail "1: big: xxh128 $(field big xxh128)"
[ "$(field small xxh128)" = "$(xxh "$T/src/small")" ] && [ "$(field small xxh128_tree)" = null ] &&
	pass "1: small (one chunk): the stream's xxh128" || fail "1: small: $(grep small "$T/out")"

# ---- 2. the bit masked on one end: the stream ---------------------------------
RDMACP_TEST_CAPS_OFF=$TREE_BIT "${CLIENT[@]}" --json "$T/src/big" "$HOST:data/in2/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(field big xxh128)" = "$(xxh "$T/src/big")" ] &&
	[ "$(field big tree_chunk)" = null ] &&
	pass "2: client masked: the stream's xxh128" || fail "2: client masked: exit $rc: $(cat "$T/out" "$T/err" | head -3)"

PORT2=$(free_port)
write_conf "$T/d2.conf" "$PORT2" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d2.conf"
RDMACP_TEST_CAPS_OFF=$TREE_BIT start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
"${CLIENT[@]}" -P "$PORT2" --json "$T/src/big" "$HOST:data/in3/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(field big xxh128)" = "$(xxh "$T/src/big")" ] &&
	cmp -s "$T/src/big" "$T/mod/in3/big" &&
	pass "2: daemon masked: the stream's xxh128" || fail "2: daemon masked: exit $rc: $(cat "$T/out" "$T/err" | head -3)"
"${CLIENT[@]}" -P "$PORT2" --json "$HOST:data/out/pulled" "$T/pull0/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(field pulled xxh128)" = "$(xxh "$T/mod/out/pulled")" ] &&
	pass "2: daemon masked, pull: the stream's xxh128" || fail "2: daemon masked, pull: exit $rc: $(cat "$T/out" "$T/err" | head -3)"

# ---- 3. a byte changed on the way, under the tree -------------------------------
PORT3=$(free_port)
write_conf "$T/d3.conf" "$PORT3" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d3.conf"
RDMACPD_TEST_FLIP_BYTE=1 start_daemon "$T/d3.conf" "$T/d3.log" "$PORT3"
"${CLIENT[@]}" -P "$PORT3" --json "$T/src/big" "$HOST:data/in4/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 7 ] && grep -q "checksum mismatch" "$T/err" && [ ! -e "$T/mod/in4/big" ] &&
	pass "3: push, a byte flipped at the daemon: exit 7, checksum mismatch, nothing committed" ||
	fail "3: push flipped: exit $rc: $(head -3 "$T/err"), $(ls "$T/mod/in4" 2>&1)"
RDMACP_TEST_FLIP_BYTE=1 "${CLIENT[@]}" --json "$HOST:data/out/pulled" "$T/pull1/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 7 ] && grep -q "checksum mismatch" "$T/err" && [ ! -e "$T/pull1/pulled" ] &&
	pass "3: pull, a byte flipped at the client: exit 7, checksum mismatch, nothing committed" ||
	fail "3: pull flipped: exit $rc: $(head -3 "$T/err"), $(ls "$T/pull1" 2>&1)"
"${CLIENT[@]}" --json "$HOST:data/out/pulled" "$T/pull2/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(field pulled xxh128_tree)" = "$(xxh "$T/mod/out/pulled" "$(field pulled tree_chunk)")" ] &&
	pass "3: the same pull unflipped: the tree's digest" || fail "3: pull: exit $rc: $(cat "$T/out" "$T/err" | head -3)"

finish
