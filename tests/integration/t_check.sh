#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp check against a real daemon, both directions, text and --json (jq):
#   1. a tree pushed with -p, checked at both levels, push and pull: exit 0,
#      no difference lines, the summary says identical
#   2. a file changed with its size and mtime kept (touch -r): the quick
#      level sees nothing (exit 0), the checksum level "differs (content)"
#      (exit 15), in both directions
#   3. missing (only in SRC), extra (only in DST), size, a symlink's target,
#      a type, and with -p a mode: exit 15 with exactly those lines, each
#      --json event with its difference and attributes; pulled the other
#      way round, missing and extra swap
#   3b. --owner: the owner and group of a directory, a file and a symlink, each
#      with both values; with -p also their modes and times (text and --json
#      values, source first); -X, -A and -H are t_check_attrs.sh's
#   4. without -r only the top level is compared; a file against a file
#   5. a write-only module refuses check (it would tell what it holds): exit 5
#   6. a daemon without the check capability (rawserver.py): exit 12; one
#      without owners in its listings, for --owner: exit 12
#   7. a client that did not announce the check capability gets no SUMS: its
#      LIST with the sums flag is ERROR PROTOCOL (rawpeer); and a push with
#      --skip checksum (OPEN flag 0x80) from it is refused the same way
#   8. a hostile daemon (rawserver.py --mode sums): a digest for an id it did
#      not list, for a directory, none for a listed file, a name listed twice,
#      a digest twice: each a protocol error (exit 4), nothing reported as
#      identical
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v jq >/dev/null || skip "jq is not installed"

mkdir -p "$T/drop"
setup_standard "" "[drop]" "path = $T/drop" "allow = client" "write only = yes"
mkdir -p "$T/src/tree/a/deep" "$T/src/tree/b"
for i in $(seq 1 40); do
	head -c $((i * 997 + 1)) /dev/urandom >"$T/src/tree/a/f$i" || die "write f$i"
done
head -c 3000000 /dev/urandom >"$T/src/tree/b/big" || die "write big"
echo deep >"$T/src/tree/a/deep/x"
ln -s a/f1 "$T/src/tree/link"

# check_eq DESC GOT WANT
check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

# lines: the difference lines of the last run, sorted, on one line, each attribute's
# values ("mode 0644 -> 0600") left out; vlines keeps them.
lines() {
	sed 's/ [^ ,()]* -> [^,()]*//g' "$T/out" | sort | tr -s ' ' | paste -sd'|'
}
vlines() {
	sort "$T/out" | tr -s ' ' | paste -sd'|'
}

# jq_events: the --json difference events of the last run, one "kind name attrs" a line, sorted.
jq_events() {
	jq -r 'select(.event == "check") | [.difference, .name, ((.attributes // []) | join(","))] | join(" ")' \
		"$T/out" | sed 's/ $//' | sort | paste -sd'|'
}

expect_rc 0 "push the tree with -p" "${CLIENT[@]}" -q -r -p "$T/src/tree" "$HOST:data/"

# ---- 1. identical -----------------------------------------------------------
for level in quick checksum; do
	expect_rc 0 "push-side check --level $level, identical" \
		"${CLIENT[@]}" check -r -p --level "$level" "$T/src/tree" "$HOST:data/tree"
	check_eq "no lines ($level)" "$(wc -l <"$T/out")" 0
	grep -q 'identical' "$T/err" && pass "says identical" || fail "no 'identical': $(cat "$T/err")"
	expect_rc 0 "pull-side check --level $level --json, identical" \
		"${CLIENT[@]}" check -r -p --json --level "$level" "$HOST:data/tree" "$T/src/tree"
	check_eq "json identical ($level)" \
		"$(jq -r 'select(.event == "summary") | [.identical, .missing, .extra, .differs, .errors, .level] | join(" ")' "$T/out")" \
		"true 0 0 0 0 $level"
	check_eq "json entries ($level)" \
		"$(jq -r 'select(.event == "summary") | .entries' "$T/out")" 46
done

# ---- 2. same size and mtime, other contents ----------------------------------
f="$T/mod/tree/a/f7"
cp -p "$f" "$T/ref"
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 1]))' "$f"
touch -r "$T/ref" "$f"
expect_rc 0 "quick: a changed file with its size and mtime kept is not seen" \
	"${CLIENT[@]}" check -r "$T/src/tree" "$HOST:data/tree"
expect_rc 15 "checksum: the same file differs (push side)" \
	"${CLIENT[@]}" check -r --level checksum "$T/src/tree" "$HOST:data/tree"
check_eq "checksum line" "$(lines)" "differs a/f7 (content)"
expect_rc 15 "checksum: the same file differs (pull side, --json)" \
	"${CLIENT[@]}" check -r --json --level checksum "$HOST:data/tree" "$T/src/tree"
check_eq "checksum event" "$(jq_events)" "differs a/f7 content"
check_eq "summary not identical" \
	"$(jq -r 'select(.event == "summary") | [.identical, .differs] | join(" ")' "$T/out")" "false 1"
cp -p "$T/ref" "$f"

# ---- 3. every kind of difference ---------------------------------------------
rm "$T/mod/tree/a/f3"                                # missing
echo extra >"$T/mod/tree/a/new"                      # extra
head -c 10 /dev/urandom >>"$T/mod/tree/a/f5"         # size (and mtime)
ln -sfn a/f2 "$T/mod/tree/link"                      # target
rm "$T/mod/tree/a/deep/x" && mkdir "$T/mod/tree/a/deep/x" # type (and an extra-free dir)
chmod 600 "$T/mod/tree/a/f9"                         # mode (only with -p)
want="differs a/deep/x (type)|differs a/f5 (size, mtime)|differs link (target)|extra a/new|missing a/f3"
expect_rc 15 "quick: each difference (push side)" \
	"${CLIENT[@]}" check -r "$T/src/tree" "$HOST:data/tree"
check_eq "quick lines" "$(lines)" "$want"
expect_rc 15 "checksum -p: each difference and the mode" \
	"${CLIENT[@]}" check -r -p --level checksum "$T/src/tree" "$HOST:data/tree"
# -p: directories' and symlinks' times too (those changed above), and modes.
check_eq "checksum -p lines" "$(lines)" \
	"differs a (mtime)|differs a/deep (mtime)|differs a/deep/x (type)|differs a/f5 (size, mtime)|differs a/f9 (mode)|differs link (target, mtime)|extra a/new|missing a/f3"
check_eq "values: source first" "$(grep -E 'a/f9|deep/x|link|f5' "$T/out" | sed 's/mtime [^,)]*/mtime/' | sort | tr -s ' ' | paste -sd'|')" \
	"differs a/deep/x (type file -> directory)|differs a/f5 (size 4986 -> 4996, mtime)|differs a/f9 (mode 0644 -> 0600)|differs link (target a/f1 -> a/f2, mtime)"
expect_rc 15 "pull side --json: missing and extra swap" \
	"${CLIENT[@]}" check -r --json "$HOST:data/tree" "$T/src/tree"
check_eq "pull events" "$(jq_events)" \
	"differs a/deep/x type|differs a/f5 size,mtime|differs link target|extra a/f3|missing a/new"
check_eq "pull summary" \
	"$(jq -r 'select(.event == "summary") | [.missing, .extra, .differs] | join(" ")' "$T/out")" "1 1 3"

# ---- 3b. owners and metadata of every type of entry (issue 32 item 3) ---------
mkdir -p "$T/own/d"
echo f >"$T/own/f"
ln -s f "$T/own/l"
cp -a "$T/own" "$T/mod/own"
expect_rc 0 "--owner -p: identical" "${CLIENT[@]}" check -r -p --owner "$T/own" "$HOST:data/own"
chown 1234 "$T/mod/own/d"
chmod 0700 "$T/mod/own/d"
chgrp 5678 "$T/mod/own/f"
chown -h 1234:5678 "$T/mod/own/l"
touch -h -d '2020-01-01 00:00:00 UTC' "$T/mod/own/l"
touch -d '2020-01-01 00:00:00 UTC' "$T/mod/own/d"
lt=$(stat -c %Y "$T/own/l") dt=$(stat -c %Y "$T/own/d")
expect_rc 0 "without -p or --owner: owners, modes and times of dirs and symlinks unseen" \
	"${CLIENT[@]}" check -r "$T/own" "$HOST:data/own"
expect_rc 15 "--owner: owners of a directory, a file and a symlink (push side)" \
	"${CLIENT[@]}" check -r --owner "$T/own" "$HOST:data/own"
check_eq "owner lines" "$(vlines)" \
	"differs d (owner 0 -> 1234)|differs f (group 0 -> 5678)|differs l (owner 0 -> 1234, group 0 -> 5678)"
expect_rc 15 "-p --owner: and the modes and times of every type (pull side, --json)" \
	"${CLIENT[@]}" check -r -p --owner --json "$HOST:data/own" "$T/own"
check_eq "owner events" "$(jq_events)" "differs d mtime,mode,owner|differs f group|differs l mtime,owner,group"
check_eq "owner values (source is the daemon's)" \
	"$(jq -r 'select(.event == "check") | .values | to_entries[] | "\(.key)=\(.value.source)/\(.value.destination)"' "$T/out" | paste -sd' ')" \
	"mtime=1577836800.000000000/$dt.$(stat -c %y "$T/own/d" | sed 's/.*\.\([0-9]*\) .*/\1/') mode=0700/0755 owner=1234/0 group=5678/0 mtime=1577836800.000000000/$lt.$(stat -c %y "$T/own/l" | sed 's/.*\.\([0-9]*\) .*/\1/') owner=1234/0 group=5678/0"

# ---- 4. without -r; a file against a file ------------------------------------
expect_rc 15 "without -r: the top level only" \
	"${CLIENT[@]}" check "$T/src/tree/a" "$HOST:data/tree/a"
check_eq "top-level lines" "$(lines)" "differs f5 (size, mtime)|extra new|missing f3"
expect_rc 0 "file against file, checksum" \
	"${CLIENT[@]}" check --level checksum "$T/src/tree/b/big" "$HOST:data/tree/b/big"
expect_rc 15 "file against another file, checksum" \
	"${CLIENT[@]}" check --level checksum "$T/src/tree/a/f5" "$HOST:data/tree/a/f5"
expect_rc 5 "a missing remote path is refused" \
	"${CLIENT[@]}" check -r "$T/src/tree" "$HOST:data/nothere"
expect_rc 6 "a missing local path" \
	"${CLIENT[@]}" check -r "$T/nothere" "$HOST:data/tree"
expect_rc 1 "two local operands are a usage error" \
	"${CLIENT[@]}" check -r "$T/src/tree" "$T/src/tree"
expect_rc 1 "an unknown level" \
	"${CLIENT[@]}" check --level sha1 "$T/src/tree" "$HOST:data/tree"

# ---- 5. write-only module -----------------------------------------------------
cp -r "$T/src/tree" "$T/drop/tree"
expect_rc 5 "a write-only module refuses check" \
	"${CLIENT[@]}" check -r --level checksum "$T/src/tree" "$HOST:drop/tree"
grep -qi 'write only\|permission' "$T/err" && pass "says why" || fail "no reason: $(cat "$T/err")"
[ ! -s "$T/out" ] && pass "nothing listed" || fail "listed: $(cat "$T/out")"

# ---- 6. a daemon from before check -------------------------------------------
start_rawserver --mode ls --caps 0x7f
rs=$RS_PID
expect_rc 12 "an old daemon: refused before LIST" \
	"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
	--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" check -r "$T/src/tree" "$HOST:data/tree"
grep -q 'too old' "$T/err" && pass "says too old" || fail "no 'too old': $(cat "$T/err")"
kill "$rs" 2>/dev/null
wait "$rs" 2>/dev/null
# A daemon with check but without owners in its listings: --owner is refused before LIST.
start_rawserver --mode ls --caps 0x47f
rs=$RS_PID
expect_rc 12 "an old daemon: --owner refused before LIST" \
	"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
	--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" check -r --owner "$T/src/tree" "$HOST:data/tree"
grep -q 'too old for check --owner' "$T/err" && pass "says too old for --owner" ||
	fail "no 'too old': $(cat "$T/err")"
kill "$rs" 2>/dev/null
wait "$rs" 2>/dev/null

# ---- 7. a client without the check capability ------------------------------------
rawpeer_for "$PORT"
# LIST flags 0x3 (recursive, sums), path "data/tree"
rawpeer_rc 0 "LIST with sums from a client without 0x400: ERROR PROTOCOL" \
	hello caps=0x7f frame LIST 000000030009646174612f74726565 wait ERROR \
	expect "ERROR PROTOCOL" expect "check capability" wait closed
rawpeer_rc 0 "the same LIST from a client with 0x400: FILES, SUMS, END" \
	hello caps=0x47f frame LIST 000000030009646174612f74726565 wait END \
	expect-seen SUMS
rawpeer_rc 0 "OPEN with skip checksum from a client without 0x400: ERROR PROTOCOL" \
	hello caps=0x7f open push data/ recursive flags=0x81 expect "ERROR PROTOCOL" \
	expect "check capability" wait closed

# ---- 8. a hostile daemon's digests ------------------------------------------------
mkdir -p "$T/hl/d"
printf 'hello' >"$T/hl/a"
for code in 1 2 3 4 5; do
	start_rawserver --mode sums --caps 0x47f --code $code
	rs=$RS_PID
	expect_rc 4 "hostile SUMS ($code): protocol error" \
		"$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" check -r --level checksum "$T/hl" \
		"$HOST:data/hl"
	grep -q 'protocol error' "$T/err" && pass "says protocol error" ||
		fail "no 'protocol error': $(cat "$T/err")"
	grep -q identical "$T/err" && fail "reported identical" || true
	kill "$rs" 2>/dev/null
	wait "$rs" 2>/dev/null
done

finish
