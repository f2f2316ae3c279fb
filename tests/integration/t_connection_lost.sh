#!/bin/bash
# Exit 8 (transport): the daemon's session dies mid-transfer (kill -9 of its
# process), so the data lanes and the control connection are lost. README,
# rdmacp(1) and --help promise 8 for "a connection was lost mid-transfer";
# this is the test that produces it (t_docs.sh checks each documented exit
# code has one). A push, which --bwlimit keeps going long enough.
. "$(dirname "$0")/lib.sh"

setup_standard
HOST=127.0.0.1
C=("${CLIENT[@]}" --transport tcp --no-progress --lanes 1)
head -c $((24 * 1024 * 1024)) /dev/urandom >"$T/big"

# session_pids: the daemon's session processes (its children).
session_pids() { pgrep -P "$DAEMON_PID"; }
wait_session() {
	local i
	for i in $(seq 1 100); do
		[ -n "$(session_pids)" ] && return 0
		sleep 0.05
	done
	return 1
}

# lost DESC CMD...: run CMD in the background (slowed by --bwlimit), kill -9
# the daemon's session once the data flows, expect exit 8.
lost() {
	local desc=$1 cpid rc
	shift
	"$@" >"$T/out" 2>"$T/err" &
	cpid=$!
	wait_session || fail "$desc: no session started"
	sleep 1 # the data path is up and moving (24 MiB at 2 MiB/s: 12 s)
	if ! kill -0 "$cpid" 2>/dev/null; then
		wait "$cpid"
		fail "$desc: the copy ended (exit $?) before the session could be killed"
		return
	fi
	kill -KILL $(session_pids)
	wait "$cpid"
	rc=$?
	if [ "$rc" -eq 8 ]; then
		pass "$desc (exit 8)"
	else
		fail "$desc: exit $rc, wanted 8"
		sed 's/^/    /' "$T/err" | head -5
	fi
}

lost "push: the daemon's session killed mid-transfer" "${C[@]}" --bwlimit 2M "$T/big" \
	"$HOST:data/lost/"
[ ! -e "$T/mod/lost/big" ] || fail "push: a half-sent file was committed"
finish
