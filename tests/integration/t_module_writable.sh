#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A module directory its user can't write: said before the first push, and
# the push's error says where and who.
#   1. --check warns about a module (not 'read only') whose directory its
#      user (uid nobody) can't write, naming the module, the user and the
#      directory, and exits 0; not about a read-only one, nor a writable one;
#   2. a push into it is refused at once (exit 5), and the client's error
#      names the module, the directory, the user and the daemon's side;
#   3. a push -r whose files land in a subdirectory the user can't write:
#      each file's error names the daemon's side, the module and the user
#      (not only "create temp file: Permission denied").
# Needs root (the daemon's sessions switch to nobody).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root: sessions switch to the user nobody"
getent passwd nobody >/dev/null || skip "no user nobody"
NOBODY_UID=$(id -u nobody)
HOST=127.0.0.1

PORT=$(free_port)
make_certs "$T/certs"
# The sessions run as nobody: it must reach the module directories.
chmod 0755 "$T"
mkdir -p "$T/locked" "$T/rolocked" "$T/open/sub" "$T/src/tree/sub"
chown nobody "$T/open"
echo one >"$T/src/f"
echo two >"$T/src/tree/sub/g"
echo three >"$T/src/tree/h"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
for m in locked rolocked open; do
	printf '\n[%s]\npath = %s\nallow = client\nuid = nobody\n' "$m" "$T/$m"
done >>"$T/d.conf"
sed -i "/^path = ${T//\//\\/}\/rolocked$/a read only = yes" "$T/d.conf"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

# ---- 1. --check ----------------------------------------------------------------------
expect_rc 0 "--check with an unwritable module directory" "$RDMACPD" --check --config "$T/d.conf"
grep -q "module \[locked\]: its user 'nobody' (uid $NOBODY_UID, gid [0-9]*) cannot write in $T/locked (Permission denied)" \
	"$T/err" && pass "--check names the module, its user and its directory" ||
	fail "--check said: $(cat "$T/err")"
grep -q "module \[rolocked\]: its user" "$T/err" && fail "--check warns about a read-only module" ||
	pass "no warning for the read-only module"
grep -q "module \[open\]: its user" "$T/err" && fail "--check warns about a writable module" ||
	pass "no warning for the writable module"

# ---- 2. a push into it ------------------------------------------------------------------
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
expect_rc 5 "push into the unwritable module" "${CLIENT[@]}" "$T/src/f" "$HOST:locked/"
e=$(cat "$T/err")
case $e in
*"cannot write in directory 'locked'"*"daemon side: module 'locked' ($T/locked), user 'nobody' (uid $NOBODY_UID"*)
	pass "the error names the module, the directory, the user and the daemon's side" ;;
*) fail "the error: $e" ;;
esac
[ -z "$(ls -A "$T/locked")" ] && pass "nothing written" || fail "written: $(ls -A "$T/locked")"
expect_rc 0 "push into the writable module" "${CLIENT[@]}" "$T/src/f" "$HOST:open/"

# ---- 3. files refused deeper down -------------------------------------------------------
# open/tree/sub exists and belongs to root: the files for it fail, the others land.
mkdir -p "$T/open/tree/sub"
chown nobody "$T/open/tree"
expect_rc 9 "push -r with a subdirectory the user can't write" "${CLIENT[@]}" -r "$T/src/tree" "$HOST:open/"
grep -q "create temp file: Permission denied (daemon side: module 'open' ($T/open), user 'nobody'" \
	"$T/err" && pass "the file's error names the daemon's side, the module and the user" ||
	fail "the error: $(cat "$T/err")"
cmp -s "$T/src/tree/h" "$T/open/tree/h" && pass "the other file landed" || fail "open/tree/h missing"

stop_daemon "$DAEMON_PID"
[ "$FAILS" -eq 0 ] || exit 1
