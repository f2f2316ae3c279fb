#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The client config's [host PATTERN] sections and its skip key (rdmacp(1) FILES),
# against a real daemon on a port that is not the default one:
#   1. a [host 127.0.0.1] section's port (and cert, key, ca) take a copy, ls and
#      ping to the daemon with no -P/--port given; a glob pattern matches too
#   2. a host that matches no section gets [client]'s port (nothing listens there)
#   3. the command line beats the host section, and the host section beats [client]
#   4. per key, the first matching section wins
#   5. skip = exists in [client] and skip in a host section keep an existing file
#   6. a bad value or an unknown key in a host section, matching or not, is refused
#      with exit 2 and FILE:LINE naming the key; so is [host] without a name
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

setup_standard
DEAD=$(free_port)
[ "$DEAD" != "$PORT" ] || DEAD=$((PORT + 1))
CERTS=("cert = $T/certs/client.crt" "key = $T/certs/client.key" "ca = $T/certs/ca.crt")
head -c 100000 /dev/urandom >"$T/f"

# conf FILE LINES...: a client config
conf() {
	local f=$1 l
	shift
	for l in "$@"; do echo "$l"; done >"$f"
}

# ---- 1. the host section's port and certificates ----
conf "$T/c1" "[client]" "port = $DEAD" "[host 127.0.0.1]" "port = $PORT" "${CERTS[@]}"
expect_rc 0 "1: push, port from [host 127.0.0.1]" "$RDMACP" --config "$T/c1" "$T/f" 127.0.0.1:data/
cmp -s "$T/f" "$T/mod/f" && pass "1: file arrived" || fail "1: file missing"
expect_rc 0 "1: ls HOST, port from the host section" "$RDMACP" --config "$T/c1" ls 127.0.0.1
grep -q "data" "$T/out" && pass "1: ls lists the module" || fail "1: ls: $(cat "$T/out")"
expect_rc 0 "1: ping HOST" "$RDMACP" --config "$T/c1" ping 127.0.0.1
conf "$T/c1g" "[client]" "port = $DEAD" "[host 127.0.0.* ::1]" "port = $PORT" "${CERTS[@]}"
expect_rc 0 "1: a glob pattern matches" "$RDMACP" --config "$T/c1g" "$T/f" 127.0.0.1:data/g

# ---- 2. a host no section matches ----
expect_rc 11 "2: localhost matches no section" "$RDMACP" --config "$T/c1" --cert \
	"$T/certs/client.crt" --key "$T/certs/client.key" --ca "$T/certs/ca.crt" \
	"$T/f" localhost:data/x
grep -q "port $DEAD" "$T/err" && pass "2: [client]'s port used" || fail "2: $(cat "$T/err")"
[ -e "$T/mod/x" ] && fail "2: the copy reached the daemon"

# ---- 3. the command line beats the host section, which beats [client] ----
expect_rc 11 "3: -P beats the host section" "$RDMACP" --config "$T/c1" -P "$DEAD" \
	"$T/f" 127.0.0.1:data/y
grep -q "port $DEAD" "$T/err" && pass "3: -P's port used" || fail "3: $(cat "$T/err")"
conf "$T/c3" "[host 127.0.0.1]" "port = $DEAD" "${CERTS[@]}" "[client]" "port = $PORT"
expect_rc 11 "3: the host section beats [client], wherever it is" "$RDMACP" --config "$T/c3" \
	"$T/f" 127.0.0.1:data/y
expect_rc 0 "3: --port beats the host section" "$RDMACP" --config "$T/c3" --port "$PORT" \
	"$T/f" 127.0.0.1:data/y

# ---- 4. the first matching section wins per key ----
conf "$T/c4" "[host 127.*]" "port = $PORT" "[host *]" "port = $DEAD" "${CERTS[@]}"
expect_rc 0 "4: first match's port, a later match's certificates" "$RDMACP" --config "$T/c4" \
	"$T/f" 127.0.0.1:data/z

# ---- 5. skip ----
echo old >"$T/mod/keep"
conf "$T/c5" "[client]" "skip = exists" "${CERTS[@]}" "port = $PORT"
expect_rc 0 "5: skip = exists in [client]" "$RDMACP" --config "$T/c5" "$T/f" 127.0.0.1:data/keep
[ "$(cat "$T/mod/keep")" = old ] && pass "5: existing file kept" || fail "5: overwritten"
conf "$T/c5h" "[client]" "${CERTS[@]}" "port = $PORT" "[host 127.0.0.1]" "skip = exists"
expect_rc 0 "5: skip in a host section" "$RDMACP" --config "$T/c5h" "$T/f" 127.0.0.1:data/keep
[ "$(cat "$T/mod/keep")" = old ] && pass "5: existing file kept" || fail "5: overwritten"
expect_rc 0 "5: --skip none beats it" "$RDMACP" --config "$T/c5h" --skip none "$T/f" \
	127.0.0.1:data/keep
cmp -s "$T/f" "$T/mod/keep" && pass "5: overwritten as asked" || fail "5: not overwritten"

# ---- 6. bad host sections ----
bad_conf() {
	local desc=$1 want=$2
	shift 2
	conf "$T/c6" "$@"
	expect_rc 2 "6: $desc" "$RDMACP" --config "$T/c6" "$T/f" 127.0.0.1:data/bad
	grep -qF -- "$T/c6:$want" "$T/err" && pass "6: $desc: names file, line, key" ||
		fail "6: $desc: $(cat "$T/err")"
	[ -e "$T/mod/bad" ] && fail "6: $desc: copied anyway"
}
bad_conf "bad port in a matching section" "3: bad port 'x' in [host 127.0.0.1]" \
	"[client]" "[host 127.0.0.1]" "port = x"
bad_conf "bad lanes in a section that does not match" "4: bad lanes '0' in [host other]" \
	"[client]" "port = $PORT" "[host other]" "lanes = 0"
bad_conf "unknown key" "2: unknown key 'recursive' in [host 127.0.0.1]" \
	"[host 127.0.0.1]" "recursive = yes"
bad_conf "bad skip" "2: bad skip 'sometimes'" "[client]" "skip = sometimes"
bad_conf "[host] without a name" "2: [host] needs a host name" "[host]" "port = 1"
finish
