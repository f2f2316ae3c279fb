#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The verbs data path against a hostile peer (security issue 31): boots the
# Soft-RoCE VM (tests/rxe-vm/run) once and runs tests/rxe-vm/hostile.sh
# inside it: a real rdmacpd (10.0.0.2, rxe1) and the hostile client rawpeer
# (10.0.0.1, rxe0) on real verbs lanes. Attacked: a slot rewritten after its
# descriptor arrived, then FILE_DONE with the hash of the rewritten bytes
# (G43: the daemon hashes and writes its private copy; INTEGRITY, nothing
# committed with bytes other than the hashed ones); WRITEs with a wrong rkey,
# past, across and far outside the registration (remote access error, the
# session ends, nothing committed); descriptors of a wrong length, past the
# file's size, a short descriptor immediate, a credit immediate to the
# receiver; LANE_DOWN without the rails capability, for a lane the session
# lacks, with counts out of range (ERROR PROTOCOL). Afterwards the daemon
# runs, no session was killed by a signal, and a correct verbs push lands.
# The logs stay in $BUILD_DIR/rxe-vm-hostile (RXEVM_HOSTILE_OUT overrides).
#
# Skips (77, reason printed) when the VM cannot run here, as t_verbs_vm does:
# no qemu or helper tools, no Soft-RoCE provider, or no kernel image cached
# and none can be fetched. Never passes without having run the checks in the
# VM. Runs in the normal build only: CI's ASan build skips it to save time.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RUN=$SRC_DIR/tests/rxe-vm/run
CACHE=${RXEVM_CACHE:-/var/tmp/rxevm}
HOSTILE=$SRC_DIR/tests/rxe-vm/hostile.sh
OUT=${RXEVM_HOSTILE_OUT:-$BUILD_DIR/rxe-vm-hostile}

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

. "$SRC_DIR/tests/rxe-vm/host-lib.sh"

rxevm_skip_asan
[ "$(cache_var ENABLE_VERBS)" = OFF ] && skip "built without the verbs transport (ENABLE_VERBS=OFF)"
[ -x "$BUILD_DIR/rdmacp" ] && [ -x "$BUILD_DIR/rdmacpd" ] || die "rdmacp/rdmacpd not built in $BUILD_DIR"
[ -x "$BUILD_DIR/tests/rawpeer" ] || die "rawpeer not built in $BUILD_DIR/tests"

rxevm_require_tools

export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-600}
start=$(date +%s)

rxevm_require_kernel

rm -rf "$OUT" && mkdir -p "$OUT" || die "cannot create $OUT"
RXEVM_OUT=$OUT "$RUN" bash "$HOSTILE" "$BUILD_DIR" "$OUT"
rc=$?
elapsed=$(($(date +%s) - start))
case $rc in
0) ;;
124) die "the VM run timed out after ${RXEVM_TIMEOUT}s (logs in $OUT)" ;;
125) die "the VM or its Soft-RoCE setup failed (see the console log above)" ;;
*)
	# CI keeps only the ends of a test's output: the failed checks again, last.
	echo "the failed checks:"
	grep -h "FAIL:" "$OUT/hostile.log" 2>/dev/null | cut -c1-400 | sed 's/^/  /'
	die "hostile verbs checks failed in the VM (rc $rc, ${elapsed}s; logs in $OUT)"
	;;
esac
echo "ok: the verbs data path held against the hostile peer in the Soft-RoCE VM (${elapsed}s)"
exit 0
