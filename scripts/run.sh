#!/usr/bin/env bash
# Quick start: installs what is missing, builds a release build and runs a
# single-node tumblerd on 127.0.0.1:7420 with its durable data in ./data.
# Extra arguments go to tumblerd (see build/tumblerd --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
exec build/tumblerd --bind 127.0.0.1 --port 7420 --data-dir ./data "$@"
