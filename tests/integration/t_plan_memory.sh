#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Plans stream: the peak RSS of `rdmacp plan` and `rdmacp report` over a
# tree of 100,000 entries (8 shards) is that of one of 10,000 entries, give
# or take 4 MiB: neither holds the plan. The same for zstd plans (-o
# PLAN.zst), written and read through bounded buffers. (A shard's run holds one batch of
# names at a time; finalize one 40-byte record per journaled name.)
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

# ASan keeps freed memory in its quarantine (256 MiB): RSS says nothing there.
[[ "${RDMACP_BUILD_DIR:-}" == *asan* ]] && skip "peak RSS under ASan measures its quarantine"

# peak_kb CMD...: run it, print its peak RSS in KiB (ru_maxrss of the child).
peak_kb() {
	python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -rc - 1)' "$@"
}

# make_tree DIR N: N-1 empty files in directories of 1000, under DIR.
make_tree() {
	python3 -c '
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
d = None
for i in range(n - 1):
    if i % 1000 == 0:
        d = os.path.join(root, "d%04d" % (i // 1000))
        os.mkdir(d)
        continue
    open(os.path.join(d, "f%06d" % i), "w").close()' "$1" "$2"
}

# The trees in memory where there is a tmpfs: 110,000 files made and removed in seconds.
W=$T
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	W=$(mktemp -d /dev/shm/rdmacp-plan.XXXXXX) || W=$T
fi
cleanup_memory() {
	[ "$W" != "$T" ] && rm -rf "$W"
	cleanup
}
trap cleanup_memory EXIT

C=("$RDMACP" --config /dev/null -q)
make_tree "$W/small" 10000
make_tree "$W/big" 100000
ps=$(peak_kb "${C[@]}" plan -r --shards 8 "$W/small" 127.0.0.1:data/x -o "$W/small.plan")
pb=$(peak_kb "${C[@]}" plan -r --shards 8 "$W/big" 127.0.0.1:data/x -o "$W/big.plan")
echo "    plan: 10,000 entries $ps KiB, 100,000 entries $pb KiB"
[ "$ps" -gt 0 ] && [ "$pb" -gt 0 ] || die "plan failed"
[ "$(head -1 "$W/big.plan" | python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"])')" -eq 100000 ] &&
	pass "the big plan has 100,000 entries" || fail "big plan: $(head -c 300 "$W/big.plan")"
[ "$pb" -le $((ps + 4096)) ] && pass "plan: peak RSS flat ($ps -> $pb KiB)" || fail "plan: peak RSS grows: $ps -> $pb KiB"
rs=$(peak_kb "${C[@]}" report "$W/small.plan")
rb=$(peak_kb "${C[@]}" report "$W/big.plan")
echo "    report: 10,000 entries $rs KiB, 100,000 entries $rb KiB"
[ "$rs" -gt 0 ] && [ "$rb" -gt 0 ] && [ "$rb" -le $((rs + 4096)) ] && pass "report: peak RSS flat ($rs -> $rb KiB)" ||
	fail "report: peak RSS $rs -> $rb KiB"
zps=$(peak_kb "${C[@]}" plan -r --shards 8 "$W/small" 127.0.0.1:data/x -o "$W/small.plan.zst")
zpb=$(peak_kb "${C[@]}" plan -r --shards 8 "$W/big" 127.0.0.1:data/x -o "$W/big.plan.zst")
echo "    zstd plan: 10,000 entries $zps KiB, 100,000 entries $zpb KiB"
[ "$zps" -gt 0 ] && [ "$zpb" -gt 0 ] && [ "$zpb" -le $((zps + 4096)) ] &&
	pass "zstd plan: peak RSS flat ($zps -> $zpb KiB)" || fail "zstd plan: peak RSS $zps -> $zpb KiB"
[ "$(head -c 4 "$W/big.plan.zst" | od -An -tx1 | tr -d ' ')" = "28b52ffd" ] &&
	[ "$(stat -c %s "$W/big.plan.zst")" -lt "$(stat -c %s "$W/big.plan")" ] &&
	pass "the zstd plan is zstd, and smaller" || fail "big.plan.zst is not a smaller zstd frame"
zrs=$(peak_kb "${C[@]}" report "$W/small.plan.zst")
zrb=$(peak_kb "${C[@]}" report "$W/big.plan.zst")
echo "    report (zstd): 10,000 entries $zrs KiB, 100,000 entries $zrb KiB"
[ "$zrs" -gt 0 ] && [ "$zrb" -gt 0 ] && [ "$zrb" -le $((zrs + 4096)) ] &&
	pass "report of a zstd plan: peak RSS flat ($zrs -> $zrb KiB)" || fail "report (zstd): peak RSS $zrs -> $zrb KiB"
finish
