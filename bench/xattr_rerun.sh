#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of itemizing kept files' attribute changes (capability 0x800000000000,
# PROTO_CAP_KEPT_ITEMS): a re-run rdmacp -a -X --skip quick of NFILES kept files of
# 2 KiB with one user.* attribute each, where nothing changed, with the capability
# and without it (the client's RDMACP_TEST_CAPS_OFF=0x800000000000: the daemon then
# answers SKIPPED at once, as before it), alternating run by run. Prints each run's
# seconds and the client's CPU seconds (user + system), then the medians.
# Over tcp on loopback: not RDMA numbers.
#
# usage: bench/xattr_rerun.sh [--files N] [--reps N] [--no-build]
#   --files N   files in the tree (default 10000)
#   --reps N    re-runs of each kind (default 5)
#   --no-build  use the build as it is (else scripts/build.sh builds it first)
#
# Environment: BENCH_DIR (default /var/tmp/rdmacp-bench; its file system must keep
# user.* attributes), RDMACP_BUILD_DIR (default <repo>/build), KEPT_CAP (the bit
# masked, default 0x800000000000; 0x200000000000 for a build from before the bits
# were separated).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

NFILES=10000 REPS=5 BUILD=1 KEPT_CAP=${KEPT_CAP:-0x800000000000}
while [ $# -gt 0 ]; do
	case $1 in
	--files) NFILES=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--no-build) BUILD=0 ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

need python3 openssl
if [ "$BUILD" = 1 ]; then
	log "building $BUILD_DIR"
	"$SRC_DIR/scripts/build.sh" "$BUILD_DIR" >/dev/null || die "the build failed"
fi
[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"
bench_workdir xattr

# ---------------------------------------------------------------- the tree, the first push
log "$NFILES files of 2 KiB, one user.* attribute each"
mkdir -p "$R/src/tree" "$R/mod" || die "mkdir"
openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdmacp-bench-$RANDOM" </dev/zero 2>/dev/null |
	head -c $((NFILES * 2048)) | (cd "$R/src/tree" && split -b 2048 -a 6 -d - f) ||
	die "cannot generate the tree"
python3 - "$R/src/tree" <<'EOF' || die "the file system of $R does not keep user.* attributes"
import os, sys
for n in os.listdir(sys.argv[1]):
    os.setxattr(os.path.join(sys.argv[1], n), "user.bench", n.encode())
EOF
bench_rdmacpd "$R/mod"
"${RD[@]}" -q -a -X "$R/src/tree" 127.0.0.1:bench/ 2>"$R/push.err" ||
	die "the first push failed: $(cat "$R/push.err")"

# ---------------------------------------------------------------- re-runs, alternating
# rerun LABEL [ENV...]: one re-run; "LABEL seconds cpu" on stdout and in $R/runs.
rerun() {
	local label=$1 t
	shift
	t=$( { TIMEFORMAT='%R %U %S'; time env "$@" "${RD[@]}" -q -a -X --skip quick \
		"$R/src/tree" 127.0.0.1:bench/ 2>"$R/rerun.err"; } 2>&1) ||
		die "$label re-run failed: $(cat "$R/rerun.err")"
	echo "$t" | awk -v l="$label" '{ printf "%s %.3f %.3f\n", l, $1, $2 + $3 }' >>"$R/runs"
	tail -n 1 "$R/runs"
}
: >"$R/runs"
for i in $(seq 1 "$REPS"); do
	if [ $((i % 2)) = 1 ]; then
		rerun with
		rerun without RDMACP_TEST_CAPS_OFF="$KEPT_CAP"
	else
		rerun without RDMACP_TEST_CAPS_OFF="$KEPT_CAP"
		rerun with
	fi
done
for k in with without; do
	s=$(awk -v k=$k '$1 == k { print $2 }' "$R/runs" | median)
	c=$(awk -v k=$k '$1 == k { print $3 }' "$R/runs" | median)
	echo "median $k the capability: ${s} s, client CPU ${c} s ($NFILES kept files, tcp loopback)"
done
