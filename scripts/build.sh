#!/usr/bin/env bash
# Builds tumbler. Usage: scripts/build.sh [release|asan|tsan] (default release)
#   release -> build/       (RelWithDebInfo: optimised, asserts on, debug info)
#   asan    -> build-asan/  (AddressSanitizer + UndefinedBehaviorSanitizer)
#   tsan    -> build-tsan/  (ThreadSanitizer, for the client library)
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
jobs=${TUMBLER_JOBS:-$(nproc)}
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DTUMBLER_SANITIZE=ON) ;;
  tsan) dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=Debug -DTUMBLER_TSAN=ON) ;;
  *) echo "usage: $0 [release|asan|tsan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$jobs"
