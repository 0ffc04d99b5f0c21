#!/usr/bin/python3
"""tools/gen_otlp_schema.py: writes sf_otlp_schema.h, the OTLP codec's
tables for the three signals, from the one schema source: the OTLP .proto
files of pipeline/proto (as protoc's descriptor set) joined with the fields
files (pipeline/proto/trace_fields.txt, logs_fields.txt, metrics_fields.txt,
read as one, in that order), which decide for every field what the codec
does with it and, for every string- or bytes-bearing field, which rule
governs what of it may leave.

    gen_otlp_schema.py DESCRIPTOR_SET OUT_H FIELDS_TXT...

Fails (exit 1, one line per fault, file:line first) when a field of a
message reachable from ExportTraceServiceRequest, ExportLogsServiceRequest
or ExportMetricsServiceRequest has no row, when a string or bytes field has
no rule (or a scalar one has one), when a row names a field or message the
schema lacks, when a rule names an unknown governed field, when a governed
field does not say whether a statement's set(...) changes it (and if so in
which context and list, and how declared mode asks for it), or when a message
the tables walk has more than one oneof. Needs Debian's python3-protobuf
(tools/setup.sh installs it)."""

import re
import sys

from google.protobuf import descriptor_pb2

FD = descriptor_pb2.FieldDescriptorProto
ROOTS = ("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
         "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest",
         "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest")
# `items` is `spans` for the other signals: the field holding what is counted
ROLES = {"plain": "R_PLAIN", "attrs": "R_ATTRS", "dropped": "R_DROPPED", "id16": "R_ID16",
         "id8": "R_ID8", "spans": "R_SPANS", "items": "R_SPANS", "count": "R_COUNT"}
CONTEXTS = ("RESOURCE", "SCOPE", "SPAN", "SPANEVENT", "LINK", "LOG", "METRIC", "DATAPOINT")
# the statement lists a governed field's set(...) is said in (sf_signal; all:
# every list, SF_SIGNAL_COUNT), with the contexts each list's statements name
LISTS = {"traces": ("TRACES", ("SPAN", "SPANEVENT", "LINK")),
         "logs": ("LOGS", ("LOG",)),
         "metrics": ("METRICS", ("METRIC", "DATAPOINT")),
         "all": ("COUNT", ("RESOURCE", "SCOPE"))}
GOVERNS = re.compile(r"governs\s+(\S+)\s+(\S+)(?:\s+(\S+))?(?:\s+(.*?))?\s*$")
# wire types of the codec (sf_otlp_wire.c F_*), by descriptor type
CTYPES = {FD.TYPE_UINT32: "F_UINT32", FD.TYPE_INT32: "F_INT32", FD.TYPE_ENUM: "F_INT32",
          FD.TYPE_INT64: "F_INT64", FD.TYPE_UINT64: "F_INT64", FD.TYPE_BOOL: "F_BOOL",
          FD.TYPE_FIXED32: "F_FIXED32", FD.TYPE_FIXED64: "F_FIXED64",
          FD.TYPE_SFIXED64: "F_FIXED64", FD.TYPE_DOUBLE: "F_FIXED64",
          FD.TYPE_SINT32: "F_SINT32", FD.TYPE_STRING: "F_STRING", FD.TYPE_BYTES: "F_BYTES",
          FD.TYPE_MESSAGE: "F_MSG"}
LATER_TYPES = {"int32": FD.TYPE_INT32, "uint32": FD.TYPE_UINT32, "string": FD.TYPE_STRING}
TEXT = (FD.TYPE_STRING, FD.TYPE_BYTES)
ANY = "opentelemetry.proto.common.v1.AnyValue"
# the messages whose AnyValues are attribute values or their elements
VALUE_HOLDERS = ("opentelemetry.proto.common.v1.KeyValue", "opentelemetry.proto.common.v1.ArrayValue")

faults = []


def fault(where, text):
    faults.append("%s: %s" % (where, text))


def c_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def read_governs(where, line, governs):
    """A governs line: <F> <context>.<path> and the decision, the list
    whose set(<path>, ...) changes it and the statement declared mode asks
    for, or '-': no set(...) changes it as a field (a cap, a check, or a
    statement of its own)."""
    m = GOVERNS.match(line.split("#", 1)[0].strip())
    if m is None:
        fault(where, "cannot read this line")
        return
    f, name, lst, declared = m.groups()
    ctx, _, path = name.partition(".")
    if lst is None:
        fault(where, "governed field '%s' has no decision: write the statement list whose "
              "set(...) changes it (%s) and the statement declared mode asks for, or '-'"
              % (f, ", ".join(LISTS)))
        return
    if lst == "-":
        if declared:
            fault(where, "governed field '%s' is changed by no set(...) ('-'): no statement "
                  "follows" % f)
        governs.append((f, name, None))
        return
    if lst not in LISTS:
        fault(where, "unknown statement list '%s' for '%s' (%s, or -)" % (lst, f, ", ".join(LISTS)))
        return
    if ctx.upper() not in LISTS[lst][1] or not path:
        fault(where, "'%s' is not <context>.<path> with a context of %s (%s)"
              % (name, lst, ", ".join(c.lower() for c in LISTS[lst][1])))
        return
    if not declared:
        fault(where, "governed field '%s' has no statement declared mode asks for" % f)
        return
    for g, other, d in governs:
        if d is not None and other == name:
            fault(where, "set(%s, ...) in the %s context is '%s' already" % (path, ctx, g))
            return
    governs.append((f, name, (ctx.upper(), path, LISTS[lst][0], declared)))


def json_name(snake):
    """protobuf's lowerCamelCase JSON name of a field."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), snake)


def c_descriptor(full):
    """The name protoc-c gives a message's descriptor: each part of the
    full name in lower case, an underscore before an upper-case letter that
    follows a lower-case one or a digit, parts joined by '__'."""
    return "__".join(re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", part).lower()
                     for part in full.split(".")) + "__descriptor"


class Field:
    def __init__(self, name, number, ftype, repeated, type_name, oneof, later=False,
                 presence_only=False):
        self.name, self.number, self.type = name, number, ftype
        self.repeated, self.type_name, self.oneof, self.later = repeated, type_name, oneof, later
        # a proto3 `optional` (a synthetic oneof of one member): presence, no choice
        self.presence_only = presence_only
        self.role = self.rule = None
        self.where = None

    def flags(self):
        """The codec's FL_* bits: presence (a oneof member or an `optional`
        is written even when 0), the oneof whose last member set wins, packed
        (a repeated number)."""
        fl = []
        if self.oneof is not None:
            fl.append("FL_PRESENCE")
            if not self.presence_only:
                fl.append("FL_ONEOF")
        if self.repeated and self.type not in (FD.TYPE_STRING, FD.TYPE_BYTES, FD.TYPE_MESSAGE):
            fl.append("FL_PACKED")
        return " | ".join(fl) if fl else "0"


def load_schema(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    msgs = {}

    def walk(prefix, mt):
        full = prefix + "." + mt.name
        fields = {}
        members = {}
        for fd in mt.field:
            if fd.HasField("oneof_index"):
                members[fd.oneof_index] = members.get(fd.oneof_index, 0) + 1
        for fd in mt.field:
            oneof = mt.oneof_decl[fd.oneof_index].name if fd.HasField("oneof_index") else None
            # proto3 `optional`, or the synthetic oneof it stands for
            # (metrics.proto writes them so for protoc-c: see its header)
            synthetic = oneof is not None and (fd.proto3_optional or (
                oneof == "_" + fd.name and members[fd.oneof_index] == 1))
            fields[fd.name] = Field(fd.name, fd.number, fd.type, fd.label == FD.LABEL_REPEATED,
                                    fd.type_name.lstrip("."), oneof, presence_only=synthetic)
        msgs[full] = fields
        for nested in mt.nested_type:
            walk(full, nested)

    for fp in fds.file:
        for mt in fp.message_type:
            walk(fp.package, mt)
    return msgs


def reachable(msgs, roots=ROOTS):
    seen, todo = [], list(roots)
    while todo:
        m = todo.pop(0)
        if m in seen or m not in msgs:
            continue
        seen.append(m)
        todo.extend(f.type_name for f in msgs[m].values() if f.type == FD.TYPE_MESSAGE)
    return seen


def main():
    if len(sys.argv) < 4:
        print("usage: gen_otlp_schema.py DESCRIPTOR_SET OUT_H FIELDS_TXT...", file=sys.stderr)
        sys.exit(2)
    desc, out_path, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    rules_path = " ".join(paths)
    msgs = load_schema(desc)
    governs, order, enum_of, ctx_of, own = [], [], {}, {}, set()
    short = {}
    rows = []
    lines = [("%s:%d" % (p, n), line) for p in paths for n, line in enumerate(open(p), 1)]
    for where, line in lines:
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        kind, args = words[0], words[1:]
        if kind == "governs":
            read_governs(where, line, governs)
        elif kind == "message" and len(args) in (3, 4):
            full, enum, ctx = args[:3]
            if full not in msgs:
                fault(where, "no message '%s' in the schema" % full)
                continue
            if ctx != "-" and ctx not in CONTEXTS:
                fault(where, "unknown context '%s'" % ctx)
            order.append(full)
            enum_of[full], ctx_of[full] = enum, ctx
            short[full.split(".")[-1]] = full
            if len(args) == 4:
                if args[3] != "own":
                    fault(where, "unknown flag '%s'" % args[3])
                own.add(full)
        elif kind in ("field", "later"):
            rows.append((where, kind, args))
        else:
            fault(where, "cannot read this line")
    gov_names = {g for g, _, _ in governs}
    for where, kind, args in rows:
        want = 3 if kind == "field" else 6
        if len(args) != want:
            fault(where, "a %s row has %d columns after '%s', not %d" % (kind, want, kind, len(args)))
            continue
        msg, _, fname = args[0].partition(".")
        full = short.get(msg)
        if full is None:
            fault(where, "no message row for '%s'" % msg)
            continue
        if kind == "later":
            number, tname, oneof, role, rule = args[1:]
            if tname not in LATER_TYPES:
                fault(where, "unknown type '%s'" % tname)
                continue
            if fname in msgs[full]:
                fault(where, "'%s' is in the schema now: make it a field row" % args[0])
                continue
            msgs[full][fname] = Field(fname, int(number), LATER_TYPES[tname], False, "",
                                      None if oneof == "-" else oneof, later=True)
        else:
            role, rule = args[1:]
        f = msgs[full].get(fname)
        if f is None:
            fault(where, "no field '%s' in %s" % (fname, full))
            continue
        if f.role is not None:
            fault(where, "'%s' decided twice (first at %s)" % (args[0], f.where))
            continue
        if role not in ROLES:
            fault(where, "unknown role '%s'" % role)
        f.role, f.rule, f.where = role, rule, where
        if f.type not in CTYPES:
            fault(where, "'%s' has a type the codec does not read (%d)" % (args[0], f.type))
        if f.type in TEXT:
            if rule == "-":
                fault(where, "string/bytes field '%s' needs a rule" % args[0])
            elif rule in ("key", "value", "id"):
                pass
            elif rule.split(":", 1)[0] in ("field", "within") and rule.split(":", 1)[-1] in gov_names:
                pass
            else:
                fault(where, "unknown rule '%s' for '%s'" % (rule, args[0]))
        elif f.type == FD.TYPE_MESSAGE and rule.startswith("field:") and rule[6:] in gov_names:
            pass                # a message of strings the edit governs whole (entity_refs),
                                # or whose occurrences it caps (events, links)
        elif f.repeated and f.type in (FD.TYPE_DOUBLE, FD.TYPE_FIXED64) and \
                rule.startswith("field:") and rule[6:] in gov_names:
            pass                # numbers the edit checks (a histogram's buckets)
        elif role == "count":
            # the dropped count of a capped field: it says `of:<F>`, F a
            # repeated message field of the same message, before it
            capped = [g for g in msgs[full].values()
                      if g.rule == "field:" + rule[3:] and g.repeated and g.number < f.number]
            if not rule.startswith("of:") or rule[3:] not in gov_names or not capped:
                fault(where, "count field '%s' needs 'of:<F>', F a repeated field before it "
                      "in the same message (rows above)" % args[0])
        elif f.type_name == ANY and full not in VALUE_HOLDERS:
            # an attribute's value leaves by its key's rule; any other value
            # (a log body) carries text no key governs
            fault(where, "value field '%s' needs a rule: no attribute key governs it" % args[0])
        elif rule != "-":
            fault(where, "'%s' carries no text: its rule is '-', not '%s'" % (args[0], rule))
    for full in reachable(msgs):
        if full not in enum_of:
            fault(rules_path, "message '%s' has no row" % full)
            continue
        choices = {f.oneof for f in msgs[full].values() if f.oneof and not f.presence_only}
        if len(choices) > 1 and full not in own:
            fault(rules_path, "message '%s' has %d oneofs: the codec walks one" % (full, len(choices)))
        for f in msgs[full].values():
            if f.role is None:
                what = "string/bytes field" if f.type in TEXT else "field"
                fault(rules_path, "%s '%s.%s' (number %d) has no decision: add a row saying which "
                      "rule governs it" % (what, full.split(".")[-1], f.name, f.number))
    for full in order:
        if len(json_fields(msgs, full)) > 64:
            fault(rules_path, "message '%s' has more than 64 fields: the JSON codec's set of "
                  "fields seen has 64 bits" % full)
    traces = set(reachable(msgs, ROOTS[:1]))
    for full in traces & set(reachable(msgs, ROOTS[1:])):
        if json_order(msgs, full, traces) != json_fields(msgs, full):
            fault(rules_path, "message '%s' is shared by the signals and declares its fields out "
                  "of number order: the JSON order would differ by signal" % full)
    if faults:
        for line in faults:
            print(line, file=sys.stderr)
        sys.exit(1)
    write(out_path, msgs, order, enum_of, ctx_of, own, governs, rules_path, traces)


def json_fields(msgs, full):
    """A message's fields as protobuf-c's descriptor holds them: those of
    the .proto files (not the later schema's), by field number."""
    return sorted((f for f in msgs[full].values() if not f.later), key=lambda f: f.number)


def json_order(msgs, full, traces):
    """The order JSON members are written in: the .proto files' for the
    trace request's messages, field numbers' for the others (each as the
    codec of its signal always wrote them; main() refuses a message both
    reach whose two orders differ)."""
    if full in traces:
        return [f for f in msgs[full].values() if not f.later]
    return json_fields(msgs, full)


def section(o, name):
    """Open a part of the header only its one includer defines
    SF_OTLP_SCHEMA_<name> for, once (it is outside the include guard)."""
    o.append("#if defined(SF_OTLP_SCHEMA_%s) && !defined(SF_OTLP_SCHEMA_%s_DONE)" % (name, name))
    o.append("#define SF_OTLP_SCHEMA_%s_DONE" % name)


def write(out_path, msgs, order, enum_of, ctx_of, own, governs, rules_path, traces):
    o = []
    o.append("/* sf_otlp_schema.h: GENERATED by tools/gen_otlp_schema.py from the OTLP .proto")
    o.append(" * files and %s; do not edit. */" % " ".join(p.split("/")[-1] for p in rules_path.split()))
    o.append("#ifndef SF_OTLP_SCHEMA_H")
    o.append("#define SF_OTLP_SCHEMA_H")
    o.append("")
    o.append("/* X(ENUM, label): the message types of the schema */")
    o.append("#define SF_OTLP_MSG_MAP(X) \\")
    for i, full in enumerate(order):
        label = full.split(".v1.", 1)[-1]
        o.append("    X(%s, \"%s\")%s" % (enum_of[full], label, " \\" if i + 1 < len(order) else ""))
    o.append("")
    o.append("/* X(ENUM, name): the fields an edit can govern */")
    o.append("#define SF_OTLP_FIELD_MAP(X) \\")
    for i, (g, name, _) in enumerate(governs):
        o.append("    X(%s, \"%s\")%s" % (g, name, " \\" if i + 1 < len(governs) else ""))
    o.append("")
    o.append("/* field numbers and names, and the JSON names of the fields the .proto files have */")
    for full in order:
        e = enum_of[full]
        for f in sorted(msgs[full].values(), key=lambda f: f.number):
            up = f.name.upper()
            o.append("#define SF_OTLP_NUM_%s_%s %d" % (e, up, f.number))
            o.append("#define SF_OTLP_NAME_%s_%s \"%s\"" % (e, up, f.name))
            if not f.later:
                o.append("#define SF_OTLP_JSON_%s_%s \"%s\"" % (e, up, json_name(f.name)))
    o.append("")
    o.append("#endif")
    o.append("")
    # the wire codec's tables: fdesc/mdesc, F_*, R_* are sf_otlp_wire.c's
    section(o, "WIRE")
    for full in order:
        e = enum_of[full]
        o.append("static const fdesc sf_otlp_f_%s[] = {" % e.lower())
        for f in sorted(msgs[full].values(), key=lambda f: f.number):
            child = "SF_OTLP_MSG_" + enum_of[f.type_name] if f.type == FD.TYPE_MESSAGE else "0"
            gov = "0"
            if f.rule and (f.rule.startswith("field:") or f.rule.startswith("of:")):
                gov = "SF_OTLP_FIELD_" + f.rule.split(":", 1)[1]
            o.append("    [%d] = { %s, %d, %s, %s, %s, %s },   /* %s%s: %s */" % (
                f.number, CTYPES[f.type], 1 if f.repeated else 0, ROLES[f.role], child, gov,
                f.flags(), f.name, " (later schema)" if f.later else "", f.rule))
        o.append("};")
    o.append("")
    o.append("/* the longest table schema[] has (the largest field number + 1) */")
    o.append("#define SF_OTLP_TABLE_MAX %d" % max(max(f.number for f in msgs[m].values()) + 1
                                                  for m in order if m not in own))
    o.append("static const mdesc schema[SF_OTLP_MSG_COUNT] = {")
    for full in order:
        e = enum_of[full]
        if full in own:
            o.append("    /* %s: read by its own function */" % e)
            continue
        fields = msgs[full].values()
        dropped = [f.number for f in fields if f.role == "dropped"]
        names = [f.number for f in fields if f.rule in ("field:SPAN_NAME", "field:EVENT_NAME")]
        ctx = "SF_OTLP_" + ctx_of[full] if ctx_of[full] != "-" else "-1"
        oneof = sum(1 << f.number for f in fields if f.oneof and not f.presence_only)
        o.append("    [SF_OTLP_MSG_%s] = { sizeof(sf_otlp_f_%s) / sizeof(fdesc), sf_otlp_f_%s, %s, %d, %d, 0x%xu },"
                 % (e, e.lower(), e.lower(), ctx, dropped[0] if dropped else 0,
                    names[0] if names else 0, oneof))
    o.append("};")
    o.append("#endif")
    o.append("")
    # the governed fields a statement's set(...) changes
    section(o, "SET")
    o.append("typedef struct sf_otlp_set_field {")
    o.append("    sf_otlp_field field;")
    o.append("    sf_otlp_ctx ctx;            /* the context whose statements say it */")
    o.append("    const char *path;           /* set(<path>, ...) */")
    o.append("    sf_signal list;             /* the statement list, SF_SIGNAL_COUNT: every one */")
    o.append("    const char *declared;       /* the statement declared mode asks for */")
    o.append("} sf_otlp_set_field;")
    o.append("static const sf_otlp_set_field sf_otlp_set_fields[] = {")
    for g, _, d in governs:
        if d is not None:
            ctx, path, lst, declared = d
            o.append("    { SF_OTLP_FIELD_%s, SF_OTLP_%s, %s, SF_SIGNAL_%s,"
                     % (g, ctx, c_string(path), lst))
            o.append("      %s }," % c_string(declared))
    o.append("};")
    o.append("#endif")
    o.append("")
    # the JSON codec's table: per message its protobuf-c descriptor, per
    # field its JSON names and form, and the order members are written
    section(o, "JSON")
    o.append("typedef struct sf_otlp_json_field {")
    o.append("    const char *camel;          /* the name written and reported */")
    o.append("    const char *snake;          /* also read; NULL if the same */")
    o.append("    unsigned number;            /* the field number (the descriptor's id) */")
    o.append("    int child;                  /* a message field's sf_otlp_msg, else -1 */")
    o.append("    unsigned hex;               /* a trace or span id: its bytes, as hex */")
    o.append("} sf_otlp_json_field;")
    o.append("typedef struct sf_otlp_json_msg {")
    o.append("    const ProtobufCMessageDescriptor *desc;")
    o.append("    const sf_otlp_json_field *fields;   /* desc->fields[i] is fields[i] */")
    o.append("    const unsigned char *order;         /* indexes of fields, in the order written */")
    o.append("    unsigned n_fields;")
    o.append("} sf_otlp_json_msg;")
    for full in order:
        e = enum_of[full].lower()
        fields = json_fields(msgs, full)
        o.append("static const sf_otlp_json_field sf_otlp_jf_%s[] = {" % e)
        for f in fields:
            camel = json_name(f.name)
            snake = "NULL" if camel == f.name else c_string(f.name)
            child = ("SF_OTLP_MSG_" + enum_of[f.type_name]) if f.type == FD.TYPE_MESSAGE else "-1"
            hexb = {"id16": 16, "id8": 8}.get(f.role, 0)
            o.append("    { %s, %s, %d, %s, %d }," % (c_string(camel), snake, f.number, child, hexb))
        o.append("};")
        o.append("static const unsigned char sf_otlp_jo_%s[] = { %s };"
                 % (e, ", ".join(str(fields.index(f)) for f in json_order(msgs, full, traces))))
    o.append("static const sf_otlp_json_msg sf_otlp_json_msgs[SF_OTLP_MSG_COUNT] = {")
    for full in order:
        e = enum_of[full]
        o.append("    [SF_OTLP_MSG_%s] = { &%s, sf_otlp_jf_%s, sf_otlp_jo_%s, %d },"
                 % (e, c_descriptor(full), e.lower(), e.lower(), len(json_fields(msgs, full))))
    o.append("};")
    o.append("#endif")
    with open(out_path + ".tmp", "w") as f:
        f.write("\n".join(o) + "\n")
    import os
    os.replace(out_path + ".tmp", out_path)


if __name__ == "__main__":
    main()
