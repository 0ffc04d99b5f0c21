#!/usr/bin/env bash
# Scrape cost per series of the prometheus receiver: spanfence scrapes one
# exposition of SERIES samples (SGLang-shaped: gauges and counters labelled
# model_name/engine_type/tp_rank/pp_rank, latency histograms with SGLang's
# time-to-first-token buckets; text format 0.0.4, served by python3's
# http.server from a file) every second, into a metrics pipeline exporting
# OTLP/HTTP (uncompressed) to bench/sf_sink. The CPU is spanfence's
# utime+stime from /proc between the end of its first scrape and the end of
# its last (SCRAPES of them): HTTP, parse, conversion, the codec's pass,
# the export. Prints CPU per scrape, per series, and series per CPU-second.
#
#   bench/prom_scrape.sh [SERIES=10000] [SCRAPES=6]
#   SF_BENCH_WRAP="perf record -g -o perf.data --"   run spanfence under a profiler
#                                                    (the CPU figures are then the wrapper's)
#   SF_BENCH_PIN=1|0   spanfence on CPU 0, the exposer and the sink on CPU 1 (default 1 with 2 CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
series=${1:-10000}
scrapes=${2:-6}
build=${BUILD:-build}
expo_port=${SF_BENCH_EXPOSER_PORT:-19191}
sink_port=${SF_BENCH_SINK_PORT:-14319}
metrics_port=${SF_BENCH_METRICS_PORT:-18888}
grpc_port=${SF_BENCH_GRPC_PORT:-14317}
tmp=$(mktemp -d)
sf_pid="" sink_pid="" expo_pid=""
trap 'kill $sf_pid $sink_pid $expo_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
. bench/pin.sh
bench_pin "spanfence on CPU 0; the exposer and the sink on CPU 1"

metric() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v n="$1" '
        $1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.0f\n", s }'
}

mkdir -p "$tmp/www"
/usr/bin/python3 - "$series" >"$tmp/www/metrics" <<'EOF'
import sys
n = int(sys.argv[1])
buckets = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
per_hist = len(buckets) + 3
hists = n // 4 // per_hist
rest = n - hists * per_hist
lab = 'model_name="meta-llama/Llama-3.1-8B-Instruct",engine_type="unified",pp_rank="0"'
out = ["# HELP sglang:num_running_reqs The number of running requests.",
       "# TYPE sglang:num_running_reqs gauge"]
for i in range(rest // 2):
    out.append('sglang:num_running_reqs{%s,tp_rank="%d"} %d' % (lab, i, i % 17))
out += ["# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE sglang:prompt_tokens_total counter"]
for i in range(rest - rest // 2):
    out.append('sglang:prompt_tokens_total{%s,tp_rank="%d"} %d' % (lab, i, 1000 * i + 7))
out += ["# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.",
        "# TYPE sglang:time_to_first_token_seconds histogram"]
for h in range(hists):
    c = 0
    for k, b in enumerate(buckets + ["+Inf"]):
        c += k
        out.append('sglang:time_to_first_token_seconds_bucket{%s,tp_rank="%d",le="%s"} %d' % (lab, h, b, c))
    out.append('sglang:time_to_first_token_seconds_sum{%s,tp_rank="%d"} %.3f' % (lab, h, c * 0.7))
    out.append('sglang:time_to_first_token_seconds_count{%s,tp_rank="%d"} %d' % (lab, h, c))
print("\n".join(out))
EOF
samples=$(grep -vc '^#' "$tmp/www/metrics")
(cd "$tmp/www" && exec "${pin_peer[@]}" /usr/bin/python3 -m http.server "$expo_port" --bind 127.0.0.1 >/dev/null 2>&1) &
expo_pid=$!
"${pin_peer[@]}" "$build/sf_sink" -p "$sink_port" >"$tmp/sink.out" 2>"$tmp/sink.err" &
sink_pid=$!
cat >"$tmp/config.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$grpc_port
  prometheus:
    config:
      scrape_configs:
        - job_name: sglang
          scrape_interval: 1s
          scrape_timeout: 1s
          static_configs:
            - targets: ["127.0.0.1:$expo_port"]
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$sink_port
    compression: none
service:
  telemetry:
    metrics:
      address: 127.0.0.1:$metrics_port
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlphttp]
    metrics:
      receivers: [prometheus]
      exporters: [otlphttp]
EOF
"${pin_sf[@]}" ${SF_BENCH_WRAP:-} "$build/spanfence" --config "$tmp/config.yaml" 2>"$tmp/sf.err" &
sf_pid=$!
wait_scrapes() {   # until N scrapes were sent whole (the receiver accepted them)
    local want=$1 deadline=$((SECONDS + 60))
    until [ "$(metric spanfence_receiver_prometheus_scrapes)" -ge "$want" ] &&
          [ "$(metric otelcol_exporter_sent_metric_points)" -ge "$(metric otelcol_receiver_accepted_metric_points)" ] &&
          [ "$(metric otelcol_receiver_accepted_metric_points)" -gt 0 ]; do
        [ $SECONDS -lt $deadline ] || { echo "prom_scrape.sh: no scrape within 60s" >&2; cat "$tmp/sf.err" >&2; exit 1; }
        sleep 0.05
    done
}
wait_scrapes 1
c0=$(cpu_of "$sf_pid"); n0=$(metric spanfence_receiver_prometheus_scrapes)
wait_scrapes $((n0 + scrapes))
c1=$(cpu_of "$sf_pid"); n1=$(metric spanfence_receiver_prometheus_scrapes)
up=$(curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '/^spanfence_receiver_prometheus_up/ {print $NF}')
[ "$up" = 1 ] || { echo "prom_scrape.sh: the target is not up" >&2; cat "$tmp/sf.err" >&2; exit 1; }
awk -v c0="$c0" -v c1="$c1" -v pin="$pinning" -v n=$((n1 - n0)) -v s="$samples" -v bytes="$(stat -c %s "$tmp/www/metrics")" 'BEGIN {
    cpu = (c1 - c0) / n
    printf "prometheus receiver: %d samples (%d bytes) per scrape, %d scrapes; pinning: %s\n", s, bytes, n, pin
    printf "  CPU per scrape: %.1f ms; per series: %.2f us; %.0f series per CPU-second\n",
           cpu * 1000, cpu / s * 1e6, (cpu > 0 ? s / cpu : 0)
}'
