#!/bin/sh
# tests/build/run_builds_collector.sh SOURCE_DIR: tools/run.sh builds the
# collector alone (issue 37: it built every test binary first, 2 min 13 s
# on 2 vCPUs): each of its `cmake --build` lines names --target spanfence.
set -u
src=$1
lines=$(grep -E '^[[:space:]]*cmake --build ' "$src/tools/run.sh")
[ -n "$lines" ] || { echo "run.sh: no cmake --build line" >&2; exit 1; }
echo "$lines" | while read -r l; do
    echo "$l" | grep -qE -- '--target spanfence( |$)' ||
        { echo "run.sh builds more than the collector: $l" >&2; exit 1; }
done || exit 1
echo "run_builds_collector: ok"
