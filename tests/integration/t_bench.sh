#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp bench HOST (memory to memory) against a real daemon, tcp transport:
#   1. allowed ('allow bench = client'): 256 MiB over 3 lanes, exit 0; --json
#      (jq) says bytes = size, verified, 3 lanes whose bytes add up to it, a
#      positive rate; the text form prints the lanes and the total; the daemon
#      logs the bytes it checked
#   1b. a hostile client (rawpeer): BENCH without capability 0x10000 is a protocol
#      error; a chunk that is not the pattern (INTEGRITY), of another file id, past
#      the end, and END before the data (PROTOCOL) end the session
#   2. not allowed (a daemon without 'allow bench', and one that allows
#      another name): refused, exit 5, "not allowed", --json exit 5
#   3. beyond the memory budget: with one bench holding the daemon's whole
#      budget (its client stopped mid-run), a second one is told busy, exit 5
#   4. a corrupted chunk (the daemon flips a byte of the first one: test
#      hook) is caught: exit 7, the offset named, the daemon logs INTEGRITY
#   5. a misplaced chunk (the client sends chunk 0's bytes as chunk 1: test
#      hook) is caught the same way
#   6. a daemon from before bench (rawserver.py announcing no 0x10000):
#      refused before anything is sent, "too old", exit 12
#   7. sealed lanes (capability 0x200000): by default on tcp (--json encryption,
#      the daemon's log), clear with --no-encrypt; [global] encryption = off with
#      --encrypt and = required with --no-encrypt refused (exit 20); a daemon
#      without 0x200000: clear by default, --encrypt refused (exit 12)
#   8. the daemon's check on worker threads ("hash threads = 2"): a bench is
#      verified, and a corrupted chunk (the test hook, flipped on a worker)
#      is caught the same way: exit 7, offset 0 named
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v jq >/dev/null || skip "jq not installed"
BG_PIDS=()
cleanup_bench() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -CONT "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_bench EXIT

# bench_daemon CONF-LINES...: (re)start the daemon with these [global] lines.
bench_daemon() {
	[ -n "${DAEMON_PID:-}" ] && stop_daemon "$DAEMON_PID"
	write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20" "$@"
	printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d.conf"
	start_daemon "$T/d.conf" "$T/d.log" "$PORT"
}

# daemon_logged PATTERN: the daemon's log has a line matching it within 5 s (its session
# logs its end after the client has been answered, so a loaded host may see it late).
daemon_logged() {
	for _ in $(seq 1 50); do
		grep -q "$1" "$T/d.log" && return 0
		sleep 0.1
	done
	return 1
}

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" --transport tcp)
SIZE=$((256 * 1024 * 1024))

# 1. allowed
bench_daemon "allow bench = client"
expect_rc 0 "bench allowed, --json" "${CLIENT[@]}" bench --size 256M --lanes 3 --json "$HOST"
J=$T/out
jq -e --argjson n "$SIZE" '.event == "bench" and .exit == 0 and .verified == true and
	.bytes == $n and .size == $n and .lanes == 3 and .transport == "tcp" and
	(.per_lane | length) == 3 and ([.per_lane[].bytes] | add) == $n and
	.seconds > 0 and .gbit_per_second > 0 and .bytes_per_second > 0 and
	([.per_lane[].gbit_per_second] | min) > 0' "$J" >/dev/null &&
	pass "json: all bytes verified, 3 lanes adding up, rates > 0" ||
	fail "json: $(cat "$J")"
[ "$(wc -l <"$J")" -eq 1 ] && pass "json: one object" || fail "json: $(wc -l <"$J") lines"
daemon_logged "bench done: $SIZE bytes checked over 3 tcp lanes" &&
	pass "daemon: checked every byte" || fail "daemon log: $(grep bench "$T/d.log")"
expect_rc 0 "bench allowed, text" "${CLIENT[@]}" bench --size 64M --lanes 2 "$HOST"
grep -q "lane  1:" "$T/out" && grep -q "total  :.*Gbit/s" "$T/out" &&
	pass "text: per lane and total" || fail "text: $(cat "$T/out")"
expect_rc 0 "bench with a tail chunk, 64K chunks" "${CLIENT[@]}" bench --size 1000001 \
	--chunk-size 64K --json "$HOST"
jq -e '.bytes == 1000001' "$T/out" >/dev/null && pass "odd size sent whole" ||
	fail "odd size: $(cat "$T/out")"

# 1b. a hostile client (rawpeer): BENCH without the capability; chunks not of the pattern,
# for another stream, past the end
rawpeer_for "$PORT"
rawpeer_rc 0 "BENCH from a client without the capability" \
	hello caps=1 bench 1048576 chunk=65536 expect-seen "without bench" wait closed
rawpeer_rc 0 "a chunk that is not the pattern" \
	hello caps=0x10001 bench 1048576 chunk=65536 slots=4 expect OPEN_OK lanes ring \
	chunk 0 1 0 65536 fill=0 wait closed expect-seen "ERROR INTEGRITY" \
	expect-seen "chunk at offset 0"
rawpeer_rc 0 "a chunk of another file id" \
	hello caps=0x10001 bench 1048576 chunk=65536 slots=4 lanes ring \
	chunk 0 1 0 65536 fill=0 did=2 wait closed expect-seen "ERROR PROTOCOL" \
	expect-seen "bad chunk"
rawpeer_rc 0 "a chunk past the end of the stream" \
	hello caps=0x10001 bench 1048576 chunk=65536 slots=4 lanes ring \
	chunk 0 1 0 65536 fill=0 doff=1048576 wait closed expect-seen "ERROR PROTOCOL" \
	expect-seen "bad chunk"
rawpeer_rc 0 "END before the data" \
	hello caps=0x10001 bench 1048576 chunk=65536 slots=4 lanes ring \
	end 0 1048576 wait closed expect-seen "ERROR PROTOCOL" expect-seen "END after 0 of 16"

# 7. sealed lanes
jq -e --arg s "$(daemon_cipher "$T/d.log")" '.encryption == $s' "$J" >/dev/null &&
	pass "sealed by default (json)" ||
	fail "not sealed by default: $(cat "$J")"
suite=$(daemon_cipher_title "$T/d.log")
daemon_logged "bench done: $SIZE bytes checked over 3 tcp lanes in .* s, encrypted ($suite)" &&
	pass "daemon: sealed bench" || fail "daemon log: $(grep 'bench done' "$T/d.log")"
expect_rc 0 "bench --no-encrypt" "${CLIENT[@]}" --no-encrypt bench --size 32M --json "$HOST"
jq -e '.encryption == "none" and .verified == true' "$T/out" >/dev/null &&
	pass "--no-encrypt: clear lanes, verified" || fail "--no-encrypt: $(cat "$T/out")"
bench_daemon "allow bench = client" "encryption = off"
expect_rc 20 "bench --encrypt, daemon encryption = off" "${CLIENT[@]}" --encrypt bench \
	--size 32M "$HOST"
expect_rc 0 "bench by default, daemon encryption = off" "${CLIENT[@]}" bench --size 32M \
	--json "$HOST"
jq -e '.encryption == "none"' "$T/out" >/dev/null && pass "encryption = off: clear" ||
	fail "encryption = off: $(cat "$T/out")"
bench_daemon "allow bench = client" "encryption = required"
expect_rc 20 "bench --no-encrypt, daemon encryption = required" "${CLIENT[@]}" --no-encrypt \
	bench --size 32M "$HOST"
grep -q "requires encrypted data lanes" "$T/err" && pass "required: says why" ||
	fail "required: $(cat "$T/err")"
RDMACP_TEST_CAPS_OFF=0x200000 bench_daemon "allow bench = client"
expect_rc 0 "bench, daemon without sealed bench" "${CLIENT[@]}" bench --size 32M --json "$HOST"
jq -e '.encryption == "none" and .verified == true' "$T/out" >/dev/null &&
	pass "old daemon: clear lanes" || fail "old daemon: $(cat "$T/out")"
expect_rc 12 "bench --encrypt, daemon without sealed bench" "${CLIENT[@]}" --encrypt bench \
	--size 32M "$HOST"
bench_daemon "allow bench = client"

# 2. not allowed
bench_daemon
expect_rc 5 "bench without 'allow bench'" "${CLIENT[@]}" bench --size 1M "$HOST"
grep -q "bench is not allowed for this client" "$T/err" && pass "says not allowed" ||
	fail "message: $(cat "$T/err")"
bench_daemon "allow bench = someone-else, sha256:$(printf '%064d' 0)"
expect_rc 5 "bench allowed for others only, --json" "${CLIENT[@]}" bench --size 1M --json "$HOST"
jq -e '.exit == 5 and (.bytes | not) and (.error | test("not allowed"))' "$T/out" >/dev/null &&
	pass "json: exit 5, no bytes, the daemon's reason" ||
	fail "json: $(cat "$T/out")"

# 3. beyond the memory budget
bench_daemon "allow bench = client" "memory budget = 4M" "pool size = 4M"
"${CLIENT[@]}" bench --size 1T --chunk-size 64K "$HOST" >"$T/held.out" 2>&1 &
HELD=$!
BG_PIDS+=("$HELD")
# Until a session of the daemon has its ring pinned.
held_pinned() {
	local p
	for p in $(cat /proc/"$DAEMON_PID"/task/*/children 2>/dev/null); do
		[ "$(awk '/^VmPin:/ { print $2 }' /proc/"$p"/status 2>/dev/null)" -gt 0 ] 2>/dev/null &&
			return 0
	done
	return 1
}
for _ in $(seq 1 100); do
	held_pinned && break
	sleep 0.1
done
held_pinned || fail "the first bench did not start: $(cat "$T/held.out")"
kill -STOP "$HELD"
expect_rc 5 "second bench while the budget is taken" "${CLIENT[@]}" bench --size 1M \
	--chunk-size 64K "$HOST"
grep -q "busy: memory budget" "$T/err" && pass "says busy" || fail "message: $(cat "$T/err")"
kill -KILL "$HELD" 2>/dev/null
wait "$HELD" 2>/dev/null

# 4. a corrupted chunk
stop_daemon "$DAEMON_PID"
RDMACPD_TEST_FLIP_BYTE=1 start_daemon "$T/d.conf" "$T/d.log" "$PORT"
expect_rc 7 "a corrupted chunk is caught" "${CLIENT[@]}" bench --size 8M "$HOST"
grep -q "chunk at offset 0 .*is not what was sent for it" "$T/err" &&
	pass "the client is told which chunk" || fail "message: $(cat "$T/err")"
daemon_logged "bench failed: INTEGRITY" && pass "daemon: INTEGRITY" ||
	fail "daemon log: $(grep bench "$T/d.log")"
bench_daemon "allow bench = client"

# 5. a misplaced chunk
RDMACP_TEST_BENCH_MISPLACE=1 expect_rc 7 "a misplaced chunk is caught" "${CLIENT[@]}" bench \
	--size 8M --chunk-size 1M --json "$HOST"
jq -e '.exit == 7 and (.error | test("offset 1048576"))' "$T/out" >/dev/null &&
	pass "json: exit 7, chunk 1 named" || fail "json: $(cat "$T/out") $(cat "$T/err")"

# 6. a daemon from before bench
old_daemon_refuses 0x3fff bench "old daemon, bench" bench --size 1M "$HOST"
grep -q "BENCH\|got 26" "$T/rs.out" && fail "BENCH was sent to the old daemon" ||
	pass "no BENCH sent to the old daemon"

# 8. the check on worker threads
bench_daemon "allow bench = client" "hash threads = 2"
expect_rc 0 "bench checked on 2 workers" "${CLIENT[@]}" bench --size 64M --chunk-size 1M \
	--lanes 2 --json "$HOST"
jq -e ".bytes == $((64 << 20)) and .verified == true" "$T/out" >/dev/null &&
	pass "workers: all bytes verified" || fail "workers json: $(cat "$T/out")"
stop_daemon "$DAEMON_PID"
RDMACPD_TEST_FLIP_BYTE=1 start_daemon "$T/d.conf" "$T/d.log" "$PORT"
expect_rc 7 "workers: a corrupted chunk is caught" "${CLIENT[@]}" bench --size 8M "$HOST"
grep -q "chunk at offset 0 .*is not what was sent for it" "$T/err" &&
	pass "workers: the client is told which chunk" || fail "message: $(cat "$T/err")"

finish
