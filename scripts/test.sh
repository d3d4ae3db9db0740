#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds, runs
# the unit tests (ctest, including the backend tests against real Redis, etcd,
# ZooKeeper, PostgreSQL and MariaDB servers they start on loopback), the
# integration tests against a real tumblerd, the cluster fault tests, the same
# unit tests under ASan+UBSan, and the protocol fuzzer for a bounded time.
# Every step is bounded in time; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start )) s)"; }

step "dependencies"
scripts/install-deps.sh --servers

step "release build"
scripts/build.sh release

step "unit tests (release)"
(cd build && timeout 1200 ctest --output-on-failure -j 2)

step "integration tests (release tumblerd)"
TUMBLER_BIN_DIR="$PWD/build" timeout 1200 tests/integration/run.sh

step "cluster fault tests (3 and 5 local nodes, release tumblerd)"
TUMBLER_BIN_DIR="$PWD/build" TUMBLER_CLUSTER_TIMEOUT=600 timeout 700 tests/cluster/run.sh

step "ASan+UBSan build"
scripts/build.sh asan

step "unit tests (ASan+UBSan)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && timeout 1800 ctest --output-on-failure -j 2)

step "ThreadSanitizer build (client library)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTUMBLER_TSAN=ON >/dev/null
cmake --build build-tsan -j "${TUMBLER_JOBS:-$(nproc)}" --target client_channel_test client_integration_test

step "client tests (ThreadSanitizer, against the release tumblerd)"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
TUMBLERD="$PWD/build/tumblerd" timeout 900 build-tsan/client_channel_test
TUMBLERD="$PWD/build/tumblerd" timeout 900 build-tsan/client_integration_test

step "protocol fuzzer (${TUMBLER_FUZZ_SECONDS:-60} s)"
timeout 900 scripts/fuzz.sh

step "done in $(( $(date +%s) - start )) s"
