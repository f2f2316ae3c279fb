#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/rxe-vm/e2e.sh BUILD_DIR OUT_DIR: the daemon/client end-to-end checks over
# real verbs. Runs INSIDE the Soft-RoCE VM (tests/rxe-vm/run; t_verbs_vm.sh starts
# it): rdmacpd listens on 10.0.0.2 (rxe1), rdmacp pushes and pulls from 10.0.0.1
# (rxe0), and everything is compared byte for byte. One VM boot for all steps.
#
# Steps: rdmacp doctor (rxe0/rxe1 ACTIVE with a RoCE v2 GID); verbs push of
# 0, 1, chunk-1, chunk, chunk+1 and a few MiB (--chunk-size 64K) plus a tree
# with -r; verbs pull of a file and a tree; 300 small files pushed and pulled
# in packed slots, and the packed format's edges (empty, exactly a chunk,
# spanning chunks, nested, beside big files); --transport auto picks verbs
# (--json start event), also with a dual-stack socket-activated daemon; rails: refused
# while the daemon takes lanes only from the client's address (lane 1 leaves from
# 10.0.0.2), then a push and a pull with --devices rxe0,rxe1 --qps 2,
# --devices nosuchdev exits 13; the same push set over tcp; an 8 MiB push each way
# (timed); a push and a pull with --poll; a tree and 8 MiB pushed and pulled
# with --hash-threads 2, clear and sealed; kill -9 of the daemon's
# session child mid-transfer (client fails, no file under the final name); sealed
# lanes (--encrypt, encryption = required, tampering, a packet capture of the wire);
# --tos on the wire both ways; a forced RNR; and last, the client's link taken down
# for good mid-transfer (both ends fail in bounded time, nothing committed).
# The WRITE + SEND path (what iWARP devices need), forced on Soft-RoCE by the
# test switches RDMACP_TEST_WRITE_SEND / RDMACPD_TEST_WRITE_SEND: doctor and
# the --json start event name it; push of the sized files and a tree, pull of
# a file and a tree, packed slots (300 small files, the edges), kill -9
# mid-transfer; a daemon whose device needs it
# against a client that does not ask (verbs: exit 13; auto: tcp), and a
# client that needs it against a daemon too old for it (verbs: exit 12;
# auto: tcp).
# A wrong session token at RDMA connect is test_verbs_loop's check (run just
# before this in the same VM), not repeated here.
#
# Prints "ok: ..." / "FAIL: ..." lines and "time: ..." measurements (emulated:
# qemu TCG, not performance figures); the full logs go to OUT_DIR. Exit 0 when
# every check passed, 1 otherwise.
set -u

B=${1:?usage: e2e.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: e2e.sh BUILD_DIR OUT_DIR}
RDMACP=$B/rdmacp
RDMACPD=$B/rdmacpd
SERVER=10.0.0.2
PORT=7471
W=$(mktemp -d /tmp/rdmacp-e2e.XXXXXX)
FAILS=0
DPID=
DLINE=0

mkdir -p "$OUT"
exec 3>>"$OUT/e2e.log"

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
# A failed command's own daemon lines (lanes, transport, failures) go with it:
# CI shows this script's FAIL lines, not the daemon's log.
fail() {
	local ctx=
	[ -f "$W/d.log" ] && ctx=$(tail -n +"$((DLINE + 1))" "$W/d.log" |
		grep -aiE 'lane|transport|fail|error' | tail -4 | cut -c1-300 | tr '\n' '|')
	say "FAIL: $*${ctx:+ [daemon: $ctx]}"
	FAILS=$((FAILS + 1))
}
now() { date +%s.%N; }
# secs T0 T1 / rate BYTES T0 T1: for the "time:" lines.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { d = b - a; if (d <= 0) d = 0.001; printf "%.1f", n / d / 1e6 }'; }

# run NAME CMD...: run, output to $OUT/NAME.{out,err}; returns the exit status.
run() {
	local name=$1 rc
	shift
	DLINE=$( (wc -l <"$W/d.log") 2>/dev/null || echo 0)
	echo "+ $*" >&3
	"$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	rc=$?
	echo "  -> rc $rc" >&3
	return $rc
}

# same DESC SRC DST: byte-identical regular files.
same() {
	if [ ! -f "$3" ] || [ -L "$3" ]; then
		fail "$1: $3 missing"
	elif cmp -s "$2" "$3"; then
		pass "$1: $(basename "$3") ($(stat -c %s "$3") bytes) identical"
	else
		fail "$1: $3 differs ($(cmp "$2" "$3" 2>&1 | head -1))"
	fi
}

# same_tree DESC SRC DST: diff -r plus symlink targets.
same_tree() {
	if diff -r --no-dereference "$2" "$3" >"$OUT/diff.txt" 2>&1; then
		pass "$1: tree identical (diff -r)"
	else
		fail "$1: trees differ: $(head -3 "$OUT/diff.txt")"
	fi
}

# ---- 0. doctor --------------------------------------------------------------
if run doctor "$RDMACP" doctor && run doctor_json "$RDMACP" doctor --json; then
	if jq -e '[.devices[] | select((.name == "rxe0" or .name == "rxe1") and
		   any(.ports[]; .state == "ACTIVE" and
		       any(.gids[]; .type == "RoCE v2" and .ipv4_mapped)))] | length == 2' \
		"$OUT/doctor_json.out" >/dev/null; then
		pass "doctor: rxe0 and rxe1 ACTIVE with a RoCE v2 IPv4-mapped GID"
	else
		fail "doctor --json does not show rxe0/rxe1 ACTIVE with a RoCE v2 GID"
	fi
	if grep -q "^  rxe0" "$OUT/doctor.out" && grep -q "^  rxe1" "$OUT/doctor.out" &&
		[ "$(grep -c "port 1: ACTIVE, Ethernet" "$OUT/doctor.out")" -eq 2 ] &&
		[ "$(grep -c "RoCE v2 ::ffff:10.0.0.[12] on veth[01]" "$OUT/doctor.out")" -eq 2 ] &&
		grep -q "^ready: tcp and verbs" "$OUT/doctor.out"; then
		pass "doctor: human output lists rxe0, rxe1 ACTIVE with RoCE v2 ::ffff:10.0.0.x GIDs, ready for verbs"
	else
		fail "doctor human output lacks rxe0/rxe1/ACTIVE/RoCE v2"
	fi
	if jq -e '[.devices[] | select(.name == "rxe0" or .name == "rxe1") |
		   select(.verbs_path == "write_imm")] | length == 2' \
		"$OUT/doctor_json.out" >/dev/null &&
		RDMACP_TEST_WRITE_SEND=1 run doctor_ws "$RDMACP" doctor --json &&
		jq -e '[.devices[] | select(.name == "rxe0" or .name == "rxe1") |
		   select(.verbs_path == "write_send")] | length == 2' "$OUT/doctor_ws.out" >/dev/null; then
		pass "doctor: verbs path write_imm on rxe0/rxe1, write_send with the test switch"
	else
		fail "doctor --json does not name the verbs path: $(jq -c '[.devices[] | {name, verbs_path}]' "$OUT/doctor_json.out")"
	fi
else
	fail "rdmacp doctor failed (see $OUT/doctor*.err)"
fi
cat "$OUT/doctor.out" >&3

# ---- setup: certificates, module, daemon on 10.0.0.2 --------------------------
"$RDMACP" certs init "$W/certs" --host "$SERVER" >&3 2>&1 || { fail "certs init"; exit 1; }
mkdir -p "$W/mod" "$W/src" "$W/pull"
cat >"$W/d.conf" <<EOF
[global]
listen = $SERVER:$PORT
cert = $W/certs/server.crt
key = $W/certs/server.key
ca = $W/certs/ca.crt
handshake timeout = 10
idle timeout = 30
allow bench = client
cipher = aes-128-gcm

[data]
path = $W/mod
allow = client
uid = $(id -u)
gid = $(id -g)

[sealed]
path = $W/req
allow = client
uid = $(id -u)
gid = $(id -g)
encryption = required
EOF
mkdir -p "$W/req"
"$RDMACPD" --config "$W/d.conf" -v >"$W/d.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null && break
	sleep 0.1
done
(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null || { cat "$W/d.log"; fail "daemon did not listen"; exit 1; }
C=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$PORT" --no-progress)

# ---- sources ------------------------------------------------------------------
K=64
CH=$((K * 1024))
SIZES=(0 1 $((CH - 1)) $CH $((CH + 1)) $((3 * 1024 * 1024 + 123)))
files=()
total=0
for s in "${SIZES[@]}"; do
	head -c "$s" /dev/urandom >"$W/src/f_$s"
	files+=("$W/src/f_$s")
	total=$((total + s))
done
mkdir -p "$W/src/tree/sub/deeper" "$W/src/tree/empty"
head -c 200000 /dev/urandom >"$W/src/tree/a"
head -c 70000 /dev/urandom >"$W/src/tree/sub/b"
: >"$W/src/tree/sub/zero"
head -c 5 /dev/urandom >"$W/src/tree/sub/deeper/c"
ln -s ../a "$W/src/tree/sub/link"

# push_set NAME TRANSPORT DIR [LABEL]: the sized files and the tree, checked.
push_set() {
	local name=$1 tr=$2 dir=$3 label=${4:-$2} t0 t1
	t0=$(now)
	if run "${name}_files" "${C[@]}" --transport "$tr" --chunk-size 64K "${files[@]}" \
		"$SERVER:data/$dir/"; then
		t1=$(now)
		say "time: $label push of ${#files[@]} files, $total bytes: $(secs "$t0" "$t1") s, $(rate "$total" "$t0" "$t1") MB/s (emulated)"
		for s in "${SIZES[@]}"; do
			same "$label push" "$W/src/f_$s" "$W/mod/$dir/f_$s"
		done
	else
		fail "$label push of the sized files: rc $? ($(head -3 "$OUT/${name}_files.err"))"
	fi
	if run "${name}_tree" "${C[@]}" --transport "$tr" --chunk-size 64K -r "$W/src/tree" \
		"$SERVER:data/$dir/"; then
		same_tree "$label push -r" "$W/src/tree" "$W/mod/$dir/tree"
	else
		fail "$label push -r of the tree: rc $? ($(head -3 "$OUT/${name}_tree.err"))"
	fi
}

# ---- 1. verbs push --------------------------------------------------------------
push_set verbs_push verbs v

# ---- 2. verbs pull ----------------------------------------------------------------
big=f_$((3 * 1024 * 1024 + 123))
t0=$(now)
if run verbs_pull "${C[@]}" --transport verbs --chunk-size 64K "$SERVER:data/v/$big" \
	"$SERVER:data/v/f_0" "$SERVER:data/v/f_$((CH + 1))" "$W/pull/"; then
	t1=$(now)
	say "time: verbs pull of $((3 * 1024 * 1024 + 123 + CH + 1)) bytes: $(secs "$t0" "$t1") s, $(rate $((3 * 1024 * 1024 + 123 + CH + 1)) "$t0" "$t1") MB/s (emulated)"
	same "verbs pull" "$W/src/$big" "$W/pull/$big"
	same "verbs pull" "$W/src/f_0" "$W/pull/f_0"
	same "verbs pull" "$W/src/f_$((CH + 1))" "$W/pull/f_$((CH + 1))"
else
	fail "verbs pull: rc $? ($(head -3 "$OUT/verbs_pull.err"))"
fi
if run verbs_pull_tree "${C[@]}" --transport verbs -r "$SERVER:data/v/tree" "$W/pull/"; then
	same_tree "verbs pull -r" "$W/src/tree" "$W/pull/tree"
else
	fail "verbs pull -r: rc $? ($(head -3 "$OUT/verbs_pull_tree.err"))"
fi

# ---- 2b. packed slots over verbs: 300 small files, push and pull ------------------------
mkdir -p "$W/src/small"
for i in $(seq 1 300); do
	head -c $(((i * 37) % 3000 + 1)) /dev/urandom >"$W/src/small/s$i"
done
packed_ok() { # DESC OUTFILE
	if jq -e -s 'map(select(.event == "summary")) | .[0] | .packed_files == 300 and
		.packed_slots >= 1 and .packed_slots < 300' "$2" >/dev/null; then
		pass "$1: 300 files packed"
	else
		fail "$1: not packed: $(grep summary "$2" | head -1)"
	fi
}
if run verbs_packed_push "${C[@]}" --transport verbs --json -r "$W/src/small" "$SERVER:data/p/"; then
	same_tree "verbs packed push" "$W/src/small" "$W/mod/p/small"
	packed_ok "verbs packed push" "$OUT/verbs_packed_push.out"
else
	fail "verbs packed push: rc $? ($(head -3 "$OUT/verbs_packed_push.err"))"
fi
if run verbs_packed_pull "${C[@]}" --transport verbs --json -r "$SERVER:data/p/small" "$W/pull/"; then
	same_tree "verbs packed pull" "$W/src/small" "$W/pull/small"
	packed_ok "verbs packed pull" "$OUT/verbs_packed_pull.out"
else
	fail "verbs packed pull: rc $? ($(head -3 "$OUT/verbs_packed_pull.err"))"
fi

# The packed format's edges (64 KiB chunks pack files of up to 16 KiB): empty
# files, one byte, 16 KiB and one more, a file of exactly a chunk, one spanning
# chunks, small files in nested directories beside big ones; pushed and pulled,
# byte-identical, the four packable files packed.
mkdir -p "$W/src/pmixed/sub/deeper" "$W/src/pmixed/emptydir"
: >"$W/src/pmixed/empty1"
: >"$W/src/pmixed/sub/empty2"
for f in one:1 sub/small:5000 k16:16384 k16plus:16385 chunk:65536 sub/span:$((2 * 65536 + 7)) \
	sub/deeper/tail:333 big:$((3 * 1024 * 1024 + 5)); do
	head -c "${f#*:}" /dev/urandom >"$W/src/pmixed/${f%%:*}"
done
# packed_mixed NAME LABEL DIR: push and pull that tree (C: the client command).
packed_mixed() {
	local name=$1 label=$2 dir=$3 way from to at rc
	mkdir -p "$W/pull/$dir"
	for way in push pull; do
		from=$W/src/pmixed to=$SERVER:data/$dir/ at=$W/mod/$dir/pmixed
		[ "$way" = pull ] && from=$SERVER:data/$dir/pmixed to=$W/pull/$dir/ at=$W/pull/$dir/pmixed
		run "${name}_$way" "${C[@]}" --transport verbs --chunk-size 64K --json -r "$from" "$to"
		rc=$?
		if [ "$rc" -ne 0 ]; then
			fail "$label $way of the packed edges: rc $rc ($(head -3 "$OUT/${name}_$way.err"))"
			continue
		fi
		same_tree "$label $way of the packed edges" "$W/src/pmixed" "$at"
		jq -e -s 'map(select(.event == "summary")) | .[0].packed_files == 4' \
			"$OUT/${name}_$way.out" >/dev/null && pass "$label $way: the 4 packable files packed" ||
			fail "$label $way: $(grep summary "$OUT/${name}_$way.out" | head -1)"
	done
}
packed_mixed verbs_pmixed "verbs" pm

# ---- 2c. sealed verbs lanes: the engine seals each slot (the daemon's cipher) --------
# encryption in the start event (and the daemon's log): none by default on verbs,
# the daemon's suite (cipher = aes-128-gcm, not the default AES-256-GCM: the negotiated
# suite reaches the engines' slot keys) with --encrypt and where the module requires it.
enc_is() { # DESC OUTFILE WANT
	if jq -e -s --arg w "$3" 'map(select(.event == "start")) | .[0] |
		.transport == "verbs" and .encryption == $w' "$2" >/dev/null; then
		pass "$1: verbs lanes, encryption $3 (start event)"
	else
		fail "$1: not verbs with encryption $3: $(grep '"start"' "$2" | head -1)"
	fi
}
if run enc_default "${C[@]}" --transport verbs --json "$W/src/f_1" "$SERVER:data/e0/"; then
	enc_is "verbs push by default" "$OUT/enc_default.out" none
else
	fail "verbs push by default: rc $? ($(head -3 "$OUT/enc_default.err"))"
fi
if run enc_push "${C[@]}" --transport verbs --encrypt --json --chunk-size 64K "${files[@]}" \
	"$SERVER:data/e/"; then
	enc_is "verbs push --encrypt" "$OUT/enc_push.out" aes-128-gcm
	for s in "${SIZES[@]}"; do
		same "sealed verbs push" "$W/src/f_$s" "$W/mod/e/f_$s"
	done
else
	fail "sealed verbs push: rc $? ($(head -3 "$OUT/enc_push.err"))"
fi
if grep -q "push to data: [0-9]* verbs lanes, encrypted (AES-128-GCM)" "$W/d.log"; then
	pass "daemon log: sealed verbs push"
else
	fail "daemon log lacks a sealed verbs push: $(grep 'push to data' "$W/d.log" | tail -1)"
fi
if run enc_tree "${C[@]}" --transport verbs --encrypt -r "$W/src/tree" "$SERVER:data/e/"; then
	same_tree "sealed verbs push -r" "$W/src/tree" "$W/mod/e/tree"
else
	fail "sealed verbs push -r: rc $? ($(head -3 "$OUT/enc_tree.err"))"
fi
if run enc_packed "${C[@]}" --transport verbs --encrypt --json -r "$W/src/small" "$SERVER:data/ep/"; then
	same_tree "sealed verbs packed push" "$W/src/small" "$W/mod/ep/small"
	packed_ok "sealed verbs packed push" "$OUT/enc_packed.out"
else
	fail "sealed verbs packed push: rc $? ($(head -3 "$OUT/enc_packed.err"))"
fi
mkdir -p "$W/epull"
if run enc_pull "${C[@]}" --transport verbs --encrypt --json --chunk-size 64K \
	"$SERVER:data/e/$big" "$W/epull/" &&
	run enc_pull_tree "${C[@]}" --transport verbs --encrypt -r "$SERVER:data/e/tree" "$W/epull/"; then
	enc_is "verbs pull --encrypt" "$OUT/enc_pull.out" aes-128-gcm
	same "sealed verbs pull" "$W/src/$big" "$W/epull/$big"
	same_tree "sealed verbs pull -r" "$W/src/tree" "$W/epull/tree"
else
	fail "sealed verbs pull: rc $? ($(head -3 "$OUT/enc_pull.err" "$OUT/enc_pull_tree.err"))"
fi
if run enc_required "${C[@]}" --transport verbs --json "$W/src/$big" "$SERVER:sealed/"; then
	enc_is "verbs push into a module with encryption = required" "$OUT/enc_required.out" aes-128-gcm
	same "required-sealed verbs push" "$W/src/$big" "$W/req/$big"
else
	fail "verbs push into encryption = required: rc $? ($(head -3 "$OUT/enc_required.err"))"
fi
run enc_noenc "${C[@]}" --transport verbs --no-encrypt "$W/src/f_1" "$SERVER:sealed/"
rc=$?
if [ "$rc" -eq 20 ] && [ ! -e "$W/req/f_1" ]; then
	pass "--no-encrypt into encryption = required: exit 20, nothing written"
else
	fail "--no-encrypt into encryption = required: rc $rc ($(head -2 "$OUT/enc_noenc.err"))"
fi
# What crosses the wire (RoCE v2 frames on veth0, captured with a packet socket):
# a known file's lines are there in clear lanes, and none in sealed ones.
for i in $(seq 1 8000); do printf 'rdmacp-wire-marker-%06d\n' "$i"; done >"$W/src/marker"
# captured NAME CMD...: run NAME (see run) while capture.py records veth0's frames into
# $W/NAME.cap; "rc N" (CMD's status) lands in $W/NAME.ready.
captured() {
	local name=$1 cpid
	shift
	python3 "$(dirname "$0")/capture.py" veth0 "$W/$name.cap" >"$W/$name.ready" 2>&1 &
	cpid=$!
	for _ in $(seq 1 100); do grep -q capturing "$W/$name.ready" && break; sleep 0.1; done
	run "$name" "$@"
	echo "rc $?" >>"$W/$name.ready"
	kill -TERM "$cpid"
	wait "$cpid"
}
wire_marks() { # NAME RDMACP-ARGS...: the push under capture; prints the marker lines seen
	local name=$1 n
	shift
	captured "$name" "${C[@]}" --transport verbs "$@" "$W/src/marker" "$SERVER:data/$name/"
	n=$(grep -a -c 'rdmacp-wire-marker-' "$W/$name.cap" 2>/dev/null)
	echo "${n:-0}"
}
clear_n=$(wire_marks wire_clear --no-encrypt)
sealed_n=$(wire_marks wire_sealed --encrypt)
say "wire: $(stat -c %s "$W/wire_clear.cap") bytes captured in clear, $(stat -c %s "$W/wire_sealed.cap") sealed"
if [ "$clear_n" -gt 1000 ] && grep -q "rc 0" "$W/wire_clear.ready"; then
	pass "wire, clear verbs lanes: $clear_n marker lines of the file seen (the capture works)"
else
	fail "wire, clear verbs lanes: $clear_n marker lines seen ($(cat "$W/wire_clear.ready"))"
fi
if [ "$sealed_n" -eq 0 ] && grep -q "rc 0" "$W/wire_sealed.ready" &&
	[ "$(stat -c %s "$W/wire_sealed.cap")" -gt 100000 ]; then
	pass "wire, sealed verbs lanes: no line of the file on the wire"
	same "sealed verbs push under capture" "$W/src/marker" "$W/mod/wire_sealed/marker"
else
	fail "wire, sealed verbs lanes: $sealed_n marker lines seen ($(cat "$W/wire_sealed.ready"))"
fi
# --partial over sealed verbs lanes: a paced push killed part-way, then resumed sealed.
head -c $((6 * 1024 * 1024)) /dev/urandom >"$W/src/res6m"
"${C[@]}" --transport verbs --encrypt --partial --bwlimit 1M --chunk-size 64K "$W/src/res6m" \
	"$SERVER:data/res/" >"$OUT/enc_cut.out" 2>"$OUT/enc_cut.err" &
cpid=$!
for _ in $(seq 1 100); do
	sleep 0.1
	[ -n "$(find "$W/mod/res" -path '*.rdmacp-partial*' -type f -size +1024k 2>/dev/null)" ] && break
done
kill -9 "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
if [ -e "$W/mod/res/res6m" ]; then
	fail "sealed verbs --partial: a file under the final name after the kill"
elif run enc_resume "${C[@]}" --transport verbs --encrypt --partial --json --chunk-size 64K \
	"$W/src/res6m" "$SERVER:data/res/"; then
	if jq -e -s 'map(select(.event == "file")) | .[0] | .action == "resumed" and
		.resumed_bytes > 0' "$OUT/enc_resume.out" >/dev/null; then
		pass "sealed verbs --partial: resumed after a kill ($(jq -s 'map(select(.event == "file")) | .[0].resumed_bytes' "$OUT/enc_resume.out") bytes kept)"
	else
		fail "sealed verbs --partial: not resumed: $(grep '"file"' "$OUT/enc_resume.out" | head -1)"
	fi
	same "sealed verbs --partial resumed" "$W/src/res6m" "$W/mod/res/res6m"
else
	fail "sealed verbs --partial re-run: rc $? ($(head -3 "$OUT/enc_resume.err"))"
fi
# A client from before sealed verbs lanes (capability 0x400000 off) into that module.
RDMACP_TEST_CAPS_OFF=0x400000 run enc_old "${C[@]}" --transport verbs "$W/src/f_1" "$SERVER:sealed/o/"
rc=$?
if [ "$rc" -eq 20 ] && [ ! -e "$W/req/o/f_1" ] &&
	grep -q "this client cannot encrypt verbs data lanes" "$OUT/enc_old.err"; then
	pass "older client into encryption = required over verbs: exit 20, says why"
else
	fail "older client into encryption = required over verbs: rc $rc ($(head -2 "$OUT/enc_old.err"))"
fi
# A slot spoiled on its way (the sender's test hook, lane 0): it fails to open, the
# session fails (exit 8) and nothing is committed.
for how in flip replay move truncate; do
	RDMACP_TEST_LANE_TAMPER=$how run "enc_$how" "${C[@]}" --transport verbs --encrypt \
		--chunk-size 64K "$W/src/$big" "$SERVER:data/t_$how/"
	rc=$?
	if [ "$rc" -eq 8 ] && [ ! -e "$W/mod/t_$how/$big" ] &&
		grep -q "fails authentication" "$OUT/enc_$how.err"; then
		pass "sealed verbs slot, $how: exit 8, fails authentication, nothing committed"
	else
		fail "sealed verbs slot, $how: rc $rc ($(head -2 "$OUT/enc_$how.err"))"
	fi
done
if run enc_bench "${C[@]}" bench --transport verbs --encrypt --size 8M --json "$SERVER"; then
	if jq -e '.transport == "verbs" and .encryption == "aes-128-gcm" and
		.bytes == 8388608' "$OUT/enc_bench.out" >/dev/null; then
		pass "sealed verbs bench: 8 MiB checked"
	else
		fail "sealed verbs bench json: $(head -c 300 "$OUT/enc_bench.out")"
	fi
else
	fail "sealed verbs bench: rc $? ($(head -3 "$OUT/enc_bench.err"))"
fi

# ---- 3. auto picks verbs ------------------------------------------------------------
if run auto "${C[@]}" --transport auto --json "$W/src/f_1" "$SERVER:data/auto/"; then
	if jq -e -s 'map(select(.event == "start")) | .[0].transport == "verbs"' \
		"$OUT/auto.out" >/dev/null; then
		pass "--transport auto chose verbs (start event)"
	else
		fail "--transport auto did not choose verbs: $(head -1 "$OUT/auto.out")"
	fi
	same "auto push" "$W/src/f_1" "$W/mod/auto/f_1"
else
	fail "--transport auto push: rc $? ($(head -3 "$OUT/auto.err"))"
fi

# ---- 3a. auto picks verbs with a dual-stack, socket-activated daemon --------------------
# systemd hands a [::] socket: the client's IPv4 address arrives as ::ffff:10.0.0.2,
# which rdma_cm can't bind; the daemon must listen for lanes on 10.0.0.2 instead of
# falling back to tcp without a word.
if command -v systemd-socket-activate >/dev/null; then
	grep -v '^listen' "$W/d.conf" >"$W/d6.conf"
	systemd-socket-activate -l "[::]:$((PORT + 1))" "$RDMACPD" --config "$W/d6.conf" -v \
		>"$W/d6.log" 2>&1 &
	SAPID=$!
	for _ in $(seq 1 100); do
		(exec 4<>"/dev/tcp/$SERVER/$((PORT + 1))") 2>/dev/null && break
		sleep 0.1
	done
	if run auto6 "${C[@]}" -P $((PORT + 1)) --transport auto --json "$W/src/f_1" \
		"$SERVER:data/auto6/"; then
		if jq -e -s 'map(select(.event == "start")) | .[0].transport == "verbs"' \
			"$OUT/auto6.out" >/dev/null; then
			pass "dual-stack socket-activated daemon: --transport auto chose verbs"
		else
			fail "dual-stack socket-activated daemon: auto did not choose verbs: $(head -1 "$OUT/auto6.out")"
		fi
	else
		fail "dual-stack socket-activated daemon: rc $? ($(head -3 "$OUT/auto6.err"))"
	fi
	kill -TERM "$SAPID" 2>/dev/null
	wait "$SAPID" 2>/dev/null
	cp "$W/d6.log" "$OUT/daemon6.log"
else
	say "note: systemd-socket-activate not installed: dual-stack check not run"
fi

# ---- 3b. rails: lanes striped over rxe0 and rxe1 ------------------------------------
# Lane 0 leaves from rxe0 (10.0.0.1), lane 1 from rxe1 (10.0.0.2, loopback on the
# daemon's device); the daemon's MR keys are per lane in RING. A push and a pull.
# By default the daemon takes RDMA lanes only from the control connection's address
# (10.0.0.1): lane 1 is refused, token and all, and nothing lands. With
# 'lanes from other addresses = yes' (reloaded by SIGHUP) the rails get in.
rails=f_$((3 * 1024 * 1024 + 123))
run rails_refused "${C[@]}" --transport verbs --devices rxe0,rxe1 --qps 2 --chunk-size 64K \
	"$W/src/$rails" "$SERVER:data/rails_refused/"
rc=$?
if [ "$rc" -eq 8 ] && ! [ -e "$W/mod/rails_refused/$rails" ]; then
	pass "lane from 10.0.0.2 (not the control connection's address) refused: exit 8, '$(tail -1 "$OUT/rails_refused.err")'"
else
	fail "lane from another address than the client's was not refused: rc $rc"
fi
sed -i 's/^idle timeout = 30$/&\nlanes from other addresses = yes/' "$W/d.conf"
n_reloads=$(grep -c "reloaded" "$W/d.log")
kill -HUP "$DPID"
for _ in $(seq 1 50); do
	[ "$(grep -c "reloaded" "$W/d.log")" -gt "$n_reloads" ] && break
	sleep 0.1
done
if run rails_push "${C[@]}" --transport verbs --devices rxe0,rxe1 --qps 2 --chunk-size 64K \
	"$W/src/$rails" "$SERVER:data/rails/"; then
	same "rails push (rxe0,rxe1)" "$W/src/$rails" "$W/mod/rails/$rails"
else
	fail "rails push --devices rxe0,rxe1: rc $? ($(head -3 "$OUT/rails_push.err"))"
fi
mkdir -p "$W/rails_pull"
if run rails_pull "${C[@]}" --devices rxe0,rxe1 --qps 2 --chunk-size 64K \
	"$SERVER:data/rails/$rails" "$W/rails_pull/"; then
	same "rails pull (rxe0,rxe1)" "$W/src/$rails" "$W/rails_pull/$rails"
else
	fail "rails pull --devices rxe0,rxe1: rc $? ($(head -3 "$OUT/rails_pull.err"))"
fi
run rails_nodev "${C[@]}" --devices nosuchdev "$W/src/f_1" "$SERVER:data/rails/"
rc=$?
if [ "$rc" -eq 13 ] && grep -q "no RDMA device named nosuchdev" "$OUT/rails_nodev.err"; then
	pass "--devices nosuchdev: exit 13, '$(tail -1 "$OUT/rails_nodev.err")'"
else
	fail "--devices nosuchdev: rc $rc ($(head -1 "$OUT/rails_nodev.err"))"
fi

# Rails pin the pool once per device and once for io_uring, against one RLIMIT_MEMLOCK:
# a limit that holds two pools but not three refuses --devices rxe0,rxe1 up front.
if command -v capsh >/dev/null && capsh --drop=cap_ipc_lock -- -c true 2>/dev/null; then
	n2=$("${C[@]}" --chunk-size 64K --devices rxe0,rxe1 doctor --json 2>/dev/null | jq -r .memlock.need)
	run rails_memlock capsh --drop=cap_ipc_lock -- -c "ulimit -l $((n2 / 1024)) && exec \
		$(printf '%q ' "${C[@]}") --transport verbs --devices rxe0,rxe1 --chunk-size 64K \
		'$W/src/f_1' $SERVER:data/rails/"
	rc=$?
	if [ "$rc" -eq 6 ] && grep -q "pinned 3 times: io_uring and 2 devices" "$OUT/rails_memlock.err"; then
		pass "rails under a limit of two pools: exit 6, '$(head -1 "$OUT/rails_memlock.err" | cut -c1-120)'"
	else
		fail "rails under a limit of two pools: rc $rc ($(head -1 "$OUT/rails_memlock.err"))"
	fi
else
	say "rails memlock check not run: no capsh, or CAP_IPC_LOCK cannot be dropped here"
fi

# ---- 4. the same push set over tcp ----------------------------------------------------
push_set tcp_push tcp t

# ---- 5. one 8 MiB file each way of moving it, for the emulated rate --------------------
head -c $((8 * 1024 * 1024)) /dev/urandom >"$W/src/rate8m"
for tr in verbs tcp; do
	t0=$(now)
	if run "rate_$tr" "${C[@]}" --transport "$tr" "$W/src/rate8m" "$SERVER:data/rate_$tr/"; then
		t1=$(now)
		say "time: $tr push of one 8 MiB file (1M chunks, 2 lanes): $(secs "$t0" "$t1") s, $(rate $((8 * 1024 * 1024)) "$t0" "$t1") MB/s (emulated, whole command)"
		same "$tr 8 MiB push" "$W/src/rate8m" "$W/mod/rate_$tr/rate8m"
	else
		fail "$tr push of 8 MiB: rc $? ($(head -3 "$OUT/rate_$tr.err"))"
	fi
done

# ---- 5b. --poll: the client polls its CQ every turn, unarmed ------------------------
if run poll_push "${C[@]}" --transport verbs --poll "$W/src/rate8m" "$SERVER:data/poll/"; then
	same "verbs push with --poll" "$W/src/rate8m" "$W/mod/poll/rate8m"
else
	fail "verbs push with --poll: rc $? ($(head -3 "$OUT/poll_push.err"))"
fi
if run poll_pull "${C[@]}" --transport verbs --poll "$SERVER:data/poll/rate8m" "$W/pull/poll8m"; then
	same "verbs pull with --poll" "$W/src/rate8m" "$W/pull/poll8m"
else
	fail "verbs pull with --poll: rc $? ($(head -3 "$OUT/poll_pull.err"))"
fi

# ---- 5b'. hashing threads on verbs: the client hashes beside its loop, each way ----------
# (2 vCPUs here: auto gives none, so asked for; sealed too: a sealed sender hashes on its loop.)
for enc in --no-encrypt --encrypt; do
	if run ht_push "${C[@]}" --transport verbs --hash-threads 2 $enc -r "$W/src/tree" \
		"$W/src/rate8m" "$SERVER:data/ht$enc/"; then
		same_tree "verbs push, 2 hashing threads ($enc)" "$W/src/tree" "$W/mod/ht$enc/tree"
		same "verbs push, 2 hashing threads ($enc)" "$W/src/rate8m" "$W/mod/ht$enc/rate8m"
	else
		fail "verbs push, 2 hashing threads ($enc): rc $? ($(head -3 "$OUT/ht_push.err"))"
	fi
	mkdir -p "$W/pull/ht$enc"
	if run ht_pull "${C[@]}" --transport verbs --hash-threads 2 $enc -r \
		"$SERVER:data/ht$enc/tree" "$SERVER:data/ht$enc/rate8m" "$W/pull/ht$enc/"; then
		same_tree "verbs pull, 2 hashing threads ($enc)" "$W/src/tree" "$W/pull/ht$enc/tree"
		same "verbs pull, 2 hashing threads ($enc)" "$W/src/rate8m" "$W/pull/ht$enc/rate8m"
	else
		fail "verbs pull, 2 hashing threads ($enc): rc $? ($(head -3 "$OUT/ht_pull.err"))"
	fi
done

# --tos and --ack-timeout are set on the lanes before their routes (rdma_cm options).
# On the wire (a packet socket on veth0): every RoCE v2 frame of the lanes carries IP TOS
# 106 both ways, the daemon's too (its lanes follow the class of the client's connection
# request), for a push and for a pull (the daemon's data frames). The connection
# manager's own MADs (QP 1: a disconnect the daemon sends first goes in its listening id's
# class) are counted apart (capture.py) and not checked here.
tos_check() { # NAME DESC CMD...: run CMD under capture, then check the frames' TOS
	local name=$1 desc=$2 lines
	shift 2
	captured "$name" "$@"
	python3 "$(dirname "$0")/capture.py" tos "$W/$name.cap" >"$OUT/$name.tos"
	lines=$(tr '\n' ';' <"$OUT/$name.tos")
	if grep -q "rc 0" "$W/$name.ready" && grep -q "^10.0.0.1 tos 106 frames " "$OUT/$name.tos" &&
		grep -q "^10.0.0.2 tos 106 frames " "$OUT/$name.tos" &&
		! grep " frames " "$OUT/$name.tos" | grep -qv " tos 106 "; then
		pass "$desc: every RoCE frame both ways has TOS 106 ($lines)"
	else
		fail "$desc: $(cat "$W/$name.ready" | tail -1), frames: $lines"
	fi
}
tos_check tos_push "verbs push with --tos 106 --ack-timeout 14" "${C[@]}" --transport verbs \
	--tos 106 --ack-timeout 14 "$W/src/f_65537" "$SERVER:data/tos/"
same "verbs push with --tos 106 --ack-timeout 14" "$W/src/f_65537" "$W/mod/tos/f_65537"
mkdir -p "$W/tospull"
tos_check tos_pull "verbs pull with --tos 106" "${C[@]}" --transport verbs --tos 106 \
	"$SERVER:data/tos/f_65537" "$W/tospull/"
same "verbs pull with --tos 106" "$W/src/f_65537" "$W/tospull/f_65537"

# ---- 5c. forced RNR: a daemon that never posts its receives again ------------------------
# (RDMACPD_TEST_NO_REPOST) once its first receives are used, the client's next descriptor
# meets RNR NAKs: after 6 retries 0.64 ms apart the lane fails with RNR_RETRY_EXC, the copy
# fails within seconds (not the idle timeout), nothing is committed on either side.
RPORT=7475
sed "s/^listen = .*/listen = $SERVER:$RPORT/" "$W/d.conf" >"$W/d_rnr.conf"
RDMACPD_TEST_NO_REPOST=1 "$RDMACPD" --config "$W/d_rnr.conf" -v >"$W/d_rnr.log" 2>&1 &
RPID=$!
for _ in $(seq 1 100); do
	(exec 4<>"/dev/tcp/$SERVER/$RPORT") 2>/dev/null && break
	sleep 0.1
done
head -c $((8 * 1024 * 1024)) /dev/urandom >"$W/src/rnr8m"
t0=$(now)
RC=("$RDMACP" --config /dev/null --cert "$W/certs/client.crt" --key "$W/certs/client.key"
	--ca "$W/certs/ca.crt" -P "$RPORT" --no-progress)
run rnr_push "${RC[@]}" --transport verbs --chunk-size 64K --lanes 1 \
	"$W/src/rnr8m" "$SERVER:data/rnr/"
rc=$?
t1=$(now)
if [ "$rc" -eq 8 ] && grep -q "RNR_RETRY_EXC" "$OUT/rnr_push.err" && [ ! -e "$W/mod/rnr/rnr8m" ] &&
	awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 25) }'; then
	pass "forced RNR: exit 8 after $(secs "$t0" "$t1") s, RNR_RETRY_EXC named, nothing committed"
else
	fail "forced RNR: rc $rc after $(secs "$t0" "$t1") s ($(head -2 "$OUT/rnr_push.err"))"
fi
kill -TERM "$RPID" 2>/dev/null
wait "$RPID" 2>/dev/null
cp "$W/d_rnr.log" "$OUT/daemon_rnr.log" 2>/dev/null

# ---- 6. kill -9 of the session process mid-transfer -----------------------------------
head -c $((20 * 1024 * 1024)) /dev/urandom >"$W/src/kill20m"
# kill_mid NAME DIR: a verbs push (client "${C[@]}") whose daemon session child is
# killed once data flows; the client fails, nothing lands under the final name.
kill_mid() {
	local name=$1 dir=$2 cpid child crc t0 t1 temps
	"${C[@]}" --transport verbs --bwlimit 2M "$W/src/kill20m" "$SERVER:data/$dir/" \
		>"$OUT/$name.out" 2>"$OUT/$name.err" &
	cpid=$!
	child=
	for _ in $(seq 1 100); do
		sleep 0.1
		child=$(pgrep -n -P "$DPID") # the newest: an earlier session may still be ending
		# wait until data is flowing: the temp file has grown
		if [ -n "$child" ] && [ -n "$(find "$W/mod/$dir" -name '.*.rdmacp.*' -size +256k 2>/dev/null)" ]; then
			break
		fi
	done
	if [ -z "$child" ]; then
		fail "$name: no session child of the daemon found"
		kill "$cpid" 2>/dev/null
		wait "$cpid"
		return
	fi
	say "$name: session process $child (temp: $(find "$W/mod/$dir" -name '.*.rdmacp.*' -printf '%f %s bytes ' 2>/dev/null))"
	t0=$(now)
	kill -9 "$child"
	wait "$cpid"
	crc=$?
	t1=$(now)
	if [ "$crc" -ne 0 ]; then
		pass "$name: kill -9 of the session: client exits $crc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/$name.err"))"
	else
		fail "$name: kill -9 of the session: client exited 0"
	fi
	if [ -e "$W/mod/$dir/kill20m" ]; then
		fail "$name: a file appeared under the final name"
	else
		pass "$name: nothing under the final name"
	fi
	temps=$(find "$W/mod/$dir" -name '.*.rdmacp.*' -printf '%f (%s bytes) ' 2>/dev/null)
	say "note: temp files left by the killed session: ${temps:-none} (the next session that writes there removes those it can lock, once more than 2 s old)"
	if kill -0 "$DPID" 2>/dev/null; then
		pass "$name: the daemon itself is still running"
		if run "${name}_after" "${C[@]}" --transport verbs "$W/src/f_65537" "$SERVER:data/$dir/"; then
			same "verbs push after the kill" "$W/src/f_65537" "$W/mod/$dir/f_65537"
		else
			fail "verbs push after the kill: rc $? ($(head -3 "$OUT/${name}_after.err"))"
		fi
	else
		fail "$name: the daemon died too"
	fi
}
kill_mid kill k

# ---- 7. the WRITE + SEND path (iWARP's), forced on Soft-RoCE ---------------------------
# start_daemon PORT LOG ENV...: another daemon on the same module, its own environment.
start_daemon() {
	local port=$1 log=$2
	shift 2
	sed "s/^listen = .*/listen = $SERVER:$port/" "$W/d.conf" >"$W/d$port.conf"
	env "$@" "$RDMACPD" --config "$W/d$port.conf" -v >"$W/$log" 2>&1 &
	for _ in $(seq 1 100); do
		(exec 4<>"/dev/tcp/$SERVER/$port") 2>/dev/null && break
		sleep 0.1
	done
}
# start_path NAME: the --json start event's transport and verbs path, "tcp -" style.
start_path() { jq -r -s 'map(select(.event == "start")) | .[0] | "\(.transport) \(.verbs_path // "-")"' "$OUT/$1.out"; }
C_IMM=("${C[@]}")
C=(env RDMACP_TEST_WRITE_SEND=1 "${C_IMM[@]}")
# 7a. the client's device needs it, the daemon's does not: the daemon follows OPEN.
if run ws_json "${C[@]}" --transport verbs --json "$W/src/f_1" "$SERVER:data/ws/" &&
	[ "$(start_path ws_json)" = "verbs write_send" ]; then
	pass "WRITE + SEND: the --json start event says verbs_path write_send"
else
	fail "WRITE + SEND: start event: $(start_path ws_json 2>/dev/null) ($(head -3 "$OUT/ws_json.err"))"
fi
if grep -q "verbs lanes (WRITE + SEND)" "$W/d.log"; then
	pass "WRITE + SEND: the daemon's log says its lanes took it"
else
	fail "WRITE + SEND: the daemon's log does not say WRITE + SEND"
fi
push_set ws_push verbs ws "verbs (WRITE + SEND)"
if run ws_pull "${C[@]}" --transport verbs --chunk-size 64K "$SERVER:data/ws/$big" \
	"$SERVER:data/ws/f_0" "$W/pull/ws/"; then
	same "WRITE + SEND pull" "$W/src/$big" "$W/pull/ws/$big"
	same "WRITE + SEND pull" "$W/src/f_0" "$W/pull/ws/f_0"
else
	fail "WRITE + SEND pull: rc $? ($(head -3 "$OUT/ws_pull.err"))"
fi
if run ws_pull_tree "${C[@]}" --transport verbs -r "$SERVER:data/ws/tree" "$W/pull/ws/"; then
	same_tree "WRITE + SEND pull -r" "$W/src/tree" "$W/pull/ws/tree"
else
	fail "WRITE + SEND pull -r: rc $? ($(head -3 "$OUT/ws_pull_tree.err"))"
fi
# The packed format on this path too: 300 small files, then the edges.
if run ws_packed_push "${C[@]}" --transport verbs --json -r "$W/src/small" "$SERVER:data/wsp/"; then
	same_tree "WRITE + SEND packed push" "$W/src/small" "$W/mod/wsp/small"
	packed_ok "WRITE + SEND packed push" "$OUT/ws_packed_push.out"
else
	fail "WRITE + SEND packed push: rc $? ($(head -3 "$OUT/ws_packed_push.err"))"
fi
packed_mixed ws_pmixed "WRITE + SEND" wspm
[ "$(start_path ws_pmixed_push)" = "verbs write_send" ] &&
	pass "WRITE + SEND: the packed edges went on that path" ||
	fail "WRITE + SEND packed edges: path $(start_path ws_pmixed_push 2>/dev/null)"
kill_mid ws_kill wsk
# 7b. the daemon's device needs it (its switch): a client that does not ask can't
# have verbs (exit 13, said), auto takes tcp; one that asks gets it.
start_daemon $((PORT + 2)) dws.log RDMACPD_TEST_WRITE_SEND=1
run ws_daemon_verbs "${C_IMM[@]}" -P $((PORT + 2)) --transport verbs "$W/src/f_1" "$SERVER:data/wsd/"
rc=$?
if [ "$rc" -eq 13 ] && grep -q "WRITE + SEND" "$OUT/ws_daemon_verbs.err" && ! [ -e "$W/mod/wsd/f_1" ]; then
	pass "daemon needs WRITE + SEND, client without it: exit 13, '$(tail -1 "$OUT/ws_daemon_verbs.err" | cut -c1-160)'"
else
	fail "daemon needs WRITE + SEND, client without it: rc $rc ($(tail -1 "$OUT/ws_daemon_verbs.err"))"
fi
if run ws_daemon_auto "${C_IMM[@]}" -P $((PORT + 2)) --transport auto --json "$W/src/f_1" \
	"$SERVER:data/wsd/" && [ "$(start_path ws_daemon_auto)" = "tcp -" ]; then
	same "daemon needs WRITE + SEND, auto: tcp" "$W/src/f_1" "$W/mod/wsd/f_1"
else
	fail "daemon needs WRITE + SEND, auto: $(start_path ws_daemon_auto 2>/dev/null) ($(head -3 "$OUT/ws_daemon_auto.err"))"
fi
if run ws_both "${C[@]}" -P $((PORT + 2)) --transport verbs --json --chunk-size 64K \
	"$W/src/$big" "$SERVER:data/wsd/" && [ "$(start_path ws_both)" = "verbs write_send" ]; then
	same "both ends WRITE + SEND" "$W/src/$big" "$W/mod/wsd/$big"
else
	fail "both ends WRITE + SEND: rc/path $(start_path ws_both 2>/dev/null) ($(head -3 "$OUT/ws_both.err"))"
fi
# An old client (no capability 0x2000000) against that daemon: refused with its reason.
run ws_old_client env RDMACP_TEST_CAPS_OFF=0x2000000 "${C_IMM[@]}" -P $((PORT + 2)) \
	--transport verbs "$W/src/f_1" "$SERVER:data/wsold/"
rc=$?
if [ "$rc" -eq 13 ] && grep -q "client is too old" "$OUT/ws_old_client.err"; then
	pass "daemon needs WRITE + SEND, old client: exit 13, '$(tail -1 "$OUT/ws_old_client.err" | cut -c1-160)'"
else
	fail "daemon needs WRITE + SEND, old client: rc $rc ($(tail -1 "$OUT/ws_old_client.err"))"
fi
# 7c. a daemon too old for WRITE + SEND: the client that needs it refuses verbs
# (exit 12, daemon too old), auto takes tcp.
start_daemon $((PORT + 3)) dold.log RDMACP_TEST_CAPS_OFF=0x2000000
run ws_old_daemon "${C[@]}" -P $((PORT + 3)) --transport verbs "$W/src/f_1" "$SERVER:data/wsold/"
rc=$?
if [ "$rc" -eq 12 ] && grep -q "too old for the WRITE + SEND" "$OUT/ws_old_daemon.err"; then
	pass "client needs WRITE + SEND, old daemon: exit 12, '$(tail -1 "$OUT/ws_old_daemon.err" | cut -c1-160)'"
else
	fail "client needs WRITE + SEND, old daemon: rc $rc ($(tail -1 "$OUT/ws_old_daemon.err"))"
fi
if run ws_old_daemon_auto "${C[@]}" -P $((PORT + 3)) --transport auto --json "$W/src/f_1" \
	"$SERVER:data/wsold/" && [ "$(start_path ws_old_daemon_auto)" = "tcp -" ]; then
	same "client needs WRITE + SEND, old daemon, auto: tcp" "$W/src/f_1" "$W/mod/wsold/f_1"
else
	fail "client needs WRITE + SEND, old daemon, auto: $(start_path ws_old_daemon_auto 2>/dev/null) ($(head -3 "$OUT/ws_old_daemon_auto.err"))"
fi
C=("${C_IMM[@]}")
for p in $(jobs -p); do
	[ "$p" = "$DPID" ] || kill -TERM "$p" 2>/dev/null
done
cp "$W/dws.log" "$W/dold.log" "$OUT/" 2>/dev/null

bash "$(dirname "$0")/rails.sh" "$B" "$OUT" || FAILS=$((FAILS + 1)) # rails: a rail lost mid-copy
bash "$(dirname "$0")/rails2.sh" "$B" "$OUT" || FAILS=$((FAILS + 1)) # daemon rails: both devices
bash "$(dirname "$0")/rails3.sh" "$B" "$OUT" || FAILS=$((FAILS + 1)) # control on a management address
bash "$(dirname "$0")/readd.sh" "$B" "$OUT" || FAILS=$((FAILS + 1)) # a device gone and back mid-copy
bash "$(dirname "$0")/faults.sh" "$B" "$OUT/faults" || FAILS=$((FAILS + 1)) # IPv6, dual stack, flaps, device loss

# ---- 7. the client's link down for good mid-transfer (last: rxe does not recover) ------
# Both ends must fail in bounded time with nothing committed: the client's lanes at once
# (rxe fails a QP that cannot transmit), the daemon's session when its lanes or its idle
# timeout (30 s here) say so. After the link comes back, rxe's lanes on it do not connect
# again in this VM (control TCP does), so this runs last and checks nothing after it.
# With memory windows (the default) as with the copy's fence.
"${C[@]}" --transport verbs --bwlimit 2M "$W/src/kill20m" "$SERVER:data/down/" \
	>"$OUT/down.out" 2>"$OUT/down.err" &
cpid=$!
# Once data flows (its temp file holds 1 MiB): on a loaded machine a fixed sleep could
# take the link down before the session had its lanes, which tests something else.
for _ in $(seq 1 600); do
	[ -n "$(find "$W/mod/down" -maxdepth 1 -name '.kill20m.*' -size +1024k 2>/dev/null)" ] && break
	sleep 0.1
done
ip link set veth0 down
t0=$(now)
for _ in $(seq 1 900); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$cpid" 2>/dev/null; then
	fail "link down: the client still runs after 90 s"
	kill -9 "$cpid"
fi
wait "$cpid"
crc=$?
t1=$(now)
for _ in $(seq 1 900); do [ -z "$(pgrep -P "$DPID")" ] && break; sleep 0.1; done
t2=$(now)
if [ "$crc" -ne 0 ] && [ "$crc" -ne 137 ]; then
	pass "link down: the client exits $crc after $(secs "$t0" "$t1") s ($(tail -1 "$OUT/down.err"))"
else
	fail "link down: client rc $crc"
fi
if [ -z "$(pgrep -P "$DPID")" ]; then
	pass "link down: the daemon's session ended after $(secs "$t0" "$t2") s"
else
	fail "link down: the daemon's session still runs after $(secs "$t0" "$t2") s"
fi
if [ -e "$W/mod/down/kill20m" ]; then
	fail "link down: a file appeared under the final name"
else
	pass "link down: nothing under the final name"
fi
ip link set veth0 up

say "e2e: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
