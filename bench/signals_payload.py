#!/usr/bin/env python3
# bench/signals_payload.py: writes one OTLP logs or metrics export request
# shaped like an SGLang engine's (bench/signals.sh sends it with h2load):
#   logs:    N app log records (two scheduler statistics lines to one error
#            line quoting a request), each with the logger, function and line
#            number and three attributes the fence removes;
#   metrics: a scrape of N data points over SGLang's series (gauges, the
#            _total counters as cumulative sums, latency histograms with
#            exemplars), SGLang's labels and two the fence removes.
# Encoded by hand (protobuf wire format, stdlib only) so the benchmark needs
# no schema package. --grpc-frame adds the 5-byte gRPC message prefix.
#
#   bench/signals_payload.py logs|metrics FILE [--items 512] [--grpc-frame]

import argparse
import struct

T0 = 1764633600000000000


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def key(num, wt):
    return varint(num << 3 | wt)


def ln(num, body):
    body = body.encode() if isinstance(body, str) else body
    return key(num, 2) + varint(len(body)) + body


def vi(num, v):
    return key(num, 0) + varint(v)


def f64(num, v):
    return key(num, 1) + struct.pack("<Q", v)


def dbl(num, v):
    return key(num, 1) + struct.pack("<d", v)


def anyv(v):
    if isinstance(v, int):
        return vi(3, v)
    if isinstance(v, float):
        return dbl(4, v)
    return ln(1, v)


def kv(k, v):
    return ln(1, k) + ln(2, anyv(v))


def resource():
    return ln(1, ln(1, kv("service.name", "sglang")) + ln(1, kv("host.name", "cvm-host-7")))


def logs(n):
    recs = b""
    for i in range(n):
        if i % 3 == 2:
            body, sev, st = "Error in request %d: prompt 'please summarise my medical record'" % i, 17, "ERROR"
        else:
            body = ("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, token usage: 0.%02d, "
                    "#running-req: %d, #queue-req: %d, " % (1 + i % 3, 7 * i + 3, 2 * i, i % 100, i % 5, i % 2))
            sev, st = 9, "INFO"
        r = (f64(1, T0 + i) + f64(11, T0 + i) + vi(2, sev) + ln(3, st) + ln(5, anyv(body)) +
             ln(6, kv("log.logger", "sglang.srt.managers.scheduler")) + ln(6, kv("code.function", "log_prefill_stats")) +
             ln(6, kv("code.lineno", 1200 + i % 400)) + ln(6, kv("request.prompt", "please summarise my record %d" % i)) +
             ln(6, kv("user.email", "user%d@example.com" % i)) + ln(6, kv("http.url", "https://internal/v1/chat?t=%d" % i)))
        recs += ln(2, r)
    scope = ln(1, ln(1, "sglang.srt.managers.scheduler") + ln(2, "0.4.6"))
    return ln(1, resource() + ln(2, scope + recs))


def metrics(n):
    series = [("gauge", "sglang:num_running_reqs", "{request}"), ("gauge", "sglang:num_queue_reqs", "{request}"),
              ("gauge", "sglang:token_usage", "1"), ("gauge", "sglang:gen_throughput", "{token}/s"),
              ("sum", "sglang:prompt_tokens_total", "{token}"), ("sum", "sglang:generation_tokens_total", "{token}"),
              ("histogram", "sglang:time_to_first_token_seconds", "s"),
              ("histogram", "sglang:e2e_request_latency_seconds", "s")]
    per = max(1, n // len(series))
    ms = b""
    for kind, name, unit in series:
        dps = b""
        for j in range(per):
            attrs = (ln(7 if kind == "gauge" or kind == "sum" else 9, kv("model_name", "meta-llama/Llama-3.1-8B-Instruct")) +
                     ln(7 if kind in ("gauge", "sum") else 9, kv("engine_type", "unified")) +
                     ln(7 if kind in ("gauge", "sum") else 9, kv("tp_rank", str(j % 64))) +
                     ln(7 if kind in ("gauge", "sum") else 9, kv("pp_rank", str(j // 64))) +
                     ln(7 if kind in ("gauge", "sum") else 9, kv("request.prompt", "a prompt %d" % j)) +
                     ln(7 if kind in ("gauge", "sum") else 9, kv("hostname", "cvm-host-7")))
            if kind in ("gauge", "sum"):
                dp = f64(2, T0) + f64(3, T0 + j) + (dbl(4, 0.25 + j) if kind == "gauge" else key(6, 1) + struct.pack("<q", 5120 + j)) + attrs
                dps += ln(1, dp)
            else:
                ex = f64(2, T0 + j) + dbl(3, 0.045) + ln(4, bytes(range(1, 9))) + ln(5, bytes(range(1, 17))) + \
                    ln(7, kv("rid", "5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a7b"))
                # SGLang's buckets (collector.py), which the fence pins; 4
                # observations, so that the counts sum to the count
                ttft = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
                bl = ttft if "first_token" in name else ttft + (600, 1200, 1800, 2400)
                cl = [0] * (len(bl) + 1)
                cl[0], cl[2], cl[3], cl[6] = 1, 1, 1, 1
                bounds = b"".join(struct.pack("<d", b) for b in bl)
                counts = b"".join(struct.pack("<Q", c) for c in cl)
                dp = (f64(2, T0) + f64(3, T0 + j) + f64(4, 4) + dbl(5, 1.776) + ln(6, counts) + ln(7, bounds) +
                      ln(8, ex) + attrs + dbl(11, 0.031) + dbl(12, 1.5))
                dps += ln(1, dp)
        if kind == "gauge":
            body = ln(5, dps)
        elif kind == "sum":
            body = ln(7, dps + vi(2, 2) + vi(3, 1))
        else:
            body = ln(9, dps + vi(2, 2))
        ms += ln(2, ln(1, name) + ln(2, "as SGLang describes it") + ln(3, unit) + body)
    scope = ln(1, ln(1, "sglang") + ln(2, "0.4.6"))
    return ln(1, resource() + ln(2, scope + ms)), per * len(series)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("signal", choices=["logs", "metrics"])
    ap.add_argument("file")
    ap.add_argument("--items", type=int, default=512)
    ap.add_argument("--grpc-frame", action="store_true")
    a = ap.parse_args()
    if a.signal == "logs":
        data, items = logs(a.items), a.items
    else:
        data, items = metrics(a.items)
    with open(a.file, "wb") as f:
        if a.grpc_frame:
            f.write(b"\0" + struct.pack(">I", len(data)))
        f.write(data)
    print("%s: %d bytes, %d %s" % (a.file, len(data) + (5 if a.grpc_frame else 0), items,
                                   "log records" if a.signal == "logs" else "metric points"))


if __name__ == "__main__":
    main()
