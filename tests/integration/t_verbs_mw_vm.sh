#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The zero-copy slot fence by memory windows on real verbs: boots the
# Soft-RoCE VM (tests/rxe-vm/run) once and runs tests/rxe-vm/mwfence.sh in
# it: test_verbs_window (a slot written through its type-2 window, its
# descriptor a SEND_WITH_INV naming the window's key; a late write into the
# fenced slot gets IBV_WC_REM_ACCESS_ERR with the slot unchanged; stale keys,
# other lanes and locally closed windows refused; a lost lane's window
# reopened on another lane, or let go on the lost lane and its key refused),
# then sessions: a push and a pull with windows, and with rails on two
# devices (a lane lost mid-copy included), that must stay byte-exact, and a
# rewritten fenced slot refused. The logs stay in $BUILD_DIR/rxe-vm-mw
# (RXEVM_MW_OUT overrides).
#
# Skips (77, reason printed) when the VM cannot run here, as t_verbs_vm does,
# or when the VM kernel's Soft-RoCE has no type-2 windows (before Linux
# 5.14). Never passes without having run the checks in the VM.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RUN=$SRC_DIR/tests/rxe-vm/run
CACHE=${RXEVM_CACHE:-/var/tmp/rxevm}
SCRIPT=$SRC_DIR/tests/rxe-vm/mwfence.sh
OUT=${RXEVM_MW_OUT:-$BUILD_DIR/rxe-vm-mw}

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

. "$SRC_DIR/tests/rxe-vm/host-lib.sh"

rxevm_skip_asan
[ "$(cache_var ENABLE_VERBS)" = OFF ] && skip "built without the verbs transport (ENABLE_VERBS=OFF)"
[ -x "$BUILD_DIR/tests/test_verbs_window" ] || die "test_verbs_window not built in $BUILD_DIR/tests"
[ -x "$BUILD_DIR/rdmacp" ] && [ -x "$BUILD_DIR/rdmacpd" ] || die "rdmacp/rdmacpd not built in $BUILD_DIR"

rxevm_require_tools

export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-500}
start=$(date +%s)

rxevm_require_kernel

rm -rf "$OUT" && mkdir -p "$OUT" || die "cannot create $OUT"
RXEVM_OUT=$OUT "$RUN" bash "$SCRIPT" "$BUILD_DIR" "$OUT"
rc=$?
elapsed=$(($(date +%s) - start))
case $rc in
0) ;;
77) skip "the VM kernel's Soft-RoCE has no type-2 memory windows (see above)" ;;
124) die "the VM run timed out after ${RXEVM_TIMEOUT}s (logs in $OUT)" ;;
125) die "the VM or its Soft-RoCE setup failed (see the console log above)" ;;
*) die "memory-window fence checks failed in the VM (rc $rc, ${elapsed}s; logs in $OUT)" ;;
esac
echo "ok: the memory-window fence held in the Soft-RoCE VM (${elapsed}s)"
exit 0
