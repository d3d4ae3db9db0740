#!/usr/bin/env bash
# Installs what building and testing tumbler needs, from Debian 12 packages.
# Does nothing for packages already installed; needs root (or sudo) otherwise.
set -euo pipefail

packages=(
  build-essential cmake pkg-config      # toolchain
  libraft-dev libuv1-dev                # consensus engine and event loop
  libgtest-dev libgmock-dev             # unit tests
  libbenchmark-dev                      # micro-benchmarks
  clang libclang-rt-14-dev              # libFuzzer target (the runtime is only a
                                        # Recommends of clang, and we skip those)
  python3                               # integration test harness
  redis-server redis-tools              # the peer in benchmarks, redis-cli interop tests
  jq                                    # bench/run.sh reads tumbler-bench's JSON
  # Client backends over other systems (docs/backends.md): client libraries
  # to build them, servers to test and benchmark them against.
  libpq-dev libmariadb-dev libzookeeper-mt-dev
  postgresql mariadb-server mariadb-client etcd-server etcd-client zookeeper
)
if [ "${1:-}" = "--print" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
