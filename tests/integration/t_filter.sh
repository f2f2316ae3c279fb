#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --exclude, --include, --exclude-from against a real daemon, push and pull
# (the daemon's walk applies a pull's rules, sent in FILTER):
#   1. a pattern without / at any depth; an anchored one (/ is the directory
#      that holds the source: /src/build, not /build); a directory-only one;
#      ** across directories; dir/*** (the directory and all in it); an inner
#      / unanchored; first match wins, both orders; "+ */ + *.c - *"; an
#      excluded directory is not entered whatever a later rule says;
#      --exclude-from with comments and +/- prefixes; every one push and pull
#   2. --dry-run lists the same (push, and pull through the daemon), --json
#      counts by jq
#   3. bad rules: an empty or "/" pattern, a missing --exclude-from file, a
#      bad line (named): exit 1
#   4. a daemon without filters (rawserver.py, an older daemon): a pull with
#      rules is refused before OPEN, "too old", exit 12
#   5. FILTER by rawpeer: an empty pattern, a rule the parser refuses, a
#      second FILTER, anything but OPEN after it: ERROR PROTOCOL; the rules
#      apply to the OPEN right after them, and not to the next one
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1

setup_standard
rawpeer_for "$PORT"

# The tree, on both sides: pushed from $T/src, pulled from the module's copy.
make_tree() {
	local r=$1
	mkdir -p "$r/a/b" "$r/build" "$r/c" "$r/deep/1/2/3" "$r/cache/q" || die "mkdir $r"
	for f in top.c top.o a/x.o a/b/y.c a/b/keep.o build/k c/build c/z.c deep/1/2/3/bar \
		deep/1/bar deep/bar cache/q/r cachex; do
		echo "$f" >"$r/$f" || die "write $r/$f"
	done
}
make_tree "$T/src"
mkdir -p "$T/mod/m"
make_tree "$T/mod/m/src"
ALL=$(cd "$T/src/.." && find src | sort)

# what DIR: the entries under DIR, one a line, sorted.
what() { (cd "$1" && find . -mindepth 1 | sed 's|^\./||' | sort); }
# all_but PATTERN...: the whole tree less the names matching any egrep PATTERN.
all_but() {
	local out=$ALL p
	for p in "$@"; do out=$(grep -Ev -- "$p" <<<"$out"); done
	echo "$out"
}

n=0
# check DESC EXPECTED RULES...: push and pull with these rules; both trees must be EXPECTED.
check() {
	local desc=$1 want=$2
	shift 2
	n=$((n + 1))
	expect_rc 0 "push: $desc" "${CLIENT[@]}" -q -r "$@" "$T/src" "$HOST:data/p$n/"
	[ "$(what "$T/mod/p$n")" = "$want" ] && pass "push: $desc: the right entries" || {
		fail "push: $desc: got"
		diff <(echo "$want") <(what "$T/mod/p$n") | sed 's/^/    /'
	}
	mkdir -p "$T/pull$n"
	expect_rc 0 "pull: $desc" "${CLIENT[@]}" -q -r "$@" "$HOST:data/m/src" "$T/pull$n/"
	[ "$(what "$T/pull$n")" = "$want" ] && pass "pull: $desc: the right entries" || {
		fail "pull: $desc: got"
		diff <(echo "$want") <(what "$T/pull$n") | sed 's/^/    /'
	}
}

# ---- 1. the pattern rules, push and pull --------------------------------------
check "no rules: everything" "$ALL"
check "*.o at any depth" "$(all_but '\.o$')" --exclude '*.o'
check "anchored /src/build" "$(all_but '^src/build')" --exclude /src/build
check "/build anchors at the root, above src: nothing" "$ALL" --exclude /build
check "build/ only directories (c/build is a file)" "$(all_but '^src/build')" --exclude build/
check "/src/deep/**/bar: two or more levels below deep" "$(all_but '^src/deep/.+/bar$')" \
	--exclude '/src/deep/**/bar'
check "cache/***: the directory and all in it" "$(all_but '^src/cache(/|$)')" \
	--exclude 'cache/***'
check "b/*.o unanchored, at a directory boundary" "$(all_but '^src/a/b/keep\.o$')" \
	--exclude 'b/*.o'
check "? and [..]" "$(all_but '^src/top\.[co]$')" --exclude 'to?.[co]'
check "first match wins: include keep.o, then exclude *.o" \
	"$(all_but '^src/(top|a/x)\.o$')" --include keep.o --exclude '*.o'
check "first match wins: exclude *.o first" "$(all_but '\.o$')" --exclude '*.o' --include keep.o
check "+ */ + *.c - *: directories and C files" \
	"$(grep -E '^src(/a|/a/b|/build|/c|/deep|/deep/1|/deep/1/2|/deep/1/2/3|/cache|/cache/q)?$|\.c$' <<<"$ALL")" \
	--include '*/' --include '*.c' --exclude '*'
check "an excluded directory is not entered" "$(all_but '^src/a(/|$)')" \
	--exclude /src/a/ --include '*.c'
check "excluding the source itself" "" --exclude src

cat >"$T/rules" <<'EOF'
# comments and blank lines are ignored

; this too
+ keep.o
- *.o
/src/cache/
EOF
check "--exclude-from" "$(all_but '^src/(top|a/x)\.o$' '^src/cache(/|$)')" --exclude-from "$T/rules"
check "--exclude-from, then --exclude, in order" \
	"$(all_but '^src/(top|a/x)\.o$' '^src/cache(/|$)' '^src/c(/|$)')" \
	--exclude-from "$T/rules" --exclude /src/c

# ---- 2. dry runs and --json -----------------------------------------------------
expect_rc 0 "push --dry-run with rules" "${CLIENT[@]}" -n -r --exclude '*.o' "$T/src" "$HOST:data/dry/"
grep -q '\.o ' "$T/out" && fail "dry push lists a .o: $(grep '\.o ' "$T/out")" ||
	pass "dry push lists no .o"
grep -q '^would copy src/a/b/y.c ' "$T/out" && pass "dry push lists y.c" || fail "dry push: $(cat "$T/out")"
expect_rc 0 "pull --dry-run with rules (the daemon's listing)" \
	"${CLIENT[@]}" -n -r --exclude '*.o' "$HOST:data/m/src" "$T/drypull/"
grep -q '\.o ' "$T/out" && fail "dry pull lists a .o" || pass "dry pull lists no .o"
grep -q '^would copy src/a/b/y.c ' "$T/out" && pass "dry pull lists y.c" || fail "dry pull: $(cat "$T/out")"
want=$(all_but '\.o$' | wc -l)
expect_rc 0 "push --json with rules" "${CLIENT[@]}" --json -r --exclude '*.o' "$T/src" "$HOST:data/js/"
[ "$(jq -s '[.[] | select(.event == "file")] | length' "$T/out")" = "$want" ] &&
	pass "json: $want file events" || fail "json: $(jq -c 'select(.event == "file") | .name' "$T/out")"
[ "$(jq -s '[.[] | select(.event == "file" and (.name | endswith(".o")))] | length' "$T/out")" = 0 ] &&
	pass "json: no .o" || fail "json names a .o"
[ "$(jq -r 'select(.event == "summary") | "\(.files) \(.failures)"' "$T/out")" = "$want 0" ] &&
	pass "json summary: $want files, 0 failures" || fail "summary: $(tail -1 "$T/out")"
mkdir -p "$T/jpull"
expect_rc 0 "pull --json with rules" "${CLIENT[@]}" --json -r --exclude '*.o' \
	"$HOST:data/m/src" "$T/jpull/"
[ "$(jq -r 'select(.event == "summary") | .files' "$T/out")" = "$want" ] &&
	pass "json pull summary: $want files" || fail "pull summary: $(tail -1 "$T/out")"

# ---- 3. bad rules ---------------------------------------------------------------
expect_rc 1 "an empty pattern" "${CLIENT[@]}" -r --exclude '' "$T/src" "$HOST:data/bad/"
expect_rc 1 "a pattern of just /" "${CLIENT[@]}" -r --include / "$T/src" "$HOST:data/bad/"
expect_rc 1 "--exclude-from a missing file" "${CLIENT[@]}" -r --exclude-from "$T/nope" \
	"$T/src" "$HOST:data/bad/"
printf 'a\n+ \nb\n' >"$T/badrules"
expect_rc 1 "--exclude-from with an empty + rule" "${CLIENT[@]}" -r --exclude-from "$T/badrules" \
	"$T/src" "$HOST:data/bad/"
grep -q 'line 2' "$T/err" && pass "the bad line is named" || fail "message: $(cat "$T/err")"
[ -e "$T/mod/bad" ] && fail "a refused run wrote data/bad" || pass "nothing written"

# ---- 4. a daemon that has no filters --------------------------------------------
start_rawserver --mode error-open --caps 0x7f
rs=$RS_PID
old=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" --transport tcp)
expect_rc 12 "old daemon, pull --exclude" "${old[@]}" -r --exclude '*.o' "$HOST:data/m/src" "$T/old/"
kill "$rs" 2>/dev/null
wait "$rs" 2>/dev/null
grep -q "too old for --include/--exclude" "$T/err" && pass "says the daemon is too old" ||
	fail "message: $(cat "$T/err")"
grep -q "OPEN" "$T/rs.out" && fail "OPEN was sent to the old daemon" || pass "no OPEN sent"

# ---- 5. FILTER on the wire: hostile, misplaced, and for one OPEN only ----------------
# FILTER: count u16, then action u8 (1 include, 2 exclude) and a str16 pattern.
rawpeer_rc 0 "FILTER with an empty pattern" hello frame FILTER 00010200 wait closed \
	expect-seen "ERROR PROTOCOL"
rawpeer_rc 0 "FILTER with the rule \"/\"" hello frame FILTER 00010100012f wait closed \
	expect-seen "ERROR PROTOCOL" expect-seen "bad rule"
rawpeer_rc 0 "two FILTERs" hello frame FILTER 00010200012a frame FILTER 00010200012a \
	wait closed expect-seen "ERROR PROTOCOL" expect-seen "right before OPEN"
rawpeer_rc 0 "FILTER, then not OPEN" hello frame FILTER 00010200012a \
	frame PING 0102030405060708 wait closed expect-seen "ERROR PROTOCOL"
rawpeer_rc 0 "FILTER, OPEN, GET: a listing without what is excluded" \
	hello frame FILTER 00010200032a2e6f open pull data/m dry recursive get data/m/src \
	wait END expect-seen "src/a/b/y.c"
grep -q '\.o:' "$T/rp.out" && fail "the daemon listed a .o: $(grep FILES "$T/rp.out")" ||
	pass "the daemon listed no .o"
rawpeer_rc 0 "the next OPEN has no rules" \
	hello frame FILTER 00010200032a2e6f open pull data/m dry recursive get data/m/src \
	wait END open pull data/m dry recursive get data/m/src wait END
[ "$(grep -o 'src/top\.o:' "$T/rp.out" | wc -l)" = 1 ] && pass "the second listing has top.o" ||
	fail "listings: $(grep FILES "$T/rp.out")"

finish
