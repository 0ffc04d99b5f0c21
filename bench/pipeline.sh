#!/usr/bin/env bash
# End-to-end benchmark: sf_send (OTLP/gRPC, SGLang-like 512-span batches)
# -> spanfence (allowlist) -> sf_sink (OTLP/HTTP). Measures spanfence's own
# CPU time (utime+stime from /proc) and memory (VmRSS idle, VmHWM peak), and
# prints the median of ROUNDS rounds next to the one-core codec floors.
#
#   bench/pipeline.sh [ROUNDS=5] [REQUESTS_PER_THREAD=200] [THREADS=2]
#   SF_BENCH_COMPRESSION=none bench/pipeline.sh     exporter without gzip
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
requests=${2:-200}
threads=${3:-2}
spans=512
build=${BUILD:-build}
export SF_BENCH_GRPC_PORT=${SF_BENCH_GRPC_PORT:-14317}
export SF_BENCH_SINK_PORT=${SF_BENCH_SINK_PORT:-14319}
export SF_BENCH_METRICS_PORT=${SF_BENCH_METRICS_PORT:-18888}
tmp=$(mktemp -d)
trap 'kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

ticks=$(getconf CLK_TCK)
cpu_of() { awk -v t="$ticks" '{print ($14+$15)/t}' "/proc/$1/stat"; }
kib_of() { awk -v k="$2" '$1==k":"{print $2}' "/proc/$1/status"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

"$build/sf_sink" -p "$SF_BENCH_SINK_PORT" >"$tmp/sink.out" 2>"$tmp/sink.err" &
sink_pid=$!
"$build/spanfence" --config bench/configs/pipeline.yaml 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$SF_BENCH_METRICS_PORT/metrics" >/dev/null 2>&1 && break
    sleep 0.1
done
sleep 0.5
idle_kib=$(kib_of $sf_pid VmRSS)

: >"$tmp/rates"
for r in $(seq "$rounds"); do
    c0=$(cpu_of $sf_pid)
    t0=$(date +%s.%N)
    "$build/sf_send" --endpoint "127.0.0.1:$SF_BENCH_GRPC_PORT" --spans $spans \
        --requests "$requests" --threads "$threads" >"$tmp/send.out"
    # wait for the queue to drain so the exporter's CPU is counted
    for _ in $(seq 200); do
        q=$(curl -s "http://127.0.0.1:$SF_BENCH_METRICS_PORT/metrics" |
            awk '/^spanfence_exporter_queued_spans/{print $2}')
        [ "${q:-1}" = 0 ] && break
        sleep 0.05
    done
    t1=$(date +%s.%N)
    c1=$(cpu_of $sf_pid)
    sent=$(awk '/spans accepted/{gsub(",","",$8); print $8}' "$tmp/send.out")
    awk -v s="$sent" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN {
        cpu = c1 - c0; wall = t1 - t0;
        printf "%.0f %.0f %.3f\n", s / cpu, s / wall, cpu * 1e6 / s }' >>"$tmp/rates"
    echo "round $r: $(tail -1 "$tmp/rates" | awk '{printf "%s spans/CPU-s, %s spans/s wall, %s CPU-s per M spans", $1, $2, $3}')"
done
peak_kib=$(kib_of $sf_pid VmHWM)
metrics=$(curl -s "http://127.0.0.1:$SF_BENCH_METRICS_PORT/metrics")
kill -TERM $sf_pid; wait $sf_pid || true
kill -TERM $sink_pid; wait $sink_pid || true

per_cpu=$(awk '{print $1}' "$tmp/rates" | median)
per_wall=$(awk '{print $2}' "$tmp/rates" | median)
cpu_per_m=$(awk '{print $3}' "$tmp/rates" | median)
accepted=$(echo "$metrics" | awk '/^otelcol_receiver_accepted_spans/{s+=$2} END{print s+0}')
exported=$(echo "$metrics" | awk '/^otelcol_exporter_sent_spans/{s+=$2} END{print s+0}')
echo
echo "== spanfence end to end ($rounds rounds x $threads threads x $requests requests x $spans spans, exporter compression ${SF_BENCH_COMPRESSION:-gzip})"
printf "  median spans per CPU-second:   %12.0f\n" "$per_cpu"
printf "  median spans per second (wall):%12.0f\n" "$per_wall"
printf "  median CPU-seconds per M spans:%12.3f\n" "$cpu_per_m"
printf "  idle RSS:                      %9.1f MiB\n" "$(awk -v k="$idle_kib" 'BEGIN{print k/1024}')"
printf "  peak RSS (VmHWM):              %9.1f MiB\n" "$(awk -v k="$peak_kib" 'BEGIN{print k/1024}')"
printf "  accepted / exported spans:     %s / %s\n" "$accepted" "$exported"
printf "  sink received:                 %s\n" "$(cat "$tmp/sink.out")"
printf "  vs Fluent Bit (34 k spans/CPU-s): %.1fx\n" "$(awk -v r="$per_cpu" 'BEGIN{print r/34000}')"
echo
echo "== one-core floors (bench_codec, same batch)"
"$build/bench_codec" $spans 5
