# tests/e2e/privacy/wire.py: a tiny protobuf wire encoder of our own, so the
# differential test can write bytes no SDK makes (non-minimal varints, groups,
# repeated singular fields, fields out of order, wrong wire types), and the
# OTLP trace schema as the generator sees it (field number -> name and type).
# It shares no code with spanfence nor with the official protobuf runtime.

import struct

MASK64 = (1 << 64) - 1
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5


def varint(v, width=None):
    """v as a base-128 varint (negatives as their 64-bit two's complement),
    padded with 0x80 bytes to `width` bytes when width is larger than the
    minimal encoding (a non-minimal but valid encoding)."""
    v &= MASK64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            break
    if width is not None and width > len(out):
        out[-1] |= 0x80
        out += b"\x80" * (width - len(out) - 1) + b"\x00"
    return bytes(out)


def varint_len(v):
    return len(varint(v))


def tag(num, wt, width=None):
    return varint((num << 3) | wt, width)


class F:
    """One field occurrence. val: int (VARINT, I64, I32), bytes or M (LEN),
    list of F (SGROUP: the group's body; the END_GROUP tag is added).
    tw/lw/vw: byte widths of the tag, length and value varints (None:
    minimal). raw: the field's complete bytes, used as they are."""
    __slots__ = ("num", "wt", "val", "tw", "lw", "vw", "raw")

    def __init__(self, num, wt, val=None, raw=None):
        self.num, self.wt, self.val, self.raw = num, wt, val, raw
        self.tw = self.lw = self.vw = None


class M:
    """One message occurrence: its kind (a SCHEMA key) and its fields in
    wire order."""
    __slots__ = ("kind", "fields")

    def __init__(self, kind, fields=None):
        self.kind = kind
        self.fields = fields if fields is not None else []


def enc_field(f):
    if f.raw is not None:
        return f.raw
    t = tag(f.num, f.wt, f.tw)
    if f.wt == VARINT:
        return t + varint(f.val, f.vw)
    if f.wt == I64:
        return t + struct.pack("<Q", f.val & MASK64)
    if f.wt == I32:
        return t + struct.pack("<I", f.val & 0xFFFFFFFF)
    if f.wt == LEN:
        body = enc(f.val) if isinstance(f.val, M) else bytes(f.val)
        return t + varint(len(body), f.lw) + body
    if f.wt == SGROUP:
        return t + b"".join(enc_field(x) for x in f.val) + tag(f.num, EGROUP)
    raise ValueError("wire type %d" % f.wt)


def enc(m):
    return b"".join(enc_field(f) for f in m.fields)


# ---- the OTLP trace schema (opentelemetry-proto, trace v1), by message kind:
# field number -> (name, type, repeated). A type is a message kind or one of
# the scalar types below.
SCALAR_WT = {
    "string": LEN, "bytes": LEN, "id16": LEN, "id8": LEN,
    "uint32": VARINT, "int32": VARINT, "enum": VARINT, "int64": VARINT, "bool": VARINT,
    "double": I64, "fixed64": I64, "fixed32": I32,
}

SCHEMA = {
    "request": {1: ("resource_spans", "rs", True)},
    "rs": {1: ("resource", "resource", False), 2: ("scope_spans", "ss", True),
           3: ("schema_url", "string", False)},
    "resource": {1: ("attributes", "kv", True), 2: ("dropped_attributes_count", "uint32", False),
                 3: ("entity_refs", "entity", True)},
    "ss": {1: ("scope", "scope", False), 2: ("spans", "span", True),
           3: ("schema_url", "string", False)},
    "scope": {1: ("name", "string", False), 2: ("version", "string", False),
              3: ("attributes", "kv", True), 4: ("dropped_attributes_count", "uint32", False)},
    "span": {1: ("trace_id", "id16", False), 2: ("span_id", "id8", False),
             3: ("trace_state", "string", False), 4: ("parent_span_id", "id8", False),
             5: ("name", "string", False), 6: ("kind", "enum", False),
             7: ("start_time_unix_nano", "fixed64", False), 8: ("end_time_unix_nano", "fixed64", False),
             9: ("attributes", "kv", True), 10: ("dropped_attributes_count", "uint32", False),
             11: ("events", "event", True), 12: ("dropped_events_count", "uint32", False),
             13: ("links", "link", True), 14: ("dropped_links_count", "uint32", False),
             15: ("status", "status", False), 16: ("flags", "fixed32", False)},
    "event": {1: ("time_unix_nano", "fixed64", False), 2: ("name", "string", False),
              3: ("attributes", "kv", True), 4: ("dropped_attributes_count", "uint32", False)},
    "link": {1: ("trace_id", "id16", False), 2: ("span_id", "id8", False),
             3: ("trace_state", "string", False), 4: ("attributes", "kv", True),
             5: ("dropped_attributes_count", "uint32", False), 6: ("flags", "fixed32", False)},
    "status": {2: ("message", "string", False), 3: ("code", "enum", False)},
    "kv": {1: ("key", "string", False), 2: ("value", "any", False), 3: ("key_strindex", "int32", False)},
    "any": {1: ("string_value", "string", False), 2: ("bool_value", "bool", False),
            3: ("int_value", "int64", False), 4: ("double_value", "double", False),
            5: ("array_value", "array", False), 6: ("kvlist_value", "kvlist", False),
            7: ("bytes_value", "bytes", False), 8: ("string_value_strindex", "int32", False)},
    "array": {1: ("values", "any", True)},
    "kvlist": {1: ("values", "kv", True)},
    "entity": {1: ("schema_url", "string", False), 2: ("type", "string", False),
               3: ("id_keys", "string", True), 4: ("description_keys", "string", True)},
}

LEVELS = ["request", "rs", "resource", "ss", "scope", "span", "event", "link", "status",
          "kv", "any", "array", "kvlist", "entity"]

LEVEL_NAMES = {
    "request": "ExportTraceServiceRequest", "rs": "ResourceSpans", "resource": "Resource",
    "ss": "ScopeSpans", "scope": "InstrumentationScope", "span": "Span", "event": "Span.Event",
    "link": "Span.Link", "status": "Status", "kv": "KeyValue", "any": "AnyValue",
    "array": "ArrayValue", "kvlist": "KeyValueList", "entity": "EntityRef",
}


def wire_type_of(kind, num):
    """The wire type of known field `num` of message `kind`, or None."""
    d = SCHEMA[kind].get(num)
    if d is None:
        return None
    return LEN if d[1] in SCHEMA else SCALAR_WT[d[1]]


def nodes(m, out=None):
    """Every message occurrence under (and including) m that belongs to the
    schema, in wire order; messages inside unknown fields are not visited."""
    if out is None:
        out = []
    out.append(m)
    for f in m.fields:
        if isinstance(f.val, M) and f.raw is None and f.val.kind in SCHEMA and \
                SCHEMA[m.kind].get(f.num) is not None and f.wt == LEN:
            nodes(f.val, out)
    return out


# ---- a lenient decoder, only for describing where two encodings differ ----

def _read_varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("bad varint at %d" % i)
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def fields_of(b):
    """[(num, wt, value bytes or int, field offset, value offset)] of one
    message level."""
    out, i = [], 0
    while i < len(b):
        start = i
        t, i = _read_varint(b, i)
        num, wt = t >> 3, t & 7
        vstart = i
        if wt == VARINT:
            v, i = _read_varint(b, i)
        elif wt == I64:
            v, i = b[i:i + 8], i + 8
        elif wt == I32:
            v, i = b[i:i + 4], i + 4
        elif wt == LEN:
            n, i = _read_varint(b, i)
            vstart = i
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d at %d" % (wt, start))
        out.append((num, wt, v, start, vstart))
    return out


def where_differ(a, b, kind="request", path="", base_a=0, base_b=0):
    """Where encodings a and b of a message of `kind` first differ: (a short
    description, offset in a, offset in b), or None when they are equal."""
    if a == b:
        return None
    here = path or "request"
    try:
        fa, fb = fields_of(a), fields_of(b)
    except ValueError as e:
        return "%s: does not decode (%s)" % (here, e), base_a, base_b
    d = SCHEMA.get(kind, {})

    def nm(n):
        return "%d (%s)" % (n, d[n][0]) if n in d else "%d (unknown)" % n
    for k in range(max(len(fa), len(fb))):
        if k >= len(fa):
            return ("%s: extra field %s (wire type %d) in the output" % (here, nm(fb[k][0]), fb[k][1]),
                    base_a + len(a), base_b + fb[k][3])
        if k >= len(fb):
            return ("%s: field %s (wire type %d) missing in the output" % (here, nm(fa[k][0]), fa[k][1]),
                    base_a + fa[k][3], base_b + len(b))
        (na, wa, va, sa, xa), (nb, wb, vb, sb, xb) = fa[k], fb[k]
        if (na, wa) != (nb, wb):
            return ("%s: field %s (wire type %d) where %s (wire type %d) belongs" % (here, nm(nb), wb, nm(na), wa),
                    base_a + sa, base_b + sb)
        if va != vb:
            sub = d.get(na)
            p = "%s.%s" % (here, sub[0] if sub else str(na))
            if not sub or sub[2]:
                p += "[%d]" % sum(1 for f in fa[:k] if f[0] == na)
            if sub and sub[1] in SCHEMA and wa == LEN:
                return where_differ(va, vb, sub[1], p, base_a + xa, base_b + xb)

            def short(v):
                return v if len(repr(v)) < 80 else repr(v)[:80] + "..."
            return "%s: %r in the output, expected %r" % (p, short(vb), short(va)), base_a + sa, base_b + sb
        if a[sa:xa] != b[sb:xb]:
            return "%s: field %s encoded otherwise (tag or length width)" % (here, nm(na)), base_a + sa, base_b + sb
    return "%s: same fields, different bytes" % here, base_a, base_b
