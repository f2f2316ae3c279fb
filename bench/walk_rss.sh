#!/usr/bin/env bash
# Peak memory of the daemon's session process for pulls of trees of different
# sizes, and for a GET naming one tree 256 times (issue 8 item 6: the walk must
# stream, and duplicate GET paths must be walked once); and of the client for
# pushes of the same trees (issue 12: a push walks while it sends).
#
# usage: bench/walk_rss.sh [BIG [SMALL]]   (default 100000 and 2000 empty files)
#
# Each pull runs against a real rdmacpd on loopback. The figure is VmHWM of
# the session process: the daemon's own debug line at session end where the
# build has it, else the highest value read from /proc/PID/status while the
# pull ran. RDMACP_BUILD_DIR picks the build (default <repo>/build), so an
# older build can be measured the same way. Takes about a minute for 100,000.
set -u
BIG=${1:-100000}
SMALL=${2:-2000}
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/integration/lib.sh"

# peak LOG CLIENT-ARGS...: run one pull, print the session's VmHWM in kB.
peak() {
	local log=$1 before pid="" cpid v line port max=0
	shift
	before=$(grep -c ' started$' "$log")
	"$@" >"$T/out" 2>"$T/err" &
	cpid=$!
	while kill -0 "$cpid" 2>/dev/null; do
		if [ -z "$pid" ]; then
			line=$(grep ' started$' "$log" | sed -n "$((before + 1))p")
			pid=$(sed -n 's/.*session \([0-9]*\) from .*/\1/p' <<<"$line")
		fi
		if [ -n "$pid" ]; then
			v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
			[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
		fi
		sleep 0.01
	done
	wait "$cpid" || echo "  (client exit $?: $(head -1 "$T/err"))" >&2
	# A quick pull may end before the loop saw its session start.
	if [ -z "$pid" ]; then
		line=$(grep ' started$' "$log" | sed -n "$((before + 1))p")
		pid=$(sed -n 's/.*session \([0-9]*\) from .*/\1/p' <<<"$line")
	fi
	for _ in $(seq 1 100); do
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.05
	done
	port=$(sed -n 's/.* from [0-9.]*:\([0-9]*\) started$/\1/p' <<<"$line")
	v=$(grep ":$port: session peak memory" "$log" | sed -n 's/.*memory \([0-9]*\) kB.*/\1/p' | tail -1)
	echo "${v:-$max}"
}

setup_standard
for n in "$BIG" "$SMALL"; do
	mkdir -p "$T/mod/t$n"
	(cd "$T/mod/t$n" && seq -f "f%07g" 1 "$n" | xargs touch) || die "tree of $n"
done
args=()
for i in $(seq 1 256); do args+=("127.0.0.1:data/t$SMALL"); done

run() {
	local desc=$1 kb t0 t1
	shift
	rm -rf "$T/dst" && mkdir -p "$T/dst"
	t0=$(date +%s.%N)
	kb=$(peak "$T/d.log" "${CLIENT[@]}" -r "$@" "$T/dst/")
	t1=$(date +%s.%N)
	printf '%-40s %8s kB  (%.1f s)\n' "$desc" "$kb" "$(echo "$t1 - $t0" | bc)"
}
echo "session VmHWM, build $BUILD_DIR"
run "pull -r of $SMALL files" "127.0.0.1:data/t$SMALL"
run "pull -r of $BIG files" "127.0.0.1:data/t$BIG"
run "pull -r of $SMALL files named 256 times" "${args[@]}"

push_run() {
	local n=$1 kb
	rm -rf "$T/mod/push"
	/usr/bin/time -o "$T/push.rss" -f '%M' "${CLIENT[@]}" -q -r "$T/mod/t$n/" \
		127.0.0.1:data/push/ >/dev/null 2>"$T/push.err" ||
		echo "  (client exit $?: $(head -1 "$T/push.err"))" >&2
	kb=$(tail -1 "$T/push.rss")
	printf '%-40s %8s kB\n' "push -r of $n files (client maxrss)" "$kb"
}
command -v /usr/bin/time >/dev/null || die "GNU time (/usr/bin/time) needed for the push runs"
push_run "$SMALL"
push_run "$BIG"
