#!/usr/bin/env bash
# Builds the RESP codec's libFuzzer target with clang and runs it for a bounded
# time, starting from the seeds in src/protocol/fuzz_corpus (copied to a temp
# dir, so the checked-in corpus is never rewritten). Exits non-zero if the
# fuzzer finds a crash, a sanitizer report or a failed property check; the
# reproducer is left in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh                        # 60 s
#   TUMBLER_FUZZ_SECONDS=600 scripts/fuzz.sh
#   scripts/fuzz.sh -jobs=2                # extra arguments go to libFuzzer
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${root}/build-fuzz"
seconds="${TUMBLER_FUZZ_SECONDS:-60}"

# Only resp_fuzz is built: the rest of the tree is not required to build with
# clang for this.
CC=clang CXX=clang++ cmake -S "${root}" -B "${build}" \
  -DTUMBLER_FUZZ=ON -DTUMBLER_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "${build}" --target resp_fuzz -j2

corpus="$(mktemp -d "${TMPDIR:-/tmp}/tumbler-fuzz-corpus.XXXXXX")"
trap 'rm -rf "${corpus}"' EXIT
cp "${root}/src/protocol/fuzz_corpus/"* "${corpus}/"
mkdir -p "${build}/artifacts"

# -max_len covers the largest request (limits.h kRequestBytesMax, 16 KiB).
"${build}/resp_fuzz" "${corpus}" \
  -max_total_time="${seconds}" \
  -max_len=20000 \
  -timeout=10 \
  -print_final_stats=1 \
  -artifact_prefix="${build}/artifacts/" \
  "$@"
