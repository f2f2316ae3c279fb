#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Hashing threads under hostile input (issue 31, "not yet attacked"): a daemon
# with "hash threads = 2" whose every hashing job waits 20 ms (the SLOW_HASH
# test hook), so that jobs pile up behind the loop, against the hostile client
# (rawpeer):
#   1. a flood: every slot of the ring written back to back, then FILE_DONE
#      with the right digest: committed byte-exact (jobs queued are waited
#      for, not dropped);
#   2. a slot written twice, the second time while its first chunk is still
#      held for hashing: refused, by the fence (the write into held memory
#      fails) or, when the write lands first, by the receiver (a descriptor for
#      a busy slot: ERROR PROTOCOL); the file never committed;
#   3. a client that dies with jobs queued (TCP FIN, then a hard reset of the
#      lanes): the session ends, no file and no temp file under any name;
#   4. wrong digests for a flood of files in one session: each fails alone
#      (INTEGRITY), none is committed;
#   5. a file its sender fails (FILE_DONE status IO) while its chunks' jobs
#      are out: failed (IO), not freed under the workers;
#   after all of it: no session was killed by a signal (no crash, no abort
#   under ASan), and a correct push on a new connection still works.
#   Then 1, 3, 4 and 5 again with the daemon copying slots the verbs way
#   (RDMACPD_TEST_COPY_SLOTS): every copy made (and hashed) on a worker whose
#   every job waits 20 ms, the ring credited as copies are made.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/certs" "idle timeout = 20" "hash threads = 2"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d.conf"
RDMACPD_TEST_SLOW_HASH=1 start_daemon "$T/d.conf" "$T/d.log" "$PORT"
rawpeer_for "$PORT" 20
K=65536
head -c $((8 * K)) /dev/urandom >"$T/src.bin" || die "cannot write the source"
temps() { find "$1" -name '.*.rdmacp.*' 2>/dev/null; }
chunks() { # chunks ID: the 8 chunks of src.bin into slots 0..7
	local i
	for i in 0 1 2 3 4 5 6 7; do echo chunk "$i" "$1" $((i * K)) "$K" "$T/src.bin"; done
}

# 1. A flood of every slot, then the right digest.
# shellcheck disable=SC2046
rawpeer_rc 0 "every slot at once, jobs queued behind slow hashing" \
	hello open push data/flood.bin chunk=$K slots=8 lanes ring \
	files 1:flood.bin:$((8 * K)):0644 ack expect "1=OK" $(chunks 1) \
	"done" 1 $((8 * K)) "$T/src.bin" result expect "FILE_RESULT 1 OK" end wait END bye close
cmp -s "$T/src.bin" "$T/mod/flood.bin" && pass "the flooded file is committed byte-exact" ||
	fail "flood.bin differs or is missing"

# 2. Slot 0 again while its first chunk waits for its hashing job.
rawpeer_rc 0 "a slot written twice while held" \
	hello open push data/twice.bin chunk=$K slots=8 lanes ring \
	files 1:twice.bin:$((8 * K)) ack expect "1=OK" \
	chunk 0 1 0 $K "$T/src.bin" chunk 0 1 $K $K "$T/src.bin" \
	wait closed expect closed
grep -Eq "write into memory the receiver holds|ERROR PROTOCOL data for busy or unknown slot 0" \
	"$T/rp.out" && pass "the second write refused (fence or busy slot)" ||
	fail "second write: $(tail -5 "$T/rp.out")"
[ ! -e "$T/mod/twice.bin" ] && pass "twice.bin not committed" || fail "twice.bin committed"

# hostile SUF LOG ENDED: scenarios 3, 4, 5 and the checks after them; file names end in
# SUF, the daemon logs to LOG, where ENDED sessions have ended once 3's has.
hostile() {
	local SUF=$1 LOG=$2 ENDED=$3
	# 3. Gone with jobs queued: a FIN after a flood, no FILE_DONE.
	# shellcheck disable=SC2046
	rawpeer_rc 0 "gone with jobs queued$SUF" \
		hello open push data/gone$SUF.bin chunk=$K slots=8 lanes ring \
		files 1:gone.bin:$((8 * K)) ack expect "1=OK" $(chunks 1) fin
	ended='session [0-9]* from .* \(exited\|ended\|killed by signal\)'
	for _ in $(seq 1 100); do # until the daemon has seen the three sessions end
		[ "$(grep -c "$ended" "$LOG")" -ge $ENDED ] && break
		sleep 0.1
	done
	[ ! -e "$T/mod/gone$SUF.bin" ] && [ -z "$(temps "$T/mod")" ] && pass "nothing left of gone$SUF.bin" ||
		fail "left: $(ls -la "$T/mod")"

	# 4. Many files, each with a wrong digest, their chunks queued together.
	files=() steps=()
	for f in 1 2 3 4; do
		files+=("$f:bad$f$SUF.bin:$((2 * K))")
		steps+=(chunk $((2 * f - 2)) "$f" 0 "$K" "$T/src.bin" chunk $((2 * f - 1)) "$f" "$K" "$K" "$T/src.bin")
	done
	rawpeer_rc 0 "four files with wrong digests, chunks queued together$SUF" \
		hello open push data/ chunk=$K slots=8 lanes ring files "${files[@]}" ack expect "4=OK" \
		"${steps[@]}" \
		"done" 1 $((2 * K)) hex=00112233445566778899aabbccddeeff \
		"done" 2 $((2 * K)) hex=00112233445566778899aabbccddeeff \
		"done" 3 $((2 * K)) hex=00112233445566778899aabbccddeeff \
		"done" 4 $((2 * K)) hex=00112233445566778899aabbccddeeff \
		result result result result expect-seen "FILE_RESULT 4 INTEGRITY" end wait END bye close
	[ -z "$(ls "$T/mod" | grep "^bad.*$SUF")" ] && [ -z "$(temps "$T/mod")" ] &&
		pass "none of the four committed, no temp file" || fail "left: $(ls -la "$T/mod")"

	# 5. A file failed by its sender while its chunks' jobs are out.
	# shellcheck disable=SC2046
	rawpeer_rc 0 "failed with jobs out$SUF" \
		hello open push data/failed$SUF.bin chunk=$K slots=8 lanes ring \
		files 1:failed$SUF.bin:$((8 * K)) ack expect "1=OK" $(chunks 1) \
		"done" 1 $((8 * K)) "$T/src.bin" status=IO result expect-seen "FILE_RESULT 1" \
		end wait END bye close
	[ ! -e "$T/mod/failed$SUF.bin" ] && [ -z "$(temps "$T/mod")" ] &&
		pass "failed$SUF.bin not committed, no temp file" || fail "left: $(ls -la "$T/mod")"

	# After all of it: no crash, and the daemon still serves.
	if grep -q "killed by signal" "$LOG"; then
		fail "a session died of a signal: $(grep 'killed by signal' "$LOG")"
	else
		pass "no session died of a signal"
	fi
	rawpeer_rc 0 "a correct push on a new connection$SUF" \
		hello open push data/after$SUF.bin chunk=$K slots=8 lanes ring \
		files 1:after$SUF.bin:$((8 * K)) ack $(chunks 1) \
		"done" 1 $((8 * K)) "$T/src.bin" result expect "FILE_RESULT 1 OK" end wait END bye close
	cmp -s "$T/src.bin" "$T/mod/after$SUF.bin" && pass "after.bin byte-exact" || fail "after$SUF.bin"
}
hostile "" "$T/d.log" 3

# The same with slots copied the verbs way, on the workers.
stop_daemon "$DAEMON_PID"
RDMACPD_TEST_COPY_SLOTS=1 RDMACPD_TEST_SLOW_HASH=1 start_daemon "$T/d.conf" "$T/d2.log" "$PORT"
# shellcheck disable=SC2046
rawpeer_rc 0 "copy: every slot at once, copies queued behind slow workers" \
	hello open push data/flood-copy.bin chunk=$K slots=8 lanes ring \
	files 1:flood-copy.bin:$((8 * K)):0644 ack expect "1=OK" $(chunks 1) \
	"done" 1 $((8 * K)) "$T/src.bin" result expect "FILE_RESULT 1 OK" end wait END bye close
cmp -s "$T/src.bin" "$T/mod/flood-copy.bin" && pass "copy: the flooded file is byte-exact" ||
	fail "flood-copy.bin differs or is missing"
hostile "-copy" "$T/d2.log" 2
finish
