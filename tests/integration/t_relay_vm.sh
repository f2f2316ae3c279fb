#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fan-out over verbs lanes: boots the Soft-RoCE VM (tests/rxe-vm/run) once
# and runs tests/rxe-vm/relay.sh in it: a client pushes through daemon A
# (rxe1), whose relay child pushes on to daemon B (rxe0), a file and a tree,
# clear and sealed, byte-exact at both hops. The logs stay in
# $BUILD_DIR/rxe-vm-relay (RXEVM_RELAY_OUT overrides).
#
# Skips (77, reason printed) when the VM cannot run here, as t_verbs_vm
# does. Never passes without having run the checks in the VM.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RUN=$SRC_DIR/tests/rxe-vm/run
CACHE=${RXEVM_CACHE:-/var/tmp/rxevm}
SCRIPT=$SRC_DIR/tests/rxe-vm/relay.sh
OUT=${RXEVM_RELAY_OUT:-$BUILD_DIR/rxe-vm-relay}

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

. "$SRC_DIR/tests/rxe-vm/host-lib.sh"

rxevm_skip_asan
[ "$(cache_var ENABLE_VERBS)" = OFF ] && skip "built without the verbs transport (ENABLE_VERBS=OFF)"
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
124) die "the VM run timed out after ${RXEVM_TIMEOUT}s (logs in $OUT)" ;;
125) die "the VM or its Soft-RoCE setup failed (see the console log above)" ;;
*) die "relay chain checks failed in the VM (rc $rc, ${elapsed}s; logs in $OUT)" ;;
esac
echo "ok: a two-hop relay chain over verbs lanes in the Soft-RoCE VM (${elapsed}s)"
exit 0
