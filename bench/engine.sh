#!/usr/bin/env bash
# Engine-shaped benchmark: the load an SGLang engine's BatchSpanProcessors
# put on the in-VM collector, against a healthy and a slow gateway, with the
# floor of the same calls measured in the same run.
#
#   bench/engine.sh [SECONDS=5] [ROUNDS=2]
#
# The load (sf_send): CONNECTIONS (8) connections, one call in flight on
# each, on a fixed schedule; each answer's latency is taken from its call's
# due time (no coordinated omission). For each call size (SIZES, spans per
# call) x rate (RATES, spans/s) x gateway delay (DELAYS, ms: sf_sink -d),
# a run of SECONDS, for each build in BUILDS (alternating, round by round).
# Per run it prints: calls accepted/refused, the collector's CPU (utime +
# stime from /proc, from the first call until its queue is empty) per call
# and per span, answer latency p50/p99/max, exports per incoming call (the
# sink's requests / calls accepted), the collector's peak RSS, and its page
# faults per call (minor + major, /proc: on a VM each costs a trap, and
# unlike CPU time the count does not depend on what else the machine runs).
# The floor, per size x rate, on the same pinning and schedule:
#   grpc: bench_floor grpc (a bare gRPC core server, receive + empty reply),
#         its CPU per call from /proc, and its answer latency p99: what the
#         load and the machine add to any server's answers;
#   post: bench_floor post at the same call rate, one POST of the same
#         allowlisted bytes per call, gzip level 1 as the exporter (the
#         "one receive, one POST" floor with its compression).
# The summary gives, per cell, the median over rounds of each build's CPU
# per call, and its ratio to grpc + post.
#
# Environment:
#   BUILDS="build /tmp/base/build"   build dirs to compare (default: build)
#   SF_ENGINE_TOOLS=build   where sf_send, sf_sink and bench_floor come from
#       (default: the first build; they must be this tree's)
#   SIZES="8 100 512" RATES="20000 100000" DELAYS="0 100 200"
#   CONNECTIONS=8
#   SF_ENGINE_QUEUE   the exporter's sending_queue as a YAML flow mapping
#       (default: the one of configs/cvm.yaml); a build that refuses it
#       (an older one without `sizer`) gets SF_ENGINE_QUEUE_OLD
#       (default {queue_size: 32, num_consumers: 10}, main's cvm.yaml).
#   SF_ENGINE_CONFIG=configs/cvm.yaml  run the collectors with that config
#       instead (its receiver, metrics and gateway ports moved to the
#       bench's: 127.0.0.1:4317, :8888 and SPANFENCE_GATEWAY_ENDPOINT), as
#       the production config is measured; the floor is unchanged.
#       Its ${env:} values are the bench's: the sink, a bench token, and
#       SPANFENCE_PSEUDONYM_KEY (a fixed bench key unless set).
#   SF_BENCH_PIN=1|0  collector on CPU 0, load and sink on CPU 1 (default 1)
#   Ports: SF_BENCH_GRPC_PORT (14317), SF_BENCH_SINK_PORT (14319),
#   SF_BENCH_METRICS_PORT (18888), SF_BENCH_FLOOR_PORT (14321).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-2}
read -r -a builds <<<"${BUILDS:-build}"
read -r -a sizes <<<"${SIZES:-8 100 512}"
read -r -a rates <<<"${RATES:-20000 100000}"
read -r -a delays <<<"${DELAYS:-0 100 200}"
conns=${CONNECTIONS:-8}
tools=${SF_ENGINE_TOOLS:-${builds[0]}}     # sf_send, sf_sink, bench_floor: this tree's
queue_new=${SF_ENGINE_QUEUE:-"{sizer: bytes, queue_size: 134217728, num_consumers: 16, batch: {min_size: 2048}}"}
queue_old=${SF_ENGINE_QUEUE_OLD:-"{queue_size: 32, num_consumers: 10}"}
gport=${SF_BENCH_GRPC_PORT:-14317}
sport=${SF_BENCH_SINK_PORT:-14319}
mport=${SF_BENCH_METRICS_PORT:-18888}
fport=${SF_BENCH_FLOOR_PORT:-14321}
. bench/pin.sh
bench_pin "the collector (and the floors' servers) on CPU 0; sf_send and the sink on CPU 1"
# The sink stands for a gateway outside the VM, but it shares CPU 1 with
# sf_send: at SCHED_IDLE it runs only when sf_send has nothing to do, so
# gunzipping a merged export never delays the load's reading of an answer
# (which would count as the collector's latency).
idle_sink=()
command -v chrt >/dev/null && chrt -i 0 true 2>/dev/null && idle_sink=(chrt -i 0)
tmp=$(mktemp -d)
sf_pid="" sink_pid="" floor_pid=""
trap 'kill $sf_pid $sink_pid $floor_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
faults_of() { awk '{print $10 + $12}' "/proc/$1/stat"; }     # minor + major page faults
# The middle value; of an even count, the mean of the two middle ones.
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2}'; }
wait_port() { for _ in $(seq 200); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
queued() { curl -s "http://127.0.0.1:$mport/metrics" | awk '/^spanfence_exporter_queued_spans/{s+=$2} END{print s+0}'; }
sink_requests() { curl -s "http://127.0.0.1:$sport/stats" | awk '{print $2+0}'; }

config() {     # $1: the sending_queue mapping
    cat <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$gport
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 448
    spike_limit_mib: 64
  transform/allowlist:
    error_mode: propagate
    trace_statements:
      - context: span
        statements:
          - keep_keys(attributes, ["gen_ai.request.id", "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens", "gen_ai.request.max_tokens", "gen_ai.request.temperature"])
          - set(status.message, "")
      - context: spanevent
        statements:
          - keep_keys(attributes, ["batch_size"])
exporters:
  otlphttp/sink:
    endpoint: http://127.0.0.1:$sport
    compression: gzip
    sending_queue: $1
    retry_on_failure: {initial_interval: 100ms, max_interval: 1s, max_elapsed_time: 60s}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:$mport
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, transform/allowlist]
      exporters: [otlphttp/sink]
EOF
}

# The port must be ours: a sink left over from an interrupted run answering
# on it (with its own delay) would pass wait_port and measure the wrong
# gateway, so a port in use stops the bench.
port_free() { ! (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
need_free() {
    if ! port_free "$1"; then
        echo "engine.sh: port $1 is in use (a process left over from an earlier run?)" >&2
        exit 1
    fi
}
start_sink() {     # $1: delay ms
    need_free "$sport"
    "${pin_peer[@]}" "${idle_sink[@]}" "$tools/sf_sink" -p "$sport" -d "$1" >/dev/null 2>&1 &
    sink_pid=$!
    if ! wait_port "$sport" || ! kill -0 "$sink_pid" 2>/dev/null; then
        echo "engine.sh: sf_sink did not start on port $sport" >&2
        exit 1
    fi
}
stop_sink() { kill -TERM "$sink_pid"; wait "$sink_pid" 2>/dev/null || true; sink_pid=""; }

# One run: prints "calls_ok refused cpu_us_per_call ns_per_span p50 p99 max exports_per_call rss_mib"
run_collector() {  # $1 build, $2 spans per call, $3 spans/s, $4 delay
    local b=$1 spans=$2 rate=$3 delay=$4 cfg="$tmp/engine.yaml" per_thread c0 c1 r0 r1 ok refused lat
    if [ -n "${SF_ENGINE_CONFIG:-}" ]; then
        sed -e "s/127.0.0.1:4317/127.0.0.1:$gport/" -e "s/127.0.0.1:8888/127.0.0.1:$mport/" \
            -e "/127.0.0.1:4318/d" -e "/^      http:\$/d" "$SF_ENGINE_CONFIG" >"$cfg"
    else
        config "$queue_new" >"$cfg"
        if ! "$b/spanfence" validate --config "$cfg" >/dev/null 2>&1; then config "$queue_old" >"$cfg"; fi
    fi
    start_sink "$delay"
    need_free "$gport"; need_free "$mport"
    SPANFENCE_GATEWAY_ENDPOINT="http://127.0.0.1:$sport" SPANFENCE_GATEWAY_TOKEN=bench \
        SPANFENCE_PSEUDONYM_KEY=${SPANFENCE_PSEUDONYM_KEY:-bench-pseudonym-key-0123456789} \
        "${pin_sf[@]}" "$b/spanfence" --config "$cfg" 2>"$tmp/sf.err" &
    sf_pid=$!
    if ! wait_port "$gport" || ! wait_port "$mport" || ! kill -0 "$sf_pid" 2>/dev/null; then
        echo "engine.sh: $b/spanfence did not start:" >&2
        cat "$tmp/sf.err" >&2
        exit 1
    fi
    per_thread=$(awk -v r="$rate" -v s="$spans" -v c="$conns" 'BEGIN{printf "%.3f", r / s / c}')
    r0=$(sink_requests)
    c0=$(cpu_of "$sf_pid"); f0=$(faults_of "$sf_pid")
    "${pin_peer[@]}" "$tools/sf_send" --endpoint "127.0.0.1:$gport" --spans "$spans" \
        --threads "$conns" --rate "$per_thread" --duration "$secs" >"$tmp/send.out" 2>&1 || true
    for _ in $(seq 600); do [ "$(queued)" = 0 ] && break; sleep 0.05; done
    c1=$(cpu_of "$sf_pid"); f1=$(faults_of "$sf_pid")
    r1=$(sink_requests)
    rss=$(awk '$1=="VmHWM:"{printf "%.0f", $2/1024}' "/proc/$sf_pid/status")
    kill -TERM "$sf_pid"; wait "$sf_pid" 2>/dev/null || true; sf_pid=""
    stop_sink
    ok=$(awk '/^  OK: /{print $2}' "$tmp/send.out"); ok=${ok:-0}
    refused=$(awk '/^  [A-Z_]+: /&&$1!="OK:"{s+=$2} END{print s+0}' "$tmp/send.out")
    lat=$(awk '/^answer latency/{print $(NF-4), $(NF-2), $NF}' "$tmp/send.out")
    awk -v ok="$ok" -v ref="$refused" -v c0="$c0" -v c1="$c1" -v s="$spans" -v lat="$lat" \
        -v r0="$r0" -v r1="$r1" -v rss="$rss" -v f0="$f0" -v f1="$f1" 'BEGIN {
        split(lat, l, " ");
        printf "%d %d %.1f %.0f %s %s %s %.3f %s %.2f\n", ok, ref, ok ? (c1 - c0) * 1e6 / ok : 0,
               ok ? (c1 - c0) * 1e9 / (ok * s) : 0, l[1], l[2], l[3], ok ? (r1 - r0) / ok : 0, rss,
               ok ? (f1 - f0) / ok : 0 }'
}

# The floor of the same calls: "grpc_us_per_call post_us_per_call grpc_p99_ms"
run_floor() {      # $1 spans per call, $2 spans/s
    local spans=$1 rate=$2 per_thread calls c0 c1 ok grpc_us post_us grpc_p99
    per_thread=$(awk -v r="$rate" -v s="$spans" -v c="$conns" 'BEGIN{printf "%.3f", r / s / c}')
    need_free "$fport"
    "${pin_sf[@]}" "$tools/bench_floor" grpc "$fport" >/dev/null 2>&1 &
    floor_pid=$!
    wait_port "$fport"
    c0=$(cpu_of "$floor_pid")
    "${pin_peer[@]}" "$tools/sf_send" --endpoint "127.0.0.1:$fport" --spans "$spans" \
        --threads "$conns" --rate "$per_thread" --duration "$secs" >"$tmp/floor.out" 2>&1 || true
    c1=$(cpu_of "$floor_pid")
    kill -TERM "$floor_pid"; wait "$floor_pid" 2>/dev/null || true; floor_pid=""
    ok=$(awk '/^  OK: /{print $2}' "$tmp/floor.out"); ok=${ok:-1}
    grpc_us=$(awk -v a="$c0" -v b="$c1" -v n="$ok" 'BEGIN{printf "%.1f", (b - a) * 1e6 / n}')
    grpc_p99=$(awk '/^answer latency/{print $(NF-2)}' "$tmp/floor.out")
    calls=$(awk -v r="$rate" -v s="$spans" -v t="$secs" 'BEGIN{printf "%d", r / s * t}')
    [ "$calls" -ge 16 ] || calls=16
    start_sink 0
    post_us=$("${pin_sf[@]}" "$tools/bench_floor" post "http://127.0.0.1:$sport/v1/traces" \
        "$calls" 16 "$spans" "$(awk -v r="$rate" -v s="$spans" 'BEGIN{print r / s}')" gzip |
        awk '{print $(NF-1)}')
    stop_sink
    echo "$grpc_us ${post_us:-0} ${grpc_p99:--}"
}

echo "engine.sh: $conns connections, one call in flight each, fixed schedule; ${secs}s per run, $rounds rounds"
echo "pinning: $pinning; builds: ${builds[*]}"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared with other work: figures are noisy)"
printf '%-5s %-28s %5s %7s %5s | %7s %7s %8s %8s | %8s %8s %8s | %9s %6s %8s\n' \
    round build spans rate delay ok refused us/call ns/span p50ms p99ms maxms exp/call rssMiB flt/call
for ((r = 1; r <= rounds; r++)); do
    for spans in "${sizes[@]}"; do
        for rate in "${rates[@]}"; do
            for delay in "${delays[@]}"; do
                for b in "${builds[@]}"; do
                    read -r ok ref us ns p50 p99 mx epc rss flt <<<"$(run_collector "$b" "$spans" "$rate" "$delay")"
                    printf '%-5s %-28s %5s %7s %5s | %7s %7s %8s %8s | %8s %8s %8s | %9s %6s %8s\n' \
                        "$r" "$b" "$spans" "$rate" "$delay" "$ok" "$ref" "$us" "$ns" "$p50" "$p99" \
                        "$mx" "$epc" "$rss" "$flt"
                    echo "$b $spans $rate $delay $us $p99 $ref $epc" >>"$tmp/runs"
                done
            done
            read -r g p gp99 <<<"$(run_floor "$spans" "$rate")"
            printf '%-5s %-28s %5s %7s %5s | floor: grpc receive+reply %s us/call (p99 %s ms), POST+gzip %s us/call\n' \
                "$r" floor "$spans" "$rate" - "$g" "$gp99" "$p"
            echo "$spans $rate $g $p" >>"$tmp/floors"
        done
    done
done

echo
echo "summary: medians over $rounds rounds (CPU per call in us; ratio = collector / (grpc + post floor))"
printf '%-28s %5s %7s %5s | %8s %8s %8s | %8s %6s %9s\n' build spans rate delay us/call floor ratio p99ms refused exp/call
for spans in "${sizes[@]}"; do
    for rate in "${rates[@]}"; do
        g=$(awk -v s="$spans" -v r="$rate" '$1==s && $2==r {print $3}' "$tmp/floors" | median)
        p=$(awk -v s="$spans" -v r="$rate" '$1==s && $2==r {print $4}' "$tmp/floors" | median)
        for delay in "${delays[@]}"; do
            for b in "${builds[@]}"; do
                sel() { awk -v b="$b" -v s="$spans" -v r="$rate" -v d="$delay" -v f="$1" \
                    '$1==b && $2==s && $3==r && $4==d {print $f}' "$tmp/runs" | median; }
                us=$(sel 5); p99=$(sel 6); ref=$(sel 7); epc=$(sel 8)
                printf '%-28s %5s %7s %5s | %8s %8s %8s | %8s %6s %9s\n' "$b" "$spans" "$rate" "$delay" \
                    "$us" "$(awk -v g="$g" -v p="$p" 'BEGIN{printf "%.1f", g + p}')" \
                    "$(awk -v u="$us" -v g="$g" -v p="$p" 'BEGIN{printf "%.2f", ((g + p) > 0) ? u / (g + p) : 0}')" \
                    "$p99" "$ref" "$epc"
            done
        done
    done
done
