#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A re-run with -X/-A where only attributes changed (issue 32): itemized as
# rsync -i does, counted updated, brought in line (push and pull):
#   1. push -a -X -A of f1 (user.color), f2 (user.keep), f3 (an access
#      ACL), f4 (user.gone) and f5 (none), then, with sizes and times as
#      they were: f1's attribute changed, f3's ACL changed, f4's attribute
#      removed, f5 given one; a re-run -a -X -A --skip quick -v: exit 0,
#      ".f........x" for f1, f4 and f5, ".f.......a." for f3, no line for
#      f2; --json: "updated" 4, "skipped" the rest, no bytes; the daemon's
#      done line says 4 updated; the destination's attributes equal the
#      source's, f2's untouched;
#   2. a third run: nothing itemized, 0 updated;
#   3. pull: the destination's f1 changed back by hand; pull -a -X -A
#      --skip quick -v of the module brings it in line and says
#      ".f........x f1";
#   4. the capability is its own (0x800000000000): a client without it
#      (RDMACP_TEST_CAPS_OFF) brings a changed attribute in line with no
#      item line and 0 updated; one without ASSEMBLE SEED's (0x200000000000)
#      still itemizes it;
#   5. kept directories (PROTO_CAP_DIR_ITEMS, 0x1000000000000): d1 (user.color), d2
#      (user.keep), d3 (an access ACL), d4 (user.gone), d5 (none) copied, then d1's
#      attribute changed, d3's ACL changed, d4's removed, d5 given one, times as they
#      were: a re-run -v says ".d........x" for d1, d4, d5, ".d.......a." for d3, no
#      line for d2, --json "updated" 4 (the daemon's done line too), attributes in line;
#      a third run: 0 updated; pull: a destination directory's attribute changed by
#      hand is itemized and brought in line; the bit masked on the client, then on the
#      daemon: the change brought in line with no item line and 0 updated;
#   6. a directory the sender can read no attributes of (over 1 MiB of them, on a
#      tmpfs in a mount namespace of the client's): the run ends (the failure is the
#      sender's), that directory's attributes are not itemized and it keeps its own,
#      the others are brought in line and itemized.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
command -v python3 >/dev/null || skip "python3 not installed"
touch "$T/probe"
python3 - "$T/probe" <<'EOF' || skip "the file system of $T does not keep user attributes or ACLs"
import os, struct, sys
os.setxattr(sys.argv[1], "user.probe", b"1")
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in
    ((1, 6, 0xffffffff), (4, 4, 0xffffffff), (0x20, 4, 0xffffffff)))
os.setxattr(sys.argv[1], "system.posix_acl_access", acl)
EOF
setup_standard
HOST=127.0.0.1
S=$T/src/tree
D=$T/mod/tree
mkdir -p "$S"
for i in 1 2 3 4 5; do head -c $((1000 * i)) /dev/urandom >"$S/f$i"; done

# xa CMD ARGS: the source's attributes set (set PATH NAME VALUE, del PATH NAME, acl PATH GROUPPERM).
xa() {
	python3 - "$@" <<'EOF'
import os, struct, sys
U = 0xffffffff
op, path = sys.argv[1], sys.argv[2]
st = os.stat(path)
if op == "set":
    os.setxattr(path, sys.argv[3], sys.argv[4].encode())
elif op == "del":
    os.removexattr(path, sys.argv[3])
elif op == "acl":
    g = int(sys.argv[3])
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in
        ((1, 6, U), (2, g, 1234), (4, 4, U), (0x10, 6, U), (0x20, 4, U)))
    os.setxattr(path, "system.posix_acl_access", acl)
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as it was: only attributes change
EOF
}
# attrs DIR: "name attribute hex" for each file's user.* and ACL attributes.
attrs() {
	python3 - "$1" <<'EOF'
import os, sys
for n in sorted(os.listdir(sys.argv[1])):
    p = os.path.join(sys.argv[1], n)
    for a in sorted(os.listxattr(p)):
        if a.startswith(("user.", "system.posix_acl")):
            print(n, a, os.getxattr(p, a).hex())
EOF
}
xa set "$S/f1" user.color blue
xa set "$S/f2" user.keep yes
xa acl "$S/f3" 4
xa set "$S/f4" user.gone soon

# ---- 1. attributes alone changed ---------------------------------------------------------
expect_rc 0 "push -a -X -A" "${CLIENT[@]}" -q -a -X -A "$S" "$HOST:data/"
[ "$(attrs "$S")" = "$(attrs "$D")" ] && pass "first copy: attributes equal" ||
	fail "first copy: $(diff <(attrs "$S") <(attrs "$D") | tr '\n' '|')"
f2_ctime=$(stat -c %Z "$D/f2")
sleep 1
xa set "$S/f1" user.color red
xa acl "$S/f3" 6
xa del "$S/f4" user.gone
xa set "$S/f5" user.new hello
expect_rc 0 "re-run -a -X -A --skip quick -v" "${CLIENT[@]}" -a -X -A --skip quick -v "$S" "$HOST:data/"
cat "$T/out" "$T/err" >"$T/v.out"
for f in f1 f4 f5; do
	grep -q "^\.f\.\.\.\.\.\.\.\.x .*$f\$" "$T/v.out" && pass "-v: $f itemized .f........x" ||
		fail "-v: no .f........x line for $f: $(cat "$T/v.out")"
done
grep -q "^\.f\.\.\.\.\.\.\.a\. .*f3\$" "$T/v.out" && pass "-v: f3 itemized .f.......a." ||
	fail "-v: no .f.......a. line for f3: $(cat "$T/v.out")"
! grep -q "f2\$" "$T/v.out" && pass "-v: f2 (unchanged) not listed" || fail "-v lists f2: $(cat "$T/v.out")"
[ "$(attrs "$S")" = "$(attrs "$D")" ] && pass "re-run: attributes brought in line" ||
	fail "re-run: $(diff <(attrs "$S") <(attrs "$D") | tr '\n' '|')"
[ "$(stat -c %Z "$D/f2")" = "$f2_ctime" ] && pass "re-run: f2 untouched (its ctime)" ||
	fail "re-run: f2 was changed"
daemon_settled "$T/d.log"
grep ' done: ' "$T/d.log" | tail -1 | grep -q ", 4 updated, " && pass "daemon: 4 updated" ||
	fail "daemon: $(grep ' done: ' "$T/d.log" | tail -1)"

# ---- 2. nothing changed ---------------------------------------------------------------------
expect_rc 0 "a third run --json" "${CLIENT[@]}" --json -a -X -A --skip quick "$S" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | [.updated, .bytes]' "$T/out")
[ "$s" = "[0,0]" ] && pass "third run: 0 updated, 0 bytes" || fail "third run: $s"

# ---- 1b. the counts in --json ----------------------------------------------------------------
xa set "$S/f1" user.color green
xa acl "$S/f3" 4
xa set "$S/f4" user.back again
xa del "$S/f5" user.new
expect_rc 0 "re-run --json" "${CLIENT[@]}" --json -a -X -A --skip quick "$S" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | [.updated, .bytes]' "$T/out")
[ "$s" = "[4,0]" ] && pass "--json: 4 updated, 0 bytes" || fail "--json summary: $s"
[ "$(attrs "$S")" = "$(attrs "$D")" ] && pass "--json run: attributes in line" ||
	fail "--json run: $(diff <(attrs "$S") <(attrs "$D") | tr '\n' '|')"

# ---- 3. pull ---------------------------------------------------------------------------------
P=$T/pulled
mkdir -p "$P"
expect_rc 0 "pull -a -X -A" "${CLIENT[@]}" -q -a -X -A "$HOST:data/tree" "$P/"
xa set "$P/tree/f1" user.color stale
expect_rc 0 "pull again --skip quick -v" "${CLIENT[@]}" -a -X -A --skip quick -v "$HOST:data/tree" "$P/"
cat "$T/out" "$T/err" >"$T/v.out"
grep -q "^\.f\.\.\.\.\.\.\.\.x .*f1\$" "$T/v.out" && pass "pull -v: f1 itemized .f........x" ||
	fail "pull -v: $(cat "$T/v.out")"
[ "$(attrs "$D")" = "$(attrs "$P/tree")" ] && pass "pull: attributes brought in line" ||
	fail "pull: $(diff <(attrs "$D") <(attrs "$P/tree") | tr '\n' '|')"

# ---- 4. the kept-items capability alone --------------------------------------------------------
xa set "$S/f1" user.color cyan
RDMACP_TEST_CAPS_OFF=0x800000000000 expect_rc 0 "without kept items: re-run --json" \
	"${CLIENT[@]}" --json -a -X -A --skip quick "$S" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | [.updated, .bytes]' "$T/out")
[ "$s" = "[0,0]" ] && pass "without kept items: 0 updated, 0 bytes" || fail "without: $s"
[ "$(attrs "$S")" = "$(attrs "$D")" ] && pass "without kept items: attributes in line" ||
	fail "without kept items: $(diff <(attrs "$S") <(attrs "$D") | tr '\n' '|')"
xa set "$S/f1" user.color magenta
RDMACP_TEST_CAPS_OFF=0x200000000000 expect_rc 0 "without seeded parts: re-run --json" \
	"${CLIENT[@]}" --json -a -X -A --skip quick "$S" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | [.updated, .bytes]' "$T/out")
[ "$s" = "[1,0]" ] && pass "without seeded parts: 1 updated" || fail "without seeded parts: $s"
# ---- 5. kept directories ----------------------------------------------------------------------
S2=$T/src/dtree
D2=$T/mod/dtree
for i in 1 2 3 4 5; do mkdir -p "$S2/d$i"; done
xa set "$S2/d1" user.color blue
xa set "$S2/d2" user.keep yes
xa acl "$S2/d3" 4
xa set "$S2/d4" user.gone soon
touch -d @1000000000 "$S2"/d*
expect_rc 0 "dirs: push -a -X -A" "${CLIENT[@]}" -q -a -X -A "$S2" "$HOST:data/"
[ "$(attrs "$S2")" = "$(attrs "$D2")" ] && pass "dirs: first copy: attributes equal" ||
	fail "dirs: first copy: $(diff <(attrs "$S2") <(attrs "$D2") | tr '\n' '|')"
xa set "$S2/d1" user.color red
xa acl "$S2/d3" 6
xa del "$S2/d4" user.gone
xa set "$S2/d5" user.new hello
expect_rc 0 "dirs: re-run -a -X -A -v" "${CLIENT[@]}" -a -X -A -v "$S2" "$HOST:data/"
cat "$T/out" "$T/err" >"$T/v.out"
for d in d1 d4 d5; do
	grep -q "^\.d\.\.\.\.\.\.\.\.x .*$d/\?\$" "$T/v.out" && pass "dirs -v: $d itemized .d........x" ||
		fail "dirs -v: no .d........x line for $d: $(cat "$T/v.out")"
done
grep -q "^\.d\.\.\.\.\.\.\.a\. .*d3/\?\$" "$T/v.out" && pass "dirs -v: d3 itemized .d.......a." ||
	fail "dirs -v: no .d.......a. line for d3: $(cat "$T/v.out")"
! grep -q "d2/\?\$" "$T/v.out" && pass "dirs -v: d2 (unchanged) not listed" ||
	fail "dirs -v lists d2: $(cat "$T/v.out")"
[ "$(attrs "$S2")" = "$(attrs "$D2")" ] && pass "dirs: attributes brought in line" ||
	fail "dirs: $(diff <(attrs "$S2") <(attrs "$D2") | tr '\n' '|')"
daemon_settled "$T/d.log"
grep ' done: ' "$T/d.log" | tail -1 | grep -q ", 4 updated, " && pass "dirs: daemon: 4 updated" ||
	fail "dirs: daemon: $(grep ' done: ' "$T/d.log" | tail -1)"
xa set "$S2/d1" user.color green
xa del "$S2/d5" user.new
expect_rc 0 "dirs: re-run --json" "${CLIENT[@]}" --json -a -X -A "$S2" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | .updated' "$T/out")
[ "$s" = "2" ] && pass "dirs --json: 2 updated" || fail "dirs --json: $s"
expect_rc 0 "dirs: a third run --json -v" "${CLIENT[@]}" --json -a -X -A "$S2" "$HOST:data/"
s=$(jq -c 'select(.event == "summary") | .updated' "$T/out")
[ "$s" = "0" ] && pass "dirs: third run: 0 updated" || fail "dirs: third run: $s"
P2=$T/pulled2
mkdir -p "$P2"
expect_rc 0 "dirs: pull -a -X -A" "${CLIENT[@]}" -q -a -X -A "$HOST:data/dtree" "$P2/"
xa set "$P2/dtree/d1" user.color stale
expect_rc 0 "dirs: pull again -v" "${CLIENT[@]}" -a -X -A -v "$HOST:data/dtree" "$P2/"
cat "$T/out" "$T/err" >"$T/v.out"
grep -q "^\.d\.\.\.\.\.\.\.\.x .*d1/\?\$" "$T/v.out" && pass "dirs pull -v: d1 itemized .d........x" ||
	fail "dirs pull -v: $(cat "$T/v.out")"
[ "$(attrs "$D2")" = "$(attrs "$P2/dtree")" ] && pass "dirs pull: attributes in line" ||
	fail "dirs pull: $(diff <(attrs "$D2") <(attrs "$P2/dtree") | tr '\n' '|')"
# dirs_masked WHO: with bit 48 masked (RDMACP_TEST_CAPS_OFF) on one side, today's output.
dirs_masked() {
	local who=$1
	shift
	xa set "$S2/d1" user.color "$who"
	expect_rc 0 "dirs, bit 48 off on the $who: re-run --json -v" "$@" --json -a -X -A -v \
		"$S2" "$HOST:data/"
	s=$(jq -c 'select(.event == "summary") | .updated' "$T/out")
	[ "$s" = "0" ] && pass "dirs, bit 48 off on the $who: 0 updated" || fail "$who: $s"
	! grep -q '"d1' "$T/out" && pass "dirs, bit 48 off on the $who: d1 not itemized" ||
		fail "dirs, bit 48 off on the $who: $(grep d1 "$T/out")"
	[ "$(attrs "$S2")" = "$(attrs "$D2")" ] && pass "dirs, bit 48 off on the $who: in line" ||
		fail "$who: $(diff <(attrs "$S2") <(attrs "$D2") | tr '\n' '|')"
}
RDMACP_TEST_CAPS_OFF=0x1000000000000 dirs_masked client "${CLIENT[@]}"
PORT2=$(free_port)
sed "s/^listen = .*/listen = 127.0.0.1:$PORT2/" "$T/d.conf" >"$T/d2.conf"
RDMACP_TEST_CAPS_OFF=0x1000000000000 start_daemon "$T/d2.conf" "$T/d2.log" "$PORT2"
dirs_masked daemon "${CLIENT[@]}" -P "$PORT2"

# ---- 6. a directory whose attributes cannot be read -------------------------------------------
if unshare -m true 2>/dev/null && [ "$(id -u)" = 0 ]; then
	M=$T/tmpfs
	mkdir -p "$M" "$D2/u"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.here", b"1")' "$D2/u"
	xa set "$S2/d1" user.color unread
	# Over 1 MiB of attributes (one XATTRS frame): the sender reads none of u's.
	OUT=$T/out ERR=$T/err unshare -m bash -c '
		set -e
		mount -t tmpfs none "$1"
		cp -a "$2" "$1/"
		mkdir "$1/dtree/u"
		python3 -c "import os, sys
for i in range(17): os.setxattr(sys.argv[1], \"user.big%d\" % i, b\"x\" * 65536)" "$1/dtree/u"
		shift 2
		exec timeout 60 "$@" -a -X -A -v "$0/dtree" "127.0.0.1:data/" >"$OUT" 2>"$ERR"
	' "$M" "$M" "$S2" "${CLIENT[@]}"
	rc=$?
	cat "$T/out" "$T/err" >"$T/v.out"
	[ $rc != 0 ] && [ $rc != 124 ] && pass "unread: the run ended, a failure (rc $rc)" ||
		fail "unread: rc $rc: $(cat "$T/v.out")"
	grep -q "u.*extended attributes over" "$T/v.out" && pass "unread: the sender says why" ||
		fail "unread: $(cat "$T/v.out")"
	! grep -q "^\.d.*[xa] .*u/\?\$" "$T/v.out" && pass "unread: u's attributes not itemized" ||
		fail "unread: u's attributes itemized: $(cat "$T/v.out")"
	grep -q "^\.d\.\.\.\.\.\.\.\.x .*d1/\?\$" "$T/v.out" && pass "unread: d1 itemized" ||
		fail "unread: d1: $(cat "$T/v.out")"
	[ "$(python3 -c 'import os, sys; print(sorted(os.listxattr(sys.argv[1])))' "$D2/u")" = \
		"['user.here']" ] && pass "unread: u keeps its own attributes" ||
		fail "unread: u's: $(python3 -c 'import os, sys; print(os.listxattr(sys.argv[1]))' "$D2/u")"
	! grep -q "XATTRS" "$T/d.log" && pass "unread: the daemon took its XATTRS" ||
		fail "unread: $(grep XATTRS "$T/d.log")"
else
	echo "skip: section 6 needs root and unshare -m (a tmpfs of the client's)"
fi
finish
