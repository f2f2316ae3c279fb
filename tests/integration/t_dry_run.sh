#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --dry-run with --skip and --delete (a probe: the receiver decides as a real
# run would and creates, writes and deletes nothing), push and pull, against a
# real daemon. For each case the dry run's --json plan events (copy, skip,
# delete, withheld) are compared with what the real run right after it then
# does (its --json file events), and both trees are compared before and after
# the dry run (find -printf '%p %s %T@ %m'):
#   1. --skip quick: unchanged files skipped, a changed and a new file copied
#   2. --skip checksum: a change that keeps size and mtime is copied (quick
#      would skip it), the rest skipped; text lines "would copy NAME (N bytes)",
#      "would skip NAME"
#   3. --delete: extras (a file, a directory with a file in it) listed
#      "would delete"; one a filter protects, a temp file and .rdmacp-partial
#      are not; the dry run leaves the temp file alone
#   4. --delete --max-delete 1: one would go, the others are withheld; the
#      dry run exits 0, the real run 16 with the same sets
#   5. push: a destination directory that does not exist: everything would
#      be copied, nothing is made; an entry over the module's max file size
#      fails (exit 9) and then nothing would be deleted
#   6. -H: a link to a file that would be copied would be made again, one
#      to a kept file that is its link already would be kept
#   7. a daemon without the probe capability (rawserver.py): refused before
#      OPEN, "too old", exit 12 (push and pull)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1

mkdir -p "$T/small" "$T/local"
setup_standard "" "[small]" "path = $T/small" "allow = client" "max file size = 100"

# make_tree DIR: a small tree of files, a symlink and directories.
make_tree() {
	mkdir -p "$1/a/deep" "$1/b"
	for i in $(seq 1 8); do
		head -c $((i * 37 + 5)) /dev/urandom >"$1/a/f$i" || die "write $1/a/f$i"
		head -c $((i * 11 + 1)) /dev/urandom >"$1/b/g$i" || die "write $1/b/g$i"
	done
	echo deep >"$1/a/deep/d1"
	ln -s f1 "$1/a/link"
}

# snap: every entry of both sides with size, mtime and mode.
snap() {
	find "$T/src" "$T/mod" "$T/local" -printf '%p %s %T@ %m\n' | LC_ALL=C sort
}

# plan_set ACTION: the names of the dry run's plan events with this action ($T/dry).
plan_set() {
	jq -r --arg a "$1" 'select(.event=="plan" and .action==$a) | .name' "$T/dry" | LC_ALL=C sort
}

# run_set ACTION: the names of the real run's file events with this action ($T/real).
run_set() {
	jq -r --arg a "$1" 'select(.event=="file" and .action==$a) | .name' "$T/real" | LC_ALL=C sort
}

check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1: got '$2', wanted '$3'"
	fi
}

# same_sets DESC: the dry run's copy/skip/delete/withheld = the real run's
# copied/skipped/deleted/withheld, and the dry run's events are well formed.
same_sets() {
	check_eq "$1: would copy = copied" "$(plan_set copy | tr '\n' ' ')" \
		"$(run_set copied | tr '\n' ' ')"
	check_eq "$1: would skip = skipped" "$(plan_set skip | tr '\n' ' ')" \
		"$(run_set skipped | tr '\n' ' ')"
	check_eq "$1: would update = updated" "$(plan_set update | tr '\n' ' ')" \
		"$(run_set updated | tr '\n' ' ')"
	check_eq "$1: would delete = deleted" "$(plan_set delete | tr '\n' ' ')" \
		"$(run_set deleted | tr '\n' ' ')"
	check_eq "$1: withheld = withheld" "$(plan_set withheld | tr '\n' ' ')" \
		"$(run_set withheld | tr '\n' ' ')"
	jq -s -e 'all(.[]; has("event") and (.event != "plan" or
		(has("action") and (.action == "delete" or .action == "withheld" or has("type")))))' \
		"$T/dry" >/dev/null && pass "$1: every plan event has an action (and a type)" ||
		fail "$1: malformed plan events: $(cat "$T/dry")"
	jq -s -e --argjson c "$(plan_set copy | wc -l)" --argjson s "$(plan_set skip | wc -l)" \
		--argjson d "$(plan_set delete | wc -l)" \
		'.[-1].event=="summary" and .[-1].dry_run and .[-1].bytes==0 and .[-1].files==$c and
		 .[-1].skipped==$s and .[-1].deleted==$d' "$T/dry" >/dev/null &&
		pass "$1: summary counts what would be copied, skipped, deleted" ||
		fail "$1: summary: $(tail -1 "$T/dry")"
}

# dry_then_real DESC WANT_DRY WANT_REAL ARGS...: the dry run (--json, $T/dry), the
# trees unchanged by it, then the real run ($T/real), and the sets compared.
dry_then_real() {
	local desc=$1 want_dry=$2 want_real=$3
	shift 3
	snap >"$T/snap.before"
	# -vv: every entry has its event (unchanged ones too), as its line with -vv.
	expect_rc "$want_dry" "$desc: dry run" "${CLIENT[@]}" -n --json -vv "$@"
	cp "$T/out" "$T/dry"
	snap >"$T/snap.after"
	if cmp -s "$T/snap.before" "$T/snap.after"; then
		pass "$desc: the dry run changed nothing"
	else
		fail "$desc: the dry run changed the trees:"
		diff "$T/snap.before" "$T/snap.after" | head -20
	fi
	expect_rc "$want_real" "$desc: real run" "${CLIENT[@]}" --json -vv "$@"
	cp "$T/out" "$T/real"
	same_sets "$desc"
}

make_tree "$T/src/tree"
make_tree "$T/mod/ptree"

for dir in push pull; do
	echo "--- $dir"
	if [ $dir = push ]; then
		S=$T/src/tree D=$T/mod/tree
		ARGS=("$T/src/tree" "$HOST:data/")
	else
		S=$T/mod/ptree D=$T/local/ptree
		ARGS=("$HOST:data/ptree" "$T/local/")
	fi
	expect_rc 0 "$dir: first copy" "${CLIENT[@]}" -q -r -p "${ARGS[@]}"
	diff -r "$S" "$D" >/dev/null && pass "$dir: trees identical" || fail "$dir: trees differ"

	# ---- 1. --skip quick ------------------------------------------------------------
	head -c 99 /dev/urandom >>"$S/a/f2"
	echo new >"$S/b/new"
	dry_then_real "$dir --skip quick" 0 0 -r -p --skip quick "${ARGS[@]}"
	base=$(basename "$D")
	check_eq "$dir --skip quick: the changed and the new file would be copied" \
		"$(plan_set copy | grep -v -e '/link$' | jq -R -s -c 'split("\n")[:-1]')" \
		"$(printf '%s\n' "$base/a/f2" "$base/b/new" |
			LC_ALL=C sort | jq -R -s -c 'split("\n")[:-1]')"
	diff -r "$S" "$D" >/dev/null && pass "$dir: in sync again" || fail "$dir: trees differ"
	# Without -vv, as the text: nothing unchanged is listed; the summary counts it.
	expect_rc 0 "$dir: dry run in sync, --json" "${CLIENT[@]}" -n --json -r -p --skip quick "${ARGS[@]}"
	check_eq "$dir: in sync, --json: no plan event, all counted skipped" \
		"$(jq -s -c '[([.[] | select(.event == "plan")] | length), (.[-1].skipped > 0)]' "$T/out")" \
		"[0,true]"

	# ---- 2. --skip checksum --------------------------------------------------------
	f=$S/a/f3
	cp -p "$f" "$T/ref"
	# One byte flipped (a fixed byte would be no change once in 256 random files).
	python3 -c 'import sys
with open(sys.argv[1], "r+b") as fh:
    fh.seek(7); b = fh.read(1); fh.seek(7); fh.write(bytes([b[0] ^ 0xff]))' "$f" ||
		die "flip a byte of $f"
	touch -r "$T/ref" "$f"
	expect_rc 0 "$dir: -n --skip quick (text)" "${CLIENT[@]}" -n -v -r -p --skip quick "${ARGS[@]}"
	grep -qx "would skip $base/a/f3" "$T/out" && pass "$dir: quick would skip the change" ||
		fail "$dir: quick: $(cat "$T/out")"
	expect_rc 0 "$dir: -n --skip checksum (text)" \
		"${CLIENT[@]}" -n -v -r -p --skip checksum "${ARGS[@]}"
	grep -qx "would copy $base/a/f3 ($(stat -c %s "$f") bytes)" "$T/out" &&
		grep -qx "would skip $base/a/f4" "$T/out" &&
		pass "$dir: checksum would copy the change, skip the rest" ||
		fail "$dir: checksum: $(cat "$T/out")"
	dry_then_real "$dir --skip checksum" 0 0 -r -p --skip checksum "${ARGS[@]}"
	check_eq "$dir --skip checksum: only the changed file" \
		"$(plan_set copy | grep -v -e '/link$' | grep -c -v -e "^$base\$" -e "^$base/[ab]\$" \
			-e "^$base/a/deep\$")" 1
	cmp -s "$f" "$D/a/f3" && pass "$dir: the change arrived" || fail "$dir: f3 differs"

	# ---- 3. --delete, with filters, temp files and the partial store ---------------
	mkdir -p "$D/xdir/sub" "$D/.rdmacp-partial"
	echo x >"$D/extra"
	echo x >"$D/xdir/sub/x1"
	echo keep >"$D/a/keep.log"
	echo p >"$D/.rdmacp-partial/p"
	# An old temp file, which a real run's first look at b/ sweeps: the dry run leaves it.
	echo t >"$D/b/.g1.rdmacp.AbCdEf12"
	touch -d '1 hour ago' "$D/b/.g1.rdmacp.AbCdEf12"
	sleep 3 # stale by its ctime too, which touch can't set back
	dry_then_real "$dir --delete" 0 0 -r -p --skip quick --delete --exclude '*.log' "${ARGS[@]}"
	check_eq "$dir --delete: what would go" "$(plan_set delete | tr '\n' ' ')" \
		"$base/extra $base/xdir $base/xdir/sub $base/xdir/sub/x1 "
	[ -e "$D/a/keep.log" ] && [ -e "$D/.rdmacp-partial/p" ] &&
		pass "$dir --delete: the filter's and the partial store's entries kept" ||
		fail "$dir --delete: a protected entry went"
	rm -rf "$D/a/keep.log" "$D/.rdmacp-partial" "$D/b/.g1.rdmacp.AbCdEf12"

	# ---- 4. --delete --max-delete 1 -------------------------------------------------
	echo 1 >"$D/e1"
	echo 2 >"$D/e2"
	echo 3 >"$D/b/e3"
	dry_then_real "$dir --max-delete 1" 0 16 -r -p --skip quick --delete --max-delete 1 \
		"${ARGS[@]}"
	check_eq "$dir --max-delete 1: one would go" "$(plan_set delete | wc -l)" 1
	check_eq "$dir --max-delete 1: two withheld" "$(plan_set withheld | wc -l)" 2
	rm -f "$D/e1" "$D/e2" "$D/b/e3"
	diff -r "$S" "$D" >/dev/null && pass "$dir: in sync at the end" || fail "$dir: trees differ"
done

# ---- 5. a destination that is not there; a refused entry --------------------------
echo "--- 5. a new destination, a refused entry"
snap >"$T/snap.before"
expect_rc 0 "push -n --skip quick into a missing directory" \
	"${CLIENT[@]}" -n --json -r --skip quick "$T/src/tree" "$HOST:data/new/"
[ ! -e "$T/mod/new" ] && pass "nothing made" || fail "the dry run made $T/mod/new"
n=$(find "$T/src/tree" | wc -l)
jq -s -e --argjson n "$n" '([.[] | select(.event=="plan" and .action=="copy")] | length) == $n' \
	"$T/out" >/dev/null && pass "all $n entries would be copied" || fail "listing: $(cat "$T/out")"
expect_rc 0 "pull -n --delete into a missing directory" \
	"${CLIENT[@]}" -n --json -r --delete "$HOST:data/ptree" "$T/local/newpull/"
[ ! -e "$T/local/newpull" ] && pass "nothing made" || fail "the dry run made $T/local/newpull"
snap >"$T/snap.after"
cmp -s "$T/snap.before" "$T/snap.after" && pass "trees unchanged" || fail "trees changed"

mkdir -p "$T/small/tree"
echo extra >"$T/small/tree/extra"
expect_rc 9 "push -n --delete with an entry over the max file size" \
	"${CLIENT[@]}" -n --json -r --delete "$T/src/tree" "$HOST:small/"
jq -s -e '[.[] | select(.event=="file" and .action=="failed")] | length >= 1' "$T/out" \
	>/dev/null && pass "the refused entries are listed as failed" || fail "$(cat "$T/out")"
jq -s -e '([.[] | select(.event=="plan" and .action=="delete")] | length) == 0 and
	.[-1].delete_suppressed' "$T/out" >/dev/null &&
	pass "a failure: nothing would be deleted" || fail "$(cat "$T/out")"
[ -e "$T/small/tree/extra" ] && [ ! -e "$T/small/tree/a" ] && pass "the module unchanged" ||
	fail "the module changed"

# ---- 6. hard links ------------------------------------------------------------------
echo "--- 6. -H"
mkdir -p "$T/src/hl"
echo same >"$T/src/hl/a"
ln "$T/src/hl/a" "$T/src/hl/b"
echo old >"$T/src/hl/c"
ln "$T/src/hl/c" "$T/src/hl/d"
expect_rc 0 "push -H" "${CLIENT[@]}" -q -r -p -H "$T/src/hl" "$HOST:data/"
echo changed >"$T/src/hl/c"
# a/b kept (b is a's link already); c copied, so its link d is made again
dry_then_real "-H --skip quick" 0 0 -r -p -H --skip quick "$T/src/hl" "$HOST:data/"
check_eq "-H: what would be copied" "$(plan_set copy | tr '\n' ' ')" "hl/c hl/d "
check_eq "-H: what would be kept" "$(plan_set skip | tr '\n' ' ')" "hl hl/a hl/b "

# ---- 7. a daemon without the probe capability ---------------------------------------
echo "--- 7. an old daemon"
for dir in push pull; do
	rm -f "$T/rs.port"
	# Everything up to xattrs (0x1eff), not the probe (0x2000).
	start_rawserver --mode error-open --caps 0x1eff
	rs=$RS_PID
	old=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" --transport tcp -n -r)
	if [ $dir = push ]; then
		expect_rc 12 "old daemon, push -n --skip quick" "${old[@]}" --skip quick \
			"$T/src/tree" "$HOST:data/"
	else
		expect_rc 12 "old daemon, pull -n --delete" "${old[@]}" --delete "$HOST:data/ptree" \
			"$T/local/"
	fi
	grep -q 'too old' "$T/err" && pass "says too old" || fail "no 'too old': $(cat "$T/err")"
	kill "$rs" 2>/dev/null
	wait "$rs" 2>/dev/null
done

finish
