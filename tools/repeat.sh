#!/usr/bin/env bash
# Runs the test suite (or the tests matching a ctest -R pattern) N times on
# the machine as it is, then N times while stress-ng keeps every core busy
# (and one memory worker),
# and prints per test how many runs failed in each. A test that fails in any
# run is flaky or broken: run a new or changed e2e test this way before it
# lands. Exit status 1 when any run failed.
#   tools/repeat.sh 10                  the whole suite, 10 + 10 runs
#   tools/repeat.sh 5 e2e/signals       the matching tests only
# Builds build/ first as tools/test.sh does; logs of failed runs are kept in
# build/repeat/. SF_REPEAT_MODES="idle" (or "loaded") runs one half only.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-}
pattern=${2:-}
case "$n" in
    ''|*[!0-9]*|0) echo "usage: tools/repeat.sh N [ctest -R pattern]" >&2; exit 2 ;;
esac
modes=${SF_REPEAT_MODES:-idle loaded}

SF_STRESS=1 bash tools/setup.sh
cmake -S . -B build -DSF_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

filter=()
[ -n "$pattern" ] && filter=(-R "$pattern")
out=build/repeat
rm -rf "$out"
mkdir -p "$out"
ctest --test-dir build -N "${filter[@]}" | sed -n 's/^ *Test *#[0-9]*: //p' >"$out/tests"
[ -s "$out/tests" ] || { echo "repeat: no test matches '$pattern'" >&2; exit 2; }

stress_pid=
stop_stress() {
    if [ -n "$stress_pid" ]; then
        kill "$stress_pid" 2>/dev/null || true
        wait "$stress_pid" 2>/dev/null || true
        stress_pid=
    fi
}
trap stop_stress EXIT

for mode in $modes; do
    if [ "$mode" = loaded ]; then
        # One CPU hog per core and one memory hog (stress-ng's 256 MiB
        # worker, touching its pages) for as long as the runs last
        # (bounded: 2 h): the load issue 33 names, --cpu 2 --vm 1 here.
        stress-ng --cpu "$(nproc)" --vm 1 --timeout 7200 --quiet &
        stress_pid=$!
    fi
    for i in $(seq 1 "$n"); do
        log="$out/$mode-$i.log"
        start=$(date +%s)
        if ctest --test-dir build --output-on-failure -j"$(nproc)" "${filter[@]}" >"$log" 2>&1; then
            rm -f "$log"
            : >"$out/$mode-$i.failed"
            verdict=ok
        else
            # ctest lists what failed as "N:name" lines.
            sed 's/^[0-9]*://' build/Testing/Temporary/LastTestsFailed.log >"$out/$mode-$i.failed" 2>/dev/null || true
            [ -s "$out/$mode-$i.failed" ] || echo "(ctest itself)" >"$out/$mode-$i.failed"
            verdict="FAILED: $(tr '\n' ' ' <"$out/$mode-$i.failed")(log: $log)"
        fi
        echo "repeat: $mode run $i/$n, $(( $(date +%s) - start )) s: $verdict"
    done
    stop_stress
done

echo
printf '%-36s' "test"
for mode in $modes; do printf ' %12s' "$mode fails"; done
echo
total=0
while read -r t; do
    printf '%-36s' "$t"
    for mode in $modes; do
        k=$(cat "$out/$mode"-*.failed | grep -cxF "$t" || true)
        total=$((total + k))
        printf ' %12s' "$k/$n"
    done
    echo
done <"$out/tests"
extra=$(cat "$out"/*.failed | grep -cxF "(ctest itself)" || true)
total=$((total + extra))
[ "$extra" -eq 0 ] || echo "runs where ctest failed without naming a test: $extra"
echo "repeat: $total failed test runs"
[ "$total" -eq 0 ]
