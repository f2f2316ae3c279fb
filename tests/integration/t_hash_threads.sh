#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Hashing threads (--hash-threads, "hash threads"): the end-to-end hash made
# off the event loop on both ends, a file's chunks on one thread in order.
# Each hashing job waits 20 ms (the SLOW_HASH test hooks), so jobs pile up
# behind the loop while zeros, unchanged ranges, posts, writes and credits go
# on:
#   1. push of a tree (big files in 256 KiB chunks, a sparse file, small
#      packed files) with --hash-threads 2 to a daemon with "hash threads =
#      2": identical
#   2. --delta push of a changed big file over its old version (the
#      sender's unchanged chunks wait for its thread): identical, only the
#      changed chunk sent
#   3. pull of the tree with --hash-threads 3 (the daemon sends on 2): identical
#   3b. a lane killed mid-push (rails) with chunks out to hashing threads
#   4. a flipped byte (RDMACPD_TEST_FLIP_BYTE) is still caught (exit 7) and
#      nothing is committed
#   5. a bad --hash-threads value and a bad "hash threads" are refused
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=$((1 << 20))

command -v jq >/dev/null || skip "jq not installed"
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/src/tree/small" "$T/pull"
write_conf "$T/d.conf" "$PORT" "$T/certs" "idle timeout = 30" "hash threads = 2"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d.conf"
RDMACPD_TEST_SLOW_HASH=1 start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" --chunk-size 256K --no-encrypt)

for i in 1 2 3; do
	head -c $((3 * MIB + i * 4099)) /dev/urandom >"$T/src/tree/big$i" || die "random"
done
truncate -s $((4 * MIB)) "$T/src/tree/sparse"
dd if=/dev/urandom of="$T/src/tree/sparse" bs=64K count=2 seek=20 conv=notrunc status=none ||
	die "dd"
for i in $(seq 1 50); do
	head -c $((i * 37)) /dev/urandom >"$T/src/tree/small/f$i" || die "random"
done

# ---- 1. push ----
RDMACP_TEST_SLOW_HASH=1 expect_rc 0 "push of a tree, 2 hashing threads each end" \
	"${CLIENT[@]}" -vv --hash-threads 2 -r "$T/src/tree" "$HOST:data/"
grep -q "2 hashing threads" "$T/err" && pass "push: the client hashed on 2 threads" ||
	fail "push: no hashing threads in $(head -5 "$T/err")"
diff -r "$T/src/tree" "$T/mod/tree" >/dev/null && pass "push: the tree is identical" ||
	fail "push: trees differ"
[ "$(grep -c "2 hashing threads" "$T/d.log")" -ge 1 ] &&
	pass "push: the daemon hashed on 2 threads" ||
	fail "push: daemon log has no hashing threads"

# ---- 2. --delta over the old version ----
cp "$T/src/tree/big1" "$T/new"
dd if=/dev/urandom of="$T/new" bs=256K count=1 seek=5 conv=notrunc status=none || die "dd"
RDMACP_TEST_SLOW_HASH=1 expect_rc 0 "delta push over the old version" \
	"${CLIENT[@]}" --hash-threads 1 --json --delta "$T/new" "$HOST:data/tree/big1"
cmp -s "$T/new" "$T/mod/tree/big1" && pass "delta: identical" || fail "delta: differs"
[ "$(jq -r 'select(.event == "summary") | .data_bytes' "$T/out")" = $((256 * 1024)) ] &&
	pass "delta: one chunk sent" || fail "delta: $(grep summary "$T/out")"

# ---- 3. pull ----
RDMACP_TEST_SLOW_HASH=1 expect_rc 0 "pull of the tree, --hash-threads 3" \
	"${CLIENT[@]}" -vv --hash-threads 3 -r "$HOST:data/tree" "$T/pull/"
diff -r "$T/mod/tree" "$T/pull/tree" >/dev/null && pass "pull: the tree is identical" ||
	fail "pull: trees differ"
grep -q "3 hashing threads" "$T/err" && pass "pull: the client hashed on 3 threads" ||
	fail "pull: no hashing threads in $(head -5 "$T/err")"

# ---- 3b. a lane lost mid-push (rails) while its chunks are with the hashing threads ----
RDMACP_TEST_KILL_LANES=1 RDMACP_TEST_SLOW_HASH=1 expect_rc 0 "push with a lane killed, hashing threads" \
	"${CLIENT[@]}" --lanes 2 --hash-threads 2 "$T/src/tree/big3" "$HOST:data/rails/"
cmp -s "$T/src/tree/big3" "$T/mod/rails/big3" && pass "rails: identical" || fail "rails: differs"
grep -q "lost" "$T/err" && pass "rails: the lane was lost and its slots went again" ||
	fail "rails: no lane lost ($(head -3 "$T/err"))"

# ---- 4. a flipped byte is caught ----
stop_daemon "$DAEMON_PID"
RDMACPD_TEST_FLIP_BYTE=1 RDMACPD_TEST_SLOW_HASH=1 start_daemon "$T/d.conf" "$T/d2.log" "$PORT"
RDMACP_TEST_SLOW_HASH=1 expect_rc 7 "a flipped byte, 2 hashing threads each end" \
	"${CLIENT[@]}" --hash-threads 2 "$T/src/tree/big2" "$HOST:data/x/"
[ ! -e "$T/mod/x/big2" ] && pass "flip: nothing committed" || fail "flip: committed"

# ---- 5. bad values ----
expect_rc 1 "--hash-threads 17" "${CLIENT[@]}" --hash-threads 17 "$T/src/tree/big2" "$HOST:data/"
write_conf "$T/bad.conf" "$(free_port)" "$T/certs" "hash threads = many"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" >>"$T/bad.conf"
"$RDMACPD" --config "$T/bad.conf" --check >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q 'hash threads' "$T/err" && pass "'hash threads = many' refused (exit $rc)" ||
	fail "'hash threads = many': exit $rc, $(cat "$T/err")"
finish
