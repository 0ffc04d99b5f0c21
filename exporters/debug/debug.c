/* exporters/debug/debug.c: the `debug` exporter: prints what leaves the
 * pipeline to stderr, at three verbosities (a line per batch, a line per
 * span, every field).
 *
 * DESIGN: consume() runs on receiver threads and prints synchronously: the
 * whole text of a batch is built in memory first (bounded at
 * DEBUG_TEXT_MAX), then written under one process-wide lock, so lines of
 * different batches never interleave. Span names, keys and values come
 * from clients: control characters, quotes and backslashes are escaped so
 * they cannot forge lines or drive the operator's terminal. */
#include "debug.h"
#include "sf_dynbuf.h"
#include "sf_otlp_json.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Longest text one batch prints; the rest is cut with a note. */
#define DEBUG_TEXT_MAX (8u << 20)

typedef struct debugexp {
    const char *id;
    sf_counters *counters;
    int verbosity;
} debugexp;

/* Several debug exporters share one stderr. */
static pthread_mutex_t stderr_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- text ------------------------------------------------------------------ */

typedef struct text {
    sf_dynbuf b;                /* bounded: content stops short, room is left for the note */
    bool oom;
    bool cut;                   /* reached the bound */
} text;

static void note_failure(text *t, sf_status st)
{
    if (st == SF_TOOBIG)
        t->cut = true;
    else if (st != SF_OK)
        t->oom = true;
}

static void put(text *t, const char *s, size_t n)
{
    if (!t->oom && !t->cut)
        note_failure(t, sf_dynbuf_add(&t->b, s, n));
}

static void putf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(text *t, const char *fmt, ...)
{
    va_list ap;

    if (t->oom || t->cut)
        return;
    va_start(ap, fmt);
    note_failure(t, sf_dynbuf_vprintf(&t->b, fmt, ap));
    va_end(ap);
}

static void put_quoted(text *t, const char *s)
{
    const char *run;

    put(t, "\"", 1);
    for (run = s = s ? s : ""; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c >= 0x20 && c != 0x7f && c != '"' && c != '\\')
            continue;
        put(t, run, (size_t)(s - run));
        if (c == '"' || c == '\\')
            putf(t, "\\%c", c);
        else if (c == '\n')
            put(t, "\\n", 2);
        else if (c == '\t')
            put(t, "\\t", 2);
        else
            putf(t, "\\x%02x", c);
        run = s + 1;
    }
    put(t, run, (size_t)(s - run));
    put(t, "\"", 1);
}

static void put_hex(text *t, const ProtobufCBinaryData *b)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < b->len; i++) {
        char two[2] = { digits[b->data[i] >> 4], digits[b->data[i] & 15] };

        put(t, two, 2);
    }
}

static void put_indent(text *t, int depth)
{
    for (int i = 0; i < depth; i++)
        put(t, "  ", 2);
}

/* Go-style: 750ns, 12.5us, 1.25ms, 3.000s */
static void put_duration(text *t, uint64_t start, uint64_t end)
{
    uint64_t d;

    if (end < start) {
        put(t, "negative", 8);
        return;
    }
    d = end - start;
    if (d < 1000)
        putf(t, "%" PRIu64 "ns", d);
    else if (d < 1000000)
        putf(t, "%.3fus", (double)d / 1e3);
    else if (d < 1000000000)
        putf(t, "%.3fms", (double)d / 1e6);
    else
        putf(t, "%.3fs", (double)d / 1e9);
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {
        "UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"
    };

    return kind >= 0 && kind < 6 ? names[kind] : "UNKNOWN";
}

static const char *status_name(const sf_otlp_status *st)
{
    static const char *const names[] = { "UNSET", "OK", "ERROR" };
    int code = st ? (int)st->code : 0;

    return code >= 0 && code < 3 ? names[code] : "UNKNOWN";
}

/* "trace_id<eq>HEX span_id<eq>HEX": a link's or a span's pair of ids. */
static void put_ids(text *t, const char *eq, const ProtobufCBinaryData *trace,
                    const ProtobufCBinaryData *span)
{
    putf(t, "trace_id%s", eq);
    put_hex(t, trace);
    putf(t, " span_id%s", eq);
    put_hex(t, span);
}

/* ---- detailed: every field ---------------------------------------------------- */

static void put_any(text *t, const sf_otlp_any *v);

static void put_kvs(text *t, int depth, sf_otlp_kv *const *kvs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        put_indent(t, depth);
        put(t, "-> ", 3);
        put_quoted(t, kvs[i]->key);
        put(t, ": ", 2);
        put_any(t, kvs[i]->value);
        put(t, "\n", 1);
    }
}

static void put_any(text *t, const sf_otlp_any *v)
{
    if (v == NULL) {
        put(t, "Empty()", 7);
        return;
    }
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        put(t, "Str(", 4);
        put_quoted(t, v->string_value);
        put(t, ")", 1);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        putf(t, "Bool(%s)", v->bool_value ? "true" : "false");
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        putf(t, "Int(%" PRId64 ")", v->int_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        putf(t, "Double(%g)", v->double_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
        put(t, "Bytes(", 6);
        put_hex(t, &v->bytes_value);
        put(t, ")", 1);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        put(t, "Slice([", 7);
        for (size_t i = 0; v->array_value && i < v->array_value->n_values; i++) {
            if (i > 0)
                put(t, ", ", 2);
            put_any(t, v->array_value->values[i]);
        }
        put(t, "])", 2);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        put(t, "Map({", 5);
        for (size_t i = 0; v->kvlist_value && i < v->kvlist_value->n_values; i++) {
            if (i > 0)
                put(t, ", ", 2);
            put_quoted(t, v->kvlist_value->values[i]->key);
            put(t, ": ", 2);
            put_any(t, v->kvlist_value->values[i]->value);
        }
        put(t, "})", 2);
        break;
    default:
        put(t, "Empty()", 7);
        break;
    }
}

static void put_span_detailed(text *t, const sf_otlp_span *s, size_t i)
{
    putf(t, "    span #%zu\n", i);
    put(t, "      trace_id: ", 16);
    put_hex(t, &s->trace_id);
    put(t, "\n      span_id: ", 16);
    put_hex(t, &s->span_id);
    put(t, "\n      parent_span_id: ", 23);
    put_hex(t, &s->parent_span_id);
    put(t, "\n      trace_state: ", 20);
    put_quoted(t, s->trace_state);
    putf(t, "\n      flags: 0x%08" PRIx32 "\n      name: ", s->flags);
    put_quoted(t, s->name);
    putf(t, "\n      kind: %s\n", kind_name((int)s->kind));
    putf(t, "      start_time_unix_nano: %" PRIu64 "\n      end_time_unix_nano: %" PRIu64 "\n",
         s->start_time_unix_nano, s->end_time_unix_nano);
    put(t, "      duration: ", 16);
    put_duration(t, s->start_time_unix_nano, s->end_time_unix_nano);
    putf(t, "\n      status: %s ", status_name(s->status));
    put_quoted(t, s->status ? s->status->message : "");
    putf(t, "\n      attributes: %zu (dropped %" PRIu32 ")\n", s->n_attributes,
         s->dropped_attributes_count);
    put_kvs(t, 4, s->attributes, s->n_attributes);
    putf(t, "      events: %zu (dropped %" PRIu32 ")\n", s->n_events, s->dropped_events_count);
    for (size_t e = 0; e < s->n_events; e++) {
        const sf_otlp_event *ev = s->events[e];

        putf(t, "        event #%zu: name ", e);
        put_quoted(t, ev->name);
        putf(t, " time_unix_nano %" PRIu64 " attributes %zu\n", ev->time_unix_nano,
             ev->n_attributes);
        put_kvs(t, 5, ev->attributes, ev->n_attributes);
    }
    putf(t, "      links: %zu (dropped %" PRIu32 ")\n", s->n_links, s->dropped_links_count);
    for (size_t l = 0; l < s->n_links; l++) {
        const sf_otlp_link *ln = s->links[l];

        putf(t, "        link #%zu: ", l);
        put_ids(t, " ", &ln->trace_id, &ln->span_id);
        put(t, " trace_state ", 13);
        put_quoted(t, ln->trace_state);
        putf(t, " attributes %zu\n", ln->n_attributes);
        put_kvs(t, 5, ln->attributes, ln->n_attributes);
    }
}

static void put_detailed(text *t, const sf_otlp_request *req)
{
    for (size_t r = 0; r < req->n_resource_spans; r++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[r];
        const sf_otlp_resource *res = rs->resource;

        putf(t, "resource_spans #%zu schema_url ", r);
        put_quoted(t, rs->schema_url);
        putf(t, "\n  resource attributes: %zu\n", res ? res->n_attributes : 0);
        if (res != NULL)
            put_kvs(t, 2, res->attributes, res->n_attributes);
        for (size_t s = 0; s < rs->n_scope_spans; s++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[s];
            const sf_otlp_scope *sc = ss->scope;

            putf(t, "  scope_spans #%zu scope ", s);
            put_quoted(t, sc ? sc->name : "");
            put(t, " version ", 9);
            put_quoted(t, sc ? sc->version : "");
            put(t, " schema_url ", 12);
            put_quoted(t, ss->schema_url);
            putf(t, "\n    scope attributes: %zu\n", sc ? sc->n_attributes : 0);
            if (sc != NULL)
                put_kvs(t, 3, sc->attributes, sc->n_attributes);
            for (size_t i = 0; i < ss->n_spans; i++)
                put_span_detailed(t, ss->spans[i], i);
        }
    }
}

/* ---- normal: a line per span ---------------------------------------------------- */

static void put_normal(text *t, const char *id, const sf_otlp_request *req)
{
    for (size_t r = 0; r < req->n_resource_spans; r++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[r];

        for (size_t s = 0; s < rs->n_scope_spans; s++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[s];

            for (size_t i = 0; i < ss->n_spans; i++) {
                const sf_otlp_span *sp = ss->spans[i];

                putf(t, "%s: ", id);
                put_ids(t, "=", &sp->trace_id, &sp->span_id);
                put(t, " name=", 6);
                put_quoted(t, sp->name);
                putf(t, " kind=%s duration=", kind_name((int)sp->kind));
                put_duration(t, sp->start_time_unix_nano, sp->end_time_unix_nano);
                putf(t, " status=%s attributes=%zu\n", status_name(sp->status),
                     sp->n_attributes);
            }
        }
    }
}

/* ---- the exporter ----------------------------------------------------------------- */

static sf_status write_stderr(const char *p, size_t len)
{
    sf_status st = SF_OK;

    pthread_mutex_lock(&stderr_mu);
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            st = SF_IO;
            break;
        }
        p += w;
        len -= (size_t)w;
    }
    pthread_mutex_unlock(&stderr_mu);
    return st;
}

static sf_status debug_create(sf_component *self, const void *config)
{
    const sf_debug_config *c = config;
    debugexp *d = sf_calloc(1, sizeof(*d));

    if (d == NULL)
        return SF_ENOMEM;
    d->id = sf_component_id(self);
    d->counters = sf_component_counters(self);
    d->verbosity = c->verbosity;
    sf_component_set_ctx(self, d);
    return SF_OK;
}

static sf_status debug_start(sf_component *self)
{
    (void)self;
    return SF_OK;
}

/* Logs and metrics: their count, as basic prints it ("3 log records"),
 * and with normal or detailed the batch as one line of OTLP/JSON (the
 * codec's canonical bytes, so only what the fence let through). */
static void put_other_signal(text *t, const debugexp *d, sf_request *batch)
{
    sf_signal sig = batch->signal;
    const char *items = sig == SF_SIGNAL_LOGS ? "log record" : "metric point";
    sf_buf *wire = NULL;
    char *json = NULL;
    size_t len = 0;
    sf_status st;

    putf(t, "%s: %zu %s%s\n", d->id, batch->spans, items, batch->spans == 1 ? "" : "s");
    if (d->verbosity == SF_DEBUG_BASIC)
        return;
    st = sf_request_encode(batch, &wire);
    if (st == SF_OK)
        st = sf_otlp_json_from_wire(sig, batch->arena, wire->data, wire->len, &json, &len);
    sf_buf_unref(wire);
    if (st == SF_OK) {
        put(t, json, len);
        put(t, "\n", 1);
    } else if (st == SF_ENOMEM) {
        t->oom = true;
    } else {
        putf(t, "  (no text for %s: %s)\n", sf_signal_name(sig), sf_status_str(st));
    }
    sf_free(json);
}

/* Receiver threads: print the batch synchronously (the text is built
 * first, then written at once). */
static sf_status debug_consume(sf_component *self, sf_request *batch)
{
    debugexp *d = sf_component_ctx(self);
    text t = { .oom = false };
    sf_status st;

    if (batch->spans == 0)
        return SF_OK;
    sf_dynbuf_init(&t.b, DEBUG_TEXT_MAX - 128);
    if (batch->signal != SF_SIGNAL_TRACES) {
        put_other_signal(&t, d, batch);
    } else {
        if (d->verbosity != SF_DEBUG_BASIC) {
            st = sf_request_tree(batch);
            if (st != SF_OK) {
                sf_dynbuf_release(&t.b);
                return st;
            }
        }
        if (d->verbosity != SF_DEBUG_NORMAL)
            putf(&t, "%s: %zu span%s\n", d->id, batch->spans, batch->spans == 1 ? "" : "s");
        if (d->verbosity == SF_DEBUG_NORMAL)
            put_normal(&t, d->id, batch->req);
        else if (d->verbosity == SF_DEBUG_DETAILED)
            put_detailed(&t, batch->req);
    }
    if (t.oom) {
        sf_dynbuf_release(&t.b);
        return SF_ENOMEM;
    }
    if (t.cut) {
        static const char note[] = "... (cut: the text of this batch passed 8 MiB)\n";

        t.cut = false;
        t.b.max = DEBUG_TEXT_MAX;   /* the note goes in the room left for it */
        put(&t, note, sizeof(note) - 1);
    }
    st = write_stderr(sf_dynbuf_ptr(&t.b), sf_dynbuf_len(&t.b));
    sf_dynbuf_release(&t.b);
    if (st != SF_OK) {
        sf_count(&d->counters->send_failed_spans[SF_REASON_PERMANENT_ERROR], batch->spans);
        return SF_OK;   /* stderr is gone: not the client's problem to retry */
    }
    sf_count(&d->counters->sent_spans, batch->spans);
    return SF_OK;
}

static void debug_shutdown(sf_component *self)
{
    (void)self;
}

static void debug_destroy(sf_component *self)
{
    sf_free(sf_component_ctx(self));
    sf_component_set_ctx(self, NULL);
}

const sf_component_type sf_debug_exporter_type = {
    .name = "debug",
    .kind = SF_KIND_EXPORTER,
    .description = "prints batches or spans to stderr (basic, normal or detailed); logs and "
                   "metrics as counts, or OTLP/JSON lines",
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_debug_config),
    .config_map = sf_debug_config_map,
    .create = debug_create,
    .start = debug_start,
    .consume = debug_consume,
    .shutdown = debug_shutdown,
    .destroy = debug_destroy,
};
