#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A usage error is told in at most three lines on stderr, never the whole
# --help: the error ("PROG: ..."), "did you mean '--x'?" for a misspelt long
# option, and "Try 'PROG --help' for more information.". Exit code 1 (usage,
# rdmacp(1) EXIT STATUS; rdmacpd(8)). For rdmacp and rdmacpd alike:
#   an unknown option, a misspelt long option (the suggestion shown), a
#   missing argument; a name too far from any option gets no suggestion;
#   rdmacp certs' own options the same way (its usage line last).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

# usage_err DESC PROG WANT_LINE1_RE [SUGGESTION] -- ARGS...
usage_err() {
	local desc=$1 prog=$2 re=$3 sugg=$4 name lines
	shift 5
	name=$(basename "$prog")
	expect_rc 1 "$desc" "$prog" "$@"
	lines=$(wc -l <"$T/err")
	[ "$lines" -le 3 ] && pass "$desc: $lines lines on stderr" ||
		fail "$desc: $lines lines on stderr: $(head -5 "$T/err" | tr '\n' '|')"
	[ -s "$T/out" ] && fail "$desc: something on stdout: $(head -3 "$T/out")"
	head -1 "$T/err" | grep -qE "^$name: $re\$" && pass "$desc: says what is wrong" ||
		fail "$desc: first line: $(head -1 "$T/err")"
	if [ -n "$sugg" ]; then
		grep -qxF "$name: did you mean '$sugg'?" "$T/err" && pass "$desc: suggests $sugg" ||
			fail "$desc: no suggestion of $sugg: $(tr '\n' '|' <"$T/err")"
	else
		grep -q "did you mean" "$T/err" && fail "$desc: suggests: $(tr '\n' '|' <"$T/err")"
	fi
	tail -1 "$T/err" | grep -qxF "Try '$name --help' for more information." &&
		pass "$desc: says where help is" || fail "$desc: last line: $(tail -1 "$T/err")"
}

C=("$RDMACP" --config /dev/null)
usage_err "rdmacp unknown option" "$RDMACP" "unrecognized option '--xyzzy'" "" -- \
	"${C[@]:1}" --xyzzy a b
usage_err "rdmacp misspelt option" "$RDMACP" "unrecognized option '--recusive'" --recursive -- \
	"${C[@]:1}" --recusive a b
usage_err "rdmacp misspelt option with =" "$RDMACP" "unrecognized option '--prot'" --port -- \
	"${C[@]:1}" --prot=7000 a b
usage_err "rdmacp unknown short option" "$RDMACP" "invalid option -- 'Z'" "" -- \
	"${C[@]:1}" -Z a b
usage_err "rdmacp missing argument" "$RDMACP" "option '--lanes' requires an argument" "" -- \
	"${C[@]:1}" a b --lanes
usage_err "rdmacp missing argument (short)" "$RDMACP" "option requires an argument -- 'P'" "" -- \
	"${C[@]:1}" a b -P
usage_err "rdmacp flag with a value" "$RDMACP" "option '--partial' doesn't allow an argument" "" -- \
	"${C[@]:1}" --partial=yes a b

# rdmacp certs has options of its own: the same error and suggestion, then its usage line.
expect_rc 1 "rdmacp certs misspelt option" "$RDMACP" certs init "$T/c" --hots x
[ "$(wc -l <"$T/err")" -le 3 ] && head -1 "$T/err" | grep -qxF "rdmacp: unrecognized option '--hots'" &&
	grep -qxF "rdmacp: did you mean '--host'?" "$T/err" && grep -q "usage: rdmacp certs" "$T/err" &&
	pass "certs: error, suggestion, usage line" || fail "certs: $(tr '\n' '|' <"$T/err")"

usage_err "rdmacpd unknown option" "$RDMACPD" "unrecognized option '--xyzzy'" "" -- --xyzzy
usage_err "rdmacpd misspelt option" "$RDMACPD" "unrecognized option '--chek'" --check -- \
	--config /dev/null --chek
usage_err "rdmacpd missing argument" "$RDMACPD" "option '--config' requires an argument" "" -- \
	--config
usage_err "rdmacpd no config" "$RDMACPD" "--config FILE is required" "" --
usage_err "rdmacpd stray operand" "$RDMACPD" "unexpected argument 'x'" "" -- --config /dev/null x

# --help itself still prints the whole text, on stdout, and exits 0.
expect_rc 0 "rdmacp --help" "$RDMACP" --help
[ "$(wc -l <"$T/out")" -gt 20 ] && pass "--help: the whole text on stdout" || fail "--help: short"
finish
