# tests/e2e/privacy/oracle.py: the independent side of the differential test.
# The official OTLP trace schema (never spanfence's own tables): read from
# the code the OpenTelemetry JS maintainers generated from the official
# .proto files, which the npm package @opentelemetry/otlp-transformer ships
# (otlp_schema.py; $SF_OTLP_PROTO_DIR replaces it). The Python protobuf
# runtime parses each accepted input with standard protobuf semantics, the
# test's allowlist is applied in Python, and the result serialized is the
# exact output spanfence must produce. check_output() also judges each output
# on its own: canonical, no unknown fields, only allowlisted keys, no status
# message or trace_state, redacted names, and no spans in the pre-1.0
# instrumentation_library_spans (ResourceSpans field 1000). PassthroughOracle
# is the same without the allowlist: for a pipeline with no processor.

import os
import re

import otlp_schema
from cases import ALLOW

# OTLP v0.18's ResourceSpans, written for this test: field 1000 held
# InstrumentationLibrarySpans before scope_spans replaced it. Our Span keeps
# only a few fields, its strings as bytes, so that spans under field 1000 are
# found (and counted) even when their names are not UTF-8.
OLD_SCHEMA = """syntax = "proto3";
package sfdiff.otlp.v0_18;

message KeyValue {
  bytes key = 1;
  bytes value = 2;
}
message InstrumentationLibrary {
  string name = 1;
  string version = 2;
}
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  bytes name = 5;
  repeated KeyValue attributes = 9;
}
message InstrumentationLibrarySpans {
  InstrumentationLibrary instrumentation_library = 1;
  repeated Span spans = 2;
  string schema_url = 3;
}
message ResourceSpans {
  bytes resource = 1;
  repeated bytes scope_spans = 2;
  string schema_url = 3;
  repeated InstrumentationLibrarySpans instrumentation_library_spans = 1000;
}
message ExportTraceServiceRequest {
  repeated ResourceSpans resource_spans = 1;
}
"""

REDACT = [(re.compile(r"host:[0-9a-f]+"), "host:<redacted>"),
          (re.compile(r"pid:[0-9]+"), "pid:<redacted>"),
          (re.compile(r"^Req [0-9a-f]{8}"), "Req <rid>")]
SCALAR_MEMBERS = (None, "string_value", "bool_value", "int_value", "double_value")
U32_MAX = 2**32 - 1


class Schema:
    """The message classes: official (Request, Response), from the npm
    package's generated code or $SF_OTLP_PROTO_DIR (otlp_schema.py), and
    old (OldRequest) from OLD_SCHEMA above."""

    def __init__(self, source_dir, build_dir, log=print):
        self.official, self.origin = otlp_schema.load(source_dir, os.path.join(build_dir, "schema"), log)
        self.Request = self.official.cls(otlp_schema.REQUEST)
        self.Response = self.official.cls(otlp_schema.RESPONSE)
        self.messages = otlp_schema.reachable(self.official)
        old = otlp_schema.Loaded(otlp_schema.descriptors_from_protos(
            {"sfdiff_old_otlp.proto": OLD_SCHEMA}, os.path.join(build_dir, "schema", "old")))
        self.OldRequest = old.cls("sfdiff.otlp.v0_18.ExportTraceServiceRequest")
        kv = self.official.descriptor("opentelemetry.proto.common.v1.KeyValue").fields_by_name
        av = self.official.descriptor("opentelemetry.proto.common.v1.AnyValue").fields_by_name
        self.has_key_strindex = "key_strindex" in kv and kv["key_strindex"].number == 3
        self.has_value_strindex = "string_value_strindex" in av and av["string_value_strindex"].number == 8


# ---- walking a request ------------------------------------------------------------

def any_values(av):
    """('any', av) and every KeyValue ('kv') and AnyValue ('any') nested in it."""
    yield ("any", av)
    w = av.WhichOneof("value")
    if w == "array_value":
        for x in av.array_value.values:
            yield from any_values(x)
    elif w == "kvlist_value":
        for kv in av.kvlist_value.values:
            yield from key_values(kv)


def key_values(kv):
    """('kv', kv), and every KeyValue / AnyValue under it."""
    yield ("kv", kv)
    if kv.HasField("value"):
        yield from any_values(kv.value)


def attr_holders(req):
    """(context, message) for every message with attributes."""
    for rs in req.resource_spans:
        if rs.HasField("resource"):
            yield "resource", rs.resource
        for ss in rs.scope_spans:
            if ss.HasField("scope"):
                yield "scope", ss.scope
            for sp in ss.spans:
                yield "span", sp
                for ev in sp.events:
                    yield "event", ev
                for ln in sp.links:
                    yield "link", ln


def all_kvs(req):
    """Every KeyValue message, at any depth, and every AnyValue."""
    for _, m in attr_holders(req):
        for kv in m.attributes:
            yield from key_values(kv)


def count_spans(req):
    return sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)


def is_scalar(kv):
    if not kv.HasField("value"):
        return True
    w = kv.value.WhichOneof("value")
    if w in SCALAR_MEMBERS:
        return True
    if w == "array_value":
        return all(x.WhichOneof("value") in SCALAR_MEMBERS for x in kv.value.array_value.values)
    return False


def redact(name):
    for rx, rep in REDACT:
        name = rx.sub(rep, name)
    return name


class Oracle:
    def __init__(self, schema, legacy):
        self.schema = schema
        self.legacy = legacy
        self.allow = {ctx: set(keys) for ctx, keys in ALLOW.items()}

    def parse(self, data):
        req = self.schema.Request()
        req.ParseFromString(data)
        return req

    def schema_exact(self, data):
        """Input `data` as the official parser reads it, with what the codec
        drops whatever the processors are: unknown fields at any level and
        the two profiles-only fields (KeyValue.key_strindex,
        AnyValue.string_value_strindex). Raises when the parser refuses it."""
        req = self.parse(data)
        req.DiscardUnknownFields()
        for kind, m in list(all_kvs(req)):
            if kind == "kv":
                if self.schema.has_key_strindex:
                    m.ClearField("key_strindex")
            elif self.schema.has_value_strindex:
                m.ClearField("string_value_strindex")
        return req

    def expected(self, data):
        """(bytes spanfence must export for input `data`, its span count);
        raises when the official parser refuses `data`."""
        req = self.schema_exact(data)
        for ctx, m in attr_holders(req):
            removed = 0
            for i in range(len(m.attributes) - 1, -1, -1):
                kv = m.attributes[i]
                if kv.key in self.allow[ctx] and (self.legacy or is_scalar(kv)):
                    continue
                del m.attributes[i]
                removed += 1
            if removed:
                m.dropped_attributes_count = min(m.dropped_attributes_count + removed, U32_MAX)
            if ctx == "span":
                if m.HasField("status"):
                    m.status.message = ""
                if not self.legacy:
                    m.trace_state = ""
                    m.name = redact(m.name)
            elif ctx == "event" and not self.legacy:
                m.name = redact(m.name)
            elif ctx == "link" and not self.legacy:
                m.trace_state = ""
        return req.SerializeToString(), count_spans(req)

    def unknown_fields(self, data):
        """{message type (as the codec labels it: Span.Event): unknown
        fields the official parser keeps in input `data`}. Losing oneof
        members are gone after parsing, so this is a lower bound of what a
        decoder that reads every occurrence drops."""
        counts = {}
        todo = [self.parse(data)]
        while todo:
            m = todo.pop()
            n = len(unknown_field_set(m))
            if n:
                d = m.DESCRIPTOR
                label = d.full_name[len(d.file.package) + 1:]
                counts[label] = counts.get(label, 0) + n
            for fd, v in m.ListFields():
                if fd.message_type is not None:
                    todo += list(v) if fd.label == fd.LABEL_REPEATED else [v]
        return counts

    def canonical(self, out):
        """out parsed, its unknown fields dropped and serialized again (the
        canonical encoding of what it says), or None when it does not parse."""
        try:
            req = self.parse(out)
        except Exception:   # noqa: BLE001
            return None
        req.DiscardUnknownFields()
        return req.SerializeToString()

    def check_output(self, out):
        """What is wrong with exporter output `out` judged on its own: a list
        of (failure kind, detail)."""
        try:
            req = self.parse(out)
        except Exception as e:   # noqa: BLE001 (any parser error is the finding)
            return [("undecodable_output", str(e))]
        return self.check_schema_exact(out, req) + self.check_policy(req)

    def check_schema_exact(self, out, req):
        """What any output must be, with or without a transform: canonical,
        no unknown fields, no strindex, no spans under ResourceSpans 1000.
        `req` is `out` parsed (it is modified)."""
        probs = []
        again = req.SerializeToString()
        req.DiscardUnknownFields()
        known = req.SerializeToString()
        if known != again:
            probs.append(("unknown_fields_exported", "%d bytes of unknown fields" % (len(again) - len(known))))
        if again != out:
            probs.append(("not_canonical", "decoded and encoded again it is %d bytes, not %d (first "
                          "difference at byte %d)" % (len(again), len(out), first_diff(again, out))))
        for kind, m in all_kvs(req):
            if kind == "kv" and self.schema.has_key_strindex and m.key_strindex:
                probs.append(("strindex_exported", "key_strindex %d" % m.key_strindex))
            if kind == "any" and m.WhichOneof("value") == "string_value_strindex":
                probs.append(("strindex_exported", "string_value_strindex"))
        try:
            old = self.schema.OldRequest()
            old.ParseFromString(out)
            n = sum(len(ils.spans) for rs in old.resource_spans for ils in rs.instrumentation_library_spans)
            if n or any(len(rs.instrumentation_library_spans) for rs in old.resource_spans):
                probs.append(("old_schema_spans", "%d spans under ResourceSpans field 1000" % n))
        except Exception as e:   # noqa: BLE001
            probs.append(("old_schema_undecodable", str(e)))
        return probs

    def check_policy(self, req):
        """What the test's transform must have done to parsed output `req`:
        only allowlisted keys (scalars), no status message or trace_state,
        redacted names."""
        probs = []
        for ctx, m in attr_holders(req):
            for kv in m.attributes:
                if kv.key not in self.allow[ctx]:
                    probs.append(("secret_key_exported", "%s attribute %r" % (ctx, kv.key)))
                elif not self.legacy and not is_scalar(kv):
                    probs.append(("nonscalar_value_kept", "%s attribute %r holds %s" %
                                  (ctx, kv.key, kv.value.WhichOneof("value"))))
            if ctx == "span":
                if m.status.message:
                    probs.append(("status_message_exported", repr(m.status.message[:60])))
                if not self.legacy and m.trace_state:
                    probs.append(("trace_state_exported", "span " + repr(m.trace_state[:60])))
            if ctx == "link" and not self.legacy and m.trace_state:
                probs.append(("trace_state_exported", "link " + repr(m.trace_state[:60])))
            if ctx in ("span", "event") and not self.legacy and redact(m.name) != m.name:
                probs.append(("name_not_redacted", "%s name %r" % (ctx, m.name)))
        return probs


class PassthroughOracle(Oracle):
    """The oracle of a pipeline with no transform processor: the output is
    the input as the official parser reads it, unknown fields and the two
    profiles-only fields dropped, serialized; nothing else is removed,
    redacted or cleared. Outputs are judged by the schema checks alone."""

    def expected(self, data):
        req = self.schema_exact(data)
        return req.SerializeToString(), count_spans(req)

    def check_policy(self, req):
        return []


def unknown_field_set(m):
    try:
        from google.protobuf import unknown_fields     # protobuf >= 4.22
        return unknown_fields.UnknownFieldSet(m)
    except ImportError:
        return m.UnknownFields()


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))
