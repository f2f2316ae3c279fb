#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Issue 15 item 2: list values in rdmacpd.conf. "allow = client, other" used
# to pass --check and then lock "client" out: the comma became part of the
# name ("client,"). Now commas and blanks both separate entries, as in
# rsyncd, and what can't be an entry is refused at load with FILE:LINE.
#   1. "allow = other, client" / "other,client" / "other  client": client copies
#   2. fingerprints with ':' between pairs (as openssl prints them), with and
#      without "sha256:", in a list: client copies
#   3. a certificate named in none of the lists (mallory) is still refused (5)
#   4. --check refuses "allow = other, client," and "allow = other # client"
#      with FILE:LINE (exit 2)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v openssl >/dev/null || skip "no openssl"

PORT=$(free_port)
make_certs "$T/certs"
"$RDMACP" certs issue "$T/certs" --client other >/dev/null || die "certs issue other"
"$RDMACP" certs issue "$T/certs" --client mallory >/dev/null || die "certs issue mallory"
# "sha256 Fingerprint=AB:CD:..." as openssl prints it.
FP_COLONS=$(openssl x509 -in "$T/certs/client.crt" -noout -fingerprint -sha256 | sed 's/.*=//')
FP_BARE=$(echo "$FP_COLONS" | tr -d ':' | tr 'A-F' 'a-f')
[ ${#FP_COLONS} -eq 95 ] && [ ${#FP_BARE} -eq 64 ] || die "cannot compute client's fingerprint"

mkdir -p "$T/spaced" "$T/tight" "$T/blanks" "$T/fpcolons" "$T/fpmixed"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
as_root_modules >>"$T/d.conf" <<EOF

[spaced]
path = $T/spaced
allow = client, other

[tight]
path = $T/tight
allow = client,other

[blanks]
path = $T/blanks
allow = other  client

[fpcolons]
path = $T/fpcolons
allow = sha256:$FP_COLONS

[fpmixed]
path = $T/fpmixed
allow = other, $FP_COLONS , sha256:$FP_BARE
EOF

"$RDMACPD" --check --config "$T/d.conf" >"$T/out" 2>"$T/err" ||
	die "--check refused the list config: $(cat "$T/err")"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"

as() { # as NAME ARGS...: rdmacp with NAME's certificate
	local who=$1
	shift
	"$RDMACP" --config /dev/null --cert "$T/certs/$who.crt" --key "$T/certs/$who.key" \
		--ca "$T/certs/ca.crt" -P "$PORT" "$@"
}

echo "payload $RANDOM" >"$T/f1"

# ---- 1, 2: every spelling lets client in ----
for mod in spaced tight blanks fpcolons fpmixed; do
	expect_rc 0 "client pushes to [$mod] ($(grep -A4 "^\[$mod\]" "$T/d.conf" | grep allow))" \
		as client "$T/f1" "$HOST:$mod/"
	if cmp -s "$T/f1" "$T/$mod/f1"; then
		pass "[$mod]: the file arrived"
	else
		fail "[$mod]: the file did not arrive"
	fi
done
expect_rc 0 "other pushes to [spaced] (the second name of the list)" as other "$T/f1" "$HOST:spaced/o1"

# ---- 3: the lists still refuse who is not in them ----
expect_rc 5 "mallory pushes to [spaced]" as mallory "$T/f1" "$HOST:spaced/m1"
expect_rc 5 "mallory pushes to [fpmixed]" as mallory "$T/f1" "$HOST:fpmixed/m1"
[ ! -e "$T/spaced/m1" ] && [ ! -e "$T/fpmixed/m1" ] && pass "mallory's files absent" ||
	fail "mallory's file was written"

# ---- 4: what can't be an entry is refused with FILE:LINE ----
check_refused() { # DESC ALLOW-VALUE WORD
	local desc=$1 value=$2 word=$3 line rc
	write_conf "$T/bad.conf" "$PORT" "$T/certs"
	printf '[m]\npath = %s\nuid = root\ngid = root\nallow = %s\n' "$T/spaced" "$value" >>"$T/bad.conf"
	line=$(grep -n '^allow' "$T/bad.conf" | cut -d: -f1)
	"$RDMACPD" --check --config "$T/bad.conf" >"$T/out" 2>"$T/err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q "$T/bad.conf:$line: .*$word" "$T/err"; then
		pass "--check $desc -> exit 2: $(head -1 "$T/err")"
	else
		fail "--check $desc: exit $rc, stderr: $(cat "$T/err")"
	fi
}
check_refused "trailing comma" "other, client," "ends with a comma"
check_refused "empty entry" "other,,client" "empty entry"
check_refused "a comment after the value" "other # client" "bad entry '#'"
check_refused "quoted names" '"other", "client"' "bad entry"

[ "$FAILS" -eq 0 ] || {
	echo "daemon log:"
	sed 's/^/    /' "$T/d.log" | tail -30
	exit 1
}
exit 0
