# bench/pin.sh: sourced by the benchmarks. `bench_pin WHAT` pins the
# collector to CPU 0 and its peers (load, sink) to CPU 1 when the machine
# has two CPUs or more, taskset exists and SF_BENCH_PIN is not 0: it sets
# the arrays pin_sf and pin_peer (prefixes for the commands) and `pinning`
# (WHAT, or "none"), which the benchmark prints beside its figures.
# `cpu_of PID` prints the CPU seconds (utime + stime, from /proc) the
# process has used so far: what the pinned figures are read from.
bench_pin() {
    pin_sf=() pin_peer=() pinning="none"
    if [ "${SF_BENCH_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
        pin_sf=(taskset -c 0) pin_peer=(taskset -c 1)
        pinning=$1
    fi
}
bench_ticks=$(getconf CLK_TCK)
cpu_of() { awk -v t="$bench_ticks" '{print ($14+$15)/t}' "/proc/$1/stat"; }
