#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The ring's slots (issue 35 item 4), against a real rdmacpd over tcp:
#   1. --slots 0, 1, 4097, -2, abc, an empty value, and "slots = 1" in the
#      client's config: refused before any connection, each with its own
#      line and the usage exit (1; the config file's: 2); --slots auto is taken
#   2. --slots 64 and --slots 2, push and pull, small chunks (many turns of
#      the ring): byte-exact; -v says the ring granted (64 slots of 256 KiB),
#      and the --json start event its "slots"; "pool size" caps 4 MiB slots
#   3. the daemon's "max slots = 8": a push and a pull asking 64 get 8,
#      byte-exact; -v says the daemon's cap won and the daemon logs why; a
#      bench asking 64 runs on 8
#   4. rdmacpd --check refuses "max slots = 1" and a "max slots" that "pool
#      size" can never hold (exit 2, the line and the key named)
#   5. without --slots on tcp: 32 slots (the default kept)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"
trap cleanup EXIT

HOST=127.0.0.1
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/src" "$T/got"
head -c $((5 << 20)) /dev/urandom >"$T/src/a.bin"
head -c 777777 /dev/urandom >"$T/src/b.bin"

# slots_daemon CONF-LINES...: (re)start the daemon with these [global] lines.
slots_daemon() {
	[ -n "${DAEMON_PID:-}" ] && stop_daemon "$DAEMON_PID"
	write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20" "$@"
	printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d.conf"
	start_daemon "$T/d.conf" "$T/d.log" "$PORT"
}
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" --transport tcp)

# 1. bad values: the usage exit, before anything connects (no daemon is running yet)
for v in 0 1 4097 -2 abc "" 64x 1e3; do
	expect_rc 1 "--slots '$v' refused" "${CLIENT[@]}" --slots "$v" "$T/src/a.bin" \
		"$HOST:data/x"
	grep -q "bad --slots '$v': auto or 2..4096" "$T/err" && pass "--slots '$v': says why" ||
		fail "--slots '$v': message: $(cat "$T/err")"
done
printf '[client]\nslots = 1\n' >"$T/c.conf"
expect_rc 2 "slots = 1 in the config file refused" "$RDMACP" --config "$T/c.conf" \
	"$T/src/a.bin" "$HOST:data/x"
grep -q "c.conf:2:.*slots" "$T/err" && pass "config: file, line and key named" ||
	fail "config message: $(cat "$T/err")"

# 2. --slots 64 and 2, push and pull, 256 KiB chunks: byte-exact
slots_daemon "pool size = 64M"
for n in 64 2; do
	expect_rc 0 "push --slots $n" "${CLIENT[@]}" -v --slots "$n" --chunk-size 256K \
		"$T/src/a.bin" "$T/src/b.bin" "$HOST:data/"
	cmp -s "$T/src/a.bin" "$T/mod/a.bin" && cmp -s "$T/src/b.bin" "$T/mod/b.bin" &&
		pass "push --slots $n: byte-exact" || fail "push --slots $n: files differ"
	grep -q "ring: $n slots of 256 KiB$" "$T/err" && pass "push --slots $n: -v says the ring" ||
		fail "push --slots $n: -v: $(grep ring "$T/err")"
	rm -f "$T/got/a.bin"
	expect_rc 0 "pull --slots $n" "${CLIENT[@]}" -v --slots "$n" --chunk-size 256K \
		"$HOST:data/a.bin" "$T/got/a.bin"
	cmp -s "$T/src/a.bin" "$T/got/a.bin" && pass "pull --slots $n: byte-exact" ||
		fail "pull --slots $n: file differs"
	grep -q "ring: $n slots of 256 KiB$" "$T/err" && pass "pull --slots $n: -v says the ring" ||
		fail "pull --slots $n: -v: $(grep ring "$T/err")"
	rm -f "$T/mod/a.bin" "$T/mod/b.bin"
done
# "pool size" caps too: 64 MiB of 4 MiB chunks, less the descriptors
expect_rc 0 "push asking 64 of 4 MiB" "${CLIENT[@]}" -v --slots 64 --chunk-size 4M \
	"$T/src/a.bin" "$HOST:data/big.bin"
cmp -s "$T/src/a.bin" "$T/mod/big.bin" && pass "4 MiB slots: byte-exact" ||
	fail "4 MiB slots: file differs"
grep -Eq "ring: 1[0-6] slots of 4 MiB \(asked for 64" "$T/err" &&
	pass "pool size caps 4 MiB slots" || fail "pool size: $(grep ring "$T/err")"
grep -q "not the 64 asked for ('pool size')" "$T/d.log" &&
	pass "daemon log: 'pool size' named" || fail "daemon log: $(grep ring "$T/d.log")"
expect_rc 0 "push --slots 48 --json" "${CLIENT[@]}" --json --slots 48 --chunk-size 256K \
	"$T/src/b.bin" "$HOST:data/json.bin"
grep -q '"event":"start".*"lanes":2,"slots":48,' "$T/out" &&
	pass "--json start event: the ring granted" || fail "--json start: $(head -1 "$T/out")"
expect_rc 0 "--slots auto taken" "${CLIENT[@]}" -v --slots 64 --slots auto "$T/src/b.bin" \
	"$HOST:data/auto.bin"
# 5. tcp without --slots: the ring of every release so far
grep -q "ring: 32 slots of 1 MiB$" "$T/err" && pass "tcp default: 32 slots" ||
	fail "tcp default: $(grep ring "$T/err")"

# 3. the daemon's cap wins, and is said on both sides
slots_daemon "pool size = 64M" "max slots = 8" "allow bench = client"
expect_rc 0 "push asking 64 of a daemon allowing 8" "${CLIENT[@]}" -v --slots 64 \
	--chunk-size 256K "$T/src/a.bin" "$HOST:data/capped.bin"
cmp -s "$T/src/a.bin" "$T/mod/capped.bin" && pass "capped push: byte-exact" ||
	fail "capped push: file differs"
grep -q "ring: 8 slots of 256 KiB (asked for 64: the daemon's 'max slots' or 'pool size' allows 8)" \
	"$T/err" && pass "capped push: -v says the daemon's cap won" ||
	fail "capped push: -v: $(grep ring "$T/err")"
grep -q "ring: 8 slots of 256 KiB, not the 64 asked for ('max slots')" "$T/d.log" &&
	pass "daemon log: 'max slots' named" || fail "daemon log: $(grep ring "$T/d.log")"
expect_rc 0 "pull asking 64 of a daemon allowing 8" "${CLIENT[@]}" -v --slots 64 \
	--chunk-size 256K "$HOST:data/capped.bin" "$T/got/capped.bin"
cmp -s "$T/src/a.bin" "$T/got/capped.bin" && pass "capped pull: byte-exact" ||
	fail "capped pull: file differs"
grep -q "ring: 8 slots of 256 KiB (asked for 64" "$T/err" &&
	pass "capped pull: -v says the daemon's cap won" || fail "capped pull: -v: $(grep ring "$T/err")"

# bench's ring too
expect_rc 0 "bench --slots 64 of a daemon allowing 8" "${CLIENT[@]}" bench --size 16M \
	--slots 64 --chunk-size 256K --json "$HOST"
grep -q '"slots":8,' "$T/out" && pass "bench: the daemon's 8 slots" ||
	fail "bench: $(cat "$T/out")"

# 4. rdmacpd --check
write_conf "$T/bad.conf" "$PORT" "$T/certs" "max slots = 1"
"$RDMACPD" --check --config "$T/bad.conf" >/dev/null 2>"$T/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "bad.conf:6: bad 'max slots' value '1' (must be 2..4096)" "$T/err" &&
	pass "--check: max slots = 1 refused (exit 2)" || fail "--check max slots = 1: exit $rc, $(cat "$T/err")"
write_conf "$T/bad.conf" "$PORT" "$T/certs" "pool size = 16M" "max slots = 512"
"$RDMACPD" --check --config "$T/bad.conf" >/dev/null 2>"$T/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "bad.conf:7: 'max slots' (512) is more than 'pool size' (16 MiB)" "$T/err" &&
	pass "--check: max slots beyond pool size refused (exit 2)" ||
	fail "--check max slots vs pool: exit $rc, $(cat "$T/err")"

finish
