#!/usr/bin/python3
"""tests/e2e/privacy/signals_codec.py: the codec-level hostile differential
for OTLP logs and metrics. Hand-made requests (raw bytes, built here) plant
text in every string-bearing field (resource and scope, log body, severity
text, event name, attributes, metric name, description, unit, metadata,
datapoint and exemplar attributes) and apply one hostile mutation each:
unknown fields at every level (every wire type, groups, nested text), old
schema fields (ResourceLogs/ResourceMetrics 1000, LogRecord 4, Metric 4/6/8,
a point's labels 1), non-minimal varints, repeated singular fields, oneof
switches, and wrong wire types (which must be refused). Each goes through
the real codec (tools/otlp_codec rewrite <signal> fence: the fixed policy
of otlp_codec.c) and its output is decoded by python3-protobuf with the
official .proto files:
  - python's deterministic serialisation of the decoded output is the
    codec's output byte for byte (canonical, nothing python does not know);
  - no planted text anywhere in the bytes; every attribute key, body and
    name is one the policy allows; the items counted are python's;
  - the realistic control data (an SGLang-style scrape, app logs) arrives:
    every data point with its allowed labels and its value, every record.

    signals_codec.py --codec OTLP_CODEC --protoc PROTOC [--cases N] [--seed S]

The official .proto files: $SF_OTLP_PROTO_DIR, else the opentelemetry-proto
mirror of a development session, else pipeline/proto (our copies of the
official logs and metrics files; common/resource are written from the
specification there)."""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MIRROR = "/work/.mirror/open-telemetry+opentelemetry-proto/repo"
PROTOS = ["opentelemetry/proto/common/v1/common.proto",
          "opentelemetry/proto/resource/v1/resource.proto",
          "opentelemetry/proto/logs/v1/logs.proto",
          "opentelemetry/proto/metrics/v1/metrics.proto",
          "opentelemetry/proto/collector/logs/v1/logs_service.proto",
          "opentelemetry/proto/collector/metrics/v1/metrics_service.proto"]
SECRET = b"SECRET"
# the policy of otlp_codec.c's `fence`
ALLOW = {"resource": {"service.name", "host.arch", "vm.id"}, "log": {"level", "logger"},
         "datapoint": {"model_name", "tp_rank", "le"}}


# ---- the official schema ------------------------------------------------------------

def proto_dir(tmp):
    if os.environ.get("SF_OTLP_PROTO_DIR"):
        return os.environ["SF_OTLP_PROTO_DIR"], "SF_OTLP_PROTO_DIR"
    if os.path.isdir(MIRROR):
        for p in PROTOS:
            out = subprocess.run(["git", "-C", MIRROR, "show", "HEAD:" + p], capture_output=True)
            if out.returncode != 0:
                break
            os.makedirs(os.path.join(tmp, os.path.dirname(p)), exist_ok=True)
            with open(os.path.join(tmp, p), "wb") as f:
                f.write(out.stdout)
        else:
            return tmp, "the opentelemetry-proto mirror"
    return os.path.join(SRC, "pipeline", "proto"), "pipeline/proto"


def classes(protoc, tmp):
    d, where = proto_dir(tmp)
    desc = os.path.join(tmp, "otlp.desc")
    subprocess.run([protoc, "--include_imports", "--descriptor_set_out=" + desc, "-I" + d] +
                   [os.path.join(d, p) for p in PROTOS[4:]], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(desc, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fp in fds.file:
        pool.Add(fp)
    factory = message_factory.MessageFactory(pool)
    get = lambda n: factory.GetPrototype(pool.FindMessageTypeByName(n))
    print("schema: %s" % where)
    return {"logs": get("opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest"),
            "metrics": get("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest")}


# ---- bytes -------------------------------------------------------------------------

def varint(v, width=0):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if v == 0 and len(out) + 1 >= width:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def tag(num, wt, width=0):
    return varint(num << 3 | wt, width)


def fv(num, v, width=0):
    return tag(num, 0) + varint(v, width)


def f64(num, v):
    return tag(num, 1) + struct.pack("<Q", v)


def fd(num, x):
    return tag(num, 1) + struct.pack("<d", x)


def f32(num, v):
    return tag(num, 5) + struct.pack("<I", v)


def fl(num, b):
    return tag(num, 2) + varint(len(b)) + b


def fs(num, s):
    return fl(num, s.encode() if isinstance(s, str) else s)


def kv(num, k, v):
    return fl(num, fs(1, k) + fl(2, fs(1, v) if isinstance(v, str) else fv(3, v)))


def secret(rng, where):
    return "SECRET-%s-%d" % (where, rng.randrange(1000))


# ---- requests ----------------------------------------------------------------------

def resource(rng):
    return fl(1, kv(1, "service.name", "sglang") + kv(1, "host.name", secret(rng, "host")) +
              kv(1, "host.arch", "amd64"))


def scope(rng):
    return fl(1, fs(1, secret(rng, "scope")) + fs(2, "1.0") + kv(3, "k", secret(rng, "sattr")))


def log_record(rng, i, mut):
    body = "ok" if i % 2 == 0 else secret(rng, "body")
    fields = [f64(1, 1700000000000000000 + i), fv(2, 9), fs(3, secret(rng, "sev")),
              fl(5, fs(1, body)), kv(6, "level", "info"), kv(6, "prompt", secret(rng, "prompt")),
              kv(6, "logger", "engine"), f32(8, 1), fl(9, bytes(range(1, 17))),
              fl(10, bytes(range(1, 9))), f64(11, 5), fs(12, secret(rng, "event"))]
    return fl(2, mut("log", b"".join(fields)))


def logs_request(rng, mut, n):
    records = b"".join(log_record(rng, i, mut) for i in range(n))
    scope_logs = fl(2, mut("scope_logs", scope(rng) + records + fs(3, secret(rng, "url"))))
    return fl(1, mut("resource_logs", resource(rng) + scope_logs + fs(3, secret(rng, "rurl"))))


def exemplar(rng):
    return fl(7, kv(7, "prompt", secret(rng, "exattr")) + f64(2, 1) + fd(3, 0.5) +
              fl(4, bytes(8)) + fl(5, bytes(16)))


def labels(rng, model):
    return [("model_name", model), ("tp_rank", "0"), ("prompt", secret(rng, "label"))]


def number_point(rng, model, value, mut, attr_num=7):
    attrs = b"".join(kv(attr_num, k, v) for k, v in labels(rng, model))
    val = fd(4, value) if isinstance(value, float) else tag(6, 1) + struct.pack("<q", value)
    return fl(1, mut("npoint", attrs + f64(2, 1) + f64(3, 2) + val + exemplar(rng)[0:0] +
                     fl(5, exemplar(rng)[2:])))


def metric(rng, name, data, mut):
    return fl(2, mut("metric", fs(1, name) + fs(2, secret(rng, "desc")) + fs(3, secret(rng, "unit")) +
                     data + kv(12, "origin", secret(rng, "meta"))))


# The SGLang-style scrape: what must arrive (name, type field, [(model, value)]).
# Mutation levels: "npoint" the number points, "point" the others.
SCRAPE = [("sglang:num_running_reqs", 5, [("llama", 3), ("qwen", 0)]),
          ("sglang:prompt_tokens_total", 7, [("llama", 1234.0), ("qwen", 0.0)])]


def metrics_request(rng, mut):
    ms = []
    for name, kind, points in SCRAPE:
        pts = b"".join(number_point(rng, m, v, mut) for m, v in points)
        extra = fv(2, 2) + fv(3, 1) if kind == 7 else b""
        ms.append(metric(rng, name, fl(kind, pts + extra), mut))
    hist = fl(1, mut("point", b"".join(kv(9, k, v) for k, v in labels(rng, "llama")) +
                     f64(4, 6) + fd(5, 1.5) + fl(6, struct.pack("<QQQ", 1, 2, 3)) +
                     fl(7, struct.pack("<dd", 0.1, 1.0)) + fl(8, exemplar(rng)[2:])))
    ms.append(metric(rng, "sglang:time_to_first_token_seconds", fl(9, hist + fv(2, 2)), mut))
    summ = fl(1, mut("point", kv(7, "model_name", "llama") + f64(4, 10) + fd(5, 4.5) +
                     fl(6, fd(1, 0.5) + fd(2, 0.4))))
    ms.append(metric(rng, "rpc.duration", fl(11, summ), mut))
    sm = fl(2, mut("scope_metrics", scope(rng) + b"".join(ms)))
    return fl(1, mut("resource_metrics", resource(rng) + sm))


# ---- mutations ----------------------------------------------------------------------

def unknown(rng):
    num = rng.choice([15, 99, 1000, 536870911])
    return rng.choice([fv(num, rng.randrange(1 << 40)), f64(num, 7), f32(num, 9),
                       fs(num, secret(rng, "unknown")),
                       tag(num, 3) + fs(1, secret(rng, "group")) + tag(num, 4)])


OLD = {"resource_logs": [fl(1000, fl(2, fs(3, "SECRET-old")))],
       "resource_metrics": [fl(1000, fl(2, fs(1, "SECRET-old")))],
       "log": [fv(4, 1)],
       "metric": [fl(4, fl(1, fl(1, fs(1, "SECRET-intgauge")))), fl(6, fs(9, "SECRET-i")),
                  fl(8, fl(1, f64(1, 1)))],
       "point": [fl(1, fs(1, "prompt") + fs(2, "SECRET-label"))],
       "npoint": [fl(1, fs(1, "prompt") + fs(2, "SECRET-label"))]}


def mutation(rng, cls, level):
    """A function applied to each message body of the chosen level."""
    def mut(where, body):
        if where != level:
            return body
        if cls == "unknown":
            return body + unknown(rng) if rng.random() < 0.5 else unknown(rng) + body
        if cls == "old" and where in OLD:
            return rng.choice(OLD[where]) + body
        if cls == "repeated" and where == "log":
            # singular fields twice: the last wins (severity text, body)
            return body + fs(3, secret(rng, "sev2")) + fl(5, fs(1, secret(rng, "body2")))
        if cls == "repeated" and where == "metric":
            return body + fs(1, secret(rng, "name2"))
        if cls == "oneof" and where == "log":
            return body + fl(5, fl(6, fl(1, kv(1, "k", secret(rng, "kvbody")))))
        if cls == "oneof" and where == "npoint":
            return body + fd(4, 2.5)
        if cls == "nonminimal" and where in ("log", "npoint"):
            return body + (fv(2, 9, width=3) if where == "log" else fv(8, 0, width=2))
        if cls == "wrongwt" and where in ("log", "metric", "npoint", "point"):
            return body + {"log": fv(3, 1), "metric": fv(1, 1), "npoint": fs(2, "x"),
                           "point": fs(3, "x")}[where]
        return body
    return mut


CLASSES = ["none", "unknown", "old", "repeated", "oneof", "nonminimal", "wrongwt"]
LEVELS = {"logs": ["resource_logs", "scope_logs", "log"],
          "metrics": ["resource_metrics", "scope_metrics", "metric", "npoint", "point"]}


# ---- checks -------------------------------------------------------------------------

class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def check_resource(r):
    keys = [a.key for a in r.attributes]
    check(set(keys) <= ALLOW["resource"], "resource keys %s" % keys)
    vm = [a.value.string_value for a in r.attributes if a.key == "vm.id"]
    check(vm == ["vm-1"], "vm.id upserted once: %s" % vm)


def check_scope(s):
    check(not s.name and not s.version and not s.attributes, "scope leaked")


def check_logs(req, n_records):
    seen = 0
    for rl in req.resource_logs:
        check_resource(rl.resource)
        check(not rl.schema_url, "schema url")
        for sl in rl.scope_logs:
            check_scope(sl.scope)
            for r in sl.log_records:
                seen += 1
                check({a.key for a in r.attributes} <= ALLOW["log"], "log keys")
                check(not r.severity_text and not r.event_name, "severity text / event name")
                check(not r.HasField("body") or r.body.string_value == "ok", "body %s" % r.body)
                check([a.value.string_value for a in r.attributes if a.key == "level"] == ["info"],
                      "the level attribute did not arrive")
                check(r.severity_number == 9 and r.time_unix_nano >= 1700000000000000000,
                      "severity number / time did not arrive")
    check(seen == n_records, "records: %d of %d" % (seen, n_records))
    return seen


def check_metrics(req, oneof_case):
    points = 0
    got = {}
    for rm in req.resource_metrics:
        check_resource(rm.resource)
        for sm in rm.scope_metrics:
            check_scope(sm.scope)
            for i, m in enumerate(sm.metrics):
                check(not m.name and not m.description and not m.unit and not m.metadata,
                      "metric name / description / unit / metadata")
                data = getattr(m, m.WhichOneof("data"))
                for dp in data.data_points:
                    points += 1
                    check({a.key for a in dp.attributes} <= ALLOW["datapoint"], "point keys")
                    check(not getattr(dp, "exemplars", []), "exemplar kept")
                    model = [a.value.string_value for a in dp.attributes if a.key == "model_name"]
                    if i < len(SCRAPE):
                        v = dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double
                        got.setdefault(i, []).append((model[0] if model else None, v))
                    if m.WhichOneof("data") == "histogram":
                        check(list(dp.bucket_counts) == [1, 2, 3] and dp.count == 6 and
                              dp.sum == 1.5, "histogram point values")
    for i, (_, _, want) in enumerate(SCRAPE):
        if oneof_case:
            want = [(m, 2.5) for m, _ in want]
        check(got.get(i) == want, "scrape %d arrived as %s, not %s" % (i, got.get(i), want))
    return points


def run_case(codec, cls_of, signal, rng, cls, level):
    mut = mutation(rng, cls, level)
    n = 4
    body = logs_request(rng, mut, n) if signal == "logs" else metrics_request(rng, mut)
    p = subprocess.run([codec, "rewrite", signal, "fence"], input=body, capture_output=True)
    if cls == "wrongwt" and level in ("log", "metric", "npoint", "point"):
        check(p.returncode == 3, "a wrong wire type was not refused (rc %d)" % p.returncode)
        check(not p.stdout, "a refused request wrote bytes")
        return
    check(p.returncode == 0, "refused: %s" % p.stderr.decode(errors="replace").strip())
    out = p.stdout
    check(SECRET not in out, "planted text arrived: ...%r..." % out[max(0, out.find(SECRET) - 20):][:60])
    req = cls_of[signal]()
    req.ParseFromString(out)
    again = req.SerializeToString(deterministic=True)
    check(again == out, "python's serialisation differs from the codec's output")
    items = int(p.stderr.split()[1])
    if signal == "logs":
        check(check_logs(req, n) == items, "items")
    else:
        check(check_metrics(req, cls == "oneof" and level == "npoint") == items, "items")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--codec", required=True)
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--cases", type=int, default=140)
    ap.add_argument("--seed", default="signals")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cls_of = classes(a.protoc, tmp)
    failures = 0
    for i in range(a.cases):
        rng = random.Random("%s:%d" % (a.seed, i))
        signal = ("logs", "metrics")[i % 2]
        cls = CLASSES[(i // 2) % len(CLASSES)]
        level = rng.choice(LEVELS[signal])
        try:
            run_case(a.codec, cls_of, signal, rng, cls, level)
        except Failed as e:
            failures += 1
            print("FAIL case %d (%s, %s at %s): %s" % (i, signal, cls, level, e))
    print("%d cases, %d failed" % (a.cases, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
