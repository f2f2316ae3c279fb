#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Skipped is not success (issue 15 item 11), against a real rdmacpd:
#   1. a tree whose entries lie over 4,800 bytes deep on the local side (a
#      source, a module and a destination under long paths) but within the
#      wire's 4,096 bytes from the copied root: copied byte-exact, push and
#      pull, exit 0;
#   2. a tree with names over 4,096 bytes from the copied root: exit 9, the
#      entry named (escaped, shortened in the middle) with its reason, in text
#      and in --json, push and pull (and a pull --dry-run); every other file
#      committed;
#   3. as an unprivileged user, a push of a tree with an unreadable file and
#      an unreadable directory, and a pull of such a tree from a module whose
#      sessions run as the user rdmacp: exit 9, each named with "Permission
#      denied";
#   4. a FIFO stays a warning (exit 0), and the warning keeps its reason even
#      after a 3,800-byte name;
#   5. a hostile client's ENTRY_FAILED: its name and text logged escaped, the
#      failure counted; with status OK: ERROR PROTOCOL.
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v sha256sum >/dev/null || skip "no sha256sum"

# chain C N: N directory names of 200 bytes of C, joined with '/'.
chain() {
	local c=$1 n=$2 s="" one i
	one=$(printf '%*s' 200 '' | tr ' ' "$c")
	for i in $(seq 1 "$n"); do s+="/$one"; done
	echo "${s#/}"
}

# sums DIR: every entry and the checksum of every file, relative to DIR.
sums() {
	(cd "$1" && find . -printf '%y %P\n' | sort && find . -type f -exec sha256sum {} + | sort -k2)
}

same_tree() {
	if sums "$2" >"$T/s.a" && sums "$3" >"$T/s.b" && cmp -s "$T/s.a" "$T/s.b"; then
		pass "$1: $(grep -c '^f ' "$T/s.a") files, byte-exact"
	else
		fail "$1: trees differ: $(diff "$T/s.a" "$T/s.b" | head -4 | cut -c1-120 | tr '\n' '|')"
	fi
}

# A module under a long path (about 2,050 bytes) next to the standard one.
LONGMOD=$T/$(chain m 10)/mod
mkdir -p "$LONGMOD"
setup_standard
stop_daemon "$DAEMON_PID"
printf '\n[long]\npath = %s\nallow = client\n' "$LONGMOD" | as_root_modules >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"

# ---- 1. long local paths, names that fit --------------------------------------
echo "--- 1. deeper than PATH_MAX locally, within the wire's limit"
SRCBASE=$T/$(chain s 10)
REL=$(chain d 14)
mkdir -p "$SRCBASE/tree"
(cd "$SRCBASE/tree" && mkdir -p "$REL" && head -c 100000 /dev/urandom >"$REL/deepest" &&
	head -c 5000 /dev/urandom >top && head -c 3000 /dev/urandom >"$(chain d 7)/middle")
deeplen=$((${#SRCBASE} + 6 + ${#REL} + 8))
[ "$deeplen" -gt 4800 ] && pass "the deepest file's local path is $deeplen bytes" ||
	fail "the deepest local path is only $deeplen bytes"
expect_rc 0 "push -r of the deep tree" "${CLIENT[@]}" -r "$SRCBASE/tree" "$HOST:data/"
grep -i "warn\|skip" "$T/err" | head -3
same_tree "push -r, deep local source" "$SRCBASE/tree" "$T/mod/tree"
expect_rc 0 "push -r into a module under a long path" "${CLIENT[@]}" -r "$SRCBASE/tree" "$HOST:long/"
same_tree "push -r, long module path" "$SRCBASE/tree" "$LONGMOD/tree"

DSTBASE=$T/$(chain p 10)
mkdir -p "$DSTBASE"
expect_rc 0 "pull -r into a long local path" "${CLIENT[@]}" -r "$HOST:data/tree" "$DSTBASE/"
same_tree "pull -r, deep local destination" "$SRCBASE/tree" "$DSTBASE/tree"
rm -rf "$DSTBASE/tree"
expect_rc 0 "pull -r from a module under a long path" "${CLIENT[@]}" -r "$HOST:long/tree" "$DSTBASE/"
same_tree "pull -r, long module path" "$SRCBASE/tree" "$DSTBASE/tree"

# ---- 2. names longer than the wire carries ------------------------------------
echo "--- 2. names over 4096 bytes from the copied root"
# make_far DIR: DIR/far with ok1, sub/ok2 and, 21 levels of 200 bytes down
# (4,220 bytes: over 4,096 with "far/"), too-far; made in two steps, as no
# path argument may be that long.
make_far() {
	mkdir -p "$1/far/sub"
	(cd "$1/far" && mkdir -p "$(chain q 11)" && cd "$(chain q 11)" && mkdir -p "$(chain q 10)" &&
		echo lost >"$(chain q 10)/too-far")
	echo one >"$1/far/ok1"
	echo two >"$1/far/sub/ok2"
}
make_far "$T/src"

# check_long DESC: $T/out and $T/err of a run that met the too-long name.
check_long() {
	local line
	line=$(grep 'longer than' "$T/err" | head -1)
	if [ -n "$line" ] && [[ "$line" == *far/qqq*...*qqq* ]] && [ "${#line}" -lt 2048 ]; then
		pass "$1: the entry named, shortened in the middle, with its reason (${#line} bytes)"
	else
		fail "$1: no complete error line for the long name: $(cut -c1-200 "$T/err" | head -3 | tr '\n' '|')"
	fi
	grep -q ' 1 failed\|1 failed' "$T/err" "$T/out" && pass "$1: the summary counts the failure" ||
		fail "$1: the summary does not count it: $(grep -h failed "$T/err" "$T/out" | head -2)"
}

expect_rc 9 "push -r of a tree with a name over 4096 bytes" "${CLIENT[@]}" -r "$T/src/far" "$HOST:data/"
check_long "push"
[ "$(cat "$T/mod/far/ok1" 2>/dev/null)" = one ] && [ "$(cat "$T/mod/far/sub/ok2" 2>/dev/null)" = two ] &&
	pass "push: the other files are committed" || fail "push: other files missing"

"${CLIENT[@]}" --json -r "$T/src/far" "$HOST:data/json/" >"$T/j.out" 2>"$T/j.err"
rc=$?
[ "$rc" -eq 9 ] && pass "push --json: exit 9" || fail "push --json: exit $rc, wanted 9"
python3 - "$T/j.out" <<'EOF' && pass "push --json: an error event names it with its reason" || fail "push --json: no error event for the long name"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [e for e in ev if e.get("event") == "file" and e.get("action") == "failed"]
sys.exit(0 if len(bad) == 1 and bad[0]["name"].startswith("far/qqq") and "..." in bad[0]["name"]
         and len(bad[0]["name"].encode()) <= 4096 and "longer than" in bad[0]["message"] else 1)
EOF

rm -rf "$T/mod/far"
make_far "$T/mod"
mkdir -p "$T/back" "$T/back/json" "$T/back/dry"
expect_rc 9 "pull -r of a tree with a name over 4096 bytes" "${CLIENT[@]}" -r "$HOST:data/far" "$T/back/"
check_long "pull"
[ "$(cat "$T/back/far/ok1" 2>/dev/null)" = one ] && [ "$(cat "$T/back/far/sub/ok2" 2>/dev/null)" = two ] &&
	pass "pull: the other files are committed" || fail "pull: other files missing"
"${CLIENT[@]}" --json -r "$HOST:data/far" "$T/back/json/" >"$T/j.out" 2>"$T/j.err"
rc=$?
[ "$rc" -eq 9 ] && pass "pull --json: exit 9" || fail "pull --json: exit $rc, wanted 9"
python3 - "$T/j.out" <<'EOF' && pass "pull --json: an error event names it with its reason" || fail "pull --json: no error event for the long name"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [e for e in ev if e.get("event") == "file" and e.get("action") == "failed"]
sys.exit(0 if len(bad) == 1 and bad[0]["name"].startswith("far/qqq") and "..." in bad[0]["name"]
         and "longer than" in bad[0]["message"] else 1)
EOF
expect_rc 9 "pull -r --dry-run of the same tree" "${CLIENT[@]}" -r --dry-run "$HOST:data/far" "$T/back/dry/"
grep -q 'longer than' "$T/err" && pass "pull --dry-run: names the entry it could not send" ||
	fail "pull --dry-run: silent about the long name"

# ---- 3. unreadable entries, as an unprivileged user ---------------------------
echo "--- 3. unreadable entries (an unprivileged client)"
if command -v setpriv >/dev/null && getent passwd nobody >/dev/null; then
	NGROUP=$(id -gn nobody)
	chmod 0711 "$T"
	U=$T/user
	mkdir -p "$U/certs" "$U/tree/closed" "$U/tree/open"
	cp "$T/certs/client.crt" "$T/certs/client.key" "$T/certs/ca.crt" "$U/certs/"
	echo fine >"$U/tree/open/fine"
	echo top >"$U/tree/top"
	echo secret >"$U/tree/secret"
	echo inside >"$U/tree/closed/inside"
	chown -R nobody:"$NGROUP" "$U"
	chmod 0000 "$U/tree/secret" "$U/tree/closed"
	# Small chunks: the pool fits an ordinary user's RLIMIT_MEMLOCK (fitting it
	# by itself is item 1's work, not this test's).
	UCLIENT=(setpriv --reuid=nobody --regid="$NGROUP" --clear-groups "$RDMACP" --config /dev/null
		--cert "$U/certs/client.crt" --key "$U/certs/client.key" --ca "$U/certs/ca.crt" -P "$PORT" --chunk-size 64K)
	expect_rc 9 "push -r as nobody of a tree with unreadable entries" "${UCLIENT[@]}" -r "$U/tree" "$HOST:data/u/"
	grep -q 'tree/secret.*Permission denied' "$T/err" && pass "the unreadable file is named with its reason" ||
		fail "the unreadable file is not reported: $(head -3 "$T/err" | tr '\n' '|')"
	grep -q 'tree/closed.*Permission denied' "$T/err" && pass "the unreadable directory is named with its reason" ||
		fail "the unreadable directory is not reported: $(head -3 "$T/err" | tr '\n' '|')"
	[ "$(cat "$T/mod/u/tree/open/fine" 2>/dev/null)" = fine ] && [ "$(cat "$T/mod/u/tree/top" 2>/dev/null)" = top ] &&
		pass "the readable files are committed" || fail "readable files missing"
	"${UCLIENT[@]}" --json -r "$U/tree" "$HOST:data/u2/" >"$T/j.out" 2>"$T/j.err"
	python3 - "$T/j.out" <<'EOF' && pass "--json: error events for both" || fail "--json: no error events for the unreadable entries"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = {e["name"]: e["message"] for e in ev if e.get("event") == "file" and e.get("action") == "failed"}
ok = any(n.endswith("secret") and "Permission denied" in m for n, m in bad.items()) and \
     any(n.endswith("closed") and "Permission denied" in m for n, m in bad.items())
sys.exit(0 if ok else 1)
EOF
else
	echo "SKIP (part 3): setpriv or the user nobody missing"
fi

# A pull from a module whose sessions run as the user rdmacp: what it can't read.
if getent passwd rdmacp >/dev/null; then
	chmod 0711 "$T"
	mkdir -p "$T/upub/tree/closed" "$T/back3"
	echo fine >"$T/upub/tree/fine"
	echo secret >"$T/upub/tree/secret"
	echo inside >"$T/upub/tree/closed/inside"
	chown -R rdmacp:rdmacp "$T/upub"
	chmod 0000 "$T/upub/tree/secret" "$T/upub/tree/closed"
	stop_daemon "$DAEMON_PID"
	printf '\n[upub]\npath = %s\nallow = client\nuid = rdmacp\ngid = rdmacp\n' "$T/upub" >>"$T/d.conf"
	start_daemon "$T/d.conf" "$T/d.log" "$PORT"
	expect_rc 9 "pull -r of a tree the module's user can't wholly read" "${CLIENT[@]}" -r \
		"$HOST:upub/tree" "$T/back3/"
	grep -q 'tree/secret.*Permission denied' "$T/err" && pass "pull: the unreadable file is named with its reason" ||
		fail "pull: the unreadable file is not reported: $(head -3 "$T/err" | tr '\n' '|')"
	grep -q 'tree/closed.*Permission denied' "$T/err" && pass "pull: the unreadable directory is named with its reason" ||
		fail "pull: the unreadable directory is not reported: $(head -3 "$T/err" | tr '\n' '|')"
	[ "$(cat "$T/back3/tree/fine" 2>/dev/null)" = fine ] && pass "pull: the readable file is committed" ||
		fail "pull: the readable file is missing"
else
	echo "SKIP (part 3, pull): no system user rdmacp (scripts/deps.sh creates it)"
fi

# ---- 4. special files stay a warning -------------------------------------------
echo "--- 4. a FIFO: a warning, not a failure"
mkdir -p "$T/src/fifo"
echo data >"$T/src/fifo/file"
mkfifo "$T/src/fifo/pipe"
FREL=$(chain f 18) # about 3,600 bytes
(cd "$T/src/fifo" && mkdir -p "$FREL" && mkfifo "$FREL/pipe2")
expect_rc 0 "push -r of a tree with FIFOs" "${CLIENT[@]}" -r "$T/src/fifo" "$HOST:data/"
grep -q 'fifo/pipe: not a regular file' "$T/err" && pass "the FIFO is warned about" ||
	fail "no warning for the FIFO: $(head -2 "$T/err")"
line=$(grep 'pipe2' "$T/err")
[[ "$line" == *"not a regular file"* ]] && pass "the deep FIFO's warning keeps its reason (${#line} bytes)" ||
	fail "the deep FIFO's warning lost its reason: ...$(echo "$line" | tail -c 100)"
[ "$(cat "$T/mod/fifo/file")" = data ] && pass "the file next to it is copied" || fail "file missing"
cp -a "$T/src/fifo/." "$T/mod/fifo2/" 2>/dev/null || (mkdir -p "$T/mod/fifo2" && cd "$T/src/fifo" && tar cf - . | (cd "$T/mod/fifo2" && tar xf -))
mkdir -p "$T/back4"
expect_rc 0 "pull -r of a tree with FIFOs" "${CLIENT[@]}" -r "$HOST:data/fifo2" "$T/back4/"
[ "$(cat "$T/back4/fifo2/file")" = data ] && pass "pull: the file next to it is copied" || fail "pull: file missing"

# ---- 5. ENTRY_FAILED from a hostile client --------------------------------------
echo "--- 5. a hostile sender's ENTRY_FAILED"
RAWPEER_BIN=$BUILD_DIR/tests/rawpeer
if [ -x "$RAWPEER_BIN" ]; then
	RAWPEER=("$RAWPEER_BIN" -P "$PORT" --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" --timeout 10)
	hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
	str16() { local h; h=$(hex "$1"); printf '%04x%s' $((${#h} / 2)) "$h"; }
	# status 5 (PERMISSION), a name and a text with a newline, a forged priority and ESC.
	payload=00000005$(str16 $'evil\n<0>FORGED name\e[2J')$(str16 $'why\n<0>FORGED text')
	mark=$(wc -l <"$T/d.log")
	timeout 60 "${RAWPEER[@]}" hello caps=31 open push data/h dir recursive lanes ring \
		frame ENTRY_FAILED "$payload" end 0 0 wait END >"$T/rp.out" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] && pass "ENTRY_FAILED: the session goes on to END" ||
		fail "ENTRY_FAILED: rawpeer exit $rc: $(tail -3 "$T/rp.out" | tr '\n' '|')"
	sleep 0.3
	tail -n +"$((mark + 1))" "$T/d.log" >"$T/d.part"
	grep -qF 'evil\x0a<0>FORGED name\x1b[2J failed at the client: PERMISSION: why\x0a<0>FORGED text' "$T/d.part" &&
		pass "ENTRY_FAILED: name and text logged escaped" ||
		fail "ENTRY_FAILED: not logged escaped: $(grep -a FORGED "$T/d.part" | head -2)"
	if grep -qa $'^<0>FORGED\|\e' "$T/d.part"; then
		fail "ENTRY_FAILED: a forged line or a raw ESC in the daemon log"
	else
		pass "ENTRY_FAILED: no forged line, no raw ESC"
	fi
	grep -q '1 failed' "$T/d.part" && pass "ENTRY_FAILED: counted as a failed file" ||
		fail "ENTRY_FAILED: not counted: $(grep done "$T/d.part")"
	# Status OK is no failure: a protocol error.
	payload=00000000$(str16 a)$(str16 b)
	timeout 60 "${RAWPEER[@]}" hello caps=31 open push data/h2 dir recursive lanes ring \
		frame ENTRY_FAILED "$payload" wait closed expect-seen "ERROR PROTOCOL" >"$T/rp.out" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] && pass "ENTRY_FAILED with status OK: ERROR PROTOCOL, closed" ||
		fail "ENTRY_FAILED with status OK: rawpeer exit $rc: $(tail -3 "$T/rp.out" | tr '\n' '|')"
else
	echo "note: no rawpeer in $BUILD_DIR/tests: part 5 not run"
fi

finish
