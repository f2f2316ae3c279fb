#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A protocol violation during a transfer is answered with ERROR (code
# PROTOCOL and the reason) and then a TLS close_notify, never a bare EOF
# (issue 8 item 11). Before the fix the daemon's session just exited: a
# FILE_DONE for an unknown id or a bad chunk descriptor got no ERROR at all,
# malformed frames got "malformed message" without a reason, and every one
# ended in an EOF without close_notify, which the protocol defines as an
# error, never the end of a session. Driven by the hostile client rawpeer
# during a push to a real daemon; nothing may be committed.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"


setup_standard "uid = root" "gid = root"
rawpeer_for "$PORT"
printf 'AAAAA' >"$T/a"

# violation DESC REASON STEP...: a push of f (5 bytes) up to its FILES_ACK,
# then STEPs; the daemon must answer ERROR PROTOCOL with REASON in its text,
# then close with close_notify; f must not exist afterwards.
violation() {
	local desc=$1 reason=$2 rc
	shift 2
	timeout 60 "${RAWPEER[@]}" hello open push data/f lanes ring files 1:f:5 ack \
		expect "1=OK" "$@" wait closed wait closed expect "closed (close_notify)" \
		expect-seen "ERROR PROTOCOL" expect-seen "$reason" >"$T/rp.out" 2>"$T/rp.err"
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass "$desc: $(grep -a '^ERROR' "$T/rp.out" | head -1), then close_notify"
	else
		fail "$desc: rawpeer exit $rc"
		sed 's/^/    /' "$T/rp.out" "$T/rp.err" | tail -12
	fi
	[ -e "$T/mod/f" ] && fail "$desc: f was committed"
	rm -f "$T/mod/f"
}

violation "FILE_DONE for an unknown file id" "unknown file id 9" \
	"done" 9 5 "$T/a"
violation "a FILES frame with a garbage payload" "malformed FILES message" \
	frame FILES 00ff
violation "a frame of an unknown type" "unknown message type 99" \
	frame 99 -
violation "a GET during a push" "GET" \
	frame GET 0001000464617461
violation "a chunk descriptor with a wrong length" "bad chunk for f" \
	chunk 0 1 0 5 "$T/a" dlen=3
violation "END with a file in flight" "END with files in flight" \
	end

# Between requests too: an unexpected frame after HELLO.
timeout 60 "${RAWPEER[@]}" hello frame FILES_ACK 0000 wait closed wait closed \
	expect "closed (close_notify)" expect-seen "ERROR PROTOCOL" >"$T/rp.out" 2>&1 &&
	pass "unexpected FILES_ACK after HELLO: ERROR, then close_notify" ||
	{ fail "unexpected FILES_ACK after HELLO"; sed 's/^/    /' "$T/rp.out" | tail -8; }

# The daemon logged each as a failed transfer and keeps serving.
grep -q "transfer failed: PROTOCOL: FILE_DONE for unknown file id 9" "$T/d.log" &&
	pass "daemon logged the reason" || fail "no 'transfer failed' line with the reason"
expect_rc 0 "ping after the violations" "${CLIENT[@]}" ping 127.0.0.1
finish
