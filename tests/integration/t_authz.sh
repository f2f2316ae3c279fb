#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Authorization: who may do what where.
#   1. two client certificates from the same CA, alice and bob: a module that
#      allows only bob refuses alice (exit 5; the daemon log names alice's CN
#      and the reason) and accepts bob
#   2. "allow = sha256:<alice's fingerprint>" accepts alice, refuses bob
#   3. read only: push refused (5), pull allowed; write only: pull refused
#      (5), push allowed
#   4. "..", an absolute path outside every module (/etc/passwd) and a
#      symlinked parent (push and pull) are refused (5); nothing is written
#      or read outside the module
#   5. a pull gets exactly what it asked for; a symlink to /etc in the module
#      is never followed (with -r too): no /etc content arrives
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v openssl >/dev/null || skip "no openssl"

PORT=$(free_port)
make_certs "$T/certs"
"$RDMACP" certs issue "$T/certs" --client alice >/dev/null || die "certs issue alice"
"$RDMACP" certs issue "$T/certs" --client bob >/dev/null || die "certs issue bob"
ALICE_FP=$(openssl x509 -in "$T/certs/alice.crt" -outform DER | sha256sum | cut -d' ' -f1)
[ ${#ALICE_FP} -eq 64 ] || die "cannot compute alice's fingerprint"

mkdir -p "$T/bobonly" "$T/alicefp" "$T/ro" "$T/wo" "$T/mod" "$T/outside"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
as_root_modules >>"$T/d.conf" <<EOF

[bobonly]
path = $T/bobonly
allow = bob

[alicefp]
path = $T/alicefp
allow = sha256:$ALICE_FP

[ro]
path = $T/ro
read only = yes
allow = alice bob

[wo]
path = $T/wo
write only = yes
allow = alice

[data]
path = $T/mod
allow = alice
EOF
start_daemon "$T/d.conf" "$T/d.log" "$PORT"

as() { # as NAME ARGS...: rdmacp with NAME's certificate
	local who=$1
	shift
	"$RDMACP" --config /dev/null --cert "$T/certs/$who.crt" --key "$T/certs/$who.key" \
		--ca "$T/certs/ca.crt" -P "$PORT" "$@"
}

empty_dir() {
	if [ -n "$(ls -A "$2" 2>/dev/null)" ]; then
		fail "$1: something is in $2: $(ls -A "$2" | head -5 | tr '\n' ' ')"
	else
		pass "$1: nothing in $2"
	fi
}

log_has() {
	if grep -qE -- "$2" "$T/d.log"; then
		pass "$1: daemon log matches /$2/"
	else
		fail "$1: daemon log does not match /$2/"
	fi
}

same() {
	if [ -f "$3" ] && [ ! -L "$3" ] && cmp -s "$2" "$3"; then
		pass "$1: $(basename "$3") arrived intact"
	else
		fail "$1: $3 missing or different"
	fi
}

echo "payload $RANDOM" >"$T/f1"
head -c 300000 /dev/urandom >"$T/f2"

# ---- 1. allow by name ---------------------------------------------------------
echo "--- 1. allow = bob"
expect_rc 5 "alice pushes to a module that allows only bob" as alice "$T/f1" "$HOST:bobonly/"
grep -qi "not allow" "$T/err" && pass "alice: the client says why" ||
	fail "alice: no reason on stderr: $(head -2 "$T/err" | tr '\n' '|')"
log_has "alice refused" "CN=alice .*refused: module 'bobonly' does not allow this client"
empty_dir "alice refused" "$T/bobonly"
expect_rc 5 "alice pulls from a module that allows only bob" as alice "$HOST:bobonly/x" "$T/"
expect_rc 5 "the default client cert (CN=client) pushes to bob's module" \
	as client "$T/f1" "$HOST:bobonly/"
expect_rc 0 "bob pushes to his module" as bob "$T/f1" "$T/f2" "$HOST:bobonly/in/"
same "bob's push" "$T/f1" "$T/bobonly/in/f1"
same "bob's push" "$T/f2" "$T/bobonly/in/f2"
mkdir -p "$T/bobgot"
expect_rc 0 "bob pulls from his module" as bob "$HOST:bobonly/in/f2" "$T/bobgot/"
same "bob's pull" "$T/f2" "$T/bobgot/f2"
log_has "bob accepted" "CN=bob .*push to bobonly done"

# ---- 2. allow by fingerprint ----------------------------------------------------
echo "--- 2. allow = sha256:<alice>"
expect_rc 0 "alice pushes to the module that allows her fingerprint" as alice "$T/f2" "$HOST:alicefp/"
same "fingerprint rule" "$T/f2" "$T/alicefp/f2"
expect_rc 5 "bob pushes to the module that allows alice's fingerprint" as bob "$T/f1" "$HOST:alicefp/"
[ ! -e "$T/alicefp/f1" ] && pass "fingerprint rule: bob's file absent" || fail "fingerprint rule: bob's file written"
log_has "bob refused by fingerprint rule" "CN=bob .*refused: module 'alicefp' does not allow"

# ---- 3. read only / write only ---------------------------------------------------
echo "--- 3. read only, write only"
cp "$T/f2" "$T/ro/exported"
expect_rc 5 "push into a read-only module" as alice "$T/f1" "$HOST:ro/"
grep -qi "read only" "$T/err" && pass "read only: the client says why" ||
	fail "read only: no reason on stderr: $(head -2 "$T/err" | tr '\n' '|')"
[ "$(ls -A "$T/ro")" = exported ] && pass "read only: nothing written" ||
	fail "read only: written: $(ls -A "$T/ro" | tr '\n' ' ')"
expect_rc 5 "dry-run push into a read-only module" as alice -n "$T/f1" "$HOST:ro/"
mkdir -p "$T/rogot"
expect_rc 0 "pull from a read-only module" as bob "$HOST:ro/exported" "$T/rogot/"
same "read-only pull" "$T/f2" "$T/rogot/exported"

expect_rc 0 "push into a write-only module" as alice "$T/f2" "$HOST:wo/"
same "write-only push" "$T/f2" "$T/wo/f2"
mkdir -p "$T/wogot"
expect_rc 5 "pull from a write-only module" as alice "$HOST:wo/f2" "$T/wogot/"
grep -qi "write only" "$T/err" && pass "write only: the client says why" ||
	fail "write only: no reason on stderr: $(head -2 "$T/err" | tr '\n' '|')"
expect_rc 5 "pull -r of a whole write-only module" as alice -r "$HOST:wo" "$T/wogot/"
expect_rc 5 "dry-run pull from a write-only module" as alice -n "$HOST:wo/f2" "$T/wogot/"
empty_dir "write-only pulls" "$T/wogot"
log_has "write only" "CN=alice .*refused: module 'wo' is write only"

# ---- 4. paths out of the module ---------------------------------------------------
echo "--- 4. paths outside the module"
PASSWD_SUM=$(sha256sum /etc/passwd | cut -d' ' -f1)
expect_rc 5 "push to data/../x" as alice "$T/f1" "$HOST:data/../x"
expect_rc 5 "push to data/sub/../../outside/" as alice "$T/f1" "$HOST:data/sub/../../outside/"
expect_rc 5 "push to /etc/passwd (outside every module)" as alice "$T/f1" "$HOST:/etc/passwd"
expect_rc 5 "push into /etc/ (outside every module)" as alice "$T/f1" "$HOST:/etc/"
[ "$(sha256sum /etc/passwd | cut -d' ' -f1)" = "$PASSWD_SUM" ] && [ ! -e /etc/f1 ] &&
	pass "/etc/passwd unchanged, /etc/f1 absent" || fail "/etc was written to"
# An absolute path that only shares a prefix with a module path.
mkdir -p "$T/mod-sibling"
expect_rc 5 "push to $T/mod-sibling/ (prefix of a module path, not inside)" \
	as alice "$T/f1" "$HOST:$T/mod-sibling/"
empty_dir "prefix sibling" "$T/mod-sibling"
mkdir -p "$T/got"
expect_rc 5 "pull of /etc/passwd (outside every module)" as alice "$HOST:/etc/passwd" "$T/got/"
expect_rc 5 "pull of data/../../../etc/passwd" as alice "$HOST:data/../../../etc/passwd" "$T/got/"
# data/.. is refused by the client itself (a bad remote path: usage, 1) or
# by the daemon (5); either way nothing is fetched.
as alice -r "$HOST:data/.." "$T/got/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] || [ "$rc" -eq 5 ] && pass "pull -r of data/..: refused (exit $rc)" ||
	fail "pull -r of data/..: exit $rc, wanted 1 or 5"
empty_dir "pulls from outside" "$T/got"

ln -s "$T/outside" "$T/mod/lnk"
echo "outside secret" >"$T/outside/secret"
expect_rc 5 "push through a symlinked parent (data/lnk/new/f1)" as alice "$T/f1" "$HOST:data/lnk/new/f1"
expect_rc 5 "push into a symlinked directory (data/lnk/)" as alice "$T/f1" "$HOST:data/lnk/"
expect_rc 5 "push -r into a symlinked directory (data/lnk/sub/)" as alice -r "$T/certs" "$HOST:data/lnk/sub/"
[ "$(ls -A "$T/outside")" = secret ] && pass "symlinked parent: nothing written outside" ||
	fail "symlinked parent: written outside: $(ls -A "$T/outside" | tr '\n' ' ')"
expect_rc 5 "pull through a symlinked parent (data/lnk/secret)" as alice "$HOST:data/lnk/secret" "$T/got/"
expect_rc 5 "pull via /ABS/PATH through a symlinked parent" as alice "$HOST:$T/mod/lnk/secret" "$T/got/"
empty_dir "pull through a symlinked parent" "$T/got"

# ---- 5. exactly what was asked ----------------------------------------------------
echo "--- 5. pull gets exactly what was asked"
mkdir -p "$T/mod/sub/deep"
for n in a b c other secret; do echo "content of $n" >"$T/mod/$n"; done
echo deep >"$T/mod/sub/deep/x"
echo subfile >"$T/mod/sub/y"
mkdir -p "$T/g1"
expect_rc 0 "pull data/a data/c" as alice "$HOST:data/a" "$HOST:data/c" "$T/g1/"
[ "$(ls -A "$T/g1" | tr '\n' ' ')" = "a c " ] && pass "pull of a and c: exactly a and c" ||
	fail "pull of a and c: got $(ls -A "$T/g1" | tr '\n' ' ')"
mkdir -p "$T/g2"
expect_rc 0 "pull -r data/sub" as alice -r "$HOST:data/sub" "$T/g2/"
got=$(cd "$T/g2" && find . | sort | tr '\n' ' ')
[ "$got" = ". ./sub ./sub/deep ./sub/deep/x ./sub/y " ] && pass "pull -r of sub: exactly sub's tree" ||
	fail "pull -r of sub: got $got"
mkdir -p "$T/g3"
expect_rc 0 "pull data/sub/deep/x renamed" as alice "$HOST:data/sub/deep/x" "$T/g3/renamed"
[ "$(ls -A "$T/g3")" = renamed ] && pass "pull renamed: exactly one file" ||
	fail "pull renamed: got $(ls -A "$T/g3" | tr '\n' ' ')"
mkdir -p "$T/g4"
expect_rc 5 "pull of a missing file next to an existing one" as alice "$HOST:data/a" "$HOST:data/nosuch" "$T/g4/"
empty_dir "pull with a missing source (refused before any data)" "$T/g4"

# A symlink to /etc inside the module.
ln -s /etc "$T/mod/evil"
ln -s /etc/passwd "$T/mod/evilfile"
no_etc() { # DESC DIR: no regular file under DIR has /etc content
	local n
	n=$(find "$2" -type f 2>/dev/null | wc -l)
	if [ -e "$2/evil/passwd" ] || [ -e "$2/evil/hostname" ] && [ ! -L "$2/evil" ]; then
		fail "$1: /etc content under $2"
	elif [ "$n" -ne 0 ]; then
		fail "$1: $n regular files under $2: $(find "$2" -type f | head -3 | tr '\n' ' ')"
	else
		pass "$1: no /etc content under $2"
	fi
}
for flags in "-r" ""; do
	d=$T/ev${flags:-plain}
	mkdir -p "$d"
	as alice $flags "$HOST:data/evil" "$d/" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; then
		pass "pull ${flags:+$flags }of data/evil -> /etc: exit $rc (sent as a link, or refused)"
	else
		fail "pull ${flags:+$flags }of data/evil -> /etc: exit $rc, wanted 0 or 5: $(head -2 "$T/err" | tr '\n' '|')"
	fi
	no_etc "pull ${flags:+$flags }of data/evil" "$d"
	if [ "$rc" -eq 0 ]; then
		[ -L "$d/evil" ] && [ "$(readlink "$d/evil")" = /etc ] &&
			pass "pull ${flags:+$flags }of data/evil: arrived as the symlink /etc" ||
			fail "pull ${flags:+$flags }of data/evil: exit 0 but not the symlink"
	fi
done
mkdir -p "$T/ev2"
expect_rc 5 "pull of data/evil/passwd (through the symlink)" as alice "$HOST:data/evil/passwd" "$T/ev2/"
# A trailing slash does not make the daemon follow the link: it is sent as
# the link (0) or refused (5).
as alice -r "$HOST:data/evil/" "$T/ev2/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] && pass "pull -r of data/evil/ (trailing slash): exit $rc" ||
	fail "pull -r of data/evil/: exit $rc, wanted 0 or 5"
[ ! -e "$T/ev2/evil" ] || [ -L "$T/ev2/evil" ] && pass "pull -r of data/evil/: at most the link arrived" ||
	fail "pull -r of data/evil/: $T/ev2/evil is $(stat -c %F "$T/ev2/evil")"
no_etc "pulls through data/evil" "$T/ev2"
mkdir -p "$T/ev3"
as alice "$HOST:data/evilfile" "$T/ev3/" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] && pass "pull of data/evilfile -> /etc/passwd: exit $rc" ||
	fail "pull of data/evilfile: exit $rc"
no_etc "pull of data/evilfile" "$T/ev3"
mkdir -p "$T/ev4"
expect_rc 0 "pull -r of the whole module holding the /etc links" as alice -r "$HOST:data" "$T/ev4/"
n=$(find "$T/ev4" -type f | wc -l)
want=$(find "$T/mod" -type f | wc -l)
[ "$n" -eq "$want" ] && [ -L "$T/ev4/data/evil" ] && [ -L "$T/ev4/data/evilfile" ] &&
	pass "pull -r of the module: $n files as in the module, links kept as links" ||
	fail "pull -r of the module: $n files (module has $want), evil is $(stat -c %F "$T/ev4/data/evil" 2>&1)"

finish
