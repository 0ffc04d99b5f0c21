#!/usr/bin/python3
# tests/e2e/privacy_signals.py: the hostile-input test for logs and metrics,
# end to end (issue 25; ctest e2e/privacy_signals). The real binary runs the
# seed deployment's config with spanfence's fence (configs/otelcol-seed.yaml +
# configs/otelcol-seed-fence.yaml, only the listening addresses moved by
# --set). Requests go in over OTLP/gRPC, HTTP protobuf and HTTP JSON:
#  - realistic control data: an SGLang-style metrics scrape (sglang:* gauges,
#    counters as cumulative sums, latency histograms, with SGLang's labels
#    and exemplars) and SGLang's app logs (scheduler statistics lines);
#  - the same with a marker planted in one string-bearing field each: log
#    body (string, kvlist, array, bytes, a statistics line with text
#    appended), severity_text, event_name, every attribute context (kept key
#    with a bad value, unkept key, the key itself, nested values), resource
#    entity_refs, scope name/version, both schema_urls, metric name,
#    description, unit, metadata, datapoint attributes of every point type,
#    exemplar filtered_attributes;
#  - hostile encodings of clean requests: an unknown field holding a marker
#    at every message level, the old schema's fields (ResourceLogs /
#    ResourceMetrics field 1000, Metric int_gauge/int_sum/int_histogram,
#    reserved label fields) full of markers, non-minimal varints for every
#    tag and length, a singular field repeated (the marker first, the legal
#    value last).
# The telemetry gateway's bytes are decoded by python3-protobuf with the
# official schema (the official .proto files compiled by protoc, found as
# privacy/signals_codec.py finds them: $SF_OTLP_PROTO_DIR, the
# opentelemetry-proto mirror of a development session, else pipeline/proto,
# the codec's copies of the official logs and metrics files): no marker arrives, no unknown
# field arrives, every record and point of every case arrives exactly once
# (found by its timestamp), none from the old schema's fields, and the
# controls and hostile encodings arrive with their legitimate values.
#
#   /usr/bin/python3 tests/e2e/privacy_signals.py --binary build/spanfence --build-dir build/x

import sys
sys.dont_write_bytecode = True     # no __pycache__ in the source tree

import argparse                    # noqa: E402
import re
import base64
import http.client
import json
import os
import shutil
import struct
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "privacy"))

import grpc                        # noqa: E402
import peers as P                  # noqa: E402
import wire as W                   # noqa: E402
from privacy_markers import strings_of  # noqa: E402
from signals_codec import classes  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from google.protobuf import unknown_fields  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARD = "4111111111111111"          # a card-length digit run; never a value of the controls
MARK = "MRK"      # upper case: every rule of the fence admits lower case only, or a fixed text
VM_ID = "cvm-privacy-0007"
METHOD = {"logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
          "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"}
T0 = 1764633600000000000          # 2025-12-02T00:00:00Z in ns; item i of case c: T0 + c*1000 + i
OLD = 500                         # items under old-schema fields: T0 + c*1000 + OLD + i (must not arrive)
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LABELS = {"model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
UNITS = {"s", "1", "{token}", "{request}", "{token}/s"}


# SGLang's scheduler statistics as it prints them (scheduler_metrics_mixin.py
# log_prefill_stats / log_decode_stats: fields end with ", ")
def stats_line(i):
    if i % 2:
        return ("Decode batch, #running-req: %d, #token: %d, token usage: 0.%02d, cuda graph: %s, "
                "gen throughput (token/s): %d.%02d, #queue-req: %d, "
                % (1 + i % 4, 100 + i, i % 100, "True" if i % 3 else "False", 40 + i, i % 100, i % 2))
    return ("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, token usage: 0.%02d, "
            "#running-req: %d, #queue-req: %d, " % (1 + i % 3, 7 * i + 3, 2 * i, i % 100, i % 5, i % 2))


# SGLang's TokenizerMetricsCollector buckets (collector.py): the fence pins them
TTFT_BOUNDS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BOUNDS = TTFT_BOUNDS + [600, 1200, 1800, 2400]
ITL_BOUNDS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
              0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
BOUNDS = {"sglang:time_to_first_token_seconds": TTFT_BOUNDS,
          "sglang:e2e_request_latency_seconds": E2E_BOUNDS,
          "sglang:inter_token_latency_seconds": ITL_BOUNDS}


def counts_for(bounds):
    """Four observations (0.045, 0.3, 0.7, 1.5 s) in these bounds' buckets."""
    counts = [0] * (len(bounds) + 1)
    for x in (0.045, 0.3, 0.7, 1.5):
        counts[next((i for i, b in enumerate(bounds) if x <= b), len(bounds))] += 1
    return counts


def set_any(av, v):
    if isinstance(v, bool):
        av.bool_value = v
    elif isinstance(v, int):
        av.int_value = v
    elif isinstance(v, float):
        av.double_value = v
    elif isinstance(v, bytes):
        av.bytes_value = v
    elif isinstance(v, list):
        av.array_value.SetInParent()
        for x in v:
            set_any(av.array_value.values.add(), x)
    elif isinstance(v, dict):
        av.kvlist_value.SetInParent()
        for k, x in v.items():
            kv = av.kvlist_value.values.add()
            kv.key = k
            set_any(kv.value, x)
    else:
        av.string_value = v


def put(attrs, k, v):
    kv = attrs.add()
    kv.key = k
    set_any(kv.value, v)
    return kv


def attrs_of(lst):
    out = {}
    for kv in lst:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


class Batches:
    """Control requests of the SGLang engine, and the cases built on them."""

    def __init__(self, cls):
        self.cls = cls          # {"logs": ExportLogsServiceRequest, "metrics": ...}

    def logs(self, c):
        req = self.cls["logs"]()
        rl = req.resource_logs.add()
        put(rl.resource.attributes, "service.name", "sglang")
        sl = rl.scope_logs.add()
        sl.scope.name = "sglang.srt.managers.scheduler"
        for i in range(3):
            r = sl.log_records.add()
            r.time_unix_nano = r.observed_time_unix_nano = T0 + c * 1000 + i
            r.severity_number = 9
            r.severity_text = "INFO"
            r.body.string_value = stats_line(c + i)
            put(r.attributes, "log.logger", "sglang.srt.managers.scheduler")
            put(r.attributes, "code.function", "log_prefill_stats")
            put(r.attributes, "code.lineno", 1200 + i)
        return req

    def metrics(self, c):
        """One scrape of SGLang's Prometheus collector, as OTLP: gauges, the
        _total counters as cumulative monotonic sums, latency histograms with
        an exemplar each, a summary and an exponential histogram (what an
        OTLP bridge makes of a scrape)."""
        req = self.cls["metrics"]()
        rm = req.resource_metrics.add()
        put(rm.resource.attributes, "service.name", "sglang")
        sm = rm.scope_metrics.add()
        sm.scope.name = "sglang"
        k = [0]

        def t():
            k[0] += 1
            return T0 + c * 1000 + k[0] - 1

        def labels(dp):
            for key, v in LABELS.items():
                put(dp.attributes, key, v)

        for name, unit, v in (("sglang:num_running_reqs", "{request}", 3), ("sglang:num_queue_reqs", "{request}", 0),
                              ("sglang:num_used_tokens", "{token}", 4096), ("sglang:token_usage", "1", 0.25),
                              ("sglang:gen_throughput", "{token}/s", 812.5), ("sglang:cache_hit_rate", "1", 0.4)):
            m = sm.metrics.add()
            m.name, m.unit, m.description = name, unit, "as SGLang describes it"
            dp = m.gauge.data_points.add()
            dp.time_unix_nano = t()
            if isinstance(v, int):
                dp.as_int = v
            else:
                dp.as_double = v
            labels(dp)
        for name, v in (("sglang:prompt_tokens_total", 5120), ("sglang:generation_tokens_total", 640),
                        ("sglang:num_requests_total", 10)):
            m = sm.metrics.add()
            m.name, m.unit = name, "{token}" if "tokens" in name else "{request}"
            m.sum.aggregation_temporality = 2
            m.sum.is_monotonic = True
            dp = m.sum.data_points.add()
            dp.start_time_unix_nano = T0
            dp.time_unix_nano = t()
            dp.as_int = v
            labels(dp)
        for name in ("sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
                     "sglang:inter_token_latency_seconds"):
            m = sm.metrics.add()
            m.name, m.unit = name, "s"
            m.histogram.aggregation_temporality = 2
            dp = m.histogram.data_points.add()
            dp.start_time_unix_nano = T0
            dp.time_unix_nano = t()
            dp.count, dp.sum, dp.min, dp.max = 4, 2.545, 0.045, 1.5
            dp.explicit_bounds.extend(BOUNDS[name])
            dp.bucket_counts.extend(counts_for(BOUNDS[name]))
            labels(dp)
            ex = dp.exemplars.add()
            ex.time_unix_nano = T0 + 5
            ex.as_double = 0.045
            ex.trace_id = bytes(range(1, 17))
            ex.span_id = bytes(range(1, 9))
            put(ex.filtered_attributes, "rid", "5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a7b")
        m = sm.metrics.add()
        m.name, m.unit = "sglang:eplb_balancedness", "1"
        dp = m.summary.data_points.add()
        dp.time_unix_nano = t()
        dp.count, dp.sum = 10, 4.5
        for q, v in ((0.5, 0.4), (0.99, 1.2)):
            qv = dp.quantile_values.add()
            qv.quantile, qv.value = q, v
        labels(dp)
        m = sm.metrics.add()
        m.name, m.unit = "sglang:prompt_tokens_histogram", "{token}"
        m.exponential_histogram.aggregation_temporality = 2
        dp = m.exponential_histogram.data_points.add()
        dp.time_unix_nano = t()
        dp.count, dp.sum, dp.scale, dp.zero_count = 5, 2560.0, 2, 0
        dp.positive.offset = 30
        dp.positive.bucket_counts.extend([1, 2, 2])
        labels(dp)
        return req

    # -- markers -----------------------------------------------------------

    def marker_cases(self):
        """[(label, signal, mutate(req))]: one marker each."""
        out = []

        def both(label, fn):
            out.append((label + " (logs)", "logs", lambda r: fn(r.resource_logs[0], r.resource_logs[0].scope_logs[0])))
            out.append((label + " (metrics)", "metrics",
                        lambda r: fn(r.resource_metrics[0], r.resource_metrics[0].scope_metrics[0])))

        both("resource kept key, bad value", lambda rx, sx: setattr(rx.resource.attributes[0].value, "string_value", "sglang " + MARK))
        both("resource unkept key", lambda rx, sx: put(rx.resource.attributes, "host.name", MARK))
        both("resource key", lambda rx, sx: put(rx.resource.attributes, MARK + ".key", "x"))
        both("resource kvlist under kept key", lambda rx, sx: set_any(rx.resource.attributes[0].value, {"a": MARK}))
        both("resource array under kept key", lambda rx, sx: set_any(rx.resource.attributes[0].value, ["sglang", MARK]))
        both("resource bytes under kept key", lambda rx, sx: set_any(rx.resource.attributes[0].value, MARK.encode()))
        for f in ("schema_url", "type", "id_keys", "description_keys"):
            def ent(rx, sx, f=f):
                e = rx.resource.entity_refs.add()
                e.type, e.schema_url = "service", "https://opentelemetry.io/schemas/1.26.0"
                e.id_keys.append("service.name")
                if f in ("id_keys", "description_keys"):
                    getattr(e, f).append(MARK)
                else:
                    setattr(e, f, MARK)
            both("entity_refs " + f, ent)
        both("resource schema_url", lambda rx, sx: setattr(rx, "schema_url", "https://" + MARK))
        both("scope schema_url", lambda rx, sx: setattr(sx, "schema_url", "https://" + MARK))
        both("scope name", lambda rx, sx: setattr(sx.scope, "name", "sglang." + MARK))
        both("scope version", lambda rx, sx: setattr(sx.scope, "version", MARK))
        both("scope attribute", lambda rx, sx: put(sx.scope.attributes, "k", MARK))

        def log(label, fn):
            out.append((label, "logs", lambda r: fn(r.resource_logs[0].scope_logs[0].log_records[1])))
        log("body string", lambda x: setattr(x.body, "string_value", "Error in request: " + MARK))
        log("body statistics line with text appended", lambda x: setattr(x.body, "string_value", x.body.string_value + " " + MARK))
        log("body kvlist", lambda x: set_any(x.body, {"msg": MARK, "n": 1}))
        log("body array", lambda x: set_any(x.body, [stats_line(0), MARK]))
        log("body bytes", lambda x: set_any(x.body, MARK.encode()))
        log("severity_text", lambda x: setattr(x, "severity_text", MARK))
        log("event_name", lambda x: setattr(x, "event_name", "sglang." + MARK))
        log("log kept key, bad value", lambda x: setattr(x.attributes[0].value, "string_value", "sglang." + MARK))
        log("log kept key, identifier shape", lambda x: setattr(x.attributes[1].value, "string_value", MARK))
        log("log kept key, kvlist", lambda x: set_any(x.attributes[1].value, {"f": MARK}))
        log("log kept key, string for an int", lambda x: set_any(x.attributes[2].value, MARK))
        log("log unkept key", lambda x: put(x.attributes, "request.prompt", MARK))
        log("log key", lambda x: put(x.attributes, MARK, 1))
        log("log kept key twice (marker first)", lambda x: x.attributes.insert(0, x.attributes[0].__class__(
            key="log.logger", value=x.attributes[0].value.__class__(string_value=MARK))))

        def met(label, fn):
            out.append((label, "metrics", lambda r: fn(r.resource_metrics[0].scope_metrics[0].metrics)))

        def first_of(ms, kind):
            return next(m for m in ms if m.WhichOneof("data") == kind)

        def points(m):
            return getattr(m, m.WhichOneof("data")).data_points

        met("metric name, sglang: prefix", lambda ms: setattr(ms[0], "name", "sglang:" + MARK))
        met("metric name", lambda ms: setattr(ms[1], "name", MARK))
        met("metric description", lambda ms: setattr(ms[0], "description", MARK))
        met("metric unit", lambda ms: setattr(ms[0], "unit", MARK))
        met("metric metadata", lambda ms: put(ms[0].metadata, "help", MARK))
        for kind in ("gauge", "sum", "histogram", "summary", "exponential_histogram"):
            met("%s point kept key, bad value" % kind,
                lambda ms, kind=kind: setattr(points(first_of(ms, kind))[0].attributes[0].value, "string_value", MARK))
            met("%s point kept key, rank shape" % kind,
                lambda ms, kind=kind: setattr(points(first_of(ms, kind))[0].attributes[2].value, "string_value", MARK))
            met("%s point unkept key" % kind,
                lambda ms, kind=kind: put(points(first_of(ms, kind))[0].attributes, "request.prompt", MARK))
            met("%s point key" % kind, lambda ms, kind=kind: put(points(first_of(ms, kind))[0].attributes, MARK, "0"))
        met("exemplar filtered_attributes", lambda ms: put(points(first_of(ms, "histogram"))[0].exemplars[0].filtered_attributes, "prompt", MARK))

        def gauge_exemplar(ms):
            ex = points(first_of(ms, "gauge"))[0].exemplars.add()
            ex.as_int, ex.time_unix_nano = 1, T0
            put(ex.filtered_attributes, "user", MARK)
        met("exemplar on a gauge point", gauge_exemplar)

        # prose in the shapes the fence used to admit (lower case: a word
        # pattern such as ^sglang(\.[a-z_]+)*$ lets it through)
        word = MARK.lower()
        both("scope name, words in a logger's shape",
             lambda rx, sx: setattr(sx.scope, "name", "sglang.patient_reports." + word))
        log("log.logger, words in a logger's shape",
            lambda x: setattr(x.attributes[0].value, "string_value", "sglang.user_prompt.my_name_is_" + word))
        log("log.logger, 8 KiB of words",
            lambda x: setattr(x.attributes[0].value, "string_value", "sglang." + ("jane_doe_" + word) * 700))
        log("code.function, words in a function's shape",
            lambda x: setattr(x.attributes[1].value, "string_value", "summarise_my_medical_record_" + word))
        met("metric name, words in SGLang's shape", lambda ms: setattr(ms[0], "name", "sglang:patient_jane_doe_" + word))
        # a digit run of a card's length in a statistics line
        log("statistics line, card-length digit run",
            lambda x: setattr(x.body, "string_value", stats_line(1).replace("#token: ", "#token: " + CARD)))

        # packed numbers: the point goes (its time moved by OLD: it must not arrive)
        def dropped_point(fn):
            def edit(ms):
                p = points(first_of(ms, "histogram"))[0]
                fn(p)
                p.time_unix_nano += OLD
            return edit

        def spelt(n):
            return [struct.unpack("<d", (word + "%05d" % i).encode())[0] for i in range(n)]

        def bounds_spelling(p):         # increasing, consistent counts, not SGLang's set
            del p.explicit_bounds[:]
            del p.bucket_counts[:]
            p.explicit_bounds.extend(spelt(3))
            p.bucket_counts.extend([1, 1, 1, 1])
        met("histogram bounds spelling a marker", dropped_point(bounds_spelling))

        def bounds_unordered(p):        # bytes in any order, counts consistent
            b = list(p.explicit_bounds)
            b[0], b[1] = b[1], b[0]
            del p.explicit_bounds[:]
            p.explicit_bounds.extend(b)
        met("histogram bounds out of order", dropped_point(bounds_unordered))

        def counts_spelling(p):         # counts whose bytes spell it, not summing to count
            n = len(p.bucket_counts)
            del p.bucket_counts[:]
            p.bucket_counts.extend([struct.unpack("<Q", (word + "%05d" % i).encode())[0] for i in range(n)])
        met("histogram counts spelling a marker", dropped_point(counts_spelling))
        return out

    # -- hostile encodings of clean requests (content unchanged) -------------

    def encoding_cases(self):
        """[(label, signal, to_bytes(req) -> bytes, old_items)]"""
        out = []
        marker = MARK.encode() + b" secret"

        def unknown(path):
            def f(req, c):
                msg = path(req)
                msg.MergeFromString(W.tag(2047, W.LEN) + W.varint(len(marker)) + marker +
                                    W.tag(2046, W.VARINT) + W.varint(7) + W.tag(2045, W.I64) + b"MRKMRKMR")
                return req.SerializeToString()
            return f
        L = lambda r: r.resource_logs[0]               # noqa: E731
        M = lambda r: r.resource_metrics[0]            # noqa: E731
        rec = lambda r: L(r).scope_logs[0].log_records[1]   # noqa: E731
        ms = lambda r: M(r).scope_metrics[0].metrics   # noqa: E731

        def of(kind):
            return lambda r: next(m for m in ms(r) if m.WhichOneof("data") == kind)
        for label, path in (("request", lambda r: r), ("ResourceLogs", L), ("Resource", lambda r: L(r).resource),
                            ("ScopeLogs", lambda r: L(r).scope_logs[0]), ("InstrumentationScope", lambda r: L(r).scope_logs[0].scope),
                            ("LogRecord", rec), ("KeyValue", lambda r: rec(r).attributes[0]),
                            ("AnyValue", lambda r: rec(r).body)):
            out.append(("unknown field in %s (logs)" % label, "logs", unknown(path), 0))
        for label, path in (("request", lambda r: r), ("ResourceMetrics", M), ("ScopeMetrics", lambda r: M(r).scope_metrics[0]),
                            ("Metric", lambda r: ms(r)[0]), ("Gauge", lambda r: of("gauge")(r).gauge),
                            ("NumberDataPoint", lambda r: of("gauge")(r).gauge.data_points[0]),
                            ("Sum", lambda r: of("sum")(r).sum), ("Histogram", lambda r: of("histogram")(r).histogram),
                            ("HistogramDataPoint", lambda r: of("histogram")(r).histogram.data_points[0]),
                            ("Exemplar", lambda r: of("histogram")(r).histogram.data_points[0].exemplars[0]),
                            ("Summary", lambda r: of("summary")(r).summary),
                            ("SummaryDataPoint", lambda r: of("summary")(r).summary.data_points[0]),
                            ("ValueAtQuantile", lambda r: of("summary")(r).summary.data_points[0].quantile_values[0]),
                            ("ExponentialHistogram", lambda r: of("exponential_histogram")(r).exponential_histogram),
                            ("ExponentialHistogramDataPoint", lambda r: of("exponential_histogram")(r).exponential_histogram.data_points[0]),
                            ("Buckets", lambda r: of("exponential_histogram")(r).exponential_histogram.data_points[0].positive),
                            ("datapoint KeyValue", lambda r: of("sum")(r).sum.data_points[0].attributes[0]),
                            ("datapoint AnyValue", lambda r: of("sum")(r).sum.data_points[0].attributes[0].value)):
            out.append(("unknown field in %s (metrics)" % label, "metrics", unknown(path), 0))

        # the old schema: pre-1.0 instrumentation_library_* (field 1000) and
        # the Int* metric types and label fields removed in 0.9-0.19
        def s(num, text):
            b = text.encode() if isinstance(text, str) else text
            return W.tag(num, W.LEN) + W.varint(len(b)) + b

        def msg(num, body):
            return W.tag(num, W.LEN) + W.varint(len(body)) + body

        def fixed64(num, v):
            return W.tag(num, W.I64) + v.to_bytes(8, "little")

        def old_logs(req, c):
            body = b""
            for i in range(2):
                lr = (fixed64(1, T0 + c * 1000 + OLD + i) + W.tag(2, W.VARINT) + W.varint(9) + s(3, MARK) +
                      msg(5, s(1, "old body " + MARK)) + msg(6, s(1, "prompt") + msg(2, s(1, MARK))))
                body += msg(2, lr)
            ill = msg(1, s(1, "secret-library " + MARK) + s(2, "0.18")) + body + s(3, "https://" + MARK)
            L(req).MergeFromString(msg(1000, ill))
            rec(req).MergeFromString(s(4, "old name " + MARK))       # LogRecord field 4, reserved
            return req.SerializeToString()
        out.append(("instrumentation_library_logs (ResourceLogs 1000) with secret records; LogRecord 4", "logs", old_logs, 2))

        def old_metrics(req, c):
            label = msg(1, s(1, "prompt") + s(2, MARK))                 # StringKeyValue labels = 1
            idp = label + fixed64(3, T0 + c * 1000 + OLD) + fixed64(4, 7)  # IntDataPoint: time 3, value 4 (sfixed64)
            old = msg(1, s(1, "sglang:" + MARK.lower()) + s(2, MARK) + s(3, MARK) + msg(4, msg(1, idp)))
            ilm = msg(1, s(1, "secret-library " + MARK)) + old
            M(req).MergeFromString(msg(1000, ilm))
            ms(req)[0].MergeFromString(msg(4, msg(1, idp)))         # int_gauge
            ms(req)[1].MergeFromString(msg(6, msg(1, idp) + W.tag(2, W.VARINT) + W.varint(2)))   # int_sum
            of("histogram")(req).MergeFromString(msg(8, msg(1, label)))   # int_histogram
            of("gauge")(req).gauge.data_points[0].MergeFromString(label)      # NumberDataPoint.labels (1)
            of("histogram")(req).histogram.data_points[0].MergeFromString(label)
            of("summary")(req).summary.data_points[0].MergeFromString(label)
            of("histogram")(req).histogram.data_points[0].exemplars[0].MergeFromString(label)  # filtered_labels
            return req.SerializeToString()
        out.append(("instrumentation_library_metrics (ResourceMetrics 1000); int_gauge/int_sum/int_histogram; labels",
                    "metrics", old_metrics, 1))

        # a singular field given twice, the marker first: the last one counts
        # (spliced into the bytes: the Python runtime would keep only the last)
        def repeated(req, c):
            return reencode(req.SerializeToString(), req.DESCRIPTOR, 0,
                            {"opentelemetry.proto.logs.v1.LogRecord": s(3, MARK) + msg(5, s(1, MARK))})
        out.append(("severity_text and body twice, the marker first", "logs", repeated, 0))

        def repeated_metric(req, c):
            return reencode(req.SerializeToString(), req.DESCRIPTOR, 0,
                            {"opentelemetry.proto.metrics.v1.Metric": s(1, "sglang:" + MARK) + s(2, MARK) + s(3, MARK)})
        out.append(("metric name, description, unit twice, the marker first", "metrics", repeated_metric, 0))
        return out


def reencode(data, desc, pad, first=None):
    """`data` (a message of descriptor `desc`) re-encoded field by field in
    its order, every tag, length and varint `pad` bytes longer than minimal
    (valid protobuf), and first[full name] put before the fields of the
    first message of that type (consumed)."""
    first = {} if first is None else first
    out = first.pop(desc.full_name, b"")
    for num, wt, v, _, _ in W.fields_of(data):
        key = num << 3 | wt
        t = W.varint(key, W.varint_len(key) + pad)
        if wt == W.VARINT:
            out += t + W.varint(v, W.varint_len(v) + pad)
        elif wt == W.LEN:
            fd = desc.fields_by_number.get(num)
            if fd is not None and fd.message_type is not None:
                v = reencode(v, fd.message_type, pad, first)
            out += t + W.varint(len(v), W.varint_len(len(v)) + pad) + v
        else:
            out += t + v
    return out


def to_json(msg):
    """OTLP/JSON: protobuf's JSON mapping, enums as integers, ids as hex."""
    d = json_format.MessageToDict(msg, use_integers_for_enums=True)

    def fix(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("traceId", "spanId") and isinstance(v, str):
                    o[k] = base64.b64decode(v).hex()
                else:
                    fix(v)
        elif isinstance(o, list):
            for v in o:
                fix(v)
    fix(d)
    return json.dumps(d).encode()


class Sender:
    def __init__(self, grpc_port, http_port):
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)
        self.calls = {s: self.channel.unary_unary(METHOD[s]) for s in METHOD}
        self.http_port = http_port

    def send(self, transport, signal, msg, data):
        if transport == "grpc":
            try:
                self.calls[signal](data, timeout=30)
                return True, "OK"
            except grpc.RpcError as e:
                return False, "%s %s" % (e.code().name, e.details())
        if transport == "json":
            body, ctype = to_json(msg), "application/json"
        else:
            body, ctype = data, "application/x-protobuf"
        c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        c.request("POST", "/v1/" + signal, body, {"Content-Type": ctype})
        r = c.getresponse()
        text = r.read()
        c.close()
        return r.status == 200, "%d %s" % (r.status, text[:200])

    def close(self):
        self.channel.close()


def unknown_anywhere(msg, path=""):
    """Paths of messages that decoded with unknown fields."""
    out = []
    if len(unknown_fields.UnknownFieldSet(msg)):
        out.append(path or msg.DESCRIPTOR.name)
    for fd, v in msg.ListFields():
        if fd.message_type is None:
            continue
        for x in (v if fd.label == fd.LABEL_REPEATED else [v]):
            out += unknown_anywhere(x, "%s.%s" % (path or msg.DESCRIPTOR.name, fd.name))
    return out


def items(signal, req):
    """{time_unix_nano: (item, its metric or None, resource, scope)}"""
    out = []
    if signal == "logs":
        for rl in req.resource_logs:
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    out.append((r.time_unix_nano, r, None, rl.resource, sl.scope))
    else:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    which = m.WhichOneof("data")
                    for p in (getattr(m, which).data_points if which else []):
                        out.append((p.time_unix_nano, p, m, rm.resource, sm.scope))
    return out


def check_control(signal, item, metric, resource, scope, failures, label):
    """A clean item arrives with its legitimate values."""
    if attrs_of(resource.attributes) != {"service.name": "sglang"}:
        failures.append("%s: resource %s" % (label, attrs_of(resource.attributes)))
    if signal == "logs":
        want = {"log.logger": "sglang.srt.managers.scheduler", "code.function": "log_prefill_stats", "vm.id": VM_ID}
        got = attrs_of(item.attributes)
        lineno = got.pop("code.lineno", None)
        if got != want or not isinstance(lineno, int):
            failures.append("%s: log attributes %s" % (label, attrs_of(item.attributes)))
        if item.body.WhichOneof("value") != "string_value" or \
           not re.match("(Prefill|Decode) batch, ", item.body.string_value):
            failures.append("%s: a statistics body did not arrive: %s" % (label, item.body))
        if item.severity_text != "INFO" or item.severity_number != 9:
            failures.append("%s: severity %r %d" % (label, item.severity_text, item.severity_number))
        return
    got = attrs_of(item.attributes)
    if got != dict(LABELS, **{"vm.id": VM_ID}):
        failures.append("%s: %s attributes %s" % (label, metric.name, got))
    if not metric.name.startswith("sglang:") or metric.unit not in UNITS or metric.description:
        failures.append("%s: metric %r unit %r description %r" % (label, metric.name, metric.unit, metric.description))
    if "exemplars" in item.DESCRIPTOR.fields_by_name and len(item.exemplars):
        failures.append("%s: %s exemplars left" % (label, metric.name))
    which = metric.WhichOneof("data")
    if which == "histogram" and (list(item.bucket_counts) != counts_for(BOUNDS[metric.name]) or
                                 item.count != 4):
        failures.append("%s: histogram %s" % (label, item))
    if which == "sum" and (not metric.sum.is_monotonic or metric.sum.aggregation_temporality != 2):
        failures.append("%s: sum %s" % (label, metric.sum))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--protoc", default="protoc")
    a = ap.parse_args()
    os.makedirs(a.build_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="signals.", dir=a.build_dir)
    os.makedirs(os.path.join(scratch, "schema"))
    b = Batches(classes(a.protoc, os.path.join(scratch, "schema")))

    traces_sink, sink = P.HttpSink(), P.HttpSink()
    gport, hport, mport, health = P.free_port(), P.free_port(), P.free_port(), P.free_port()
    with open(os.path.join(SOURCE_DIR, "configs", "otelcol-seed.yaml")) as f:
        cfg = f.read()
    os.environ.update({"VM_ID": VM_ID, "TRACES_GATEWAY_ENDPOINT": "http://127.0.0.1:%d" % traces_sink.port,
                       "TRACES_GATEWAY_TOKEN": "t", "TELEMETRY_GATEWAY_ENDPOINT": "http://127.0.0.1:%d" % sink.port,
                       "TELEMETRY_GATEWAY_API_KEY": "k"})
    args = ["--config", "file:" + os.path.join(SOURCE_DIR, "configs", "otelcol-seed-fence.yaml"),
            "--set", "receivers.otlp.protocols.grpc.endpoint=127.0.0.1:%d" % gport,
            "--set", "receivers.otlp.protocols.http.endpoint=127.0.0.1:%d" % hport,
            "--set", "extensions.health_check.endpoint=127.0.0.1:%d" % health,
            "--set", "service.telemetry.metrics.address=127.0.0.1:%d" % mport]
    col = P.Collector(a.binary, scratch, "seed", cfg, gport, mport, args=args)
    failures = []
    expect = {"logs": {}, "metrics": {}}     # time -> (case label, clean)
    absent = {"logs": set(), "metrics": set()}
    sent = {"logs": 0, "metrics": 0}
    n_cases = 0
    try:
        col.start()
        sender = Sender(gport, hport)
        c = 0

        cases = []
        for label, signal, mutate in b.marker_cases():
            cases.append((label, signal, lambda req, c, mutate=mutate: (mutate(req), req.SerializeToString())[1], False, 0, True))
        for label, signal, fn, old in b.encoding_cases():
            cases.append((label, signal, fn, True, old, False))
        cases.append(("non-minimal varints everywhere (logs)", "logs",
                      lambda req, c: reencode(req.SerializeToString(), req.DESCRIPTOR, 1), True, 0, False))
        cases.append(("non-minimal varints everywhere (metrics)", "metrics",
                      lambda req, c: reencode(req.SerializeToString(), req.DESCRIPTOR, 1), True, 0, False))
        for t in ("grpc", "http", "json"):
            for signal in ("logs", "metrics"):
                cases.append(("control over %s (%s)" % (t, signal), signal, lambda req, c: req.SerializeToString(), True, 0, None))

        for label, signal, make, clean, old, json_too in cases:
            transports = ("grpc", "http", "json") if json_too else ("grpc", "http") if json_too is False else None
            if json_too is None:
                transports = (label.split()[2],)
            for t in transports:
                c += 1
                req = b.logs(c) if signal == "logs" else b.metrics(c)
                data = make(req, c)
                if t == "json":
                    req = type(req).FromString(data)   # what the bytes say, as JSON
                for tm, _, _, _, _ in items(signal, type(req).FromString(data)):
                    if tm - (T0 + c * 1000) >= OLD:     # an item the fence must drop
                        absent[signal].add(tm)
                        continue
                    expect[signal][tm] = ("%s over %s" % (label, t), clean)
                    sent[signal] += 1
                for i in range(old):
                    absent[signal].add(T0 + c * 1000 + OLD + i)
                ok, why = sender.send(t, signal, req, data)
                n_cases += 1
                if not ok:
                    failures.append("%s over %s: refused: %s" % (label, t, why))
        sender.close()

        # every item arrives (the fence removes fields, never records or points)
        deadline = time.time() + 180
        while True:
            got = {"logs": [], "metrics": []}
            for x in list(sink.inbox.items):
                signal = x["path"].rsplit("/", 1)[1]
                if signal in got:
                    got[signal].append(b.cls[signal].FromString(x["body"]))
            n = {s: sum(len(items(s, r)) for r in got[s]) for s in got}
            if all(n[s] >= sent[s] for s in sent) or time.time() > deadline:
                break
            time.sleep(0.1)
        for s in sent:
            if n[s] != sent[s]:
                failures.append("the gateway got %d %s items of %d" % (n[s], s, sent[s]))
        if traces_sink.inbox.items:
            failures.append("logs or metrics went to the traces gateway")
        for x in sink.inbox.items:
            if x["error"]:
                failures.append("gateway: %s" % x["error"])
            if MARK.encode() in x["body"] or MARK.lower().encode() in x["body"] or CARD.encode() in x["body"]:
                failures.append("a marker arrived in the raw bytes of %s" % x["path"])
        seen = {"logs": {}, "metrics": {}}
        for s in got:
            for r in got[s]:
                for p in unknown_anywhere(r):
                    failures.append("unknown fields arrived in %s" % p)
                for v in strings_of(r):
                    if MARK in v or MARK.lower() in v:
                        failures.append("a marker arrived: %r" % v[:120])
                for tm, it, m, res, scope in items(s, r):
                    seen[s][tm] = seen[s].get(tm, 0) + 1
                    for v in strings_of(it) + strings_of(res) + strings_of(scope) + (strings_of(m) if m else []):
                        if MARK in v or MARK.lower() in v:
                            failures.append("a marker arrived with %s: %r" % (
                                expect[s].get(tm, ("item %d" % tm,))[0], v[:120]))
                    if tm in absent[s]:
                        failures.append("an item that must not arrive arrived (%s: an old schema "
                                        "field, or a point the fence drops)" % s)
                        continue
                    e = expect[s].get(tm)
                    if e is None:
                        failures.append("an item nobody sent arrived: %s %d" % (s, tm))
                    elif e[1]:
                        check_control(s, it, m, res, scope, failures, e[0])
            for tm, (label, _) in expect[s].items():
                if seen[s].get(tm, 0) != 1:
                    failures.append("%s: item %d arrived %d times" % (label, tm - T0, seen[s].get(tm, 0)))

        metrics = col.metrics()
        for name, s in (("otelcol_receiver_accepted_log_records", "logs"), ("otelcol_receiver_accepted_metric_points", "metrics")):
            v = P.metric_sum(metrics, name, receiver="otlp")
            if v != sent[s]:
                failures.append("%s is %s, sent %d" % (name, v, sent[s]))
        for name in ("otelcol_exporter_sent_log_records", "otelcol_exporter_sent_metric_points"):
            v = P.metric_sum(metrics, name, exporter="otlphttp/telemetry")
            s = "logs" if "log" in name else "metrics"
            if v != sent[s]:
                failures.append("%s is %s, sent %d" % (name, v, sent[s]))
    finally:
        rc = col.stop()
        sink.close()
        traces_sink.close()
    if rc != 0:
        failures.append("spanfence exited %s after SIGTERM" % rc)
    with open(col.stderr_path, errors="replace") as f:
        if MARK in f.read():
            failures.append("a marker is in the log")
    print("privacy_signals: %d requests (%d log records, %d metric points) over grpc, http, json" %
          (n_cases, sent["logs"], sent["metrics"]))
    for x in sorted(set(failures))[:60]:
        print("FAIL", x)
    if failures:
        print("%d failures; kept in %s" % (len(set(failures)), scratch))
        print(col.stderr_tail())
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    print("privacy_signals: ok: no marker, no unknown field, no old-schema item arrived; every item once; "
          "controls with their values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
