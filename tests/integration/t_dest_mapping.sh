#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One destination twice through the rename mapping (issue 8 item 9). A push
# to "data/target" (a single destination name, not a directory) renames the
# top-level entry to "target". Before the fix the duplicate check ran on the
# names as sent, so FILES a, b and a symlink c were all accepted, all as
# "target": the last one won, whatever the first had committed. Now the
# check runs after the mapping: the second and third get DUPLICATE, only the
# first lands. Without a rename, the same name twice while the first is in
# flight is refused too. Driven by the hostile client rawpeer against a real
# daemon.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"


setup_standard "uid = root" "gid = root"
rawpeer_for "$PORT"


# 1. a, b and a symlink c, all mapped to "target".
printf 'AAAAA' >"$T/a"
rawpeer_rc 0 "FILES a, b, symlink c to 'data/target': b and c refused as DUPLICATE" \
	hello open push data/target lanes ring \
	files 1:a:5 2:b:5 3:c:0:0777:symlink:/etc/passwd \
	ack expect "1=OK" expect "2=DUPLICATE" expect "3=DUPLICATE" \
	chunk 0 1 0 5 "$T/a" expect placed \
	"done" 1 5 "$T/a" result expect "FILE_RESULT 1 OK" \
	end wait END bye close
grep -a 'FILES_ACK' "$T/rp.out" | sed 's/^/    /'
if [ -f "$T/mod/target" ] && [ ! -L "$T/mod/target" ] && cmp -s "$T/a" "$T/mod/target"; then
	pass "only the first landed: target is a's bytes"
else
	fail "mod/target is not a's file: $(ls -l "$T/mod" 2>&1)"
fi
[ "$(find "$T/mod" -mindepth 1 | wc -l)" -eq 1 ] && pass "nothing else in the module" ||
	fail "module holds: $(find "$T/mod" -mindepth 1)"

# 2. Two directories mapped to the same name.
rm -rf "${T:?}/mod/"*
rawpeer_rc 0 "directories a and b to 'data/tdir': b refused as DUPLICATE" \
	hello open push data/tdir recursive lanes ring \
	files 1:a:0:0755:dir 2:b:0:0755:dir \
	ack expect "1=OK" expect "2=DUPLICATE" \
	end wait END bye close

# 3. No rename: the same name twice in one batch, into an existing directory.
# Never two writers on one name: the second is refused while the first is in flight.
rm -rf "${T:?}/mod/"*
mkdir "$T/mod/in"
rawpeer_rc 0 "x twice into 'data/in': the second refused as DUPLICATE" \
	hello open push data/in recursive lanes ring \
	files 1:x:5 2:x:5 \
	ack expect "1=OK" expect "2=DUPLICATE" \
	chunk 0 1 0 5 "$T/a" expect placed \
	"done" 1 5 "$T/a" result expect "FILE_RESULT 1 OK" \
	end wait END bye close
cmp -s "$T/a" "$T/mod/in/x" && pass "only the first landed: in/x is a's bytes" ||
	fail "mod/in/x is not a's file: $(ls -l "$T/mod/in" 2>&1)"

# 4. The real client still copies one file under a new name, and a tree.
echo one >"$T/one"
expect_rc 0 "rdmacp one file to data/renamed" "${CLIENT[@]}" "$T/one" 127.0.0.1:data/renamed
cmp -s "$T/one" "$T/mod/renamed" && pass "renamed file landed" || fail "renamed file missing"
mkdir -p "$T/tree/sub" && echo x >"$T/tree/sub/x" && ln -s x "$T/tree/sub/l"
expect_rc 0 "rdmacp -r tree to data/newtree" "${CLIENT[@]}" -r "$T/tree" 127.0.0.1:data/newtree
[ -f "$T/mod/newtree/sub/x" ] && [ -L "$T/mod/newtree/sub/l" ] && pass "tree landed as newtree" ||
	fail "newtree: $(find "$T/mod" 2>&1)"
finish
