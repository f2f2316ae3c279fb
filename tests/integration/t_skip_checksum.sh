#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --skip checksum, push and pull, against a real daemon (JSON read by jq):
#   1. an unchanged tree (small files, an empty one, 6 MiB ones) re-run with
#      --skip checksum: every file skipped, 0 payload bytes, exit 0
#   2. a file changed with its size and mtime kept (touch -r): --skip quick
#      keeps it (still different), --skip checksum copies it (then the same),
#      only that one, in a push and in a pull
#   3. a destination file of another size is copied without being hashed
#   4. a write-only module refuses a push with --skip checksum: exit 5
#   5. a daemon with skip levels but without the check capability
#      (rawserver.py): refused before OPEN, "too old", exit 12; -n works (t_dry_run.sh)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
command -v jq >/dev/null || skip "jq is not installed"

mkdir -p "$T/drop"
setup_standard "" "[drop]" "path = $T/drop" "allow = client" "write only = yes"
mkdir -p "$T/src/tree/a" "$T/src/tree/b"
for i in $(seq 1 50); do
	head -c $((i * 331 + 1)) /dev/urandom >"$T/src/tree/a/f$i" || die "write f$i"
done
for i in 1 2 3; do
	head -c $((6 << 20)) /dev/urandom >"$T/src/tree/b/big$i" || die "write big$i"
done
: >"$T/src/tree/b/empty"
NFILES=54
NDIRS=3 # directories there already are kept: counted in "skipped"

# check_eq DESC GOT WANT
check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1: $2"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

# summary KEYS...: the summary's fields, space-separated.
summary() {
	local q
	q=$(printf '.%s,' "$@")
	jq -r "select(.event == \"summary\") | [${q%,}] | map(tostring) | join(\" \")" "$T/out"
}

# copied: the regular files copied (file events).
copied() {
	jq -r 'select(.event == "file" and .action == "copied") | .name' "$T/out" |
		grep -vxE 'tree|tree/a|tree/b' | sort | paste -sd'|'
}

# flip FILE: change one byte in the middle, keep the size and the mtime.
flip() {
	cp -p "$1" "$T/ref"
	python3 -c 'import os, sys
f = open(sys.argv[1], "r+b"); n = os.path.getsize(sys.argv[1]) // 2
f.seek(n); b = f.read(1); f.seek(n); f.write(bytes([b[0] ^ 0x5a]))' "$1"
	touch -r "$T/ref" "$1"
}

# ---- 1. push, re-run unchanged ---------------------------------------------
expect_rc 0 "push the tree with -p" "${CLIENT[@]}" -q -r -p "$T/src/tree" "$HOST:data/"
expect_rc 0 "re-run with --skip checksum" \
	"${CLIENT[@]}" --json -vv -r -p --skip checksum "$T/src/tree" "$HOST:data/"
check_eq "all skipped, 0 bytes sent" "$(summary files bytes skipped failures)" "0 0 $((NFILES + NDIRS)) 0"
check_eq "skipped events" "$(jq -r 'select(.event == "file" and .action == "skipped") | .name' "$T/out" | wc -l)" $((NFILES + NDIRS))
daemon_settled "$T/d.log"
grep ' done: ' "$T/d.log" | tail -1 | grep -q "0 files, 0 bytes, 0 failed, 0 updated, $((NFILES + NDIRS)) unchanged" &&
	pass "the daemon kept them all" || fail "daemon: $(grep ' done: ' "$T/d.log" | tail -1)"

# ---- 2. push: same size and mtime, other contents ---------------------------
flip "$T/mod/tree/b/big2"
flip "$T/mod/tree/a/f7"
expect_rc 0 "push --skip quick keeps the changed files" \
	"${CLIENT[@]}" --json -r -p --skip quick "$T/src/tree" "$HOST:data/"
check_eq "quick: nothing copied" "$(summary files bytes skipped)" "0 0 $((NFILES + NDIRS))"
cmp -s "$T/src/tree/b/big2" "$T/mod/tree/b/big2" && fail "quick copied big2" || pass "big2 still differs"
expect_rc 0 "push --skip checksum copies them" \
	"${CLIENT[@]}" --json -r -p --skip checksum "$T/src/tree" "$HOST:data/"
check_eq "checksum: two copied" "$(summary files bytes skipped)" "2 $(((6 << 20) + 7 * 331 + 1)) $((NFILES - 2 + NDIRS))"
check_eq "checksum: which" "$(copied)" "tree/a/f7|tree/b/big2"
diff -r "$T/src/tree" "$T/mod/tree" >/dev/null && pass "tree identical again" || fail "tree differs"

# ---- 3. another size: copied ------------------------------------------------
echo longer >>"$T/mod/tree/a/f9"
expect_rc 0 "push --skip checksum, a file of another size" \
	"${CLIENT[@]}" --json -r -p --skip checksum "$T/src/tree" "$HOST:data/"
check_eq "other size: one copied" "$(summary files skipped)" "1 $((NFILES - 1 + NDIRS))"
cmp -s "$T/src/tree/a/f9" "$T/mod/tree/a/f9" && pass "f9 restored" || fail "f9 differs"

# ---- 2b. the same for a pull (the client hashes its destination) -------------
mkdir -p "$T/pull"
expect_rc 0 "pull the tree with -p" "${CLIENT[@]}" -q -r -p "$HOST:data/tree" "$T/pull/"
expect_rc 0 "pull re-run with --skip checksum" \
	"${CLIENT[@]}" --json -r -p --skip checksum "$HOST:data/tree" "$T/pull/"
check_eq "pull: all skipped, 0 bytes" "$(summary files bytes skipped failures)" "0 0 $((NFILES + NDIRS)) 0"
flip "$T/pull/tree/b/big3"
expect_rc 0 "pull --skip quick keeps the changed file" \
	"${CLIENT[@]}" --json -r -p --skip quick "$HOST:data/tree" "$T/pull/"
check_eq "pull quick: nothing copied" "$(summary files skipped)" "0 $((NFILES + NDIRS))"
expect_rc 0 "pull --skip checksum copies it" \
	"${CLIENT[@]}" --json -r -p --skip checksum "$HOST:data/tree" "$T/pull/"
check_eq "pull checksum: one copied" "$(summary files bytes skipped)" "1 $((6 << 20)) $((NFILES - 1 + NDIRS))"
check_eq "pull checksum: which" "$(copied)" "tree/b/big3"
diff -r "$T/src/tree" "$T/pull/tree" >/dev/null && pass "pulled tree identical" || fail "pulled tree differs"

# ---- 4. write-only module ---------------------------------------------------
expect_rc 0 "write-only module, plain push" "${CLIENT[@]}" -q -r "$T/src/tree" "$HOST:drop/"
expect_rc 5 "write-only module refuses --skip checksum" \
	"${CLIENT[@]}" -q -r --skip checksum "$T/src/tree" "$HOST:drop/"

# ---- 5. a daemon with skip levels but not checksum, and -n -----------------------
expect_rc 0 "--skip checksum with -n" \
	"${CLIENT[@]}" -n -r --skip checksum "$T/src/tree" "$HOST:data/"
for dir in push pull; do
	start_rawserver --mode error-open --caps 0x7f
	rs=$RS_PID
	old=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" --transport tcp --skip checksum)
	if [ $dir = push ]; then
		expect_rc 12 "old daemon, push --skip checksum" "${old[@]}" -r "$T/src/tree" "$HOST:data/"
	else
		expect_rc 12 "old daemon, pull --skip checksum" "${old[@]}" -r "$HOST:data/tree" "$T/pull2"
	fi
	grep -q 'too old' "$T/err" && pass "says too old" || fail "no 'too old': $(cat "$T/err")"
	kill "$rs" 2>/dev/null
	wait "$rs" 2>/dev/null
done

finish
