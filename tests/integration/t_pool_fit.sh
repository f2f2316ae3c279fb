#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A push pays, in pages io_uring faults in, zeroes and pins, for the chunks it
# reads into, not for its pool (64 chunks of 1 MiB by default): the sender
# registers each chunk the first time it reads into it (engine_pin_chunk),
# where RLIMIT_MEMLOCK does not bound it (CAP_IPC_LOCK or no limit; under a
# limit the fitted pool is pinned whole: t_memlock).
# The client's debug line at the end of a session says how much of the pool
# io_uring registered:
#   1. a push of one 2.5 MiB file and 200 small ones: identical, and at most
#      8 chunks of the 64 registered (registering the pool whole: all of it)
#   2. the same push again with --skip quick, nothing changed: none registered
#   3. a pull (the client receives): its slots still register whole, and the
#      copy is identical
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))

caps=$((16#$(awk '/^CapEff:/ { print $2 }' /proc/self/status)))
[ $(((caps >> 14) & 1)) = 1 ] || [ "$(ulimit -l)" = unlimited ] ||
	skip "RLIMIT_MEMLOCK bounds this user (no CAP_IPC_LOCK): the pool is pinned whole"
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/src/tree/small" "$T/pull"
write_conf "$T/d.conf" "$PORT" "$T/certs" "idle timeout = 30"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" --no-encrypt)

head -c $((5 * MIB / 2)) /dev/urandom >"$T/src/tree/big" || die "random"
for i in $(seq 1 200); do
	head -c $((i * 53)) /dev/urandom >"$T/src/tree/small/f$i" || die "random"
done

# registered FILE: "BYTES POOL" from the last session's debug line in FILE.
registered() {
	sed -n "s/.*io_uring registered \([0-9]*\) of the pool's \([0-9]*\) bytes.*/\1 \2/p" "$1" |
		tail -n 1
}

# ---- 1. a push registers the chunks it reads into ----
expect_rc 0 "push of a 2.5 MiB file and 200 small ones" \
	"${CLIENT[@]}" -vv -a "$T/src/tree" "$HOST:data/"
cp "$T/err" "$T/push1.err"
diff -r "$T/src/tree" "$T/mod/tree" >/dev/null && pass "push: identical" || fail "push: differs"
read -r reg pool <<<"$(registered "$T/push1.err")"
if [ -z "$reg" ]; then
	fail "push: no 'io_uring registered' debug line"
	head -20 "$T/push1.err" | sed 's/^/    /'
elif [ "$pool" -lt $((64 * MIB)) ]; then
	fail "push: a pool of $pool bytes, wanted the default 64 MiB"
elif [ "$reg" -gt 0 ] && [ "$reg" -le $((8 * MIB)) ]; then
	pass "push: io_uring registered $reg of the pool's $pool bytes"
else
	fail "push: io_uring registered $reg of the pool's $pool bytes (wanted 1 to 8 MiB)"
fi

# ---- 2. nothing changed: nothing read, nothing registered ----
expect_rc 0 "push again, --skip quick, nothing changed" \
	"${CLIENT[@]}" -vv -a --skip quick "$T/src/tree" "$HOST:data/"
read -r reg pool <<<"$(registered "$T/err")"
[ "${reg:-x}" = 0 ] && pass "re-run: nothing registered" ||
	fail "re-run: io_uring registered '${reg:-no line}' bytes, wanted 0"

# ---- 3. a pull: the receiver's slots, registered whole as before ----
expect_rc 0 "pull of the tree" "${CLIENT[@]}" -vv -r "$HOST:data/tree" "$T/pull/"
diff -r "$T/src/tree" "$T/pull/tree" >/dev/null && pass "pull: identical" || fail "pull: differs"
read -r reg pool <<<"$(registered "$T/err")"
[ -n "$reg" ] && [ "$reg" = "$pool" ] && pass "pull: the slots registered whole ($reg bytes)" ||
	fail "pull: registered '${reg:-no line}' of '${pool:-?}' bytes, wanted all"

finish
