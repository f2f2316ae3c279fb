#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Issue 15 item 12: rdmacpd's log lines carry the time when stderr is not the
# journal, and a "<N>" priority (and no time: the journal adds its own) when
# it is. systemd's test for the journal: JOURNAL_STREAM holds the device and
# inode of stderr; an inherited JOURNAL_STREAM for some other stream is not it.
#   1. stderr a file, JOURNAL_STREAM unset: every line starts with an ISO 8601
#      time with milliseconds and offset, then rdmacpd[PID] and the level;
#      the session's lines (from its own process) too
#   2. JOURNAL_STREAM = stderr's dev:ino: every line starts with <N>, no time
#   3. JOURNAL_STREAM naming another file: timestamps, as in 1
# And the master's line for a session's end carries its CPU time and peak RSS.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

STAMP='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{2}:[0-9]{2} rdmacpd\[[0-9]+\] (error|warning|notice|info|debug): '

make_certs "$T/certs"
mkdir -p "$T/mod"
echo "payload $RANDOM" >"$T/f1"

# run_daemon NAME JOURNAL: a daemon with stderr on $T/NAME.log, one push, stopped.
# JOURNAL: "none" (unset), "self" (stderr's dev:ino), "other" (another file's).
run_daemon() {
	local name=$1 journal=$2 log=$T/$1.log port pid i
	port=$(free_port)
	write_conf "$T/$name.conf" "$port" "$T/certs"
	printf '[data]\npath = %s\nuid = root\ngid = root\nallow = client\n' "$T/mod" >>"$T/$name.conf"
	: >"$log"
	case $journal in
	none) unset JOURNAL_STREAM ;;
	self) export JOURNAL_STREAM=$(stat -c '%d:%i' "$log") ;;
	other) export JOURNAL_STREAM=$(stat -c '%d:%i' "$T/f1") ;;
	esac
	"$RDMACPD" --config "$T/$name.conf" -v 2>>"$log" &
	pid=$!
	DAEMON_PIDS+=("$pid")
	unset JOURNAL_STREAM
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.05
	done
	"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" -P "$port" "$T/f1" "127.0.0.1:data/$name" >"$T/out" 2>&1 ||
		fail "$name: the push failed: $(cat "$T/out")"
	kill -TERM "$pid"
	wait "$pid"
	[ -s "$log" ] || fail "$name: empty log"
}

check_stamped() { # NAME
	local log=$T/$1.log
	if grep -Evq "$STAMP" "$log"; then
		fail "$1: lines without a timestamp: $(grep -Ev "$STAMP" "$log" | head -3)"
	elif ! grep -q 'push to data done' "$log" || ! grep -q 'ready' "$log"; then
		fail "$1: the daemon's and the session's lines are not both there: $(cat "$log")"
	else
		pass "$1: all $(wc -l <"$log") lines timestamped, e.g. $(grep -m1 'done' "$log")"
	fi
}

# ---- 1. stderr a file ----
run_daemon plain none
check_stamped plain
# The time is now's, not some constant: within a minute of the clock.
first=$(head -1 "$T/plain.log" | cut -d' ' -f1)
when=$(date -d "$first" +%s 2>/dev/null)
if [ -n "$when" ] && [ $(($(date +%s) - when)) -lt 60 ]; then
	pass "plain: the first line's time $first is now"
else
	fail "plain: the first line's time '$first' is not now ($(date -Iseconds))"
fi

# The master logs each authenticated session's end with what it used (wait4):
# CPU time and peak RSS, a number of KiB no smaller than a process's least.
line=$(grep -E 'rdmacpd\[[0-9]+\] info: session [0-9]+ from 127\.0\.0\.1:[0-9]+ ended: [0-9]+\.[0-9]{3} s CPU \([0-9]+\.[0-9]{3} user\), peak RSS [0-9]+ KiB$' "$T/plain.log")
kib=$(sed -n 's/.*peak RSS \([0-9]*\) KiB$/\1/p' <<<"$line")
if [ -n "$kib" ] && [ "$kib" -ge 1024 ]; then
	pass "plain: the session's end is logged with its resources: ${line#* info: }"
else
	fail "plain: no session end line with CPU and peak RSS: $(grep -E 'session [0-9]+ ' "$T/plain.log")"
fi

# ---- 2. stderr the journal ----
run_daemon journal self
if grep -Evq '^<[0-7]>' "$T/journal.log"; then
	fail "journal: lines without <N>: $(grep -Ev '^<[0-7]>' "$T/journal.log" | head -3)"
elif grep -Eq '^<[0-7]>[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$T/journal.log"; then
	fail "journal: a timestamp after <N> (the journal adds its own)"
elif ! grep -q '^<6>.*push to data done' "$T/journal.log"; then
	fail "journal: no <6> line for the session: $(cat "$T/journal.log")"
else
	pass "journal: all $(wc -l <"$T/journal.log") lines <N>-prefixed, no time"
fi

# ---- 3. an inherited JOURNAL_STREAM that is not stderr ----
run_daemon inherited other
check_stamped inherited

[ "$FAILS" -eq 0 ] || exit 1
exit 0
