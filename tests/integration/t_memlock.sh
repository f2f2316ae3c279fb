#!/bin/bash
# An ordinary user's client (issue 15 item 1): as user nobody with
# RLIMIT_MEMLOCK 8 MiB (Debian's default) and no CAP_IPC_LOCK, a push and a
# pull of a 64 MiB file over tcp succeed byte-exact: the client fits its
# buffer pool to the limit (it used to ask for 66 MiB and fail, exit 6),
# says so with -v and in the --json start event. With 64 KiB, too small for
# any pool, the error names the limit and how to raise it.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root to run the client as user nobody"
command -v setpriv >/dev/null || skip "setpriv not installed (util-linux)"
command -v prlimit >/dev/null || skip "prlimit not installed (util-linux)"
command -v jq >/dev/null || skip "jq not installed"
NOGROUP=$(id -gn nobody 2>/dev/null) || skip "no user nobody"

setup_standard
# nobody reaches its files: its own directory, certificates readable.
chmod 0711 "$T"
mkdir -p "$T/u/src" "$T/u/got"
cp -r "$T/certs" "$T/u/certs"
chown -R nobody:"$NOGROUP" "$T/u"
head -c $((64 << 20)) /dev/urandom >"$T/u/src/big.bin"
chown nobody:"$NOGROUP" "$T/u/src/big.bin"
UCLIENT=("$RDMACP" --config /dev/null --cert "$T/u/certs/client.crt" --key "$T/u/certs/client.key"
	--ca "$T/u/certs/ca.crt" -P "$PORT" --transport tcp)

# as_nobody KIB CMD...: the command as nobody, RLIMIT_MEMLOCK KIB (soft and hard).
as_nobody() {
	local kib=$1
	shift
	prlimit --memlock=$((kib * 1024)):$((kib * 1024)) \
		setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups --inh-caps=-all -- "$@"
}

# The limit really applies to it, and it holds no CAP_IPC_LOCK.
lim=$(as_nobody 8192 bash -c 'ulimit -l')
[ "$lim" = 8192 ] || die "could not set RLIMIT_MEMLOCK 8 MiB for nobody (got $lim)"
cap=$(as_nobody 8192 awk '/^CapEff/ {print $2}' /proc/self/status)
[ "$cap" = 0000000000000000 ] || die "nobody has capabilities: $cap"

# ---- push, -v ------------------------------------------------------------------------
as_nobody 8192 "${UCLIENT[@]}" -v "$T/u/src/big.bin" 127.0.0.1:data/pushed.bin \
	>"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$T/u/src/big.bin" "$T/mod/pushed.bin"; then
	pass "push of 64 MiB as nobody with memlock 8 MiB: byte-exact"
else
	fail "push as nobody with memlock 8 MiB: exit $rc"
	sed 's/^/    /' "$T/err" | head
fi
if grep -Eq "locked memory limit \(RLIMIT_MEMLOCK\) 8\.0 MiB: buffer pool fitted to [0-9.]+ (KiB|MiB), [0-9]+ chunks of [0-9.]+ (KiB|MiB)" "$T/err"; then
	pass "-v says what was fitted: $(grep 'RLIMIT_MEMLOCK' "$T/err")"
else
	fail "-v does not say what was fitted:"
	sed 's/^/    /' "$T/err" | head
fi
n=$(grep -c "buffer pool fitted" "$T/err")
[ "$n" -eq 1 ] && pass "said once" || fail "said $n times"

# ---- pull, --json ----------------------------------------------------------------------
as_nobody 8192 "${UCLIENT[@]}" --json 127.0.0.1:data/pushed.bin "$T/u/got/pulled.bin" \
	>"$T/json" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$T/u/src/big.bin" "$T/u/got/pulled.bin"; then
	pass "pull of 64 MiB as nobody with memlock 8 MiB: byte-exact"
else
	fail "pull as nobody with memlock 8 MiB: exit $rc"
	sed 's/^/    /' "$T/err" | head
fi
if jq -s -e 'map(select(.event == "start"))[0] | .memlock_limit == 8388608 and .pool_fitted == true and
	   .pool_bytes <= 8388608 and .pool_bytes > 0 and .chunk_size >= 65536 and
	   .pool_chunks >= 2' "$T/json" >/dev/null; then
	pass "--json start has the fitted pool: $(jq -c 'select(.event == "start")' "$T/json")"
else
	fail "--json start lacks the fitted pool: $(head -1 "$T/json")"
fi

# ---- two at once: io_uring counts the user's locked memory across its processes ----------
# The first (held to 1 MiB/s for 4 s) pins its 6 MiB and its rings; the second finds
# under 2 MiB left, is refused at registration, measures what is left and retries once.
head -c $((4 << 20)) /dev/urandom >"$T/u/src/slow.bin"
chown nobody:"$NOGROUP" "$T/u/src/slow.bin"
as_nobody 8192 "${UCLIENT[@]}" -v --bwlimit 1M "$T/u/src/slow.bin" 127.0.0.1:data/slow.bin \
	>"$T/out1" 2>"$T/err1" &
first=$!
# Until the first holds its pool: 6 MiB pinned, twice 0.2 s apart (its probe before
# the engine's registration is brief; the engine's lasts the 4 s).
pinned_kb() { awk '/^VmPin/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
held=0
for _ in $(seq 1 100); do
	pid=$(pgrep -u nobody -x rdmacp | head -1)
	if [ -n "$pid" ] && [ "$(pinned_kb "$pid")" -ge 6144 ]; then
		sleep 0.2
		[ "$(pinned_kb "$pid")" -ge 6144 ] && held=1 && break
	fi
	sleep 0.05
done
[ "$held" = 1 ] || fail "the first push never held its 6 MiB pool"
as_nobody 8192 "${UCLIENT[@]}" -v "$T/u/src/big.bin" 127.0.0.1:data/second.bin >"$T/out" 2>"$T/err"
rc=$?
wait "$first"
rc1=$?
if [ "$rc" -eq 0 ] && [ "$rc1" -eq 0 ] && cmp -s "$T/u/src/big.bin" "$T/mod/second.bin" &&
	cmp -s "$T/u/src/slow.bin" "$T/mod/slow.bin"; then
	pass "two pushes at once as nobody: both byte-exact ($(grep -o 'fitted to [^,]*' "$T/err1") and $(grep -o 'fitted to [^,]*' "$T/err"))"
else
	fail "two pushes at once as nobody: exit $rc1 and $rc"
	sed 's/^/    /' "$T/err1" "$T/err" | head
fi
second=$(grep -o 'fitted to [0-9.]* [KM]iB' "$T/err" | awk '{print $3 * ($4 == "MiB" ? 1024 : 1)}')
if [ -n "$second" ] && [ "${second%.*}" -lt 2048 ]; then
	pass "the second took what was left after a refusal: $(grep -o 'fitted to .*' "$T/err")"
else
	fail "the second did not shrink to what was left: $(grep fitted "$T/err")"
fi

# ---- root, no limit: nothing fitted ------------------------------------------------------
"${CLIENT[@]}" --transport tcp --json "$T/u/src/big.bin" 127.0.0.1:data/root.bin >"$T/json" 2>"$T/err"
if jq -s -e 'map(select(.event == "start"))[0] | .pool_fitted == false and .memlock_limit == null' \
	"$T/json" >/dev/null; then
	pass "with CAP_IPC_LOCK the pool is not fitted"
else
	fail "root's start event: $(head -1 "$T/json")"
fi

# ---- 64 KiB: too small for any pool: the limit and the fix --------------------------------
as_nobody 64 "${UCLIENT[@]}" "$T/u/src/big.bin" 127.0.0.1:data/tiny.bin >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 6 ] && grep -q "RLIMIT_MEMLOCK is 64 KiB" "$T/err" &&
	grep -q "ulimit -l unlimited" "$T/err" && grep -q "limits.conf" "$T/err"; then
	pass "memlock 64 KiB: exit 6 with the limit and the fix"
else
	fail "memlock 64 KiB: exit $rc"
	sed 's/^/    /' "$T/err" | head
fi
[ -e "$T/mod/tiny.bin" ] && fail "memlock 64 KiB: a file arrived anyway"

# ---- doctor: 8 MiB is enough for tcp --------------------------------------------------------
as_nobody 8192 "$RDMACP" --config /dev/null doctor --json >"$T/json" 2>"$T/err"
if jq -e '.memlock.tcp_pool > 0 and .memlock.tcp_pool <= 8388608 and .memlock.limit == 8388608' \
	"$T/json" >/dev/null; then
	pass "doctor as nobody, memlock 8 MiB: a tcp pool of $(jq .memlock.tcp_pool "$T/json") bytes fits"
else
	fail "doctor as nobody: $(jq -c .memlock "$T/json" 2>&1)"
fi
if [ "$(jq '.devices | length' "$T/json")" = 0 ]; then
	as_nobody 8192 "$RDMACP" --config /dev/null doctor >"$T/out" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] && grep -q "enough for tcp" "$T/out" &&
		pass "doctor without RDMA devices, memlock 8 MiB: ready (exit 0), verbs would need more" ||
		fail "doctor without RDMA devices, memlock 8 MiB: exit $rc: $(grep memlock "$T/out")"
fi

finish
