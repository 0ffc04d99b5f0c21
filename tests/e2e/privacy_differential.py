#!/usr/bin/python3
# tests/e2e/privacy_differential.py: the privacy differential test (ctest
# e2e/privacy_differential). Thousands of hand-made OTLP trace requests
# (privacy/cases.py: raw bytes, one mutation class at one message level
# each) go to the real spanfence binary over five transports; what each of
# its three exporters (otlphttp, otlp (gRPC), file) sends is compared byte for
# byte with what an independent decoder predicts (privacy/oracle.py: the
# official OTLP protos through the Python protobuf runtime, plus the test's
# allowlist), and judged on its own (no unknown fields, only allowlisted keys,
# no status message or trace_state, redacted names, canonical). Requests that
# must be refused must be refused and leave nothing behind. The collector's
# metrics must account for every request. A last phase runs a few hundred of
# the same cases through a pipeline with no processor at all: each output must
# be the input exactly as the official parser reads it (unknown fields and the
# two strindex fields dropped, serialized: oracle.PassthroughOracle), and every
# request must be answered as with the transform.
#
#   /usr/bin/python3 tests/e2e/privacy_differential.py --binary build/spanfence --build-dir build
#
# Environment: SF_DIFF_SEED (default 20261201), SF_DIFF_CASES (default 2400),
# SF_DIFF_ONLY=i,j (only those case numbers), SF_DIFF_LEGACY=1 (a build whose
# transform does not parse replace_pattern, set(trace_state) and
# kept_value_types yet: leave them out of the config and the oracle),
# SF_DIFF_KEEP=1 (keep the scratch directory), SF_OTLP_PROTO_DIR (a
# directory of official opentelemetry/proto/**.proto files, compiled by
# protoc, instead of the schema read from @opentelemetry/otlp-transformer's
# generated code: privacy/otlp_schema.py), SF_OTLP_PROTO_MIRROR (the
# opentelemetry-proto git mirror the schema is checked against when it
# exists; empty: no check), SF_DIFF_NOTRANSFORM_CASES (default 360, rounded
# up to a multiple of the class count: the phase with no processor).

import sys
sys.dont_write_bytecode = True     # no __pycache__ in the source tree

import argparse                    # noqa: E402
import atexit
import collections
import difflib
import os
import shutil
import signal
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "privacy"))

import cases as C          # noqa: E402
import oracle as O         # noqa: E402
import peers as P          # noqa: E402
from wire import LEVEL_NAMES, where_differ  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GZIP_PHASE_CASES = 150
NOTRANSFORM_CASES = int(os.environ.get("SF_DIFF_NOTRANSFORM_CASES", "360"))
SHOW_FAILURES = int(os.environ.get("SF_DIFF_SHOW", "10"))
EXPORTERS = ["otlphttp/sink", "otlp/sink", "file/sink"]


def q(s):
    return "'" + s.replace("'", "''") + "'"


def config(ports, file_path, compression, legacy, transform=True):
    """The collector's config; transform=False: a traces pipeline with no
    processor at all (receiver -> the same three exporters)."""
    def keep(ctx):
        return q("keep_keys(attributes, [%s])" % ", ".join('"%s"' % k for k in C.ALLOW[ctx]))
    redact = [q('replace_pattern(name, "host:[0-9a-f]+", "host:<redacted>")'),
              q('replace_pattern(name, "pid:[0-9]+", "pid:<redacted>")'),
              q('replace_pattern(name, "^Req [0-9a-f]{8}", "Req <rid>")')]
    span = [keep("span"), q('set(status.message, "")')]
    event = [keep("event")]
    link = [keep("link")]
    if not legacy:
        span += [q('set(trace_state, "")')] + redact
        event += redact
        link += [q('set(trace_state, "")')]
    groups = [("resource", [keep("resource")]), ("scope", [keep("scope")]), ("span", span),
              ("spanevent", event), ("link", link)]
    stmts = "".join("      - context: %s\n        statements:\n%s" %
                    (ctx, "".join("          - %s\n" % s for s in ss)) for ctx, ss in groups)
    processors = """processors:
  transform/allowlist:
    error_mode: propagate
{kvt}    trace_statements:
{stmts}""".format(kvt="" if legacy else "    kept_value_types: scalar\n", stmts=stmts)
    return """receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
{processors}exporters:
  otlphttp/sink:
    endpoint: http://127.0.0.1:{hsink}
    compression: {comp}
    # one request out per request in, compared one by one: no merging
    sending_queue:
      batch: {{enabled: false}}
    retry_on_failure:
      max_elapsed_time: 10s
  otlp/sink:
    endpoint: 127.0.0.1:{gsink}
    compression: {comp}
    tls:
      insecure: true
    sending_queue:
      batch: {{enabled: false}}
    retry_on_failure:
      max_elapsed_time: 10s
  file/sink:
    path: {path}
    format: proto
service:
  telemetry:
    metrics:
      address: 127.0.0.1:{metrics}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [{pipeline_processors}]
      exporters: [{exporters}]
""".format(processors=processors if transform else "", comp=compression, path=file_path,
           pipeline_processors="transform/allowlist" if transform else "",
           exporters=", ".join(EXPORTERS), **ports)


# ---- reporting ------------------------------------------------------------------------

def hexdump(b, limit=256, start=0):
    """xxd-like lines of b[start:start+limit] (start rounded down to 16)."""
    start = max(0, min(start, len(b)) // 16 * 16)
    lines = ["    ... %d bytes before" % start] if start else []
    for off in range(start, min(len(b), start + limit), 16):
        chunk = b[off:off + 16]
        lines.append("    %04x  %-47s  %s" % (off, " ".join("%02x" % x for x in chunk),
                                              "".join(chr(x) if 32 <= x < 127 else "." for x in chunk)))
    if len(b) > start + limit:
        lines.append("    ... %d more bytes" % (len(b) - start - limit))
    return "\n".join(lines) if lines else "    (empty)"


class Report:
    def __init__(self):
        self.failed = []            # (case, phase, transport, [(kind, detail)], extra)
        self.passed = 0
        self.runs = collections.Counter()   # phase -> cases run
        self.by_class = collections.Counter()
        self.example = {}           # (class, kind) -> (first case number, its detail)
        self.phase_problems = []    # (phase, kind, detail)

    def case_failed(self, case, phase, transport, probs, extra):
        self.failed.append((case, phase, transport, probs, extra))
        for kind, detail in probs:
            if (case.cls, kind) not in self.example:
                self.example[(case.cls, kind)] = (case.idx, detail)
        for kind in sorted({k for k, _ in probs}):
            self.by_class[(case.cls, kind)] += 1

    def phase_failed(self, phase, kind, detail):
        self.phase_problems.append((phase, kind, detail))
        print("FAIL [%s] %s: %s" % (phase, kind, detail), flush=True)

    def show(self, schema):
        for case, phase, transport, probs, extra in self.failed[:SHOW_FAILURES]:
            lvl = LEVEL_NAMES.get(case.level, case.level)
            print("\nFAIL case %d [%s @ %s] phase %s via %s: must be %s" %
                  (case.idx, case.cls, lvl, phase, transport,
                   "accepted" if case.expect == C.OK else "refused"))
            print("  mutation: %s" % case.note)
            seen = set()
            for kind, detail in probs:
                if (kind, detail) not in seen:
                    seen.add((kind, detail))
                    print("  - %s: %s" % (kind, detail))
            print("  input (%d bytes):\n%s" % (len(case.data), hexdump(case.data)))
            # outputs and the expected bytes: around where they first part
            for label, b, *at in extra.get("dumps", []):
                if not at:
                    print("  %s (%d bytes):\n%s" % (label, len(b), hexdump(b)))
                else:
                    print("  %s (%d bytes), where it differs (byte %d):\n%s" % (
                        label, len(b), at[0], hexdump(b, 64, at[0] - 16)))
            if "diff_pair" in extra:
                extra["diff"] = text_diff(schema, *extra["diff_pair"])
            if "diff" in extra and not extra["diff"]:
                print("  expected and %s decode to the same text: the difference is in the encoding "
                      "(field order, varint widths, explicit defaults)" % extra.get("diff_of", "output"))
            if extra.get("diff"):
                print("  expected vs %s, as text:\n%s" % (extra.get("diff_of", "output"),
                                                          "\n".join("    " + x for x in extra["diff"])))
        if len(self.failed) > SHOW_FAILURES:
            print("\n... and %d more failing cases" % (len(self.failed) - SHOW_FAILURES))
        if self.by_class:
            print("\nfailing cases per class and failure:")
            w = max(len(c) for c, _ in self.by_class)
            for (cls, kind), n in sorted(self.by_class.items()):
                idx, detail = self.example[(cls, kind)]
                print("  %-*s  %-24s %5d   e.g. case %d: %s" % (w, cls, kind, n, idx, detail[:150]))
            kinds = collections.Counter()
            for (cls, kind), n in self.by_class.items():
                kinds[kind] += n
            print("failing cases per failure: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))


def text_diff(schema, expected, got):
    from google.protobuf import text_format

    def fmt(b):
        try:
            m = schema.Request()
            m.ParseFromString(b)
            return text_format.MessageToString(m, as_utf8=True, print_unknown_fields=True).splitlines()
        except Exception as e:   # noqa: BLE001
            return ["<does not decode: %s>" % e]
    return list(difflib.unified_diff(fmt(expected), fmt(got), "expected", "got", n=1, lineterm=""))[:40]


# ---- the self-check: a checker that passes everything must not pass ---------------

def self_check(orc, schema, cases):
    base = next(c for c in cases if c.cls == "baseline")
    good, _ = orc.expected(base.data)
    problems = []
    if orc.check_output(good):
        problems.append("the oracle's own output fails the checker: %s" % orc.check_output(good))

    def must_flag(label, bad, kind):
        found = {k for k, _ in orc.check_output(bad)}
        if kind not in found:
            problems.append("%s: checker did not report %s (found %s)" % (label, kind, sorted(found)))
        if bad == good:
            problems.append("%s: equals the expected output" % label)

    from wire import tag, varint
    must_flag("unknown field appended", good + tag(19000, 0) + varint(1), "unknown_fields_exported")
    must_flag("non-minimal tag", tag(1, 2, 2) + good[1:], "not_canonical")
    m = orc.parse(good)
    sp = m.resource_spans[0].scope_spans[0].spans[0]
    kv = sp.attributes.add()
    kv.key = "user.email"
    kv.value.string_value = "alice@example.com"
    must_flag("secret attribute added", m.SerializeToString(), "secret_key_exported")
    m = orc.parse(good)
    m.resource_spans[0].scope_spans[0].spans[0].status.message = "prompt: hello"
    must_flag("status message kept", m.SerializeToString(), "status_message_exported")
    old = tag(1000, 2) + varint(4) + tag(2, 2) + varint(2) + tag(5, 2) + varint(0)
    rs = orc.parse(good).resource_spans[0].SerializeToString() + old
    must_flag("spans under field 1000", tag(1, 2) + varint(len(rs)) + rs, "old_schema_spans")
    if not orc.legacy:
        m = orc.parse(good)
        m.resource_spans[0].scope_spans[0].spans[0].name = "Req 0123abcd"
        must_flag("name not redacted", m.SerializeToString(), "name_not_redacted")
        m = orc.parse(good)
        m.resource_spans[0].scope_spans[0].spans[0].trace_state = "a=b"
        must_flag("trace_state kept", m.SerializeToString(), "trace_state_exported")
    problems += known_answers(orc)
    return problems


def known_answers(orc):
    """The oracle against outputs written out by hand with our own encoder,
    so that the official runtime and the allowlist code are checked by
    something that shares nothing with them."""
    from wire import F, M, SGROUP
    from cases import fs, fv, fm

    def req(*rs):
        return M("request", [fm(1, r) for r in rs])

    def kv(key, any_fields, extra=()):
        return M("kv", [fs(1, key), fm(2, M("any", any_fields))] + list(extra))
    tid, sid = b"\x01" * 16, b"\x02" * 8
    full = not orc.legacy
    tests = []
    # unknown fields, fields out of order, a secret, key_strindex, status message, explicit default
    span_in = M("span", [fs(5, "Req 0123abcd (host:ab12 | pid:77)"), fv(99, 1), fs(2, sid), fs(1, tid),
                         fm(9, kv("user.email", [fs(1, "a@b.c")])),
                         fm(9, kv("tp_rank", [fv(3, 3)], [fv(3, 5)])),
                         fm(15, M("status", [fs(2, "secret"), fv(3, 2), fv(1, 2)])), fv(6, 0),
                         F(17, SGROUP, [fv(1, 1), F(2, SGROUP, [fs(3, "x")])]), fs(3, "k=v")])
    span_out = M("span", [fs(1, tid), fs(2, sid)] + ([] if full else [fs(3, "k=v")]) +
                 [fs(5, "Req <rid> (host:<redacted> | pid:<redacted>)" if full else
                     "Req 0123abcd (host:ab12 | pid:77)"),
                  fm(9, kv("tp_rank", [fv(3, 3)])), fv(10, 1), fm(15, M("status", [fv(3, 2)]))])
    tests.append(("span: order, unknowns, secret, strindex, status",
                  req(M("rs", [fm(2, M("ss", [fm(2, span_in)]))])),
                  req(M("rs", [fm(2, M("ss", [fm(2, span_out)]))]))))
    # a Resource twice: merged; the explicit 0 of the second replaces the 5
    rs_in = M("rs", [fm(1, M("resource", [fm(1, kv("service.name", [fs(1, "a")])), fv(2, 5)])),
                     fm(2, M("ss", [fm(2, M("span", [fs(1, tid), fs(2, sid)]))])),
                     fm(1, M("resource", [fm(1, kv("host.arch", [fs(1, "x")])), fv(2, 0)])),
                     fm(1000, M("ils", [fm(2, M("span", [fs(5, "old")]))]))])
    rs_out = M("rs", [fm(1, M("resource", [fm(1, kv("service.name", [fs(1, "a")])),
                                          fm(1, kv("host.arch", [fs(1, "x")]))])),
                      fm(2, M("ss", [fm(2, M("span", [fs(1, tid), fs(2, sid)]))]))])
    tests.append(("resource merge, field 1000", req(rs_in), req(rs_out)))
    # kept_value_types: scalar; string_value_strindex; a saturated count; a link's trace_state
    span_in = M("span", [fs(1, tid), fs(2, sid), fv(10, 2**32 - 1),
                         fm(9, kv("gen_ai.request.id", [fm(6, M("kvlist", [fm(1, kv("k", [fs(1, "v")]))]))])),
                         fm(9, kv("tp_rank", [fs(1, "s"), fv(8, 4)])), fm(9, kv("prompt", [fs(1, "p")])),
                         fm(13, M("link", [fs(3, "k=v"), fm(4, kv("link.kind", [fs(7, b"b")]))]))])
    if full:
        span_out = M("span", [fs(1, tid), fs(2, sid), fm(9, kv("tp_rank", [])), fv(10, 2**32 - 1),
                              fm(13, M("link", [fv(5, 1)]))])
    else:
        span_out = M("span", [fs(1, tid), fs(2, sid),
                              fm(9, kv("gen_ai.request.id", [fm(6, M("kvlist", [fm(1, kv("k", [fs(1, "v")]))]))])),
                              fm(9, kv("tp_rank", [])), fv(10, 2**32 - 1),
                              fm(13, M("link", [fs(3, "k=v"), fm(4, kv("link.kind", [fs(7, b"b")]))]))])
    tests.append(("value types, strindex value, saturation, link",
                  req(M("rs", [fm(2, M("ss", [fm(2, span_in)]))])),
                  req(M("rs", [fm(2, M("ss", [fm(2, span_out)]))]))))
    return check_known(orc, tests)


def check_known(orc, tests):
    """[(label, input tree, expected output tree)]: what the oracle gets wrong."""
    from wire import enc
    problems = []
    for label, given, want in tests:
        try:
            got, _ = orc.expected(enc(given))
        except Exception as e:   # noqa: BLE001
            problems.append("known answer '%s': the oracle fails: %s" % (label, e))
            continue
        if got != enc(want):
            problems.append("known answer '%s': the oracle says %s, by hand %s" % (label, got.hex(), enc(want).hex()))
    return problems


def self_check_passthrough(porc, orc, cases):
    """The no-transform phase's judgement (judge_output with the passthrough
    oracle) must flag outputs that are not the schema-exact input, and must
    not flag what the allowlist would have removed on its own."""
    from wire import M, SGROUP, F, tag, varint
    from cases import fs, fv, fm
    problems = []
    base = next(c for c in cases if c.cls == "baseline")
    good, _ = porc.expected(base.data)
    if judge_output(porc, good, good, "self-check"):
        problems.append("no transform: the oracle's own output fails: %s" %
                        judge_output(porc, good, good, "self-check"))

    def must_flag(label, bad, kinds):
        found = {k for k, _ in judge_output(porc, bad, good, "self-check")}
        for kind in kinds:
            if kind not in found:
                problems.append("no transform, %s: not reported as %s (found %s)" %
                                (label, kind, sorted(found)))
    must_flag("unknown field appended", good + tag(19000, 0) + varint(1),
              ["unknown_fields_exported", "encoding_differs"])
    must_flag("non-minimal tag", tag(1, 2, 2) + good[1:], ["not_canonical", "encoding_differs"])
    m = porc.parse(good)
    m.resource_spans[0].scope_spans[0].spans[0].name += "x"
    must_flag("span name changed", m.SerializeToString(), ["content_differs"])
    # A collector that filtered anyway fails: some accepted case loses something to the allowlist.
    for c in cases:
        if c.expect != C.OK:
            continue
        try:
            want, filtered = porc.expected(c.data)[0], orc.expected(c.data)[0]
        except Exception:   # noqa: BLE001 (a generator_error, reported by the phases)
            continue
        if want != filtered:
            found = {k for k, _ in judge_output(porc, filtered, want, "self-check")}
            if "content_differs" not in found:
                problems.append("no transform: the allowlisted output of case %d is not reported" % c.idx)
            if porc.check_output(filtered) or porc.check_output(want):
                problems.append("no transform: the checker judges case %d's outputs by the allowlist" % c.idx)
            break
    else:
        problems.append("no transform: no case where the allowlist changes anything")
    # By hand: unknowns (a varint, a group, Status 1), key_strindex and an explicit default go;
    # the secret, the status message, trace_state and the name stay; fields in number order.
    tid, sid = b"\x01" * 16, b"\x02" * 8

    def kv(key, any_fields, extra=()):
        return M("kv", [fs(1, key), fm(2, M("any", any_fields))] + list(extra))

    def req(span):
        return M("request", [fm(1, M("rs", [fm(2, M("ss", [fm(2, span)]))]))])
    name = "Req 0123abcd (host:ab12 | pid:77)"
    span_in = M("span", [fs(5, name), fv(99, 1), fs(2, sid), fs(1, tid),
                         fm(9, kv("user.email", [fs(1, "a@b.c")])),
                         fm(9, kv("tp_rank", [fv(3, 3)], [fv(3, 5)])),
                         fm(15, M("status", [fs(2, "secret"), fv(3, 2), fv(1, 2)])), fv(6, 0),
                         F(17, SGROUP, [fv(1, 1), F(2, SGROUP, [fs(3, "x")])]), fs(3, "k=v"),
                         fm(9, kv("prompt", [fs(7, b"\x00b"), fv(8, 4)]))])
    span_out = M("span", [fs(1, tid), fs(2, sid), fs(3, "k=v"), fs(5, name),
                          fm(9, kv("user.email", [fs(1, "a@b.c")])), fm(9, kv("tp_rank", [fv(3, 3)])),
                          fm(9, kv("prompt", [])), fm(15, M("status", [fs(2, "secret"), fv(3, 2)]))])
    return problems + check_known(porc, [("no transform: span", req(span_in), req(span_out))])


# ---- one phase: one collector, some cases ---------------------------------------------

class Phase:
    def __init__(self, name, binary, scratch, compression, legacy, transform=True):
        self.name = name
        self.transform = transform
        self.dir = os.path.join(scratch, name)
        os.makedirs(self.dir)
        self.http = P.HttpSink()
        self.grpc = P.GrpcSink()
        self.file = P.FileSink(os.path.join(self.dir, "spans.bin"))
        self.ports = {"grpc": P.free_port(), "http": P.free_port(), "metrics": P.free_port(),
                      "hsink": self.http.port, "gsink": self.grpc.port}
        self.collector = P.Collector(binary, self.dir, "spanfence",
                                     config(self.ports, self.file.path, compression, legacy, transform),
                                     self.ports["grpc"], self.ports["metrics"],
                                     consumers_normal=True)     # one export awaited per case
        self.compression = compression
        self.cursor = {e: 0 for e in EXPORTERS}
        self.timeout = 10.0
        self.missing = 0
        self.answers = {}       # case number -> (accepted, code): how the receiver answered

    def next_output(self, exporter):
        """The next output of `exporter`, or None after the timeout."""
        i = self.cursor[exporter]
        if exporter == "file/sink":
            ok = self.file.wait_count(i + 1, self.timeout)
            item = {"body": self.file.records[i], "error": None} if ok else None
        else:
            box = (self.http if exporter == "otlphttp/sink" else self.grpc).inbox
            ok = box.wait_count(i + 1, self.timeout)
            item = box.items[i] if ok else None
        if item is None:
            self.missing += 1
            if self.missing >= 3:
                self.timeout = 1.0     # something is badly wrong: do not spend minutes waiting
            return None
        self.cursor[exporter] = i + 1
        return item

    def pending(self, exporter):
        """Whether `exporter` has sent more than has been matched so far."""
        if exporter == "file/sink":
            self.file.poll()
            return len(self.file.records) > self.cursor[exporter]
        box = (self.http if exporter == "otlphttp/sink" else self.grpc).inbox
        return len(box) > self.cursor[exporter]

    def close(self):
        self.collector.kill()
        self.http.close()
        self.grpc.close()


def judge_output(orc, out, expected, who):
    """The problems of output `out` (sent by exporters `who`): judged on its
    own by the oracle's checker, and against `expected`, the bytes the
    oracle predicts (None: no comparison)."""
    probs = [(kind, "%s: %s" % (who, d)) for kind, d in orc.check_output(out)]
    if expected is not None and out != expected:
        canon = orc.canonical(out)
        if canon == expected:
            probs.append(("encoding_differs", "%s: the right content, encoded otherwise (%d bytes, "
                          "expected %d): %s" % (who, len(out), len(expected), where_differ(expected, out)[0])))
        else:
            probs.append(("content_differs", "%s: %s" % (
                who, where_differ(expected, canon if canon is not None else out)[0])))
    return probs


def run_case(ph, case, transport, sender, orc, schema, rep, tally, reference=None):
    """One case over one transport. `reference`: {case number: (accepted,
    code)} of earlier phases, which this phase's answer must equal (the
    receiver's validation does not depend on the processors)."""
    probs = []
    rep.runs[ph.name] += 1
    extra = {"dumps": []}
    expected = spans = None
    if case.expect == C.OK:
        try:
            expected, spans = orc.expected(case.data)
        except Exception as e:   # noqa: BLE001
            probs.append(("generator_error", "the official parser refuses this 'valid' input: %s" % e))
    accepted, code, detail = sender.send(transport, case.data)
    tally["sent"] += 1
    ph.answers[case.idx] = (accepted, code)
    if reference is not None and case.idx in reference and reference[case.idx] != (accepted, code):
        was, code_was = reference[case.idx]
        probs.append(("answer_differs", "answered %s %s here, %s %s with the transform" % (
            "accepted" if accepted else "refused", code, "accepted" if was else "refused", code_was)))
    if not accepted:
        tally["refused"] += 1
        # Nothing may leave for a refused request: look once, a moment later.
        time.sleep(0.002)
        for exp in EXPORTERS:
            while ph.pending(exp):
                item = ph.next_output(exp)
                probs.append(("output_after_refusal", "%s sent %d bytes" % (exp, len(item["body"]))))
                for kind, d in orc.check_output(item["body"]):
                    probs.append((kind, "%s: %s" % (exp, d)))
                extra["dumps"].append(("%s output (should not exist)" % exp, item["body"]))
        if case.expect == C.OK:
            probs.append(("refused_valid", "answered %s %r" % (code, detail)))
        elif code not in ("INVALID_ARGUMENT", 400):
            probs.append(("wrong_refusal_code", "answered %s %r, not INVALID_ARGUMENT / 400" % (code, detail)))
    else:
        tally["ok"] += 1
        if case.expect == C.REFUSE:
            probs.append(("accepted_invalid", "answered %s" % code))
            try:
                tally["spans"] += O.count_spans(orc.parse(case.data))
            except Exception:    # noqa: BLE001 (the official parser refuses it too)
                tally["spans_unknown"] += 1
        elif spans is not None:
            tally["spans"] += spans
            for label, n in orc.unknown_fields(case.data).items():
                tally["unknown:" + label] += n
        outputs = collections.OrderedDict()     # bytes -> exporters that sent them
        for exp in EXPORTERS:
            item = ph.next_output(exp)
            if item is None:
                probs.append(("missing_output", "%s sent nothing within %.0fs" % (exp, ph.timeout)))
                continue
            if item.get("error"):
                probs.append(("sink_error", "%s: %s" % (exp, item["error"])))
            if exp == "otlphttp/sink":
                if item["content_type"] != "application/x-protobuf":
                    probs.append(("exporter_content_type", "otlphttp Content-Type %r" % item["content_type"]))
                want = "gzip" if ph.compression == "gzip" else ""
                if item["encoding"] != want:
                    probs.append(("exporter_compression", "otlphttp Content-Encoding %r, config says %s" %
                                  (item["encoding"], ph.compression)))
            outputs.setdefault(item["body"], []).append(exp)
        for out, exps in outputs.items():
            who = ", ".join(exps)
            probs += judge_output(orc, out, expected, who)
            if expected is not None and out != expected:
                _, at_exp, at_out = where_differ(expected, out)
                extra["dumps"].append(("%s output" % who, out, at_out))
                if "diff_pair" not in extra:
                    extra["diff_pair"] = (expected, out)
                    extra["diff_of"] = who
                    extra["dumps"].append(("expected", expected, at_exp))
            elif expected is None:
                extra["dumps"].append(("%s output (should not exist)" % who, out))
    if probs:
        rep.case_failed(case, ph.name, transport, probs, extra)
    else:
        rep.passed += 1


def check_dropped_fields(ph, rep, tally, text, schema):
    """spanfence_receiver_dropped_fields{message}: one series per message type
    of the official schema under ExportTraceServiceRequest (per transport),
    and per type at least the unknown fields the official parser kept in the
    accepted inputs (it also drops key_strindex, string_value_strindex and
    losing oneof members' fields, and counts refused requests' fields read
    before the refusal: a lower bound)."""
    name = "spanfence_receiver_dropped_fields"
    series = [(lab, v) for lab, v in P.metric_series(text, name) if lab.get("receiver") == "otlp"]
    if not series:
        rep.phase_failed(ph.name, "metrics", "%s not exported" % name)
        return
    want = set(schema.messages)
    by_transport = collections.defaultdict(set)
    got = collections.Counter()
    for lab, v in series:
        by_transport[lab.get("transport", "")].add(lab.get("message"))
        got[lab.get("message")] += int(v)
    for transport, labels in sorted(by_transport.items()):
        if labels != want:
            rep.phase_failed(ph.name, "metrics", "%s{transport=%s}: message labels %s missing, %s not in the "
                             "schema" % (name, transport, sorted(want - labels), sorted(labels - want)))
    seen = {k[len("unknown:"):]: n for k, n in tally.items() if k.startswith("unknown:")}
    low = {m: (got[m], n) for m, n in seen.items() if got[m] < n}
    if low:
        rep.phase_failed(ph.name, "metrics", "%s below the unknown fields of the accepted inputs: %s" % (
            name, ", ".join("%s %d < %d" % (m, g, n) for m, (g, n) in sorted(low.items()))))
    if seen and sum(got.values()) == 0:
        rep.phase_failed(ph.name, "metrics", "%s all 0 after %d unknown fields" % (name, sum(seen.values())))
    print("phase %s: %s %d in all (%s); the official parser kept %d unknown fields of accepted inputs" % (
        ph.name, name, sum(got.values()),
        ", ".join("%s %d" % kv for kv in sorted(got.items()) if kv[1]), sum(seen.values())), flush=True)


def check_metrics(ph, rep, tally, schema):
    text = ""
    # Exporters count after sending: wait until each has settled (nothing
    # queued, every accepted span sent or failed), however long the machine
    # takes; 60 s only ends a stuck run.
    deadline = time.time() + 60
    while time.time() < deadline:
        text = ph.collector.metrics()
        accepted = P.metric_sum(text, "otelcol_receiver_accepted_spans", receiver="otlp")
        if accepted is not None and all(
                (P.metric_sum(text, "spanfence_exporter_queued_spans", exporter=e) or 0) == 0 and
                (P.metric_sum(text, "otelcol_exporter_sent_spans", exporter=e) or 0) +
                (P.metric_sum(text, "otelcol_exporter_send_failed_spans", exporter=e) or 0) == accepted
                for e in EXPORTERS):
            break
        time.sleep(0.1)
    got = {
        "requests": P.metric_sum(text, "spanfence_receiver_requests", receiver="otlp"),
        "refused_requests": P.metric_sum(text, "spanfence_receiver_refused_requests", receiver="otlp"),
        "accepted_spans": P.metric_sum(text, "otelcol_receiver_accepted_spans", receiver="otlp"),
    }
    for k, v in got.items():
        if v is None:
            rep.phase_failed(ph.name, "metrics", "%s not exported" % k)
    if None in got.values():
        return
    if got["requests"] != tally["sent"]:
        rep.phase_failed(ph.name, "metrics", "spanfence_receiver_requests %d, sent %d" % (got["requests"], tally["sent"]))
    if got["refused_requests"] != tally["refused"]:
        rep.phase_failed(ph.name, "metrics", "spanfence_receiver_refused_requests %d, refused answers %d" %
                         (got["refused_requests"], tally["refused"]))
    if got["requests"] - got["refused_requests"] != tally["ok"]:
        rep.phase_failed(ph.name, "metrics", "received %d - refused %d != accepted answers %d" %
                         (got["requests"], got["refused_requests"], tally["ok"]))
    if not tally["spans_unknown"] and got["accepted_spans"] != tally["spans"]:
        rep.phase_failed(ph.name, "metrics", "otelcol_receiver_accepted_spans %d, spans in accepted requests %d" %
                         (got["accepted_spans"], tally["spans"]))
    check_dropped_fields(ph, rep, tally, text, schema)
    for e in EXPORTERS:
        sent = P.metric_sum(text, "otelcol_exporter_sent_spans", exporter=e)
        failed = P.metric_sum(text, "otelcol_exporter_send_failed_spans", exporter=e) or 0
        queued = P.metric_sum(text, "spanfence_exporter_queued_spans", exporter=e) or 0
        if sent != got["accepted_spans"] or failed or queued:
            rep.phase_failed(ph.name, "metrics", "%s: sent %s failed %s queued %s, accepted %d" %
                             (e, sent, failed, queued, got["accepted_spans"]))


def run_phase(ph, phase_cases, orc, schema, rep, reference=None):
    rc, out = ph.collector.validate()
    if rc != 0:
        rep.phase_failed(ph.name, "config", "spanfence validate exit %d:\n%s%s" % (
            rc, out, "" if orc.legacy else
            "(a build without replace_pattern / set(trace_state) / kept_value_types: SF_DIFF_LEGACY=1)"))
        return False
    ph.collector.start()
    sender = P.Sender(ph.ports["grpc"], ph.ports["http"])
    tally = collections.Counter()
    t0 = time.time()
    try:
        for case in phase_cases:
            transport = P.TRANSPORTS[case.idx % len(P.TRANSPORTS)]
            run_case(ph, case, transport, sender, orc, schema, rep, tally, reference)
            if ph.collector.proc.poll() is not None:
                rep.phase_failed(ph.name, "crash", "spanfence exited with %s after case %d:\n%s" %
                                 (ph.collector.proc.returncode, case.idx, ph.collector.stderr_tail()))
                return False
        check_metrics(ph, rep, tally, schema)
    finally:
        sender.close()
    # Nothing more may arrive: every output has been matched to an accepted answer.
    time.sleep(0.3)
    counts = {"otlphttp/sink": len(ph.http.inbox), "otlp/sink": len(ph.grpc.inbox)}
    ph.file.poll()
    counts["file/sink"] = len(ph.file.records)
    for e, n in counts.items():
        if n != tally["ok"]:
            rep.phase_failed(ph.name, "output_count", "%s has %d outputs for %d accepted requests (%d expected "
                             "accepted)" % (e, n, tally["ok"], sum(c.expect == C.OK for c in phase_cases)))
    rc = ph.collector.stop()
    if rc != 0:
        rep.phase_failed(ph.name, "exit", "spanfence exited with %s on SIGTERM:\n%s" % (rc, ph.collector.stderr_tail()))
    ph.file.poll()
    if ph.file.leftover():
        rep.phase_failed(ph.name, "file_format", "%d bytes after the last whole record" % ph.file.leftover())
    print("phase %s (%s): %d requests (%d accepted, %d refused) in %.1fs" %
          (ph.name, "transform/allowlist" if ph.transform else "no processor", tally["sent"], tally["ok"],
           tally["refused"], time.time() - t0), flush=True)
    return True


def notransform_cases(all_cases, n):
    """About n of the cases for the phase without a transform: as many of
    each class, spread over its levels."""
    by_class = collections.OrderedDict()
    for c in all_cases:
        by_class.setdefault(c.cls, []).append(c)
    if not by_class or n <= 0:
        return []
    k = max(1, -(-n // len(by_class)))
    picked = set()
    for cs in by_class.values():
        picked.update(cs[j * len(cs) // k].idx for j in range(min(k, len(cs))))
    return [c for c in all_cases if c.idx in picked]


def run_phases(args, scratch, legacy, all_cases, orc, porc, schema, rep, phases):
    """The plain phase (exporters uncompressed), a short gzip phase, both
    through the allowlist (oracle orc), then the phase with no processor
    (oracle porc) on a few of the same cases, answered as before."""
    split = max(0, len(all_cases) - GZIP_PHASE_CASES) if len(all_cases) > 2 * GZIP_PHASE_CASES else \
        len(all_cases) - len(all_cases) // 4
    answers = {}
    for name, comp, transform, o, chunk in (
            ("plain", "none", True, orc, all_cases[:split]), ("gzip", "gzip", True, orc, all_cases[split:]),
            ("notransform", "none", False, porc, notransform_cases(all_cases, NOTRANSFORM_CASES))):
        if not chunk:
            continue
        ph = Phase(name, args.binary, scratch, comp, legacy, transform)
        phases.append(ph)
        ok = run_phase(ph, chunk, o, schema, rep, None if transform else answers)
        ph.close()
        if transform:
            answers.update(ph.answers)
        if not ok:
            break


def main():
    ap = argparse.ArgumentParser(description="the privacy differential test")
    ap.add_argument("--binary", required=True, help="the spanfence binary")
    ap.add_argument("--build-dir", required=True, help="where the scratch directory goes")
    ap.add_argument("--cases", type=int, default=int(os.environ.get("SF_DIFF_CASES", "2400")))
    ap.add_argument("--seed", default=os.environ.get("SF_DIFF_SEED", "20261201"))
    args = ap.parse_args()
    legacy = os.environ.get("SF_DIFF_LEGACY", "0") not in ("", "0")
    only = {int(x) for x in os.environ.get("SF_DIFF_ONLY", "").split(",") if x.strip()}

    os.makedirs(args.build_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="privacy_differential.", dir=os.path.abspath(args.build_dir))
    phases = []

    def cleanup():
        for ph in phases:
            ph.close()
        if os.environ.get("SF_DIFF_KEEP", "0") in ("", "0"):
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print("scratch kept: %s" % scratch)
    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))

    print("privacy_differential: seed %s (SF_DIFF_SEED), %d cases (SF_DIFF_CASES), legacy %s (SF_DIFF_LEGACY)" %
          (args.seed, args.cases, int(legacy)), flush=True)
    t0 = time.time()
    try:
        schema = O.Schema(SOURCE_DIR, scratch)
    except O.otlp_schema.SchemaError as e:
        print("SCHEMA: %s" % e)
        print("privacy_differential: 0 passed, 1 failed")
        return 1
    print("KeyValue.key_strindex (3): %s; AnyValue.string_value_strindex (8): %s; %d message types under "
          "ExportTraceServiceRequest" % ("yes" if schema.has_key_strindex else "NO",
                                         "yes" if schema.has_value_strindex else "NO", len(schema.messages)))
    orc = O.Oracle(schema, legacy)
    porc = O.PassthroughOracle(schema, legacy)
    all_cases = C.generate(args.seed, args.cases)
    n_ok = sum(c.expect == C.OK for c in all_cases)
    print("%d cases in %d classes (%d to accept, %d to refuse), built in %.1fs" %
          (len(all_cases), len({c.cls for c in all_cases}), n_ok, len(all_cases) - n_ok, time.time() - t0),
          flush=True)
    problems = self_check(orc, schema, all_cases) + self_check_passthrough(porc, orc, all_cases)
    if problems:
        for p in problems:
            print("SELF-CHECK FAILED: " + p)
        print("privacy_differential: 0 passed, 1 failed")
        return 1

    if only:
        all_cases = [c for c in all_cases if c.idx in only]
    rep = Report()
    # The official runtime logs a line to stderr for each string that is not
    # UTF-8 when it parses an output; the finding is reported anyway.
    saved_stderr = os.dup(2)
    quiet = os.open(os.path.join(scratch, "libprotobuf.log"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(quiet, 2)
    try:
        run_phases(args, scratch, legacy, all_cases, orc, porc, schema, rep, phases)
    finally:
        sys.stderr.flush()
        os.dup2(saved_stderr, 2)
        os.close(quiet)
    rep.show(schema)
    failed = len(rep.failed) + len(rep.phase_problems)
    print("\nprivacy_differential: %d of %d case runs passed (%s), %d failing, %d phase problems, in %.1fs" %
          (rep.passed, sum(rep.runs.values()), ", ".join("%s %d" % kv for kv in rep.runs.items()),
           len(rep.failed), len(rep.phase_problems), time.time() - t0))
    print("%d passed, %d failed" % (rep.passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
