#!/usr/bin/env bash
# scripts/build.sh DIR [cmake options...]: configure and build into DIR.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
shift
cmake -S "$top" -B "$dir" -DENABLE_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
