#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/workerrate.sh BUILD [CHUNK_KIB [TOTAL_MIB [SECONDS]]]: the per-core rates of a
# worker thread's jobs on this CPU (bench/workerrate.c: copy, copy+hash, copy+open,
# seal, ...), built against BUILD's librdmacp_core.a. Run it on a quiet machine; the
# rates are CPU-time rates of one thread (CLOCK_THREAD_CPUTIME_ID), so another
# process on the core slows the wall clock, not the rate.
set -eu
die() { echo "workerrate: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: bench/workerrate.sh BUILD [CHUNK_KIB [TOTAL_MIB [SECONDS]]]"
BUILD=$(realpath "$1")
shift
TOP=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$BUILD/librdmacp_core.a" ] || die "no librdmacp_core.a in $BUILD"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
LIBS=$(pkg-config --libs openssl liburing libxxhash)
for p in libibverbs librdmacm; do
	pkg-config --exists "$p" && LIBS="$LIBS $(pkg-config --libs "$p")"
done
# shellcheck disable=SC2086,SC2046
cc -std=gnu11 -O2 -D_GNU_SOURCE -I"$TOP/src" -I"$TOP" -I"$BUILD" \
	$(pkg-config --cflags openssl liburing libxxhash) \
	-o "$OUT/workerrate" "$TOP/bench/workerrate.c" "$BUILD/librdmacp_core.a" $LIBS -lpthread -lm ||
	die "cannot build bench/workerrate.c"
"$OUT/workerrate" "$@"
