#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The command line as a user and a script see it:
#   1. every exit code of src/exitcodes.h that can be triggered here:
#      0, 1, 2, 3, 4 (a fake TLS server that answers garbage; skipped with a
#      note when openssl s_server is missing), 5, 6, 7, 9, 10, 11, 12, 13, 14
#      (needs a tmpfs mount; skipped with a reason otherwise). 8 (transport)
#      is not triggered: it needs the data lanes to break after the control
#      connection succeeded, which loopback does not do on demand.
#   2. --json: one start, a file event per file with name, bytes and the
#      XXH3-128 of the content (computed independently with libxxhash through
#      Python ctypes when available, else only the format is checked), the
#      summary; an error event with a code for a failing file
#   3. --dry-run lists and transfers nothing (push and pull)
#   4. --bwlimit 20M on 40 MiB takes >= 1.5 s
#   5. -q prints nothing on success
#   and, with exit code 2, the client config is only a regular file of at
#   most 1 MiB with lines of at most 4096 bytes: /dev/urandom, a FIFO, a 2 MiB
#   file and a 100 KiB line are refused at once; --config /dev/null works
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
M=$((1024 * 1024))
MOUNTED=0
BG_PIDS=()
command -v jq >/dev/null || skip "no jq"

cleanup_cli() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for p in "${DAEMON_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${DAEMON_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	DAEMON_PIDS=()
	if [ "$MOUNTED" -eq 1 ]; then
		umount "$T/small" 2>/dev/null || umount -l "$T/small" 2>/dev/null
	fi
	cleanup
}
trap cleanup_cli EXIT

err_has() {
	if grep -qiE -- "$2" "$T/err"; then
		pass "$1: stderr matches /$2/"
	else
		fail "$1: stderr does not match /$2/: $(head -3 "$T/err" | tr '\n' '|')"
	fi
}

empty_dir() {
	if [ -n "$(ls -A "$2" 2>/dev/null)" ]; then
		fail "$1: something was written in $2: $(ls -A "$2" | head -5 | tr '\n' ' ')"
	else
		pass "$1: nothing written in $2"
	fi
}

mkdir -p "$T/src" "$T/small" "$T/empty"
setup_standard "" "[small]" "path = $T/small" "allow = client"
MAIN_DAEMON=$DAEMON_PID
CLIENT_NOPORT=("${CLIENT[@]:0:${#CLIENT[@]}-2}")

head -c 1000 /dev/urandom >"$T/src/a"
head -c $((1 * M + 5)) /dev/urandom >"$T/src/b"
: >"$T/src/c"
echo hi >"$T/src/small1"

# ---- 1. exit codes -------------------------------------------------------------
echo "--- 1. exit codes"
expect_rc 0 "0: a plain push" "${CLIENT[@]}" "$T/src/a" "$HOST:data/"
cmp -s "$T/src/a" "$T/mod/a" && pass "0: file arrived" || fail "0: file missing"

expect_rc 1 "1: unknown option" "${CLIENT[@]}" --no-such-option "$T/src/a" "$HOST:data/"
expect_rc 1 "1: only one operand" "${CLIENT[@]}" "$T/src/a"
expect_rc 1 "1: no operands" "${CLIENT[@]}"
expect_rc 1 "1: --lanes 0" "${CLIENT[@]}" --lanes 0 "$T/src/a" "$HOST:data/"
expect_rc 1 "1: --chunk-size 3000 (not a power of two)" "${CLIENT[@]}" --chunk-size 3000 "$T/src/a" "$HOST:data/"
expect_rc 1 "1: --bwlimit junk" "${CLIENT[@]}" --bwlimit junk "$T/src/a" "$HOST:data/"
expect_rc 1 "1: -P 70000" "${CLIENT[@]}" -P 70000 "$T/src/a" "$HOST:data/"
expect_rc 1 "1: --transport carrier-pigeon" "${CLIENT[@]}" --transport carrier-pigeon "$T/src/a" "$HOST:data/"
expect_rc 1 "1: local to local" "${CLIENT[@]}" "$T/src/a" "$T/elsewhere"
expect_rc 1 "1: remote to remote" "${CLIENT[@]}" "$HOST:data/a" "$HOST:data/b"
[ ! -e "$T/elsewhere" ] && pass "1: nothing copied locally" || fail "1: local copy made"

printf '[client]\nport = %s\nbogus key = 1\n' "$PORT" >"$T/bad.conf"
expect_rc 2 "2: unknown key in the client config" \
	"$RDMACP" --config "$T/bad.conf" "$T/src/a" "$HOST:data/"
err_has "2: message names FILE:LINE" "$T/bad.conf:3: .*bogus"
printf '[client]\nlanes = 99\n' >"$T/bad2.conf"
expect_rc 2 "2: lanes out of range in the client config" \
	"$RDMACP" --config "$T/bad2.conf" "$T/src/a" "$HOST:data/"
err_has "2: range message names FILE:LINE" "$T/bad2.conf:2:"
expect_rc 2 "2: --config of a missing file" "$RDMACP" --config "$T/nosuch.conf" "$T/src/a" "$HOST:data/"
# A config is a regular file of at most 1 MiB with lines of at most 4096
# bytes (src/conffile.c): anything else is refused at once, naming the file
# (and line). timeout turns a client that reads for ever into a failure.
printf '[client]\ncert = %s\nkey = %s\nca = %s\nport = %s\n' "$T/certs/client.crt" \
	"$T/certs/client.key" "$T/certs/ca.crt" "$PORT" >"$T/good.conf"
expect_rc 0 "0: ping with a good client config" timeout 10 "$RDMACP" --config "$T/good.conf" ping "$HOST"
expect_rc 2 "2: --config /dev/urandom" timeout 10 "$RDMACP" --config /dev/urandom ping "$HOST"
err_has "2: /dev/urandom refused" "^.*/dev/urandom: not a regular file \(it is a character device\)"
mkfifo "$T/fifo.conf"
expect_rc 2 "2: --config of a FIFO" timeout 10 "$RDMACP" --config "$T/fifo.conf" ping "$HOST"
err_has "2: FIFO refused" "$T/fifo.conf: not a regular file \(it is a FIFO\)"
{ cat "$T/good.conf"; head -c $((2 * M)) /dev/zero | tr '\0' '#'; echo; } >"$T/big.conf"
expect_rc 2 "2: a 2 MiB client config" timeout 10 "$RDMACP" --config "$T/big.conf" ping "$HOST"
err_has "2: 2 MiB refused" "$T/big.conf: file too big \($((2 * M + 1 + $(stat -c %s "$T/good.conf"))) bytes"
{ cat "$T/good.conf"; head -c $((100 * 1024)) /dev/zero | tr '\0' '#'; echo; } >"$T/longline.conf"
expect_rc 2 "2: a 100 KiB line" timeout 10 "$RDMACP" --config "$T/longline.conf" ping "$HOST"
err_has "2: long line refused" "$T/longline.conf:6: line too long \(102400 bytes, at most 4096\)"
expect_rc 0 "0: --config /dev/null still reads no defaults" timeout 10 "${CLIENT[@]}" ping "$HOST"
expect_rc 2 "2: missing certificate file" "$RDMACP" --config /dev/null --cert "$T/nosuch.crt" \
	--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$PORT" "$T/src/a" "$HOST:data/"
# A key file that is there but no key: the client connects before it loads it,
# and the TLS set-up is still the error, with the daemon up and with nothing there.
echo "not a key" >"$T/garbage.key"
expect_rc 2 "2: a key file that holds no key" "$RDMACP" --config /dev/null \
	--cert "$T/certs/client.crt" --key "$T/garbage.key" --ca "$T/certs/ca.crt" -P "$PORT" \
	"$T/src/a" "$HOST:data/"
err_has "2: says TLS set-up" "TLS setup"
expect_rc 2 "2: a key file that holds no key, no daemon" "$RDMACP" --config /dev/null \
	--cert "$T/certs/client.crt" --key "$T/garbage.key" --ca "$T/certs/ca.crt" -P "$(free_port)" \
	"$T/src/a" "$HOST:data/"

# 3: a client certificate from another CA.
"$RDMACP" certs init "$T/other" >/dev/null || die "certs init other"
expect_rc 3 "3: client certificate from a foreign CA" "$RDMACP" --config /dev/null \
	--cert "$T/other/client.crt" --key "$T/other/client.key" --ca "$T/certs/ca.crt" -P "$PORT" \
	"$T/src/a" "$HOST:data/foreign/"
expect_rc 3 "3: daemon certificate not from our CA" "$RDMACP" --config /dev/null \
	--cert "$T/certs/client.crt" --key "$T/certs/client.key" --ca "$T/other/ca.crt" -P "$PORT" \
	"$T/src/a" "$HOST:data/foreign/"
expect_rc 3 "3: --pin of another fingerprint" "${CLIENT[@]}" \
	--pin "sha256:$(printf '0%.0s' $(seq 1 64))" "$T/src/a" "$HOST:data/foreign/"
[ ! -e "$T/mod/foreign" ] && pass "3: nothing written" || fail "3: something was written"

# 4: a TLS server with the right certificate that answers the HELLO with garbage.
if command -v openssl >/dev/null && command -v timeout >/dev/null && command -v ss >/dev/null; then
	P4=$(free_port)
	(
		sleep 1
		printf 'this is not an rdmacp message at all, just garbage bytes\n%.0s' 1 2 3 4
		sleep 3
	) | timeout 10 openssl s_server -quiet -accept "$P4" -naccept 1 -tls1_3 \
		-cert "$T/certs/server.crt" -key "$T/certs/server.key" \
		-CAfile "$T/certs/ca.crt" -Verify 1 >/dev/null 2>"$T/s_server.err" &
	BG_PIDS+=($!)
	# Wait for the listener without connecting to it (it accepts only once).
	for _ in $(seq 1 100); do
		[ -n "$(ss -Hltn "sport = :$P4" 2>/dev/null)" ] && break
		sleep 0.05
	done
	expect_rc 4 "4: garbage from the server after TLS" "${CLIENT_NOPORT[@]}" -P "$P4" \
		"$T/src/a" "$HOST:data/"
else
	echo "SKIP (exit 4 only): no openssl, timeout or ss"
fi

expect_rc 5 "5: unknown module" "${CLIENT[@]}" "$T/src/a" "$HOST:nosuch/"
err_has "5: names the module" "nosuch"
expect_rc 5 "5: pull of a missing remote file" "${CLIENT[@]}" "$HOST:data/nosuch" "$T/empty/"

expect_rc 6 "6: nonexistent local source" "${CLIENT[@]}" "$T/src/nosuch" "$HOST:data/six/"
err_has "6: names the source" "src/nosuch"
[ ! -e "$T/mod/six" ] && pass "6: nothing created" || fail "6: destination created"
expect_rc 6 "6: directory without -r" "${CLIENT[@]}" "$T/src" "$HOST:data/six/"
expect_rc 6 "6: pull into a missing local directory" "${CLIENT[@]}" "$HOST:data/a" "$T/nosuchdir/x"

# 7: a daemon that flips a byte of every file it receives.
P7=$(free_port)
mkdir -p "$T/mod7"
write_conf "$T/d7.conf" "$P7" "$T/certs" "handshake timeout = 5"
printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod7" >>"$T/d7.conf"
RDMACPD_TEST_FLIP_BYTE=1 start_daemon "$T/d7.conf" "$T/d7.log" "$P7"
D7=$DAEMON_PID
expect_rc 7 "7: checksum mismatch" "${CLIENT_NOPORT[@]}" -P "$P7" "$T/src/b" "$HOST:data/"
[ ! -e "$T/mod7/b" ] && pass "7: the corrupted file is not committed" || fail "7: corrupted file committed"
stop_daemon "$D7"

expect_rc 9 "9: one good file and one missing source" \
	"${CLIENT[@]}" "$T/src/a" "$T/src/nosuch" "$HOST:data/nine/"
cmp -s "$T/src/a" "$T/mod/nine/a" && pass "9: the good file is committed" || fail "9: good file missing"
expect_rc 9 "9: push -r of a directory and a missing source" \
	"${CLIENT[@]}" -r "$T/src" "$T/src/nosuch2" "$HOST:data/nine2/"

# 10: SIGINT to a rate-limited push.
head -c $((64 * M)) /dev/urandom >"$T/big64"
"${CLIENT[@]}" -q --bwlimit 10M "$T/big64" "$HOST:data/ten/" >"$T/ten.out" 2>&1 &
cpid=$!
BG_PIDS+=("$cpid")
sleep 1.5
if kill -0 "$cpid" 2>/dev/null; then
	kill -INT "$cpid"
	t0=$(date +%s%N)
	wait "$cpid"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$rc" -eq 10 ] && pass "10: SIGINT during a push (exit 10, after $ms ms)" ||
		fail "10: SIGINT during a push: exit $rc, wanted 10: $(head -3 "$T/ten.out" | tr '\n' '|')"
	[ "$ms" -lt 5000 ] && pass "10: stopped within 5 s" || fail "10: took $ms ms to stop"
	[ ! -e "$T/mod/ten/big64" ] && pass "10: no partial file under the final name" ||
		fail "10: $T/mod/ten/big64 exists"
else
	wait "$cpid"
	fail "10: the rate-limited push ended before SIGINT (exit $?)"
fi
kill -0 "$MAIN_DAEMON" 2>/dev/null && pass "10: daemon still alive" || fail "10: daemon gone"

NOPORT=$(free_port)
expect_rc 11 "11: no daemon listening" "${CLIENT_NOPORT[@]}" -P "$NOPORT" "$T/src/a" "$HOST:data/"
expect_rc 11 "11: unknown host" "${CLIENT[@]}" "$T/src/a" "no-such-host.invalid:data/"

RDMACP_TEST_PROTO_VERSION=2 expect_rc 12 "12: client speaking only protocol 2" \
	"${CLIENT[@]}" "$T/src/a" "$HOST:data/twelve/"
err_has "12: says version" "version"
[ ! -e "$T/mod/twelve" ] && pass "12: nothing written" || fail "12: written"

if "$RDMACP" --version >/dev/null && ls /sys/class/infiniband/* >/dev/null 2>&1; then
	echo "SKIP (exit 13 only): this machine has an RDMA device"
else
	expect_rc 13 "13: --transport verbs without an RDMA device" \
		"${CLIENT[@]}" --transport verbs "$T/src/a" "$HOST:data/thirteen/"
	[ ! -e "$T/mod/thirteen" ] && pass "13: nothing written" || fail "13: written"
fi

if mount -t tmpfs -o size=4m tmpfs "$T/small" 2>"$T/mount.err"; then
	MOUNTED=1
	# A module root is the directory the config was loaded with: reload to serve the mount.
	kill -HUP "$MAIN_DAEMON"
	for _ in $(seq 1 100); do
		grep -q "reloaded" "$T/d.log" && break
		sleep 0.05
	done
	head -c $((10 * M)) /dev/urandom >"$T/big10"
	expect_rc 14 "14: 10 MiB into a 4 MiB module" "${CLIENT[@]}" "$T/big10" "$HOST:small/"
	[ ! -e "$T/small/big10" ] && pass "14: nothing committed" || fail "14: big10 committed"
else
	echo "SKIP (exit 14 only): cannot mount a tmpfs: $(head -1 "$T/mount.err")"
fi

# ---- 2. --json ------------------------------------------------------------------
echo "--- 2. --json"
# xxh128 FILE [CHUNK]: HEX of a file, with libxxhash (XXH3_128bits, canonical = high64
# low64); with CHUNK its chunk tree's (the XXH3-128 of its chunks' XXH3-128, in order).
xxh128() {
	python3 - "$@" <<'EOF' 2>/dev/null
import ctypes, ctypes.util, sys
class H(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_128bits.restype = H
lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
def x(b):
    h = lib.XXH3_128bits(b, len(b))
    return h.high64.to_bytes(8, "big") + h.low64.to_bytes(8, "big")
data = open(sys.argv[1], "rb").read()
if len(sys.argv) > 2:
    cs = int(sys.argv[2])
    data = b"".join(x(data[i:i + cs]) for i in range(0, len(data), cs))
print(x(data).hex())
EOF
}
HAVE_XXH=0
if [ -n "$(xxh128 "$T/src/a")" ]; then
	HAVE_XXH=1
else
	echo "note: no libxxhash via python3 ctypes: xxh128 values are checked for format only"
fi

"${CLIENT[@]}" --json "$T/src/a" "$T/src/b" "$T/src/c" "$HOST:data/json/" >"$T/j.out" 2>"$T/j.err"
rc=$?
[ "$rc" -eq 0 ] && pass "--json push of 3 files (exit 0)" || fail "--json push: exit $rc: $(head -2 "$T/j.err")"
jq -e . "$T/j.out" >/dev/null 2>&1 && pass "--json: every line parses" || fail "--json: not NDJSON: $(head -3 "$T/j.out")"
[ "$(jq -r .event "$T/j.out" | tr '\n' ' ')" = "start file file file summary " ] &&
	pass "--json: events start, 3 x file, summary" || fail "--json: events: $(jq -r .event "$T/j.out" | tr '\n' ' ')"
[ "$(jq -s '[.[] | select(.event=="start" and .transport=="tcp" and .direction=="push" and .host=="127.0.0.1" and .lanes>=1)] | length' "$T/j.out")" = 1 ] &&
	pass "--json: one start with transport tcp" || fail "--json: start event: $(grep start "$T/j.out")"
total=0
for f in a b c; do
	sz=$(stat -c %s "$T/src/$f")
	total=$((total + sz))
	ev=$(jq -c "select(.event==\"file\" and .name==\"$f\")" "$T/j.out")
	[ "$(jq -r .bytes <<<"$ev")" = "$sz" ] && pass "--json: file $f: bytes $sz" ||
		fail "--json: file $f: event $ev, wanted bytes $sz"
	# A file of more than one chunk is checked by its chunk tree (xxh128_tree, tree_chunk).
	h=$(jq -r '.xxh128 // .xxh128_tree' <<<"$ev")
	cs=$(jq -r '.tree_chunk // empty' <<<"$ev")
	[[ "$h" =~ ^[0-9a-f]{32}$ ]] && pass "--json: file $f: xxh128 is 32 hex digits" || fail "--json: file $f: xxh128 '$h'"
	if [ "$HAVE_XXH" -eq 1 ]; then
		want=$(xxh128 "$T/src/$f" $cs)
		[ "$h" = "$want" ] && pass "--json: file $f: xxh128 equals libxxhash's ($want)" ||
			fail "--json: file $f: xxh128 $h, libxxhash says $want"
	fi
	jq -e '.seconds >= 0' <<<"$ev" >/dev/null && pass "--json: file $f: seconds" || fail "--json: file $f: seconds"
done
sum=$(jq -c 'select(.event=="summary")' "$T/j.out")
jq -e ".files==3 and .bytes==$total and .failures==0 and .transport==\"tcp\" and .seconds>=0 and .rate>=0" \
	<<<"$sum" >/dev/null && pass "--json: summary files=3 bytes=$total failures=0" || fail "--json: summary $sum"
[ ! -s "$T/j.err" ] && pass "--json: nothing on stderr" || fail "--json: stderr: $(head -2 "$T/j.err")"

"${CLIENT[@]}" --json "$T/src/a" "$T/src/nosuch" "$HOST:data/json2/" >"$T/j.out" 2>"$T/j.err"
rc=$?
[ "$rc" -eq 9 ] && pass "--json with a missing source: exit 9" || fail "--json with a missing source: exit $rc"
jq -e . "$T/j.out" >/dev/null 2>&1 && pass "--json (error): every line parses" || fail "--json (error): $(head -3 "$T/j.out")"
ev=$(jq -c 'select(.event=="file" and .action=="failed")' "$T/j.out")
jq -e '(.name|endswith("nosuch")) and .local==true and .code=="LOCAL_IO" and (.message|length>0)' <<<"$ev" >/dev/null &&
	pass "--json: error event with name, code LOCAL_IO and message" || fail "--json: error event: '$ev'"
jq -s -e '[.[] | select(.event=="summary")] | length==1 and .[0].files==1 and .[0].failed==1 and .[0].failures==1 and .[0].exit==9' "$T/j.out" >/dev/null &&
	pass "--json: summary files=1 failures=1" || fail "--json: summary: $(grep summary "$T/j.out")"

# A remote failure per file: integrity, from the flipping daemon.
RDMACPD_TEST_FLIP_BYTE=1 start_daemon "$T/d7.conf" "$T/d7.log" "$P7"
D7=$DAEMON_PID
"${CLIENT_NOPORT[@]}" -P "$P7" --json "$T/src/b" "$HOST:data/" >"$T/j.out" 2>"$T/j.err"
rc=$?
[ "$rc" -eq 7 ] && pass "--json integrity failure: exit 7" || fail "--json integrity failure: exit $rc"
jq -s -e '[.[] | select(.event=="file" and .action=="failed")] | length==1 and .[0].name=="b" and .[0].type=="file" and .[0].code=="INTEGRITY"' "$T/j.out" >/dev/null &&
	pass "--json: error event code INTEGRITY for b" || fail "--json: integrity error event: $(cat "$T/j.out")"
stop_daemon "$D7"

# ---- 3. --dry-run ------------------------------------------------------------------
echo "--- 3. --dry-run"
expect_rc 0 "-n push of 3 files" "${CLIENT[@]}" -n "$T/src/a" "$T/src/b" "$T/src/c" "$HOST:data/dry/"
[ "$(grep -c '^would copy' "$T/out")" -eq 3 ] && grep -q "^would copy b ($((M + 5)) bytes)" "$T/out" &&
	pass "-n push: lists 3 files with sizes" || fail "-n push: output: $(head -4 "$T/out" | tr '\n' '|')"
# rdmacp(1): a dry run makes the access checks "without moving any data";
# it should leave no trace in the module, not even the destination directory.
[ ! -e "$T/mod/dry" ] && pass "-n push: destination not created" ||
	fail "-n push: the dry run created $T/mod/dry ($(find "$T/mod/dry" | wc -l) entries)"
rm -rf "$T/mod/dry"
expect_rc 0 "-n -r --json push of a tree" "${CLIENT[@]}" -n -r --json "$T/src" "$HOST:data/dry/"
[ "$(jq -r .event "$T/out" | sort -u | tr '\n' ' ')" = "plan summary " ] &&
	pass "-n --json: plan events, then a summary" || fail "-n --json: events $(jq -r .event "$T/out" | sort -u | tr '\n' ' ')"
jq -s -e '(.[-1].event=="summary") and .[-1].dry_run and .[-1].bytes==0 and
	.[-1].files==([.[] | select(.event=="plan")] | length) and
	all(.[] | select(.event=="plan"); .action=="copy" and (.type=="file" or .type=="dir"))' "$T/out" >/dev/null &&
	pass "-n --json: the summary counts the plan, each plan event has type and action" ||
	fail "-n --json: $(tail -2 "$T/out")"
[ ! -e "$T/mod/dry" ] && pass "-n -r push: destination not created" ||
	fail "-n -r push: the dry run created $T/mod/dry ($(find "$T/mod/dry" | wc -l) entries)"
mkdir -p "$T/dry-pull"
expect_rc 0 "-n pull" "${CLIENT[@]}" -n "$HOST:data/a" "$HOST:data/nine/a" "$T/dry-pull/"
[ "$(grep -c '^would copy a (1000 bytes)' "$T/out")" -eq 2 ] && pass "-n pull: lists both" ||
	fail "-n pull: output: $(head -3 "$T/out" | tr '\n' '|')"
empty_dir "-n pull" "$T/dry-pull"
expect_rc 5 "-n push to an unknown module is refused like a real one" "${CLIENT[@]}" -n "$T/src/a" "$HOST:nosuch/"

# ---- 4. --bwlimit ---------------------------------------------------------------------
echo "--- 4. --bwlimit"
head -c $((40 * M)) /dev/urandom >"$T/big40"
t0=$(date +%s%N)
expect_rc 0 "--bwlimit 20M push of 40 MiB" "${CLIENT[@]}" -q --bwlimit 20M "$T/big40" "$HOST:data/bw/"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -ge 1500 ] && pass "--bwlimit 20M: 40 MiB took $ms ms (>= 1500)" ||
	fail "--bwlimit 20M: 40 MiB took only $ms ms"
cmp -s "$T/big40" "$T/mod/bw/big40" && pass "--bwlimit: file intact" || fail "--bwlimit: file differs"
rm -f "$T/big40" "$T/mod/bw/big40"

# ---- 5. -q ----------------------------------------------------------------------------
echo "--- 5. -q"
expect_rc 0 "-q push" "${CLIENT[@]}" -q "$T/src/a" "$T/src/b" "$HOST:data/quiet/"
[ ! -s "$T/out" ] && [ ! -s "$T/err" ] && pass "-q: nothing on stdout or stderr" ||
	fail "-q: printed: $(cat "$T/out" "$T/err" | head -3 | tr '\n' '|')"
mkdir -p "$T/qpull"
expect_rc 0 "-q pull" "${CLIENT[@]}" -q "$HOST:data/quiet/a" "$T/qpull/"
[ ! -s "$T/out" ] && [ ! -s "$T/err" ] && pass "-q pull: nothing printed" ||
	fail "-q pull: printed: $(cat "$T/out" "$T/err" | head -3 | tr '\n' '|')"
expect_rc 5 "-q still reports errors" "${CLIENT[@]}" -q "$T/src/a" "$HOST:nosuch/"
[ -s "$T/err" ] && pass "-q: the error is printed" || fail "-q: the error was not printed"
expect_rc 0 "without -q: a summary" "${CLIENT[@]}" "$T/src/a" "$HOST:data/quiet2/"
grep -q "1 files, 1000 bytes" "$T/err" && pass "summary on stderr" || fail "no summary: $(cat "$T/err")"

finish
