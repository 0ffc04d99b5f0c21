#!/usr/bin/env bash
# Sets up and builds spanfence, then runs the collector in the foreground on
# a config (default: configs/default.yaml). Ctrl-C stops it cleanly. Builds
# the collector only (its target and what it links), not the tests and
# tools: `cmake --build build` or tools/test.sh build those.
set -euo pipefail
cd "$(dirname "$0")/.."

SPANFENCE_SKIP_NPM=1 bash tools/setup.sh
cmake -S . -B build >/dev/null
cmake --build build --target spanfence -j"$(nproc)" >/dev/null
exec ./build/spanfence --config "${1:-configs/default.yaml}"
