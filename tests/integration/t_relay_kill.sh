#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fan-out (issue 36): a destination that dies mid-copy is cut out of the
# chain and the copy completes everywhere else. Three real daemons on
# 127.0.0.2, .3 and .4 (one port, each its own config and modules), each
# relaying with a client certificate of its own; a 64 MiB file paced by
# --bwlimit (about four seconds), so the kill lands mid-file whatever the
# machine:
#   a. the middle hop's daemon killed (kill -9, its sessions too) once the
#      hop after it holds an eighth of the file: the hop before it (a relay
#      child) pushes to the one after it, replaying what it had forwarded
#      (resumed from what that one kept); the others end byte-exact, the
#      killed one is a resumable partial with its cause, exit 25
#   b. the daemon restarted, a --partial re-run to all (with --skip quick):
#      the killed one completes, sent only what it lacked (--json's bytes
#      per destination), the others send nothing
#   c. the first hop's daemon killed: the client cuts it out and pushes to
#      the next with the rest of the chain (resumed from what it kept); the
#      others byte-exact, exit 25; a --partial re-run completes it
#   d. without --partial: the one after the dead hop gets the whole file
#      again (a replay from the start), the dead one is failed
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
SIZE=$((64 * MIB))
RATE=16M

. "$(dirname "$0")/relay_lib.sh"

# held (relay_lib.sh) reads a partial's data, else the file; a copy without --partial
# writes an unnamed inode, whose size says nothing (allocated whole at once): opened tells
# of that one.
relay_daemons 2 3 4
DESTS=(127.0.0.2:data/ 127.0.0.3:data/ 127.0.0.4:data/)

# cut_copy CASE VICTIM RATE [OPTS...]: the copy to the three paced at RATE, the daemon on
# 127.0.0.VICTIM killed once the hop after it holds an eighth of the file (with
# --partial: so that it has some to resume from), else once that hop's copy began; the
# client's exit in RC, its --json in $T/CASE.json.
cut_copy() {
	local c=$1 v=$2 rate=$3 pid
	shift 3
	"${CLIENT[@]}" --json -a --bwlimit "$rate" "$@" "$T/src/big" "${DESTS[@]}" \
		>"$T/$c.json" 2>"$T/$c.err" &
	pid=$!
	if [ "$*" = --partial ]; then
		wait_held $((v + 1)) $((SIZE / 8)) ||
			fail "$c: 127.0.0.$((v + 1)) never held an eighth of the file"
		[ "$(held "$v")" -lt "$SIZE" ] || fail "$c: 127.0.0.$v had the whole file before the kill"
	else
		wait_opened $((v + 1)) || fail "$c: 127.0.0.$((v + 1))'s copy never began"
	fi
	kill_daemon "$v"
	wait "$pid"
	RC=$?
}

# others_exact CASE VICTIM: every destination but the victim byte-exact, and copied.
others_exact() {
	local n
	for n in 2 3 4; do
		[ "$n" = "$2" ] && continue
		cmp -s "$T/src/big" "$T/m$n/data/big" && [ "$(dest_field "$T/$1.json" 127.0.0.$n \
			status)" = copied ] && pass "$1: 127.0.0.$n copied, byte-exact" ||
			fail "$1: 127.0.0.$n: $(dest_field "$T/$1.json" 127.0.0.$n status):" \
				"$(dest_field "$T/$1.json" 127.0.0.$n error)"
	done
}

# rerun CASE VICTIM: the --partial re-run to all; the victim completes with only what it lacked.
rerun() {
	local c=$1 v=$2 lacked sent n
	lacked=$((SIZE - $(held "$v")))
	start_relay_daemon "$v"
	"${CLIENT[@]}" --json -a --partial --skip quick "$T/src/big" "${DESTS[@]}" \
		>"$T/$c.re.json" 2>"$T/$c.re.err"
	RC=$?
	[ "$RC" -eq 0 ] && pass "$c: the re-run: exit 0" ||
		fail "$c: the re-run: exit $RC: $(tail -3 "$T/$c.re.err")"
	cmp -s "$T/src/big" "$T/m$v/data/big" && pass "$c: the re-run: 127.0.0.$v byte-exact" ||
		fail "$c: the re-run: 127.0.0.$v differs or is missing"
	[ ! -e "$T/m$v/data/.rdmacp-partial" ] && pass "$c: the re-run: its partial store is gone" ||
		fail "$c: the re-run: a partial store left at 127.0.0.$v"
	sent=$(dest_field "$T/$c.re.json" "127.0.0.$v" bytes)
	# What it lacked (whole chunks: the kept prefix is cut to one), not the file again.
	if [ -n "$sent" ] && [ "$sent" -ge "$lacked" ] && [ "$sent" -le $((lacked + 8 * MIB)) ] &&
		[ "$sent" -lt "$SIZE" ]; then
		pass "$c: the re-run sent 127.0.0.$v $sent bytes, it lacked $lacked"
	else
		fail "$c: the re-run sent 127.0.0.$v '$sent' bytes, it lacked $lacked"
	fi
	for n in 2 3 4; do
		[ "$n" = "$v" ] && continue
		[ "$(dest_field "$T/$c.re.json" "127.0.0.$n" bytes)" = 0 ] &&
			pass "$c: the re-run sent 127.0.0.$n nothing" ||
			fail "$c: the re-run sent 127.0.0.$n $(dest_field "$T/$c.re.json" "127.0.0.$n" bytes)"
	done
}

mkdir -p "$T/src"
head -c $SIZE /dev/urandom >"$T/src/big" || die "write the source"

echo "--- a. the middle hop killed mid-copy"
cut_copy a 3 "$RATE" --partial
[ "$RC" -eq 25 ] && pass "a: exit 25" || fail "a: exit $RC: $(tail -5 "$T/a.err")"
others_exact a 3
st=$(dest_field "$T/a.json" 127.0.0.3 status)
why=$(dest_field "$T/a.json" 127.0.0.3 error)
[ "$st" = partial ] && echo "$why" | grep -q "cut out of the chain mid-copy, its partial kept" &&
	pass "a: 127.0.0.3 a resumable partial, with its cause: $why" ||
	fail "a: 127.0.0.3: status '$st', error '$why'"
[ "$(dest_field "$T/a.json" 127.0.0.3 exit)" != 0 ] && pass "a: 127.0.0.3's exit is not 0" ||
	fail "a: 127.0.0.3's exit 0"
# The replay to the hop after it resumed from what that hop had kept.
sent=$(dest_field "$T/a.json" 127.0.0.4 bytes)
[ "$sent" -lt "$SIZE" ] && pass "a: 127.0.0.4 resumed: sent $sent of $SIZE bytes after the cut" ||
	fail "a: 127.0.0.4 was sent $sent bytes after the cut"
grep -q "cut out of the chain" "$T/d2.log" && pass "a: the relay on 127.0.0.2 says it cut it out" ||
	fail "a: nothing in 127.0.0.2's log"

echo "--- b. a --partial re-run to all"
rerun b 3

echo "--- c. the first hop killed mid-copy: the client cuts it out"
clear_dests 2 3 4
cut_copy c 2 "$RATE" --partial
[ "$RC" -eq 25 ] && pass "c: exit 25" || fail "c: exit $RC: $(tail -5 "$T/c.err")"
others_exact c 2
st=$(dest_field "$T/c.json" 127.0.0.2 status)
[ "$st" = partial ] && grep -q "127.0.0.2: cut out of the chain (partial): 127.0.0.3 takes its place" \
	"$T/c.err" && pass "c: 127.0.0.2 a partial, cut out, said" ||
	fail "c: 127.0.0.2: status '$st': $(cat "$T/c.err")"
sent=$(dest_field "$T/c.json" 127.0.0.3 bytes)
[ "$sent" -lt "$SIZE" ] && pass "c: 127.0.0.3 resumed: sent $sent of $SIZE bytes after the cut" ||
	fail "c: 127.0.0.3 was sent $sent bytes after the cut"
rerun c 2

echo "--- d. without --partial: the next hop gets the file again, the dead one failed"
clear_dests 2 3 4
# At half the rate: the kill lands well before the end.
cut_copy d 3 8M
[ "$RC" -eq 25 ] && pass "d: exit 25" || fail "d: exit $RC: $(tail -5 "$T/d.err")"
others_exact d 3
[ "$(dest_field "$T/d.json" 127.0.0.3 status)" = failed ] && pass "d: 127.0.0.3 failed" ||
	fail "d: 127.0.0.3: $(dest_field "$T/d.json" 127.0.0.3 status)"
[ "$(dest_field "$T/d.json" 127.0.0.4 bytes)" = "$SIZE" ] &&
	pass "d: 127.0.0.4 was sent the whole file again" ||
	fail "d: 127.0.0.4 was sent $(dest_field "$T/d.json" 127.0.0.4 bytes) bytes"
start_relay_daemon 3

finish
