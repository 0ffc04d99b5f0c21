#!/usr/bin/env bash
# Flood with the downstream down (not a timed test): memory_limiter at
# 64 MiB, a queue too large to be the bound, retries forever. Measures the
# healthy throughput, then floods for SECONDS with the sink down (sampling
# RSS and counted memory; clients must keep getting answers), then brings
# the sink back and measures throughput again once the backlog has drained.
#
#   bench/flood.sh [SECONDS=30] [CLIENT_THREADS=4]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
threads=${2:-4}
build=${BUILD:-build}
export SF_FLOOD_GRPC_PORT=${SF_FLOOD_GRPC_PORT:-16317}
export SF_FLOOD_SINK_PORT=${SF_FLOOD_SINK_PORT:-16319}
export SF_FLOOD_METRICS_PORT=${SF_FLOOD_METRICS_PORT:-18890}
tmp=$(mktemp -d)
sink_pid=""
trap 'kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

metric() {
    curl -s "http://127.0.0.1:$SF_FLOOD_METRICS_PORT/metrics" |
        awk -v m="$1" -v f="${2:-}" '$1 ~ "^"m"({|$)" && (f == "" || $1 ~ f) {s+=$2} END {print s+0}'
}
send() {  # seconds -> prints "accepted_spans/s ok unavailable"
    "$build/sf_send" --endpoint "127.0.0.1:$SF_FLOOD_GRPC_PORT" --spans 256 --threads "$threads" \
        --duration "$1" --distinct 8 >"$tmp/send.out" || true
    awk '/spans\/s/{gsub(",","",$NF); r=$NF} /OK:/{ok=$2} /UNAVAILABLE:/{un=$2}
         END{printf "%s %s %s\n", r+0, ok+0, un+0}' "$tmp/send.out"
}

"$build/sf_sink" -p "$SF_FLOOD_SINK_PORT" >/dev/null 2>&1 & sink_pid=$!
"$build/spanfence" --config bench/configs/flood.yaml 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$SF_FLOOD_METRICS_PORT/metrics" >/dev/null && break; sleep 0.1; done

read -r base_rate _ _ < <(send 5)
echo "healthy downstream: $base_rate spans/s accepted"

kill -TERM $sink_pid; wait $sink_pid 2>/dev/null || true; sink_pid=""
"$build/sf_send" --endpoint "127.0.0.1:$SF_FLOOD_GRPC_PORT" --spans 256 --threads "$threads" \
    --duration "$secs" --distinct 8 >"$tmp/flood.out" 2>&1 &
flood_pid=$!
max_rss=0; max_counted=0
while kill -0 $flood_pid 2>/dev/null; do
    r=$(awk '/^VmRSS/{print $2}' /proc/$sf_pid/status); [ "$r" -gt "$max_rss" ] && max_rss=$r
    c=$(metric spanfence_memory_allocated_bytes); [ "$c" -gt "$max_counted" ] && max_counted=$c
    sleep 0.2
done
wait $flood_pid || true
echo "flood (${secs}s, downstream down): $(grep -E 'requests:' "$tmp/flood.out")"
grep -E '^  [A-Z_]+:' "$tmp/flood.out" | sed 's/^/  answers: /'
echo "  refused memory_limit: $(metric otelcol_receiver_refused_spans 'reason="memory_limit"')  queue_full: $(metric otelcol_receiver_refused_spans 'reason="queue_full"')"
echo "  max RSS: $((max_rss / 1024)) MiB, max counted memory: $((max_counted / 1048576)) MiB (limit 64 MiB)"

"$build/sf_sink" -p "$SF_FLOOD_SINK_PORT" >/dev/null 2>&1 & sink_pid=$!
t0=$(date +%s)
for _ in $(seq 300); do [ "$(metric spanfence_exporter_queued_spans)" = 0 ] && break; sleep 1; done
echo "downstream back: backlog drained in $(( $(date +%s) - t0 )) s"
read -r after_rate _ _ < <(send 5)
echo "after recovery: $after_rate spans/s accepted ($(awk -v a="$after_rate" -v b="$base_rate" 'BEGIN{printf "%.0f", (b > 0 ? 100 * a / b : 0)}')% of healthy)"
acc=$(metric otelcol_receiver_accepted_spans); sent=$(metric otelcol_exporter_sent_spans)
failed=$(metric otelcol_exporter_send_failed_spans); queued=$(metric spanfence_exporter_queued_spans)
echo "accepted $acc = sent $sent + failed $failed + queued $queued: $([ "$acc" = $((sent + failed + queued)) ] && echo held || echo BROKEN)"
kill -TERM $sf_pid; wait $sf_pid; echo "exit code on SIGTERM: $?"
