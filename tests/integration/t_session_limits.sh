#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Disk and time a push may take (SECURITY.md G 44, issue 8 item 5), against a
# real daemon ("idle timeout = 2" for parts 1-3):
#   1. a FILES entry of 60 MiB into a module on a 64 MiB tmpfs, then no data,
#      answering the daemon's PINGs (rawpeer): the tmpfs stays near empty
#      while no data arrives (nothing is reserved for a declared size), the
#      daemon ends the session within about the idle timeout (ERROR TIMEOUT,
#      PONGs are not progress), its temp file is gone with it
#   1b. a pull whose client (rawpeer recv-all nocredit) never returns a
#      credit but answers PINGs: the daemon's sending session ends at the
#      idle timeout too
#   2. between transfers, a client that only sends PINGs: closed at the idle
#      timeout
#   3. the declared size is enforced: a chunk past it, or a FILE_DONE with
#      more bytes than declared, is a protocol error and nothing is committed
#   4. "max file size = 1M" and "max session bytes = 3M" (a second daemon)
#      with the real client: a 2 MiB file is refused (exit 5, "max file
#      size"); three 1 MiB files and a fourth of 512 KiB: the fourth is
#      refused (exit 9, "max session bytes"), the three are committed; the
#      refusals come in FILES_ACK as PERMISSION for rawpeer too
#   5. bad values for the new keys are config errors (exit 2, FILE:LINE)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
M=$((1024 * 1024))
MOUNTED=0
BG_PIDS=()

cleanup_limits() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup_mount
	cleanup
}
cleanup_mount() {
	if [ "$MOUNTED" = 1 ]; then
		umount "$T/small" 2>/dev/null || umount -l "$T/small"
		MOUNTED=0
	fi
}
trap cleanup_limits EXIT

mkdir -p "$T/small" "$T/capped" "$T/src"
mount -t tmpfs -o size=64m tmpfs "$T/small" 2>"$T/mount.err" ||
	skip "cannot mount a tmpfs: $(head -1 "$T/mount.err")"
MOUNTED=1

PORT=$(free_port)
make_certs "$T/certs"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 2"
cat >>"$T/d.conf" <<EOF

[small]
path = $T/small
allow = client
uid = root
gid = root
EOF
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
D=$DAEMON_PID
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")
rawpeer_for "$PORT"

sessions() { cat /proc/"$D"/task/*/children 2>/dev/null | tr ' ' '\n' | grep .; }
used_kb() { df -k --output=used "$1" | tail -1 | tr -d ' '; }
wait_no_sessions() {
	for _ in $(seq 1 100); do
		[ -z "$(sessions)" ] && return 0
		sleep 0.05
	done
	return 1
}

# ---- 1. a declared size with no data ------------------------------------------------
echo "--- 1. FILES of 60 MiB into a 64 MiB tmpfs, then only PONGs"
wait_no_sessions
base_kb=$(used_kb "$T/small")
timeout 60 "${RAWPEER[@]}" hello open push small/ dir lanes=1 lanes ring \
	files 1:big:$((60 * M)) ack expect "1=OK" idle 12 >"$T/idle.out" 2>&1 &
RP=$!
BG_PIDS+=("$RP")
for _ in $(seq 1 200); do
	grep -q "FILES_ACK" "$T/idle.out" && break
	kill -0 "$RP" 2>/dev/null || break
	sleep 0.02
done
grep -q "FILES_ACK 1=OK" "$T/idle.out" && pass "the 60 MiB entry was accepted" ||
	fail "the 60 MiB entry was not accepted: $(tail -3 "$T/idle.out" | tr '\n' '|')"
t_ack=$(date +%s%N)
# While no byte arrives: the disk usage and the session's temp file.
max_kb=0 tmpfile=""
while kill -0 "$RP" 2>/dev/null; do
	now=$(used_kb "$T/small")
	[ "$now" -gt "$max_kb" ] && max_kb=$now
	for p in $(sessions); do
		for fd in /proc/"$p"/fd/*; do
			f=$(readlink "$fd" 2>/dev/null)
			case $f in "$T/small/#"*" (deleted)" | "$T/small/."*rdmacp*) tmpfile=$f ;; esac
		done
	done
	grep -q "closed" "$T/idle.out" && break
	sleep 0.1
done
t_closed=$(date +%s%N)
wait "$RP"
BG_PIDS=()
grown=$((max_kb - base_kb))
echo "    tmpfs use while no data arrived: $((grown / 1024)) MiB more than before (64 MiB tmpfs)"
[ "$grown" -lt 4096 ] && pass "no disk reserved for the declared size (+$grown kB)" ||
	fail "declared size reserved $grown kB of the tmpfs with no data sent"
[ -n "$tmpfile" ] && pass "the session held its temp file meanwhile ($tmpfile)" ||
	echo "note: no temp file seen in the session's fds"
grep -q "PING.*answered" "$T/idle.out" && pass "the daemon's PINGs were answered" ||
	fail "no PING from the daemon was answered: $(tail -3 "$T/idle.out" | tr '\n' '|')"
secs=$(((t_closed - t_ack) / 1000000))
if grep -q "closed" "$T/idle.out" && grep -q "ERROR TIMEOUT" "$T/idle.out"; then
	[ "$secs" -le 5000 ] && pass "session ended by the idle timeout (ERROR TIMEOUT) ${secs} ms after FILES_ACK" ||
		fail "session ended only ${secs} ms after FILES_ACK (idle timeout 2 s)"
else
	fail "session not ended by the idle timeout while PINGs were answered: $(grep -E "IDLE|closed|ERROR" "$T/idle.out" | head -3 | tr '\n' '|')"
fi
wait_no_sessions && pass "the session process is gone" || fail "session still running: $(sessions)"
after_kb=$(used_kb "$T/small")
[ "$((after_kb - base_kb))" -lt 64 ] && [ -z "$(ls -A "$T/small")" ] &&
	pass "nothing left in the module (use +$((after_kb - base_kb)) kB, no entries)" ||
	fail "left behind: +$((after_kb - base_kb)) kB, entries: $(ls -A "$T/small" | head -3 | tr '\n' ' ')"
grep -q "no data progress" "$T/d.log" && pass "the daemon logs 'no data progress'" ||
	fail "no 'no data progress' in the daemon log"

# ---- 1b. a pull whose client keeps every credit ----------------------------------------
echo "--- 1b. a pull: the client holds every slot and only answers PINGs"
head -c $((4 * M)) /dev/urandom >"$T/small/pulled"
t0=$(date +%s%N)
rawpeer_rc 0 "pull, credits never returned" hello open pull small/pulled chunk=65536 slots=4 \
	lanes get small/pulled recv-all nocredit
secs=$((($(date +%s%N) - t0) / 1000000))
if grep -q "ERROR TIMEOUT" "$T/rp.out" && [ "$secs" -le 6000 ]; then
	pass "the daemon's sender ended at the idle timeout (ERROR TIMEOUT, $secs ms in all)"
else
	fail "the stalled pull was not ended by the idle timeout ($secs ms): $(grep -E "RECV_ALL|TIMEOUT|closed" "$T/rp.out" | head -3 | tr '\n' '|')"
fi
grep -q "PING.*answered" "$T/rp.out" && pass "pull: the daemon's PINGs were answered" ||
	fail "pull: no PING from the daemon was answered"
wait_no_sessions && pass "pull: the session process is gone" || fail "pull: session still running: $(sessions)"
rm -f "$T/small/pulled"

# ---- 2. between transfers: PINGs only -------------------------------------------------
echo "--- 2. PINGs only between transfers"
steps=(hello)
for _ in $(seq 1 12); do steps+=(ping sleep 0.5); done
rawpeer_rc 0 "12 PINGs 0.5 s apart" "${steps[@]}"
pongs=$(grep -c "^PONG" "$T/rp.out")
if grep -q "ERROR TIMEOUT" "$T/rp.out" && [ "$pongs" -le 7 ]; then
	pass "ended at the idle timeout despite the PINGs (ERROR TIMEOUT after $pongs PONGs)"
else
	fail "PINGs kept the connection open ($pongs PONGs, $(grep -c "ERROR TIMEOUT" "$T/rp.out") timeouts)"
	sed "s/^/    /" "$T/rp.out" | head -40
fi

# ---- 3. the declared size is enforced -----------------------------------------------------
echo "--- 3. more bytes than declared"
head -c 8192 /dev/urandom >"$T/src/eight"
rawpeer_rc 0 "a chunk longer than the declared size" \
	hello open push small/ dir chunk=65536 slots=4 lanes ring \
	files 1:short:100 ack expect "1=OK" \
	chunk 0 1 0 8192 "$T/src/eight" wait closed expect-seen closed
grep -q "bad chunk for short: offset 0 len 8192 (size 100)" "$T/d.log" &&
	pass "the daemon ended it: bad chunk (len 8192, size 100)" || fail "no 'bad chunk' in the daemon log"
rawpeer_rc 0 "FILE_DONE with more bytes than declared" \
	hello open push small/ dir chunk=65536 slots=4 lanes ring \
	files 1:short:100 ack expect "1=OK" \
	chunk 0 1 0 100 "$T/src/eight" "done" 1 8192 "$T/src/eight" wait closed expect-seen closed
grep -q "FILE_DONE: impossible byte count" "$T/d.log" &&
	pass "the daemon ended it: impossible byte count" || fail "no 'impossible byte count' in the daemon log"
wait_no_sessions
[ -z "$(ls -A "$T/small")" ] && pass "nothing committed" || fail "committed: $(ls -A "$T/small")"

# ---- 4. max file size, max session bytes ------------------------------------------------
echo "--- 4. max file size = 1M, max session bytes = 3M"
# A second daemon: the first one's config is one that today's code loads too.
stop_daemon "$D"
PORT=$(free_port)
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 10"
cat >>"$T/d.conf" <<EOF

[capped]
path = $T/capped
allow = client
uid = root
gid = root
max file size = 1M
max session bytes = 3M
EOF
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
D=$DAEMON_PID
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")
rawpeer_for "$PORT"
mkdir -p "$T/src"
head -c $((2 * M)) /dev/urandom >"$T/src/two"
for f in a b c; do head -c "$M" /dev/urandom >"$T/src/$f"; done
head -c $((512 * 1024)) /dev/urandom >"$T/src/d"
expect_rc 5 "a 2 MiB file over max file size" "${CLIENT[@]}" "$T/src/two" "$HOST:capped/"
grep -q "max file size" "$T/err" && pass "the client says 'max file size': $(grep -m1 "max file size" "$T/err")" ||
	fail "no 'max file size' in: $(head -3 "$T/err" | tr '\n' '|')"
[ ! -e "$T/capped/two" ] && pass "nothing written for the refused file" || fail "capped/two exists"
expect_rc 0 "a 1 MiB file (at max file size)" "${CLIENT[@]}" "$T/src/a" "$HOST:capped/one/"
cmp -s "$T/src/a" "$T/capped/one/a" && pass "the 1 MiB file is intact" || fail "capped/one/a differs"
expect_rc 9 "3 x 1 MiB + 512 KiB over max session bytes" \
	"${CLIENT[@]}" "$T/src/a" "$T/src/b" "$T/src/c" "$T/src/d" "$HOST:capped/s/"
grep -q "d.*max session bytes" "$T/err" && pass "the client says 'max session bytes' for d: $(grep -m1 "max session bytes" "$T/err")" ||
	fail "no 'max session bytes' for d in: $(head -3 "$T/err" | tr '\n' '|')"
ok=0
for f in a b c; do cmp -s "$T/src/$f" "$T/capped/s/$f" && ok=$((ok + 1)); done
[ "$ok" -eq 3 ] && [ ! -e "$T/capped/s/d" ] && pass "a, b, c committed, d not" ||
	fail "after the session cap: $ok of a, b, c intact; d $([ -e "$T/capped/s/d" ] && echo exists || echo absent)"
rawpeer_rc 0 "FILES over both caps: PERMISSION in FILES_ACK" \
	hello open push capped/r/ dir lanes ring \
	files 1:big:$((M + 1)) 2:x:$M 3:y:$M 4:z:$M 5:w:1 \
	ack expect "1=PERMISSION" expect "2=OK" expect "4=OK" expect "5=PERMISSION"

# ---- 5. config errors -----------------------------------------------------------------------
echo "--- 5. bad values"
for v in "max file size = 1X" "max session bytes = -1" "max session bytes = 99999999999T"; do
	write_conf "$T/bad.conf" "$PORT" "$T/certs"
	printf '\n[m]\npath = %s\nallow = client\n%s\n' "$T/capped" "$v" >>"$T/bad.conf"
	expect_rc 2 "config: '$v'" "$RDMACPD" --config "$T/bad.conf" --check
	grep -q "bad.conf:[0-9]*:" "$T/err" && pass "config: '$v' names FILE:LINE" ||
		fail "config: '$v': $(head -2 "$T/err" | tr '\n' '|')"
done

cleanup_mount
finish
