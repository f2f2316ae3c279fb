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
#      still itemizes it.
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
finish
