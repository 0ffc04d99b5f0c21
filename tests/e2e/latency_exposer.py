#!/usr/bin/env python3
"""tests/e2e/latency_exposer.py: the stand-in engine's latency for
latency_guard.test.js: Debian's python3-prometheus-client serving, with
start_http_server on 127.0.0.1:PORT, SGLang's time-to-first-token and
inter-token latency histograms (sgl-project/sglang
python/sglang/srt/observability/metrics_collector.py: their names, the
label model_name and their default bucket bounds), as SGLang's tokenizer
manager records them: one observation per request (TTFT) or per token
(ITL).

Also SGLang's load gauges, sglang:num_running_reqs and sglang:num_queue_reqs
(label model_name), 0 until set.

Reads one command a line on stdin and answers each with one line, once
done (the next scrape sees it):
  observe ttft|itl SECONDS COUNT   record COUNT observations of SECONDS
  load RUNNING QUEUED              set the two gauges
Prints "ready" first, then serves until its stdin closes.

  latency_exposer.py PORT
"""
import sys

from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server

MODEL = "meta-llama/Llama-3.1-8B-Instruct"

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
               8.000]


def main():
    reg = CollectorRegistry()
    hist = {
        "ttft": Histogram("sglang:time_to_first_token_seconds",
                          "Histogram of time to first token in seconds.",
                          labelnames=["model_name"], buckets=TTFT_BUCKETS, registry=reg),
        "itl": Histogram("sglang:inter_token_latency_seconds",
                         "Histogram of inter-token latency in seconds.",
                         labelnames=["model_name"], buckets=ITL_BUCKETS, registry=reg),
    }
    series = {k: h.labels(model_name=MODEL) for k, h in hist.items()}   # served from the start
    running = Gauge("sglang:num_running_reqs", "The number of running requests.",
                    labelnames=["model_name"], registry=reg).labels(model_name=MODEL)
    queued = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
                   labelnames=["model_name"], registry=reg).labels(model_name=MODEL)
    start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=reg)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) == 4 and words[0] == "observe" and words[1] in series:
            for _ in range(int(words[3])):
                series[words[1]].observe(float(words[2]))
            print("ok", flush=True)
        elif len(words) == 3 and words[0] == "load":
            running.set(float(words[1]))
            queued.set(float(words[2]))
            print("ok", flush=True)
        else:
            print("error: " + line.strip(), flush=True)


if __name__ == "__main__":
    main()
