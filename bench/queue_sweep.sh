#!/usr/bin/env bash
# The sending queue's bound against the merge (issue 36): calls refused for
# each sizer x queue_size x call size x rate x gateway delay, merging on and
# off, against sf_sink (instant, or answering DELAY ms late). A merging
# cell where the gateway keeps up must refuse nothing; the last column says
# whether it does: with merging, up to 4 MB per export on num_consumers
# connections; without, one call per export, so num_consumers / delay
# exports a second. Cells without merging are printed beside for comparison
# (with an instant gateway their bound is the collector's CPU for one
# export a call: 8-span calls at 100 k spans/s refuse some on 2 vCPUs).
#
#   bench/queue_sweep.sh [SECONDS=2]
#
# Environment (defaults in brackets):
#   SIZERS ["requests items bytes"]   QSIZES per sizer: QSIZE_requests
#   ["32 1000"], QSIZE_items ["4096 65536"], QSIZE_bytes ["4194304 134217728"]
#   SIZES ["8 100 512"] spans per call   RATES ["20000 100000"] spans/s
#   DELAYS ["0 100"] ms   MERGE ["on off"]   CONSUMERS [10]   CONNECTIONS [8]
#   SF_BENCH_PIN [1]: spanfence on CPU 0, sf_send and the sink on CPU 1 (with 2 CPUs)
#   BUILD [build]   ports: SF_BENCH_GRPC_PORT (14317), SF_BENCH_SINK_PORT
#   (14319), SF_BENCH_METRICS_PORT (18888)
# Prints one line per cell and, at the end, the merging cells that refused
# calls although the gateway kept up (exit status 1 when there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
build=${BUILD:-build}
read -r -a sizers <<<"${SIZERS:-requests items bytes}"
read -r -a sizes <<<"${SIZES:-8 100 512}"
read -r -a rates <<<"${RATES:-20000 100000}"
read -r -a delays <<<"${DELAYS:-0 100}"
read -r -a merges <<<"${MERGE:-on off}"
consumers=${CONSUMERS:-10}
conns=${CONNECTIONS:-8}
gport=${SF_BENCH_GRPC_PORT:-14317}
sport=${SF_BENCH_SINK_PORT:-14319}
mport=${SF_BENCH_METRICS_PORT:-18888}
declare -A qsizes=([requests]="${QSIZE_requests:-32 1000}" [items]="${QSIZE_items:-4096 65536}"
                   [bytes]="${QSIZE_bytes:-4194304 134217728}")
tmp=$(mktemp -d)
. bench/pin.sh
bench_pin "spanfence on CPU 0; sf_send and the sink on CPU 1"
sf_pid="" sink_pid=""
trap 'kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
wait_port() { for _ in $(seq 200); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
queued() { curl -s "http://127.0.0.1:$mport/metrics" | awk '/^spanfence_exporter_queued_spans/{s+=$2} END{print s+0}'; }
sink_requests() { curl -s "http://127.0.0.1:$sport/stats" | awk '{print $2+0}'; }

config() {     # $1 sizer, $2 queue_size, $3 merge on|off
    local batch="true"
    [ "$3" = off ] && batch="false"
    cat <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$gport
processors:
  transform/allowlist:
    error_mode: propagate
    trace_statements:
      - context: span
        statements:
          - keep_keys(attributes, ["gen_ai.request.id", "gen_ai.usage.prompt_tokens"])
exporters:
  otlphttp/sink:
    endpoint: http://127.0.0.1:$sport
    compression: gzip
    sending_queue: {sizer: $1, queue_size: $2, num_consumers: $consumers, batch: {enabled: $batch}}
    retry_on_failure: {initial_interval: 100ms, max_interval: 1s, max_elapsed_time: 60s}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:$mport
  pipelines:
    traces:
      receivers: [otlp]
      processors: [transform/allowlist]
      exporters: [otlphttp/sink]
EOF
}

# Whether the gateway keeps up with `calls_per_s` calls of `spans` spans:
# merged, an export carries up to 4 MB (about 3 KB a span here, gzip off
# the wire counted before compression: a conservative 1,000 spans an
# export); unmerged, one call. Instant gateway: always.
keeps_up() {   # $1 merge, $2 delay, $3 calls/s, $4 spans per call
    awk -v m="$1" -v d="$2" -v c="$3" -v s="$4" -v n="$consumers" 'BEGIN {
        if (d == 0) { print "yes"; exit }
        per = (m == "on") ? (s > 1000 ? s : 1000) / s : 1;     # calls per export
        print (n * 1000 / d * per >= c) ? "yes" : "no" }'
}

echo "pinning: $pinning"
printf '%-8s %10s %5s %7s %5s %5s | %7s %7s %8s | %s\n' sizer queue spans rate delay merge \
       calls refused exp/call "gateway keeps up"
bad=()
for sizer in "${sizers[@]}"; do
  for qsize in ${qsizes[$sizer]}; do
    for spans in "${sizes[@]}"; do
      for rate in "${rates[@]}"; do
        for delay in "${delays[@]}"; do
          for merge in "${merges[@]}"; do
            config "$sizer" "$qsize" "$merge" >"$tmp/q.yaml"
            "${pin_peer[@]}" "$build/sf_sink" -p "$sport" -d "$delay" >/dev/null 2>&1 &
            sink_pid=$!
            "${pin_sf[@]}" "$build/spanfence" --config "$tmp/q.yaml" 2>"$tmp/sf.err" &
            sf_pid=$!
            if ! wait_port "$sport" || ! wait_port "$gport" || ! wait_port "$mport"; then
                echo "queue_sweep.sh: the collector or the sink did not start:" >&2
                cat "$tmp/sf.err" >&2
                exit 1
            fi
            per_thread=$(awk -v r="$rate" -v s="$spans" -v c="$conns" 'BEGIN{printf "%.3f", r / s / c}')
            r0=$(sink_requests)
            "${pin_peer[@]}" "$build/sf_send" --endpoint "127.0.0.1:$gport" --spans "$spans" \
                --threads "$conns" \
                --rate "$per_thread" --duration "$secs" >"$tmp/send.out" 2>&1 || true
            for _ in $(seq 1200); do [ "$(queued)" = 0 ] && break; sleep 0.05; done
            r1=$(sink_requests)
            kill -TERM "$sf_pid"; wait "$sf_pid" 2>/dev/null || true; sf_pid=""
            kill -TERM "$sink_pid"; wait "$sink_pid" 2>/dev/null || true; sink_pid=""
            calls=$(awk '/^requests: /{sub(",", "", $2); print $2}' "$tmp/send.out")
            refused=$(awk '/^  [A-Z_]+: /&&$1!="OK:"{s+=$2} END{print s+0}' "$tmp/send.out")
            ok=$(( ${calls:-0} - refused ))
            up=$(keeps_up "$merge" "$delay" "$(awk -v r="$rate" -v s="$spans" 'BEGIN{print r / s}')" "$spans")
            printf '%-8s %10s %5s %7s %5s %5s | %7s %7s %8.3f | %s\n' "$sizer" "$qsize" "$spans" \
                   "$rate" "$delay" "$merge" "${calls:-0}" "$refused" \
                   "$(awk -v a="$r1" -v b="$r0" -v ok="$ok" 'BEGIN{print ok ? (a - b) / ok : 0}')" "$up"
            if [ "$merge" = on ] && [ "$up" = yes ] && [ "$refused" != 0 ]; then
                bad+=("$sizer/$qsize/$spans/$rate/$delay/$merge: $refused refused")
            fi
          done
        done
      done
    done
  done
done
if [ "${#bad[@]}" -gt 0 ]; then
    echo "merging cells that refused calls although the gateway kept up:"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "every merging cell where the gateway keeps up refused nothing"
