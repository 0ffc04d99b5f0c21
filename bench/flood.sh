#!/usr/bin/env bash
# Flood, then recovery, over both OTLP transports in one run (not a timed
# test; tests/e2e/flood_*.test.js are the pass/fail versions). memory_limiter
# at LIMIT_MIB, the production allowlist, a queue too large to be the bound,
# retries that never give up. For gRPC, then HTTP:
#   - the sink (downstream) is down; h2load sends REQUESTS requests of ~555 KB
#     (570 SGLang-like spans; gRPC: 4 connections x 16 streams, HTTP: 64
#     connections), sampling spanfence's RSS every 50 ms and its counted
#     memory every 100 ms;
#   - reports the answers, the spans refused by reason, peak RSS against
#     limit + 32 MiB, and received = accepted + refused;
#   - brings the sink back and reports how long until a new request is
#     accepted and until the backlog is delivered, and accepted = sent +
#     failed + queued.
# Then the throughput with a healthy downstream, before and after.
#
#   bench/flood.sh [REQUESTS=2000] [LIMIT_MIB=64]
#   SF_FLOOD_GRPC_CONNS=4 SF_FLOOD_GRPC_STREAMS=16   the gRPC flood's shape
#       (h2load -c, -m); e.g. 1000 and 1 for many connections of one call
#   SF_FLOOD_TRANSPORTS="grpc http"                  which floods to run
#   SF_BENCH_PIN=1|0   spanfence on CPU 0, h2load, sf_send and the sink on CPU 1
#       (default 1 with 2 CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-2000}
export SF_FLOOD_LIMIT_MIB=${2:-64}
build=${BUILD:-build}
export SF_FLOOD_GRPC_PORT=${SF_FLOOD_GRPC_PORT:-16317}
export SF_FLOOD_HTTP_PORT=${SF_FLOOD_HTTP_PORT:-16318}
export SF_FLOOD_SINK_PORT=${SF_FLOOD_SINK_PORT:-16319}
export SF_FLOOD_METRICS_PORT=${SF_FLOOD_METRICS_PORT:-18890}
spans=570
. bench/pin.sh
bench_pin "spanfence on CPU 0; h2load, sf_send and the sink on CPU 1"
grpc_conns=${SF_FLOOD_GRPC_CONNS:-4}
grpc_streams=${SF_FLOOD_GRPC_STREAMS:-16}
transports=${SF_FLOOD_TRANSPORTS:-grpc http}
bound_kib=$(( (SF_FLOOD_LIMIT_MIB + 32) * 1024 ))
command -v h2load >/dev/null || { echo "flood.sh: h2load not found (apt-get install nghttp2-client)" >&2; exit 2; }
tmp=$(mktemp -d)
sf_pid=""; sink_pid=""
trap 'kill $sink_pid 2>/dev/null || true; [ -n "$sf_pid" ] && kill -9 $sf_pid 2>/dev/null; rm -rf "$tmp"' EXIT

now_ms() { date +%s%3N; }
metric() {  # NAME [LABEL_FILTER...] -> sum of the matching series
    curl -s "http://127.0.0.1:$SF_FLOOD_METRICS_PORT/metrics" |
        awk -v m="$1" -v f="${2:-}" -v g="${3:-}" '$1 ~ "^"m"({|$)" && index($1, f) && index($1, g) {s+=$2} END {printf "%.0f\n", s+0}'
}
sink_up() {
    "${pin_peer[@]}" "$build/sf_sink" -p "$SF_FLOOD_SINK_PORT" >/dev/null 2>&1 & sink_pid=$!
    for _ in $(seq 100); do curl -s "http://127.0.0.1:$SF_FLOOD_SINK_PORT/stats" >/dev/null && return; sleep 0.05; done
}
sink_down() { kill -9 $sink_pid 2>/dev/null || true; wait $sink_pid 2>/dev/null || true; sink_pid=""; }
flood_args() {  # transport n -> h2load arguments
    if [ "$1" = grpc ]; then
        echo "-n $2 -c $grpc_conns -m $grpc_streams -d $tmp/request.grpc -H content-type:application/grpc -H te:trailers" \
             "http://127.0.0.1:$SF_FLOOD_GRPC_PORT/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    else
        echo "--h1 -n $2 -c 64 -m 1 -d $tmp/request.pb -H content-type:application/x-protobuf" \
             "http://127.0.0.1:$SF_FLOOD_HTTP_PORT/v1/traces"
    fi
}
one_ok() {  # transport -> exit 0 when one request is accepted
    if [ "$1" = grpc ]; then
        "${pin_peer[@]}" "$build/sf_send" --endpoint "127.0.0.1:$SF_FLOOD_GRPC_PORT" --spans $spans --requests 1 >/dev/null 2>&1
    else
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/x-protobuf' \
              --data-binary @"$tmp/request.pb" "http://127.0.0.1:$SF_FLOOD_HTTP_PORT/v1/traces")" = 200 ]
    fi
}
rate() {  # transport seconds -> accepted spans/s with a healthy downstream
    local a0 a1 t0 t1 n=200
    [ "$1" = http ] || [ "$grpc_conns" -le $n ] || n=$grpc_conns     # h2load: -n >= -c
    a0=$(metric otelcol_receiver_accepted_spans "transport=\"$1\""); t0=$(now_ms)
    # shellcheck disable=SC2046
    "${pin_peer[@]}" h2load $(flood_args "$1" $n) >/dev/null 2>&1 || true
    t1=$(now_ms); a1=$(metric otelcol_receiver_accepted_spans "transport=\"$1\"")
    echo $(( (a1 - a0) * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1) ))
}

"$build/sf_send" --write "$tmp/request.grpc" --grpc-frame --spans $spans >/dev/null
"$build/sf_send" --write "$tmp/request.pb" --spans $spans >/dev/null
sink_up
"${pin_sf[@]}" "$build/spanfence" --config bench/configs/flood.yaml 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$SF_FLOOD_METRICS_PORT/metrics" >/dev/null && break; sleep 0.1; done
sleep 0.5
idle_kib=$(awk '/^VmRSS/{print $2}' /proc/$sf_pid/status)
echo "spanfence: memory_limiter limit_mib $SF_FLOOD_LIMIT_MIB, idle RSS $((idle_kib / 1024)) MiB; $requests requests of $(stat -c %s "$tmp/request.pb") bytes ($spans spans) per transport; pinning: $pinning"
declare -A healthy
for tr in $transports; do healthy[$tr]=$(rate $tr); done
echo "healthy downstream (spans/s accepted):$(for tr in $transports; do printf ' %s %s' $tr "${healthy[$tr]}"; done)"
sink_down

status=0
for tr in $transports; do
    acc0=$(metric otelcol_receiver_accepted_spans "transport=\"$tr\"")
    ref0=$(metric otelcol_receiver_refused_spans "transport=\"$tr\"")
    # shellcheck disable=SC2046
    "${pin_peer[@]}" h2load $(flood_args $tr "$requests") >"$tmp/h2.out" 2>&1 & h_pid=$!
    max_rss=0; max_counted=0; n=0
    while kill -0 $h_pid 2>/dev/null; do
        r=$(awk '/^VmRSS/{print $2}' /proc/$sf_pid/status); [ "$r" -gt "$max_rss" ] && max_rss=$r
        if [ $((n++ % 2)) = 0 ]; then
            c=$(metric spanfence_memory_allocated_bytes); [ "$c" -gt "$max_counted" ] && max_counted=$c
        fi
        sleep 0.05
    done
    wait $h_pid || true
    done_n=$(awk '/^requests:/{print $6}' "$tmp/h2.out")
    received=$(( done_n * spans ))
    acc=$(( $(metric otelcol_receiver_accepted_spans "transport=\"$tr\"") - acc0 ))
    ref=$(( $(metric otelcol_receiver_refused_spans "transport=\"$tr\"") - ref0 ))
    echo
    echo "== $tr: flood with the downstream down"
    echo "  $(grep -E '^requests:' "$tmp/h2.out")"
    [ $tr = http ] && echo "  $(grep -E '^status codes:' "$tmp/h2.out")"
    echo "  refused spans by reason:$(curl -s "http://127.0.0.1:$SF_FLOOD_METRICS_PORT/metrics" |
        awk -v t="transport=\"$tr\"" '/^otelcol_receiver_refused_spans/ && index($1, t) && $2 > 0 {
            match($1, /reason="[a-z_]+"/); printf " %s %s", substr($1, RSTART + 8, RLENGTH - 9), $2}')"
    echo "  peak RSS $((max_rss / 1024)) MiB (bound: limit + 32 = $((bound_kib / 1024)) MiB: $([ "$max_rss" -le "$bound_kib" ] && echo held || echo EXCEEDED)), peak counted memory $((max_counted / 1048576)) MiB"
    echo "  received $received = accepted $acc + refused $ref: $([ "$received" = $((acc + ref)) ] && echo held || echo BROKEN)"
    [ "$max_rss" -le "$bound_kib" ] && [ "$received" = $((acc + ref)) ] || status=1

    sink_up
    t0=$(now_ms); t_new=""
    while [ $(( $(now_ms) - t0 )) -lt 60000 ]; do one_ok $tr && { t_new=$(( $(now_ms) - t0 )); break; }; sleep 0.05; done
    while [ $(( $(now_ms) - t0 )) -lt 60000 ] && [ "$(metric spanfence_exporter_queued_spans)" != 0 ]; do sleep 0.05; done
    t_drain=$(( $(now_ms) - t0 ))
    accepted=$(metric otelcol_receiver_accepted_spans); sent=$(metric otelcol_exporter_sent_spans)
    failed=$(metric otelcol_exporter_send_failed_spans); queued=$(metric spanfence_exporter_queued_spans)
    echo "  downstream back: new data accepted after ${t_new:-NEVER (60 s)} ms, backlog delivered after $t_drain ms;" \
         "RSS now $(( $(awk '/^VmRSS/{print $2}' /proc/$sf_pid/status) / 1024 )) MiB, counted $(( $(metric spanfence_memory_allocated_bytes) / 1048576 )) MiB"
    echo "  accepted $accepted = sent $sent + failed $failed + queued $queued: $([ "$accepted" = $((sent + failed + queued)) ] && echo held || echo BROKEN)"
    [ -n "$t_new" ] && [ "$accepted" = $((sent + failed + queued)) ] || status=1
    sink_down
done

echo
sink_up
for tr in $transports; do
    r=$(rate $tr)
    echo "after recovery: $tr $r spans/s accepted ($(( healthy[$tr] > 0 ? 100 * r / healthy[$tr] : 0 ))% of healthy)"
done
kill -TERM $sf_pid; rc=0; wait $sf_pid || rc=$?; sf_pid=""
echo "exit code on SIGTERM: $rc"
exit $status
