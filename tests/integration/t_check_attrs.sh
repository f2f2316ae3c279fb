#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp check -X, -A and -H (issue 32 item 3) against a real daemon:
#   1. a tree with user.* attributes on files and a directory, ACLs (access and
#      default) and hard links, copied with -r -H -X -A: check -X -A -H says
#      identical, push and pull side
#   2. at the destination: an attribute's value changed, one removed, an ACL
#      changed, a hard link broken (a copy in its place), one added (two
#      equal files made one): each reported with exactly its attribute
#      (xattrs, acl, links N -> M), and only under the option that names it;
#      without them nothing is seen (exit 0); --json, pull side, the same
#   3. a client without the capability: its LIST with attribute flags is
#      ERROR PROTOCOL (rawpeer); with it, LIST_ATTRS follows FILES
#   4. an old daemon (RDMACP_TEST_CAPS_OFF of the listing-attributes
#      capability): -X, -A and -H each refused before LIST, exit 12, "too old"
# Attributes and ACLs are written with python3 (os.setxattr, raw ACLs).
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v jq >/dev/null || skip "jq is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

# The file system of $T must keep user.* attributes and ACLs, else this tests nothing.
touch "$T/probe"
python3 - "$T/probe" <<'EOF' || skip "the file system of $T keeps no user attributes or ACLs"
import os, struct, sys
os.setxattr(sys.argv[1], "user.probe", b"1")
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in
    ((1, 6, 0xffffffff), (4, 4, 0xffffffff), (0x20, 4, 0xffffffff)))
os.setxattr(sys.argv[1], "system.posix_acl_access", acl)
EOF

setup_standard ""

# setacl PATH NAME MODE...: a raw ACL (user obj, group obj, other, and with a
# fourth value a named user 1234 and the mask) as attribute NAME.
setacl() {
	python3 - "$@" <<'EOF'
import os, struct, sys
path, name, *perms = sys.argv[1:]
U = 0xffffffff
ents = [(1, int(perms[0]), U), (4, int(perms[1]), U), (0x20, int(perms[2]), U)]
if len(perms) > 3:
    ents = [ents[0], (2, int(perms[3]), 1234), ents[1], (0x10, 7, U), ents[2]]
os.setxattr(path, name, struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in ents))
EOF
}

src="$T/src/t"
mkdir -p "$src/d"
echo one >"$src/f1"
echo two >"$src/f2"
echo dee >"$src/d/g"
echo linked >"$src/h1"
ln "$src/h1" "$src/h2"
echo same >"$src/s"
cp -p "$src/s" "$src/t"
ln -s f1 "$src/l"
python3 - "$src" <<'EOF' || die "could not set attributes"
import os, sys
r = sys.argv[1]
os.setxattr(os.path.join(r, "f1"), "user.color", b"blue")
os.setxattr(os.path.join(r, "f1"), "user.bin", b"\0\1\xff")
os.setxattr(os.path.join(r, "d"), "user.d", b"on a directory")
os.setxattr(os.path.join(r, "h1"), "user.h", b"both names")
EOF
setacl "$src/d/g" system.posix_acl_access 6 4 4 6 || die "acl on d/g"
setacl "$src/d" system.posix_acl_default 7 5 5 5 || die "default acl on d"
# The same times everywhere, so only what is changed below differs.
find "$src" -exec touch -h -d '2024-01-01 00:00:00 UTC' {} +

check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}
lines() {
	sort "$T/out" | tr -s ' ' | paste -sd'|'
}
jq_events() {
	jq -r 'select(.event == "check") | [.difference, .name, ((.attributes // []) | join(","))] | join(" ")' \
		"$T/out" | sort | paste -sd'|'
}

expect_rc 0 "push with -r -p -H -X -A" "${CLIENT[@]}" -q -r -p -H -X -A "$src" "$HOST:data/"
dst="$T/mod/t"

# ---- 1. equal trees ---------------------------------------------------------
expect_rc 0 "check -X -A -H: identical (push side)" \
	"${CLIENT[@]}" check -r -p -X -A -H "$src" "$HOST:data/t"
check_eq "no lines" "$(wc -l <"$T/out")" 0
grep -q identical "$T/err" && pass "says identical" || fail "not identical: $(cat "$T/err")"
expect_rc 0 "check -X -A -H --level checksum --json: identical (pull side)" \
	"${CLIENT[@]}" check -r -X -A -H --json --level checksum "$HOST:data/t" "$src"
check_eq "json identical" \
	"$(jq -r 'select(.event == "summary") | [.identical, .differs, .errors] | join(" ")' "$T/out")" \
	"true 0 0"

# ---- 2. each difference -----------------------------------------------------
python3 - "$dst" <<'EOF' || die "could not change attributes"
import os, sys
r = sys.argv[1]
os.setxattr(os.path.join(r, "f1"), "user.color", b"red")   # a value changed
os.removexattr(os.path.join(r, "d"), "user.d")            # one missing
EOF
setacl "$dst/d/g" system.posix_acl_access 6 4 4 4 || die "change the acl" # an ACL changed
cp -a "$dst/h2" "$dst/h2.new" && mv "$dst/h2.new" "$dst/h2"              # a link broken
ln -f "$dst/s" "$dst/t"                                                   # a link added
touch -h -d '2024-01-01 00:00:00 UTC' "$dst/d" "$dst/h2"

expect_rc 0 "without -X -A -H nothing of it is seen" \
	"${CLIENT[@]}" check -r "$src" "$HOST:data/t"
expect_rc 15 "-X -A -H: each difference (push side)" \
	"${CLIENT[@]}" check -r -X -A -H "$src" "$HOST:data/t"
check_eq "lines" "$(lines)" \
	"differs d (xattrs)|differs d/g (acl)|differs f1 (xattrs)|differs h1 (links 2 -> 1)|differs h2 (links 2 -> 1)|differs s (links 1 -> 2)|differs t (links 1 -> 2)"
expect_rc 15 "-X alone: the attributes only" "${CLIENT[@]}" check -r -X "$src" "$HOST:data/t"
check_eq "-X lines" "$(lines)" "differs d (xattrs)|differs f1 (xattrs)"
expect_rc 15 "-A alone: the ACL only" "${CLIENT[@]}" check -r -A "$src" "$HOST:data/t"
check_eq "-A lines" "$(lines)" "differs d/g (acl)"
expect_rc 15 "-H alone: the links only (checksum level)" \
	"${CLIENT[@]}" check -r -H --level checksum "$src" "$HOST:data/t"
check_eq "-H lines" "$(lines)" \
	"differs h1 (links 2 -> 1)|differs h2 (links 2 -> 1)|differs s (links 1 -> 2)|differs t (links 1 -> 2)"
expect_rc 15 "pull side --json: the daemon's tree is the source" \
	"${CLIENT[@]}" check -r -X -A -H --json "$HOST:data/t" "$src"
check_eq "events" "$(jq_events)" \
	"differs d xattrs|differs d/g acl|differs f1 xattrs|differs h1 links|differs h2 links|differs s links|differs t links"
check_eq "links values, source first" \
	"$(jq -r 'select(.name == "h1" or .name == "s") | "\(.name)=\(.values.links.source)/\(.values.links.destination)"' "$T/out" | sort | paste -sd' ')" \
	"h1=1/2 s=2/1"
# Without -r: the top level and its links still compared.
expect_rc 15 "without -r: the top level" "${CLIENT[@]}" check -X -H "$src" "$HOST:data/t"
check_eq "top-level lines" "$(lines)" \
	"differs d (xattrs)|differs f1 (xattrs)|differs h1 (links 2 -> 1)|differs h2 (links 2 -> 1)|differs s (links 1 -> 2)|differs t (links 1 -> 2)"

# ---- 3. a client without the capability ---------------------------------------
rawpeer_for "$PORT"
# LIST flags 0x1d (recursive, xattrs, acls, hard links), path "t" in module data
rawpeer_rc 0 "LIST with attributes from a client without 0x200000000: ERROR PROTOCOL" \
	hello caps=0x47f frame LIST 0000001d0006646174612f74 wait ERROR \
	expect "ERROR PROTOCOL" expect "listing-attributes" wait closed
rawpeer_rc 0 "the same LIST from a client with it: FILES, LIST_ATTRS, END" \
	hello caps=0x20000047f frame LIST 0000001d0006646174612f74 wait END \
	expect-seen LIST_ATTRS

# ---- 4. a daemon without the capability --------------------------------------
stop_daemon "$DAEMON_PID"
RDMACP_TEST_CAPS_OFF=0x200000000 start_daemon "$T/d.conf" "$T/d2.log" "$PORT"
for opt in -X -A -H; do
	expect_rc 12 "an old daemon: check $opt refused" \
		"${CLIENT[@]}" check -r "$opt" "$src" "$HOST:data/t"
	grep -q "too old for check $opt" "$T/err" && pass "$opt: says too old" ||
		fail "$opt: no 'too old': $(cat "$T/err")"
done
expect_rc 0 "an old daemon: check --owner -p still works" \
	"${CLIENT[@]}" check -r -p --owner "$src" "$HOST:data/t"
grep -q "with attributes" "$T/d2.log" && fail "the old daemon was sent attribute flags" ||
	pass "no LIST with attributes sent"

finish
