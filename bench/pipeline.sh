#!/usr/bin/env bash
# End-to-end benchmark: sf_send (OTLP/gRPC, SGLang-like 512-span batches)
# -> spanfence (allowlist) -> sf_sink (OTLP/HTTP). Measures spanfence's own
# CPU time (utime+stime from /proc) and memory (VmRSS idle, VmHWM peak), and
# prints the median and range of ROUNDS rounds next to the one-core codec
# floors.
#
#   bench/pipeline.sh [ROUNDS=5] [REQUESTS_PER_THREAD=200] [THREADS=2]
#   SF_BENCH_COMPRESSION=none|gzip      exporter compression (default gzip)
#   SF_BENCH_CONFIG=FILE                the collector's config with the otlphttp
#       exporter (default bench/configs/pipeline.yaml)
#   SF_BENCH_RULES=sample|cvm           the sample allowlist (default) or
#       configs/cvm.yaml's transform/allowlist as it is now, put in place of
#       the sample's at run time (set SPANFENCE_PSEUDONYM_KEY)
#   SF_BENCH_EXPORTER=otlphttp|otlp     which exporter (default otlphttp). otlp
#       sends OTLP/gRPC to a second spanfence as the sink
#       (bench/configs/relay.yaml, not measured), which counts what arrives.
#   SF_BENCH_FLOORS=1|0                 also measure, on the same load and
#       pinning, what the libraries cost alone (bench_floor: a bare gRPC core
#       server, the same with the codec pass, a bare libcurl POST loop of
#       the allowlisted batch) and print spanfence next to their sum
#       (default 1; only with the otlphttp exporter, uncompressed or not)
#   SF_BENCH_PIN=1|0                    pin spanfence to CPU 0 and the load
#       and the sink to CPU 1 (default 1 when there are 2 CPUs or more)
#   SF_BENCH_COLLECTOR="cmd args..."    measure another collector instead, on
#       the same load and pinning: it must take OTLP/gRPC on
#       127.0.0.1:$SF_BENCH_GRPC_PORT and send OTLP/HTTP to
#       http://127.0.0.1:$SF_BENCH_SINK_PORT/v1/traces (bench/README.md).
#       Its CPU is read from /proc like spanfence's; the loss check is the
#       sink's count against what sf_send had acknowledged.
#   SF_BENCH_RATE=R                     send R requests a second per thread
#       (sf_send --rate) instead of as fast as the answers come: a load
#       both builds of an A/B accept whole (see below)
# A request the collector refuses (its queue full: the exporter is behind)
# is counted and reported per round; its spans are not in the rates, while
# the CPU it cost (receiving it, and decoding it when refused after the
# codec) is: a round with refusals is not comparable with one without.
# Every round ends when the sink (or the relay) has every acknowledged
# span, for spanfence as for another collector: the bench reads nothing
# from the measured collector while its CPU is counted.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
requests=${2:-200}
threads=${3:-2}
spans=512
build=${BUILD:-build}
exporter=${SF_BENCH_EXPORTER:-otlphttp}
export SF_BENCH_GRPC_PORT=${SF_BENCH_GRPC_PORT:-14317}
export SF_BENCH_SINK_PORT=${SF_BENCH_SINK_PORT:-14319}
export SF_BENCH_RELAY_PORT=${SF_BENCH_RELAY_PORT:-14320}
export SF_BENCH_METRICS_PORT=${SF_BENCH_METRICS_PORT:-18888}
export SF_BENCH_RELAY_METRICS_PORT=${SF_BENCH_RELAY_METRICS_PORT:-18889}
export SF_BENCH_FLOOR_PORT=${SF_BENCH_FLOOR_PORT:-14321}
peer=${SF_BENCH_COLLECTOR:-}
[ -z "$peer" ] || exporter=otlphttp
case "$exporter" in
    otlphttp) config=${SF_BENCH_CONFIG:-bench/configs/pipeline.yaml} ;;
    otlp)     config=bench/configs/pipeline_grpc.yaml ;;
    *) echo "pipeline.sh: SF_BENCH_EXPORTER must be otlphttp or otlp" >&2; exit 2 ;;
esac
. bench/pin.sh
bench_pin "the collector on CPU 0; sf_send and the sink on CPU 1"
tmp=$(mktemp -d)
case "${SF_BENCH_RULES:-sample}" in
    sample) ;;
    cvm)
        # The production rules judge every field; the sample batch is not
        # SGLang-shaped, so most of its keys and names fail them and go.
        /usr/bin/python3 - "$config" configs/cvm.yaml >"$tmp/config.yaml" <<'PY' || exit 1
import sys, yaml
bench, cvm = (yaml.safe_load(open(f)) for f in sys.argv[1:3])
bench["processors"]["transform/allowlist"] = cvm["processors"]["transform/allowlist"]
print(yaml.safe_dump(bench, sort_keys=False))
PY
        config=$tmp/config.yaml ;;
    *) echo "pipeline.sh: SF_BENCH_RULES must be sample or cvm" >&2; exit 2 ;;
esac
sf_pid="" relay_pid="" sink_pid=""
trap 'kill $sf_pid $relay_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

kib_of() { awk -v k="$2" '$1==k":"{print $2}' "/proc/$1/status"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
range() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
wait_metrics() {
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$1/metrics" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "pipeline.sh: nothing answers on metrics port $1" >&2
    return 1
}
wait_port() {
    for _ in $(seq 200); do
        { : <>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null && return 0
        sleep 0.05
    done
    echo "pipeline.sh: nothing listens on port $1" >&2
    return 1
}
sink_spans() { curl -s "http://127.0.0.1:$SF_BENCH_SINK_PORT/stats" | awk '{print $4+0}'; }
# What reached the end of the pipeline: the sink's spans, or the relay's
# accepted ones (the relay is not measured, so scraping it costs the
# measured collector nothing).
delivered() {
    if [ "$exporter" = otlp ]; then
        curl -s "http://127.0.0.1:$SF_BENCH_RELAY_METRICS_PORT/metrics" |
            awk '/^otelcol_receiver_accepted_spans/{s+=$2} END{print s+0}'
    else
        sink_spans
    fi
}
rate_args=()
[ -z "${SF_BENCH_RATE:-}" ] || rate_args=(--rate "$SF_BENCH_RATE")

if [ "$exporter" = otlp ]; then
    "${pin_peer[@]}" "$build/spanfence" --config bench/configs/relay.yaml 2>"$tmp/relay.err" &
    relay_pid=$!
    wait_metrics "$SF_BENCH_RELAY_METRICS_PORT"
else
    "${pin_peer[@]}" "$build/sf_sink" -p "$SF_BENCH_SINK_PORT" >"$tmp/sink.out" 2>"$tmp/sink.err" &
    sink_pid=$!
fi
# The one-core stage costs first, on the collector's CPU, while nothing else
# of the benchmark runs there.
"${pin_sf[@]}" "$build/bench_codec" $spans 5 >"$tmp/codec.out"
if [ -n "$peer" ]; then
    # shellcheck disable=SC2086  # the command line is split on purpose
    "${pin_sf[@]}" $peer >"$tmp/sf.err" 2>&1 &
    sf_pid=$!
    wait_port "$SF_BENCH_GRPC_PORT"
    collector="${peer%% *}"
else
    "${pin_sf[@]}" "$build/spanfence" --config "$config" 2>"$tmp/sf.err" &
    sf_pid=$!
    wait_metrics "$SF_BENCH_METRICS_PORT"
    collector="spanfence"
fi
sleep 0.5
kill -0 $sf_pid 2>/dev/null || { echo "pipeline.sh: the collector exited: $(cat "$tmp/sf.err")" >&2; exit 1; }
idle_kib=$(kib_of $sf_pid VmRSS)
idle_anon_kib=$(awk '$1=="Anonymous:"{print $2}' "/proc/$sf_pid/smaps_rollup")

: >"$tmp/rates"
acked=0 refused=0
for r in $(seq "$rounds"); do
    c0=$(cpu_of $sf_pid)
    t0=$(date +%s.%N)
    "${pin_peer[@]}" "$build/sf_send" --endpoint "127.0.0.1:$SF_BENCH_GRPC_PORT" --spans $spans \
        --requests "$requests" --threads "$threads" "${rate_args[@]}" >"$tmp/send.out" || true
    round_refused=$(awk '/^  [A-Z_]+: /&&$1!="OK:"{s+=$2} END{print s+0}' "$tmp/send.out")
    refused=$((refused + round_refused))
    sent=$(awk '/spans accepted/{gsub(",","",$8); print $8}' "$tmp/send.out")
    [ -n "$sent" ] || { echo "pipeline.sh: sf_send failed: $(cat "$tmp/send.out")" >&2; exit 1; }
    acked=$((acked + sent))
    # wait until everything acknowledged has arrived, so the exporter's CPU
    # is counted; the same test for every collector (it once read
    # spanfence's queue from its /metrics: a scrape every 50 ms in the window)
    for _ in $(seq 500); do
        [ "$(delivered)" -ge "$acked" ] && break
        sleep 0.02
    done
    t1=$(date +%s.%N)
    c1=$(cpu_of $sf_pid)
    awk -v s="$sent" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN {
        cpu = c1 - c0; wall = t1 - t0;
        printf "%.0f %.0f %.3f\n", s / cpu, s / wall, cpu * 1e6 / s }' >>"$tmp/rates"
    echo "round $r: $(tail -1 "$tmp/rates" | awk '{printf "%s spans/CPU-s, %s spans/s wall, %s CPU-s per M spans", $1, $2, $3}'), $round_refused requests refused"
done
peak_kib=$(kib_of $sf_pid VmHWM)
metrics=""
[ -n "$peer" ] || metrics=$(curl -s "http://127.0.0.1:$SF_BENCH_METRICS_PORT/metrics")
kill -TERM $sf_pid; wait $sf_pid || true
if [ -n "$relay_pid" ]; then
    sunk=$(curl -s "http://127.0.0.1:$SF_BENCH_RELAY_METRICS_PORT/metrics" |
        awk '/^otelcol_receiver_accepted_spans/{s+=$2} END{print s+0}')
    kill -TERM $relay_pid; wait $relay_pid || true
else
    kill -TERM $sink_pid; wait $sink_pid || true
    sunk=$(awk '{print $4}' "$tmp/sink.out")
fi

# The floors: the same load, pinning and request count, with what the
# libraries do alone (bench/bench_floor.c), `rounds` times each, alternating,
# with twice the requests of a round (CPU time is read in clock ticks).
floors=${SF_BENCH_FLOORS:-1}
[ -z "$peer" ] && [ "$exporter" = otlphttp ] || floors=0
if [ "$floors" = 1 ]; then
    "${pin_peer[@]}" "$build/sf_sink" -p "$SF_BENCH_SINK_PORT" >/dev/null 2>"$tmp/sink.err" &
    sink_pid=$!
    : >"$tmp/floor_grpc" ; : >"$tmp/floor_codec"; : >"$tmp/floor_post"
    for r in $(seq "$rounds"); do
        for mode in grpc codec; do
            set -- ; [ $mode = codec ] && set -- codec
            "${pin_sf[@]}" "$build/bench_floor" grpc "$SF_BENCH_FLOOR_PORT" "$@" &
            sf_pid=$!
            wait_port "$SF_BENCH_FLOOR_PORT"
            c0=$(cpu_of $sf_pid)
            "${pin_peer[@]}" "$build/sf_send" --endpoint "127.0.0.1:$SF_BENCH_FLOOR_PORT" \
                --spans $spans --requests $((requests * 2)) --threads "$threads" >"$tmp/send.out"
            c1=$(cpu_of $sf_pid)
            sent=$(awk '/spans accepted/{gsub(",","",$8); print $8}' "$tmp/send.out")
            kill -TERM $sf_pid; wait $sf_pid || true
            awk -v s="$sent" -v c0="$c0" -v c1="$c1" 'BEGIN { printf "%.0f\n", (c1 - c0) * 1e9 / s }' \
                >>"$tmp/floor_$mode"
        done
        "${pin_sf[@]}" "$build/bench_floor" post "http://127.0.0.1:$SF_BENCH_SINK_PORT/v1/traces" \
            $((requests * threads * 2)) 2 $spans | awk '{print $(NF - 5)}' >>"$tmp/floor_post"
    done
    kill -TERM $sink_pid; wait $sink_pid || true
fi

per_cpu=$(awk '{print $1}' "$tmp/rates" | median)
per_wall=$(awk '{print $2}' "$tmp/rates" | median)
cpu_per_m=$(awk '{print $3}' "$tmp/rates" | median)
accepted=$(echo "$metrics" | awk '/^otelcol_receiver_accepted_spans/{s+=$2} END{print s+0}')
exported=$(echo "$metrics" | awk '/^otelcol_exporter_sent_spans/{s+=$2} END{print s+0}')
compression=${SF_BENCH_COMPRESSION:-gzip}
[ -z "$peer" ] || compression="as its config says"
# One-core stage costs of this run (bench_codec, printed in full below).
codec_rate=$(awk '/^codec: validate \+ allowlist, one pass/{print $NF}' "$tmp/codec.out")
copy_rate=$(awk '/^memcpy of the encoded batch/{print $NF}' "$tmp/codec.out")
comp_ns=0
case "$compression" in
    gzip|zstd)   # the sample batch's line comes first
        comp_ns=$(awk -v c="$compression" '$1 == c && $2 == "level" && $3 == 1 {
            for (i = 4; i < NF; i++) if ($(i + 1) == "ns/span") { print $i; exit } }' \
            "$tmp/codec.out") ;;
esac
echo
echo "== $collector end to end ($rounds rounds x $threads threads x $requests requests x $spans spans)"
echo "  exporter: $exporter, compression $compression; pinning: $pinning"
printf "  spans per CPU-second:          %12.0f median, range %s\n" "$per_cpu" \
    "$(awk '{print $1}' "$tmp/rates" | range)"
printf "  spans per second (wall):       %12.0f median, range %s\n" "$per_wall" \
    "$(awk '{print $2}' "$tmp/rates" | range)"
printf "  CPU-seconds per M spans:       %12.3f median, range %s\n" "$cpu_per_m" \
    "$(awk '{print $3 * 1000}' "$tmp/rates" | range | awk -F- '{printf "%.3f-%.3f", $1/1000, $2/1000}')"
printf "  idle RSS:                      %9.1f MiB (%.1f MiB anonymous, %.1f MiB file-backed: shared-library pages)\n" \
    "$(awk -v k="$idle_kib" 'BEGIN{print k/1024}')" "$(awk -v k="$idle_anon_kib" 'BEGIN{print k/1024}')" \
    "$(awk -v k="$idle_kib" -v a="$idle_anon_kib" 'BEGIN{print (k-a)/1024}')"
printf "  peak RSS (VmHWM):              %9.1f MiB\n" "$(awk -v k="$peak_kib" 'BEGIN{print k/1024}')"
if [ -n "$peer" ]; then
    printf "  acknowledged / sink: %s / %s\n" "$acked" "$sunk"
else
    printf "  acknowledged / accepted / exported / sink: %s / %s / %s / %s\n" "$acked" "$accepted" \
        "$exported" "$sunk"
fi
printf "  requests refused (queue full):  %s of %s\n" "$refused" "$((rounds * threads * requests))"
[ "$refused" = 0 ] || echo "  (refused requests cost CPU that no accepted span pays back: compare builds at a rate both accept whole, SF_BENCH_RATE)"
[ -z "${SF_BENCH_RATE:-}" ] || echo "  load: $SF_BENCH_RATE requests/s per thread (sf_send --rate)"
loss=ok
[ "$acked" = "$sunk" ] || loss=MISMATCH
[ -n "$peer" ] || [ "$accepted" = "$exported" ] || loss=MISMATCH
echo "  loss check (sink = acknowledged): $loss"
echo
echo "== next to the one-core stage costs measured in this run (bench_codec, on the collector's CPU)"
awk -v e2e="$cpu_per_m" -v codec="$codec_rate" -v copy="$copy_rate" -v comp="$comp_ns" \
    -v name="$collector" -v c="$compression" -v peer="$peer" -v x="$exporter" 'BEGIN {
    total = e2e * 1000; cod = 1e9 / codec; cp = 1e9 / copy;
    printf "  %-58s %8s %14s\n", "", "ns/span", "spans/CPU-s";
    printf "  %-58s %8.0f %14.0f\n", name " end to end (median)", total, 1e9 / total;
    printf "  %-58s %8.0f %14.0f\n", "  codec: validate + allowlist, one pass", cod, codec;
    if (comp > 0)
        printf "  %-58s %8.0f %14.0f\n", "  exporter compression (" c " level 1)", comp, 1e9 / comp;
    printf "  %-58s %8.0f %14.0f\n", "  memcpy of the request", cp, copy;
    if (peer == "") {
        rest = total - cod - comp;
        printf "  %-58s %8.0f\n", "  the rest, by difference: receive, queue, " x " send", rest;
    } else {
        printf "  (the stage rows are spanfence'"'"'s one-core costs, for scale: %s does its own work)\n", name;
    } }'
if [ "$floors" = 1 ]; then
    echo
    echo "== the floor: what the libraries cost alone on this load ($rounds rounds each, median and range)"
    fg=$(median <"$tmp/floor_grpc") fc=$(median <"$tmp/floor_codec") fp=$(median <"$tmp/floor_post")
    printf "  %-58s %8s\n" "" "ns/span"
    printf "  %-58s %8.0f  (%s)\n" "bare gRPC core server: receive + reply" "$fg" "$(range <"$tmp/floor_grpc")"
    printf "  %-58s %8.0f  (%s)\n" "the same + copy + codec pass (validate + allowlist)" "$fc" "$(range <"$tmp/floor_codec")"
    printf "  %-58s %8.0f  (%s)\n" "bare libcurl POST of the allowlisted batch, 2 threads" "$fp" "$(range <"$tmp/floor_post")"
    awk -v fc="$fc" -v fp="$fp" -v e2e="$cpu_per_m" -v c="$comp_ns" -v name="$collector" 'BEGIN {
        floor = fc + fp + c; total = e2e * 1000;
        printf "  %-58s %8.0f  = %.0f spans/CPU-s at most with these libraries\n", \
            "floor: receive + codec + POST" (c > 0 ? " + compression" : ""), floor, 1e9 / floor;
        printf "  %-58s %8.0f  (%.0f%% of it above the floor)\n", name " end to end (median)", total,
            100 * (total - floor) / total }'
fi
echo
echo "== one-core stage costs (bench_codec $spans 5, same batch)"
cat "$tmp/codec.out"
[ "$loss" = ok ]
