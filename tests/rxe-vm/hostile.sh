#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/rxe-vm/hostile.sh BUILD_DIR OUT_DIR: the hostile client rawpeer
# (tests/tools/rawpeer.c) against a real rdmacpd over verbs lanes. Runs INSIDE
# the Soft-RoCE VM (tests/rxe-vm/run; t_verbs_hostile_vm.sh starts it):
# rdmacpd listens on 10.0.0.2 (rxe1), rawpeer connects from 10.0.0.1 (rxe0)
# and plays a push whose data path misbehaves on purpose. One VM boot for all.
#
#   0. rawpeer's verbs lanes work: a correct push step by step lands
#      byte-exact, RING carries zero-based addresses (addr=0x0); a pull
#      into rawpeer's own ring arrives with a matching hash.
#   1. slot rewrite (G43): a chunk's slot written again after its descriptor
#      arrived, then FILE_DONE with the hash of the rewritten bytes. Verbs
#      cannot fence a slot: the rewrite lands, but the daemon hashes and
#      writes the private copy it took when it took the descriptor's
#      completion. The early chunk (held, waiting for chunk 0, copied two
#      seconds before the rewrite): FILE_RESULT INTEGRITY, nothing committed.
#      The in-order chunk, rewritten at once: the rewrite may land before the
#      daemon takes the completion and copies the slot (then the rewritten
#      bytes are what it hashes and writes) or after (INTEGRITY); what must
#      hold is that nothing is committed, or exactly the bytes hashed.
#   2. rkeys: a WRITE with a wrong rkey, one just past the end of the
#      registration (where the daemon's private slot copies lie), one
#      straddling that end, one far outside: a remote access error on that
#      lane, the session ends, nothing committed.
#   3. lengths: a descriptor with a length that is not the chunk's, a chunk
#      past the file's size, a descriptor immediate with 16 bytes instead of
#      32, a credit immediate sent to the receiver: the session ends, nothing
#      committed.
#   4. LANE_DOWN (rails): from a peer without the capability, for a lane the
#      session lacks, with counts out of range (one more credit than went on
#      the lane; 2^64-1; one fewer than the daemon saw taken), and twice for
#      a lane (the first with the true count, which the daemon takes: it
#      stops the lane and goes on): ERROR PROTOCOL, nothing committed.
#   5. the WRITE + SEND path (iWARP's; asked for in OPEN, as rdmacp does on
#      a device without immediate data): rawpeer's correct push lands, a
#      WRITE past the registration is refused, a descriptor message saying
#      16 bytes ends the session; nothing committed.
#   6. afterwards: the daemon runs, no session of it was killed by a signal,
#      and a correct verbs push with rdmacp lands byte-exact.
#
# Prints "ok: ..." / "FAIL: ..." lines; rawpeer's output per attack and the
# daemon's log go to OUT_DIR. Exit 0 when every check passed, 1 otherwise.
set -u

B=${1:?usage: hostile.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: hostile.sh BUILD_DIR OUT_DIR}
RDMACP=$B/rdmacp
RDMACPD=$B/rdmacpd
RAWPEER_BIN=$B/tests/rawpeer
SERVER=10.0.0.2
CLIENT=10.0.0.1
PORT=7481
CHUNK=65536
SLOTS=4
W=$(mktemp -d /tmp/rdmacp-hostile.XXXXXX)
FAILS=0
DPID=

mkdir -p "$OUT"
exec 3>>"$OUT/hostile.log"

cleanup() {
	if [ -n "$DPID" ]; then
		kill -TERM "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	[ -f "$W/d.log" ] && cp "$W/d.log" "$OUT/daemon.log"
	rm -rf "$W"
}
trap cleanup EXIT

say() { echo "$*"; echo "$*" >&3; }
pass() { say "ok: $*"; }
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); }

[ -x "$RAWPEER_BIN" ] || { fail "$RAWPEER_BIN not built"; exit 1; }

# ---- setup: certificates, module, daemon on 10.0.0.2 --------------------------
"$RDMACP" certs init "$W/certs" --host "$SERVER" >&3 2>&1 || { fail "certs init"; exit 1; }
mkdir -p "$W/mod"
cat >"$W/d.conf" <<EOF
[global]
listen = $SERVER:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
handshake timeout = 20
idle timeout = 30

[data]
path = $W/mod
allow = client
uid = $(id -u)
gid = $(id -g)
EOF
"$RDMACPD" --config "$W/d.conf" -v >"$W/d.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null && break
	sleep 0.1
done
(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null || { cat "$W/d.log"; fail "daemon did not listen"; exit 1; }
RAWPEER=("$RAWPEER_BIN" --host "$SERVER" --source "$CLIENT" -P "$PORT" --cert "$W/certs/client.crt"
	--key "$W/certs/client.key" --ca "$W/certs/ca.crt" --timeout 20)

# rp NAME STEP...: run rawpeer, its output in $OUT/NAME.out (and the log); its
# exit status is returned (the session is often meant to die: callers decide).
rp() {
	local name=$1 rc
	shift
	echo "+ rawpeer $*" >&3
	timeout 180 "${RAWPEER[@]}" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	rc=$?
	sed 's/^/  | /' "$OUT/$name.out" >&3
	echo "  -> rc $rc" >&3
	return $rc
}
# seen NAME REGEX: some line rawpeer printed in NAME matches.
seen() { grep -qE "$2" "$OUT/$1.out"; }
temps() { find "$W/mod" -name '.*.rdmacp.*' 2>/dev/null; }
# nothing_committed DESC FILE: no file under the final name, no temp file left.
nothing_committed() {
	if [ -e "$W/mod/$2" ]; then
		fail "$1: $2 committed"
	elif [ -n "$(temps)" ]; then
		fail "$1: temp files left: $(temps | tr '\n' ' ')"
	else
		pass "$1: nothing committed, no temp file left"
	fi
}
# ended NAME DESC: the daemon ended the session (an ERROR, or the close).
ended() {
	local err
	err=$(grep -m1 -E "^ERROR " "$OUT/$1.out")
	if [ -n "$err" ]; then
		pass "$2: the daemon ended the session: $(echo "$err" | cut -c1-160)"
	elif seen "$1" "^closed "; then
		pass "$2: the daemon closed the session"
	else
		fail "$2: the session did not end: $(tail -2 "$OUT/$1.out" | tr '\n' '|')"
	fi
}
# refused NAME DESC: the lane failed with a remote access error on the WRITE.
refused() {
	if seen "$1" "^(WRITE|POKE) .*failed \(IBV_WC_REM_ACCESS_ERR\)"; then
		pass "$2: remote access error ($(grep -m1 -E '^DATA_ERROR' "$OUT/$1.out" | cut -c1-120))"
	else
		fail "$2: not refused: $(grep -m1 -E '^(WRITE|POKE) ' "$OUT/$1.out")"
	fi
}

head -c $((2 * CHUNK)) /dev/urandom >"$W/src.bin"
head -c 150000 /dev/urandom >"$W/src3.bin"
# What the attacker wants "verified": chunk 0 as sent, chunk 1 rewritten to 'A's ...
{ head -c $CHUNK "$W/src.bin" && head -c $CHUNK /dev/zero | tr '\0' 'A'; } >"$W/hashed1.bin"
# ... and chunk 0 rewritten to 'B's, chunk 1 as sent.
{ head -c $CHUNK /dev/zero | tr '\0' 'B' && tail -c $CHUNK "$W/src.bin"; } >"$W/hashed0.bin"
OPEN=("chunk=$CHUNK" "slots=$SLOTS" transport=verbs)

# ---- 0. a correct push over rawpeer's verbs lanes -------------------------------
if rp good hello open push data/good.bin "${OPEN[@]}" expect "OPEN_OK transport=verbs" \
	lanes expect "transport=verbs" ring expect "RING addr=0x0 desc=0x40000 " \
	files 1:good.bin:150000 ack expect "1=OK" \
	chunk 0 1 0 65536 "$W/src3.bin" expect placed \
	chunk 1 1 65536 65536 "$W/src3.bin" expect placed \
	chunk 2 1 131072 18928 "$W/src3.bin" expect placed \
	"done" 1 150000 "$W/src3.bin" result expect "FILE_RESULT 1 OK" \
	end wait END bye close && cmp -s "$W/src3.bin" "$W/mod/good.bin"; then
	pass "rawpeer on verbs lanes: a correct push lands byte-exact, RING addr=0x0"
else
	fail "rawpeer's correct verbs push: $(grep -m1 -E 'EXPECT_FAILED|FAILED|TIMEOUT' "$OUT/good.out")"
fi

# ... and a pull: rawpeer offers its own ring (registered for remote writes) and
# receives the daemon's chunks.
if rp pull hello open pull data/good.bin "${OPEN[@]}" lanes get data/good.bin \
	recv-all expect "complete (END) files_ok=1 files_bad=0" bye close &&
	seen pull "^RECEIVED 1 bytes=150000 hash matches"; then
	pass "rawpeer on verbs lanes: a pull receives the file, its hash matches"
else
	fail "rawpeer's verbs pull: $(grep -m1 -E 'EXPECT_FAILED|FAILED|TIMEOUT|BAD_CHUNK|^ERROR' "$OUT/pull.out")"
fi

# ---- 1. slot rewrite: the receiver hashes and writes the copy it held ------------
rp early hello open push data/early.bin "${OPEN[@]}" lanes ring \
	files 1:early.bin:$((2 * CHUNK)) ack \
	chunk 1 1 $CHUNK $CHUNK "$W/src.bin" \
	sleep 2 \
	poke 1 0 fill=0x41:$CHUNK \
	chunk 0 1 0 $CHUNK "$W/src.bin" \
	"done" 1 $((2 * CHUNK)) "$W/hashed1.bin" \
	result end wait END bye close
if seen early "^POKE slot=1 .* placed"; then
	pass "slot rewrite, early chunk: the rewrite lands (verbs cannot fence a slot)"
else
	fail "slot rewrite, early chunk: the rewrite did not land: $(grep -m1 '^POKE' "$OUT/early.out")"
fi
if seen early "^FILE_RESULT 1 INTEGRITY"; then
	pass "slot rewrite, early chunk: hashed from the copy, the rewritten bytes' hash does not verify"
else
	fail "slot rewrite, early chunk: no INTEGRITY: $(grep -m1 -E '^(FILE_RESULT|ERROR)' "$OUT/early.out")"
fi
nothing_committed "slot rewrite, early chunk" early.bin

rp inorder hello open push data/inorder.bin "${OPEN[@]}" lanes ring \
	files 1:inorder.bin:$((2 * CHUNK)) ack \
	chunk 0 1 0 $CHUNK "$W/src.bin" \
	poke 0 0 fill=0x42:$CHUNK \
	chunk 1 1 $CHUNK $CHUNK "$W/src.bin" \
	"done" 1 $((2 * CHUNK)) "$W/hashed0.bin" \
	result end wait END bye close
if [ ! -e "$W/mod/inorder.bin" ]; then
	pass "slot rewrite, in-order chunk: nothing committed ($(grep -m1 -E '^(FILE_RESULT|ERROR)' "$OUT/inorder.out"))"
elif cmp -s "$W/hashed0.bin" "$W/mod/inorder.bin"; then
	pass "slot rewrite, in-order chunk: committed, and the disk holds exactly the hashed bytes"
else
	fail "slot rewrite, in-order chunk: committed as verified, but the disk holds other bytes"
fi
[ -z "$(temps)" ] || fail "slot rewrite, in-order chunk: temp files left: $(temps | tr '\n' ' ')"

# ---- 2. rkeys: wrong key, outside the registration ------------------------------
# The registration: SLOTS slots, then the descriptors (rounded up to a chunk);
# the daemon's private slot copies (G43) lie right behind it.
REG=$(((SLOTS + (SLOTS * 32 + CHUNK - 1) / CHUNK) * CHUNK))
# rkey_attack NAME DESC WRITE-ARGS...: a file half sent, then the WRITE.
rkey_attack() {
	local name=$1 desc=$2
	shift 2
	rp "$name" hello open push "data/$name.bin" "${OPEN[@]}" lanes ring \
		files "1:$name.bin:$((2 * CHUNK))" ack \
		chunk 0 1 0 $CHUNK "$W/src.bin" expect placed \
		"$@" wait closed
	refused "$name" "$desc"
	ended "$name" "$desc"
	nothing_committed "$desc" "$name.bin"
}
rkey_attack rkey_wrong "a WRITE with a wrong rkey" write 65536 4096 fill=0x43 rkey=^0xff
rkey_attack rkey_poke "a slot rewrite with a wrong rkey" poke 0 0 fill=0x44:64 rkey=^0x80
rkey_attack rkey_past "a WRITE just past the registration (the slot copies)" write $REG 64 fill=0x45
rkey_attack rkey_straddle "a WRITE straddling the end of the registration" \
	write $((REG - 32)) 64 fill=0x46
rkey_attack rkey_far "a WRITE far outside the registration" write 0x7fff00000000 64 fill=0x47

# ---- 3. lengths -------------------------------------------------------------------
# len_attack NAME DESC STEP...: a 150000-byte file offered, then the steps.
len_attack() {
	local name=$1 desc=$2
	shift 2
	rp "$name" hello open push "data/$name.bin" "${OPEN[@]}" lanes ring \
		files "1:$name.bin:150000" ack "$@" wait closed
	ended "$name" "$desc"
	nothing_committed "$desc" "$name.bin"
}
len_attack len_short "a descriptor one byte short of the chunk" \
	chunk 0 1 0 $CHUNK "$W/src3.bin" dlen=$((CHUNK - 1))
len_attack len_long "a descriptor of two chunks" \
	chunk 0 1 0 $((2 * CHUNK)) "$W/src3.bin"
len_attack len_last "a full chunk for the file's short last chunk" \
	chunk 0 1 0 $CHUNK "$W/src3.bin" chunk 1 1 $CHUNK $CHUNK "$W/src3.bin" \
	chunk 2 1 $((2 * CHUNK)) $CHUNK "$W/src3.bin"
len_attack len_past "a chunk past the file's size" \
	chunk 0 1 0 $CHUNK "$W/src3.bin" doff=$((3 * CHUNK))
len_attack len_desc "a descriptor immediate carrying 16 bytes, not 32" \
	chunk 0 1 0 $CHUNK "$W/src3.bin" nodesc write $((SLOTS * CHUNK)) 16 imm=0x01000000
len_attack len_credit "a credit immediate sent to the receiver" \
	write $((SLOTS * CHUNK)) 0 imm=0x02000000

# ---- 4. LANE_DOWN (rails) -----------------------------------------------------------
RAILS_CAPS=$((0xd | (1 << 26)))
# lane_down NAME DESC HELLO-CAPS LANES LANE_DOWN-PAYLOAD [STEPS...]: chunks 0 and 1 of a
# 150000-byte file on lane 0 (credited), then LANE_DOWN.
lane_down() {
	local name=$1 desc=$2 caps=$3 lanes=$4 payload=$5
	shift 5
	rp "$name" hello "caps=$caps" open push "data/$name.bin" "${OPEN[@]}" "lanes=$lanes" lanes ring \
		files "1:$name.bin:150000" ack \
		chunk 0 1 0 $CHUNK "$W/src3.bin" chunk 1 1 $CHUNK $CHUNK "$W/src3.bin" \
		idle 2 credits "$@" frame LANE_DOWN "$payload" wait closed
	if grep -qE "^ERROR PROTOCOL" "$OUT/$name.out"; then
		pass "$desc: ERROR PROTOCOL ($(grep -m1 '^ERROR' "$OUT/$name.out" | cut -c1-140))"
	else
		fail "$desc: no ERROR PROTOCOL: $(grep -E '^(ERROR|closed|CREDITS)' "$OUT/$name.out" | tr '\n' '|')"
	fi
	nothing_committed "$desc" "$name.bin"
}
lane_down ld_nocap "LANE_DOWN from a peer without the rails capability" 0xd 2 \
	000000000000000000000000
lane_down ld_lane "LANE_DOWN for lane 5 of 2" $RAILS_CAPS 2 050000000000000000000003
lane_down ld_over "LANE_DOWN counting 3 credits where 2 went" $RAILS_CAPS 2 \
	000000000000000000000003
lane_down ld_max "LANE_DOWN counting 2^64-1 credits" $RAILS_CAPS 2 00000000ffffffffffffffff
lane_down ld_below "LANE_DOWN counting 1 credit where both were taken" $RAILS_CAPS 2 \
	000000000000000000000001
# A true count first (the daemon stops lane 0 and answers with its own), then the
# same LANE_DOWN again.
lane_down ld_twice "LANE_DOWN twice for lane 0" $RAILS_CAPS 2 000000000000000000000002 \
	frame LANE_DOWN 000000000000000000000002 idle 3
if seen ld_twice "^LANE_DOWN lane=0 count=2" && seen ld_twice "^IDLE 3.0 s, the session is still open"; then
	pass "LANE_DOWN with the true count: the daemon stopped lane 0, said it took 2, and went on"
else
	fail "LANE_DOWN with the true count: $(grep -E '^(LANE_DOWN|IDLE|ERROR)' "$OUT/ld_twice.out" | tr '\n' '|')"
fi
if grep -q "CREDITS held=4 of 4 returned=2" "$OUT/ld_over.out"; then
	pass "LANE_DOWN counting 3: both credits had come back on lane 0 first"
else
	fail "LANE_DOWN counting 3: $(grep -m1 '^CREDITS' "$OUT/ld_over.out")"
fi

# ---- 5. the WRITE + SEND path (iWARP's, asked for in OPEN as rdmacp does) ---------------
# Each WRITE_WITH_IMM goes as a WRITE and a SEND of its immediate and length.
WS=(hello caps=$((0xd | (1 << 25))) open push)
WSOPEN=("${OPEN[@]}" flags=0x40000)
if rp ws_good "${WS[@]}" data/ws_good.bin "${WSOPEN[@]}" lanes expect "(WRITE + SEND)" ring \
	files 1:ws_good.bin:150000 ack \
	chunk 0 1 0 65536 "$W/src3.bin" chunk 1 1 65536 65536 "$W/src3.bin" \
	chunk 2 1 131072 18928 "$W/src3.bin" expect placed \
	"done" 1 150000 "$W/src3.bin" result expect "FILE_RESULT 1 OK" \
	end wait END bye close && cmp -s "$W/src3.bin" "$W/mod/ws_good.bin"; then
	pass "WRITE + SEND: rawpeer's correct push lands byte-exact"
else
	fail "WRITE + SEND: rawpeer's correct push: $(grep -m1 -E 'EXPECT_FAILED|FAILED|TIMEOUT|^ERROR' "$OUT/ws_good.out")"
fi
rp ws_rkey "${WS[@]}" data/ws_rkey.bin "${WSOPEN[@]}" lanes ring files 1:ws_rkey.bin:$((2 * CHUNK)) \
	ack chunk 0 1 0 $CHUNK "$W/src.bin" write $REG 64 fill=0x48 wait closed
refused ws_rkey "WRITE + SEND: a WRITE past the registration"
ended ws_rkey "WRITE + SEND: a WRITE past the registration"
nothing_committed "WRITE + SEND: a WRITE past the registration" ws_rkey.bin
rp ws_desc "${WS[@]}" data/ws_desc.bin "${WSOPEN[@]}" lanes ring files 1:ws_desc.bin:150000 ack \
	chunk 0 1 0 $CHUNK "$W/src3.bin" nodesc write $((SLOTS * CHUNK)) 16 imm=0x01000000 \
	wait closed
ended ws_desc "WRITE + SEND: a descriptor message saying 16 bytes"
nothing_committed "WRITE + SEND: a descriptor message saying 16 bytes" ws_desc.bin

# ---- 6. afterwards ----------------------------------------------------------------------
if kill -0 "$DPID" 2>/dev/null; then
	pass "the daemon still runs"
else
	fail "the daemon is gone"
fi
if grep -qE "killed by signal|AddressSanitizer|runtime error" "$W/d.log"; then
	fail "daemon log: $(grep -E "killed by signal|AddressSanitizer|runtime error" "$W/d.log" | head -3 | tr '\n' '|')"
else
	pass "no daemon session killed by a signal"
fi
echo "+ rdmacp push after the attacks" >&3
if "$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key" \
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress --transport verbs --chunk-size 64K \
	"$W/src3.bin" "$SERVER:data/after/" >"$OUT/after.out" 2>"$OUT/after.err" &&
	cmp -s "$W/src3.bin" "$W/mod/after/src3.bin"; then
	pass "a correct verbs push with rdmacp after the attacks lands byte-exact"
else
	fail "verbs push after the attacks: $(head -3 "$OUT/after.err")"
fi

say "hostile: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
