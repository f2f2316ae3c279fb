#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A module whose directory is missing (a file system not mounted yet) or not
# a directory is unavailable, and only that module (rsyncd's way):
#   1. --check warns about it, naming the module, the path and why, and
#      exits 0 (the unit's ExecStartPre must not keep the others down);
#   2. the daemon starts, says why in its log, and serves module b;
#   3. a push to or a pull from module a exits 23 (module unavailable),
#      saying "module 'a' is unavailable"; a client from before the status
#      hears IO (exit 14), as it did;
#   4. `rdmacp ls HOST` lists a as unavailable (and --json "available":false);
#   5. mkdir of a's path: a is served, with no restart or reload;
#   6. a reload with a new missing module (and one whose path is a file)
#      keeps the daemon up, serving the others, and says why;
#   7. a module's "max connections": with 1, a second client of that module
#      is refused busy (--wait-busy 0: at once), while another module is
#      served; one with --wait-busy gets through once the first is done.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
BG_PIDS=()
cleanup_bg() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
trap cleanup_bg EXIT

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/b" "$T/lim" "$T/src" "$T/got"
echo hello >"$T/src/f"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 30"
printf '\n[a]\npath = %s\nallow = client\ncomment = on the file server\n[b]\npath = %s\nallow = client\n[lim]\npath = %s\nallow = client\nmax connections = 1\n' \
	"$T/a" "$T/b" "$T/lim" | as_root_modules >>"$T/d.conf"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

# ---- 1. --check ----------------------------------------------------------------------
expect_rc 0 "--check with module a's path missing" "$RDMACPD" --check --config "$T/d.conf"
grep -q "module \[a\]: path $T/a: No such file or directory: the module is unavailable" "$T/err" &&
	pass "--check names the module, its path and why" || fail "--check said: $(cat "$T/err")"

# ---- 2. the daemon starts and serves b -------------------------------------------------
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
grep -q "module \[a\]: path $T/a: No such file or directory" "$T/d.log" &&
	pass "the daemon's log says why a is unavailable" || fail "log: $(cat "$T/d.log")"
expect_rc 0 "push to module b while a is missing" "${CLIENT[@]}" "$T/src/f" "$HOST:b/"
cmp -s "$T/src/f" "$T/b/f" && pass "b/f arrived" || fail "b/f missing"

# ---- 3. a client of a ------------------------------------------------------------------
expect_rc 23 "push to the unavailable module a" "${CLIENT[@]}" "$T/src/f" "$HOST:a/"
grep -q "module 'a' is unavailable" "$T/err" && pass "the client says module 'a' is unavailable" ||
	fail "client said: $(cat "$T/err")"
expect_rc 23 "pull from the unavailable module a" "${CLIENT[@]}" "$HOST:a/f" "$T/got/"
grep -q "module a: cannot open $T/a: No such file or directory" "$T/d.log" &&
	pass "the daemon logs why it refused" || fail "no refusal reason in the log"
# 0x400000000: PROTO_CAP_UNAVAILABLE, as a client from before it.
RDMACP_TEST_CAPS_OFF=0x400000000 expect_rc 14 "an older client hears IO (exit 14)" \
	"${CLIENT[@]}" "$T/src/f" "$HOST:a/"
kill -0 "$DAEMON_PID" 2>/dev/null && pass "the daemon is still up" || fail "the daemon died"

# ---- 4. the listing --------------------------------------------------------------------
expect_rc 0 "ls $HOST" "${CLIENT[@]}" ls "$HOST"
grep -qE "^a +read/write +\(unavailable\) on the file server$" "$T/out" &&
	grep -qE "^b +read/write$" "$T/out" && pass "ls shows a as unavailable, b as it is" ||
	fail "ls said: $(cat "$T/out")"
expect_rc 0 "ls --json $HOST" "${CLIENT[@]}" --json ls "$HOST"
[ "$(jq -r 'select(.event == "module") | "\(.name)=\(.available)"' "$T/out" | sort | tr '\n' ' ')" = \
	"a=false b=true lim=true " ] && pass "ls --json: available false for a only" ||
	fail "ls --json said: $(cat "$T/out")"

# ---- 5. the path appears ---------------------------------------------------------------
mkdir "$T/a"
expect_rc 0 "push to a once its path is there (no restart)" "${CLIENT[@]}" "$T/src/f" "$HOST:a/"
cmp -s "$T/src/f" "$T/a/f" && pass "a/f arrived" || fail "a/f missing"
grep -q "module \[a\]: $T/a is there now: serving it" "$T/d.log" &&
	pass "the daemon logs that a is back" || fail "no 'is there now' line"
expect_rc 0 "ls $HOST again" "${CLIENT[@]}" ls "$HOST"
grep -q "unavailable" "$T/out" && fail "ls still says unavailable: $(cat "$T/out")" ||
	pass "ls shows a available"
# A directory put in its place after that is not the one found: refused, unavailable.
mv "$T/a" "$T/a.away" && mkdir "$T/a"
expect_rc 23 "push to a replaced by another directory" "${CLIENT[@]}" "$T/src/f" "$HOST:a/"
rmdir "$T/a" && mv "$T/a.away" "$T/a"

# ---- 6. reload with missing paths ------------------------------------------------------
: >"$T/plainfile"
printf '[c]\npath = %s\nallow = client\n[file]\npath = %s\nallow = client\n' "$T/c" "$T/plainfile" |
	as_root_modules >>"$T/d.conf"
mark=$(wc -l <"$T/d.log")
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 100); do
	tail -n +"$((mark + 1))" "$T/d.log" | grep -q "reloaded" && break
	sleep 0.05
done
tail -n +"$((mark + 1))" "$T/d.log" >"$T/reload.log"
grep -q "reloaded" "$T/reload.log" && pass "reload with a missing module path succeeded" ||
	fail "no reload: $(cat "$T/reload.log")"
grep -q "module \[c\]: path $T/c: No such file or directory" "$T/reload.log" &&
	grep -q "module \[file\]: path $T/plainfile: not a directory" "$T/reload.log" &&
	pass "the reload says why c and file are unavailable" || fail "reload log: $(cat "$T/reload.log")"
kill -0 "$DAEMON_PID" 2>/dev/null && pass "the daemon is up after the reload" || fail "the daemon died"
expect_rc 0 "push to b after the reload" "${CLIENT[@]}" "$T/src/f" "$HOST:b/g"
expect_rc 23 "push to c (missing)" "${CLIENT[@]}" "$T/src/f" "$HOST:c/"
expect_rc 23 "push to file (not a directory)" "${CLIENT[@]}" "$T/src/f" "$HOST:file/"
expect_rc 0 "--check of the reloaded config" "$RDMACPD" --check --config "$T/d.conf"
grep -q "module \[file\]: path $T/plainfile: not a directory" "$T/err" &&
	pass "--check says file's path is not a directory" || fail "--check said: $(cat "$T/err")"

# ---- 7. a module's max connections -----------------------------------------------------
head -c 3000000 /dev/urandom >"$T/src/big"
# The first client holds lim's one place for about 3 s.
"${CLIENT[@]}" --bwlimit 1M "$T/src/big" "$HOST:lim/first" >"$T/c1.out" 2>"$T/c1.err" &
c1=$!
BG_PIDS+=("$c1")
for _ in $(seq 1 100); do
	grep -q "push to lim: " "$T/d.log" && break
	sleep 0.05
done
kill -0 "$c1" 2>/dev/null || fail "the first client ended too soon: $(cat "$T/c1.err")"
expect_rc 5 "a second client of lim, --wait-busy 0: refused busy" \
	"${CLIENT[@]}" --wait-busy 0 "$T/src/f" "$HOST:lim/second"
grep -q "busy: module 'lim' has its max connections (1)" "$T/err" &&
	pass "says the module is at its max connections" || fail "said: $(cat "$T/err")"
expect_rc 0 "module b is served meanwhile" "${CLIENT[@]}" --wait-busy 0 "$T/src/f" "$HOST:b/h"
t0=$(date +%s%N)
expect_rc 0 "a client of lim with --wait-busy 30 gets through" \
	"${CLIENT[@]}" --wait-busy 30 "$T/src/f" "$HOST:lim/third"
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "waiting up to 30 s" "$T/err" && pass "it waited ($ms ms)" || fail "it did not wait: $(cat "$T/err")"
wait "$c1"
rc=$?
BG_PIDS=()
[ "$rc" -eq 0 ] && pass "the first client finished" || fail "the first client: exit $rc: $(cat "$T/c1.err")"
cmp -s "$T/src/big" "$T/lim/first" && cmp -s "$T/src/f" "$T/lim/third" &&
	pass "lim/first and lim/third arrived" || fail "lim files missing or different"
[ ! -e "$T/lim/second" ] && pass "the refused client wrote nothing" || fail "lim/second exists"

stop_daemon "$DAEMON_PID"
[ "$FAILS" -eq 0 ] || exit 1
