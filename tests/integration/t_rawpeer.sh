#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The hostile client build/tests/rawpeer against a real daemon: that it can
# play a correct push (and pull), and that what it reports is what the daemon
# did. Attacks here are only ones today's daemon already refuses; each check
# also proves the tool's lines and exit status mean what they say.
#   1. a correct push step by step: the file lands byte-exact, exit 0
#   2. FILE_DONE with a wrong hash: FILE_RESULT INTEGRITY, no file under the
#      final name, no temp file left
#   3. a failed expectation exits 1 (the tool cannot pass by accident)
#   4. a descriptor with a non-canonical length: the session ends (with or
#      without an ERROR first), nothing committed
#   5. a WRITE outside the ring's registration: the lane is refused (remote
#      access error), nothing committed
#   6. a frame of an unknown type after HELLO: ERROR PROTOCOL, closed
#   7. a pull: recv-all receives the daemon's files and their hashes match
#   8. idle (daemon with idle timeout = 3): PINGs answered keep the session
#      open; unanswered, the daemon ends it with ERROR TIMEOUT
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"


setup_standard
rawpeer_for "$PORT"

temps() {
	find "$1" -name '.*.rdmacp.*' 2>/dev/null
}


# 1. A correct push, two chunks of 64 KiB and a short last one.
head -c 150000 /dev/urandom >"$T/src.bin" || die "cannot write the source"
rawpeer_rc 0 "push step by step" \
	hello expect "HELLO versions=1..1" \
	open push data/good.bin chunk=65536 slots=4 expect "OPEN_OK transport=tcp" \
	lanes expect "LANES connected=1" \
	ring expect "slots=4 chunk=65536" \
	files 1:good.bin:150000:0640 \
	ack expect "FILES_ACK 1=OK" \
	chunk 0 1 0 65536 "$T/src.bin" expect placed \
	chunk 1 1 65536 65536 "$T/src.bin" expect placed \
	chunk 2 1 131072 18928 "$T/src.bin" expect placed \
	"done" 1 150000 "$T/src.bin" \
	result expect "FILE_RESULT 1 OK" \
	end wait END expect "END files=1 bytes=150000" \
	bye close
if cmp -s "$T/src.bin" "$T/mod/good.bin"; then
	pass "the pushed file landed byte-exact"
else
	fail "mod/good.bin differs from the source (or is missing)"
fi
[ "$(stat -c %a "$T/mod/good.bin" 2>/dev/null)" = 640 ] && pass "mode 0640 applied" ||
	fail "mode of good.bin: $(stat -c %a "$T/mod/good.bin" 2>&1)"

# 2. The data is right, the announced hash is not.
rawpeer_rc 0 "wrong hash" \
	hello open push data/bad.bin lanes ring \
	files 1:bad.bin:150000 ack expect "1=OK" \
	chunk 0 1 0 150000 "$T/src.bin" expect placed \
	"done" 1 150000 hex=00112233445566778899aabbccddeeff \
	result expect "FILE_RESULT 1 INTEGRITY" \
	end wait END bye close
[ -e "$T/mod/bad.bin" ] && fail "bad.bin exists after an INTEGRITY result" ||
	pass "no file under the final name after INTEGRITY"
[ -z "$(temps "$T/mod")" ] && pass "no temp file left" || fail "temp files left: $(temps "$T/mod")"

# 3. The tool itself: an expectation that does not hold is exit 1.
rawpeer_rc 1 "a failed expectation" hello expect "NO_SUCH_WORD"
grep -q "EXPECT_FAILED NO_SUCH_WORD" "$T/rp.out" && pass "failed expectation printed" ||
	fail "no EXPECT_FAILED line"

# 4. A descriptor whose length is not the canonical chunk length.
rawpeer_rc 0 "non-canonical chunk length" \
	hello open push data/short.bin chunk=65536 lanes ring \
	files 1:short.bin:150000 ack \
	chunk 0 1 0 4096 "$T/src.bin" \
	wait closed expect closed
[ -e "$T/mod/short.bin" ] && fail "short.bin committed" || pass "short.bin not committed"

# 5. A WRITE 4 GiB past the ring slot: outside the registration.
rawpeer_rc 0 "write outside the ring" \
	hello open push data/oob.bin chunk=65536 slots=4 lanes ring \
	files 1:oob.bin:150000 ack \
	poke 0 0x100000000 fill=0x41:64 expect "failed (IBV_WC_REM_ACCESS_ERR)"
[ -e "$T/mod/oob.bin" ] && fail "oob.bin committed" || pass "oob.bin not committed"

# 6. An unknown frame type after HELLO.
rawpeer_rc 0 "unknown frame type" hello frame 99 - wait closed expect-seen "ERROR PROTOCOL" \
	expect closed

# 7. A pull of two files over two lanes through recv-all.
head -c 200000 /dev/urandom >"$T/mod/p1.bin" && cp "$T/src.bin" "$T/mod/p2.bin" ||
	die "cannot write pull sources"
rawpeer_rc 0 "pull with recv-all" \
	hello open pull data/p1.bin chunk=65536 slots=4 lanes=2 lanes get data/p1.bin data/p2.bin \
	recv-all expect "RECV_ALL complete (END) files_ok=2 files_bad=0" bye close

# 8. A second daemon with a short idle timeout.
PORT2=$(free_port)
mkdir -p "$T/mod2"
write_conf "$T/d2.conf" "$PORT2" "$T/certs" "handshake timeout = 5" "idle timeout = 3"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod2" >>"$T/d2.conf"
start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
rawpeer_for "$PORT2"
rawpeer_rc 0 "idle with and without PONGs" \
	hello open push data/idle.bin lanes ring files 1:idle.bin:100 ack \
	idle 2.5 expect "still open" expect-seen "PING nonce=0 (answered)" \
	idle 8 nopong expect closed expect-seen "ERROR TIMEOUT"
grep -q "ERROR TIMEOUT" "$T/rp.out" && ! grep -q "IDLE 8.0 s" "$T/rp.out" &&
	pass "the daemon ended the silent session before 8 s" ||
	fail "the daemon did not end the silent session"

finish
