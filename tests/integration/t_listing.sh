#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp ls (issue 15 item 5), against a real daemon:
#   1. `ls HOST` lists the modules this client may use, with their access and
#      comment (text and --json); a module whose allow doesn't match is not
#      named at all
#   2. `ls HOST:MODULE/PATH`: a directory's entries sorted, names only; -l
#      with type, mode, owner, size and time; -r the whole tree; --json one
#      object per entry; a file lists itself; a symlink is listed as one and
#      never followed (also a symlink to .. as the path)
#   3. the rules of a pull: write only refuses, allow refuses, a missing
#      path is NOT_FOUND, .. is refused, 'max files per session' holds (the
#      listed directory itself not counted), and the session runs as the
#      module's user (a directory it can't read stays closed)
#   4. a daemon without the LIST capability (rawserver.py, as a daemon from
#      before it): a clear error and exit 12; a hostile daemon's names are
#      printed escaped, and a name that is no relative path is refused (exit 4)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

H=127.0.0.1
RAWSERVER=$HERE/rawserver.py

# T is 0700 root: the module run as nobody must reach its own directory.
chmod 0711 "$T"
mkdir -p "$T/pub" "$T/inbox" "$T/secret" "$T/small" "$T/three" "$T/nob/locked"
setup_standard "comment = main data" "" \
	"[pub]" "path = $T/pub" "allow = client" "read only = yes" "comment = read-only things" "" \
	"[inbox]" "path = $T/inbox" "allow = client" "write only = yes" "" \
	"[secret]" "path = $T/secret" "allow = someone-else" "comment = hidden" "" \
	"[small]" "path = $T/small" "allow = client" "max files per session = 3" "" \
	"[three]" "path = $T/three" "allow = client" "max files per session = 3" "" \
	"[nob]" "path = $T/nob" "allow = client" "uid = nobody" "gid = nogroup"

cd "$T/mod" || die "cd"
echo aa >a.img
echo bbb >b.img
echo hidden >.hidden.img
printf 'notes\n' >notes.txt
chmod 0640 notes.txt
chown 1234:5678 notes.txt
ln -s a.img link.img
chown -h 4321:8765 link.img
ln -s .. up
mkdir -p sub/one sub/two dir.img
echo x >sub/one/x
echo y >sub/two/y
touch -d '2024-01-02 03:04:05' notes.txt
cd - >/dev/null || die "cd"
for i in 1 2 3 4 5; do echo "$i" >"$T/small/f$i"; done
for i in 1 2 3; do echo "$i" >"$T/three/f$i"; done
echo s >"$T/nob/locked/s"
chmod 0755 "$T/nob"
chmod 0700 "$T/nob/locked"

# ---- 1. modules ----
expect_rc 0 "ls HOST" "${CLIENT[@]}" ls "$H"
cp "$T/out" "$T/mods.out"
grep -qE '^data +read/write +main data$' "$T/mods.out" &&
	grep -qE '^pub +read only +read-only things$' "$T/mods.out" &&
	grep -qE '^inbox +write only$' "$T/mods.out" && pass "modules listed with access and comment" ||
	fail "module listing: $(cat "$T/mods.out")"
grep -q secret "$T/mods.out" && fail "a module that does not allow this client is named" ||
	pass "a module that does not allow this client is not named"
[ "$(wc -l <"$T/mods.out")" -eq 6 ] && pass "six modules shown" ||
	fail "wanted 6 modules: $(cat "$T/mods.out")"
expect_rc 0 "ls HOST:: (rsync's form)" "${CLIENT[@]}" ls "$H::"
cmp -s "$T/out" "$T/mods.out" && pass "HOST:: lists the modules too" || fail "HOST::: $(cat "$T/out")"
expect_rc 0 "ls --json HOST" "${CLIENT[@]}" ls --json "$H"
if python3 - "$T/out" <<-'EOF'; then
	import json, sys
	mods = [json.loads(l) for l in open(sys.argv[1])]
	by = {m["name"]: m for m in mods}
	assert all(m["event"] == "module" for m in mods), mods
	assert set(by) == {"data", "pub", "inbox", "small", "three", "nob"}, by
	assert by["pub"]["access"] == "read only" and by["pub"]["comment"] == "read-only things"
	assert by["inbox"]["access"] == "write only" and by["data"]["access"] == "read/write"
	assert "secret" not in by
	EOF
	pass "--json modules"
else
	fail "--json modules: $(cat "$T/out")"
fi

# ---- 2. entries ----
expect_rc 0 "ls HOST:data/" "${CLIENT[@]}" ls "$H:data/"
printf '%s\n' .hidden.img a.img b.img dir.img link.img notes.txt sub up >"$T/want"
cmp -s "$T/out" "$T/want" && pass "entries sorted, one level, dotfiles too" ||
	fail "ls data/: $(cat "$T/out")"
expect_rc 0 "ls HOST::data/ (rsync's form)" "${CLIENT[@]}" ls "$H::data/"
cmp -s "$T/out" "$T/want" && pass "HOST::data/ lists the same" || fail "ls ::data/: $(cat "$T/out")"
expect_rc 0 "ls HOST:data (no slash)" "${CLIENT[@]}" ls "$H:data"
cmp -s "$T/out" "$T/want" && pass "the module without a slash lists the same" || fail "ls data: $(cat "$T/out")"
expect_rc 0 "ls -l a file" "${CLIENT[@]}" ls -l "$H:data/notes.txt"
grep -qE '^-rw-r----- +1234 +5678 +6 2024-01-02 03:04:05 notes.txt$' "$T/out" &&
	pass "-l: mode, owner, size, time, name" || fail "ls -l notes.txt: $(cat "$T/out")"
expect_rc 0 "ls -l a directory" "${CLIENT[@]}" ls -l "$H:data/"
grep -qE '^lrwxrwxrwx +4321 +8765 +5 .* link.img -> a.img$' "$T/out" &&
	grep -qE '^drwx.* sub$' "$T/out" &&
	pass "-l shows symlinks with their owner, target and its length as size, directories as d" ||
	fail "ls -l: $(cat "$T/out")"
expect_rc 0 "ls -r a subdirectory" "${CLIENT[@]}" ls -r "$H:data/sub"
printf '%s\n' one one/x two two/y >"$T/want"
cmp -s "$T/out" "$T/want" && pass "-r lists the tree beneath it" || fail "ls -r sub: $(cat "$T/out")"
expect_rc 0 "ls of a symlink to .." "${CLIENT[@]}" ls -l "$H:data/up"
[ "$(wc -l <"$T/out")" -eq 1 ] && grep -qE '^l.* up -> \.\.$' "$T/out" &&
	pass "a symlink is listed as itself, never followed" || fail "ls up: $(cat "$T/out")"
expect_rc 0 "ls of a symlink to .. with a slash" "${CLIENT[@]}" ls "$H:data/up/"
[ "$(cat "$T/out")" = up ] && pass "not followed with a slash either" || fail "ls up/: $(cat "$T/out")"
expect_rc 0 "ls --json a file" "${CLIENT[@]}" ls --json "$H:data/a.img"
if python3 - "$T/out" <<-'EOF'; then
	import json, sys
	e = [json.loads(l) for l in open(sys.argv[1])]
	assert len(e) == 1, e
	e = e[0]
	assert e["event"] == "entry" and e["name"] == "a.img" and e["type"] == "file", e
	assert e["size"] == 3 and e["mode"] == "0644" and e["uid"] == 0 and e["mtime"] > 0, e
	EOF
	pass "--json: one object per entry"
else
	fail "--json entry: $(cat "$T/out")"
fi
expect_rc 0 "ls --json owned entries" "${CLIENT[@]}" ls --json "$H:data/"
if python3 - "$T/out" <<-'EOF'; then
	import json, sys
	by = {e["name"]: e for e in map(json.loads, open(sys.argv[1]))}
	n, l = by["notes.txt"], by["link.img"]
	assert (n["uid"], n["gid"], n["size"]) == (1234, 5678, 6), n
	assert (l["uid"], l["gid"], l["size"], l["link"]) == (4321, 8765, 5, "a.img"), l
	EOF
	pass "--json: real owners, a symlink's size is its target's length"
else
	fail "--json owners: $(cat "$T/out")"
fi

# wildcards: the matches themselves (no dotfile; a symlink as itself), -r beneath them
expect_rc 0 "ls 'data/*.img'" "${CLIENT[@]}" ls "$H:data/*.img"
printf '%s\n' a.img b.img dir.img link.img >"$T/want"
cmp -s "$T/out" "$T/want" && pass "a wildcard lists its matches" || fail "ls *.img: $(cat "$T/out")"
expect_rc 0 "ls 'data/sub/*/?'" "${CLIENT[@]}" ls "$H:data/sub/*/?"
printf '%s\n' sub/one/x sub/two/y >"$T/want"
cmp -s "$T/out" "$T/want" && pass "wildcards in several components" || fail "ls sub/*/?: $(cat "$T/out")"
echo lit >"$T/mod/lit[1].img"
expect_rc 0 "ls 'data/lit[1].img' (a name with brackets)" "${CLIENT[@]}" ls "$H:data/lit[1].img"
[ "$(cat "$T/out")" = 'lit[1].img' ] && pass "a pattern that matches nothing is taken as a name" ||
	fail "ls lit[1]: $(cat "$T/out")"
rm -f "$T/mod/lit[1].img"
expect_rc 5 "ls 'data/*.zz'" "${CLIENT[@]}" ls "$H:data/*.zz"
grep -qF "'data/*.zz': no match" "$T/err" && pass "no match named" || fail "no match: $(cat "$T/err")"
expect_rc 5 "ls 'data/up/*' (through a symlink to ..)" "${CLIENT[@]}" ls "$H:data/up/*"

# ---- 3. the rules of a pull ----
expect_rc 5 "ls of a write only module" "${CLIENT[@]}" ls "$H:inbox/"
grep -q "write only" "$T/err" && pass "write only named" || fail "write only: $(cat "$T/err")"
expect_rc 5 "ls of a module that doesn't allow us" "${CLIENT[@]}" ls "$H:secret/"
expect_rc 5 "ls of a missing path" "${CLIENT[@]}" ls "$H:data/missing"
expect_rc 5 "ls of .." "${CLIENT[@]}" ls "$H:data/../"
expect_rc 5 "ls of a module that doesn't exist" "${CLIENT[@]}" ls "$H:nothere/"
expect_rc 5 "ls of 5 entries with 'max files per session = 3'" "${CLIENT[@]}" ls "$H:small/"
grep -q "max files per session" "$T/err" && pass "the refusal names the key" ||
	fail "max files: $(cat "$T/err")"
expect_rc 0 "ls of exactly 3 entries with 'max files per session = 3'" "${CLIENT[@]}" ls "$H:three/"
[ "$(wc -l <"$T/out")" -eq 3 ] && pass "all three listed" || fail "three: $(cat "$T/out")"
if id nobody >/dev/null 2>&1 && getent group nogroup >/dev/null; then
	expect_rc 0 "ls of a module run as nobody" "${CLIENT[@]}" ls "$H:nob/"
	[ "$(cat "$T/out")" = locked ] && pass "its entries" || fail "nob: $(cat "$T/out")"
	expect_rc 5 "ls of a 0700 root directory in a module run as nobody" \
		"${CLIENT[@]}" ls "$H:nob/locked/"
	grep -q s "$T/out" && fail "the locked directory's contents were listed"
else
	echo "note: no user nobody / group nogroup: the module-user check is left out"
fi

# ---- 3b. a hostile client's LIST: unknown flags, a MODULES it has no business sending ----
RP=$BUILD_DIR/tests/rawpeer
if [ -x "$RP" ]; then
	RPA=("$RP" -P "$PORT" --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" --timeout 10)
	# flags 0x20 (unknown), path "data"
	timeout 30 "${RPA[@]}" hello frame LIST 00000020000464617461 wait closed >"$T/rp.out" 2>&1
	grep -q "ERROR PROTOCOL malformed LIST" "$T/rp.out" && grep -q "close_notify" "$T/rp.out" &&
		pass "a LIST with an unknown flag: ERROR PROTOCOL, then close_notify" ||
		fail "LIST flags: $(cat "$T/rp.out")"
	timeout 30 "${RPA[@]}" hello frame LIST 00000000000464617461 frame MODULES 0000 \
		wait closed >"$T/rp.out" 2>&1
	grep -q "ERROR PROTOCOL unexpected MODULES" "$T/rp.out" &&
		pass "a client's MODULES: ERROR PROTOCOL" || fail "client MODULES: $(cat "$T/rp.out")"
else
	echo "note: no rawpeer in $BUILD_DIR/tests: the hostile LIST checks are left out"
fi

# ---- 4. an older daemon, a hostile daemon ----
# rawserve MODE DESC [rawserver args...] -- CLIENT-ARGS...: RC from the client.
rawserve() {
	local mode=$1 desc=$2 rs
	shift 2
	local rsargs=()
	while [ "$1" != "--" ]; do
		rsargs+=("$1")
		shift
	done
	shift
	rm -f "$T/rs.port"
	python3 "$RAWSERVER" --cert "$T/certs/server.crt" --key "$T/certs/server.key" \
		--ca "$T/certs/ca.crt" --port-file "$T/rs.port" --mode "$mode" --timeout 10 \
		"${rsargs[@]}" >"$T/rs.out" 2>&1 &
	rs=$!
	for _ in $(seq 1 100); do
		[ -s "$T/rs.port" ] && break
		sleep 0.05
	done
	[ -s "$T/rs.port" ] || die "$desc: rawserver did not start: $(cat "$T/rs.out")"
	"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" "$@" >"$T/h.out" 2>"$T/h.err"
	RC=$?
	wait "$rs"
}
if command -v python3 >/dev/null && python3 -c 'import ssl; ssl.TLSVersion.TLSv1_3' 2>/dev/null; then
	rawserve hello "a daemon without LIST" -- ls "$H"
	[ "$RC" -eq 12 ] && grep -q "cannot list" "$T/h.err" &&
		pass "a daemon without LIST: '$(cat "$T/h.err")', exit 12" ||
		fail "old daemon: exit $RC: $(cat "$T/h.err")"
	grep -q "got LIST\|got 15" "$T/rs.out" && fail "LIST was sent to a daemon without it" ||
		pass "no LIST sent to it"
	HOSTILE=$(printf 'a\033[2J\n<0>FORGED\302\233' | od -An -tx1 | tr -d ' \n')
	for what in "$H" "$H:data/"; do
		rawserve ls "hostile names ($what)" --caps 0x1f --name-hex "$HOSTILE" -- ls -l "$what"
		if [ "$RC" -eq 0 ] && grep -qF 'a\x1b[2J\x0a<0>FORGED\xc2\x9b' "$T/h.out" &&
			! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]' "$T/h.out"; then
			pass "hostile name from ls $what printed escaped"
		else
			fail "hostile ls $what: exit $RC: $(od -c "$T/h.out" | head -5) $(cat "$T/h.err")"
		fi
	done
	# A daemon from before PROTO_CAP_LIST_OWNERS sends zeros: shown as unknown, not root.
	rawserve ls "owners unknown" --caps 0x1f -- ls -l "$H:data/"
	[ "$RC" -eq 0 ] && grep -qE '^[-dl][rwx-]{9} +\? +\? ' "$T/h.out" &&
		pass "a daemon without the owners capability: owners shown as ?" ||
		fail "owners unknown: exit $RC: $(cat "$T/h.out" "$T/h.err")"
	rawserve ls "owners unknown (--json)" --caps 0x1f -- ls --json "$H:data/"
	[ "$RC" -eq 0 ] && grep -q '"uid":null,"gid":null' "$T/h.out" &&
		pass "--json: owners null" || fail "owners null: exit $RC: $(cat "$T/h.out" "$T/h.err")"
	rawserve ls "a name that climbs" --caps 0x1f --name-hex "$(printf '../../etc/passwd' | od -An -tx1 | tr -d ' \n')" -- ls "$H:data/"
	[ "$RC" -eq 4 ] && ! grep -q passwd "$T/h.out" && pass "a listed '../../etc/passwd' is refused (exit 4)" ||
		fail "climbing name: exit $RC: $(cat "$T/h.out" "$T/h.err")"
else
	echo "note: python3 with TLS 1.3 missing: old and hostile daemon checks left out"
fi

finish
