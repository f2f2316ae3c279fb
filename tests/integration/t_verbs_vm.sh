#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The verbs transport on real verbs: boots the Soft-RoCE VM (tests/rxe-vm/run)
# once and runs inside it
#  1. tests/unit/test_verbs_loop (rdma_cm setup with the token, WRITE /
#     WRITE_WITH_IMM byte-exact, a wrong session token rejected at RDMA
#     connect, remote access errors leaving the target untouched, teardown
#     with writes in flight, a lane from the VM's other address rejected);
#  2. tests/rxe-vm/e2e.sh: rdmacp doctor (rxe0/rxe1 ACTIVE, RoCE v2 GIDs), then
#     real rdmacpd (10.0.0.2, rxe1) and rdmacp (10.0.0.1, rxe0) processes:
#     verbs push of 0/1/chunk-1/chunk/chunk+1/3 MiB files and a tree, verbs
#     pull, packed slots (300 small files; the packed format's edges: empty,
#     exactly a chunk, spanning chunks, nested, beside big files) on both
#     verbs paths, --transport auto choosing verbs, the same push set over tcp, and
#     kill -9 of the daemon's session process mid-transfer; then the WRITE +
#     SEND path (iWARP's, forced by a test switch) end to end and its
#     negotiation with peers that lack it. The VM's kernel (Debian's) has no
#     Soft-iWARP (CONFIG_RDMA_SIW unset): real iWARP is not run here.
# The logs of step 2 stay in $BUILD_DIR/rxe-vm-e2e (RXEVM_E2E_OUT overrides).
#
# Skips (77, reason printed) when the VM cannot run here: no qemu or helper
# tools, no Soft-RoCE provider, or no kernel image cached and none can be
# fetched. Never passes without having run the checks in the VM. Runs in the
# normal build only: CI's ASan build skips it to save time.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RUN=$SRC_DIR/tests/rxe-vm/run
CACHE=${RXEVM_CACHE:-/var/tmp/rxevm}
LOOP=$BUILD_DIR/tests/test_verbs_loop
E2E=$SRC_DIR/tests/rxe-vm/e2e.sh
OUT=${RXEVM_E2E_OUT:-$BUILD_DIR/rxe-vm-e2e}

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

. "$SRC_DIR/tests/rxe-vm/host-lib.sh"

rxevm_skip_asan
[ "$(cache_var ENABLE_VERBS)" = OFF ] && skip "built without the verbs transport (ENABLE_VERBS=OFF)"
[ -x "$LOOP" ] || die "$LOOP not built"
[ -x "$BUILD_DIR/rdmacp" ] && [ -x "$BUILD_DIR/rdmacpd" ] || die "rdmacp/rdmacpd not built in $BUILD_DIR"

rxevm_require_tools jq pgrep -- jq procps

export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1440}
start=$(date +%s)

rxevm_require_kernel

rm -rf "$OUT" && mkdir -p "$OUT" || die "cannot create $OUT"
# One boot for both steps (a boot costs ~7 s); each step's status comes back apart.
RXEVM_OUT=$OUT "$RUN" bash -c '"$1"; echo $? >"$3/loop.rc"; exec bash "$2" "$4" "$3"' \
	_ "$LOOP" "$E2E" "$OUT" "$BUILD_DIR"
rc=$?
elapsed=$(($(date +%s) - start))
case $rc in
124) die "the VM run timed out after ${RXEVM_TIMEOUT}s (logs in $OUT)" ;;
125) die "the VM or its Soft-RoCE setup failed (see the console log above)" ;;
esac
loop_rc=$(cat "$OUT/loop.rc" 2>/dev/null || echo none)
case $loop_rc in
0) echo "ok: test_verbs_loop passed in the Soft-RoCE VM" ;;
77) die "test_verbs_loop found no RDMA device inside the VM" ;;
*) die "test_verbs_loop failed in the VM (rc $loop_rc)" ;;
esac
if [ "$rc" -ne 0 ]; then
	# The checks print hundreds of lines and CI keeps only the ends of a test's
	# output: repeat each failed check here, last, where it is seen.
	echo "the failed checks:"
	# Every step's log: e2e.sh, rails*.sh, readd.sh and faults.sh each keep their own.
	grep -h "FAIL:" "$OUT"/*.log "$OUT"/faults/*.log 2>/dev/null |
		cut -c1-800 | sed 's/^/  /'
	die "end-to-end checks failed in the VM (rc $rc, ${elapsed}s; logs in $OUT)"
fi
echo "ok: end-to-end checks passed in the Soft-RoCE VM (whole VM run ${elapsed}s)"
exit 0
