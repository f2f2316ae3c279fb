#!/usr/bin/env bash
# The whole test suite, as CI runs it: install dependencies, then build and
# run every test twice (a normal build and an ASan+UBSan build), then the
# protocol fuzzer for a short fixed time.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh

# The code is formatted as .clang-format says (STYLE.md).
clang-format --dry-run --Werror $(git ls-files '*.c' '*.h')

# Every build first (gcc, gcc with ASan+UBSan, clang with the fuzzers; warnings are errors):
# code that either compiler refuses fails here, before the suites' half hour, not after it.
scripts/build.sh build
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DENABLE_ASAN=ON -DENABLE_UBSAN=ON
CC=clang scripts/build.sh build-fuzz -DCMAKE_BUILD_TYPE=Debug -DENABLE_FUZZ=ON -DENABLE_ASAN=ON \
	-DENABLE_UBSAN=ON

(cd build && ctest --output-on-failure -j2)
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j2)
(cd build-fuzz && ctest --output-on-failure -L fuzz)
