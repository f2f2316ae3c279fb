#!/bin/bash
# Options anywhere, as GNU tools and rsync take them (issue 15 item 4):
# `rdmacp a host:mod/ -v`, `rdmacp ping host -P PORT`, options after a
# subcommand's operands, and "--" ending the options (then "-v" is a file).
. "$(dirname "$0")/lib.sh"

setup_standard
HOST=127.0.0.1
# The client without -P: each check puts the port where it wants it.
BASE=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" --transport tcp --no-progress)
mkdir -p "$T/src" "$T/got"
echo one >"$T/src/a"
mkdir -p "$T/src/tree/sub"
echo deep >"$T/src/tree/sub/f"

# has DESC REGEX: the last command's stderr matches.
has() {
	if grep -qE -- "$2" "$T/err"; then
		pass "$1"
	else
		fail "$1: no /$2/ in:"
		sed 's/^/    /' "$T/err" | head -10
	fi
}

expect_rc 0 "push with -v and -P after the operands" "${BASE[@]}" "$T/src/a" "$HOST:data/" -v \
	-P "$PORT"
has "-v after the operands prints the verified checksum" "<f[+]{9} a  4 bytes, xxh128 "
cmp -s "$T/src/a" "$T/mod/a" || fail "the pushed file differs"

expect_rc 0 "push -r with -r and --port=PORT last" "${BASE[@]}" "$T/src/tree" "$HOST:data/t/" -r \
	--port="$PORT"
cmp -s "$T/src/tree/sub/f" "$T/mod/t/tree/sub/f" || fail "the tree did not arrive"

expect_rc 0 "pull with -P between the operands" "${BASE[@]}" "$HOST:data/a" -P "$PORT" "$T/got/"
cmp -s "$T/src/a" "$T/got/a" || fail "the pulled file differs"

expect_rc 0 "ping HOST -P PORT" "${BASE[@]}" ping "$HOST" -P "$PORT"
grep -q "protocol" "$T/out" || fail "ping printed no answer: $(cat "$T/out")"
expect_rc 0 "-P PORT ping HOST (options before the subcommand)" "${BASE[@]}" -P "$PORT" ping "$HOST"
expect_rc 0 "ping -P PORT HOST" "${BASE[@]}" ping -P "$PORT" "$HOST"

# -n (dry run) after the operands: nothing is written.
expect_rc 0 "dry run with -n last" "${BASE[@]}" -P "$PORT" "$T/src/a" "$HOST:data/dry/" -n
[ ! -e "$T/mod/dry" ] || fail "-n after the operands still copied"

# "--" ends the options: "-v" after it is a file name.
(cd "$T/src" && echo dash >./-v)
expect_rc 0 "-- makes -v a file name" sh -c 'cd "$1/src" && shift && "$@"' sh "$T" "${BASE[@]}" \
	-P "$PORT" -- -v "$HOST:data/dash/"
[ "$(cat "$T/mod/dash/-v" 2>/dev/null)" = dash ] || fail "the file named -v did not arrive"
# ... and a subcommand's name after "--" is a file name too.
(cd "$T/src" && echo notping >./ping)
expect_rc 0 "-- ping: a file named ping, not the subcommand" sh -c 'cd "$1/src" && shift && "$@"' \
	sh "$T" "${BASE[@]}" -P "$PORT" -- ping "$HOST:data/dash/"
[ "$(cat "$T/mod/dash/ping" 2>/dev/null)" = notping ] || fail "the file named ping did not arrive"

# An unknown option is still a usage error wherever it is.
expect_rc 1 "an unknown option after the operands is a usage error" "${BASE[@]}" "$T/src/a" \
	"$HOST:data/" --no-such-option
has "the usage error names the option" "no-such-option"

# certs: options before or after VERB DIR.
expect_rc 0 "certs init with --host before DIR" "$RDMACP" certs init --host h1.example "$T/c2"
expect_rc 0 "certs issue DIR with --client before the verb's DIR" "$RDMACP" certs issue --client \
	bob "$T/c2"
[ -f "$T/c2/bob.crt" ] || fail "certs issue made no bob.crt"

finish
