#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Modes of new files and directories (issue 15 item 6), push and pull:
#   - without -p a new entry gets the source's permission bits less the
#     receiver's umask, as cp -r gives them (the daemon's umask for a push,
#     the client's for a pull), never a set-id bit: with umask 022 and 077;
#     a 0700 directory stays 0700, a 0555 one ends 0555 (its contents still
#     arrive), a file replaced keeps its mode;
#   - with -p the exact modes (set-id bits dropped: the module keeps none).
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[data]\npath = %s\nallow = client\n' "$T/mod" | as_root_modules >>"$T/d.conf"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

# The tree: directories 0700, 0750, 0555 (with contents), files 0600, 0644,
# 0640 and a set-uid 4755 one.
S=$T/src/tree
mkdir -p "$S/d700/in" "$S/d750" "$S/d555"
for f in f600 f644 f640 suid d700/a d700/in/b d750/c d555/e; do
	head -c 1000 /dev/urandom >"$S/$f"
done
chmod 0600 "$S/f600" "$S/d700/a"
chmod 0644 "$S/f644" "$S/d750/c" "$S/d555/e" "$S/d700/in/b"
chmod 0640 "$S/f640"
chmod 4755 "$S/suid"
chmod 0700 "$S/d700" "$S/d700/in"
chmod 0750 "$S/d750"
chmod 0555 "$S/d555"
chmod 0755 "$S"

# modes DIR: "relative-path mode" lines, sorted.
modes() { (cd "$1" && find . -printf './%P %m\n' | sort); }

# expect_modes DESC GOT WANT-DIR-OR-FILE
expect_modes() {
	local desc=$1 got=$2 want=$3
	if modes "$got" >"$T/m.got" && diff -u "$want" "$T/m.got" >"$T/m.diff"; then
		pass "$desc: $(wc -l <"$want") modes as expected"
	else
		fail "$desc: modes differ: $(grep '^[-+][^-+]' "$T/m.diff" | head -8 | tr '\n' '|')"
	fi
	cmp_tree "$desc" "$got"
}

cmp_tree() {
	if diff -r "$S" "$2" >/dev/null 2>&1; then
		pass "$1: contents equal"
	else
		fail "$1: contents differ"
	fi
}

# What cp -r gives under umask $1, except that set-id bits are never kept
# (as rdmacp promises; cp keeps them in some versions).
plain_modes() {
	(cd "$S" && find . -printf './%P %m\n' | sort) |
		while read -r p m; do
			printf '%s %o\n' "$p" $((0$m & 0777 & ~0$1))
		done
}

exact_modes() {
	(cd "$S" && find . -printf './%P %m\n' | sort) |
		while read -r p m; do
			printf '%s %o\n' "$p" $((0$m & 0777))
		done
}

# Check cp itself agrees with plain_modes (set-id bits aside).
(umask 077 && cp -r "$S" "$T/cp077")
plain_modes 077 >"$T/want"
modes "$T/cp077" | grep -v '^./suid ' >"$T/cp.m"
grep -v '^./suid ' "$T/want" | diff -q - "$T/cp.m" >/dev/null ||
	fail "cp -r under umask 077 gives other modes than this test expects: $(diff "$T/want" "$T/cp.m" | head -4 | tr '\n' '|')"
rm -rf "$T/cp077"

for U in 022 077; do
	echo "--- umask $U (daemon and client)"
	umask "$U"
	start_daemon "$T/d.conf" "$T/d.log" "$PORT"
	umask 022
	DPID=$DAEMON_PID
	plain_modes "$U" >"$T/want.plain"
	exact_modes >"$T/want.exact"

	# Push: the daemon's umask.
	expect_rc 0 "push -r, umask $U" "${CLIENT[@]}" -r "$S" "$HOST:data/push$U/"
	expect_modes "push -r, umask $U" "$T/mod/push$U/tree" "$T/want.plain"
	expect_rc 0 "push -r -p, umask $U" "${CLIENT[@]}" -r -p "$S" "$HOST:data/pushp$U/"
	expect_modes "push -r -p, umask $U" "$T/mod/pushp$U/tree" "$T/want.exact"

	# Pull: the client's umask.
	mkdir -p "$T/pull$U" "$T/pullp$U"
	cp -a "$S" "$T/mod/src$U"
	expect_rc 0 "pull -r, umask $U" bash -c 'umask '"$U"' && exec "$@"' _ "${CLIENT[@]}" -r \
		"$HOST:data/src$U" "$T/pull$U/"
	expect_modes "pull -r, umask $U" "$T/pull$U/src$U" "$T/want.plain"
	expect_rc 0 "pull -r -p, umask $U" bash -c 'umask '"$U"' && exec "$@"' _ "${CLIENT[@]}" -r -p \
		"$HOST:data/src$U" "$T/pullp$U/"
	expect_modes "pull -r -p, umask $U" "$T/pullp$U/src$U" "$T/want.exact"

	stop_daemon "$DPID"
done

# A file replaced without -p keeps its mode; a directory there keeps its own.
umask 022
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
DPID=$DAEMON_PID
mkdir -p "$T/mod/again/tree/d700"
chmod 0751 "$T/mod/again/tree/d700"
head -c 10 /dev/zero >"$T/mod/again/tree/f644"
chmod 0604 "$T/mod/again/tree/f644"
expect_rc 0 "push -r over existing entries" "${CLIENT[@]}" -r "$S" "$HOST:data/again/"
m=$(stat -c %a "$T/mod/again/tree/f644")
[ "$m" = 604 ] && pass "a replaced file keeps its mode (604)" || fail "a replaced file got $m, wanted 604"
m=$(stat -c %a "$T/mod/again/tree/d700")
[ "$m" = 751 ] && pass "an existing directory keeps its mode (751)" || fail "an existing directory got $m, wanted 751"
cmp -s "$S/f644" "$T/mod/again/tree/f644" && pass "the replaced file has the new contents" ||
	fail "the replaced file's contents differ"

# Into a directory with a default ACL (u::rwx g::r-x o::---), which would make
# new files 0640 and 0600 where the umask gives 0644: the files still end with
# the modes above. (A temp file made with its final mode, where nothing but the
# umask shapes it, must not take this directory's word for it.)
mkdir -p "$T/mod/acl"
if python3 - "$T/mod/acl" <<'EOF'; then
import os, struct, sys
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, 0xffffffff) for t, p in
    ((1, 7), (4, 5), (0x20, 0)))
os.setxattr(sys.argv[1], "system.posix_acl_default", acl)
EOF
	expect_rc 0 "push -r into a directory with a default ACL" "${CLIENT[@]}" -r "$S/f644" \
		"$S/f640" "$S/f600" "$HOST:data/acl/"
	m=$(cd "$T/mod/acl" && stat -c '%n %a' f644 f640 f600 | tr '\n' ' ')
	[ "$m" = "f644 644 f640 640 f600 600 " ] &&
		pass "under a default ACL the files still get their modes ($m)" ||
		fail "under a default ACL: $m, wanted f644 644 f640 640 f600 600"
else
	echo "not checked: the file system of $T/mod keeps no default ACL"
fi
stop_daemon "$DPID"

finish
