/* tests/processors/test_transform_wire.c: the transform processor on the
 * encoded request (transform_wire.c) against the tree path (transform.c on
 * the protobuf-c decoding): the same requests filtered both ways must decode
 * to the same request with the same removed count; plus the requests handed
 * to the tree path, and the fail-closed proofs (truncated and garbled bytes,
 * allocation failure). Requests are written byte by byte here so that shapes
 * protobuf-c never produces (key after value, repeated counts, unknown
 * fields) are covered. */
#define _GNU_SOURCE     /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal/sf_core.h"
#include "transform_fixtures.h"
#include "bench/sample_batch.h"

#define DEPTH SF_OTLP_DEFAULT_MAX_DEPTH

/* ---- a protobuf writer ------------------------------------------------------ */

typedef struct enc {
    uint8_t *p;
    size_t len, cap;
} enc;

static void e_raw(enc *e, const void *p, size_t n)
{
    if (e->len + n > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        while (cap < e->len + n)
            cap *= 2;
        e->p = sf_realloc(e->p, cap);
        assert_non_null(e->p);
        e->cap = cap;
    }
    if (n > 0)
        memcpy(e->p + e->len, p, n);
    e->len += n;
}

static void e_varint(enc *e, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;

    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    e_raw(e, b, n);
}

static void e_tag(enc *e, uint32_t num, uint32_t wt)
{
    e_varint(e, (uint64_t)num << 3 | wt);
}

static void e_uint(enc *e, uint32_t num, uint64_t v)
{
    e_tag(e, num, 0);
    e_varint(e, v);
}

static void e_fixed64(enc *e, uint32_t num, uint64_t v)
{
    e_tag(e, num, 1);
    e_raw(e, &v, 8);
}

static void e_fixed32(enc *e, uint32_t num, uint32_t v)
{
    e_tag(e, num, 5);
    e_raw(e, &v, 4);
}

static void e_bytes(enc *e, uint32_t num, const void *p, size_t n)
{
    e_tag(e, num, 2);
    e_varint(e, n);
    e_raw(e, p, n);
}

static void e_str(enc *e, uint32_t num, const char *s)
{
    e_bytes(e, num, s, strlen(s));
}

/* Append `child` as field num and empty it. */
static void e_msg(enc *e, uint32_t num, enc *child)
{
    e_bytes(e, num, child->p, child->len);
    sf_free(child->p);
    *child = (enc){ 0 };
}

static void e_free(enc *e)
{
    sf_free(e->p);
    *e = (enc){ 0 };
}

/* KeyValue{key, string value} as field num of e. */
static void e_kv(enc *e, uint32_t num, const char *key, const char *val)
{
    enc kv = { 0 }, v = { 0 };

    e_str(&kv, 1, key);
    e_str(&v, 1, val);
    e_msg(&kv, 2, &v);
    e_msg(e, num, &kv);
}

/* ---- programs ---------------------------------------------------------------- */

typedef struct prog {
    fx_sink s;
    sf_transform_config cfg;
    struct sf_component comp;
} prog;

static void prog_init(prog *p, int error_mode, const char *const *stmts, size_t n)
{
    sf_node *seq = NULL;

    memset(p, 0, sizeof(*p));
    fx_sink_init(&p->s);
    if (n > 0) {
        seq = fx_seq(&p->s, 0);
        seq->n = n;
        seq->items = sf_arena_alloc(p->s.arena, n * sizeof(sf_node *));
        for (size_t i = 0; i < n; i++)
            seq->items[i] = fx_scalar(&p->s, stmts[i]);
    }
    assert_int_equal(sf_transform_program_build(seq, &p->s.sink, &p->cfg.program), SF_OK);
    assert_int_equal(p->s.n_errors, 0);
    p->cfg.error_mode = error_mode;
    p->comp.type = &sf_transform_processor_type;
    p->comp.id = "transform/wire";
    p->comp.config = &p->cfg;
    assert_int_equal(sf_transform_processor_type.create(&p->comp, &p->cfg), SF_OK);
}

static void prog_release(prog *p)
{
    sf_transform_processor_type.destroy(&p->comp);
    fx_sink_release(&p->s);
}

#define PROG(p, mode, stmts) prog_init((p), (mode), (stmts), sizeof(stmts) / sizeof((stmts)[0]))

/* Every context, keep_keys with delete_key after it, status cleared. */
static const char *const prog_all[] = {
    "keep_keys(resource.attributes, [\"service.name\", \"a\"])",
    "keep_keys(scope.attributes, [\"scope.keep\", \"\"])",
    "keep_keys(span.attributes, [\"gen_ai.request.id\", \"a\", \"ab\", \"A\"])",
    "delete_key(span.attributes, \"ab\")",
    "set(span.status.message, \"\")",
    "keep_keys(spanevent.attributes, [\"event.keep\", \"k\"])",
    "keep_keys(link.attributes, [\"link.keep\"])",
};

/* What prog_all lets through, per context, written out independently. */
static const char *const allowed_all[SF_TRANSFORM_CTX_COUNT][4] = {
    [SF_TRANSFORM_RESOURCE] = { "service.name", "a" },
    [SF_TRANSFORM_SCOPE] = { "scope.keep", "" },
    [SF_TRANSFORM_SPAN] = { "gen_ai.request.id", "a", "A" },
    [SF_TRANSFORM_SPANEVENT] = { "event.keep", "k" },
    [SF_TRANSFORM_LINK] = { "link.keep" },
};

static const char *const prog_deletes[] = {
    "delete_key(resource.attributes, \"service.name\")",
    "delete_key(span.attributes, \"a\")",
    "delete_key(span.attributes, \"\")",
    "delete_key(link.attributes, \"b\")",
};

static const char *const prog_empty_allowlist[] = {
    "keep_keys(span.attributes, [])",
    "keep_keys(spanevent.attributes, [])",
};

static const char *const prog_status[] = {
    "set(span.status.message, \"\")",
};

static const char *const prog_scope_resource[] = {
    "keep_keys(scope.attributes, [\"a\"])",
    "keep_keys(resource.attributes, [\"b\", \"k\"])",
    "keep_keys(resource.attributes, [\"k\", \"service.name\"])",
};

static const char *const prog_links_events[] = {
    "keep_keys(link.attributes, [\"a\", \"b\"])",
    "delete_key(spanevent.attributes, \"k\")",
};

/* ---- the two paths ------------------------------------------------------------- */

static void normalise(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
    sf_otlp_request *r =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, in);

    assert_non_null(r);
    *out_len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(r);
    *out = sf_malloc(*out_len + 1);
    assert_non_null(*out);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(r, *out);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
}

static uint64_t removed_count(prog *p)
{
    return sf_counter_get(&p->comp.counters.removed_attributes);
}

/* Filter `in` both ways under p and assert the same result. Returns the
 * removed count; *wire_out (if not NULL) gets the wire path's bytes. */
static uint64_t diff_out(prog *p, const uint8_t *in, size_t len, sf_buf **wire_out)
{
    sf_arena *a = sf_arena_create(4096, 0);
    sf_batch b;
    sf_buf *tree = NULL, *wire = NULL;
    uint8_t *nt, *nw;
    size_t spans, nt_len, nw_len, out_spans;
    uint64_t r0, tree_removed, wire_removed;

    assert_int_equal(sf_otlp_wire_check(in, len, DEPTH, &spans), SF_OK);
    assert_int_equal(sf_batch_decode(&b, a, in, len, DEPTH), SF_OK);
    r0 = removed_count(p);
    assert_int_equal(sf_transform_processor_type.consume(&p->comp, &b), SF_OK);
    tree_removed = removed_count(p) - r0;
    assert_int_equal(sf_batch_encode(&b, &tree), SF_OK);

    r0 = removed_count(p);
    assert_int_equal(sf_transform_processor_type.consume_wire(&p->comp, in, len, spans, &wire),
                     SF_OK);
    wire_removed = removed_count(p) - r0;
    assert_non_null(wire);
    assert_int_equal(wire->spans, spans);
    assert_int_equal(wire_removed, tree_removed);
    assert_true(wire->len <= len);
    assert_int_equal(sf_otlp_wire_check(wire->data, wire->len, DEPTH, &out_spans), SF_OK);
    assert_int_equal(out_spans, spans);

    normalise(tree->data, tree->len, &nt, &nt_len);
    normalise(wire->data, wire->len, &nw, &nw_len);
    assert_int_equal(nw_len, nt_len);
    assert_memory_equal(nw, nt, nt_len);

    sf_free(nt);
    sf_free(nw);
    sf_buf_unref(tree);
    if (wire_out != NULL)
        *wire_out = wire;
    else
        sf_buf_unref(wire);
    sf_batch_release(&b);
    sf_arena_destroy(a);
    return tree_removed;
}

static uint64_t diff(prog *p, const uint8_t *in, size_t len)
{
    return diff_out(p, in, len, NULL);
}

/* The wire path's output decoded (caller frees with free_unpacked);
 * *removed (if not NULL) gets the removed count. */
static sf_otlp_request *wire_decoded(prog *p, const uint8_t *in, size_t len, uint64_t *removed)
{
    sf_buf *w;
    sf_otlp_request *r;
    uint64_t n = diff_out(p, in, len, &w);

    if (removed != NULL)
        *removed = n;
    r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, w->len,
                                                                                        w->data);
    assert_non_null(r);
    sf_buf_unref(w);
    return r;
}

static void free_req(sf_otlp_request *r)
{
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
}

/* ---- hand-built requests ------------------------------------------------------- */

/* A span with `n` string attributes keys[i] and extras chosen by flags. */
enum {
    SP_STATUS_MSG = 1,          /* status {message "secret error", code 2} */
    SP_STATUS_ONLY_MSG = 2,     /* status {message "only message"} */
    SP_STATUS_CODE = 4,         /* status {code 1} */
    SP_EVENTS = 8,
    SP_LINK = 16,
    SP_UNKNOWN = 32,            /* unknown fields in span, event, link, status */
};

static void e_span(enc *ss, const char *const *keys, size_t n, int flags, int64_t dropped)
{
    enc sp = { 0 };

    e_bytes(&sp, 1, "0123456789abcdef", 16);
    e_bytes(&sp, 2, "01234567", 8);
    e_str(&sp, 5, "span");
    e_uint(&sp, 6, 2);
    e_fixed64(&sp, 7, 1000);
    e_fixed64(&sp, 8, 2000);
    for (size_t i = 0; i < n; i++)
        e_kv(&sp, 9, keys[i], "value");
    if (dropped >= 0)
        e_uint(&sp, 10, (uint64_t)dropped);
    if (flags & SP_UNKNOWN) {
        e_str(&sp, 40, "unknown span field");
        e_fixed32(&sp, 41, 7);
    }
    if (flags & SP_EVENTS) {
        for (int i = 0; i < 2; i++) {
            enc ev = { 0 };
            e_fixed64(&ev, 1, 1500);
            e_str(&ev, 2, i ? "second" : "first");
            e_kv(&ev, 3, "event.keep", "x");
            e_kv(&ev, 3, "k", "y");
            e_kv(&ev, 3, "event.secret", "z");
            e_uint(&ev, 4, (uint64_t)i * 5);
            if (flags & SP_UNKNOWN)
                e_uint(&ev, 9, 1);
            e_msg(&sp, 11, &ev);
        }
        e_uint(&sp, 12, 3);
    }
    if (flags & SP_LINK) {
        enc ln = { 0 };
        e_bytes(&ln, 1, "fedcba9876543210", 16);
        e_bytes(&ln, 2, "76543210", 8);
        e_kv(&ln, 4, "link.secret", "s");
        e_kv(&ln, 4, "link.keep", "k");
        e_fixed32(&ln, 6, 1);
        if (flags & SP_UNKNOWN)
            e_str(&ln, 12, "unknown link field");
        e_msg(&sp, 13, &ln);
    }
    if (flags & (SP_STATUS_MSG | SP_STATUS_ONLY_MSG | SP_STATUS_CODE)) {
        enc st = { 0 };
        if (flags & SP_STATUS_MSG)
            e_str(&st, 2, "secret error");
        if (flags & SP_STATUS_ONLY_MSG)
            e_str(&st, 2, "only message");
        if (flags & (SP_STATUS_MSG | SP_STATUS_CODE))
            e_uint(&st, 3, flags & SP_STATUS_MSG ? 2 : 1);
        if (flags & SP_UNKNOWN)
            e_uint(&st, 7, 42);
        e_msg(&sp, 15, &st);
    }
    e_fixed32(&sp, 16, 0x101);
    e_msg(ss, 2, &sp);
}

/* Two ResourceSpans covering every context:
 *  [0] resource {service.name, host.name, secret.token, a} dropped 1, schema;
 *      scope {scope.keep, scope.drop, ""} dropped 0 written out;
 *      span A {gen_ai.request.id, user.email, Gen_AI.Request.Id, a, ab, A}
 *        dropped 3, status message+code, 2 events, 1 link, unknown fields;
 *      span B {user.email}, nothing else;
 *      span C {}, status with only a message;
 *      span D {a}, status with only a code.
 *  [1] no resource, scope without attributes, span E {gen_ai.request.id,
 *      prompt}, unknown fields in the request and ResourceSpans. */
static uint8_t *mk_every_context(size_t *len)
{
    static const char *const a_keys[] = { "gen_ai.request.id", "user.email",
                                          "Gen_AI.Request.Id", "a", "ab", "A" };
    static const char *const b_keys[] = { "user.email" };
    static const char *const d_keys[] = { "a" };
    static const char *const e_keys[] = { "gen_ai.request.id", "prompt" };
    enc req = { 0 }, rs = { 0 }, res = { 0 }, ss = { 0 }, scope = { 0 };

    e_kv(&res, 1, "service.name", "svc");
    e_kv(&res, 1, "host.name", "h");
    e_kv(&res, 1, "secret.token", "t");
    e_kv(&res, 1, "a", "v");
    e_uint(&res, 2, 1);
    e_msg(&rs, 1, &res);
    e_str(&scope, 1, "scope-name");
    e_str(&scope, 2, "1.0");
    e_kv(&scope, 3, "scope.keep", "k");
    e_kv(&scope, 3, "scope.drop", "d");
    e_kv(&scope, 3, "", "empty key");
    e_uint(&scope, 4, 0);
    e_msg(&ss, 1, &scope);
    e_span(&ss, a_keys, 6, SP_STATUS_MSG | SP_EVENTS | SP_LINK | SP_UNKNOWN, 3);
    e_span(&ss, b_keys, 1, 0, -1);
    e_span(&ss, NULL, 0, SP_STATUS_ONLY_MSG, -1);
    e_span(&ss, d_keys, 1, SP_STATUS_CODE, -1);
    e_str(&ss, 3, "https://schema/ss");
    e_msg(&rs, 2, &ss);
    e_str(&rs, 3, "https://schema/rs");
    e_msg(&req, 1, &rs);

    e_str(&scope, 1, "bare");
    e_msg(&ss, 1, &scope);
    e_span(&ss, e_keys, 2, 0, -1);
    e_msg(&rs, 2, &ss);
    e_uint(&rs, 77, 1);
    e_msg(&req, 1, &rs);
    e_str(&req, 99, "unknown request field");
    *len = req.len;
    return req.p;
}

/* ---- differential: hand-built ---------------------------------------------------- */

static void test_sample_batch(void **state)
{
    static const char *const span_keys[] = { SF_SAMPLE_SPAN_KEYS };
    static const char *const event_keys[] = { SF_SAMPLE_EVENT_KEYS };
    char keep_span[512] = "keep_keys(span.attributes, [", keep_event[128];
    const char *stmts[3] = { keep_span, "set(span.status.message, \"\")", keep_event };
    size_t len = 0;
    uint8_t *in = sf_sample_request(100, 3, &len);
    sf_buf *w;
    prog p;

    (void)state;
    for (size_t i = 0; i < sizeof(span_keys) / sizeof(span_keys[0]); i++) {
        strcat(keep_span, i ? ", \"" : "\"");
        strcat(keep_span, span_keys[i]);
        strcat(keep_span, "\"");
    }
    strcat(keep_span, "])");
    snprintf(keep_event, sizeof(keep_event), "keep_keys(spanevent.attributes, [\"%s\"])",
             event_keys[0]);
    prog_init(&p, SF_ERROR_MODE_PROPAGATE, stmts, 3);
    assert_non_null(in);
    /* 12 - 5 span attributes, 2 events x (3 - 1) */
    assert_int_equal(diff_out(&p, in, len, &w), 100 * (7 + 4));
    assert_null(memmem(w->data, w->len, "4242-1111", 9));          /* status message */
    assert_null(memmem(w->data, w->len, "jane.doe", 8));           /* user.email */
    assert_null(memmem(w->data, w->len, "client.ip", 9));          /* event key */
    assert_non_null(memmem(w->data, w->len, "gen_ai.request.temperature", 26));
    sf_buf_unref(w);
    prog_release(&p);
    sf_free(in);
}

static void test_every_context(void **state)
{
    size_t len;
    uint8_t *in = mk_every_context(&len);
    sf_otlp_request *r;
    sf_otlp_span *a;
    uint64_t removed;
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    r = wire_decoded(&p, in, len, &removed);
    /* resource 2, scope 1, span A 3 (ab deleted after being kept), B 1,
     * E 1, events 2 x 1, link 1 */
    assert_int_equal(removed, 2 + 1 + 3 + 1 + 1 + 2 + 1);
    assert_int_equal(r->n_resource_spans, 2);
    assert_int_equal(r->resource_spans[0]->resource->n_attributes, 2);
    assert_string_equal(r->resource_spans[0]->resource->attributes[0]->key, "service.name");
    assert_string_equal(r->resource_spans[0]->resource->attributes[1]->key, "a");
    assert_int_equal(r->resource_spans[0]->resource->dropped_attributes_count, 3);
    assert_int_equal(r->resource_spans[0]->scope_spans[0]->scope->n_attributes, 2);
    assert_int_equal(r->resource_spans[0]->scope_spans[0]->scope->dropped_attributes_count, 1);
    a = r->resource_spans[0]->scope_spans[0]->spans[0];
    assert_int_equal(a->n_attributes, 3);
    assert_string_equal(a->attributes[0]->key, "gen_ai.request.id");
    assert_string_equal(a->attributes[1]->key, "a");
    assert_string_equal(a->attributes[2]->key, "A");
    assert_int_equal(a->dropped_attributes_count, 6);
    assert_non_null(a->status);
    assert_string_equal(a->status->message, "");
    assert_int_equal(a->status->code, 2);
    assert_int_equal(a->n_events, 2);
    assert_int_equal(a->events[0]->n_attributes, 2);
    assert_int_equal(a->events[0]->dropped_attributes_count, 1);
    assert_int_equal(a->events[1]->dropped_attributes_count, 6);
    assert_int_equal(a->dropped_events_count, 3);
    assert_int_equal(a->links[0]->n_attributes, 1);
    assert_string_equal(a->links[0]->attributes[0]->key, "link.keep");
    assert_int_equal(a->links[0]->flags, 1);
    assert_int_equal(a->flags, 0x101);
    assert_null(r->resource_spans[0]->scope_spans[0]->spans[1]->status);
    assert_string_equal(r->resource_spans[0]->scope_spans[0]->spans[2]->status->message, "");
    assert_int_equal(r->resource_spans[0]->scope_spans[0]->spans[3]->status->code, 1);
    assert_string_equal(r->resource_spans[1]->scope_spans[0]->scope->name, "bare");
    free_req(r);
    prog_release(&p);

    /* the same request under every other program */
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_deletes);
    assert_int_equal(diff(&p, in, len), 1 + 1 + 1 + 0);
    prog_release(&p);
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_empty_allowlist);
    assert_int_equal(diff(&p, in, len), 6 + 1 + 1 + 2 + 6);
    prog_release(&p);
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_status);
    assert_int_equal(diff(&p, in, len), 0);
    prog_release(&p);
    PROG(&p, SF_ERROR_MODE_IGNORE, prog_scope_resource);
    assert_int_equal(diff(&p, in, len), 3 + 4);
    prog_release(&p);
    PROG(&p, SF_ERROR_MODE_SILENT, prog_links_events);
    assert_int_equal(diff(&p, in, len), 2 + 2);
    prog_release(&p);
    sf_free(in);
}

/* No statement at all: the bytes go through as they came. */
static void test_no_statements_copies(void **state)
{
    size_t len;
    uint8_t *in = mk_every_context(&len);
    sf_buf *w;
    prog p;

    (void)state;
    prog_init(&p, SF_ERROR_MODE_PROPAGATE, NULL, 0);
    assert_int_equal(diff_out(&p, in, len, &w), 0);
    assert_int_equal(w->len, len);
    assert_memory_equal(w->data, in, len);
    sf_buf_unref(w);
    prog_release(&p);
    sf_free(in);
}

/* Statements that remove nothing from this request: same length. */
static void test_nothing_removed_keeps_size(void **state)
{
    static const char *const keep_all[] = {
        "keep_keys(span.attributes, [\"a\", \"b\"])",
    };
    static const char *const keys[] = { "a", "b", "a" };
    enc req = { 0 }, rs = { 0 }, ss = { 0 };
    sf_buf *w;
    prog p;

    (void)state;
    e_span(&ss, keys, 3, SP_EVENTS, 9);
    e_span(&ss, keys, 2, 0, -1);
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);
    PROG(&p, SF_ERROR_MODE_PROPAGATE, keep_all);
    assert_int_equal(diff_out(&p, req.p, req.len, &w), 0);
    assert_int_equal(w->len, req.len);
    sf_buf_unref(w);
    prog_release(&p);
    e_free(&req);
}

/* dropped_attributes_count: absent, 0, 5, near and at UINT32_MAX, given
 * twice (the last wins), wider than 32 bits (protobuf-c keeps the low 32). */
static void test_dropped_counts(void **state)
{
    static const struct {
        int n;
        uint64_t v[2];
        uint32_t want;
    } cases[] = {
        { 0, { 0 }, 2 },
        { 1, { 0 }, 2 },
        { 1, { 5 }, 7 },
        { 1, { UINT32_MAX - 1 }, UINT32_MAX },
        { 1, { UINT32_MAX }, UINT32_MAX },
        { 2, { 7, 2 }, 4 },
        { 2, { UINT32_MAX, 0 }, 2 },
        { 1, { (1ull << 40) | 3 }, 5 },
        { 1, { UINT64_MAX }, UINT32_MAX },
    };
    static const char *const keys[] = { "secret1", "a", "secret2" };
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enc req = { 0 }, rs = { 0 }, ss = { 0 }, sp = { 0 };
        sf_otlp_request *r;

        e_bytes(&sp, 1, "0123456789abcdef", 16);
        /* counts before, between and after the attributes */
        if (cases[i].n > 0)
            e_uint(&sp, 10, cases[i].v[0]);
        e_kv(&sp, 9, keys[0], "x");
        e_kv(&sp, 9, keys[1], "x");
        if (cases[i].n > 1)
            e_uint(&sp, 10, cases[i].v[1]);
        e_kv(&sp, 9, keys[2], "x");
        e_str(&sp, 5, "name after");
        e_msg(&ss, 2, &sp);
        e_msg(&rs, 2, &ss);
        e_msg(&req, 1, &rs);
        r = wire_decoded(&p, req.p, req.len, NULL);
        assert_int_equal(r->resource_spans[0]->scope_spans[0]->spans[0]->dropped_attributes_count,
                         cases[i].want);
        assert_int_equal(r->resource_spans[0]->scope_spans[0]->spans[0]->n_attributes, 1);
        free_req(r);
        e_free(&req);
    }
    prog_release(&p);
}

/* KeyValue shapes: key after value, no key, empty key, keys differing in
 * case only, the key given twice (the last wins), unknown fields, an empty
 * KeyValue, a value that nests arrays and lists. */
static void test_keyvalue_shapes(void **state)
{
    enc req = { 0 }, rs = { 0 }, ss = { 0 }, sp = { 0 }, kv = { 0 }, v = { 0 }, scope = { 0 };
    sf_otlp_request *r;
    sf_otlp_span *s;
    prog p;

    (void)state;
    /* value first, then key "a" (kept) */
    e_str(&v, 1, "value first");
    e_msg(&kv, 2, &v);
    e_str(&kv, 1, "a");
    e_msg(&sp, 9, &kv);
    /* value only: key "" (not in the span allowlist) */
    e_uint(&v, 3, 12);
    e_msg(&kv, 2, &v);
    e_msg(&sp, 9, &kv);
    /* empty KeyValue */
    e_msg(&sp, 9, &kv);
    /* case variants of "a" and "gen_ai.request.id" */
    e_kv(&sp, 9, "GEN_AI.REQUEST.ID", "x");
    e_kv(&sp, 9, "gen_ai.request.iD", "x");
    e_kv(&sp, 9, "gen_ai.request.id", "x");
    /* key twice: secret then allowed -> kept; allowed then secret -> removed */
    e_str(&kv, 1, "secret");
    e_str(&kv, 1, "A");
    e_str(&v, 1, "x");
    e_msg(&kv, 2, &v);
    e_msg(&sp, 9, &kv);
    e_str(&kv, 1, "A");
    e_str(&kv, 1, "secret");
    e_msg(&sp, 9, &kv);
    /* unknown fields around the key */
    e_uint(&kv, 5, 1);
    e_str(&kv, 1, "a");
    e_fixed64(&kv, 6, 2);
    e_msg(&sp, 9, &kv);
    /* nested value: kvlist holding a non-allowlisted key, array of arrays */
    {
        enc list = { 0 }, inner = { 0 }, iv = { 0 }, arr = { 0 }, av = { 0 };
        e_str(&iv, 1, "nested");
        e_str(&inner, 1, "nested.secret.key");
        e_msg(&inner, 2, &iv);
        e_msg(&list, 1, &inner);
        e_msg(&v, 6, &list);
        e_msg(&kv, 2, &v);
        e_str(&kv, 1, "a");
        e_msg(&sp, 9, &kv);
        e_uint(&av, 3, 7);
        e_msg(&arr, 1, &av);
        e_msg(&av, 5, &arr);
        e_msg(&arr, 1, &av);
        e_msg(&v, 5, &arr);
        e_str(&kv, 1, "ab");
        e_msg(&kv, 2, &v);
        e_msg(&sp, 9, &kv);
    }
    e_msg(&ss, 2, &sp);
    /* the scope allowlist holds "": an absent key and an empty one match it */
    e_kv(&scope, 3, "", "empty");
    e_str(&v, 1, "no key");
    e_msg(&kv, 2, &v);
    e_msg(&scope, 3, &kv);
    e_kv(&scope, 3, "Scope.Keep", "x");
    e_msg(&ss, 1, &scope);
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);

    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    r = wire_decoded(&p, req.p, req.len, NULL);
    s = r->resource_spans[0]->scope_spans[0]->spans[0];
    assert_int_equal(s->n_attributes, 5);
    assert_string_equal(s->attributes[0]->key, "a");
    assert_string_equal(s->attributes[0]->value->string_value, "value first");
    assert_string_equal(s->attributes[1]->key, "gen_ai.request.id");
    assert_string_equal(s->attributes[2]->key, "A");
    assert_string_equal(s->attributes[3]->key, "a");
    assert_string_equal(s->attributes[4]->key, "a");
    assert_int_equal(s->attributes[4]->value->kvlist_value->n_values, 1);
    assert_int_equal(s->dropped_attributes_count, 6);
    assert_int_equal(r->resource_spans[0]->scope_spans[0]->scope->n_attributes, 2);
    free_req(r);
    prog_release(&p);

    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_deletes);
    assert_int_equal(diff(&p, req.p, req.len), 3 + 2);     /* "a" x3, "" x2 */
    prog_release(&p);
    e_free(&req);
}

/* Status: absent, empty, message only, code only, both, repeated message
 * fields, unknown fields; cleared only where it has a message. */
static void test_status_shapes(void **state)
{
    enc req = { 0 }, rs = { 0 }, ss = { 0 };
    sf_otlp_request *r;
    sf_otlp_span **s;
    prog p;

    (void)state;
    for (int shape = 0; shape < 6; shape++) {
        enc sp = { 0 }, st = { 0 };

        e_bytes(&sp, 1, "0123456789abcdef", 16);
        e_str(&sp, 5, "name");
        if (shape == 2 || shape == 4 || shape == 5)
            e_str(&st, 2, "card 4242-1111-0000");
        if (shape == 3 || shape == 4)
            e_uint(&st, 3, 2);
        if (shape == 5) {
            e_uint(&st, 3, 1);
            e_str(&st, 2, "second message");
            e_bytes(&st, 9, "unknown", 7);
        }
        if (shape > 0)
            e_msg(&sp, 15, &st);
        e_kv(&sp, 9, "a", "x");
        e_msg(&ss, 2, &sp);
    }
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);

    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_status);
    r = wire_decoded(&p, req.p, req.len, NULL);
    s = r->resource_spans[0]->scope_spans[0]->spans;
    assert_null(s[0]->status);
    for (int i = 1; i < 6; i++) {
        assert_non_null(s[i]->status);
        assert_string_equal(s[i]->status->message, "");
    }
    assert_int_equal(s[4]->status->code, 2);
    assert_int_equal(s[5]->status->code, 1);
    assert_int_equal(s[5]->status->base.n_unknown_fields, 1);
    assert_int_equal(removed_count(&p), 0);
    free_req(r);
    prog_release(&p);
    e_free(&req);
}

/* ---- differential: generated ----------------------------------------------------- */

static uint64_t rng;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static uint32_t rn(uint32_t n)
{
    return rnd() % n;
}

static const char *const alphabet[] = {
    "a", "b", "A", "ab", "k", "", "service.name", "gen_ai.request.id", "scope.keep",
    "event.keep", "link.keep", "gen_ai.request.iD",
    "a.key.that.is.longer.than.sixty.four.bytes.to.take.the.last.bit.of.the.mask",
};
#define N_ALPHABET (sizeof(alphabet) / sizeof(alphabet[0]))

static void gen_any(enc *v, int depth);

static void gen_kv(enc *parent, uint32_t num, int depth)
{
    enc kv = { 0 }, v = { 0 };
    int shape = (int)rn(12);
    const char *key = alphabet[rn(N_ALPHABET)];

    gen_any(&v, depth);
    switch (shape) {
    case 0:                             /* no key */
        e_msg(&kv, 2, &v);
        break;
    case 1:                             /* key after value */
        e_msg(&kv, 2, &v);
        e_str(&kv, 1, key);
        break;
    case 2:                             /* key twice */
        e_str(&kv, 1, alphabet[rn(N_ALPHABET)]);
        e_msg(&kv, 2, &v);
        e_str(&kv, 1, key);
        break;
    case 3:                             /* unknown field, no value */
        e_str(&kv, 1, key);
        e_uint(&kv, 3 + rn(20), rnd());
        e_free(&v);
        break;
    default:
        e_str(&kv, 1, key);
        e_msg(&kv, 2, &v);
    }
    e_msg(parent, num, &kv);
}

/* AnyValue content: every kind, arrays and lists nested a few levels. */
static void gen_any(enc *v, int depth)
{
    switch (rn(depth < 4 ? 9 : 6)) {
    case 0: e_str(v, 1, "string value"); break;
    case 1: e_uint(v, 2, rn(2)); break;
    case 2: e_uint(v, 3, (uint64_t)(int64_t)-(int64_t)rn(1000)); break;
    case 3: e_fixed64(v, 4, rnd()); break;
    case 4: e_bytes(v, 7, "\x00\x01\x02", 3); break;
    case 5: break;                      /* no value */
    case 6:
    case 7: {
        enc arr = { 0 };
        for (uint32_t i = rn(4); i > 0; i--) {
            enc item = { 0 };
            gen_any(&item, depth + 1);
            e_msg(&arr, 1, &item);
        }
        e_msg(v, 5, &arr);
        break;
    }
    default: {
        enc list = { 0 };
        for (uint32_t i = rn(4); i > 0; i--)
            gen_kv(&list, 1, depth + 1);
        e_msg(v, 6, &list);
    }
    }
}

static uint64_t gen_dropped_value(void)
{
    static const uint64_t v[] = { 0, 1, 5, UINT32_MAX - 1, UINT32_MAX, (1ull << 33) | 9 };
    return rn(3) == 0 ? rnd() : v[rn(sizeof(v) / sizeof(v[0]))];
}

/* Attributes as field `attrs` with dropped counts (none, one or two, at
 * random places) as field `dropped`. */
static void gen_attrs(enc *m, uint32_t attrs, uint32_t dropped)
{
    uint32_t n = rn(7), counts = rn(4) == 0 ? 2 : rn(2);

    for (uint32_t i = 0; i <= n; i++) {
        if (counts > 0 && rn(n + 1) == 0) {
            e_uint(m, dropped, gen_dropped_value());
            counts--;
        }
        if (i < n)
            gen_kv(m, attrs, 0);
    }
    while (counts-- > 0)
        e_uint(m, dropped, gen_dropped_value());
}

static void gen_span(enc *ss)
{
    enc sp = { 0 };

    e_bytes(&sp, 1, "0123456789abcdef", 16);
    e_bytes(&sp, 2, "01234567", 8);
    if (rn(2))
        e_str(&sp, 3, "trace=state");
    e_str(&sp, 5, "span name");
    e_uint(&sp, 6, rn(6));
    e_fixed64(&sp, 7, rnd());
    gen_attrs(&sp, 9, 10);
    for (uint32_t i = rn(4); i > 0; i--) {
        enc ev = { 0 };
        e_fixed64(&ev, 1, rnd());
        e_str(&ev, 2, "event");
        gen_attrs(&ev, 3, 4);
        if (rn(8) == 0)
            e_bytes(&ev, 15, "?", 1);
        e_msg(&sp, 11, &ev);
    }
    for (uint32_t i = rn(3); i > 0; i--) {
        enc ln = { 0 };
        e_bytes(&ln, 1, "fedcba9876543210", 16);
        gen_attrs(&ln, 4, 5);
        if (rn(2))
            e_fixed32(&ln, 6, rnd());
        e_msg(&sp, 13, &ln);
    }
    if (rn(3)) {
        enc st = { 0 };
        int shape = (int)rn(6);
        if (shape & 1)
            e_str(&st, 2, "status message");
        if (shape & 2)
            e_uint(&st, 3, rn(3));
        if (shape == 4)
            e_fixed32(&st, 4, 1);
        e_msg(&sp, 15, &st);
    }
    if (rn(8) == 0)
        e_uint(&sp, 17 + rn(100), rnd());
    e_fixed64(&sp, 8, rnd());
    if (rn(2))
        e_fixed32(&sp, 16, rnd());
    e_msg(ss, 2, &sp);
}

static uint8_t *gen_request(size_t *len)
{
    enc req = { 0 };

    for (uint32_t i = rn(3) + 1; i > 0; i--) {
        enc rs = { 0 };
        if (rn(4)) {
            enc res = { 0 };
            gen_attrs(&res, 1, 2);
            e_msg(&rs, 1, &res);
        }
        for (uint32_t j = rn(3); j > 0; j--) {
            enc ss = { 0 };
            if (rn(3)) {
                enc scope = { 0 };
                e_str(&scope, 1, "scope");
                if (rn(2))
                    e_str(&scope, 2, "1.2.3");
                gen_attrs(&scope, 3, 4);
                e_msg(&ss, 1, &scope);
            }
            for (uint32_t k = rn(4); k > 0; k--)
                gen_span(&ss);
            if (rn(4) == 0)
                e_str(&ss, 3, "schema");
            e_msg(&rs, 2, &ss);
        }
        if (rn(6) == 0)
            e_str(&rs, 3, "schema");
        if (rn(10) == 0)
            e_bytes(&rs, 50, "", 0);
        e_msg(&req, 1, &rs);
    }
    if (rn(10) == 0)
        e_uint(&req, 2, 1);
    *len = req.len;
    return req.p;
}

static void test_randomized(void **state)
{
    prog p[7];
    uint64_t removed = 0;

    (void)state;
    PROG(&p[0], SF_ERROR_MODE_PROPAGATE, prog_all);
    PROG(&p[1], SF_ERROR_MODE_PROPAGATE, prog_deletes);
    PROG(&p[2], SF_ERROR_MODE_PROPAGATE, prog_empty_allowlist);
    PROG(&p[3], SF_ERROR_MODE_PROPAGATE, prog_status);
    PROG(&p[4], SF_ERROR_MODE_IGNORE, prog_scope_resource);
    PROG(&p[5], SF_ERROR_MODE_PROPAGATE, prog_links_events);
    prog_init(&p[6], SF_ERROR_MODE_PROPAGATE, NULL, 0);
    rng = 0x5eed5eed12345678ull;
    for (int i = 0; i < 2500; i++) {
        size_t len;
        uint8_t *in = gen_request(&len);

        for (int j = 0; j < 7; j++)
            removed += diff(&p[j], in, len);
        sf_free(in);
    }
    /* the generator does reach the filters */
    assert_true(removed > 10000);
    for (int j = 0; j < 7; j++)
        prog_release(&p[j]);
}

/* ---- handed to the tree path --------------------------------------------------- */

/* SF_UNSUPPORTED, nothing counted; the tree path then filters it. */
static void assert_needs_tree(prog *p, const uint8_t *in, size_t len)
{
    size_t spans;
    sf_buf *w = (sf_buf *)&w;

    assert_int_equal(sf_otlp_wire_check(in, len, DEPTH, &spans), SF_OK);
    assert_int_equal(sf_transform_processor_type.consume_wire(&p->comp, in, len, spans, &w),
                     SF_UNSUPPORTED);
    assert_null(w);
    assert_int_equal(sf_counter_get(&p->comp.counters.incoming_items), 0);
    assert_int_equal(sf_counter_get(&p->comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]), 0);
}

static void test_needs_tree(void **state)
{
    enc req = { 0 }, rs = { 0 }, ss = { 0 }, sp = { 0 }, res = { 0 }, st = { 0 };
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);

    /* a key with a NUL: protobuf-c sees "a" */
    e_bytes(&sp, 1, "0123456789abcdef", 16);
    {
        enc kv = { 0 };
        e_bytes(&kv, 1, "a\0secret", 8);
        e_msg(&sp, 9, &kv);
    }
    e_msg(&ss, 2, &sp);
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);
    assert_needs_tree(&p, req.p, req.len);
    e_free(&req);

    /* a resource given twice (protobuf-c merges them) */
    e_kv(&res, 1, "service.name", "x");
    e_msg(&rs, 1, &res);
    e_kv(&res, 1, "secret", "x");
    e_msg(&rs, 1, &res);
    e_msg(&req, 1, &rs);
    assert_needs_tree(&p, req.p, req.len);
    e_free(&req);

    /* a status given twice */
    e_str(&st, 2, "one");
    e_msg(&sp, 15, &st);
    e_str(&st, 2, "two");
    e_msg(&sp, 15, &st);
    e_msg(&ss, 2, &sp);
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);
    assert_needs_tree(&p, req.p, req.len);
    e_free(&req);

    /* a scope given twice */
    e_msg(&ss, 1, &st);
    e_msg(&ss, 1, &st);
    e_msg(&rs, 2, &ss);
    e_msg(&req, 1, &rs);
    assert_needs_tree(&p, req.p, req.len);
    prog_release(&p);

    /* where no statement touches them, repeated messages pass on the wire */
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_links_events);
    assert_int_equal(diff(&p, req.p, req.len), 0);
    prog_release(&p);
    e_free(&req);
}

/* ---- fail closed --------------------------------------------------------------- */

static int rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;

    for (int i = 0; i < 10 && *p < end; i++) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

enum { K_REQ, K_RS, K_RES, K_SS, K_SCOPE, K_SPAN, K_EVENT, K_LINK, K_KV };

/* The test's own walk over filtered bytes: 1 if every attribute key of
 * every context is one prog_all allows, 0 if one is not, -1 malformed. */
static int keys_allowed(const uint8_t *p, const uint8_t *end, int m, int ctx)
{
    const uint8_t *key = (const uint8_t *)"";
    size_t klen = 0;

    while (p < end) {
        uint64_t tag, v;
        int child = -1, child_ctx = -1;

        if (rd_varint(&p, end, &tag) != 0)
            return -1;
        switch (tag & 7) {
        case 0: if (rd_varint(&p, end, &v) != 0) return -1; continue;
        case 1: if (end - p < 8) return -1; p += 8; continue;
        case 5: if (end - p < 4) return -1; p += 4; continue;
        case 2: break;
        default: return -1;
        }
        if (rd_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
            return -1;
        switch (m * 100 + (int)(tag >> 3)) {
        case K_REQ * 100 + 1: child = K_RS; break;
        case K_RS * 100 + 1: child = K_RES; break;
        case K_RS * 100 + 2: child = K_SS; break;
        case K_RES * 100 + 1: child = K_KV; child_ctx = SF_TRANSFORM_RESOURCE; break;
        case K_SS * 100 + 1: child = K_SCOPE; break;
        case K_SS * 100 + 2: child = K_SPAN; break;
        case K_SCOPE * 100 + 3: child = K_KV; child_ctx = SF_TRANSFORM_SCOPE; break;
        case K_SPAN * 100 + 9: child = K_KV; child_ctx = SF_TRANSFORM_SPAN; break;
        case K_SPAN * 100 + 11: child = K_EVENT; break;
        case K_SPAN * 100 + 13: child = K_LINK; break;
        case K_EVENT * 100 + 3: child = K_KV; child_ctx = SF_TRANSFORM_SPANEVENT; break;
        case K_LINK * 100 + 4: child = K_KV; child_ctx = SF_TRANSFORM_LINK; break;
        case K_KV * 100 + 1: key = p; klen = (size_t)v; break;
        default: break;
        }
        if (child >= 0) {
            int rc = keys_allowed(p, p + v, child, child_ctx);
            if (rc != 1)
                return rc;
        }
        p += v;
    }
    if (m == K_KV) {
        for (size_t i = 0; i < 4 && allowed_all[ctx][i] != NULL; i++) {
            if (strlen(allowed_all[ctx][i]) == klen && memcmp(allowed_all[ctx][i], key, klen) == 0)
                return 1;
        }
        return 0;
    }
    return 1;
}

/* The base input of the fail-closed tests: every context and a generated
 * request, concatenated (a request is a list of ResourceSpans). */
static uint8_t *mk_fail_input(size_t *len)
{
    size_t a_len, b_len;
    uint8_t *a = mk_every_context(&a_len), *b, *out;

    rng = 42;
    b = gen_request(&b_len);
    out = sf_malloc(a_len + b_len);
    assert_non_null(out);
    memcpy(out, a, a_len);
    memcpy(out + a_len, b, b_len);
    *len = a_len + b_len;
    sf_free(a);
    sf_free(b);
    return out;
}

/* The filter on `in`, which need not pass the wire check, from a copy of
 * exactly `len` bytes (so ASan sees any read past the end). */
static sf_status filter_exact(const sf_transform_wire *tw, const uint8_t *in, size_t len,
                              sf_buf **out)
{
    uint8_t *copy = sf_malloc(len ? len : 1);
    uint64_t removed;
    sf_status st;

    assert_non_null(copy);
    memcpy(copy, in, len);
    st = sf_transform_wire_filter(tw, copy, len, 0, out, &removed);
    sf_free(copy);
    if (st != SF_OK)
        assert_null(*out);
    return st;
}

/* Every prefix of the request, past the wire check: SF_FILTER, or (cut at
 * a ResourceSpans boundary) SF_OK with only allowlisted keys. */
static void test_truncated_fails_closed(void **state)
{
    size_t len, ok = 0, failed = 0;
    uint8_t *in = mk_fail_input(&len);
    sf_transform_wire *tw;
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    assert_int_equal(sf_transform_wire_create(&p.cfg, &tw), SF_OK);
    for (size_t cut = 0; cut < len; cut++) {
        sf_buf *w = NULL;
        sf_status st = filter_exact(tw, in, cut, &w);

        if (st == SF_OK) {
            assert_int_equal(keys_allowed(w->data, w->data + w->len, K_REQ, -1), 1);
            sf_buf_unref(w);
            ok++;
        } else {
            assert_int_equal(st, SF_FILTER);
            failed++;
        }
    }
    /* OK only at the two ResourceSpans boundaries of the first request, the
     * generated one's and the start */
    assert_true(ok >= 3 && ok <= 8);
    assert_int_equal(ok + failed, len);
    sf_transform_wire_destroy(tw);

    /* under ignore the tree path decides (and its decode refuses it) */
    prog_release(&p);
    PROG(&p, SF_ERROR_MODE_IGNORE, prog_all);
    assert_int_equal(sf_transform_wire_create(&p.cfg, &tw), SF_OK);
    {
        sf_buf *w = NULL;
        assert_int_equal(filter_exact(tw, in, len - 1, &w), SF_UNSUPPORTED);
    }
    sf_transform_wire_destroy(tw);
    prog_release(&p);
    sf_free(in);
}

/* Random byte damage: never a crash, never a key outside the allowlist;
 * where protobuf-c still decodes the damaged request the two paths agree. */
static void test_garbled_fails_closed(void **state)
{
    size_t len, n_ok = 0, n_filter = 0, n_tree = 0, n_diff = 0;
    uint8_t *in = mk_fail_input(&len);
    uint8_t *bad = sf_malloc(len);
    sf_transform_wire *tw;
    prog p;

    (void)state;
    assert_non_null(bad);
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    assert_int_equal(sf_transform_wire_create(&p.cfg, &tw), SF_OK);
    rng = 7;
    for (int i = 0; i < 3000; i++) {
        sf_buf *w = NULL;
        sf_status st;
        sf_otlp_request *r;
        size_t spans;

        memcpy(bad, in, len);
        for (uint32_t k = rn(3) + 1; k > 0; k--) {
            size_t at = rn((uint32_t)len);
            bad[at] = rn(2) ? (uint8_t)rnd() : (uint8_t)(bad[at] ^ (1u << rn(8)));
        }
        st = filter_exact(tw, bad, len, &w);
        if (st == SF_OK) {
            assert_int_equal(keys_allowed(w->data, w->data + w->len, K_REQ, -1), 1);
            sf_buf_unref(w);
            n_ok++;
        } else if (st == SF_UNSUPPORTED) {
            n_tree++;
        } else {
            assert_int_equal(st, SF_FILTER);
            n_filter++;
        }
        if (sf_otlp_wire_check(bad, len, DEPTH, &spans) != SF_OK)
            continue;
        r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len,
                                                                                            bad);
        if (r == NULL)
            continue;
        free_req(r);
        /* protobuf-c takes it: the wire path must not refuse it */
        assert_int_not_equal(st, SF_FILTER);
        if (st == SF_OK) {
            diff(&p, bad, len);
            n_diff++;
        }
    }
    assert_true(n_ok > 0 && n_filter > 0 && n_diff > 0);
    assert_int_equal(n_ok + n_filter + n_tree, 3000);
    sf_transform_wire_destroy(tw);
    prog_release(&p);
    sf_free(bad);
    sf_free(in);
}

/* Known fields with another wire type than their own: protobuf-c refuses
 * the request, so does the wire path (where it walks). */
static void test_wrong_wire_type_fails(void **state)
{
    static const struct { uint32_t msg_field, num, wt; } cases[] = {
        { 9, 1, 0 },            /* KeyValue.key as varint */
        { 9, 2, 0 },            /* KeyValue.value as varint */
        { 0, 9, 0 },            /* Span.attributes as varint */
        { 0, 10, 2 },           /* Span.dropped_attributes_count as bytes */
        { 0, 5, 0 },            /* Span.name as varint */
        { 0, 7, 5 },            /* Span.start_time as fixed32 */
        { 0, 15, 0 },           /* Span.status as varint */
        { 15, 2, 0 },           /* Status.message as varint */
    };
    sf_transform_wire *tw;
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    assert_int_equal(sf_transform_wire_create(&p.cfg, &tw), SF_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enc req = { 0 }, rs = { 0 }, ss = { 0 }, sp = { 0 }, inner = { 0 };
        sf_buf *w = NULL;

        if (cases[i].msg_field == 0) {
            e_tag(&sp, cases[i].num, cases[i].wt);
            if (cases[i].wt == 0)
                e_varint(&sp, 1);
            else if (cases[i].wt == 5)
                e_raw(&sp, "\1\2\3\4", 4);
            else
                e_bytes(&inner, 1, "", 0), e_varint(&sp, inner.len), e_raw(&sp, inner.p, inner.len);
        } else {
            e_tag(&inner, cases[i].num, cases[i].wt);
            e_varint(&inner, 1);
            e_msg(&sp, cases[i].msg_field, &inner);
        }
        e_msg(&ss, 2, &sp);
        e_msg(&rs, 2, &ss);
        e_msg(&req, 1, &rs);
        assert_null(opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, req.len, req.p));
        assert_int_equal(filter_exact(tw, req.p, req.len, &w), SF_FILTER);
        e_free(&inner);
        e_free(&req);
    }
    sf_transform_wire_destroy(tw);
    prog_release(&p);
}

/* No memory for the output: SF_FILTER (propagate) or the tree path. */
static void test_alloc_failure(void **state)
{
    size_t len;
    uint8_t *in = mk_every_context(&len);
    sf_buf *w = NULL;
    prog p;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    sf_alloc_fail_at(0, 0);
    assert_int_equal(sf_transform_processor_type.consume_wire(&p.comp, in, len, 5, &w), SF_OK);
    assert_int_equal(sf_alloc_count(), 1);      /* the output buffer, nothing else */
    sf_buf_unref(w);
    w = NULL;
    sf_alloc_fail_at(1, 1);
    assert_int_equal(sf_transform_processor_type.consume_wire(&p.comp, in, len, 5, &w), SF_FILTER);
    sf_alloc_fail_at(0, 0);
    assert_null(w);
    assert_int_equal(sf_counter_get(&p.comp.counters.incoming_items), 10);
    assert_int_equal(sf_counter_get(&p.comp.counters.outgoing_items), 5);
    assert_int_equal(sf_counter_get(&p.comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]), 5);
    assert_int_equal(sf_counter_get(&p.comp.counters.removed_attributes), 11);
    prog_release(&p);

    PROG(&p, SF_ERROR_MODE_SILENT, prog_all);
    sf_alloc_fail_at(1, 1);
    assert_int_equal(sf_transform_processor_type.consume_wire(&p.comp, in, len, 5, &w),
                     SF_UNSUPPORTED);
    sf_alloc_fail_at(0, 0);
    assert_null(w);
    assert_int_equal(sf_counter_get(&p.comp.counters.incoming_items), 0);
    prog_release(&p);
    sf_free(in);
}

/* create fails cleanly on every allocation it makes. */
static void test_create_alloc_failure(void **state)
{
    prog p;
    struct sf_component c;
    uint64_t total;

    (void)state;
    PROG(&p, SF_ERROR_MODE_PROPAGATE, prog_all);
    memset(&c, 0, sizeof(c));
    sf_alloc_fail_at(0, 0);
    assert_int_equal(sf_transform_processor_type.create(&c, &p.cfg), SF_OK);
    total = sf_alloc_count();
    sf_transform_processor_type.destroy(&c);
    assert_true(total >= 6);    /* ctx, wire, five lookups */
    for (uint64_t k = 1; k <= total; k++) {
        memset(&c, 0, sizeof(c));
        sf_alloc_fail_at(k, 0);
        assert_int_equal(sf_transform_processor_type.create(&c, &p.cfg), SF_ENOMEM);
        assert_null(c.ctx);
    }
    sf_alloc_fail_at(0, 0);
    prog_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_batch),
        cmocka_unit_test(test_every_context),
        cmocka_unit_test(test_no_statements_copies),
        cmocka_unit_test(test_nothing_removed_keeps_size),
        cmocka_unit_test(test_dropped_counts),
        cmocka_unit_test(test_keyvalue_shapes),
        cmocka_unit_test(test_status_shapes),
        cmocka_unit_test(test_randomized),
        cmocka_unit_test(test_needs_tree),
        cmocka_unit_test(test_truncated_fails_closed),
        cmocka_unit_test(test_garbled_fails_closed),
        cmocka_unit_test(test_wrong_wire_type_fails),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_create_alloc_failure),
    };

    sf_log_set_level(SF_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
