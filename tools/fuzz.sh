#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang under
# ASan + UBSan in build-fuzz/, runs each for SECONDS (default 60) from its
# seed corpus tests/fuzz/corpus/<name>/, and merges the inputs that add
# coverage back into that corpus. Prints each target's executions; exits 1
# if any target crashed, leaked, hung or failed a check (the input that did
# it is kept as build-fuzz/artifacts/<target>-crash-*).
#   tools/fuzz.sh [SECONDS]        SF_FUZZ_MERGE=0 to leave the corpus alone
#   reproduce:  build-fuzz/tests/fuzz/fuzz_<name> build-fuzz/artifacts/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
build=build-fuzz

SF_FUZZ=1 bash tools/setup.sh

CC=clang cmake -S . -B "$build" -DSF_FUZZ=ON -DSF_ASAN=ON -DSF_UBSAN=ON -DSF_TESTS=OFF \
    -DSF_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz

# Longest input per target: requests are small messages, statements one line.
max_len() {
    case "$1" in
        otlp_proto|otlp_json|otlp_signals) echo 16384 ;;
        inflate|count_inflate) echo 16384 ;;
        prometheus)           echo 16384 ;;
        config)               echo 8192 ;;
        statement)            echo 1024 ;;
        *)                    echo 4096 ;;
    esac
}

mkdir -p "$build/artifacts"
failed=()
for exe in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    target=${name#fuzz_}
    corpus=tests/fuzz/corpus/$target
    work=$(mktemp -d)
    log=$build/artifacts/$name.log
    dict=()
    [ -f "tests/fuzz/$target.dict" ] && dict=(-dict="tests/fuzz/$target.dict")
    mkdir -p "$corpus"

    rc=0
    "$exe" -max_total_time="$seconds" -max_len="$(max_len "$target")" -timeout=25 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" \
        "${dict[@]}" "$work" "$corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        echo "$name: ${execs:-?} executions in ${seconds}s, no crash"
        if [ "${SF_FUZZ_MERGE:-1}" = 1 ] && [ -n "$(ls -A "$work")" ]; then
            before=$(ls "$corpus" | wc -l)
            "$exe" -merge=1 -max_len="$(max_len "$target")" "$corpus" "$work" >/dev/null 2>&1
            echo "$name: corpus $before -> $(ls "$corpus" | wc -l) inputs"
        fi
    else
        echo "$name: FAILED (exit $rc) after ${execs:-?} executions; log $log" >&2
        grep -E "ERROR|FUZZ CHECK FAILED|runtime error|Test unit written" "$log" | head -5 >&2 || true
        failed+=("$name")
    fi
    rm -rf "$work"
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: ${failed[*]} failed" >&2
    exit 1
fi
echo "fuzz: every target ran ${seconds}s, no crash"
