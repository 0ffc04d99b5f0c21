/* sf_otlp_json.c: OTLP/JSON <-> protobuf-c structs for the trace export
 * request (and the response's JSON form), and OTLP/JSON <-> protobuf bytes
 * for the logs and metrics requests (a mapping read from protobuf-c's
 * descriptors, below), on json-c.
 *
 * DESIGN: decoding parses with a depth-limited json-c tokener, reads the
 * accepted text once more for what the tree hides (members named twice,
 * lone surrogates: check_text), then walks
 * json-c's tree and builds the request in the caller's arena; one table of
 * field names per message drives the walk (unknown keys skipped, a field
 * given under both its camelCase and snake_case name refused). Encoding
 * builds a json-c tree from the structs and copies its text into sf_malloc'd
 * memory. json-c's own, uncounted memory lives only for one call. */
#include "sf_otlp_json.h"
#include "sf_otlp_wire.h"
#include "sf_alloc.h"
#include "sf_encoding.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

#include <json-c/json.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The field names and one enum per message: generated from the .proto files
 * and pipeline/proto/trace_fields.txt (tools/gen_otlp_schema.py). */
#define SF_OTLP_SCHEMA_JSON
#include "sf_otlp_schema.h"

typedef Opentelemetry__Proto__Common__V1__ArrayValue sf_otlp_array;
typedef Opentelemetry__Proto__Common__V1__KeyValueList sf_otlp_kvlist;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess sf_otlp_partial;

#define ANY_CASE(c) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##c

/* JSON levels above the first AnyValue (request ... span, events[],
 * event, attributes[], kv, value: 12) plus slack, so that an AnyValue a few
 * levels too deep still gets the precise error; each AnyValue nesting level
 * adds at most 4 (kvlistValue, values[], kv, value). The tokener limit
 * bounds memory and json-c's recursive free; the AnyValue count gives the
 * precise error. Capped so a huge max_depth cannot blow the stack. */
#define SF_JSON_BASE_DEPTH 32
#define SF_JSON_LEVELS_PER_ANY 4
#define SF_JSON_MAX_ANY_DEPTH 256

/* ==== decoding =========================================================== */

typedef struct dec {
    sf_arena *arena;
    unsigned max_depth;
    unsigned depth;             /* arrays / kvlists entered so far */
    char *err;
    size_t err_size;
    size_t path_len;
    char path[512];             /* where we are, e.g. resourceSpans[0].resource */
} dec;

static sf_status fail(dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "<path>: <reason>" (or just the reason at the top level). */
static sf_status fail(dec *d, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (d->err == NULL || d->err_size == 0)
        return SF_INVALID;
    if (d->path_len > 0)
        n = snprintf(d->err, d->err_size, "%s: ", d->path);
    if (n >= 0 && (size_t)n < d->err_size) {
        va_start(ap, fmt);
        vsnprintf(d->err + n, d->err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return SF_INVALID;
}

static sf_status oom(dec *d)
{
    if (d->err != NULL && d->err_size > 0)
        snprintf(d->err, d->err_size, "out of memory");
    return SF_ENOMEM;
}

/* Appends to the path (truncating when full); returns the length to restore. */
static size_t path_push(dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static size_t path_push(dec *d, const char *fmt, ...)
{
    size_t old = d->path_len;
    va_list ap;
    int n;

    if (old + 1 >= sizeof(d->path))
        return old;
    va_start(ap, fmt);
    n = vsnprintf(d->path + old, sizeof(d->path) - old, fmt, ap);
    va_end(ap);
    if (n > 0)
        d->path_len = old + (size_t)n < sizeof(d->path) ? old + (size_t)n : sizeof(d->path) - 1;
    return old;
}

static void path_pop(dec *d, size_t mark)
{
    d->path_len = mark;
    d->path[mark] = '\0';
}

/* ---- scalar fields ---- */

/* `presence`: a oneof member, where "" must differ from unset. protobuf-c
 * skips packing a oneof string whose pointer is the shared empty string. */
static sf_status get_string_ex(dec *d, json_object *v, bool presence, char **out)
{
    const char *s;
    size_t n;
    char *p;

    if (!json_object_is_type(v, json_type_string))
        return fail(d, "expected a string");
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    /* protobuf-c strings are NUL-terminated: "a\u0000b" would silently
     * become "a" (an allowlisted key could smuggle the rest). */
    if (memchr(s, '\0', n) != NULL)
        return fail(d, "string contains a nul character");
    /* JSON text is UTF-8 (RFC 8259); json-c passes other bytes through */
    if (!sf_otlp_utf8_valid((const uint8_t *)s, n))
        return fail(d, "string is not valid UTF-8");
    if (n == 0 && !presence) {
        *out = (char *)protobuf_c_empty_string;
        return SF_OK;
    }
    p = sf_arena_alloc(d->arena, n + 1);
    if (p == NULL)
        return oom(d);
    memcpy(p, s, n);
    p[n] = '\0';
    *out = p;
    return SF_OK;
}

static sf_status get_string(dec *d, json_object *v, char **out)
{
    return get_string_ex(d, v, false, out);
}

/* traceId / spanId / parentSpanId: hex, not base64 (an OTLP exception). */
static sf_status get_hex_id(dec *d, json_object *v, size_t nbytes, ProtobufCBinaryData *out)
{
    const char *s;
    uint8_t *p;

    if (!json_object_is_type(v, json_type_string))
        return fail(d, "expected a hex string");
    s = json_object_get_string(v);
    if (json_object_get_string_len(v) == 0) {
        out->len = 0;
        out->data = NULL;
        return SF_OK;
    }
    if ((size_t)json_object_get_string_len(v) != 2 * nbytes)
        return fail(d, "not %zu hex digits", 2 * nbytes);
    p = sf_arena_alloc(d->arena, nbytes);
    if (p == NULL)
        return oom(d);
    for (size_t i = 0; i < nbytes; i++) {
        int hi = sf_hex_digit(s[2 * i]), lo = sf_hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return fail(d, "not %zu hex digits", 2 * nbytes);
        p[i] = (uint8_t)(hi << 4 | lo);
    }
    out->len = nbytes;
    out->data = p;
    return SF_OK;
}

/* Standard or URL-safe alphabet (RFC 4648 4 and 5), with or without
 * padding, as the proto3 JSON mapping reads bytes (python-protobuf's
 * json_format takes both): sf_base64_decode(). */
static sf_status get_base64(dec *d, json_object *v, ProtobufCBinaryData *out)
{
    const char *s;
    size_t n;
    ssize_t len;
    uint8_t *p;

    if (!json_object_is_type(v, json_type_string))
        return fail(d, "expected a base64 string");
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    len = sf_base64_decoded_len(s, n);
    if (len < 0)
        return fail(d, "not valid base64");
    out->len = 0;
    out->data = NULL;
    if (len == 0)
        return SF_OK;
    p = sf_arena_alloc(d->arena, (size_t)len);
    if (p == NULL)
        return oom(d);
    if (sf_base64_decode(p, (size_t)len, s, n) != len)
        return fail(d, "not valid base64");
    out->len = (size_t)len;
    out->data = p;
    return SF_OK;
}

static sf_status get_bool(dec *d, json_object *v, protobuf_c_boolean *out)
{
    if (!json_object_is_type(v, json_type_boolean))
        return fail(d, "expected true or false");
    *out = json_object_get_boolean(v) ? 1 : 0;
    return SF_OK;
}

/* Strict decimal: optional '-', then digits only. 0 ok, -1 syntax, -2 overflow. */
static int parse_dec(const char *s, size_t n, bool *neg, uint64_t *mag)
{
    size_t i = 0;
    uint64_t v = 0;

    *neg = n > 0 && s[0] == '-';
    if (*neg)
        i = 1;
    if (i == n)
        return -1;
    for (; i < n; i++) {
        unsigned dgt;
        if (s[i] < '0' || s[i] > '9')
            return -1;
        dgt = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -2;
        v = v * 10 + dgt;
    }
    *mag = v;
    return 0;
}

/* An integer as a JSON number or a decimal string, as sign and magnitude,
 * within [-(max_pos + 1), max_pos] (or [0, max_pos] when !allow_neg). */
static sf_status get_integer(dec *d, json_object *v, bool allow_neg, uint64_t max_pos,
                             bool *neg, uint64_t *mag)
{
    switch (json_object_get_type(v)) {
    case json_type_int: {
        int64_t i = json_object_get_int64(v);
        *neg = i < 0;
        /* json_object_get_uint64 is exact above INT64_MAX. */
        *mag = i < 0 ? (uint64_t)(-(i + 1)) + 1 : json_object_get_uint64(v);
        break;
    }
    case json_type_double: {
        double x = json_object_get_double(v);
        if (!isfinite(x) || x != trunc(x))
            return fail(d, "not an integer");
        if (fabs(x) >= 18446744073709551616.0)
            return fail(d, "integer out of range");
        *neg = x < 0;
        *mag = (uint64_t)fabs(x);
        break;
    }
    case json_type_string:
        switch (parse_dec(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                          neg, mag)) {
        case -1:
            return fail(d, "not an integer");
        case -2:
            return fail(d, "integer out of range");
        }
        break;
    default:
        return fail(d, "expected an integer");
    }
    if (*mag == 0)
        *neg = false;
    if (*neg ? !allow_neg || *mag - 1 > max_pos : *mag > max_pos)
        return fail(d, "integer out of range");
    return SF_OK;
}

static sf_status get_int64(dec *d, json_object *v, int64_t *out)
{
    bool neg;
    uint64_t mag;
    sf_status st = get_integer(d, v, true, INT64_MAX, &neg, &mag);

    if (st == SF_OK)
        *out = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
    return st;
}

static sf_status get_uint64(dec *d, json_object *v, uint64_t *out)
{
    bool neg;

    return get_integer(d, v, false, UINT64_MAX, &neg, out);
}

static sf_status get_uint32(dec *d, json_object *v, uint32_t *out)
{
    bool neg;
    uint64_t mag;
    sf_status st = get_integer(d, v, false, UINT32_MAX, &neg, &mag);

    if (st == SF_OK)
        *out = (uint32_t)mag;
    return st;
}

/* An enum: its number (any int32: proto3 enums are open) or its name. */
static sf_status get_enum(dec *d, json_object *v, const char *const *names, size_t n_names,
                          int *out)
{
    bool neg;
    uint64_t mag;
    sf_status st;

    if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        size_t n = (size_t)json_object_get_string_len(v);
        for (size_t i = 0; i < n_names; i++) {
            if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0) {
                *out = (int)i;
                return SF_OK;
            }
        }
        return fail(d, "unknown enum name");
    }
    st = get_integer(d, v, true, INT32_MAX, &neg, &mag);
    if (st == SF_OK)
        *out = neg ? -(int)(mag - 1) - 1 : (int)mag;
    return st;
}

static sf_status get_double(dec *d, json_object *v, double *out)
{
    const char *s;
    char *end;

    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
        *out = json_object_get_double(v);
        /* json-c takes bare NaN / Infinity and overflows 1e999 to inf. */
        if (!isfinite(*out))
            return fail(d, "not a finite number");
        return SF_OK;
    case json_type_string:
        s = json_object_get_string(v);
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return SF_OK;
        }
        if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
            return SF_OK;
        }
        if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
            return SF_OK;
        }
        /* A number in a string, as proto3 JSON allows; strtod alone would
         * also take "inf", hex floats and leading blanks. */
        if (s[0] == '\0'
            || strspn(s, "0123456789+-.eE") != (size_t)json_object_get_string_len(v))
            return fail(d, "not a number");
        *out = strtod(s, &end);
        if (*end != '\0' || !isfinite(*out))
            return fail(d, "not a number");
        return SF_OK;
    default:
        return fail(d, "expected a number");
    }
}

/* ---- messages ---- */

typedef sf_status (*field_fn)(dec *d, void *msg, int field, json_object *v);

typedef struct msg_kind {
    const ProtobufCMessageDescriptor *desc;
    const sf_otlp_json_name *fields;
    size_t n_fields;
    field_fn set;
} msg_kind;

static int field_find(const msg_kind *k, const char *key)
{
    for (size_t i = 0; i < k->n_fields; i++) {
        if (strcmp(key, k->fields[i].camel) == 0
            || (k->fields[i].snake != NULL && strcmp(key, k->fields[i].snake) == 0))
            return (int)i;
    }
    return -1;
}

/* Fills `msg` (already initialised) from the JSON object `obj`. */
static sf_status dec_fields(dec *d, json_object *obj, const msg_kind *k, void *msg)
{
    uint32_t seen = 0;

    if (!json_object_is_type(obj, json_type_object))
        return fail(d, "expected an object");
    json_object_object_foreach(obj, key, val) {
        int f = field_find(k, key);
        size_t mark;
        sf_status st = SF_OK;

        if (f < 0)
            continue;           /* unknown fields are ignored (OTLP spec) */
        mark = path_push(d, d->path_len > 0 ? ".%s" : "%s", k->fields[f].camel);
        if (seen & (UINT32_C(1) << f))
            st = fail(d, "field given twice");
        else if (val != NULL)   /* null: the field keeps its default */
            st = k->set(d, msg, f, val);
        seen |= UINT32_C(1) << f;
        path_pop(d, mark);
        if (st != SF_OK)
            return st;
    }
    return SF_OK;
}

/* A new message of kind k from `obj`, stored through `slot` (a T ** field). */
static sf_status dec_msg(dec *d, json_object *obj, const msg_kind *k, void *slot)
{
    void *m;
    sf_status st;

    if (!json_object_is_type(obj, json_type_object))
        return fail(d, "expected an object");
    m = sf_arena_alloc(d->arena, k->desc->sizeof_message);
    if (m == NULL)
        return oom(d);
    protobuf_c_message_init(k->desc, m);
    st = dec_fields(d, obj, k, m);
    if (st == SF_OK)
        memcpy(slot, &m, sizeof(m));
    return st;
}

/* Decodes one element of a repeated field into *out (a T *), as `how` says. */
typedef sf_status (*elem_fn)(dec *d, json_object *v, const void *how, void *out);

/* A repeated field of pointers (messages, strings): count into *n, array
 * stored through `slot` (a T ** field). */
static sf_status dec_array(dec *d, json_object *arr, elem_fn elem, const void *how, size_t *n,
                           void *slot)
{
    size_t len;
    void **elems;

    if (!json_object_is_type(arr, json_type_array))
        return fail(d, "expected an array");
    len = json_object_array_length(arr);
    if (len == 0)
        return SF_OK;
    /* len is bounded by the input size, so the product cannot overflow. */
    elems = sf_arena_alloc(d->arena, len * sizeof(*elems));
    if (elems == NULL)
        return oom(d);
    for (size_t i = 0; i < len; i++) {
        size_t mark = path_push(d, "[%zu]", i);
        sf_status st = elem(d, json_object_array_get_idx(arr, i), how, &elems[i]);
        path_pop(d, mark);
        if (st != SF_OK)
            return st;
    }
    *n = len;
    memcpy(slot, &elems, sizeof(elems));
    return SF_OK;
}

static sf_status elem_msg(dec *d, json_object *v, const void *how, void *out)
{
    return dec_msg(d, v, how, out);
}

/* null elements refused, as json_format does */
static sf_status elem_string(dec *d, json_object *v, const void *how, void *out)
{
    char *s = NULL;
    sf_status st = get_string(d, v, &s);

    (void)how;
    memcpy(out, &s, sizeof(s));
    return st;
}

/* A repeated message field. */
static sf_status dec_list(dec *d, json_object *arr, const msg_kind *k, size_t *n, void *slot)
{
    return dec_array(d, arr, elem_msg, k, n, slot);
}

/* A repeated string field. */
static sf_status get_strings(dec *d, json_object *arr, size_t *n, char ***out)
{
    return dec_array(d, arr, elem_string, NULL, n, out);
}

static const msg_kind K_REQUEST, K_RESOURCE_SPANS, K_RESOURCE, K_ENTITY_REF, K_SCOPE_SPANS,
    K_SCOPE, K_SPAN, K_EVENT, K_LINK, K_STATUS, K_KV, K_ANY, K_ARRAY, K_KVLIST;

/* One setter per message, a case for every field of its generated enum
 * (sf_otlp_schema.h, in field-number order) and no default: a field added
 * to the schema breaks the build here (-Wswitch) until it is decided. */

/* ExportTraceServiceRequest */
static sf_status request_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_request *r = msg;

    switch ((sf_jf_request)f) {
    case SF_JF_REQUEST_RESOURCE_SPANS:
        return dec_list(d, v, &K_RESOURCE_SPANS, &r->n_resource_spans, &r->resource_spans);
    }
    return fail(d, "internal: no such field");
}

/* ResourceSpans */
static sf_status resource_spans_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_resource_spans *rs = msg;

    switch ((sf_jf_resource_spans)f) {
    case SF_JF_RESOURCE_SPANS_RESOURCE:
        return dec_msg(d, v, &K_RESOURCE, &rs->resource);
    case SF_JF_RESOURCE_SPANS_SCOPE_SPANS:
        return dec_list(d, v, &K_SCOPE_SPANS, &rs->n_scope_spans, &rs->scope_spans);
    case SF_JF_RESOURCE_SPANS_SCHEMA_URL:
        return get_string(d, v, &rs->schema_url);
    }
    return fail(d, "internal: no such field");
}

/* Resource */
static sf_status resource_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_resource *r = msg;

    switch ((sf_jf_resource)f) {
    case SF_JF_RESOURCE_ATTRIBUTES:
        return dec_list(d, v, &K_KV, &r->n_attributes, &r->attributes);
    case SF_JF_RESOURCE_DROPPED_ATTRIBUTES_COUNT:
        return get_uint32(d, v, &r->dropped_attributes_count);
    case SF_JF_RESOURCE_ENTITY_REFS:
        return dec_list(d, v, &K_ENTITY_REF, &r->n_entity_refs, &r->entity_refs);
    }
    return fail(d, "internal: no such field");
}

/* EntityRef (Resource.entity_refs): decoded, not skipped as unknown, so an
 * OTLP/JSON request means what the same request in protobuf means. */
static sf_status entity_ref_set(dec *d, void *msg, int f, json_object *v)
{
    Opentelemetry__Proto__Common__V1__EntityRef *r = msg;

    switch ((sf_jf_entity_ref)f) {
    case SF_JF_ENTITY_REF_SCHEMA_URL:
        return get_string(d, v, &r->schema_url);
    case SF_JF_ENTITY_REF_TYPE:
        return get_string(d, v, &r->type);
    case SF_JF_ENTITY_REF_ID_KEYS:
        return get_strings(d, v, &r->n_id_keys, &r->id_keys);
    case SF_JF_ENTITY_REF_DESCRIPTION_KEYS:
        return get_strings(d, v, &r->n_description_keys, &r->description_keys);
    }
    return fail(d, "internal: no such field");
}

/* ScopeSpans */
static sf_status scope_spans_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_scope_spans *ss = msg;

    switch ((sf_jf_scope_spans)f) {
    case SF_JF_SCOPE_SPANS_SCOPE:
        return dec_msg(d, v, &K_SCOPE, &ss->scope);
    case SF_JF_SCOPE_SPANS_SPANS:
        return dec_list(d, v, &K_SPAN, &ss->n_spans, &ss->spans);
    case SF_JF_SCOPE_SPANS_SCHEMA_URL:
        return get_string(d, v, &ss->schema_url);
    }
    return fail(d, "internal: no such field");
}

/* InstrumentationScope */
static sf_status scope_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_scope *s = msg;

    switch ((sf_jf_scope)f) {
    case SF_JF_SCOPE_NAME:
        return get_string(d, v, &s->name);
    case SF_JF_SCOPE_VERSION:
        return get_string(d, v, &s->version);
    case SF_JF_SCOPE_ATTRIBUTES:
        return dec_list(d, v, &K_KV, &s->n_attributes, &s->attributes);
    case SF_JF_SCOPE_DROPPED_ATTRIBUTES_COUNT:
        return get_uint32(d, v, &s->dropped_attributes_count);
    }
    return fail(d, "internal: no such field");
}

/* Span */
static const char *const span_kind_names[] = {
    "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
};
static sf_status span_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_span *s = msg;
    sf_status st;
    int kind = 0;

    switch ((sf_jf_span)f) {
    case SF_JF_SPAN_TRACE_ID:       return get_hex_id(d, v, 16, &s->trace_id);
    case SF_JF_SPAN_SPAN_ID:        return get_hex_id(d, v, 8, &s->span_id);
    case SF_JF_SPAN_TRACE_STATE:    return get_string(d, v, &s->trace_state);
    case SF_JF_SPAN_PARENT_SPAN_ID: return get_hex_id(d, v, 8, &s->parent_span_id);
    case SF_JF_SPAN_FLAGS:          return get_uint32(d, v, &s->flags);
    case SF_JF_SPAN_NAME:           return get_string(d, v, &s->name);
    case SF_JF_SPAN_KIND:
        st = get_enum(d, v, span_kind_names,
                      sizeof(span_kind_names) / sizeof(span_kind_names[0]), &kind);
        s->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)kind;
        return st;
    case SF_JF_SPAN_START_TIME_UNIX_NANO: return get_uint64(d, v, &s->start_time_unix_nano);
    case SF_JF_SPAN_END_TIME_UNIX_NANO:   return get_uint64(d, v, &s->end_time_unix_nano);
    case SF_JF_SPAN_ATTRIBUTES:     return dec_list(d, v, &K_KV, &s->n_attributes, &s->attributes);
    case SF_JF_SPAN_DROPPED_ATTRIBUTES_COUNT: return get_uint32(d, v, &s->dropped_attributes_count);
    case SF_JF_SPAN_EVENTS:         return dec_list(d, v, &K_EVENT, &s->n_events, &s->events);
    case SF_JF_SPAN_DROPPED_EVENTS_COUNT: return get_uint32(d, v, &s->dropped_events_count);
    case SF_JF_SPAN_LINKS:          return dec_list(d, v, &K_LINK, &s->n_links, &s->links);
    case SF_JF_SPAN_DROPPED_LINKS_COUNT: return get_uint32(d, v, &s->dropped_links_count);
    case SF_JF_SPAN_STATUS:         return dec_msg(d, v, &K_STATUS, &s->status);
    }
    return fail(d, "internal: no such field");
}

/* Span.Event */
static sf_status event_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_event *e = msg;

    switch ((sf_jf_event)f) {
    case SF_JF_EVENT_TIME_UNIX_NANO: return get_uint64(d, v, &e->time_unix_nano);
    case SF_JF_EVENT_NAME:           return get_string(d, v, &e->name);
    case SF_JF_EVENT_ATTRIBUTES:     return dec_list(d, v, &K_KV, &e->n_attributes, &e->attributes);
    case SF_JF_EVENT_DROPPED_ATTRIBUTES_COUNT:
        return get_uint32(d, v, &e->dropped_attributes_count);
    }
    return fail(d, "internal: no such field");
}

/* Span.Link */
static sf_status link_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_link *l = msg;

    switch ((sf_jf_link)f) {
    case SF_JF_LINK_TRACE_ID:       return get_hex_id(d, v, 16, &l->trace_id);
    case SF_JF_LINK_SPAN_ID:        return get_hex_id(d, v, 8, &l->span_id);
    case SF_JF_LINK_TRACE_STATE:    return get_string(d, v, &l->trace_state);
    case SF_JF_LINK_ATTRIBUTES:     return dec_list(d, v, &K_KV, &l->n_attributes, &l->attributes);
    case SF_JF_LINK_DROPPED_ATTRIBUTES_COUNT:
        return get_uint32(d, v, &l->dropped_attributes_count);
    case SF_JF_LINK_FLAGS:          return get_uint32(d, v, &l->flags);
    }
    return fail(d, "internal: no such field");
}

/* Status */
static const char *const status_code_names[] = {
    "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR",
};
static sf_status status_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_status *s = msg;
    sf_status st;
    int code = 0;

    switch ((sf_jf_status)f) {
    case SF_JF_STATUS_MESSAGE:
        return get_string(d, v, &s->message);
    case SF_JF_STATUS_CODE:
        st = get_enum(d, v, status_code_names,
                      sizeof(status_code_names) / sizeof(status_code_names[0]), &code);
        s->code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)code;
        return st;
    }
    return fail(d, "internal: no such field");
}

/* KeyValue */
static sf_status kv_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_kv *kv = msg;

    switch ((sf_jf_key_value)f) {
    case SF_JF_KEY_VALUE_KEY:   return get_string(d, v, &kv->key);
    case SF_JF_KEY_VALUE_VALUE: return dec_msg(d, v, &K_ANY, &kv->value);
    }
    return fail(d, "internal: no such field");
}

/* AnyValue: one of seven members; the field's index + 1 is its number and
 * protobuf-c's value case. */
_Static_assert(SF_JF_ANY_VALUE_STRING_VALUE + 1 == SF_OTLP_NUM_ANY_VALUE_STRING_VALUE &&
               SF_JF_ANY_VALUE_BYTES_VALUE + 1 == SF_OTLP_NUM_ANY_VALUE_BYTES_VALUE &&
               ANY_CASE(BYTES_VALUE) == SF_OTLP_NUM_ANY_VALUE_BYTES_VALUE,
               "AnyValue's members are not numbered 1-7 in order");
static sf_status any_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_any *a = msg;
    sf_status st = SF_OK;
    const msg_kind *nested = NULL;
    void *slot = NULL;

    if (a->value_case != ANY_CASE(_NOT_SET))
        return fail(d, "more than one value set");
    switch ((sf_jf_any_value)f) {
    case SF_JF_ANY_VALUE_STRING_VALUE: st = get_string_ex(d, v, true, &a->string_value); break;
    case SF_JF_ANY_VALUE_BOOL_VALUE:   st = get_bool(d, v, &a->bool_value); break;
    case SF_JF_ANY_VALUE_INT_VALUE:    st = get_int64(d, v, &a->int_value); break;
    case SF_JF_ANY_VALUE_DOUBLE_VALUE: st = get_double(d, v, &a->double_value); break;
    case SF_JF_ANY_VALUE_BYTES_VALUE:  st = get_base64(d, v, &a->bytes_value); break;
    case SF_JF_ANY_VALUE_ARRAY_VALUE:  nested = &K_ARRAY; slot = &a->array_value; break;
    case SF_JF_ANY_VALUE_KVLIST_VALUE: nested = &K_KVLIST; slot = &a->kvlist_value; break;
    }
    if (nested != NULL) {
        /* Same rule as sf_otlp_scan: each array / kvlist is a level. */
        if (d->depth >= d->max_depth)
            return fail(d, "nesting deeper than %u", d->max_depth);
        d->depth++;
        st = dec_msg(d, v, nested, slot);
        d->depth--;
    }
    if (st == SF_OK)
        a->value_case = (Opentelemetry__Proto__Common__V1__AnyValue__ValueCase)(f + 1);
    return st;
}

/* ArrayValue and KeyValueList */
static sf_status array_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_array *a = msg;

    switch ((sf_jf_array_value)f) {
    case SF_JF_ARRAY_VALUE_VALUES: return dec_list(d, v, &K_ANY, &a->n_values, &a->values);
    }
    return fail(d, "internal: no such field");
}
static sf_status kvlist_set(dec *d, void *msg, int f, json_object *v)
{
    sf_otlp_kvlist *l = msg;

    switch ((sf_jf_key_value_list)f) {
    case SF_JF_KEY_VALUE_LIST_VALUES: return dec_list(d, v, &K_KV, &l->n_values, &l->values);
    }
    return fail(d, "internal: no such field");
}

#define KIND(desc, fields, set) { &(desc), (fields), sizeof(fields) / sizeof((fields)[0]), (set) }
static const msg_kind K_REQUEST = KIND(
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
    sf_jn_request, request_set);
static const msg_kind K_RESOURCE_SPANS = KIND(opentelemetry__proto__trace__v1__resource_spans__descriptor,
                                              sf_jn_resource_spans, resource_spans_set);
static const msg_kind K_RESOURCE = KIND(opentelemetry__proto__resource__v1__resource__descriptor,
                                        sf_jn_resource, resource_set);
static const msg_kind K_ENTITY_REF = KIND(opentelemetry__proto__common__v1__entity_ref__descriptor,
                                          sf_jn_entity_ref, entity_ref_set);
static const msg_kind K_SCOPE_SPANS = KIND(opentelemetry__proto__trace__v1__scope_spans__descriptor,
                                           sf_jn_scope_spans, scope_spans_set);
static const msg_kind K_SCOPE = KIND(opentelemetry__proto__common__v1__instrumentation_scope__descriptor,
                                     sf_jn_scope, scope_set);
static const msg_kind K_SPAN = KIND(opentelemetry__proto__trace__v1__span__descriptor,
                                    sf_jn_span, span_set);
static const msg_kind K_EVENT = KIND(opentelemetry__proto__trace__v1__span__event__descriptor,
                                     sf_jn_event, event_set);
static const msg_kind K_LINK = KIND(opentelemetry__proto__trace__v1__span__link__descriptor,
                                    sf_jn_link, link_set);
static const msg_kind K_STATUS = KIND(opentelemetry__proto__trace__v1__status__descriptor,
                                      sf_jn_status, status_set);
static const msg_kind K_KV = KIND(opentelemetry__proto__common__v1__key_value__descriptor,
                                  sf_jn_key_value, kv_set);
static const msg_kind K_ANY = KIND(opentelemetry__proto__common__v1__any_value__descriptor,
                                   sf_jn_any_value, any_set);
static const msg_kind K_ARRAY = KIND(opentelemetry__proto__common__v1__array_value__descriptor,
                                     sf_jn_array_value, array_set);
static const msg_kind K_KVLIST = KIND(opentelemetry__proto__common__v1__key_value_list__descriptor,
                                      sf_jn_key_value_list, kvlist_set);
#undef KIND

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- what json-c's tree hides ----
 *
 * json-c 0.16 (Debian 12) keeps the last of two members with one name and
 * turns a lone UTF-16 surrogate escape into U+FFFD, a \u0000 in a member
 * name ends the name there, and a member name may be single-quoted even in
 * strict mode: none of it shows in the tree. Go's protojson and Python's
 * json_format refuse these (json_format: "duplicate key", "Unpaired
 * surrogate"), and reading them differently from the backend's decoder is
 * how a request means one thing here and another there. So the text json-c
 * accepted is read once more. That is sound only after json-c accepted it:
 * then a quote outside a string opens one, a backslash is inside a string
 * and starts a well-formed escape, and a colon outside a string ends a
 * member name, once per member. */

static unsigned hex4(const char *s)
{
    unsigned v = 0;

    for (int i = 0; i < 4; i++)
        v = v << 4 | (unsigned)sf_hex_digit(s[i]);
    return v;
}

static bool is_high_surrogate(unsigned u)
{
    return u >= 0xd800 && u <= 0xdbff;
}

static bool is_low_surrogate(unsigned u)
{
    return u >= 0xdc00 && u <= 0xdfff;
}

/* Refuses lone surrogates, \u0000 in a member name and single-quoted names
 * in s[0..n) (json-c-accepted text); counts the members of all objects. */
static sf_status check_text(dec *d, const char *s, size_t n, size_t *members)
{
    bool in_string = false, nul = false;
    size_t count = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned u;

        if (!in_string) {
            if (s[i] == '"') {
                in_string = true;
                nul = false;
            } else if (s[i] == '\'') {
                return fail(d, "member name not in double quotes at offset %zu", i);
            } else if (s[i] == ':') {
                if (nul)
                    return fail(d, "member name with a \\u0000 escape before offset %zu", i);
                count++;
            }
            continue;
        }
        if (s[i] == '"') {
            in_string = false;
            continue;
        }
        if (s[i] != '\\')
            continue;
        if (s[i + 1] != 'u') {
            i++;
            continue;
        }
        u = hex4(s + i + 2);
        if (u == 0)
            nul = true;
        if (is_high_surrogate(u) && i + 11 < n && s[i + 6] == '\\' && s[i + 7] == 'u'
            && is_low_surrogate(hex4(s + i + 8))) {
            i += 11;
            continue;
        }
        if (is_high_surrogate(u) || is_low_surrogate(u))
            return fail(d, "lone utf-16 surrogate \\u%04x at offset %zu", u, i);
        i += 5;
    }
    *members = count;
    return SF_OK;
}

/* Members in json-c's tree, all levels (bounded by the tokener's depth). */
static size_t tree_members(json_object *o)
{
    size_t n = 0;

    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, val) {
            (void)key;
            n += 1 + tree_members(val);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            n += tree_members(json_object_array_get_idx(o, i));
    }
    return n;
}

/* A name worth repeating to the client: short and plain. */
static bool name_is_plain(const char *name)
{
    size_t n = strlen(name);

    return n > 0 && n <= 64 && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_.-") == n;
}

/* The tree has fewer members than the text: some object names a member
 * twice. Finds the first such name, in document order, for the message:
 * each open object keeps its names (decoded by json-c, so "a" and "\u0061"
 * are one name) in a json-c object used as a set. Runs only on refusal. */
static sf_status find_duplicate(dec *d, const char *s, size_t n, int max_nesting)
{
    json_object **open = sf_calloc((size_t)max_nesting + 1, sizeof(*open));
    struct json_tokener *tok = json_tokener_new();
    int depth = 0;
    size_t key_start = 0, key_end = 0;
    bool in_string = false;
    sf_status st = SF_OK;

    if (open == NULL || tok == NULL) {
        st = fail(d, "an object names a member twice");
        goto out_free_sets;
    }
    for (size_t i = 0; i < n && st == SF_OK; i++) {
        if (in_string) {
            if (s[i] == '\\') {
                i++;
            } else if (s[i] == '"') {
                in_string = false;
                key_end = i + 1;
            }
        } else if (s[i] == '"') {
            in_string = true;
            key_start = i;
        } else if (s[i] == '{' && depth <= max_nesting) {
            open[depth++] = json_object_new_object();
        } else if (s[i] == '}' && depth > 0) {
            json_object_put(open[--depth]);
        } else if (s[i] == ':' && depth > 0 && open[depth - 1] != NULL) {
            json_object *name;

            json_tokener_reset(tok);
            name = json_tokener_parse_ex(tok, s + key_start, (int)(key_end - key_start));
            if (name != NULL && json_object_is_type(name, json_type_string)) {
                const char *k = json_object_get_string(name);

                if (json_object_object_get_ex(open[depth - 1], k, NULL))
                    st = name_is_plain(k)
                             ? fail(d, "member '%s' given twice (offset %zu)", k, key_start)
                             : fail(d, "a member name given twice (offset %zu)", key_start);
                else
                    json_object_object_add(open[depth - 1], k, NULL);
            }
            json_object_put(name);
        }
    }
    if (st == SF_OK)        /* not seen again: still refused */
        st = fail(d, "an object names a member twice");
    while (depth > 0)
        json_object_put(open[--depth]);
out_free_sets:
    json_tokener_free(tok);
    sf_free(open);
    return st;
}

static sf_status pd_request(dec *d, sf_signal s, json_object *root, void **out);

/* The JSON text of a request of signal s into a tree in d->arena. */
static sf_status decode_text(dec *dd, const char *json, size_t len, unsigned max_depth,
                             sf_signal signal, void **out)
{
    dec d = *dd;
    unsigned any_depth = max_depth < SF_JSON_MAX_ANY_DEPTH ? max_depth : SF_JSON_MAX_ANY_DEPTH;
    struct json_tokener *tok;
    json_object *root;
    enum json_tokener_error jerr;
    sf_otlp_request *req = NULL;
    sf_status st;
    size_t end, members = 0;
    int max_nesting = (int)(SF_JSON_BASE_DEPTH + SF_JSON_LEVELS_PER_ANY * any_depth);

    *out = NULL;
    if (d.err != NULL && d.err_size > 0)
        d.err[0] = '\0';
    if (len > INT_MAX) {
        fail(&d, "json larger than %d bytes", INT_MAX);
        return SF_TOOBIG;
    }
    if (len == 0)
        return fail(&d, "empty json");
    tok = json_tokener_new_ex(max_nesting);
    if (tok == NULL)
        return oom(&d);
    /* Trailing characters are checked below, to allow trailing blanks. */
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS
                                    | JSON_TOKENER_VALIDATE_UTF8);
    root = json_tokener_parse_ex(tok, json, (int)len);
    jerr = json_tokener_get_error(tok);
    end = json_tokener_get_parse_end(tok);
    if (jerr == json_tokener_continue) {
        /* A top-level scalar ("42") also waits for more input. */
        size_t i = 0;
        while (i < len && is_blank(json[i]))
            i++;
        st = fail(&d, i < len && json[i] == '{' ? "truncated json" : "not a json object");
        goto out_free_tree;
    }
    if (jerr != json_tokener_success) {
        st = fail(&d, "invalid json at offset %zu: %s", end, json_tokener_error_desc(jerr));
        goto out_free_tree;
    }
    for (size_t i = end; i < len; i++) {
        if (!is_blank(json[i])) {
            st = fail(&d, "trailing data at offset %zu", i);
            goto out_free_tree;
        }
    }
    if (!json_object_is_type(root, json_type_object)) {
        st = fail(&d, "not a json object");
        goto out_free_tree;
    }
    st = check_text(&d, json, end, &members);
    if (st != SF_OK)
        goto out_free_tree;
    if (members != tree_members(root)) {
        st = find_duplicate(&d, json, end, max_nesting);
        goto out_free_tree;
    }
    if (signal != SF_SIGNAL_TRACES) {
        st = pd_request(&d, signal, root, out);
        goto out_free_tree;
    }
    st = dec_msg(&d, root, &K_REQUEST, &req);
    if (st == SF_OK)
        *out = req;

out_free_tree:
    json_object_put(root);
    json_tokener_free(tok);
    return st;
}

sf_status sf_otlp_json_decode(sf_arena *arena, const char *json, size_t len, unsigned max_depth,
                              sf_otlp_request **out, char *err, size_t err_size)
{
    dec d = { .arena = arena, .max_depth = max_depth, .err = err, .err_size = err_size };
    void *tree = NULL;
    sf_status st = decode_text(&d, json, len, max_depth, SF_SIGNAL_TRACES, &tree);

    *out = tree;
    return st;
}

/* ==== encoding =========================================================== */

/* Builders never free: they add what they made to their parent, and the
 * caller frees the whole tree; a failed allocation only sets `failed`. */
typedef struct enc {
    bool failed;
} enc;

static json_object *new_obj(enc *e)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        e->failed = true;
    return o;
}

static void add(enc *e, json_object *o, const char *key, json_object *v)
{
    if (o == NULL || v == NULL) {
        e->failed = true;
        json_object_put(v);
        return;
    }
    if (json_object_object_add_ex(o, key, v, JSON_C_OBJECT_ADD_KEY_IS_NEW
                                                 | JSON_C_OBJECT_KEY_IS_CONSTANT) != 0) {
        json_object_put(v);
        e->failed = true;
    }
}

static void push(enc *e, json_object *arr, json_object *v)
{
    if (arr == NULL || v == NULL || json_object_array_add(arr, v) != 0) {
        json_object_put(v);
        e->failed = true;
    }
}

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 if ill-formed. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    uint32_t cp, min;
    size_t len;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, cp = s[0] & 0x1f, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, cp = s[0] & 0x0f, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string. protobuf-c does not check UTF-8 on unpack, so bytes that
 * are not UTF-8 become U+FFFD here: a JSON line must stay parseable. */
static json_object *jstr(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, o = 0, k;
    unsigned char *fixed;
    json_object *v;

    while (i < n && (k = utf8_seq(u + i, n - i)) != 0)
        i += k;
    if (i == n)
        return n <= INT_MAX ? json_object_new_string_len(s, (int)n) : NULL;
    if (n > (INT_MAX - 1) / 3)
        return NULL;
    fixed = sf_malloc(3 * n + 1);
    if (fixed == NULL)
        return NULL;
    for (i = 0; i < n; i += k) {
        k = utf8_seq(u + i, n - i);
        if (k == 0) {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            k = 1;
        } else {
            memcpy(fixed + o, u + i, k);
            o += k;
        }
    }
    v = json_object_new_string_len((const char *)fixed, (int)o);
    sf_free(fixed);
    return v;
}

static void add_str(enc *e, json_object *o, const char *key, const char *s)
{
    if (s != NULL && s[0] != '\0')
        add(e, o, key, jstr(s));
}

static void add_u32(enc *e, json_object *o, const char *key, uint32_t v)
{
    if (v != 0)
        add(e, o, key, json_object_new_int64(v));
}

static json_object *jdec_u64(uint64_t v)
{
    char buf[24];

    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return json_object_new_string(buf);
}

static void add_u64(enc *e, json_object *o, const char *key, uint64_t v)
{
    if (v != 0)
        add(e, o, key, jdec_u64(v));
}

static void add_hex(enc *e, json_object *o, const char *key, const ProtobufCBinaryData *b)
{
    static const char digits[] = "0123456789abcdef";
    char stack[65], *buf = stack;

    if (b->len == 0)
        return;
    if (b->len > (INT_MAX - 1) / 2) {
        e->failed = true;
        return;
    }
    if (2 * b->len + 1 > sizeof(stack)) {
        buf = sf_malloc(2 * b->len + 1);
        if (buf == NULL) {
            e->failed = true;
            return;
        }
    }
    for (size_t i = 0; i < b->len; i++) {
        buf[2 * i] = digits[b->data[i] >> 4];
        buf[2 * i + 1] = digits[b->data[i] & 15];
    }
    add(e, o, key, json_object_new_string_len(buf, (int)(2 * b->len)));
    if (buf != stack)
        sf_free(buf);
}

static json_object *b64_encode(const ProtobufCBinaryData *b)
{
    char *buf;
    json_object *v;

    if (b->len > (size_t)INT_MAX / 4 * 3 - 3)
        return NULL;
    buf = sf_malloc(SF_BASE64_ENCODED_LEN(b->len) + 1);
    if (buf == NULL)
        return NULL;
    v = json_object_new_string_len(buf, (int)sf_base64_encode(buf, b->data, b->len));
    sf_free(buf);
    return v;
}

/* The shortest of %.15g..%.17g that reads back as the same double. */
static json_object *jdouble(double x)
{
    char buf[32];

    if (isnan(x))
        return json_object_new_string("NaN");
    if (isinf(x))
        return json_object_new_string(x > 0 ? "Infinity" : "-Infinity");
    /* "-0" would read back as the integer 0 (json-c), +0.0: the fraction
     * keeps it a double, and its sign */
    if (x == 0 && signbit(x))
        return json_object_new_double_s(x, "-0.0");
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return json_object_new_double_s(x, buf);
}

static json_object *enc_any(enc *e, const sf_otlp_any *a);

static json_object *enc_kv(enc *e, const sf_otlp_kv *kv)
{
    json_object *o = new_obj(e);

    add_str(e, o, SF_OTLP_JSON_KEY_VALUE_KEY, kv->key);
    if (kv->value != NULL)
        add(e, o, SF_OTLP_JSON_KEY_VALUE_VALUE, enc_any(e, kv->value));
    return o;
}

static void add_kvs(enc *e, json_object *o, const char *key, sf_otlp_kv *const *kvs, size_t n)
{
    json_object *arr;

    if (n == 0)
        return;
    arr = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n && arr != NULL; i++)
        push(e, arr, enc_kv(e, kvs[i]));
    add(e, o, key, arr);
}

static json_object *enc_any(enc *e, const sf_otlp_any *a)
{
    json_object *o = new_obj(e), *inner, *arr;

    /* A oneof member is written even when it holds its default. */
    switch (a->value_case) {
    case ANY_CASE(STRING_VALUE):
        add(e, o, SF_OTLP_JSON_ANY_VALUE_STRING_VALUE,
            jstr(a->string_value != NULL ? a->string_value : ""));
        break;
    case ANY_CASE(BOOL_VALUE):
        add(e, o, SF_OTLP_JSON_ANY_VALUE_BOOL_VALUE, json_object_new_boolean(a->bool_value));
        break;
    case ANY_CASE(INT_VALUE): {
        char buf[24];
        snprintf(buf, sizeof(buf), "%" PRId64, a->int_value);
        add(e, o, SF_OTLP_JSON_ANY_VALUE_INT_VALUE, json_object_new_string(buf));
        break;
    }
    case ANY_CASE(DOUBLE_VALUE):
        add(e, o, SF_OTLP_JSON_ANY_VALUE_DOUBLE_VALUE, jdouble(a->double_value));
        break;
    case ANY_CASE(BYTES_VALUE):
        add(e, o, SF_OTLP_JSON_ANY_VALUE_BYTES_VALUE, b64_encode(&a->bytes_value));
        break;
    case ANY_CASE(ARRAY_VALUE):
        inner = new_obj(e);
        if (a->array_value != NULL && a->array_value->n_values > 0) {
            arr = json_object_new_array_ext((int)a->array_value->n_values);
            for (size_t i = 0; i < a->array_value->n_values && arr != NULL; i++)
                push(e, arr, enc_any(e, a->array_value->values[i]));
            add(e, inner, SF_OTLP_JSON_ARRAY_VALUE_VALUES, arr);
        }
        add(e, o, SF_OTLP_JSON_ANY_VALUE_ARRAY_VALUE, inner);
        break;
    case ANY_CASE(KVLIST_VALUE):
        inner = new_obj(e);
        if (a->kvlist_value != NULL)
            add_kvs(e, inner, SF_OTLP_JSON_KEY_VALUE_LIST_VALUES, a->kvlist_value->values,
                    a->kvlist_value->n_values);
        add(e, o, SF_OTLP_JSON_ANY_VALUE_KVLIST_VALUE, inner);
        break;
    default:
        break;
    }
    return o;
}

static json_object *enc_span(enc *e, const sf_otlp_span *s)
{
    json_object *o = new_obj(e), *arr;

    add_hex(e, o, SF_OTLP_JSON_SPAN_TRACE_ID, &s->trace_id);
    add_hex(e, o, SF_OTLP_JSON_SPAN_SPAN_ID, &s->span_id);
    add_str(e, o, SF_OTLP_JSON_SPAN_TRACE_STATE, s->trace_state);
    add_hex(e, o, SF_OTLP_JSON_SPAN_PARENT_SPAN_ID, &s->parent_span_id);
    add_u32(e, o, SF_OTLP_JSON_SPAN_FLAGS, s->flags);
    add_str(e, o, SF_OTLP_JSON_SPAN_NAME, s->name);
    if (s->kind != 0)
        add(e, o, SF_OTLP_JSON_SPAN_KIND, json_object_new_int(s->kind));
    add_u64(e, o, SF_OTLP_JSON_SPAN_START_TIME_UNIX_NANO, s->start_time_unix_nano);
    add_u64(e, o, SF_OTLP_JSON_SPAN_END_TIME_UNIX_NANO, s->end_time_unix_nano);
    add_kvs(e, o, SF_OTLP_JSON_SPAN_ATTRIBUTES, s->attributes, s->n_attributes);
    add_u32(e, o, SF_OTLP_JSON_SPAN_DROPPED_ATTRIBUTES_COUNT, s->dropped_attributes_count);
    if (s->n_events > 0) {
        arr = json_object_new_array_ext((int)s->n_events);
        for (size_t i = 0; i < s->n_events && arr != NULL; i++) {
            const sf_otlp_event *ev = s->events[i];
            json_object *eo = new_obj(e);
            add_u64(e, eo, SF_OTLP_JSON_EVENT_TIME_UNIX_NANO, ev->time_unix_nano);
            add_str(e, eo, SF_OTLP_JSON_EVENT_NAME, ev->name);
            add_kvs(e, eo, SF_OTLP_JSON_EVENT_ATTRIBUTES, ev->attributes, ev->n_attributes);
            add_u32(e, eo, SF_OTLP_JSON_EVENT_DROPPED_ATTRIBUTES_COUNT,
                    ev->dropped_attributes_count);
            push(e, arr, eo);
        }
        add(e, o, SF_OTLP_JSON_SPAN_EVENTS, arr);
    }
    add_u32(e, o, SF_OTLP_JSON_SPAN_DROPPED_EVENTS_COUNT, s->dropped_events_count);
    if (s->n_links > 0) {
        arr = json_object_new_array_ext((int)s->n_links);
        for (size_t i = 0; i < s->n_links && arr != NULL; i++) {
            const sf_otlp_link *l = s->links[i];
            json_object *lo = new_obj(e);
            add_hex(e, lo, SF_OTLP_JSON_LINK_TRACE_ID, &l->trace_id);
            add_hex(e, lo, SF_OTLP_JSON_LINK_SPAN_ID, &l->span_id);
            add_str(e, lo, SF_OTLP_JSON_LINK_TRACE_STATE, l->trace_state);
            add_kvs(e, lo, SF_OTLP_JSON_LINK_ATTRIBUTES, l->attributes, l->n_attributes);
            add_u32(e, lo, SF_OTLP_JSON_LINK_DROPPED_ATTRIBUTES_COUNT, l->dropped_attributes_count);
            add_u32(e, lo, SF_OTLP_JSON_LINK_FLAGS, l->flags);
            push(e, arr, lo);
        }
        add(e, o, SF_OTLP_JSON_SPAN_LINKS, arr);
    }
    add_u32(e, o, SF_OTLP_JSON_SPAN_DROPPED_LINKS_COUNT, s->dropped_links_count);
    if (s->status != NULL) {
        json_object *so = new_obj(e);
        add_str(e, so, SF_OTLP_JSON_STATUS_MESSAGE, s->status->message);
        if (s->status->code != 0)
            add(e, so, SF_OTLP_JSON_STATUS_CODE, json_object_new_int(s->status->code));
        add(e, o, SF_OTLP_JSON_SPAN_STATUS, so);
    }
    return o;
}

static json_object *enc_scope_spans(enc *e, const sf_otlp_scope_spans *ss)
{
    json_object *o = new_obj(e), *arr;

    if (ss->scope != NULL) {
        json_object *so = new_obj(e);
        add_str(e, so, SF_OTLP_JSON_SCOPE_NAME, ss->scope->name);
        add_str(e, so, SF_OTLP_JSON_SCOPE_VERSION, ss->scope->version);
        add_kvs(e, so, SF_OTLP_JSON_SCOPE_ATTRIBUTES,
                ss->scope->attributes, ss->scope->n_attributes);
        add_u32(e, so, SF_OTLP_JSON_SCOPE_DROPPED_ATTRIBUTES_COUNT,
                ss->scope->dropped_attributes_count);
        add(e, o, SF_OTLP_JSON_SCOPE_SPANS_SCOPE, so);
    }
    if (ss->n_spans > 0) {
        arr = json_object_new_array_ext((int)ss->n_spans);
        for (size_t i = 0; i < ss->n_spans && arr != NULL; i++)
            push(e, arr, enc_span(e, ss->spans[i]));
        add(e, o, SF_OTLP_JSON_SCOPE_SPANS_SPANS, arr);
    }
    add_str(e, o, SF_OTLP_JSON_SCOPE_SPANS_SCHEMA_URL, ss->schema_url);
    return o;
}

/* A list of strings under `key`, left out when empty. */
static void add_strs(enc *e, json_object *o, const char *key, char *const *s, size_t n)
{
    json_object *arr;

    if (n == 0)
        return;
    arr = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n && arr != NULL; i++)
        push(e, arr, jstr(s[i]));
    add(e, o, key, arr);
}

static json_object *enc_entity_ref(enc *e, const Opentelemetry__Proto__Common__V1__EntityRef *r)
{
    json_object *o = new_obj(e);

    add_str(e, o, SF_OTLP_JSON_ENTITY_REF_SCHEMA_URL, r->schema_url);
    add_str(e, o, SF_OTLP_JSON_ENTITY_REF_TYPE, r->type);
    add_strs(e, o, SF_OTLP_JSON_ENTITY_REF_ID_KEYS, r->id_keys, r->n_id_keys);
    add_strs(e, o, SF_OTLP_JSON_ENTITY_REF_DESCRIPTION_KEYS,
             r->description_keys, r->n_description_keys);
    return o;
}

static json_object *enc_resource_spans(enc *e, const sf_otlp_resource_spans *rs)
{
    json_object *o = new_obj(e), *arr;

    if (rs->resource != NULL) {
        json_object *ro = new_obj(e);
        add_kvs(e, ro, SF_OTLP_JSON_RESOURCE_ATTRIBUTES,
                rs->resource->attributes, rs->resource->n_attributes);
        add_u32(e, ro, SF_OTLP_JSON_RESOURCE_DROPPED_ATTRIBUTES_COUNT,
                rs->resource->dropped_attributes_count);
        if (rs->resource->n_entity_refs > 0) {
            arr = json_object_new_array_ext((int)rs->resource->n_entity_refs);
            for (size_t i = 0; i < rs->resource->n_entity_refs && arr != NULL; i++)
                push(e, arr, enc_entity_ref(e, rs->resource->entity_refs[i]));
            add(e, ro, SF_OTLP_JSON_RESOURCE_ENTITY_REFS, arr);
        }
        add(e, o, SF_OTLP_JSON_RESOURCE_SPANS_RESOURCE, ro);
    }
    if (rs->n_scope_spans > 0) {
        arr = json_object_new_array_ext((int)rs->n_scope_spans);
        for (size_t i = 0; i < rs->n_scope_spans && arr != NULL; i++)
            push(e, arr, enc_scope_spans(e, rs->scope_spans[i]));
        add(e, o, SF_OTLP_JSON_RESOURCE_SPANS_SCOPE_SPANS, arr);
    }
    add_str(e, o, SF_OTLP_JSON_RESOURCE_SPANS_SCHEMA_URL, rs->schema_url);
    return o;
}

/* Serialises `root` into an sf_malloc'd copy and frees the tree. */
static sf_status finish(enc *e, json_object *root, char **out, size_t *out_len)
{
    const char *text = NULL;
    size_t n = 0;
    char *copy = NULL;
    sf_status st = SF_ENOMEM;

    if (!e->failed && root != NULL)
        text = json_object_to_json_string_length(root, JSON_C_TO_STRING_PLAIN
                                                           | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    if (text != NULL)
        copy = sf_malloc(n + 1);
    if (copy != NULL) {
        memcpy(copy, text, n + 1);
        *out = copy;
        *out_len = n;
        st = SF_OK;
    }
    json_object_put(root);
    return st;
}

sf_status sf_otlp_json_encode(const sf_otlp_request *req, char **out, size_t *out_len)
{
    enc e = { .failed = false };
    json_object *root = new_obj(&e), *arr;

    *out = NULL;
    *out_len = 0;
    if (req->n_resource_spans > 0) {
        arr = json_object_new_array_ext((int)req->n_resource_spans);
        for (size_t i = 0; i < req->n_resource_spans && arr != NULL; i++)
            push(&e, arr, enc_resource_spans(&e, req->resource_spans[i]));
        add(&e, root, SF_OTLP_JSON_REQUEST_RESOURCE_SPANS, arr);
    }
    return finish(&e, root, out, out_len);
}

sf_status sf_otlp_json_encode_response(const sf_otlp_response *resp, char **out,
                                       size_t *out_len)
{
    enc e = { .failed = false };
    json_object *root = new_obj(&e);
    const sf_otlp_partial *ps = resp->partial_success;

    *out = NULL;
    *out_len = 0;
    if (ps != NULL) {
        json_object *po = new_obj(&e);
        if (ps->rejected_spans != 0) {
            char buf[24];
            snprintf(buf, sizeof(buf), "%" PRId64, ps->rejected_spans);
            add(&e, po, "rejectedSpans", json_object_new_string(buf));
        }
        add_str(&e, po, "errorMessage", ps->error_message);
        add(&e, root, "partialSuccess", po);
    }
    return finish(&e, root, out, out_len);
}

/* ==== logs and metrics: the mapping read from protobuf-c's descriptors ====
 *
 * The trace mapping above has a setter per message, so that a field added
 * to the schema breaks its build until decided. The logs and metrics
 * mapping is read from the descriptors protobuf-c generates from the same
 * .proto files: a field added there is mapped at once (the codec's tables
 * still refuse the build until its fields file decides it). The same rules
 * as for traces: lowerCamelCase names written, snake_case read too; a field
 * named twice refused, and so is a second member of a oneof (Go's protojson
 * refuses both); trace and span ids as hex, other bytes base64; 64-bit
 * integers as decimal strings (numbers read too); enums as numbers (names
 * read too); doubles as numbers or "NaN" / "Infinity" / "-Infinity";
 * unknown members ignored; default values not written. */

/* A field's JSON name (protobuf's lowerCamelCase) into buf. */
static const char *json_name(const char *snake, char *buf, size_t size)
{
    size_t o = 0;

    for (size_t i = 0; snake[i] != '\0' && o + 1 < size; i++) {
        if (snake[i] == '_' && snake[i + 1] >= 'a' && snake[i + 1] <= 'z')
            buf[o++] = (char)(snake[++i] - 'a' + 'A');
        else if (snake[i] != '_' || snake[i + 1] < '0' || snake[i + 1] > '9')
            buf[o++] = snake[i];
    }
    buf[o] = '\0';
    return buf;
}

/* Whether a bytes field is a trace or span id (hex in JSON), and its size. */
static bool pb_is_id(const ProtobufCFieldDescriptor *f, size_t *nbytes)
{
    if (f->type != PROTOBUF_C_TYPE_BYTES)
        return false;
    if (strcmp(f->name, "trace_id") == 0)
        *nbytes = 16;
    else if (strcmp(f->name, "span_id") == 0 || strcmp(f->name, "parent_span_id") == 0)
        *nbytes = 8;
    else
        return false;
    return true;
}

/* The size of one element of a repeated field of type t. */
static size_t pb_elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:                    /* 64-bit integers, double */
        return 8;
    }
}

static sf_status pd_msg(dec *d, const ProtobufCMessageDescriptor *md, json_object *obj,
                        void **out);

static sf_status pd_enum(dec *d, const ProtobufCEnumDescriptor *ed, json_object *v, int *out)
{
    bool neg;
    uint64_t mag;
    sf_status st;

    if (json_object_is_type(v, json_type_string)) {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(
            ed, json_object_get_string(v));

        if (ev == NULL || strlen(ev->name) != (size_t)json_object_get_string_len(v))
            return fail(d, "unknown enum name");
        *out = ev->value;
        return SF_OK;
    }
    st = get_integer(d, v, true, INT32_MAX, &neg, &mag);
    if (st == SF_OK)
        *out = neg ? -(int)(mag - 1) - 1 : (int)mag;
    return st;
}

/* One value of field f from v into `out` (the member, or an element). */
static sf_status pd_value(dec *d, const ProtobufCFieldDescriptor *f, json_object *v, void *out)
{
    bool neg;
    uint64_t mag;
    size_t nbytes;
    sf_status st;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: {
        int32_t x;

        if ((st = get_integer(d, v, true, INT32_MAX, &neg, &mag)) != SF_OK)
            return st;
        x = neg ? -(int32_t)(mag - 1) - 1 : (int32_t)mag;
        memcpy(out, &x, sizeof(x));
        return SF_OK;
    }
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: {
        uint32_t x = 0;

        if ((st = get_uint32(d, v, &x)) == SF_OK)
            memcpy(out, &x, sizeof(x));
        return st;
    }
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: {
        int64_t x = 0;

        if ((st = get_int64(d, v, &x)) == SF_OK)
            memcpy(out, &x, sizeof(x));
        return st;
    }
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: {
        uint64_t x = 0;

        if ((st = get_uint64(d, v, &x)) == SF_OK)
            memcpy(out, &x, sizeof(x));
        return st;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FLOAT: {
        double x = 0;

        if ((st = get_double(d, v, &x)) != SF_OK)
            return st;
        if (f->type == PROTOBUF_C_TYPE_FLOAT) {
            float y = (float)x;

            memcpy(out, &y, sizeof(y));
        } else {
            memcpy(out, &x, sizeof(x));
        }
        return SF_OK;
    }
    case PROTOBUF_C_TYPE_BOOL:
        return get_bool(d, v, out);
    case PROTOBUF_C_TYPE_ENUM: {
        int x = 0;

        if ((st = pd_enum(d, f->descriptor, v, &x)) == SF_OK)
            memcpy(out, &x, sizeof(x));
        return st;
    }
    case PROTOBUF_C_TYPE_STRING: {
        char *x = NULL;

        /* a oneof member's "" differs from unset (see get_string_ex) */
        st = get_string_ex(d, v, (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0, &x);
        memcpy(out, &x, sizeof(x));
        return st;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return pb_is_id(f, &nbytes) ? get_hex_id(d, v, nbytes, out) : get_base64(d, v, out);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *md = f->descriptor;
        /* each array / kvlist is a level, as for traces and the codec */
        const bool level = md == &opentelemetry__proto__common__v1__array_value__descriptor ||
                           md == &opentelemetry__proto__common__v1__key_value_list__descriptor;
        void *m = NULL;

        if (level && d->depth >= d->max_depth)
            return fail(d, "nesting deeper than %u", d->max_depth);
        d->depth += level;
        st = pd_msg(d, md, v, &m);
        d->depth -= level;
        memcpy(out, &m, sizeof(m));
        return st;
    }
    }
    return fail(d, "a field of a type not mapped");
}

/* Field f of `msg` from v (not null). */
static sf_status pd_field(dec *d, const ProtobufCFieldDescriptor *f, json_object *v, char *msg)
{
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)(void *)(msg + f->quantifier_offset);

        if (*which != 0 && *which != f->id)
            return fail(d, "a second member of a oneof");
        *which = f->id;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        const size_t size = pb_elem_size(f->type);
        size_t len;
        char *elems;

        if (!json_object_is_type(v, json_type_array))
            return fail(d, "expected an array");
        len = json_object_array_length(v);
        if (len == 0)
            return SF_OK;
        elems = sf_arena_alloc(d->arena, len * size);
        if (elems == NULL)
            return oom(d);
        memset(elems, 0, len * size);
        for (size_t i = 0; i < len; i++) {
            json_object *e = json_object_array_get_idx(v, i);
            size_t mark = path_push(d, "[%zu]", i);
            sf_status st = e == NULL ? fail(d, "null in an array")
                                     : pd_value(d, f, e, elems + i * size);

            path_pop(d, mark);
            if (st != SF_OK)
                return st;
        }
        memcpy(msg + f->quantifier_offset, &len, sizeof(len));
        memcpy(msg + f->offset, &elems, sizeof(elems));
        return SF_OK;
    }
    return pd_value(d, f, v, msg + f->offset);
}

static sf_status pd_msg(dec *d, const ProtobufCMessageDescriptor *md, json_object *obj,
                        void **out)
{
    uint64_t seen = 0;
    char *m;

    *out = NULL;
    if (!json_object_is_type(obj, json_type_object))
        return fail(d, "expected an object");
    m = sf_arena_alloc(d->arena, md->sizeof_message);
    if (m == NULL)
        return oom(d);
    protobuf_c_message_init(md, m);
    json_object_object_foreach(obj, key, val) {
        const ProtobufCFieldDescriptor *f = NULL;
        char camel[64];
        unsigned i;
        size_t mark;
        sf_status st = SF_OK;

        for (i = 0; i < md->n_fields && i < 64; i++) {
            if (strcmp(key, md->fields[i].name) == 0 ||
                strcmp(key, json_name(md->fields[i].name, camel, sizeof(camel))) == 0) {
                f = &md->fields[i];
                break;
            }
        }
        if (f == NULL)
            continue;           /* unknown fields are ignored (OTLP spec) */
        mark = path_push(d, d->path_len > 0 ? ".%s" : "%s",
                         json_name(f->name, camel, sizeof(camel)));
        if (seen & (UINT64_C(1) << i))
            st = fail(d, "field given twice");
        else if (val != NULL)   /* null: the field keeps its default */
            st = pd_field(d, f, val, m);
        seen |= UINT64_C(1) << i;
        path_pop(d, mark);
        if (st != SF_OK)
            return st;
    }
    *out = m;
    return SF_OK;
}

static const ProtobufCMessageDescriptor *const request_desc[SF_SIGNAL_COUNT] = {
    [SF_SIGNAL_TRACES] =
        &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
    [SF_SIGNAL_LOGS] =
        &opentelemetry__proto__collector__logs__v1__export_logs_service_request__descriptor,
    [SF_SIGNAL_METRICS] =
        &opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__descriptor,
};

static sf_status pd_request(dec *d, sf_signal s, json_object *root, void **out)
{
    return pd_msg(d, request_desc[s], root, out);
}

/* ---- encoding ---- */

static json_object *pe_msg(enc *e, const ProtobufCMessageDescriptor *md, const char *m);

static json_object *jhex(enc *e, const ProtobufCBinaryData *b)
{
    static const char digits[] = "0123456789abcdef";
    char buf[2 * 16 + 1];

    if (b->len > 16) {          /* the codec let no longer id through */
        e->failed = true;
        return NULL;
    }
    for (size_t i = 0; i < b->len; i++) {
        buf[2 * i] = digits[b->data[i] >> 4];
        buf[2 * i + 1] = digits[b->data[i] & 15];
    }
    return json_object_new_string_len(buf, (int)(2 * b->len));
}

/* add() for a key that does not outlive the call: json-c copies it. */
static void add_copy(enc *e, json_object *o, const char *key, json_object *v)
{
    if (o == NULL || v == NULL ||
        json_object_object_add_ex(o, key, v, JSON_C_OBJECT_ADD_KEY_IS_NEW) != 0) {
        json_object_put(v);
        e->failed = true;
    }
}

/* One value of field f at p. */
static json_object *pe_value(enc *e, const ProtobufCFieldDescriptor *f, const char *p)
{
    size_t nbytes;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t x;

        memcpy(&x, p, sizeof(x));
        return json_object_new_int64(x);
    }
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: {
        uint32_t x;

        memcpy(&x, p, sizeof(x));
        return json_object_new_int64(x);
    }
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64: {
        int64_t x;
        char buf[24];

        memcpy(&x, p, sizeof(x));
        snprintf(buf, sizeof(buf), "%" PRId64, x);
        return json_object_new_string(buf);
    }
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: {
        uint64_t x;

        memcpy(&x, p, sizeof(x));
        return jdec_u64(x);
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
        double x;

        memcpy(&x, p, sizeof(x));
        return jdouble(x);
    }
    case PROTOBUF_C_TYPE_FLOAT: {
        float x;

        memcpy(&x, p, sizeof(x));
        return jdouble(x);
    }
    case PROTOBUF_C_TYPE_BOOL: {
        protobuf_c_boolean x;

        memcpy(&x, p, sizeof(x));
        return json_object_new_boolean(x);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *x;

        memcpy(&x, p, sizeof(x));
        return jstr(x != NULL ? x : "");
    }
    case PROTOBUF_C_TYPE_BYTES:
        return pb_is_id(f, &nbytes) ? jhex(e, (const ProtobufCBinaryData *)(const void *)p)
                                    : b64_encode((const ProtobufCBinaryData *)(const void *)p);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const char *x;

        memcpy(&x, p, sizeof(x));
        return pe_msg(e, f->descriptor, x);
    }
    }
    e->failed = true;
    return NULL;
}

/* Whether singular field f at p holds its default (then it is not written). */
static bool pe_default(const ProtobufCFieldDescriptor *f, const char *p)
{
    static const char zero[sizeof(ProtobufCBinaryData)];
    const char *x;

    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        memcpy(&x, p, sizeof(x));
        return x == NULL || (f->type == PROTOBUF_C_TYPE_STRING && x[0] == '\0');
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)(const void *)p)->len == 0;
    default:
        return memcmp(p, zero, pb_elem_size(f->type)) == 0;
    }
}

static json_object *pe_msg(enc *e, const ProtobufCMessageDescriptor *md, const char *m)
{
    json_object *o = new_obj(e);

    for (unsigned i = 0; i < md->n_fields && o != NULL; i++) {
        const ProtobufCFieldDescriptor *f = &md->fields[i];
        char camel[64];

        json_name(f->name, camel, sizeof(camel));
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n;
            const char *elems;
            json_object *arr;

            memcpy(&n, m + f->quantifier_offset, sizeof(n));
            memcpy(&elems, m + f->offset, sizeof(elems));
            if (n == 0)
                continue;
            arr = json_object_new_array_ext((int)n);
            for (size_t k = 0; k < n && arr != NULL; k++)
                push(e, arr, pe_value(e, f, elems + k * pb_elem_size(f->type)));
            add_copy(e, o, camel, arr);
        } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;

            memcpy(&which, m + f->quantifier_offset, sizeof(which));
            if (which == f->id)
                add_copy(e, o, camel, pe_value(e, f, m + f->offset));
        } else if (!pe_default(f, m + f->offset)) {
            add_copy(e, o, camel, pe_value(e, f, m + f->offset));
        }
    }
    return o;
}

/* ==== every signal, as protobuf bytes ===================================== */

bool sf_otlp_json_maps(sf_signal s)
{
    return (unsigned)s < SF_SIGNAL_COUNT;
}

sf_status sf_otlp_json_to_wire(sf_signal s, sf_arena *arena, const char *json, size_t len,
                               unsigned max_depth, const uint8_t **out, size_t *out_len,
                               char *err, size_t err_size)
{
    sf_otlp_request *req = NULL;
    uint8_t *packed;
    size_t n;
    sf_status st;

    *out = NULL;
    *out_len = 0;
    if (!sf_otlp_json_maps(s)) {
        if (err != NULL && err_size > 0)
            snprintf(err, err_size, "otlp/json for %s is not supported", sf_signal_name(s));
        return SF_UNSUPPORTED;
    }
    {
        dec d = { .arena = arena, .max_depth = max_depth, .err = err, .err_size = err_size };
        void *tree = NULL;

        st = decode_text(&d, json, len, max_depth, s, &tree);
        req = tree;
    }
    if (st != SF_OK)
        return st;
    n = protobuf_c_message_get_packed_size(&req->base);
    packed = sf_arena_alloc(arena, n ? n : 1);
    if (packed == NULL)
        return SF_ENOMEM;
    *out_len = protobuf_c_message_pack(&req->base, packed);
    *out = packed;
    return SF_OK;
}

sf_status sf_otlp_json_from_wire(sf_signal s, sf_arena *arena, const uint8_t *wire, size_t len,
                                 char **out, size_t *out_len)
{
    ProtobufCMessage *req;

    *out = NULL;
    *out_len = 0;
    if (!sf_otlp_json_maps(s))
        return SF_UNSUPPORTED;
    req = protobuf_c_message_unpack(request_desc[s], sf_arena_pb_allocator(arena), len, wire);
    if (req == NULL)
        return sf_arena_failed(arena) ? SF_ENOMEM : SF_INVALID;
    if (s == SF_SIGNAL_TRACES)
        return sf_otlp_json_encode((const sf_otlp_request *)req, out, out_len);
    {
        enc e = { .failed = false };

        return finish(&e, pe_msg(&e, request_desc[s], (const char *)req), out, out_len);
    }
}

sf_status sf_otlp_json_encode_partial(sf_signal s, int64_t rejected, const char *message,
                                      char **out, size_t *out_len)
{
    static const char *const rejected_key[SF_SIGNAL_COUNT] = {
        [SF_SIGNAL_TRACES] = "rejectedSpans",
        [SF_SIGNAL_LOGS] = "rejectedLogRecords",
        [SF_SIGNAL_METRICS] = "rejectedDataPoints",
    };
    enc e = { .failed = false };
    json_object *root = new_obj(&e);

    *out = NULL;
    *out_len = 0;
    if ((unsigned)s >= SF_SIGNAL_COUNT) {
        json_object_put(root);
        return SF_INVALID;
    }
    if (rejected > 0 || (message != NULL && message[0] != '\0')) {
        json_object *po = new_obj(&e);

        if (rejected > 0) {
            char buf[24];

            snprintf(buf, sizeof(buf), "%" PRId64, rejected);
            add(&e, po, rejected_key[s], json_object_new_string(buf));
        }
        if (message != NULL && message[0] != '\0')
            add_str(&e, po, "errorMessage", message);
        add(&e, root, "partialSuccess", po);
    }
    return finish(&e, root, out, out_len);
}
