#!/bin/bash
# --bwlimit (issue 15 item 7), against a real rdmacpd over tcp:
#  - a 4 MiB push and a 4 MiB pull at --bwlimit 1024 (rsync's unit: KiB/s,
#    so 1 MiB/s) each take about 4 s: from the first byte (no chunk or ring
#    of burst ahead of the clock), and pulls too (the client, receiving,
#    hands credits back no faster than the limit);
#  - --bwlimit 500 is 500 KiB/s (a bare number was bytes per second);
#  - the summary and the progress line give rates in the same units.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

setup_standard
mkdir -p "$T/src" "$T/got"
head -c $((4 << 20)) /dev/urandom >"$T/src/four.bin"
head -c $((1 << 20)) /dev/urandom >"$T/src/one.bin"

# timed WANT_MIN WANT_MAX DESC CMD...: exit 0 and a wall time within [min, max) seconds.
timed() {
	local lo=$1 hi=$2 desc=$3 t0 t1 rc secs
	shift 3
	t0=$(date +%s.%N)
	timeout 60 "$@" >"$T/out" 2>"$T/err"
	rc=$?
	t1=$(date +%s.%N)
	secs=$(echo "$t1 - $t0" | bc -l)
	if [ "$rc" -eq 0 ] && [ "$(echo "$secs >= $lo && $secs < $hi" | bc -l)" = 1 ]; then
		pass "$desc: $(printf %.2f "$secs") s"
	else
		fail "$desc: exit $rc after $(printf %.2f "$secs") s, wanted [$lo, $hi) s"
		sed 's/^/    /' "$T/err" | head
	fi
}

timed 3.5 8 "push of 4 MiB at --bwlimit 1024" \
	"${CLIENT[@]}" --transport tcp --bwlimit 1024 "$T/src/four.bin" 127.0.0.1:data/four.bin
cmp -s "$T/src/four.bin" "$T/mod/four.bin" || fail "push at --bwlimit 1024: file differs"

# The pull's source is put in place directly: this check does not depend on the push.
cp "$T/src/four.bin" "$T/mod/pull.bin"
timed 3.5 8 "pull of 4 MiB at --bwlimit 1024" \
	"${CLIENT[@]}" --transport tcp --bwlimit 1024 127.0.0.1:data/pull.bin "$T/got/four.bin"
cmp -s "$T/src/four.bin" "$T/got/four.bin" || fail "pull at --bwlimit 1024: file differs"

# 1 MiB at 500 KiB/s: about 2 s (as bytes per second it would be 35 minutes).
timed 1.7 5 "push of 1 MiB at --bwlimit 500 (KiB/s)" \
	"${CLIENT[@]}" --transport tcp --bwlimit 500 "$T/src/one.bin" 127.0.0.1:data/one.bin
timed 1.7 5 "push of 1 MiB at --bwlimit 500K" \
	"${CLIENT[@]}" --transport tcp --bwlimit 500K "$T/src/one.bin" 127.0.0.1:data/one500k.bin

# Progress line and summary: one unit family (binary, per second).
"${CLIENT[@]}" --transport tcp --progress --bwlimit 2M "$T/src/four.bin" \
	127.0.0.1:data/prog.bin 2>"$T/err"
tr '\r' '\n' <"$T/err" >"$T/lines"
prog=$(grep -E '%' "$T/lines" | grep -Eo '[0-9.]+ (B|KiB|MiB|GiB)/s' | tail -1)
summ=$(grep -E 'files, .* bytes in' "$T/lines" | grep -Eo '\([0-9.]+ (B|KiB|MiB|GiB)/s\)')
if [ -n "$prog" ] && [ -n "$summ" ] && ! grep -q 'MB/s' "$T/lines"; then
	pass "progress ($prog) and summary $summ in the same units"
else
	fail "progress '$prog' and summary '$summ' disagree or are missing:"
	sed 's/^/    /' "$T/lines" | tail -5
fi
# At 2 MiB/s, the progress line's rate never reads above the limit by much.
if grep -E '%' "$T/lines" | grep -Eo '[0-9.]+ (KiB|MiB|GiB)/s' | awk '
	/GiB/ {bad=1} /MiB/ && $1 > 2.3 {bad=1} END {exit bad}'; then
	pass "progress rates stay at the limit"
else
	fail "progress rate above --bwlimit 2M: $(grep -E '%' "$T/lines" | tail -3)"
fi

"${CLIENT[@]}" --help >"$T/help"
grep -q -- "--bwlimit RATE" "$T/help" && grep -q "KiB/s" "$T/help" &&
	pass "--help gives --bwlimit's units" || fail "--help does not give --bwlimit's units"

finish
