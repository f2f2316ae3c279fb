#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Daemon rails ('rails' in rdmacpd.conf, OPEN_OK's rails, capability 0x8000000) on a
# host without RDMA: what the VM (tests/rxe-vm/rails2.sh) cannot reach.
#   1. rdmacpd --check: an address that is not this host's, a port, a name: exit 2 with
#      the line and the reason; local addresses pass
#   2. a daemon with rails: tcp sessions ignore them (push and pull identical, OPEN_OK
#      as before: no rail listened on)
#   3. a daemon (rawserver.py) offering rails on a tcp OPEN_OK: the client refuses it,
#      protocol error (exit 4), and connects nothing
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1

setup_standard

# 1. --check
check_conf() { # expected rc, description, rails value, message
	write_conf "$T/c.conf" 7471 "$T/certs" "rails = $3"
	printf '[data]\npath = %s\nallow = client\n' "$T/mod" >>"$T/c.conf"
	expect_rc "$1" "--check, rails = $3 ($2)" "$RDMACPD" --config "$T/c.conf" --check
	if [ -n "$4" ]; then
		grep -q "c.conf:6: .*$4" "$T/err" && pass "--check says: $(head -1 "$T/err")" ||
			fail "--check, rails = $3: message: $(cat "$T/err")"
	fi
}
check_conf 2 "not local" 192.0.2.1 "'rails' address '192.0.2.1' is not an address of this host"
check_conf 2 "a port" 127.0.0.2:7000 "bad 'rails' address '127.0.0.2:7000'"
check_conf 2 "a name" localhost "expected an IPv4 or IPv6 address"
check_conf 0 "local" "127.0.0.2, 127.0.0.3" ""

# 2. tcp ignores rails
write_conf "$T/r.conf" "$PORT" "$T/certs" "rails = 127.0.0.2" "handshake timeout = 5"
printf '[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/r.conf"
stop_daemon "$DAEMON_PID"
start_daemon "$T/r.conf" "$T/d.log" "$PORT"
head -c $((3 << 20)) /dev/urandom >"$T/big" || die "write big"
expect_rc 0 "tcp push, daemon with rails" "${CLIENT[@]}" --transport tcp --lanes 2 -q \
	"$T/big" "$HOST:data/big"
cmp -s "$T/big" "$T/mod/big" && pass "tcp push identical" || fail "tcp push differs"
mkdir -p "$T/pull"
expect_rc 0 "tcp pull, daemon with rails" "${CLIENT[@]}" --transport tcp --lanes 2 -q \
	"$HOST:data/big" "$T/pull/"
cmp -s "$T/big" "$T/pull/big" && pass "tcp pull identical" || fail "tcp pull differs"
grep -q "rail" "$T/d.log" && fail "a tcp session used rails: $(grep rail "$T/d.log")" ||
	pass "no rail listened on for tcp sessions"

# 3. rails on a tcp OPEN_OK
start_rawserver --mode rails-tcp --caps $(((1 << 28) - 1))
expect_rc 4 "rails offered on tcp lanes" "$RDMACP" --config /dev/null \
	--cert "$T/certs/client.crt" --key "$T/certs/client.key" --ca "$T/certs/ca.crt" \
	-P "$(cat "$T/rs.port")" --transport tcp --chunk-size 64K "$T/big" "$HOST:data/x"
kill "$RS_PID" 2>/dev/null
wait "$RS_PID" 2>/dev/null
grep -q "OPEN_OK offers rails we did not ask for" "$T/err" &&
	pass "the client says: $(grep -m1 -o 'protocol error.*' "$T/err")" ||
	fail "rails on tcp: message: $(cat "$T/err")"

finish
