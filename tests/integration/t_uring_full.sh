#!/bin/bash
# SPDX-License-Identifier: MIT
#
# io_uring's completion queue full. Nothing bounds the operations in flight
# by its size: a receiver of thousands of small files has more writes, links
# and syncs in flight than it holds. The kernel keeps the rest aside and
# flags the ring, with no eventfd signal; a loop that reaps only when
# signalled waits for them forever (the daemon's session with it: its own
# I/O "in flight" keeps it from idling out). The test hook *_SMALL_RING
# gives an end an io_uring of 8 entries (16 completions), so that every run
# here overflows it many times:
#   1. a push of 3,000 small files to a daemon with the small ring: whole,
#      and the daemon's log counts the overflows (the hook did its work)
#   2. the same from a client with the small ring (its reads)
#   3. a pull by a client with the small ring (its writes, links and syncs)
# Each run has 45 s: the stall this guards against ends only at the idle
# timeout (60 s).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1

export RDMACPD_TEST_SMALL_RING=1
setup_standard
unset RDMACPD_TEST_SMALL_RING
mkdir -p "$T/src" "$T/pull"

python3 - "$T/src/many" <<'EOF' || die "make many"
import os, sys, random
d = sys.argv[1]
os.makedirs(d)
r = random.Random(7)
for i in range(3000):
    n = 0 if i % 499 == 0 else r.randint(1, 4096)
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(r.randbytes(n))
EOF

# The daemon's sessions so far that said their queue was full.
overflows() { grep -c "io_uring's completion queue was full" "$T/d.log"; }

# ---- 1. the daemon's ring ------------------------------------------------------
expect_rc 0 "push to a small ring" timeout 45 "${CLIENT[@]}" --transport tcp -q -r \
	"$T/src/many" "$HOST:data/"
expect_same_tree "push to a small ring" "$T/src/many" "$T/mod/many"
[ "$(overflows)" -ge 1 ] && pass "push to a small ring: the daemon's queue was full" ||
	fail "push to a small ring: no overflow logged (the hook did not work)"

# ---- 2. the client's ring, sending ---------------------------------------------
rm -rf "$T/mod/many"
RDMACP_TEST_SMALL_RING=1 expect_rc 0 "push from a small ring" timeout 45 "${CLIENT[@]}" \
	--transport tcp -q -r "$T/src/many" "$HOST:data/"
expect_same_tree "push from a small ring" "$T/src/many" "$T/mod/many"

# ---- 3. the client's ring, receiving -------------------------------------------
RDMACP_TEST_SMALL_RING=1 expect_rc 0 "pull into a small ring" timeout 45 "${CLIENT[@]}" \
	--transport tcp -q -r "$HOST:data/many" "$T/pull/"
expect_same_tree "pull into a small ring" "$T/src/many" "$T/pull/many"

finish
