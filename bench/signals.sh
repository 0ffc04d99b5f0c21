#!/usr/bin/env bash
# Logs and metrics per CPU-second beside traces, in the same run (issue 25):
# spanfence runs the seed deployment's config with the fence
# (configs/otelcol-seed.yaml + configs/otelcol-seed-fence.yaml, endpoints
# moved with --set), both exporters to bench/sf_sink. Each round sends, one
# signal after the other, REQUESTS OTLP/gRPC exports of 512 items with h2load
# (2 connections x 4 streams): traces (sf_send's SGLang-like batch), logs
# (SGLang app logs) and metrics (an SGLang scrape), bench/signals_payload.py.
# A signal's CPU is spanfence's utime+stime from /proc from its first request
# until its exporter has sent every item accepted; items are the receiver's
# accepted count. Prints per signal the median and range of the rounds and
# the loss check (accepted = sent), and exits non-zero on a loss.
#
#   bench/signals.sh [ROUNDS=5] [REQUESTS=100]
#   SF_BENCH_PIN=1|0   spanfence on CPU 0, h2load and the sink on CPU 1 (default 1 with 2 CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
requests=${2:-100}
items=512
build=${BUILD:-build}
grpc_port=${SF_BENCH_GRPC_PORT:-14317}
http_port=${SF_BENCH_HTTP_PORT:-14318}
sink_port=${SF_BENCH_SINK_PORT:-14319}
metrics_port=${SF_BENCH_METRICS_PORT:-18888}
health_port=${SF_BENCH_HEALTH_PORT:-14333}
. bench/pin.sh
bench_pin "spanfence on CPU 0; h2load and the sink on CPU 1"
command -v h2load >/dev/null || { echo "signals.sh: h2load not found (nghttp2-client)" >&2; exit 1; }
tmp=$(mktemp -d)
sf_pid="" sink_pid=""
trap 'kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
range() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
# metric NAME [EXPORTER]: the sum of the series NAME (of EXPORTER)
metric() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v n="$1" -v e="${2:-}" '
        $1 == n || index($1, n "{") == 1 { if (e == "" || index($1, "exporter=\"" e "\"")) s += $NF }
        END { printf "%.0f\n", s }'
}

"${pin_peer[@]}" "$build/sf_sink" -p "$sink_port" >"$tmp/sink.out" 2>"$tmp/sink.err" &
sink_pid=$!
"$build/sf_send" --write "$tmp/traces.grpc" --grpc-frame --spans $items >/dev/null
python3 bench/signals_payload.py logs "$tmp/logs.grpc" --grpc-frame --items $items >/dev/null
python3 bench/signals_payload.py metrics "$tmp/metrics.grpc" --grpc-frame --items $items >/dev/null

VM_ID=bench-vm TRACES_GATEWAY_ENDPOINT="http://127.0.0.1:$sink_port" TRACES_GATEWAY_TOKEN=bench \
TELEMETRY_GATEWAY_ENDPOINT="http://127.0.0.1:$sink_port" TELEMETRY_GATEWAY_API_KEY=bench \
    "${pin_sf[@]}" "$build/spanfence" --config configs/otelcol-seed.yaml --config configs/otelcol-seed-fence.yaml \
    --set "receivers.otlp.protocols.grpc.endpoint=127.0.0.1:$grpc_port" \
    --set "receivers.otlp.protocols.http.endpoint=127.0.0.1:$http_port" \
    --set "extensions.health_check.endpoint=127.0.0.1:$health_port" \
    --set "service.telemetry.metrics.address=127.0.0.1:$metrics_port" 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$metrics_port/metrics" >/dev/null 2>&1 && break
    kill -0 $sf_pid 2>/dev/null || { echo "signals.sh: spanfence exited: $(cat "$tmp/sf.err")" >&2; exit 1; }
    sleep 0.1
done

declare -A method=(
    [traces]=/opentelemetry.proto.collector.trace.v1.TraceService/Export
    [logs]=/opentelemetry.proto.collector.logs.v1.LogsService/Export
    [metrics]=/opentelemetry.proto.collector.metrics.v1.MetricsService/Export)
declare -A unit=([traces]=spans [logs]=log_records [metrics]=metric_points)
declare -A exporter=([traces]=otlphttp/traces [logs]=otlphttp/telemetry [metrics]=otlphttp/telemetry)
declare -A refused=([traces]=0 [logs]=0 [metrics]=0)
loss=ok
for r in $(seq "$rounds"); do
    line="round $r:"
    for sig in traces logs metrics; do
        u=${unit[$sig]}
        a0=$(metric "otelcol_receiver_accepted_$u")
        c0=$(cpu_of $sf_pid)
        "${pin_peer[@]}" h2load -n "$requests" -c 2 -m 4 -d "$tmp/$sig.grpc" \
            -H 'content-type: application/grpc' -H 'te: trailers' \
            "http://127.0.0.1:$grpc_port${method[$sig]}" >"$tmp/h2load.out" 2>&1 ||
            { echo "signals.sh: h2load failed: $(tail -5 "$tmp/h2load.out")" >&2; exit 1; }
        # until the exporter has sent every accepted item (the batch
        # processor's timeout included: its wait costs no CPU)
        for _ in $(seq 600); do
            a1=$(metric "otelcol_receiver_accepted_$u")
            s1=$(metric "otelcol_exporter_sent_$u" "${exporter[$sig]}")
            [ "$a1" -gt "$a0" ] && [ "$s1" = "$a1" ] && break
            sleep 0.05
        done
        c1=$(cpu_of $sf_pid)
        n=$((a1 - a0))
        [ "$s1" = "$a1" ] || loss=MISMATCH
        refused[$sig]=$((refused[$sig] + requests * items - n))
        # under one clock tick of CPU there is nothing to divide by
        awk -v n="$n" -v c0="$c0" -v c1="$c1" 'BEGIN { if (c1 > c0) printf "%.0f\n", n / (c1 - c0); else print "nan" }' \
            >>"$tmp/rate.$sig"
        line="$line $sig $(tail -1 "$tmp/rate.$sig")/CPU-s"
    done
    echo "$line"
done
kill -TERM $sf_pid; wait $sf_pid || true
sf_pid=""

echo
echo "== spanfence, seed config + fence ($rounds rounds x $requests requests x $items items per signal; pinning: $pinning)"
printf "  %-10s %-16s %14s  %s\n" signal items "per CPU-second" "range"
for sig in traces logs metrics; do
    printf "  %-10s %-16s %14.0f  %s\n" "$sig" "${unit[$sig]}" "$(median <"$tmp/rate.$sig")" "$(range <"$tmp/rate.$sig")"
done
grep -qx nan "$tmp"/rate.* && echo "  (a phase used less than one clock tick of CPU: raise REQUESTS)"
echo "  refused (not in the rates): traces ${refused[traces]}, logs ${refused[logs]}, metrics ${refused[metrics]}"
echo "  loss check (sent = accepted, per signal): $loss"
[ "$loss" = ok ]
