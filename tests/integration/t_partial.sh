#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --partial, verified resume, against a real daemon and real files:
#   1. a big push (512 MiB; 64 MiB in sanitizer builds) paced by --bwlimit,
#      the client killed with kill -9 about half-way: no file under the
#      final name, the data kept in .rdmacp-partial (mode 0700) of the
#      destination directory; the --partial re-run reports "resumed" and
#      sends only what was missing (--json: bytes + resumed_bytes = size,
#      resumed_bytes at least a third), the result is byte-identical and
#      the store is gone
#   2. the same with the daemon killed (kill -9, its session too) and
#      restarted mid-file, resumed with -p (the file gets the source's mtime)
#   3. (these with a 64 MiB file) cut twice, a byte flipped in the data the
#      first resume kept: caught when the partial is checked again, that chunk
#      and the rest are sent (the chunks before it kept), the result identical
#   4. a partial of a source with another mtime is discarded: sent whole
#   5. pull: the client killed half-way, its partial resumed by the next pull
#   6. 'partial max age': a partial not written for longer is removed when a
#      later session writes into its directory; with 0 it is kept, and then
#      resumed (-v says so)
#   7. a write-only module refuses --partial (exit 5); a daemon without it
#      (rawserver.py): "too old", exit 12, no OPEN sent
#   9. a tree (-r -p) cut in its second file, re-run with --partial --skip
#      quick: the first file kept, the second resumed, the third copied (in
#      the walk's order, which is the directory's)
#  10. disk full (a tmpfs module filled mid-file; root only): the copy fails
#      with NOSPACE, the partial stays; once there is room, resumed
#   8. the store is nobody's content: -r copies (push and pull) leave every
#      .rdmacp-partial directory out, and a receiver refuses a name in one
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
MIB=512
case "$BUILD_DIR" in
*asan* | *ubsan* | *fuzz*) MIB=64 ;;
esac
SIZE=$((MIB << 20))
# About four seconds for a whole copy: the kill lands mid-file whatever the machine.
RATE="$((MIB / 4))M"
# The cases that need no big file (a flipped byte, a changed mtime, the sweep): 64 MiB.
MID=$((64 << 20))
MIDRATE=16M

command -v jq >/dev/null || skip "jq not installed"
mkdir -p "$T/drop" "$T/small"
# A small file system of its own for the disk-full case (root only; else that case is skipped).
SMALL_FS=0
if mount -t tmpfs -o size=80m rdmacp-test "$T/small" 2>/dev/null; then
	SMALL_FS=1
	trap 'umount "$T/small" 2>/dev/null; cleanup' EXIT
fi
setup_standard "" "[drop]" "path = $T/drop" "allow = client" "write only = yes" \
	"[small]" "path = $T/small" "allow = client"
mkdir -p "$T/src" "$T/pull"
head -c $SIZE /dev/urandom >"$T/src/big" || die "write big"
head -c $MID /dev/urandom >"$T/src/mid" || die "write mid"

# store_data DIR: the data file in DIR's partial store ("" when none).
store_data() {
	ls "$1/.rdmacp-partial/"*.data 2>/dev/null | head -1
}

# wait_half DIR SIZE: until DIR's partial holds half of SIZE (max 60 s).
wait_half() {
	local f s i
	for i in $(seq 1 1200); do
		f=$(store_data "$1")
		if [ -n "$f" ]; then
			s=$(stat -c %s "$f" 2>/dev/null || echo 0)
			[ "$s" -ge $(($2 / 2)) ] && return 0
		fi
		sleep 0.05
	done
	return 1
}

# check_cut DIR NAME: after a kill, nothing under the final name, the partial kept.
check_cut() {
	[ -e "$1/$2" ] && fail "a file under the final name $1/$2 after the kill" ||
		pass "nothing under the final name"
	[ -n "$(store_data "$1")" ] && pass "partial kept" || fail "no partial in $1"
	[ "$(stat -c %a "$1/.rdmacp-partial")" = 700 ] && pass "store is mode 0700" ||
		fail "store mode $(stat -c %a "$1/.rdmacp-partial")"
}

# json_file KEY: the file event's field in $T/out; json_sum KEY: the summary's.
json_file() { jq -r "select(.event == \"file\") | .$1" "$T/out"; }
json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# check_resumed DESC DEST MIN_KEPT: the --json run in $T/out resumed, sent the
# rest exactly, and DEST is the source; the store is gone.
check_resumed() {
	local kept sent
	kept=$(json_file resumed_bytes)
	sent=$(json_file bytes)
	[ "$(json_file action)" = resumed ] && pass "$1: action resumed" ||
		fail "$1: action $(json_file action)"
	[ "$kept" != null ] && [ "$kept" -ge "$3" ] && pass "$1: $kept bytes kept" ||
		fail "$1: kept $kept, wanted at least $3"
	[ "$((sent + kept))" -eq $SIZE ] && pass "$1: sent $sent = what was missing" ||
		fail "$1: sent $sent + kept $kept != $SIZE"
	[ "$(json_sum bytes)" = "$sent" ] && [ "$(json_sum resumed_bytes)" = "$kept" ] &&
		pass "$1: summary bytes and resumed_bytes" ||
		fail "$1: summary $(json_sum bytes) / $(json_sum resumed_bytes)"
	cmp -s "$T/src/big" "$2/big" && pass "$1: byte-identical" || fail "$1: result differs"
	[ "$(stat -c %a "$2/big")" = "$(stat -c %a "$T/src/big")" ] && pass "$1: mode as a copy's" ||
		fail "$1: mode $(stat -c %a "$2/big")"
	[ -e "$(dirname "$2/big")/.rdmacp-partial" ] && fail "$1: store left behind" ||
		pass "$1: store removed"
}

# cut_push NAME SIZE RATE: a paced --partial push of NAME into data/, the client
# killed half-way.
cut_push() {
	"${CLIENT[@]}" -q --partial --bwlimit "$3" "$T/src/$1" "$HOST:data/" \
		>/dev/null 2>&1 &
	local c=$!
	wait_half "$T/mod" "$2" || fail "the partial never reached half the file"
	kill -9 $c 2>/dev/null
	wait $c 2>/dev/null
	# The daemon's session sees the connection go and keeps the partial.
	sleep 0.5
}

# ---- 1. push, client killed ---------------------------------------------------
cut_push big $SIZE "$RATE"
check_cut "$T/mod" big
expect_rc 0 "resumed push" "${CLIENT[@]}" --json --partial "$T/src/big" "$HOST:data/"
check_resumed "push" "$T/mod" $((SIZE / 3))
daemon_settled "$T/d.log"
grep ' done: ' "$T/d.log" | tail -1 | grep -q "1 resumed ($(json_file resumed_bytes) bytes kept" &&
	pass "the daemon logs the resumed file" || fail "daemon log: $(grep ' done: ' "$T/d.log" | tail -1)"

# ---- 2. the daemon killed mid-file and restarted ------------------------------
rm -f "$T/mod/big"
"${CLIENT[@]}" -q --partial --bwlimit "$RATE" "$T/src/big" "$HOST:data/" >/dev/null 2>&1 &
c=$!
wait_half "$T/mod" $SIZE || fail "daemon cut: the partial never reached half the file"
# Its session first (a child of the daemon, started by this test), then the daemon.
pkill -9 -P "$DAEMON_PID" 2>/dev/null
kill -9 "$DAEMON_PID" 2>/dev/null
wait "$DAEMON_PID" 2>/dev/null
wait $c 2>/dev/null
check_cut "$T/mod" big
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
expect_rc 0 "resumed push after a daemon restart, with -p" \
	"${CLIENT[@]}" --json -p --partial "$T/src/big" "$HOST:data/"
check_resumed "daemon restart" "$T/mod" $((SIZE / 3))
[ "$(stat -c %Y "$T/mod/big")" = "$(stat -c %Y "$T/src/big")" ] && pass "-p: the source's mtime" ||
	fail "-p: mtime $(stat -c %Y "$T/mod/big")"

# ---- 3. a flipped byte in the kept data ---------------------------------------
# Cut twice: the byte lies in what the first resume kept (journaled again per chunk).
cut_push mid $MID $MIDRATE
"${CLIENT[@]}" -q --partial --bwlimit $MIDRATE "$T/src/mid" "$HOST:data/" >/dev/null 2>&1 &
c=$!
wait_half "$T/mod" $((MID * 3 / 2)) || fail "second cut: the partial never reached 3/4"
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
sleep 0.5
flip=$((MID / 4 + 12345))
data=$(store_data "$T/mod")
python3 -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0xFF]))' "$data" $flip
cmp -s -n $((flip + 1)) "$data" "$T/src/mid" && fail "the byte was not flipped" ||
	pass "byte $flip flipped in the partial"
expect_rc 0 "resume over a flipped byte" "${CLIENT[@]}" --json --partial "$T/src/mid" \
	"$HOST:data/"
kept=$(json_file resumed_bytes)
[ "$kept" -le $flip ] && pass "the flipped chunk was not kept ($kept <= $flip)" ||
	fail "kept $kept bytes, past the flipped byte at $flip"
[ "$kept" -ge $((flip - (1 << 20))) ] && pass "the chunks before it were kept (1 MiB chunks)" ||
	fail "kept only $kept bytes of the $flip before the flipped byte"
cmp -s "$T/src/mid" "$T/mod/mid" && pass "flip: byte-identical" || fail "flip: result differs"

# ---- 4. another source mtime: discarded ---------------------------------------
rm -f "$T/mod/mid"
cut_push mid $MID $MIDRATE
touch -d '2001-02-03 04:05:06' "$T/src/mid"
expect_rc 0 "push of a changed source" "${CLIENT[@]}" --json --partial "$T/src/mid" \
	"$HOST:data/"
[ "$(json_file action)" = copied ] && [ "$(json_file bytes)" = $MID ] &&
	pass "other mtime: sent whole" ||
	fail "other mtime: $(json_file action) $(json_file bytes) bytes"
cmp -s "$T/src/mid" "$T/mod/mid" && pass "mtime: byte-identical" || fail "mtime: result differs"

# ---- 5. pull, client killed ---------------------------------------------------
"${CLIENT[@]}" -q --partial --bwlimit "$RATE" "$HOST:data/big" "$T/pull/" >/dev/null 2>&1 &
c=$!
wait_half "$T/pull" $SIZE || fail "pull: the partial never reached half the file"
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
check_cut "$T/pull" big
expect_rc 0 "resumed pull" "${CLIENT[@]}" --json --partial "$HOST:data/big" "$T/pull/"
check_resumed "pull" "$T/pull" $((SIZE / 3))

# ---- 6. partial max age --------------------------------------------------------
rm -f "$T/mod/mid"
cut_push mid $MID $MIDRATE
touch -d '10 days ago' "$T/mod/.rdmacp-partial/"*
echo small >"$T/src/small"
expect_rc 0 "a push into the same directory" "${CLIENT[@]}" -q "$T/src/small" "$HOST:data/"
[ -e "$T/mod/.rdmacp-partial" ] && fail "a partial older than 7 days was kept" ||
	pass "a partial older than the max age was removed"
# 0 = kept until resumed.
cut_push mid $MID $MIDRATE
touch -d '10 days ago' "$T/mod/.rdmacp-partial/"*
stop_daemon "$DAEMON_PID"
sed -i 's/^\[global\]$/[global]\npartial max age = 0/' "$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
expect_rc 0 "a push with 'partial max age = 0'" "${CLIENT[@]}" -q "$T/src/small" "$HOST:data/"
[ -n "$(store_data "$T/mod")" ] && pass "max age 0: kept" || fail "max age 0: removed"
# ... and resumed, said by -v.
expect_rc 0 "resume with -v" "${CLIENT[@]}" -v --partial "$T/src/mid" "$HOST:data/"
# Itemized as a copied file's line (rsync -i): a new file at the destination; mid, of many
# chunks, is checked by its chunk tree (xxh128-tree).
grep -q "^<f+++++++++ mid  [0-9]* bytes, [1-9][0-9]* kept (resumed), xxh128-tree [0-9a-f]*$" \
	"$T/err" && pass "-v says resumed, itemized" || fail "-v: $(cat "$T/err")"
cmp -s "$T/src/mid" "$T/mod/mid" && pass "-v: byte-identical" || fail "-v: result differs"

# ---- 10. disk full -------------------------------------------------------------
if [ $SMALL_FS = 1 ]; then
	"${CLIENT[@]}" -q --partial --bwlimit $MIDRATE "$T/src/mid" "$HOST:small/" \
		>/dev/null 2>"$T/err10" &
	c=$!
	wait_half "$T/small" $MID || fail "disk full: the partial never reached half the file"
	# Fill what is left: the receiver's next write fails with ENOSPC.
	head -c $((80 << 20)) /dev/zero >"$T/small/filler" 2>/dev/null
	wait $c
	rc=$?
	[ $rc -ne 0 ] && grep -q "NOSPACE" "$T/err10" && pass "disk full: the copy failed (exit $rc)" ||
		fail "disk full: exit $rc: $(cat "$T/err10")"
	[ ! -e "$T/small/mid" ] && [ -n "$(store_data "$T/small")" ] &&
		pass "disk full: the partial kept, nothing under the final name" ||
		fail "disk full: $(ls -A "$T/small")"
	rm -f "$T/small/filler"
	expect_rc 0 "resumed once there is room" "${CLIENT[@]}" --json --partial "$T/src/mid" \
		"$HOST:small/"
	kept=$(json_file resumed_bytes)
	[ "$(json_file action)" = resumed ] && [ "$kept" -ge $((MID / 3)) ] &&
		[ "$(($(json_file bytes) + kept))" -eq $MID ] &&
		pass "disk full: resumed, $kept bytes kept" ||
		fail "disk full: $(json_file action), $kept kept, $(json_file bytes) sent"
	cmp -s "$T/src/mid" "$T/small/mid" && pass "disk full: byte-identical" ||
		fail "disk full: result differs"
else
	echo "note: no tmpfs mount (not root): the disk-full case is not run"
fi

# ---- 9. a tree: cut, then --partial --skip quick -------------------------------
mkdir -p "$T/src/t3"
for n in 1 2 3; do
	head -c $((16 << 20)) /dev/urandom >"$T/src/t3/f$n" || die "write t3/f$n"
done
"${CLIENT[@]}" -q -r -p --partial --bwlimit 16M "$T/src/t3" "$HOST:data/" >/dev/null 2>&1 &
c=$!
for _ in $(seq 1 1200); do
	[ -n "$(ls "$T/mod/t3" 2>/dev/null)" ] && [ -n "$(store_data "$T/mod/t3")" ] &&
		[ "$(stat -c %s "$(store_data "$T/mod/t3")")" -ge $((8 << 20)) ] && break
	sleep 0.05
done
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
sleep 0.5
first=$(ls "$T/mod/t3")
[ "$(echo "$first" | wc -w)" = 1 ] && pass "tree cut in its second file ($first done)" ||
	fail "tree cut: $(ls -A "$T/mod/t3" 2>&1)"
expect_rc 0 "tree re-run with --partial --skip quick" \
	"${CLIENT[@]}" --json -vv -r -p --partial --skip quick "$T/src/t3" "$HOST:data/"
acts=$(jq -r 'select(.event == "file" and .name != "t3") | .action' "$T/out" | sort | tr '\n' ' ')
[ "$acts" = "copied resumed skipped " ] && pass "tree: one copied, one resumed, one skipped" ||
	fail "tree actions: $acts"
[ "$(jq -r "select(.event == \"file\" and .name == \"t3/$first\") | .action" "$T/out")" = skipped ] &&
	pass "tree: the file done before the cut skipped" || fail "tree: $first not skipped"
diff -r "$T/src/t3" "$T/mod/t3" >/dev/null && pass "tree identical" || fail "tree differs"

# ---- 8. the store is not content -----------------------------------------------
mkdir -p "$T/src/tree/.rdmacp-partial" "$T/src/tree/sub"
echo a >"$T/src/tree/sub/a"
echo junk >"$T/src/tree/.rdmacp-partial/x.data"
expect_rc 0 "push -r of a tree with a store" "${CLIENT[@]}" -q -r "$T/src/tree" "$HOST:data/"
[ -e "$T/mod/tree/sub/a" ] && [ ! -e "$T/mod/tree/.rdmacp-partial" ] &&
	pass "push -r: the store left out" || fail "push -r: $(ls -A "$T/mod/tree")"
mkdir -p "$T/mod/tree/sub/.rdmacp-partial"
echo junk >"$T/mod/tree/sub/.rdmacp-partial/y.data"
expect_rc 0 "pull -r of a tree with a store" "${CLIENT[@]}" -q -r "$HOST:data/tree" "$T/pull/"
[ -e "$T/pull/tree/sub/a" ] && [ ! -e "$T/pull/tree/sub/.rdmacp-partial" ] &&
	pass "pull -r: the store left out" || fail "pull -r: $(ls -A "$T/pull/tree/sub")"
expect_rc 5 "a file named into a store" "${CLIENT[@]}" -q "$T/src/small" \
	"$HOST:data/.rdmacp-partial"
grep -q "rdmacp-partial" "$T/err" && pass "names the destination" || fail "message: $(cat "$T/err")"

# ---- 7. refusals ---------------------------------------------------------------
expect_rc 5 "write-only module refuses --partial" "${CLIENT[@]}" --partial "$T/src/small" \
	"$HOST:drop/"
grep -q "partial" "$T/err" && pass "says why" || fail "no reason: $(cat "$T/err")"
old_daemon_refuses 0x7f --partial "old daemon, push --partial" \
	--partial "$T/src/small" "$HOST:data/"
old_daemon_refuses 0x7f --partial "old daemon, pull --partial" \
	--partial "$HOST:data/small" "$T/pull/x"

finish
