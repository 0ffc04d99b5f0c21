#!/usr/bin/env bash
# Sets up everything (Debian packages, the e2e tests' npm peers), builds
# spanfence warning-free, and runs the whole test suite with ctest.
# Extra arguments go to ctest (e.g. -R config).
#   SF_SANITIZE=1 tools/test.sh   the same under ASan + UBSan, in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh

build=build
flags=(-DSF_WERROR=ON)
if [ "${SF_SANITIZE:-0}" = 1 ]; then
    build=build-asan
    flags+=(-DSF_ASAN=ON -DSF_UBSAN=ON -DCMAKE_BUILD_TYPE=Debug)
fi
cmake -S . -B "$build" "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
