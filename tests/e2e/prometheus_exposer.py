#!/usr/bin/env python3
"""tests/e2e/prometheus_exposer.py: a real Prometheus exposer for
prometheus_scrape.test.js: Debian's python3-prometheus-client serving, with
start_http_server on 127.0.0.1:PORT, SGLang's metric families with SGLang's
names, label names and default bucket bounds (sgl-project/sglang
python/sglang/srt/observability/metrics_collector.py: the scheduler's
gauges labelled model_name, engine_type, tp_rank, pp_rank; the tokenizer's
counters and the time-to-first-token, inter-token and end-to-end latency
histograms labelled model_name; cached_tokens_total with cache_source), set
to fixed values, plus one gauge whose label carries a prompt (what the
fence must not let out), a NaN and an infinite gauge.

Prints one JSON line: what the registry holds (families with their type,
help and samples, as prometheus_client collects them), then serves until
its stdin closes.

  prometheus_exposer.py PORT
"""
import json
import math
import sys

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SECRET = 'SECRET-PROMPT tell me "everything"\nnow \\ please'

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
               1200, 1800, 2400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
               8.000]


def build():
    reg = CollectorRegistry()
    sched = {"model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
    tok = {"model_name": MODEL}

    def gauge(name, doc, value, labels=sched):
        g = Gauge(name, doc, labelnames=list(labels.keys()), registry=reg)
        g.labels(**labels).set(value)

    gauge("sglang:num_running_reqs", "The number of running requests.", 3)
    gauge("sglang:num_used_tokens", "The number of used tokens.", 2048)
    gauge("sglang:token_usage", "The token usage.", 0.42)
    gauge("sglang:gen_throughput", "The generation throughput (token/s).", 1234.5)
    gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", 1)
    gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.25)
    gauge("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.",
          math.nan)
    gauge("sglang:kv_transfer_speed_gb_s", "The transfer speed of the KV cache in GB/s.",
          math.inf)
    debug = Gauge("sglang:debug_request", "A gauge labelled with a prompt (hostile).",
                  labelnames=["model_name", "prompt"], registry=reg)
    debug.labels(model_name=MODEL, prompt=SECRET).set(1)

    def counter(name, doc, value, labels=tok):
        c = Counter(name, doc, labelnames=list(labels.keys()), registry=reg)
        c.labels(**labels).inc(value)

    counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", 1000)
    counter("sglang:generation_tokens_total", "Number of generation tokens processed.", 250)
    counter("sglang:num_requests_total", "Number of requests processed.", 7)
    counter("sglang:num_aborted_requests_total", "Number of requests aborted.", 0)
    counter("sglang:cached_tokens_total",
            "Number of cached prompt tokens by source (device/host/storage).", 300,
            labels={"model_name": MODEL, "cache_source": "device"})

    def histogram(name, doc, buckets, values):
        h = Histogram(name, doc, labelnames=["model_name"], buckets=buckets, registry=reg)
        for v in values:
            h.labels(model_name=MODEL).observe(v)

    histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              TTFT_BUCKETS, [0.05, 0.15, 0.3, 0.9, 2.5, 500])
    histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              ITL_BUCKETS, [0.003, 0.012, 0.05, 0.05])
    histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
              E2E_BUCKETS, [1.2, 3.4, 7000])
    return reg


def value(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return v


def main():
    port = int(sys.argv[1])
    reg = build()
    families = []
    for fam in reg.collect():
        families.append({
            "name": fam.name, "type": fam.type, "help": fam.documentation,
            "samples": [{"name": s.name, "labels": s.labels, "value": value(s.value)}
                        for s in fam.samples],
        })
    start_http_server(port, addr="127.0.0.1", registry=reg)
    print(json.dumps({"families": families, "secret": SECRET}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
