#!/bin/bash
# Local problems are local: an unreadable source or an unwritable pull
# destination is exit 6 (local I/O) naming the full local path, as scp says
# "/etc/a: Permission denied" -- not exit 5 "remote refused" (issue 15 item 3).
# The client runs as an unprivileged user (nobody), so permissions bite.
# The other way round too: the daemon's own failure is remote (exit 14).
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || skip "setpriv not installed"
id nobody >/dev/null 2>&1 || skip "no user nobody"
NOGROUP=$(id -gn nobody)
setup_standard
chmod 0711 "$T"
# The client's own files, readable by nobody.
U=$T/user
mkdir -p "$U"
cp "$T/certs/client.crt" "$T/certs/client.key" "$T/certs/ca.crt" "$U/"
chown -R nobody:"$NOGROUP" "$U"
chmod 0777 "$T/mod"
# Small chunks: the pool fits the 8 MiB locked-memory limit of an ordinary user
# (fitting it by itself is item 1, not this test).
AS_USER=(setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups)
UCLIENT=("${AS_USER[@]}" "$RDMACP" --config /dev/null --cert "$U/client.crt" --key "$U/client.key"
	--ca "$U/ca.crt" -P "$PORT" --transport tcp --no-progress --chunk-size 64K)

# has_text FILE TEXT DESC: TEXT (a path, then the cause after ': ') is on one line.
has_text() {
	local path=${2%%: *} cause=${2#*: }
	if grep -F -- "$path: " "$1" | grep -qF -- "$cause"; then
		pass "$3"
	else
		fail "$3: no '$2' in:"
		sed 's/^/    /' "$1" | head -10
	fi
}

# 1. Push of a source file nobody may read.
mkdir -p "$U/src"
echo secret >"$U/src/locked"
echo fine >"$U/src/fine"
chown -R nobody:"$NOGROUP" "$U/src"
chmod 0000 "$U/src/locked"
expect_rc 6 "push of an unreadable file is a local error" "${UCLIENT[@]}" "$U/src/locked" \
	"127.0.0.1:data/"
has_text "$T/err" "$U/src/locked: Permission denied" "the error names the full local path"
# The old report: the wire name alone, as the daemon's refusal is reported.
if grep -q "^rdmacp: locked: " "$T/err"; then
	fail "an unreadable source is reported as a remote refusal: $(cat "$T/err")"
fi
[ ! -e "$T/mod/locked" ] || fail "the unreadable file arrived anyway"

# 2. Mixed push: one unreadable, one fine -> partial, the failure named.
expect_rc 9 "push of one unreadable and one readable file is partial" "${UCLIENT[@]}" \
	"$U/src/locked" "$U/src/fine" "127.0.0.1:data/"
has_text "$T/err" "$U/src/locked: Permission denied" "the partial failure names the local path"
cmp -s "$U/src/fine" "$T/mod/fine" || fail "the readable file did not arrive"
"${UCLIENT[@]}" --json "$U/src/locked" "$U/src/fine" "127.0.0.1:data/j/" >"$T/json" 2>/dev/null
python3 - "$T/json" "$U/src/locked" <<'PY' || fail "--json error event of a local failure"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
errs = [e for e in ev if e.get("event") == "file" and e.get("action") == "failed"]
assert errs, ev
e = errs[0]
assert e.get("local") is True, e
assert e.get("path") == sys.argv[2], e
PY

# 3. Pull into a directory nobody may not write.
echo pulled >"$T/mod/p1"
chmod 0644 "$T/mod/p1"
mkdir -p "$U/ro"
chown nobody:"$NOGROUP" "$U/ro"
chmod 0555 "$U/ro"
expect_rc 6 "pull into an unwritable directory is a local error" "${UCLIENT[@]}" \
	"127.0.0.1:data/p1" "$U/ro/"
has_text "$T/err" "$U/ro/p1: Permission denied" "the error names the local path"
if grep -q "^rdmacp: p1: " "$T/err"; then
	fail "an unwritable destination is reported as a remote refusal: $(cat "$T/err")"
fi
expect_rc 6 "pull renamed into an unwritable directory is a local error" "${UCLIENT[@]}" \
	"127.0.0.1:data/p1" "$U/ro/newname"
has_text "$T/err" "$U/ro/newname: Permission denied" "the error names the local file"

# 4. A remote refusal stays a remote refusal (exit 5): a file the module lacks.
expect_rc 5 "a missing remote file is still a remote refusal" "${UCLIENT[@]}" \
	"127.0.0.1:data/nonexistent" "$U/"

# 5. The daemon's own failures are remote: ERROR INTERNAL (its set-up failed)
# or IO in answer to OPEN is exit 14, never 6 (local I/O). rawserver.py plays
# the daemon.
for code in 16:INTERNAL 7:IO; do
	rm -f "$T/rs.port"
	python3 "$HERE/rawserver.py" --cert "$T/certs/server.crt" --key "$T/certs/server.key" \
		--ca "$T/certs/ca.crt" --port-file "$T/rs.port" --mode error-open --code "${code%%:*}" \
		--text-hex "$(printf 'daemon failed' | od -An -tx1 | tr -d ' \n')" --timeout 10 \
		>"$T/rs.out" 2>&1 &
	rs=$!
	for _ in $(seq 1 100); do
		[ -s "$T/rs.port" ] && break
		sleep 0.05
	done
	[ -s "$T/rs.port" ] || fail "rawserver did not start: $(cat "$T/rs.out")"
	expect_rc 14 "the daemon's ${code#*:} failure in answer to OPEN is remote I/O" \
		"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" "$U/src/fine" 127.0.0.1:data/
	wait "$rs"
done

finish
