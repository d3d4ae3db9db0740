#!/usr/bin/env bash
# Installs what building tumbler needs, from Debian 12 packages; with
# --servers also the servers the tests and benchmarks run against (Redis,
# etcd, ZooKeeper, PostgreSQL, MariaDB). Those start on their own default
# ports where Debian runs services (systemd); the tests start their own
# instances on free loopback ports and do not use them.
# Does nothing for packages already installed; needs root (or sudo) otherwise.
#   scripts/install-deps.sh [--servers] [--print]
set -euo pipefail

packages=(
  build-essential cmake pkg-config      # toolchain
  libraft-dev libuv1-dev                # consensus engine and event loop
  libgtest-dev libgmock-dev             # unit tests
  libbenchmark-dev                      # micro-benchmarks
  clang libclang-rt-14-dev              # libFuzzer target (the runtime is only a
                                        # Recommends of clang, and we skip those)
  python3                               # integration test harness
  jq                                    # bench/run.sh reads tumbler-bench's JSON
  # Client libraries of the backends over other systems (docs/backends.md).
  libpq-dev libmariadb-dev libzookeeper-mt-dev
)
server_packages=(
  redis-server redis-tools              # redis:// and redlock:// tests, benchmark peer, redis-cli
  etcd-server etcd-client zookeeper     # etcd:// and zookeeper:// tests
  postgresql mariadb-server mariadb-client  # postgres:// and mysql:// tests
)
print=0
for arg in "$@"; do
  case "$arg" in
    --servers) packages+=("${server_packages[@]}") ;;
    --print) print=1 ;;
    *) echo "install-deps.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [ $print -eq 1 ]; then
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
