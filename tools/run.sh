#!/usr/bin/env bash
# Sets up and builds spanfence, then runs the collector in the foreground on
# a config (default: configs/default.yaml). Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

SPANFENCE_SKIP_NPM=1 bash tools/setup.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec ./build/spanfence --config "${1:-configs/default.yaml}"
