# tests/e2e/privacy/otlp_schema.py: the official OTLP trace schema for the
# oracle, as protobuf descriptors, from what CI has: no .proto file ships in
# any npm package we use, but @opentelemetry/otlp-transformer ships the code
# the OpenTelemetry JS maintainers generated with protobufjs (pbjs -t
# static-module) from the official opentelemetry-proto files. Its encode
# functions say, field by field, the number, the wire type, the writer
# method (the scalar type), the sub-message type and whether it repeats;
# its oneof getters and enum objects say the rest. This module reads that
# code as text (no node, nothing evaluated), builds one
# FileDescriptorProto per package (common, resource, trace, collector/trace)
# and, when the opentelemetry-proto mirror of a development session exists,
# checks every extracted field against its .proto files compiled by protoc.
#
# $SF_OTLP_PROTO_DIR, a directory holding opentelemetry/proto/**.proto,
# replaces the npm code (compiled by protoc). Nothing here is committed from
# the npm package or the mirror: both are read where they are, at test time.

import json
import os
import re
import subprocess

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FDP = descriptor_pb2.FieldDescriptorProto
NPM_PACKAGE = "@opentelemetry/otlp-transformer"
NPM_CODE = "build/src/generated/root.js"
# A development session's snapshot of open-telemetry/opentelemetry-proto:
# when it exists, a sanity check of the extraction (never its source).
# SF_OTLP_PROTO_MIRROR= (empty) skips the check.
MIRROR = os.environ.get("SF_OTLP_PROTO_MIRROR", "/work/.mirror/open-telemetry+opentelemetry-proto/repo")

# The packages the test needs, and the official file each one is in.
FILES = {
    "opentelemetry.proto.common.v1": "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry.proto.resource.v1": "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry.proto.trace.v1": "opentelemetry/proto/trace/v1/trace.proto",
    "opentelemetry.proto.collector.trace.v1": "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}
# The messages the test needs: ExportTraceServiceRequest and every message
# under it (the codec's 14 message types), and the gRPC answer.
REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
RESPONSE = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse"
NEEDED = [REQUEST, RESPONSE] + ["opentelemetry.proto." + n for n in (
    "trace.v1.ResourceSpans", "resource.v1.Resource", "common.v1.EntityRef", "trace.v1.ScopeSpans",
    "common.v1.InstrumentationScope", "trace.v1.Span", "trace.v1.Span.Event", "trace.v1.Span.Link",
    "trace.v1.Status", "common.v1.KeyValue", "common.v1.AnyValue", "common.v1.ArrayValue",
    "common.v1.KeyValueList")]

# Fields newer than the npm package's generated code: opentelemetry-proto
# v1.10.0 added them for profiles (a string table index instead of the
# string). A decoder that does not know them would keep the string_value a
# later string_value_strindex replaces (it is a member of AnyValue's oneof)
# and would not check their wire type, so the oracle must know them. Added
# only when the npm code lacks them; the mirror check covers them as well.
NEWER_FIELDS = [
    # (message, name, number, type, oneof)
    ("opentelemetry.proto.common.v1.KeyValue", "key_strindex", 3, FDP.TYPE_INT32, None),
    ("opentelemetry.proto.common.v1.AnyValue", "string_value_strindex", 8, FDP.TYPE_INT32, "value"),
]

# protobufjs Writer method -> (field type, wire type).
WRITERS = {
    "double": (FDP.TYPE_DOUBLE, 1), "float": (FDP.TYPE_FLOAT, 5), "int64": (FDP.TYPE_INT64, 0),
    "uint64": (FDP.TYPE_UINT64, 0), "int32": (FDP.TYPE_INT32, 0), "fixed64": (FDP.TYPE_FIXED64, 1),
    "fixed32": (FDP.TYPE_FIXED32, 5), "bool": (FDP.TYPE_BOOL, 0), "string": (FDP.TYPE_STRING, 2),
    "bytes": (FDP.TYPE_BYTES, 2), "uint32": (FDP.TYPE_UINT32, 0), "sfixed32": (FDP.TYPE_SFIXED32, 5),
    "sfixed64": (FDP.TYPE_SFIXED64, 1), "sint32": (FDP.TYPE_SINT32, 0), "sint64": (FDP.TYPE_SINT64, 0),
}
TYPE_NAMES = {v: k[len("TYPE_"):].lower() for k, v in FDP.Type.items()}

_TAG = r"writer\.uint32\(/\*\s*id (\d+), wireType (\d) =\*/\s*(\d+)\)"
RX_SCALAR = re.compile(_TAG + r"\.(\w+)\(message\.(\w+)(\[i\])?\);")
RX_MESSAGE = re.compile(r"\$root\.([\w.]+)\.encode\(message\.(\w+)(\[i\])?, " + _TAG +
                        r"\.fork\(\)\)\.ldelim\(\);")
RX_PACKED = re.compile(_TAG + r"\.fork\(\);\s*for \(var i = 0; i < message\.(\w+)\.length; \+\+i\)\s*"
                       r"writer\.(\w+)\(message\.(\w+)\[i\]\);\s*writer\.ldelim\(\);")
RX_GUARD = re.compile(r"if \(message\.(\w+) != null && ")
RX_JSDOC = re.compile(r"/\*\*(.*?)\*/", re.S)


class SchemaError(RuntimeError):
    pass


def snake(js_name):
    """protobufjs's camelCase undone: traceId -> trace_id."""
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), js_name)


def package_of(full):
    """opentelemetry.proto.trace.v1.Span.Event -> opentelemetry.proto.trace.v1"""
    parts = full.split(".")
    i = next(i for i, p in enumerate(parts) if p[:1].isupper())
    return ".".join(parts[:i])


# ---- the npm package's generated code ------------------------------------------------

def npm_root(source_dir):
    mods = os.path.join(source_dir, "tests", "e2e", "node_modules")
    pkg = os.path.join(mods, *NPM_PACKAGE.split("/"))
    code = os.path.join(pkg, NPM_CODE)
    if not os.path.exists(code):
        raise SchemaError("%s not found: the OTLP schema comes from %s's generated code "
                          "(cd tests/e2e && npm ci), or set SF_OTLP_PROTO_DIR" % (code, NPM_PACKAGE))
    with open(os.path.join(pkg, "package.json"), encoding="utf-8") as f:
        version = json.load(f)["version"]
    return code, version


def parse_generated(text):
    """{message: {"fields": [...], "oneofs": {...}}}, {enum: [(name, number)]},
    from protobufjs static-module code: each jsdoc block and the code up to
    the next one."""
    messages, enums, member_types = {}, {}, {}
    docs = list(RX_JSDOC.finditer(text))
    for k, d in enumerate(docs):
        doc = d.group(1)
        code = text[d.end():docs[k + 1].start() if k + 1 < len(docs) else len(text)]
        memberof = re.search(r"@memberof ([\w.]+)", doc)
        if "@enum {number}" in doc:
            name = re.search(r"@name ([\w.]+)", doc).group(1)
            vals = [(n, int(v)) for i, n, v in re.findall(
                r'values\[valuesById\[(-?\d+)\] = "(\w+)"\] = (-?\d+);', code)]
            if not vals:
                raise SchemaError("enum %s: no values found" % name)
            enums[name] = vals
            continue
        if not memberof:
            continue
        owner = memberof.group(1)
        m = re.search(r"@member \{([^}]*)\} (\w+)", doc)
        if m and "@instance" in doc:
            member_types[(owner, m.group(2))] = m.group(1).split("|")[0]
            og = re.search(r'Object\.defineProperty\((\w+)\.prototype, "(\w+)", \{\s*get: '
                           r'\$util\.oneOfGetter\(\$oneOfFields = \[([^\]]*)\]\)', code)
            if og:
                members = re.findall(r'"(\w+)"', og.group(3))
                messages.setdefault(owner, {"fields": [], "oneofs": {}})["oneofs"][og.group(2)] = members
        enc = re.search(r"(\w+)\.encode = function encode\(message, writer\) \{(.*?)\breturn writer;",
                        code, re.S)
        if enc:
            if enc.group(1) != owner.rsplit(".", 1)[1]:
                raise SchemaError("encode of %s documented as %s" % (enc.group(1), owner))
            messages.setdefault(owner, {"fields": [], "oneofs": {}})["fields"] = encode_fields(owner, enc.group(2))
    for (owner, js), t in member_types.items():
        if t in enums and owner in messages:
            for f in messages[owner]["fields"]:
                if f["js"] == js:
                    if f["type"] != FDP.TYPE_INT32:
                        raise SchemaError("%s.%s: enum %s written as %s" % (owner, js, t, TYPE_NAMES[f["type"]]))
                    f["type"], f["type_name"] = FDP.TYPE_ENUM, t
    return messages, enums


def encode_fields(owner, body):
    fields = []

    def add(js, num, wt, tagv, ftype, type_name, repeated, writer_wt):
        num, wt, tagv = int(num), int(wt), int(tagv)
        if tagv != (num << 3 | wt) or wt != writer_wt:
            raise SchemaError("%s.%s: tag %d, comment id %d wire type %d, the writer's wire type %d" %
                              (owner, js, tagv, num, wt, writer_wt))
        fields.append({"js": js, "name": snake(js), "number": num, "type": ftype,
                       "type_name": type_name, "repeated": repeated})

    for m in RX_PACKED.finditer(body):
        num, wt, tagv, js, method, js2 = m.groups()
        if method not in WRITERS or js != js2:
            raise SchemaError("%s.%s: packed writer %s" % (owner, js, method))
        add(js, num, wt, tagv, WRITERS[method][0], None, True, 2)
    body_rest = RX_PACKED.sub("", body)
    for m in RX_MESSAGE.finditer(body_rest):
        type_name, js, idx, num, wt, tagv = m.groups()
        add(js, num, wt, tagv, FDP.TYPE_MESSAGE, type_name, bool(idx), 2)
    for m in RX_SCALAR.finditer(body_rest):
        num, wt, tagv, method, js, idx = m.groups()
        if method not in WRITERS:
            raise SchemaError("%s.%s: writer method %s" % (owner, js, method))
        add(js, num, wt, tagv, WRITERS[method][0], None, bool(idx), WRITERS[method][1])
    guarded = RX_GUARD.findall(body)
    if sorted(guarded) != sorted(f["js"] for f in fields) or "Object.keys" in body:
        raise SchemaError("%s: encode writes %s, extracted %s (maps and other forms are not read)" %
                          (owner, sorted(guarded), sorted(f["js"] for f in fields)))
    if len({f["number"] for f in fields}) != len(fields):
        raise SchemaError("%s: a field number twice" % owner)
    return fields


def descriptors_from_npm(source_dir):
    """([FileDescriptorProto], origin, notes)"""
    code, version = npm_root(source_dir)
    with open(code, encoding="utf-8") as f:
        messages, enums = parse_generated(f.read())
    notes = []
    for owner, name, num, ftype, oneof in NEWER_FIELDS:
        msg = messages.get(owner)
        if msg is None:
            continue
        have = [f for f in msg["fields"] if f["number"] == num]
        if have:
            if have[0]["name"] != name or have[0]["type"] != ftype:
                raise SchemaError("%s field %d is %s %s in the npm code, %s %s expected" % (
                    owner, num, TYPE_NAMES[have[0]["type"]], have[0]["name"], TYPE_NAMES[ftype], name))
            continue
        js = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)
        msg["fields"].append({"js": js, "name": name, "number": num, "type": ftype, "type_name": None,
                              "repeated": False})
        if oneof:
            if oneof not in msg["oneofs"]:
                raise SchemaError("%s has no oneof %s in the npm code" % (owner, oneof))
            msg["oneofs"][oneof].append(js)
        notes.append("%s.%s = %d (%s%s)" % (owner.rsplit(".", 1)[1], name, num, TYPE_NAMES[ftype],
                                              ", oneof " + oneof if oneof else ""))
    fdps = build_files(messages, enums)
    origin = "%s %s (%s, protobufjs static code)" % (NPM_PACKAGE, version,
                                                      os.path.relpath(code, source_dir))
    return fdps, origin, notes


def build_files(messages, enums):
    """One FileDescriptorProto per package of FILES, proto3."""
    files = {}
    for pkg, path in FILES.items():
        fdp = descriptor_pb2.FileDescriptorProto(name=path, package=pkg, syntax="proto3")
        files[pkg] = fdp
    protos = {}     # full name -> DescriptorProto / EnumDescriptorProto

    def container(full):
        pkg = package_of(full)
        if pkg not in files:
            return None, None
        parent = full.rsplit(".", 1)[0]
        return files[pkg], (None if parent == pkg else protos.get(parent))

    # parents before their nested types: shorter names first
    for full in sorted(set(messages) | set(enums), key=lambda n: (n.count("."), n)):
        fdp, parent = container(full)
        if fdp is None:
            continue
        if parent is None and full.rsplit(".", 1)[0] != package_of(full):
            raise SchemaError("%s: its parent message is not in the generated code" % full)
        short = full.rsplit(".", 1)[1]
        if full in enums:
            e = (parent.enum_type if parent is not None else fdp.enum_type).add(name=short)
            for n, v in enums[full]:
                e.value.add(name=n, number=v)
            protos[full] = e
            continue
        d = (parent.nested_type if parent is not None else fdp.message_type).add(name=short)
        protos[full] = d
        msg = messages[full]
        oneof_of = {}
        real = [(o, ms) for o, ms in msg["oneofs"].items() if not o.startswith("_")]
        synthetic = [(o, ms) for o, ms in msg["oneofs"].items() if o.startswith("_")]
        for i, (o, ms) in enumerate(real + synthetic):
            d.oneof_decl.add(name=snake(o) if not o.startswith("_") else "_" + snake(o[1:]))
            for js in ms:
                oneof_of[js] = (i, o.startswith("_"))
        for f in sorted(msg["fields"], key=lambda f: f["number"]):
            fd = d.field.add(name=f["name"], number=f["number"], type=f["type"],
                             label=FDP.LABEL_REPEATED if f["repeated"] else FDP.LABEL_OPTIONAL)
            if f["type_name"]:
                fd.type_name = "." + f["type_name"]
                dep = FILES.get(package_of(f["type_name"]))
                if dep is None:
                    raise SchemaError("%s.%s: type %s outside the trace packages" % (full, f["name"], f["type_name"]))
                if dep != fdp.name and dep not in fdp.dependency:
                    fdp.dependency.append(dep)
            if f["js"] in oneof_of:
                fd.oneof_index, synth = oneof_of[f["js"]]
                if synth:
                    fd.proto3_optional = True
        missing = set(oneof_of) - {f["js"] for f in msg["fields"]}
        if missing:
            raise SchemaError("%s: oneof members %s are not written by encode" % (full, sorted(missing)))
    return order_files(list(files.values()))


def order_files(fdps):
    by = {f.name: f for f in fdps}
    out, seen = [], set()

    def visit(f):
        if f.name in seen:
            return
        seen.add(f.name)
        for d in f.dependency:
            if d in by:
                visit(by[d])
        out.append(f)
    for f in fdps:
        visit(f)
    return out


# ---- .proto files, compiled by protoc ---------------------------------------------------

def descriptors_from_protos(protos, scratch):
    """[FileDescriptorProto] of {relative path: text}, by protoc."""
    src = os.path.join(scratch, "src")
    for rel, text in protos.items():
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "w", encoding="utf-8") as f:
            f.write(text)
    out = os.path.join(scratch, "set.pb")
    subprocess.run(["protoc", "-I" + src, "--include_imports", "--descriptor_set_out=" + out] +
                   sorted(protos), check=True, cwd=src)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    return list(fds.file)


def proto_dir_files(d):
    missing = [rel for rel in FILES.values() if not os.path.exists(os.path.join(d, rel))]
    if missing:
        raise SchemaError("SF_OTLP_PROTO_DIR=%s lacks %s" % (d, ", ".join(missing)))
    return {rel: open(os.path.join(d, rel), encoding="utf-8").read() for rel in FILES.values()}


def mirror_files():
    """({relative path: text}, "mirror@commit") from the opentelemetry-proto
    mirror's HEAD, or (None, None) when there is no mirror."""
    if not MIRROR or not os.path.isdir(MIRROR):
        return None, None
    found = {}
    for rel in FILES.values():
        found[rel] = subprocess.run(["git", "-C", MIRROR, "show", "HEAD:" + rel], check=True,
                                    capture_output=True, text=True).stdout
    head = subprocess.run(["git", "-C", MIRROR, "describe", "--tags", "--always", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    return found, "%s@%s" % (MIRROR, head)


# ---- comparing two schemas -----------------------------------------------------------

def flatten(fdps):
    """{full message name: {number: (name, label, type, type_name, oneof, proto3_optional)}},
    {full enum name: {number: name}}"""
    msgs, enums = {}, {}

    def walk_msg(prefix, d):
        full = prefix + "." + d.name
        fields = {}
        for f in d.field:
            oneof = d.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            fields[f.number] = (f.name, FDP.Label.Name(f.label), TYPE_NAMES[f.type],
                                f.type_name.lstrip("."), oneof, f.proto3_optional)
        msgs[full] = fields
        for n in d.nested_type:
            walk_msg(full, n)
        for e in d.enum_type:
            enums[full + "." + e.name] = {v.number: v.name for v in e.value}
    for fdp in fdps:
        if fdp.package not in FILES:
            continue
        for d in fdp.message_type:
            walk_msg(fdp.package, d)
        for e in fdp.enum_type:
            enums[fdp.package + "." + e.name] = {v.number: v.name for v in e.value}
    return msgs, enums


def compare(ours, reference):
    """(mismatches: what we extracted that the reference says otherwise,
    newer: what only the reference has)."""
    om, oe = flatten(ours)
    rm, re_ = flatten(reference)
    bad, newer = [], []
    for full, fields in sorted(om.items()):
        if full not in rm:
            bad.append("message %s: not in the reference" % full)
            continue
        for num, f in sorted(fields.items()):
            r = rm[full].get(num)
            if r != f:
                bad.append("%s field %d: extracted %s, reference %s" % (full, num, fmt_field(f), fmt_field(r)))
        for num in sorted(set(rm[full]) - set(fields)):
            newer.append("%s field %d: %s" % (full, num, fmt_field(rm[full][num])))
    for full in sorted(set(rm) - set(om)):
        newer.append("message %s (%d fields)" % (full, len(rm[full])))
    for full, vals in sorted(oe.items()):
        if re_.get(full) is None:
            bad.append("enum %s: not in the reference" % full)
        elif any(re_[full].get(n) != v for n, v in vals.items()):
            bad.append("enum %s: extracted %s, reference %s" % (full, vals, re_[full]))
        elif set(re_[full]) - set(vals):
            newer.append("enum %s values %s" % (full, sorted(set(re_[full]) - set(vals))))
    for full in sorted(set(re_) - set(oe)):
        newer.append("enum %s" % full)
    return bad, newer


def fmt_field(f):
    if f is None:
        return "nothing"
    name, label, ftype, type_name, oneof, opt = f
    return "%s%s %s%s%s" % ("repeated " if label == "LABEL_REPEATED" else "", type_name or ftype, name,
                            " (oneof %s)" % oneof if oneof else "", " (optional)" if opt else "")


def count(fdps):
    msgs, enums = flatten(fdps)
    return len(msgs), sum(len(f) for f in msgs.values()), len(enums)


# ---- message classes ------------------------------------------------------------------

class Loaded:
    """The message classes of a descriptor set, by full name."""

    def __init__(self, fdps):
        self.pool = descriptor_pool.DescriptorPool()
        for fdp in fdps:
            self.pool.AddSerializedFile(fdp.SerializeToString())
        self.fdps = fdps
        self._factory = None if hasattr(message_factory, "GetMessageClass") else \
            message_factory.MessageFactory(self.pool)

    def descriptor(self, full):
        try:
            return self.pool.FindMessageTypeByName(full)
        except KeyError:
            raise SchemaError("message %s missing from the schema" % full) from None

    def cls(self, full):
        d = self.descriptor(full)
        if self._factory is None:
            return message_factory.GetMessageClass(d)
        return self._factory.GetPrototype(d)


def reachable(loaded, root=REQUEST):
    """Names (relative to their package, as the codec labels them) of the
    messages reachable from `root`."""
    seen = {}
    todo = [loaded.descriptor(root)]
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen[d.full_name] = d.full_name[len(d.file.package) + 1:]
        todo += [f.message_type for f in d.fields if f.message_type is not None]
    return sorted(seen.values())


def load(source_dir, scratch, log=print):
    """(Loaded official schema, origin) from $SF_OTLP_PROTO_DIR or the npm
    code, cross-checked against the mirror when there is one."""
    os.makedirs(scratch, exist_ok=True)
    d = os.environ.get("SF_OTLP_PROTO_DIR")
    if d:
        fdps = descriptors_from_protos(proto_dir_files(d), os.path.join(scratch, "override"))
        origin, notes = "SF_OTLP_PROTO_DIR=%s (protoc)" % d, []
    else:
        fdps, origin, notes = descriptors_from_npm(source_dir)
    n_msg, n_field, n_enum = count(fdps)
    log("OTLP schema from %s: %d files, %d messages, %d fields, %d enums" %
        (origin, len([f for f in fdps if f.package in FILES]), n_msg, n_field, n_enum))
    for n in notes:
        log("  added, newer than the npm code (opentelemetry-proto v1.10.0): " + n)
    protos, where = mirror_files()
    if protos is not None:
        bad, newer = compare(fdps, descriptors_from_protos(protos, os.path.join(scratch, "mirror")))
        for x in newer:
            log("  only in the mirror (%s): %s" % (where, x))
        for x in bad:
            log("  MISMATCH with the mirror (%s): %s" % (where, x))
        if bad:
            raise SchemaError("%d fields of the schema from %s disagree with the mirror's .proto files" %
                              (len(bad), origin))
        log("  every extracted field matches the mirror's .proto files (%s)" % where)
    loaded = Loaded(fdps)
    for full in NEEDED:
        loaded.descriptor(full)
    return loaded, origin
