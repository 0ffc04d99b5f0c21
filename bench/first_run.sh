#!/usr/bin/env bash
# bench/first_run.sh: how long `bash tools/run.sh` takes on a fresh clone,
# from the command to the collector's "running with" line (configure,
# build, start), for this tree and an earlier revision, in the same run,
# alternating (issue 37: run.sh built every test binary first).
#   bash bench/first_run.sh [BASE_REV] [ROUNDS]     defaults: 31ec19a, 2
# Each round clones both revisions afresh (no build tree, no ccache), so a
# round costs a full build of each; the Debian packages and npm peers are
# already there (tools/setup.sh, which both run first, finds them).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-31ec19a}
rounds=${2:-2}
src=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head=$(git rev-parse --short HEAD)

# "WALL CPU": seconds from `bash tools/run.sh` to "running with" on its
# stderr, and the CPU seconds spent by then (run.sh execs the collector, so
# its process's own and its waited-for children's times: setup, cmake, the
# compilers, the collector until listening). The CPU figure is the one to
# compare on a busy machine.
one() {
    local rev=$1 dir=$tmp/$1 log=$tmp/$1.log t0 t1 pid cpu
    rm -rf "$dir"
    git clone -q "$src" "$dir"
    git -C "$dir" checkout -q "$rev"
    t0=$(date +%s.%N)
    (cd "$dir" && exec bash tools/run.sh) >"$log" 2>&1 &
    pid=$!
    until grep -q "running with" "$log"; do
        kill -0 "$pid" 2>/dev/null || { echo "first_run: $rev ended before listening:" >&2; tail -5 "$log" >&2; exit 1; }
        sleep 0.2
    done
    t1=$(date +%s.%N)
    cpu=$(awk -v t="$(getconf CLK_TCK)" '{print ($14+$15+$16+$17)/t}' "/proc/$pid/stat")
    pkill -INT -P "$pid" 2>/dev/null || true
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$t0 $t1 $cpu" | awk '{printf "%.1f %.1f", $2 - $1, $3}'
}

echo "fresh clone, bash tools/run.sh to \"running with\": wall s, CPU s; $(nproc) CPUs:"
printf '%-6s %-20s %-20s\n' round "$base" "$head"
for r in $(seq 1 "$rounds"); do
    a=$(one "$base")
    b=$(one "$head")
    printf '%-6s %-20s %-20s\n' "$r" "$a" "$b"
done
