#!/bin/bash
# The documentation agrees with the programs (issue 15 item 9):
#   1. every long and short option rdmacp accepts (its option tables) is in
#      rdmacp(1) and in `rdmacp --help`, and every option those two name is
#      accepted by the program (run: `rdmacp OPT [VALUE] --help` exits 0);
#      the same for rdmacpd, rdmacpd(8) and `rdmacpd --help`;
#   2. every key of the daemon's key tables is in rdmacpd.conf(5) and every
#      key documented there is in the tables; the same for the client's
#      config keys and rdmacp(1)'s FILES section (run: a config with each
#      documented key is accepted);
#   3. every exit code in README's table is produced by some test
#      (`expect_rc N`, or `"$rc" -eq N`), and the tables of README, rdmacp(1)
#      and `rdmacp --help` list the same codes;
#   4. what --json and -vv print is what rdmacp(1) says: the start event's
#      direction values, a renamed pull's name, debug lines with -vv; every
#      field of the summary event is described in rdmacp(1);
#   5. every man page, as man shows it at 80 columns (MANWIDTH=80), has no
#      line wider than 80 columns.
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
M1=$SRC_DIR/man/rdmacp.1
M8=$SRC_DIR/man/rdmacpd.8
M5=$SRC_DIR/man/rdmacpd.conf.5

# section PAGE NAME[,NAME...]: the text of these .SH sections, with \- as -.
section() {
	awk -v want="$2" '
		BEGIN { n = split(want, w, ",") }
		/^\.SH / { on = 0; s = substr($0, 5); gsub(/"/, "", s)
			for (i = 1; i <= n; i++) if (s == w[i]) on = 1; next }
		on' "$1" | sed 's/\\-/-/g'
}
longs() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
# Short options as documented: "-X," in --help, ".BR \-X ..." in a man page.
help_shorts() { grep -oE -- '^ +-[A-Za-z],' | tr -d ' ,' | sort -u; }
man_shorts() { grep -oE -- '^\.BR? -[A-Za-z]\b' | awk '{ print $2 }' | sort -u; }
# table_longs FILE...: the long options of these sources' struct option tables.
table_longs() { grep -ohE '\{ "[a-z][a-z0-9-]*", (no|required|optional)_argument' "$@" |
	sed -E 's/\{ "([^"]*)".*/--\1/' | sort -u; }
table_needs_arg() { grep -ohE "\\{ \"${1#--}\", required_argument" "${@:2}" | head -1; }
# table_shorts FILE: the short options of rdmacp's option table (client/option_table.c):
# rows { "name", has_arg, 'X', "config key" or NULL, handler, expect }.
table_shorts() { grep -ohE "\\{ \"[a-z][a-z0-9-]*\", (no|required)_argument, '[A-Za-z]'" "$1" |
	grep -oE "'[A-Za-z]'" | tr -d "'" | sed 's/^/-/' | sort -u; }
# getopt_shorts FILE: the short options of its getopt_long calls.
getopt_shorts() { grep -ohE 'getopt_long\(argc, argv, "[^"]*"' "$1" |
	sed -E 's/.*"\+?([^"]*)"/\1/' | tr -d ':' | grep -oE '[A-Za-z]' | sed 's/^/-/' | sort -u; }

# same_set WHAT A_NAME A B_NAME B: each list holds the other's entries.
same_set() {
	[ -n "${DOCS_DEBUG:-}" ] && echo "  [$1] $2: $(echo $3) | $4: $(echo $5)"
	local what=$1 an=$2 a=$3 bn=$4 b=$5 missing
	a=$(sort -u <<<"$a")
	b=$(sort -u <<<"$b")
	if [ -z "$a" ] || [ -z "$b" ]; then
		fail "$what: nothing found in ${an}${a:+ only} or ${bn} (extraction broken?)"
		return
	fi
	missing=$(comm -23 <(echo "$a") <(echo "$b") | tr '\n' ' ')
	if [ -n "${missing// /}" ]; then
		fail "$what: in $an but not in $bn: $missing"
	else
		pass "$what: everything in $an is in $bn"
	fi
	missing=$(comm -13 <(echo "$a") <(echo "$b") | tr '\n' ' ')
	if [ -n "${missing// /}" ]; then
		fail "$what: in $bn but not in $an: $missing"
	else
		pass "$what: everything in $bn is in $an"
	fi
}

# ---- 1. options ------------------------------------------------------------------
echo "--- 1. options"
C_SRC=("$SRC_DIR/client/option_table.c" "$SRC_DIR/client/certs_cmd.c")
prog=$(table_longs "${C_SRC[@]}")
[ -n "$prog" ] || die "no option table found in client/option_table.c"
man1=$(section "$M1" SYNOPSIS,OPTIONS,SUBCOMMANDS | longs)
help1=$("$RDMACP" --help | longs)
same_set "rdmacp long options" "the program's tables" "$prog" "rdmacp(1)" "$man1"
same_set "rdmacp long options" "the program's tables" "$prog" "rdmacp --help" "$help1"
same_set "rdmacp short options" "the program's table" "$(table_shorts "$SRC_DIR/client/option_table.c")" \
	"rdmacp --help" "$("$RDMACP" --help | help_shorts)"
same_set "rdmacp short options" "the program's table" "$(table_shorts "$SRC_DIR/client/option_table.c")" \
	"rdmacp(1)" "$(section "$M1" OPTIONS | man_shorts)"

# Each documented copy option, run: accepted (then --help exits 0).
certs_opts=$(table_longs "$SRC_DIR/client/certs_cmd.c")
value_for() {
	case $1 in
	--port) echo 7471 ;;
	--cert | --key | --ca | --config) echo /dev/null ;;
	--pin) echo "sha256:$(printf '0%.0s' $(seq 64))" ;;
	--transport) echo tcp ;;
	--lanes | --qps) echo 2 ;;
	--devices) echo rxe0 ;;
	--chunk-size) echo 1M ;;
	--slots) echo 64 ;;
	--bwlimit) echo 1M ;;
	--skip) echo quick ;;
	--exclude-from) echo /dev/null ;;
	--level) echo checksum ;;
	--compress) echo zstd ;;
	--split-size) echo 64M ;;
	*) echo 1 ;;
	esac
}
bad=""
for o in $(sort -u <(echo "$man1") <(echo "$help1")); do
	grep -qx -- "$o" <<<"$certs_opts" && continue
	args=("$o")
	[ -n "$(table_needs_arg "$o" "${C_SRC[@]}")" ] && args+=("$(value_for "$o")")
	[ "$o" = --version ] && args=(--version)
	if ! "$RDMACP" --config /dev/null "${args[@]}" --help >/dev/null 2>"$T/opt.err"; then
		bad+=" ${args[*]} ($(head -1 "$T/opt.err"))"
	fi
done
[ -z "$bad" ] && pass "every documented rdmacp option is accepted" ||
	fail "documented rdmacp options the program refuses:$bad"
# The certs options, run.
if "$RDMACP" certs init "$T/docs-certs" --host docs.example >/dev/null 2>"$T/opt.err" &&
	"$RDMACP" certs issue "$T/docs-certs" --client docs --days 30 --backdate 1 >/dev/null \
		2>>"$T/opt.err"; then
	pass "certs --host, --client, --days, --backdate are accepted"
else
	fail "certs options refused: $(cat "$T/opt.err")"
fi

D_SRC=("$SRC_DIR/daemon/main.c")
dprog=$(table_longs "${D_SRC[@]}")
[ -n "$dprog" ] || die "no option table found in daemon/main.c"
man8=$(section "$M8" SYNOPSIS,OPTIONS | longs)
help8=$("$RDMACPD" --help | longs)
same_set "rdmacpd long options" "the program's table" "$dprog" "rdmacpd(8)" "$man8"
same_set "rdmacpd long options" "the program's table" "$dprog" "rdmacpd --help" "$help8"
same_set "rdmacpd short options" "getopt" "$(getopt_shorts "$SRC_DIR/daemon/main.c")" \
	"rdmacpd --help" "$("$RDMACPD" --help | help_shorts)"
same_set "rdmacpd short options" "getopt" "$(getopt_shorts "$SRC_DIR/daemon/main.c")" \
	"rdmacpd(8)" "$(section "$M8" OPTIONS | man_shorts)"
bad=""
for o in $(sort -u <(echo "$man8") <(echo "$help8")); do
	args=("$o")
	[ -n "$(table_needs_arg "$o" "${D_SRC[@]}")" ] && args+=(/dev/null)
	[ "$o" = --version ] && args=(--version)
	[ "$o" = --check ] && args=(--check)
	if ! "$RDMACPD" "${args[@]}" --help >/dev/null 2>"$T/opt.err"; then
		bad+=" ${args[*]} ($(head -1 "$T/opt.err"))"
	fi
done
[ -z "$bad" ] && pass "every documented rdmacpd option is accepted" ||
	fail "documented rdmacpd options the daemon refuses:$bad"

# ---- 2. config keys --------------------------------------------------------------
echo "--- 2. config keys"
# The daemon's key tables ([global]'s, a module's): { "key", LIST, handler }.
dkeys=$(grep -ohE '^\s*\{ "[a-z][a-z ]*", (true|false), [gm]_[a-z_]+ \}' \
	"$SRC_DIR/daemon/config_global.c" "$SRC_DIR/daemon/config_module.c" |
	sed -E 's/.*\{ "([^"]*)".*/\1/' | sort -u)
[ -n "$dkeys" ] || die "no key table found in daemon/config_global.c, config_module.c"
# rdmacpd.conf(5): each key's own entry, ".BI key " = VALUE"" or ".BI "two words" " = VALUE"".
m5keys=$(grep -E '^\.BI ("[a-z][a-z ]*"|[a-z]+) " = ' "$M5" |
	sed -E 's/^\.BI "?([a-z][a-z ]*[a-z])"? " = .*/\1/' | sort -u)
same_set "rdmacpd.conf keys" "the daemon's key tables" "$dkeys" "rdmacpd.conf(5)" "$m5keys"

# The client's [client] keys, and rdmacp(1)'s FILES section.
# The config keys of rdmacp's option table: its rows' fourth field, when not NULL.
ckeys=$(grep -oE "\\{ (NULL|\"[a-z][a-z0-9-]*\"), (no|required)_argument, ('[A-Za-z]'|0), \"[a-z][a-z ]*\"" \
	"$SRC_DIR/client/option_table.c" | sed -E 's/.*"([^"]*)"$/\1/' | sort -u)
[ -n "$ckeys" ] || die "no config keys found in client/option_table.c"
m1keys=$(section "$M1" FILES | awk '/^\.I ~\/\.config\/rdmacp\/config$/ { on = 1 } /^\.TP/ && on > 1 { exit }
	on { on++; print }' | grep -E '^\.BR? ' | sed -E 's/^\.BR? ([a-z][a-z ]*[a-z])( ,|,)?$/\1/; s/^\.BR? ([a-z]+) .*/\1/' |
	grep -vE '^(client|auto|tcp|verbs)$' | grep -E '^[a-z][a-z ]*$' | sort -u)
same_set "client config keys" "client/option_table.c" "$ckeys" "rdmacp(1) FILES" "$m1keys"
# Each documented client key, run: accepted in a [client] section.
{
	echo "[client]"
	while read -r k; do
		case $k in
		cert | key | ca) echo "$k = /dev/null" ;;
		pin) echo "pin = sha256:$(printf '0%.0s' $(seq 64))" ;;
		port) echo "port = 7471" ;;
		transport) echo "transport = tcp" ;;
		lanes) echo "lanes = 2" ;;
		"chunk size") echo "chunk size = 1M" ;;
		slots) echo "slots = 64" ;;
		"connect timeout") echo "connect timeout = 10" ;;
		devices) echo "devices = rxe0" ;;
		bwlimit) echo "bwlimit = 1M" ;;
		poll | progress) echo "$k = no" ;;
		skip) echo "skip = quick" ;;
		*) echo "$k = 1" ;;
		esac
	done <<<"$m1keys"
} >"$T/client.conf"
if "$RDMACP" --config "$T/client.conf" --help >/dev/null 2>"$T/cc.err"; then
	pass "a client config with every documented key is accepted"
else
	fail "a client config with every documented key is refused: $(cat "$T/cc.err")"
fi

# ---- 3. exit codes ---------------------------------------------------------------
echo "--- 3. exit codes"
readme_codes=$(grep -E '^\| [0-9]+ \|' "$SRC_DIR/README.md" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' |
	sort -n -u)
[ -n "$readme_codes" ] || die "no exit code table in README.md"
man_codes=$(section "$M1" "EXIT STATUS" | grep -oE '^[0-9]+\|' | tr -d '|' | sort -n -u)
help_codes=$("$RDMACP" --help | sed -n '/^Exit codes:/,$p' | grep -oE '(^|[ ,:])[0-9]+ [a-zA-Z]' |
	grep -oE '[0-9]+' | sort -n -u)
enum_codes=$(grep -oE '^\s*EXIT_[A-Z_]+ = [0-9]+' "$SRC_DIR/src/exitcodes.h" | grep -oE '[0-9]+$' |
	sort -n -u)
same_set "exit codes" "src/exitcodes.h" "$enum_codes" "README" "$readme_codes"
same_set "exit codes" "README" "$readme_codes" "rdmacp(1)" "$man_codes"
same_set "exit codes" "README" "$readme_codes" "rdmacp --help" "$help_codes"
untested=""
for n in $readme_codes; do
	if ! grep -qE "(expect_rc $n\b|\"\\\$rc\" -eq $n\b)" $(ls "$SRC_DIR"/tests/integration/t_*.sh |
		grep -v '/t_docs\.sh$'); then
		untested+=" $n"
	fi
done
[ -z "$untested" ] && pass "every exit code in README's table is produced by a test" ||
	fail "exit codes in README's table that no test produces:$untested"

# ---- 4. what the program prints, as rdmacp(1) says -------------------------------
echo "--- 4. --json and -vv as documented"
setup_standard
HOST=127.0.0.1
C=("${CLIENT[@]}" --transport tcp --no-progress)
echo doc >"$T/src1"
directions=$(grep -E '^\.BR direction ' "$M1" | grep -oE '\\\(dq[a-z\\ ]+\\\(dq' |
	sed 's/\\(dq//g; s/\\ / /g' | sort -u)
[ -n "$directions" ] || fail "rdmacp(1) documents no start direction values"
"${C[@]}" --json "$T/src1" "$HOST:data/" >"$T/push.json" 2>"$T/push.err" ||
	fail "--json push: $(cat "$T/push.err")"
mkdir -p "$T/pl"
"${C[@]}" --json "$HOST:data/src1" "$T/pl/renamed" >"$T/pull.json" 2>"$T/pull.err" ||
	fail "--json pull: $(cat "$T/pull.err")"
got=$(cat "$T/push.json" "$T/pull.json" | jq -r 'select(.event == "start") | .direction' | sort -u)
same_set "--json start direction" "rdmacp(1)" "$directions" "the program" "$got"
# One word each, as the summary's transport is: "push", "pull" (not "push to").
[ "$(echo $got)" = "pull push" ] && pass "--json start direction is push or pull" ||
	fail "--json start direction: $(echo $got), wanted pull and push"
# rdmacp(1): on a pull, name is the name stored here (DEST's when it renames).
if [ "$(jq -r 'select(.event == "file") | .name' "$T/pull.json")" = renamed ]; then
	pass "--json name of a renamed pull is DEST's name, as rdmacp(1) says"
else
	fail "--json name of a renamed pull: $(cat "$T/pull.json")"
fi
"${C[@]}" -vv "$T/src1" "$HOST:data/vv/" >/dev/null 2>"$T/vv.err"
"${C[@]}" -v "$T/src1" "$HOST:data/v/" >/dev/null 2>"$T/v.err"
if grep -q "connected to" "$T/vv.err" && ! grep -q "connected to" "$T/v.err"; then
	pass "-vv prints debug lines that -v does not"
else
	fail "-vv prints no debug output: $(cat "$T/vv.err")"
fi
# Each field of a push's summary event, as a ".B field" of rdmacp(1)'s summary entry.
summary_doc=$(awk '/^\.B summary$/ { on = 1; next } on && /^\.TP/ { exit } on' "$M1" |
	grep -oE '^\.BR? [a-z_]+' | awk '{ print $2 }' | sort -u)
summary_got=$(jq -r 'select(.event == "summary") | keys[]' "$T/push.json" | grep -vx event | sort -u)
undocumented=$(comm -13 <(echo "$summary_doc") <(echo "$summary_got") | tr '\n' ' ')
[ -n "$summary_got" ] && [ -z "$undocumented" ] &&
	pass "--json summary: every field is in rdmacp(1)" ||
	fail "--json summary fields not in rdmacp(1): ${undocumented:-no summary event}"

# ---- 5. man pages fit 80 columns ----
command -v man >/dev/null || skip "man not installed (the 80-column check needs it)"
for page in "$SRC_DIR"/man/*.[1-9]; do
	MANWIDTH=80 MAN_KEEP_FORMATTING= man -l "$page" 2>"$T/man.err" >"$T/man.txt" ||
		{ fail "man -l $(basename "$page"): $(head -3 "$T/man.err")"; continue; }
	wide=$(python3 -c '
import sys
for i, l in enumerate(open(sys.argv[1], encoding="utf-8", errors="replace"), 1):
    l = l.rstrip("\n")
    if len(l) > 80:
        print("line %d (%d columns): %s" % (i, len(l), l.strip()[:60]))' "$T/man.txt")
	[ -z "$wide" ] && pass "$(basename "$page") fits 80 columns" ||
		fail "$(basename "$page") wider than 80 columns: $(echo "$wide" | head -3 | tr '\n' '|')"
done

finish
