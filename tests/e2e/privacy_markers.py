#!/usr/bin/python3
# tests/e2e/privacy_markers.py: no free text leaves the VM (ctest
# e2e/privacy_markers). Realistic SGLang batches go to the real binary
# running configs/cvm.yaml as shipped (only its listening addresses and the
# gateway moved to free loopback ports), over OTLP/gRPC, OTLP/HTTP protobuf
# and OTLP/HTTP JSON. Each case plants a marker in one string-bearing field
# of the OTLP trace schema (walked from the official protos): every value
# type and position under every kept key of every context, unkept keys, a
# kept key given twice, span and event names (the shapes SGLang's names
# take, and 1 MiB), scope name and version, both schema_urls, every string
# of Resource.entity_refs, status message, trace_state, 1 MiB values, and
# ids in their legitimate shape (32 hex digits can spell anything), and the
# shapes that carry no text but bytes: arrays of doubles or ints whose bytes
# spell a marker under kept number keys, arrays of 8-hex strings under bid,
# 64 links and many events whose ids and times spell one, keys spelling
# words (never named in the collector's log or /metrics). Trace, span,
# parent and link ids leave as keyed pseudonyms (cvm.yaml's pseudonymize_ids,
# recomputed here with Python's hmac): none equals a sent id, a child's
# parent is its parent's pseudonym, a link to a span of another request its
# pseudonym, all-zero ids stay. Requests over the per-request caps (spans,
# resource entries, scope entries) export up to the cap, the rest counted
# in /metrics. What the
# gateway receives is decoded by python3-protobuf with the official schema
# (privacy/otlp_schema.py): no marker may arrive. Control batches must
# arrive with their legitimate values (counts, latencies, finish reasons,
# pseudonymized ids, the allowed names), so a policy that drops everything
# fails too.
#
#   /usr/bin/python3 tests/e2e/privacy_markers.py --binary build/spanfence --build-dir build/x

import sys
sys.dont_write_bytecode = True     # no __pycache__ in the source tree

import argparse                    # noqa: E402
import base64
import hashlib
import hmac
import struct
import copy
import http.client
import json
import os
import re
import shutil
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "privacy"))

import otlp_schema                 # noqa: E402
import peers as P                  # noqa: E402
from google.protobuf import json_format  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "MRK"                       # never produced by spanfence (pseudonyms are lowercase hex)
HEX_MARK = "c0ffee" * 5 + "42"     # 32 hex digits a client could choose as rid
HEX8_MARK = "c0ffee4"              # + one digit: 8 hex digits, a bid's shape
WORD_MARK = "mrkword"              # a lowercase key of the shape a key may be named by
MIB = 1 << 20
RID = "5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a7b"
KEY = "pseudonym-key-of-the-marker-test"
# cvm.yaml's caps per request, and the requests sent over them (their trace
# ids: the cases use 2..251, the cross-request link 252)
CAP_SPANS, CAP_RESOURCES, CAP_SCOPES = 1024, 2, 4
OVER = {"spans": (253, CAP_SPANS + 76, 76), "resources": (254, 4 * (CAP_RESOURCES + 1), 4),
        "scopes": (255, 4 * (CAP_SCOPES + 1), 4)}      # trace, spans sent, spans dropped
LINKER = 252


def pseudo_id(raw):
    """The id cvm.yaml exports for `raw` (pseudonymize_ids): HMAC-SHA256(key,
    'T' or 'S' || id) truncated to its length; empty and all-zero ids stay."""
    if not raw or raw == bytes(len(raw)):
        return raw
    m = hmac.new(KEY.encode(), (b"T" if len(raw) == 16 else b"S") + raw, hashlib.sha256).digest()
    m = m[:len(raw)]
    return m if any(m) else m[:-1] + b"\x01"


CTRL_TID, CTRL_ROOT = pseudo_id(bytes([1]) * 16), pseudo_id(bytes([1]) * 8)

# The keys configs/cvm.yaml keeps, per context, with a legitimate value each
# (what SGLang writes): the control values, and the types markers replace.
KEPT = {
    "resource": {"service.name": "sglang"},
    "scope": {},
    "span": {
        "gen_ai.request.id": RID, "rid": RID, "module": "sglang::request",
        "bootstrap_room": "0x1f2e3d4c5b6a7980",
        "gen_ai.usage.prompt_tokens": 512, "gen_ai.usage.cached_tokens": 128,
        "gen_ai.usage.completion_tokens": 64, "gen_ai.request.max_tokens": 256,
        "gen_ai.request.temperature": 0.7, "gen_ai.request.top_p": 0.9,
        "gen_ai.request.top_k": 40, "gen_ai.request.n": 1,
        "gen_ai.response.finish_reasons": '["stop"]',
        "gen_ai.latency.time_to_first_token": 0.031, "gen_ai.latency.time_in_model_prefill": 0.012,
        "gen_ai.latency.time_in_model_decode": 0.41, "gen_ai.latency.time_in_model_inference": 0.43,
        "gen_ai.latency.e2e": 0.45, "tp_rank": 0, "dp_rank": 0, "pp_rank": 0,
        "thread_label": "Scheduler", "decode_ct": 63, "num_correct_drafts": 3, "accepted_tokens": 9,
    },
    "spanevent": {"bid": "3f2a9c1d", "batch_size": 8, "forward_mode": "decode"},
    "link": {},
}
# Keys SGLang sets that the config leaves out, with their values.
UNKEPT = {"host_id": "3f2a9c1d5e6f7a8b9c0d1e2f3a4b5c6d", "pid": 12345,
          "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
          "reason": "Request 1234 exceeds the maximum number of tokens"}


class Batches:
    """Builds SGLang-shaped requests with the official message classes."""

    def __init__(self, loaded):
        self.Request = loaded.cls(otlp_schema.REQUEST)

    @staticmethod
    def put(kv, key, value):
        kv.key = key
        if isinstance(value, bool):
            kv.value.bool_value = value
        elif isinstance(value, int):
            kv.value.int_value = value
        elif isinstance(value, float):
            kv.value.double_value = value
        elif isinstance(value, bytes):
            kv.value.bytes_value = value
        elif isinstance(value, list):
            kv.value.array_value.SetInParent()
            for v in value:
                e = kv.value.array_value.values.add()
                Batches.put_any(e, v)
        elif isinstance(value, dict):
            kv.value.kvlist_value.SetInParent()
            for k, v in value.items():
                Batches.put(kv.value.kvlist_value.values.add(), k, v)
        else:
            kv.value.string_value = value

    @staticmethod
    def put_any(any_, v):
        if isinstance(v, int):
            any_.int_value = v
        elif isinstance(v, float):
            any_.double_value = v
        else:
            any_.string_value = v

    def sglang(self, trace=1):
        """One request of SGLang's request-tracing path: root span, thread
        span, two slices (one with a schedule event and a link)."""
        req = self.Request()
        rs = req.resource_spans.add()
        self.put(rs.resource.attributes.add(), "service.name", "sglang")
        self.put(rs.resource.attributes.add(), "telemetry.sdk.language", "python")
        ss = rs.scope_spans.add()
        ss.scope.name = "sglang server"
        tid = bytes([trace]) * 16

        def span(name, sid, parent=b""):
            sp = ss.spans.add()
            sp.trace_id, sp.span_id, sp.parent_span_id, sp.name = tid, bytes([sid]) * 8, parent, name
            sp.start_time_unix_nano, sp.end_time_unix_nano = 1700000000000000000, 1700000000450000000
            sp.kind = 1
            return sp

        root = span(" Req " + RID[:8], 1)
        for k in ("rid", "module", "bootstrap_room"):
            self.put(root.attributes.add(), k, KEPT["span"][k])
        for k, v in KEPT["span"].items():
            if k.startswith("gen_ai."):
                self.put(root.attributes.add(), k, v)
        thread = span("Scheduler [TP 0] (host:3f2a9c1d | pid:12345)", 2, root.span_id)
        for k in ("tp_rank", "thread_label"):
            self.put(thread.attributes.add(), k, KEPT["span"][k])
        for k, v in UNKEPT.items():
            self.put(thread.attributes.add(), k, v)
        span("tokenize", 3, thread.span_id)
        loop = span("decode_loop", 4, thread.span_id)
        for k in ("decode_ct", "num_correct_drafts", "accepted_tokens"):
            self.put(loop.attributes.add(), k, KEPT["span"][k])
        ev = loop.events.add()
        ev.time_unix_nano, ev.name = 1700000000100000000, "schedule"
        for k, v in KEPT["spanevent"].items():
            self.put(ev.attributes.add(), k, v)
        ln = loop.links.add()
        ln.trace_id, ln.span_id = tid, bytes([3]) * 8
        return req

    def over_caps(self):
        """(what, request) over each of cvm.yaml's caps per request: SGLang's
        four spans repeated past max_spans_per_request, a resource entry more
        than max_resources_per_request, a scope entry more than
        max_scopes_per_resource (four spans each)."""
        out = []
        for what, (trace, n, _) in OVER.items():
            req = self.sglang(trace=trace)
            rs0 = req.resource_spans[0]
            if what == "spans":
                base = list(rs0.scope_spans[0].spans)
                for i in range(4, n):
                    sp = rs0.scope_spans[0].spans.add()
                    sp.CopyFrom(base[i % 4])
                    sp.span_id = struct.pack(">Q", (trace << 32) + i)
            elif what == "resources":
                for r in range(1, CAP_RESOURCES + 1):
                    rs = req.resource_spans.add()
                    rs.CopyFrom(rs0)
                    for j, sp in enumerate(rs.scope_spans[0].spans):
                        sp.span_id = struct.pack(">Q", (trace << 32) + 4 * r + j)
            else:
                for sc in range(1, CAP_SCOPES + 1):
                    ss = rs0.scope_spans.add()
                    ss.CopyFrom(rs0.scope_spans[0])
                    for j, sp in enumerate(ss.spans):
                        sp.span_id = struct.pack(">Q", (trace << 32) + 4 * sc + j)
            out.append((what, req))
        return out

    def linker(self):
        """A request whose slice links to the control trace's root span (a
        span of another request), with all-zero ids on its tokenize span."""
        req = self.sglang(trace=LINKER)
        spans = req.resource_spans[0].scope_spans[0].spans
        spans[3].links[0].trace_id, spans[3].links[0].span_id = bytes([1]) * 16, bytes([1]) * 8
        spans[2].trace_id, spans[2].span_id, spans[2].parent_span_id = bytes(16), bytes(8), bytes(8)
        return req

    # ---- the cases: (label, request) with one marker each ----------------------

    def cases(self):
        out = []
        n = [0]

        def mark(extra=""):
            n[0] += 1
            return "%s%05d%s" % (MARK, n[0], extra)

        def case(label, edit):
            req = self.sglang(trace=(len(out) % 250) + 2)
            edit(req)
            out.append((label, req))

        def where(req, ctx):
            """An attribute list of context ctx in the SGLang request."""
            rs = req.resource_spans[0]
            ss = rs.scope_spans[0]
            return {"resource": rs.resource.attributes, "scope": ss.scope.attributes,
                    "span": ss.spans[0].attributes, "spanevent": ss.spans[3].events[0].attributes,
                    "link": ss.spans[3].links[0].attributes}[ctx]

        def spelt_double(m):
            return struct.unpack("<d", m[:8].encode())[0]

        def spelt_int(m):
            return struct.unpack("<q", m[:8].encode())[0]

        shapes = [
            ("string", lambda m: m), ("array of string", lambda m: [m]),
            ("array of doubles spelling it", lambda m: [spelt_double(m), spelt_double(m)]),
            ("array of ints spelling it", lambda m: [spelt_int(m)]),
            ("array, marker last", lambda m: ["stop", m]), ("array, int then marker", lambda m: [1, m]),
            ("kvlist", lambda m: {"k": m}), ("kvlist key", lambda m: {m: "v"}),
            ("bytes", lambda m: m.encode()), ("1 MiB", lambda m: m * (MIB // len(m))),
        ]
        for ctx, keys in KEPT.items():
            for key in list(keys) + ["MRKkey" if ctx == "link" else "unkept.key"]:
                for sname, shape in shapes:
                    def edit(req, ctx=ctx, key=key, shape=shape):
                        self.put(where(req, ctx).add(), key, shape(mark()))
                    case("%s %s: %s" % (ctx, key, sname), edit)

                def twice(req, ctx=ctx, key=key):
                    lst = where(req, ctx)
                    self.put(lst.add(), key, keys.get(key, "x"))
                    self.put(lst.add(), key, mark())
                case("%s %s given twice" % (ctx, key), twice)

                def first(req, ctx=ctx, key=key):
                    lst = where(req, ctx)
                    tmp = copy.deepcopy(list(lst))
                    del lst[:]
                    self.put(lst.add(), key, mark())
                    lst.extend(tmp)
                case("%s %s: marker first, legitimate later" % (ctx, key), first)
            # a key that is itself text
            case("%s: marker as a key" % ctx, lambda req, ctx=ctx: self.put(where(req, ctx).add(), mark(), "v"))
        # one value per key: 8-hex strings under bid (each fits its rule)
        case("spanevent bid: array of 8-hex strings",
             lambda req: self.put(where(req, "spanevent").add(), "bid",
                                  [HEX8_MARK + str(i) for i in range(8)]))
        # bounded structure: 64 links, 64 events, their ids and times spelling
        # markers past SGLang's first link and first event
        def links(req):
            loop = req.resource_spans[0].scope_spans[0].spans[3]
            for _ in range(63):
                m = mark()
                ln = loop.links.add()
                ln.trace_id, ln.span_id = (m * 2).encode(), m.encode()
        case("64 links spelling markers", links)

        def events(req):
            loop = req.resource_spans[0].scope_spans[0].spans[3]
            for i in range(3):          # within the cap: SGLang-shaped
                ev = loop.events.add()
                ev.time_unix_nano, ev.name = 1700000000100000000 + i, "schedule"
            for _ in range(60):
                ev = loop.events.add()
                ev.time_unix_nano = struct.unpack("<Q", mark().encode())[0]
                ev.name = "schedule"
        case("64 events, times spelling markers past the cap", events)
        # keys spelling words, of the shape [a-z0-9_.]: never named
        for ctx in KEPT:
            case("%s: a lowercase word as a key" % ctx,
                 lambda req, ctx=ctx: self.put(where(req, ctx).add(),
                                               "user.%s_%s.my_ssn" % (WORD_MARK, mark().lower()), "v"))
        # ids in their legitimate shape
        for key in ("rid", "gen_ai.request.id"):
            case("span %s: 32 hex chosen by the client" % key,
                 lambda req, key=key: self.put(where(req, "span").add(), key, HEX_MARK))
        # rooms of every length leave as 16 hex digits (the length would say 4 bits)
        def room(req, d):
            kv = next(kv for kv in where(req, "span") if kv.key == "bootstrap_room")
            kv.value.string_value = "0x" + "7" * d
        for digits in (1, 2, 5, 9, 15):
            case("span bootstrap_room: %d digits" % digits, lambda req, d=digits: room(req, d))
        case("span bootstrap_room: hex chosen by the client",
             lambda req: self.put(where(req, "span").add(), "bootstrap_room", "0x" + HEX_MARK[:16]))
        # names
        names = ["decode_loop {m}", "{m} Req 1234abcd", "Req\t{m}", "Scheduler {m} [TP 0] (host:3f2a9c1d | pid:1)",
                 "Scheduler [TP 0] (host:3f2a9c1d {m} | pid:1)", "Bootstrap Room 0x{m}", "{m}",
                 " Req " + HEX_MARK[:8] + "{m}", "tokenize\n{m}"]
        for i, tmpl in enumerate(names):
            case("span name '%s'" % tmpl, lambda req, tmpl=tmpl, i=i:
                 setattr(req.resource_spans[0].scope_spans[0].spans[i % 4], "name", tmpl.format(m=mark())))
        case("span name, 1 MiB", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[2], "name",
                                                     "tokenize " + mark() * (MIB // 8)))
        case("event name", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[3].events[0],
                                               "name", "schedule " + mark()))
        case("event name, alone", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[3].events[0],
                                                      "name", mark()))
        case("scope name", lambda req: setattr(req.resource_spans[0].scope_spans[0].scope, "name", mark()))
        case("scope name, prefix", lambda req: setattr(req.resource_spans[0].scope_spans[0].scope, "name",
                                                       "sglang server " + mark()))
        case("scope version", lambda req: setattr(req.resource_spans[0].scope_spans[0].scope, "version", mark()))
        case("ResourceSpans.schema_url", lambda req: setattr(req.resource_spans[0], "schema_url", mark()))
        case("ScopeSpans.schema_url", lambda req: setattr(req.resource_spans[0].scope_spans[0], "schema_url",
                                                          mark()))
        case("status message", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[1].status,
                                                   "message", mark()))
        case("span trace_state", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[0],
                                                     "trace_state", "k=" + mark()))
        case("link trace_state", lambda req: setattr(req.resource_spans[0].scope_spans[0].spans[3].links[0],
                                                     "trace_state", "k=" + mark()))

        def entity(field):
            def edit(req):
                e = req.resource_spans[0].resource.entity_refs.add()
                e.type = "service"
                e.id_keys.append("service.name")
                if field == "repeated":
                    e.id_keys.append(mark())
                    e.description_keys.append(mark())
                else:
                    setattr(e, field, mark())
            return edit
        for f in ("schema_url", "type", "repeated"):
            case("entity_refs %s" % f, entity(f))
        return out


def to_json(msg):
    """OTLP/JSON: protobuf's JSON mapping with ids as hex (the OTLP rule)."""
    d = json_format.MessageToDict(msg)

    def fix(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                    o[k] = base64.b64decode(v).hex()
                else:
                    fix(v)
        elif isinstance(o, list):
            for v in o:
                fix(v)
    fix(d)
    return json.dumps(d).encode()


def post_json(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def strings_of(msg):
    """Every string and bytes value in a decoded message, recursively."""
    out = []
    for fd, v in msg.ListFields():
        vals = v if fd.label == fd.LABEL_REPEATED else [v]
        for x in vals:
            if fd.message_type is not None:
                out += strings_of(x)
            elif isinstance(x, (str, bytes)):
                out.append(x if isinstance(x, str) else x.decode("latin-1"))
    return out


def attrs(lst):
    d = {}
    for kv in lst:
        which = kv.value.WhichOneof("value")
        d.setdefault(kv.key, getattr(kv.value, which) if which else None)
    return d


def spans_of(got):
    return [sp for r in got for rs in r.resource_spans for ss in rs.scope_spans for sp in ss.spans]


def check_ids(got, sent_ids):
    """No exported id is one the client sent; every one is the pseudonym of
    one it sent; the control traces keep their structure; a link across
    requests and all-zero ids as they should be."""
    fails = []
    want_ids = {pseudo_id(x) for x in sent_ids}
    for sp in spans_of(got):
        ids = [sp.trace_id, sp.span_id, sp.parent_span_id] + \
              [y for ln in sp.links for y in (ln.trace_id, ln.span_id)]
        for x in ids:
            if x and any(x) and x in sent_ids:
                fails.append("an id left as it was sent: %s (span %r)" % (x.hex(), sp.name))
            elif x not in want_ids and any(x):
                fails.append("an id is no sent id's pseudonym: %s (span %r)" % (x.hex(), sp.name))
    ctrl = [sp for sp in spans_of(got) if sp.trace_id == CTRL_TID]
    by_name = {}
    for sp in ctrl:
        by_name.setdefault(sp.name, set()).add((sp.span_id, sp.parent_span_id))
    thread = "Scheduler [TP 0] (host:redacted | pid:redacted)"
    want = {" Req redacted": {(CTRL_ROOT, b"")},
            thread: {(pseudo_id(bytes([2]) * 8), CTRL_ROOT)},
            "tokenize": {(pseudo_id(bytes([3]) * 8), pseudo_id(bytes([2]) * 8))},
            "decode_loop": {(pseudo_id(bytes([4]) * 8), pseudo_id(bytes([2]) * 8))}}
    if by_name != want:
        fails.append("control structure: %r" % {k: [(a.hex(), b.hex()) for a, b in v]
                                                 for k, v in by_name.items()})
    tok = pseudo_id(bytes([3]) * 8)
    for sp in ctrl:
        if sp.name == "decode_loop" and [(ln.trace_id, ln.span_id) for ln in sp.links] != [(CTRL_TID, tok)]:
            fails.append("control link: %r" % [(ln.trace_id.hex(), ln.span_id.hex()) for ln in sp.links])
    lt = pseudo_id(bytes([LINKER]) * 16)
    linked = [sp for sp in spans_of(got) if sp.trace_id == lt and sp.name == "decode_loop"]
    if len(linked) != 1 or [(ln.trace_id, ln.span_id) for ln in linked[0].links] != [(CTRL_TID, CTRL_ROOT)]:
        fails.append("a link to a span of another request is not that span's pseudonym")
    zero = [sp for sp in spans_of(got) if sp.trace_id == bytes(16)]
    if len(zero) != 1 or zero[0].span_id != bytes(8) or zero[0].parent_span_id != bytes(8):
        fails.append("all-zero ids did not stay: %d spans" % len(zero))
    return fails


def check_caps(got):
    """Each request over a cap exports up to it: the first spans, resource
    and scope entries, in order."""
    fails = []
    for what, (trace, n, dropped) in OVER.items():
        tid = pseudo_id(bytes([trace]) * 16)
        rss = [rs for r in got for rs in r.resource_spans
               if any(sp.trace_id == tid for ss in rs.scope_spans for sp in ss.spans)]
        spans = [sp for rs in rss for ss in rs.scope_spans for sp in ss.spans]
        if len(spans) != n - dropped:
            fails.append("over the %s cap: %d spans arrived, want %d" % (what, len(spans), n - dropped))
        if what == "resources" and len(rss) != CAP_RESOURCES:
            fails.append("over the resources cap: %d resource entries arrived" % len(rss))
        if what == "scopes" and (len(rss) != 1 or len(rss[0].scope_spans) != CAP_SCOPES):
            fails.append("over the scopes cap: %r scope entries arrived" % [len(rs.scope_spans) for rs in rss])
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.build_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="markers.", dir=a.build_dir)
    loaded, origin = otlp_schema.load(SOURCE_DIR, os.path.join(scratch, "schema"), log=lambda *_: None)
    Request = loaded.cls(otlp_schema.REQUEST)
    b = Batches(loaded)
    cases = b.cases()

    sink = P.HttpSink()
    gport, hport, mport = P.free_port(), P.free_port(), P.free_port()
    with open(os.path.join(SOURCE_DIR, "configs", "cvm.yaml")) as f:
        cfg = f.read()
    # only the addresses move; the transform section is as shipped
    for old, new in (("127.0.0.1:4317", "127.0.0.1:%d" % gport), ("127.0.0.1:4318", "127.0.0.1:%d" % hport),
                     ("127.0.0.1:8888", "127.0.0.1:%d" % mport)):
        assert cfg.count(old) == 1, old
        cfg = cfg.replace(old, new)
    os.environ.update({"SPANFENCE_GATEWAY_ENDPOINT": "http://127.0.0.1:%d" % sink.port,
                       "SPANFENCE_GATEWAY_TOKEN": "marker-test", "SPANFENCE_PSEUDONYM_KEY": KEY})
    col = P.Collector(a.binary, scratch, "cvm", cfg, gport, mport)
    failures = []
    try:
        rc, text = col.validate()
        if rc != 0 or KEY in text:
            raise SystemExit("validate: %d %s" % (rc, text))
        col.start()
        sender = P.Sender(gport, hport)
        sent_spans = 0
        transports = ("grpc", "http", "json")
        for i, (label, req) in enumerate(cases):
            t = transports[i % 3]
            data = req.SerializeToString()
            if t == "json":
                ok = post_json(hport, to_json(req)) == 200
            else:
                ok = sender.send(t, data)[0]
            if not ok:
                failures.append("%s over %s: refused" % (label, t))
                continue
            sent_spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        # controls, over every transport, twice (same ids: same pseudonyms)
        controls = []
        for t in transports * 2:
            req = b.sglang(trace=1)
            ok = post_json(hport, to_json(req)) == 200 if t == "json" else sender.send(t, req.SerializeToString())[0]
            assert ok, "control refused over " + t
            sent_spans += 4
            controls.append(t)
        # a link across requests, then the requests over each cap, one per
        # transport; their spans past a cap never arrive
        extra = [("linker", b.linker())] + b.over_caps()
        for (what, req), t in zip(extra, transports * 2):
            ok = post_json(hport, to_json(req)) == 200 if t == "json" else sender.send(t, req.SerializeToString())[0]
            assert ok, "%s refused over %s" % (what, t)
            sent_spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
            if what in OVER:
                sent_spans -= OVER[what][2]
        sent_ids = {x for _, req in cases + extra for rs in req.resource_spans for ss in rs.scope_spans
                    for sp in ss.spans for x in [sp.trace_id, sp.span_id, sp.parent_span_id] +
                    [y for ln in sp.links for y in (ln.trace_id, ln.span_id)]}
        sent_ids |= {bytes([1]) * 16, bytes([1]) * 8, bytes([2]) * 8, bytes([3]) * 8, bytes([4]) * 8}
        sender.close()
        # every span is exported (rules never drop spans): wait for all of them
        got, deadline = [], time.time() + 120
        while True:
            # cvm.yaml also exports the engine's metrics and logs to the same
            # gateway (/v1/metrics, /v1/logs: the scrape's `up` at least);
            # every body is searched for markers below, the traces decoded
            got = [Request.FromString(x["body"]) for x in list(sink.inbox.items)
                   if x["path"].endswith("/v1/traces")]
            n = sum(len(ss.spans) for r in got for rs in r.resource_spans for ss in rs.scope_spans)
            if n >= sent_spans or time.time() > deadline:
                break
            time.sleep(0.1)
        time.sleep(0.5)                 # a span past the expected count would be late
        got = [Request.FromString(x["body"]) for x in list(sink.inbox.items)
               if x["path"].endswith("/v1/traces")]
        n = sum(len(ss.spans) for r in got for rs in r.resource_spans for ss in rs.scope_spans)
        if n != sent_spans:
            failures.append("the gateway got %d spans of %d" % (n, sent_spans))
        # no marker arrives
        for x in sink.inbox.items:
            if MARK.encode() in x["body"] or HEX_MARK.encode() in x["body"] or \
               HEX_MARK[:16].encode() in x["body"] or HEX8_MARK.encode() in x["body"] or \
               WORD_MARK.encode() in x["body"]:
                failures.append("a marker arrived in the raw bytes")
        for r in got:
            for s in strings_of(r):
                if MARK in s or HEX_MARK[:16] in s or KEY in s:
                    failures.append("a marker arrived: %r" % s[:120])
        # the controls arrive with their legitimate values
        roots = [sp for r in got for rs in r.resource_spans for ss in rs.scope_spans for sp in ss.spans
                 if sp.trace_id == CTRL_TID and sp.span_id == CTRL_ROOT]
        if len(roots) != len(controls):
            failures.append("%d control root spans of %d arrived" % (len(roots), len(controls)))
        pseud = set()
        for sp in roots:
            at = attrs(sp.attributes)
            for k, v in KEPT["span"].items():
                if not k.startswith("gen_ai.") and k not in ("rid", "module", "bootstrap_room"):
                    continue
                if k in ("rid", "gen_ai.request.id"):
                    if not re.fullmatch("[0-9a-f]{32}", at.get(k) or "") or at[k] == RID:
                        failures.append("control %s is %r, not a pseudonym" % (k, at.get(k)))
                    pseud.add(at.get(k))
                elif k == "bootstrap_room":
                    if not re.fullmatch("0x[0-9a-f]{16}", at.get(k) or "") or at[k] == v:
                        failures.append("control bootstrap_room is %r" % at.get(k))
                elif at.get(k) != v:
                    failures.append("control %s is %r, want %r" % (k, at.get(k), v))
            if sp.name != " Req redacted":
                failures.append("control root name %r" % sp.name)
        rooms = [v for r in got for rs in r.resource_spans for ss in rs.scope_spans for sp in ss.spans
                 for k, v in attrs(sp.attributes).items() if k == "bootstrap_room"]
        bad = [v for v in rooms if not re.fullmatch("0x[0-9a-f]{16}", str(v))]
        if bad or len(rooms) < len(controls) + 5:
            failures.append("bootstrap_room pseudonyms not of 16 hex digits: %r (of %d)" % (bad[:5], len(rooms)))
        if len(pseud) != 1:
            failures.append("the same rid gave %d pseudonyms: %s" % (len(pseud), sorted(pseud)))
        names = {sp.name for r in got for rs in r.resource_spans for ss in rs.scope_spans for sp in ss.spans
                 if sp.trace_id == CTRL_TID}
        for want in ("Scheduler [TP 0] (host:redacted | pid:redacted)", "tokenize", "decode_loop"):
            if want not in names:
                failures.append("control name %r did not arrive (got %s)" % (want, sorted(names)))
        capped_links, capped_events = [], []
        for r in got:
            for rs in r.resource_spans:
                control = any(sp.trace_id == CTRL_TID for ss in rs.scope_spans for sp in ss.spans)
                if control and attrs(rs.resource.attributes).get("service.name") != "sglang":
                    failures.append("service.name did not arrive")
                for ss in rs.scope_spans:
                    for sp in ss.spans:
                        if sp.trace_id == CTRL_TID and sp.name == "decode_loop":
                            at = attrs(sp.attributes)
                            if at.get("decode_ct") != 63 or len(sp.events) != 1 or \
                               attrs(sp.events[0].attributes) != KEPT["spanevent"] or \
                               len(sp.links) != 1 or sp.dropped_links_count != 0:
                                failures.append("control slice values: %r %r" % (at, sp.events))
                        # the capped ones: what is over the cap is counted
                        if sp.name == "decode_loop" and sp.trace_id != CTRL_TID and \
                           (len(sp.links) > 1 or len(sp.events) > 4):
                            failures.append("a span left with %d links and %d events"
                                            % (len(sp.links), len(sp.events)))
                        if sp.name == "decode_loop" and sp.dropped_links_count == 63 and \
                           len(sp.links) == 1:
                            capped_links.append(sp)
                        if sp.name == "decode_loop" and sp.dropped_events_count == 60 and \
                           len(sp.events) == 4:
                            capped_events.append(sp)
        if len(capped_links) != 1 or len(capped_events) != 1:
            failures.append("capped spans: %d with 1 link and 63 dropped, %d with 4 events and 60 "
                            "dropped" % (len(capped_links), len(capped_events)))
        failures += check_ids(got, sent_ids)
        failures += check_caps(got)
        metrics = col.metrics()
        for name, want in (("dropped_spans", sum(d for _, _, d in OVER.values())),
                           ("dropped_resource_entries", 1), ("dropped_scope_entries", 1)):
            have = P.metric_sum(metrics, "spanfence_processor_transform_" + name)
            if have != want:
                failures.append("spanfence_processor_transform_%s is %r, want %d" % (name, have, want))
        # ... and in the collector's accounting: received, dropped as filtered
        capped = sum(d for _, _, d in OVER.values())
        if P.metric_sum(metrics, "otelcol_processor_dropped_spans", reason="filtered") != capped:
            failures.append("otelcol_processor_dropped_spans{reason=filtered} is %r, want %d" % (
                P.metric_sum(metrics, "otelcol_processor_dropped_spans", reason="filtered"), capped))
        if (P.metric_sum(metrics, "spanfence_processor_transform_pseudonymized_ids") or 0) < sent_spans:
            failures.append("pseudonymized ids not counted")
        if KEY in metrics:
            failures.append("the pseudonym key is in the metrics")
        if MARK in metrics or WORD_MARK in metrics:
            failures.append("a marker is in /metrics")
        if P.metric_sum(metrics, "spanfence_processor_transform_dropped_span_links") != 63 or \
           P.metric_sum(metrics, "spanfence_processor_transform_dropped_span_events") != 60:
            failures.append("dropped links/events counted: %r %r" % (
                P.metric_sum(metrics, "spanfence_processor_transform_dropped_span_links"),
                P.metric_sum(metrics, "spanfence_processor_transform_dropped_span_events")))
        if P.metric_sum(metrics, "spanfence_processor_transform_failed_values") <= 0:
            failures.append("no failed values counted")
    finally:
        col.stop()
        sink.close()
    with open(col.stderr_path, errors="replace") as f:
        log = f.read()
    if KEY in log:
        failures.append("the pseudonym key is in the log")
    if MARK in log or WORD_MARK in log:
        failures.append("a marker is in the log")
    print("privacy_markers: %d cases over grpc, http, json; schema from %s" % (len(cases), origin))
    for x in sorted(set(failures))[:40]:
        print("FAIL", x)
    if failures:
        print("kept in", scratch)
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    print("privacy_markers: ok, no marker arrived, controls arrived with their values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
