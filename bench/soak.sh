#!/usr/bin/env bash
# Soak and fault run (not a timed test): several concurrent OTLP/gRPC clients
# at a fixed rate for SECONDS while the downstream is, in turn, healthy, slow,
# failing every other request, killed, and restarted. At the end it prints
# spans sent, accepted, refused, exported, dropped by reason, peak RSS, and
# whether accepted = exported + dropped + queued held.
#
#   bench/soak.sh [SECONDS=120] [CLIENTS=3] [RATE=20 requests/s per client]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
clients=${2:-3}
rate=${3:-20}
spans=256
build=${BUILD:-build}
export SF_SOAK_GRPC_PORT=${SF_SOAK_GRPC_PORT:-15317}
export SF_SOAK_SINK_PORT=${SF_SOAK_SINK_PORT:-15319}
export SF_SOAK_METRICS_PORT=${SF_SOAK_METRICS_PORT:-18889}
tmp=$(mktemp -d)
sink_pid=""
cleanup() { kill $sf_pid $sink_pid 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

metric() {  # sum of a metric's series, optionally filtered by a label regex
    curl -s "http://127.0.0.1:$SF_SOAK_METRICS_PORT/metrics" |
        awk -v m="$1" -v f="${2:-}" '$1 ~ "^"m"({|$)" && (f == "" || $1 ~ f) {s+=$2} END {print s+0}'
}
sink() { "$build/sf_sink" -p "$SF_SOAK_SINK_PORT" "$@" >>"$tmp/sink.out" 2>>"$tmp/sink.err" & sink_pid=$!; }
stop_sink() { [ -n "$sink_pid" ] && kill -TERM $sink_pid 2>/dev/null && wait $sink_pid 2>/dev/null || true; sink_pid=""; }
rss() { awk '/^VmRSS/{print $2}' /proc/$sf_pid/status; }

sink
"$build/spanfence" --config bench/configs/soak.yaml 2>"$tmp/sf.err" &
sf_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$SF_SOAK_METRICS_PORT/metrics" >/dev/null && break; sleep 0.1; done

for c in $(seq "$clients"); do
    "$build/sf_send" --endpoint "127.0.0.1:$SF_SOAK_GRPC_PORT" --spans $spans --rate "$rate" \
        --duration "$secs" --distinct 8 >"$tmp/client$c.out" 2>&1 &
done

phase=$((secs / 6))
max_rss=0
run_phase() {   # name, then wait a phase while sampling RSS
    echo "$(date +%T) phase: $1"
    for _ in $(seq "$phase"); do
        r=$(rss); [ "$r" -gt "$max_rss" ] && max_rss=$r
        sleep 1
    done
}
run_phase "healthy downstream"
stop_sink; sink -d 300;          run_phase "slow downstream (300 ms per request)"
stop_sink; sink -f 2;            run_phase "failing downstream (503 on every 2nd request)"
stop_sink;                       run_phase "downstream killed"
sink;                            run_phase "downstream restarted"
run_phase "healthy downstream"
wait $(jobs -p | grep -v -e "^$sf_pid\$" -e "^$sink_pid\$") 2>/dev/null || true

echo "$(date +%T) clients done; waiting for the queue to drain"
for _ in $(seq 120); do [ "$(metric spanfence_exporter_queued_spans)" = 0 ] && break; sleep 1; done

sent=$(cat "$tmp"/client*.out | awk '/spans sent/{gsub(",","",$5); s+=$5} END{print s+0}')
client_ok=$(cat "$tmp"/client*.out | awk '/spans accepted/{gsub(",","",$8); s+=$8} END{print s+0}')
accepted=$(metric otelcol_receiver_accepted_spans)
refused=$(metric otelcol_receiver_refused_spans)
exported=$(metric otelcol_exporter_sent_spans)
failed=$(metric otelcol_exporter_send_failed_spans)
queued=$(metric spanfence_exporter_queued_spans)
peak=$(awk '/^VmHWM/{print $2}' /proc/$sf_pid/status)
echo
echo "== soak: ${secs}s, $clients clients x $rate req/s x $spans spans"
echo "spans sent by clients:        $sent"
echo "  acknowledged OK to clients: $client_ok"
echo "accepted (receiver):          $accepted"
echo "refused (receiver):           $refused"
for r in queue_full memory_limit malformed filter_failed; do
    echo "  refused $r: $(metric otelcol_receiver_refused_spans "reason=\"$r\"")"
done
echo "exported (sent downstream):   $exported"
echo "dropped after acceptance:     $failed"
for r in retries_exhausted permanent_error shutdown; do
    echo "  dropped $r: $(metric otelcol_exporter_send_failed_spans "reason=\"$r\"")"
done
echo "still queued:                 $queued"
echo "peak RSS (VmHWM):             $((peak / 1024)) MiB (sampled max VmRSS $((max_rss / 1024)) MiB)"
stop_sink
echo "downstream received (all sink runs): $(awk '{s+=$4} END{print s+0}' "$tmp/sink.out") spans"
ok=1
[ "$accepted" = "$client_ok" ] || { echo "MISMATCH: clients were told OK for $client_ok spans, receiver accepted $accepted"; ok=0; }
[ "$accepted" = "$((exported + failed + queued))" ] || { echo "MISMATCH: accepted != exported + dropped + queued"; ok=0; }
[ "$sent" -ge "$((accepted + refused))" ] || { echo "MISMATCH: more spans accounted than sent"; ok=0; }
kill -TERM $sf_pid; wait $sf_pid; rc=$?
echo "spanfence exit code on SIGTERM: $rc"
if [ $ok = 1 ]; then echo "invariant held: accepted = exported + dropped + queued"; else exit 1; fi
