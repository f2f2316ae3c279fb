#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A pull cannot make the daemon walk or hold a tree without bound:
#   1. a GET naming one directory 256 times (also with trailing slashes) is
#      walked once: the files arrive once, the pull succeeds, the dry run
#      lists them once, and the session's peak memory (VmHWM) is that of a
#      GET naming it once
#   2. the session's peak memory does not grow with the tree: a pull of
#      20,000 files with long names against one of 10,000 (the walk streams;
#      long names make any per-entry list show up in megabytes; both trees
#      are larger than what a sender holds in flight, its window of files
#      and its bytes of their names)
#   3. "max files per session = 100": a tree of 150 entries is refused with
#      a message naming the key (pull and dry run, exit 5); 100 entries pass,
#      also asked for 256 times; overlapping paths count together
# Peak memory is read from /proc/PID/status of the daemon's session process
# while the pull runs, and from the daemon's own debug line at session end
# where it has one (exact).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
TOLERANCE_KB=4096
LONG=$(printf 'd%.0s' $(seq 1 200))
TAIL=$(printf 'n%.0s' $(seq 1 180))

# make_tree DIR COUNT: COUNT empty files with long names in DIR/$LONG.
make_tree() {
	mkdir -p "$1/$LONG"
	(cd "$1/$LONG" && seq -f "f%06g_$TAIL" 1 "$2" | xargs touch) || die "make_tree $1"
}

# pull_peak DESC WANT_RC LOG CLIENT-ARGS...: run a pull, set PEAK_KB to the
# session's VmHWM and RC to the client's exit status.
pull_peak() {
	local desc=$1 want=$2 log=$3 before pid="" cpid v line port
	shift 3
	before=$(grep -c ' started$' "$log")
	"$@" >"$T/out" 2>"$T/err" &
	cpid=$!
	PEAK_KB=0
	while kill -0 "$cpid" 2>/dev/null; do
		if [ -z "$pid" ]; then
			line=$(grep ' started$' "$log" | sed -n "$((before + 1))p")
			pid=$(sed -n 's/.*session \([0-9]*\) from .*/\1/p' <<<"$line")
		fi
		if [ -n "$pid" ]; then
			v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
			[ -n "$v" ] && [ "$v" -gt "$PEAK_KB" ] && PEAK_KB=$v
		fi
		sleep 0.01
	done
	wait "$cpid"
	RC=$?
	# The session's own figure, logged as it ends (debug), is exact.
	# A quick pull may end before the loop saw its session start.
	if [ -z "$pid" ]; then
		line=$(grep ' started$' "$log" | sed -n "$((before + 1))p")
		pid=$(sed -n 's/.*session \([0-9]*\) from .*/\1/p' <<<"$line")
	fi
	for _ in $(seq 1 100); do
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.05
	done
	port=$(sed -n 's/.* from [0-9.]*:\([0-9]*\) started$/\1/p' <<<"$line")
	v=$(grep ":$port: session peak memory" "$log" | sed -n 's/.*memory \([0-9]*\) kB.*/\1/p' | tail -1)
	[ -n "$v" ] && PEAK_KB=$v
	if [ "$RC" -eq "$want" ]; then
		pass "$desc (exit $RC, session VmHWM $PEAK_KB kB)"
	else
		fail "$desc: exit $RC, wanted $want (session VmHWM $PEAK_KB kB)"
		sed 's/^/    /' "$T/err" | head -5
	fi
}

# Under AddressSanitizer freed memory sits in a quarantine (up to 256 MiB), so a
# process's peak grows with everything it ever allocated, not with what it holds:
# the comparison means something only in a build without it (CI runs both).
ASAN_BUILD=0
ldd "$RDMACPD" 2>/dev/null | grep -q libasan && ASAN_BUILD=1

# within DESC A B: B is no more than TOLERANCE_KB above A.
within() {
	if [ "$ASAN_BUILD" = 1 ]; then
		echo "  (not compared under ASan, whose quarantine keeps freed memory: $1: $3 kB vs $2 kB)"
		return
	fi
	if [ "$2" -gt 0 ] && [ "$3" -gt 0 ] && [ "$3" -le $(($2 + TOLERANCE_KB)) ]; then
		pass "$1: $3 kB vs $2 kB"
	else
		fail "$1: $3 kB vs $2 kB (over by more than $TOLERANCE_KB kB)"
	fi
}

setup_standard
make_tree "$T/mod/x" 300
make_tree "$T/mod/small" 10000
make_tree "$T/mod/big" 20000
nx=$(find "$T/mod/x" | wc -l)

# ---- 1. the same path 256 times ------------------------------------------------
mkdir -p "$T/one" "$T/dup"
pull_peak "pull -r of data/x" 0 "$T/d.log" "${CLIENT[@]}" -r "$HOST:data/x" "$T/one/"
one_kb=$PEAK_KB
args=()
for i in $(seq 1 128); do args+=("$HOST:data/x" "$HOST:data/x/"); done
pull_peak "pull -r of data/x named 256 times" 0 "$T/d.log" "${CLIENT[@]}" -r "${args[@]}" "$T/dup/"
dup_kb=$PEAK_KB
if diff -r "$T/mod/x" "$T/dup/x" >/dev/null; then
	pass "256 copies: the tree arrived whole"
else
	fail "256 copies: the tree differs"
fi
last=$(grep 'pull from data done' "$T/d.log" | tail -1)
if [[ $last == *"pull from data done: $nx files, 0 bytes, 0 failed" ]]; then
	pass "256 copies: the daemon sent $nx entries, as for one"
else
	fail "256 copies: daemon: $last"
fi
within "256 copies: peak memory as for one" "$one_kb" "$dup_kb"
"${CLIENT[@]}" -n -r "${args[@]}" "$T/dup/" >"$T/plan" 2>&1
n=$(grep -c '^would copy' "$T/plan")
[ "$n" -eq "$nx" ] && pass "256 copies: the dry run lists $nx entries" ||
	fail "256 copies: the dry run lists $n entries, wanted $nx"

# ---- 2. peak memory does not grow with the tree --------------------------------
mkdir -p "$T/s" "$T/b"
pull_peak "pull -r of 10,000 files" 0 "$T/d.log" "${CLIENT[@]}" -r "$HOST:data/small" "$T/s/"
small_kb=$PEAK_KB
pull_peak "pull -r of 20,000 files" 0 "$T/d.log" "${CLIENT[@]}" -r "$HOST:data/big" "$T/b/"
big_kb=$PEAK_KB
n=$(find "$T/b/big/$LONG" -type f | wc -l)
[ "$n" -eq 20000 ] && pass "20,000 files arrived" || fail "$n of 20,000 files arrived"
within "peak memory of a 20,000-file pull as of a 10,000-file one" "$small_kb" "$big_kb"
stop_daemon "$DAEMON_PID"

# ---- 3. max files per session ----------------------------------------------------
PORT2=$(free_port)
mkdir -p "$T/capped/t100" "$T/capped/t150"
seq -f "$T/capped/t100/f%g" 1 99 | xargs touch
seq -f "$T/capped/t150/f%g" 1 149 | xargs touch
write_conf "$T/d2.conf" "$PORT2" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
cat >>"$T/d2.conf" <<EOF

[capped]
path = $T/capped
allow = client
uid = root
gid = root
max files per session = 100
EOF
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
C2=("${CLIENT[@]}" -P "$PORT2")
mkdir -p "$T/c1" "$T/c2" "$T/c3" "$T/c4"
expect_rc 5 "150 entries over a cap of 100: refused" "${C2[@]}" -r "$HOST:capped/t150" "$T/c1/"
grep -q "max files per session" "$T/err" && grep -q "100" "$T/err" &&
	pass "the refusal names the limit: $(grep -m1 'max files' "$T/err")" ||
	fail "the refusal does not name the limit: $(head -3 "$T/err" | tr '\n' '|')"
expect_rc 5 "dry run of 150 entries over a cap of 100: refused" \
	"${C2[@]}" -n -r "$HOST:capped/t150" "$T/c2/"
grep -q "max files per session" "$T/err" && pass "dry run: the refusal names the limit" ||
	fail "dry run: $(head -3 "$T/err" | tr '\n' '|')"
expect_rc 0 "100 entries under a cap of 100" "${C2[@]}" -r "$HOST:capped/t100" "$T/c3/"
args=()
for i in $(seq 1 256); do args+=("$HOST:capped/t100"); done
expect_rc 0 "100 entries named 256 times under a cap of 100" "${C2[@]}" -r "${args[@]}" "$T/c4/"
[ "$(find "$T/c4/t100" -type f | wc -l)" -eq 99 ] && pass "...and arrived once" ||
	fail "t100 named 256 times: $(find "$T/c4" | wc -l) entries"
mkdir -p "$T/c5"
expect_rc 5 "overlapping paths count together (t100 and t100/f1: 101)" \
	"${C2[@]}" -r "$HOST:capped/t100" "$HOST:capped/t100/f1" "$T/c5/"

finish
