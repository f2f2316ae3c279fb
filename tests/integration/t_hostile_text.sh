#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Peer-supplied text never reaches a log or a terminal raw (issue 8 item 8,
# SECURITY.md G46). A file name from a client, and error texts and names from
# a daemon, may hold newlines (a forged "<0>" emergency line in the daemon's
# journal), ESC sequences, C1 controls (0x9b is CSI on 8-bit terminals) and
# bytes that are not UTF-8. Everything that is not printable UTF-8 must come
# out as \xNN, in the daemon's log, in the client's stderr (errors, -v lines)
# and stdout (a pull's listing); --json must stay valid JSON (UTF-8, controls
# as \u00XX). A real daemon and client for names; rawserver.py as a hostile
# daemon for error texts and listings.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip "python3 not found"
python3 -c 'import ssl; ssl.TLSVersion.TLSv1_3' 2>/dev/null || skip "python3 ssl without TLS 1.3"
RAWSERVER=$HERE/rawserver.py

setup_standard "uid = root" "gid = root"

# clean FILE DESC: no raw control byte (C0 but tab/newline, DEL, C1 as UTF-8
# or as a single byte), no line that starts with a forged priority or text.
clean() {
	local file=$1 desc=$2
	if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f\x80-\x9f]\|\xc2[\x80-\x9f]\|\xe2\x80[\xa8-\xae]' "$file"; then
		fail "$desc: raw control bytes: $(LC_ALL=C grep -a -n $'[\x01-\x08\x0b-\x1f\x7f\x80-\x9f]' "$file" | head -3 | od -c | head -5)"
	elif grep -q '^<0>\|^FORGED\|^<0>FORGED' "$file"; then
		fail "$desc: a forged line: $(grep -n '^<0>\|FORGED' "$file" | head -3)"
	else
		pass "$desc: no raw control bytes, no forged line"
	fi
}

# has FILE TEXT DESC: the escaped form is there (fixed string).
has() {
	if grep -qF -- "$2" "$1"; then
		pass "$3"
	else
		fail "$3: '$2' not in $(cat "$1" | head -5)"
	fi
}

# ---- 1. a file name from a real client, in the daemon's log and -v lines ----
NAME=$'a\n<0>FORGED\e[2J\xc2\x9b\x9bz'
ESCAPED='a\x0a<0>FORGED\x1b[2J\xc2\x9b\x9bz'
mkdir -p "$T/src" "$T/pull" "$T/pull2"
echo data >"$T/src/$NAME"
"${CLIENT[@]}" -v "$T/src/$NAME" 127.0.0.1:data/ >"$T/push.out" 2>"$T/push.err"
rc=$?
[ "$rc" -eq 0 ] && pass "push of a file named with a newline, ESC and C1 bytes" ||
	fail "push: exit $rc: $(cat "$T/push.err")"
[ -f "$T/mod/$NAME" ] && pass "it landed under its real name" || fail "the file is missing"
# The daemon logs it (-v: debug "committed ...") through its escaper.
clean "$T/d.log" "daemon log after the push"
has "$T/d.log" "committed $ESCAPED" "daemon log shows the name escaped"
clean "$T/push.err" "client -v output of the push"
has "$T/push.err" "<f+++++++++ $ESCAPED  5 bytes" "client -v line shows the name escaped"

# A pull of the same file: names now come from the daemon.
"${CLIENT[@]}" -v "127.0.0.1:data/$NAME" "$T/pull/" >"$T/pull.out" 2>"$T/pull.err"
rc=$?
[ "$rc" -eq 0 ] && cmp -s "$T/src/$NAME" "$T/pull/$NAME" && pass "pull of it" ||
	fail "pull: exit $rc: $(cat "$T/pull.err")"
clean "$T/pull.err" "client -v output of the pull"
has "$T/pull.err" ">f+++++++++ $ESCAPED  5 bytes" "pull -v line shows the name escaped"

# The daemon's listing for a dry-run pull, as text and as JSON.
mkdir -p "$T/mod/tree"
echo data >"$T/mod/tree/$NAME"
"${CLIENT[@]}" -n -r 127.0.0.1:data/tree "$T/pull2/" >"$T/plan.out" 2>"$T/plan.err"
clean "$T/plan.out" "pull listing (--dry-run)"
has "$T/plan.out" "tree/$ESCAPED" "pull listing shows the name escaped"
"${CLIENT[@]}" -n -r --json 127.0.0.1:data/tree "$T/pull2/" >"$T/plan.json" 2>"$T/plan.err"
if python3 - "$T/plan.json" <<-'EOF'; then
	import json, sys
	raw = open(sys.argv[1], "rb").read()
	text = raw.decode("utf-8")  # strict: JSON text is UTF-8
	names = [json.loads(l)["name"] for l in text.splitlines() if '"plan"' in l]
	want = "tree/a\n<0>FORGED\x1b[2J\u009b\ufffdz"
	assert want in names, names
	assert not any(0x80 <= b <= 0x9f for b in raw), "raw C1 byte"
	assert b"\x1b" not in raw and b"\n<0>" not in raw
	EOF
	pass "--json listing is valid UTF-8 JSON with the controls as \\u escapes"
else
	fail "--json listing: $(od -c "$T/plan.json" | head -8)"
fi

# ---- 1b. text a hostile client chooses: its software string, its ERROR ----
if [ -x "$RAWPEER_BIN" ]; then
	rawpeer_for "$PORT"
	# ERROR code 7, text "x\n<0>FORGED by peer\e[2J\xc2\x9b" as a frame payload.
	text=$(printf 'x\n<0>FORGED by peer\033[2J\302\233' | od -An -tx1 | tr -d ' \n')
	payload=$(printf '00000007%04x%s' $((${#text} / 2)) "$text")
	mark=$(wc -l <"$T/d.log")
	timeout 60 "${RAWPEER[@]}" hello "sw=rawpeer"$'\n<0>FORGED hello\e[2J\xc2\x9b' \
		open push data/g lanes ring files 1:g:5 ack frame ERROR "$payload" \
		wait closed >"$T/rp.out" 2>&1
	for _ in $(seq 1 50); do
		tail -n +"$((mark + 1))" "$T/d.log" | grep -q "transfer failed" && break
		sleep 0.1
	done
	tail -n +"$((mark + 1))" "$T/d.log" >"$T/d.part"
	clean "$T/d.part" "daemon log after a client's hostile HELLO and mid-transfer ERROR"
	has "$T/d.part" 'peer: x\x0a<0>FORGED by peer\x1b[2J\xc2\x9b' "the client's ERROR text logged escaped"
	has "$T/d.part" 'rawpeer\x0a<0>FORGED hello\x1b[2J\xc2\x9b' "the client's software string logged escaped"
else
	echo "note: no rawpeer in $BUILD_DIR/tests: hostile-client texts not checked"
fi

# ---- 2. error texts from a hostile daemon ----
# run_hostile MODE DESC CLIENT-ARGS...: rawserver in MODE (with $RS_CERT, by
# default the test server certificate), the client against it.
RS_CERT=server
run_hostile() {
	local mode=$1 desc=$2
	shift 2
	rm -f "$T/rs.port"
	python3 "$RAWSERVER" --cert "$T/certs/$RS_CERT.crt" --key "$T/certs/$RS_CERT.key" \
		--ca "$T/certs/ca.crt" --port-file "$T/rs.port" --mode "$mode" \
		--timeout 10 >"$T/rs.out" 2>&1 &
	local rs=$!
	for _ in $(seq 1 100); do
		[ -s "$T/rs.port" ] && break
		sleep 0.05
	done
	[ -s "$T/rs.port" ] || { fail "$desc: rawserver did not start: $(cat "$T/rs.out")"; return; }
	"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" "$@" >"$T/h.out" 2>"$T/h.err"
	local rc=$?
	wait "$rs"
	[ "$rc" -ne 0 ] || [ "$mode" = list ] || [ "$mode" = hello ] || fail "$desc: client exit 0"
	clean "$T/h.err" "$desc: client stderr"
	clean "$T/h.out" "$desc: client stdout"
}
HOSTILE_ESC='\x1b[2J\x0a<0>FORGED \xc2\x9b2J \x9b31m \x1b]0;pwned\x07end'
run_hostile error-hello "ERROR instead of HELLO (ping)" ping 127.0.0.1
has "$T/h.err" "$HOSTILE_ESC" "the daemon's text shown escaped (HELLO)"
run_hostile error-open "ERROR in answer to OPEN (push)" "$T/src/$NAME" 127.0.0.1:data/x
has "$T/h.err" "$HOSTILE_ESC" "the daemon's text shown escaped (OPEN)"
run_hostile error-get "ERROR in answer to GET (dry-run pull)" -n -r 127.0.0.1:data/tree "$T/pull2/"
has "$T/h.err" "$HOSTILE_ESC" "the daemon's text shown escaped (GET)"
run_hostile list "hostile names in a dry-run pull listing" -n -r 127.0.0.1:data/tree "$T/pull2/"
has "$T/h.out" 'tree/\x1b[2J\x09<0>FORGED' "hostile listed name shown escaped"

# ---- 3. certificate names: a client's CN in the daemon's log, a daemon's in ping ----
# (C0 controls in a CN make the library ignore the CN; C1 controls and
# direction overrides are kept, so those must be escaped where printed.)
# evil_cert NAME USAGE SAN: a certificate from the test CA with a hostile CN.
evil_cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -utf8 \
		-keyout "$T/certs/$1.key" -out "$T/certs/$1.csr" \
		-subj "/CN=evil"$'\xc2\x9b2J\xe2\x80\xaeFORGED' &&
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
			"$2" "$3" >"$T/certs/$1.ext" &&
		openssl x509 -req -in "$T/certs/$1.csr" -CA "$T/certs/ca.crt" -CAkey "$T/certs/ca.key" \
			-CAcreateserial -out "$T/certs/$1.crt" -days 2 -extfile "$T/certs/$1.ext"
}
if command -v openssl >/dev/null && [ -r "$T/certs/ca.key" ] &&
	evil_cert evilclient clientAuth DNS:evil.example >"$T/openssl.log" 2>&1 &&
	evil_cert evilserver serverAuth IP:127.0.0.1,DNS:localhost >>"$T/openssl.log" 2>&1; then
	mark=$(wc -l <"$T/d.log")
	"$RDMACP" --config /dev/null --cert "$T/certs/evilclient.crt" --key "$T/certs/evilclient.key" \
		--ca "$T/certs/ca.crt" -P "$PORT" "$T/src/$NAME" 127.0.0.1:data/ >/dev/null 2>"$T/ev.err"
	sleep 0.3
	tail -n +"$((mark + 1))" "$T/d.log" >"$T/d.part"
	clean "$T/d.part" "daemon log for a client certificate with a hostile CN"
	has "$T/d.part" 'CN=evil\xc2\x9b2J\xe2\x80\xaeFORGED' "the client's CN logged escaped"
	RS_CERT=evilserver
	run_hostile hello "ping a daemon whose certificate has a hostile CN" ping 127.0.0.1
	has "$T/h.out" 'CN=evil\xc2\x9b2J\xe2\x80\xaeFORGED' "the daemon's CN shown escaped by ping"
else
	echo "note: could not make certificates with hostile names: $(tail -2 "$T/openssl.log")"
fi

finish
