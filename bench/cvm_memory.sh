#!/usr/bin/env bash
# configs/cvm.yaml's memory bound under many clients with the gateway down
# (issue 22): a copy of the production config, only its ports moved and its
# queue raised to 5,000 requests (`sizer: requests`, so the queue is not
# what bounds memory: the memory limiter is), loopback only:
#   - the gateway is down (nothing listens on its port); at once, h2load
#     sends GRPC_CONNS connections x STREAMS concurrent gRPC calls and
#     HTTP_CONNS HTTP/1.1 connections of ~555 KB requests (570 SGLang-like
#     spans each; every stream and connection sends ROUNDS requests, so the
#     run is bounded in requests), while spanfence's RSS is sampled every
#     50 ms and its counted memory every 100 ms;
#   - reports the answers, the spans refused by reason, peak RSS (VmHWM)
#     against the bound (limit_mib + 32 MiB), and received = accepted +
#     refused (a request h2load saw answered is received);
#   - brings the gateway back (sf_sink on its port) and reports how long
#     until a new gRPC call is accepted (bound: 10 s) and until the backlog
#     has left, and accepted = sent + failed + queued.
# Exits non-zero when a bound or an equation does not hold.
#
#   bench/cvm_memory.sh [GRPC_CONNS=500] [STREAMS=16] [HTTP_CONNS=128] [ROUNDS=1]
set -euo pipefail
cd "$(dirname "$0")/.."
grpc_conns=${1:-500}
streams=${2:-16}
http_conns=${3:-128}
rounds=${4:-1}
build=${BUILD:-build}
grpc_port=${SF_CVM_GRPC_PORT:-17317}
http_port=${SF_CVM_HTTP_PORT:-17318}
gateway_port=${SF_CVM_GATEWAY_PORT:-17319}
metrics_port=${SF_CVM_METRICS_PORT:-18891}
spans=570
command -v h2load >/dev/null || { echo "cvm_memory.sh: h2load not found (apt-get install nghttp2-client)" >&2; exit 2; }
tmp=$(mktemp -d)
sf_pid="" sink_pid="" g_pid="" h_pid=""
trap 'kill $sink_pid $g_pid $h_pid 2>/dev/null || true; [ -n "$sf_pid" ] && kill -9 $sf_pid 2>/dev/null; rm -rf "$tmp"' EXIT

now_ms() { date +%s%3N; }
metric() {  # NAME [LABEL_FILTER...] -> sum of the matching series
    curl -s "http://127.0.0.1:$metrics_port/metrics" |
        awk -v m="$1" -v f="${2:-}" -v g="${3:-}" '$1 ~ "^"m"({|$)" && index($1, f) && index($1, g) {s+=$2} END {printf "%.0f\n", s+0}'
}
kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$sf_pid/status"; }
done_of() { awk '/^requests:/{print $6}' "$1"; }

# The config: cvm.yaml as shipped but for its ports and its queue.
sed -e "s/127.0.0.1:4317/127.0.0.1:$grpc_port/" -e "s/127.0.0.1:4318/127.0.0.1:$http_port/" \
    -e "s/127.0.0.1:8888/127.0.0.1:$metrics_port/" \
    -e 's/^      sizer: bytes$/      sizer: requests/' -e 's/^      queue_size: [0-9]*$/      queue_size: 5000/' \
    configs/cvm.yaml >"$tmp/cvm.yaml"
grep -q "127.0.0.1:$grpc_port" "$tmp/cvm.yaml" && grep -q '^      queue_size: 5000$' "$tmp/cvm.yaml" &&
    grep -q '^      sizer: requests$' "$tmp/cvm.yaml" ||
    { echo "cvm_memory.sh: configs/cvm.yaml no longer has the ports or the queue this script moves" >&2; exit 2; }
limit_mib=$(awk '$1 == "limit_mib:" {print $2; exit}' "$tmp/cvm.yaml")
bound_kib=$(( (limit_mib + 32) * 1024 ))

"$build/sf_send" --write "$tmp/request.grpc" --grpc-frame --spans $spans >/dev/null
"$build/sf_send" --write "$tmp/request.pb" --spans $spans >/dev/null
export SPANFENCE_GATEWAY_ENDPOINT="http://127.0.0.1:$gateway_port"
export SPANFENCE_GATEWAY_TOKEN=cvm-memory-token
export SPANFENCE_PSEUDONYM_KEY=cvm-memory-pseudonym-key-0123456789
"$build/spanfence" --config "$tmp/cvm.yaml" 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$metrics_port/metrics" >/dev/null && break; sleep 0.1; done
kill -0 $sf_pid 2>/dev/null || { echo "cvm_memory.sh: spanfence exited: $(cat "$tmp/sf.err")" >&2; exit 1; }
sleep 0.5
# One call first: the request passes cvm.yaml's transform (declared mode).
"$build/sf_send" --endpoint "127.0.0.1:$grpc_port" --spans $spans --requests 1 >"$tmp/one.out" 2>&1 ||
    { echo "cvm_memory.sh: a first call was refused: $(cat "$tmp/one.out")" >&2; exit 1; }
echo "spanfence: configs/cvm.yaml (limit_mib $limit_mib, queue 5,000 requests), idle RSS $(( $(kib VmRSS) / 1024 )) MiB;" \
     "requests of $(stat -c %s "$tmp/request.pb") bytes ($spans spans); gateway down"
echo "load: $grpc_conns gRPC connections x $streams streams and $http_conns HTTP connections, $rounds request(s) each, at once"

acc0=$(metric otelcol_receiver_accepted_spans); ref0=$(metric otelcol_receiver_refused_spans)
t0=$(now_ms)
h2load -n $((grpc_conns * streams * rounds)) -c "$grpc_conns" -m "$streams" -d "$tmp/request.grpc" \
    -H content-type:application/grpc -H te:trailers \
    "http://127.0.0.1:$grpc_port/opentelemetry.proto.collector.trace.v1.TraceService/Export" \
    >"$tmp/grpc.out" 2>&1 & g_pid=$!
h2load --h1 -n $((http_conns * rounds)) -c "$http_conns" -m 1 -d "$tmp/request.pb" \
    -H content-type:application/x-protobuf "http://127.0.0.1:$http_port/v1/traces" \
    >"$tmp/http.out" 2>&1 & h_pid=$!
max_rss=0 max_counted=0 n=0
while kill -0 $g_pid 2>/dev/null || kill -0 $h_pid 2>/dev/null; do
    r=$(kib VmRSS); [ "$r" -gt "$max_rss" ] && max_rss=$r
    if [ $((n++ % 2)) = 0 ]; then
        c=$(metric spanfence_memory_allocated_bytes); [ "$c" -gt "$max_counted" ] && max_counted=$c
    fi
    sleep 0.05
done
wait $g_pid || true; wait $h_pid || true; g_pid="" h_pid=""
t1=$(now_ms)
hwm=$(kib VmHWM)
received=$(( ($(done_of "$tmp/grpc.out") + $(done_of "$tmp/http.out")) * spans ))
acc=$(( $(metric otelcol_receiver_accepted_spans) - acc0 ))
ref=$(( $(metric otelcol_receiver_refused_spans) - ref0 ))
status=0
echo
echo "== the load, gateway down ($(( t1 - t0 )) ms)"
echo "  gRPC $(grep -E '^requests:' "$tmp/grpc.out")"
echo "  HTTP $(grep -E '^requests:' "$tmp/http.out")"
echo "  HTTP $(grep -E '^status codes:' "$tmp/http.out")"
echo "  refused spans by reason:$(curl -s "http://127.0.0.1:$metrics_port/metrics" |
    awk '/^otelcol_receiver_refused_spans/ && $2 > 0 { match($1, /transport="[a-z]+"/); t = substr($1, RSTART + 11, RLENGTH - 12);
        match($1, /reason="[a-z_]+"/); printf " %s/%s %s", t, substr($1, RSTART + 8, RLENGTH - 9), $2}')"
echo "  peak RSS $((hwm / 1024)) MiB (VmHWM; sampled $((max_rss / 1024)) MiB), bound limit_mib + 32 = $((bound_kib / 1024)) MiB:" \
     "$([ "$hwm" -le "$bound_kib" ] && echo held || echo EXCEEDED); peak counted memory $((max_counted / 1048576)) MiB"
echo "  received $received = accepted $acc + refused $ref: $([ "$received" = $((acc + ref)) ] && echo held || echo BROKEN)"
[ "$hwm" -le "$bound_kib" ] && [ "$received" = $((acc + ref)) ] || status=1

"$build/sf_sink" -p "$gateway_port" >/dev/null 2>&1 & sink_pid=$!
t0=$(now_ms); t_new=""
while [ $(( $(now_ms) - t0 )) -lt 60000 ]; do
    if "$build/sf_send" --endpoint "127.0.0.1:$grpc_port" --spans $spans --requests 1 >/dev/null 2>&1; then
        t_new=$(( $(now_ms) - t0 )); break
    fi
    sleep 0.05
done
while [ $(( $(now_ms) - t0 )) -lt 120000 ] && [ "$(metric spanfence_exporter_queued_spans)" != 0 ]; do sleep 0.1; done
t_drain=$(( $(now_ms) - t0 ))
accepted=$(metric otelcol_receiver_accepted_spans); sent=$(metric otelcol_exporter_sent_spans)
failed=$(metric otelcol_exporter_send_failed_spans); queued=$(metric spanfence_exporter_queued_spans)
echo
echo "== the gateway back"
echo "  a new call accepted after ${t_new:-NEVER (60 s)} ms (bound 10,000 ms): $([ -n "$t_new" ] && [ "$t_new" -le 10000 ] && echo held || echo EXCEEDED)"
echo "  backlog left after $t_drain ms; RSS now $(( $(kib VmRSS) / 1024 )) MiB, counted $(( $(metric spanfence_memory_allocated_bytes) / 1048576 )) MiB"
echo "  accepted $accepted = sent $sent + failed $failed + queued $queued: $([ "$accepted" = $((sent + failed + queued)) ] && echo held || echo BROKEN)"
[ -n "$t_new" ] && [ "$t_new" -le 10000 ] && [ "$accepted" = $((sent + failed + queued)) ] || status=1
kill -TERM $sf_pid; rc=0; wait $sf_pid || rc=$?; sf_pid=""
echo "exit code on SIGTERM: $rc"
exit $status
