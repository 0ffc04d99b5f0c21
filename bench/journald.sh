#!/usr/bin/env bash
# The journald receiver's cost per record: RECORDS SGLang-shaped journal
# entries (statistics lines, with a prompt line one in ten) written by the
# real journal code (systemd-journal-remote, from the export format) into a
# directory; spanfence reads them from the beginning through a logs fence
# (a transform keeping statistics-line bodies only) and exports OTLP/HTTP
# to bench/sf_sink. Its CPU is spanfence's utime+stime from /proc, from
# start until every record is accepted and sent, minus the CPU of an idle
# start with an empty journal. Prints records per CPU-second and CPU
# microseconds per record for each round, their median, and the loss check
# (accepted = sent = RECORDS), exiting non-zero on a loss.
#
#   bench/journald.sh [ROUNDS=3] [RECORDS=100000]
#   SF_BENCH_PIN=1|0   spanfence on CPU 0, the sink on CPU 1 (default 1 with 2 CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
records=${2:-100000}
build=${BUILD:-build}
sink_port=${SF_BENCH_SINK_PORT:-14329}
metrics_port=${SF_BENCH_METRICS_PORT:-18898}
grpc_port=${SF_BENCH_GRPC_PORT:-14327}
remote=/lib/systemd/systemd-journal-remote
. bench/pin.sh
bench_pin "spanfence on CPU 0; the sink on CPU 1"
[ -x "$remote" ] || { echo "journald.sh: $remote not found (systemd-journal-remote)" >&2; exit 1; }
tmp=$(mktemp -d)
sf_pid="" sink_pid=""
trap 'kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
metric() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v n="$1" '
        $1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.0f\n", s }'
}

mkdir -p "$tmp/journal" "$tmp/empty"
python3 - "$records" >"$tmp/export" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout
t0 = 1796000000000000
for i in range(n):
    if i % 10 == 9:
        msg = "[2026-12-06 06:00:00 TP0] Error in request rid=%d: prompt='tell me my secret'" % i
    elif i % 2:
        msg = ("[2026-12-06 06:00:00 TP0] Decode batch. #running-req: 1, #token: %d, token usage: 0.00, "
               "gen throughput (token/s): 35.12, #queue-req: 0" % (24 + i % 1000))
    else:
        msg = ("[2026-12-06 06:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: %d, #cached-token: 0, "
               "token usage: 0.00, #running-req: 0, #queue-req: 0" % (7 + i % 1000))
    out.write("__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\n"
              "PRIORITY=6\n_SYSTEMD_UNIT=sglang.service\nSYSLOG_IDENTIFIER=python3\n_PID=4242\n"
              "_CMDLINE=python3 -m sglang.launch_server\nMESSAGE=%s\n\n" % (t0 + i, 1000 + i, msg))
PY
"$remote" --output="$tmp/journal/bench.journal" - <"$tmp/export" 2>/dev/null

write_config() {  # DIR
    cat >"$tmp/sf.yaml" <<EOF2
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$grpc_port
  journald:
    directory: $1
    start_at: beginning
    units: [sglang]
processors:
  transform/fence:
    error_mode: propagate
    log_statements:
      - context: log
        statements:
          - keep_keys(attributes, ["_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID"])
          - 'set(body, nil) where not IsMatch(body, "^\\\\[[0-9: -]+ TP[0-9]+\\\\] (Prefill batch\\\\. #new-seq: [0-9]+, #new-token: [0-9]+, #cached-token: [0-9]+, token usage: [0-9.]+, #running-req: [0-9]+, #queue-req: [0-9]+|Decode batch\\\\. #running-req: [0-9]+, #token: [0-9]+, token usage: [0-9.]+, gen throughput \\\\(token/s\\\\): [0-9.]+, #queue-req: [0-9]+)$")'
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$sink_port
    compression: none
service:
  telemetry:
    metrics:
      address: 127.0.0.1:$metrics_port
  pipelines:
    logs:
      receivers: [otlp, journald]
      processors: [transform/fence]
      exporters: [otlphttp]
EOF2
}

start_sf() {
    "${pin_sf[@]}" "$build/spanfence" --config "$tmp/sf.yaml" 2>"$tmp/sf.err" &
    sf_pid=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$metrics_port/metrics" >/dev/null 2>&1 && return
        kill -0 $sf_pid 2>/dev/null || { echo "journald.sh: spanfence exited: $(cat "$tmp/sf.err")" >&2; exit 1; }
        sleep 0.1
    done
}

"${pin_peer[@]}" "$build/sf_sink" -p "$sink_port" >"$tmp/sink.out" 2>"$tmp/sink.err" &
sink_pid=$!
# the CPU of a start with nothing to read: subtracted
write_config "$tmp/empty"
start_sf
idle=$(cpu_of $sf_pid)
kill -TERM $sf_pid; wait $sf_pid || true
write_config "$tmp/journal"
loss=ok
for r in $(seq "$rounds"); do
    start_sf
    for _ in $(seq 1200); do
        a=$(metric otelcol_receiver_accepted_log_records)
        s=$(metric otelcol_exporter_sent_log_records)
        [ "$a" -ge "$records" ] && [ "$s" = "$a" ] && break
        sleep 0.05
    done
    c=$(cpu_of $sf_pid)
    kill -TERM $sf_pid; wait $sf_pid || true
    sf_pid=""
    [ "$a" = "$records" ] && [ "$s" = "$records" ] || loss="MISMATCH (accepted $a, sent $s)"
    awk -v n="$records" -v c="$c" -v i="$idle" 'BEGIN { printf "%.0f %.2f\n", n / (c - i), (c - i) * 1e6 / n }' >>"$tmp/rates"
    echo "round $r: $(tail -1 "$tmp/rates" | awk '{printf "%s records/CPU-s, %s CPU-us/record", $1, $2}')"
done
echo
echo "== spanfence journald receiver ($rounds rounds x $records records, read from the beginning, fenced, exported; pinning: $pinning)"
echo "  records per CPU-second (median): $(awk '{print $1}' "$tmp/rates" | median)"
echo "  CPU microseconds per record (median): $(awk '{print $2}' "$tmp/rates" | median)"
echo "  loss check (accepted = sent = $records): $loss"
[ "$loss" = ok ]
