/* tests/processors/test_transform.c: the transform processor on the data
 * path: requests are built with protobuf-c as trees, packed into bytes, run
 * through consume (which applies the transform's edit with the wire codec,
 * sf_otlp_wire.h), and the canonical output is decoded back into a tree and
 * checked key by key; plus the fail-closed proofs (allocation-failure
 * injection, an exhausted arena, corrupt bytes at every level, under every
 * error_mode). */
#define _GNU_SOURCE     /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/sf_torture.h"
#include "tests/sf_test_stderr.h"

#include "internal/sf_core.h"
#include "transform_fixtures.h"
#include "sf_otlp_count.h"

#define SPAN_KEEP_A "gen_ai.request.model"
#define UNICODE_KEY "gr\xc3\xb6\xc3\x9f" "e.\xe5\x90\x8d\xe5\x89\x8d"   /* größe.名前 */

/* The policy every filter test uses, flat layout. */
static const char *const policy[] = {
    "keep_keys(resource.attributes, [\"service.name\"])",
    "keep_keys(scope.attributes, [\"scope.keep\"])",
    "keep_keys(span.attributes, [\"" SPAN_KEEP_A "\", \"http.status_code\", \"" UNICODE_KEY "\"])",
    "set(span.status.message, \"\")",
    "keep_keys(spanevent.attributes, [\"event.keep\"])",
    "keep_keys(link.attributes, [\"link.keep\"])",
};
#define N_POLICY (sizeof(policy) / sizeof(policy[0]))

#define FIXTURE_SPANS 4         /* spans in mk_request() */

/* Allowed keys per context, independent of the code under test. */
static const char *const allowed[SF_OTLP_CTX_COUNT][4] = {
    [SF_OTLP_RESOURCE] = { "service.name" },
    [SF_OTLP_SCOPE] = { "scope.keep" },
    [SF_OTLP_SPAN] = { SPAN_KEEP_A, "http.status_code", UNICODE_KEY },
    [SF_OTLP_SPANEVENT] = { "event.keep" },
    [SF_OTLP_LINK] = { "link.keep" },
};

typedef struct tfx {
    fx_sink s;                      /* program memory and nodes */
    sf_arena *build;                /* the request before packing */
    sf_transform_config cfg;
    struct sf_component comp;
    uint8_t *wire;                  /* the packed fixture request */
    size_t wire_len;
    sf_arena *arena;                /* the batch's arena */
    sf_request batch;                 /* batch.req: the tree tests read and modify */
    uint8_t *packed;                /* what consume() last packed: batch.raw */
} tfx;

/* ---- building requests -------------------------------------------------- */

static sf_otlp_kv *kv_str(sf_arena *a, const char *key, const char *val)
{
    sf_otlp_kv *kv = sf_arena_alloc(a, sizeof(*kv));
    sf_otlp_any *any = sf_arena_alloc(a, sizeof(*any));

    opentelemetry__proto__common__v1__key_value__init(kv);
    opentelemetry__proto__common__v1__any_value__init(any);
    any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    any->string_value = (char *)val;
    kv->key = (char *)key;
    kv->value = any;
    return kv;
}

static sf_otlp_kv *kv_int(sf_arena *a, const char *key, int64_t val)
{
    sf_otlp_kv *kv = kv_str(a, key, "");

    kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    kv->value->int_value = val;
    return kv;
}

static sf_otlp_kv **kvs(sf_arena *a, size_t n, ...)
{
    sf_otlp_kv **v = sf_arena_alloc(a, (n ? n : 1) * sizeof(*v));
    va_list ap;

    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        v[i] = va_arg(ap, sf_otlp_kv *);
    va_end(ap);
    return v;
}

static sf_otlp_span *mk_span(sf_arena *a, const char *name)
{
    sf_otlp_span *sp = sf_arena_alloc(a, sizeof(*sp));

    opentelemetry__proto__trace__v1__span__init(sp);
    sp->name = (char *)name;
    sp->trace_id.len = 16;
    sp->trace_id.data = (uint8_t *)"0123456789abcdef";
    sp->span_id.len = 8;
    sp->span_id.data = (uint8_t *)"01234567";
    return sp;
}

/* Fixture: two ResourceSpans.
 *  [0] resource {service.name, host.name, secret.token} dropped 1;
 *      scope "s" {scope.keep, scope.drop};
 *      span A: {gen_ai.request.model, user.email, Gen_AI.Request.Model,
 *               größe.名前, http.status_code(int), prompt} dropped 3,
 *               status message "secret error", 2 events, 1 link;
 *      span B: one attribute, no events/links/status;
 *      span C: status with message "", no attributes.
 *  [1] no resource, scope without attributes, span D {user.email}. */
static sf_otlp_request *mk_request(sf_arena *a)
{
    sf_otlp_request *req = sf_arena_alloc(a, sizeof(*req));
    sf_otlp_resource_spans **rss = sf_arena_alloc(a, 2 * sizeof(*rss));
    sf_otlp_resource *res = sf_arena_alloc(a, sizeof(*res));
    sf_otlp_scope_spans **ss0 = sf_arena_alloc(a, sizeof(*ss0));
    sf_otlp_scope_spans **ss1 = sf_arena_alloc(a, sizeof(*ss1));
    sf_otlp_scope *scope0 = sf_arena_alloc(a, sizeof(*scope0));
    sf_otlp_scope *scope1 = sf_arena_alloc(a, sizeof(*scope1));
    sf_otlp_span **spans0 = sf_arena_alloc(a, 3 * sizeof(*spans0));
    sf_otlp_span **spans1 = sf_arena_alloc(a, sizeof(*spans1));
    sf_otlp_event **events = sf_arena_alloc(a, 2 * sizeof(*events));
    sf_otlp_link **links = sf_arena_alloc(a, sizeof(*links));
    sf_otlp_status *st_a = sf_arena_alloc(a, sizeof(*st_a));
    sf_otlp_status *st_c = sf_arena_alloc(a, sizeof(*st_c));

    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(req);
    for (int i = 0; i < 2; i++) {
        rss[i] = sf_arena_alloc(a, sizeof(*rss[i]));
        opentelemetry__proto__trace__v1__resource_spans__init(rss[i]);
    }
    req->n_resource_spans = 2;
    req->resource_spans = rss;

    opentelemetry__proto__resource__v1__resource__init(res);
    res->n_attributes = 3;
    res->attributes = kvs(a, 3, kv_str(a, "service.name", "vllm"),
                          kv_str(a, "host.name", "cvm-7"), kv_str(a, "secret.token", "hunter2"));
    res->dropped_attributes_count = 1;
    rss[0]->resource = res;

    ss0[0] = sf_arena_alloc(a, sizeof(*ss0[0]));
    opentelemetry__proto__trace__v1__scope_spans__init(ss0[0]);
    opentelemetry__proto__common__v1__instrumentation_scope__init(scope0);
    scope0->name = "s";
    scope0->n_attributes = 2;
    scope0->attributes = kvs(a, 2, kv_str(a, "scope.keep", "1"), kv_str(a, "scope.drop", "2"));
    ss0[0]->scope = scope0;
    rss[0]->n_scope_spans = 1;
    rss[0]->scope_spans = ss0;

    spans0[0] = mk_span(a, "A");
    spans0[0]->n_attributes = 6;
    spans0[0]->attributes = kvs(a, 6, kv_str(a, SPAN_KEEP_A, "llama-3-70b"),
                                kv_str(a, "user.email", "alice@example.com"),
                                kv_str(a, "Gen_AI.Request.Model", "case-variant"),
                                kv_str(a, UNICODE_KEY, "\xe5\x80\xa4"),
                                kv_int(a, "http.status_code", 200),
                                kv_str(a, "prompt", "tell me a secret"));
    spans0[0]->dropped_attributes_count = 3;
    opentelemetry__proto__trace__v1__status__init(st_a);
    st_a->message = "secret error: alice@example.com";
    st_a->code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    spans0[0]->status = st_a;
    for (int i = 0; i < 2; i++) {
        events[i] = sf_arena_alloc(a, sizeof(*events[i]));
        opentelemetry__proto__trace__v1__span__event__init(events[i]);
        events[i]->name = "ev";
        events[i]->n_attributes = 3;
        events[i]->attributes = kvs(a, 3, kv_str(a, "prompt", "p"), kv_str(a, "event.keep", "k"),
                                    kv_str(a, "event.drop", "d"));
    }
    spans0[0]->n_events = 2;
    spans0[0]->events = events;
    links[0] = sf_arena_alloc(a, sizeof(*links[0]));
    opentelemetry__proto__trace__v1__span__link__init(links[0]);
    links[0]->trace_id = spans0[0]->trace_id;
    links[0]->span_id = spans0[0]->span_id;
    links[0]->n_attributes = 2;
    links[0]->attributes = kvs(a, 2, kv_str(a, "link.drop", "x"), kv_str(a, "link.keep", "y"));
    spans0[0]->n_links = 1;
    spans0[0]->links = links;

    spans0[1] = mk_span(a, "B");
    spans0[1]->n_attributes = 1;
    spans0[1]->attributes = kvs(a, 1, kv_str(a, "http.status_code", "not-an-int"));

    spans0[2] = mk_span(a, "C");
    opentelemetry__proto__trace__v1__status__init(st_c);
    st_c->code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_OK;
    spans0[2]->status = st_c;
    ss0[0]->n_spans = 3;
    ss0[0]->spans = spans0;

    ss1[0] = sf_arena_alloc(a, sizeof(*ss1[0]));
    opentelemetry__proto__trace__v1__scope_spans__init(ss1[0]);
    opentelemetry__proto__common__v1__instrumentation_scope__init(scope1);
    ss1[0]->scope = scope1;
    spans1[0] = mk_span(a, "D");
    spans1[0]->n_attributes = 1;
    spans1[0]->attributes = kvs(a, 1, kv_str(a, "user.email", "bob@example.com"));
    ss1[0]->n_spans = 1;
    ss1[0]->spans = spans1;
    rss[1]->n_scope_spans = 1;
    rss[1]->scope_spans = ss1;
    return req;
}

/* ---- fixture -------------------------------------------------------------- */

static sf_transform_program *program_of(fx_sink *s, const char *const *stmts, size_t n)
{
    sf_node *seq = fx_seq(s, 0);
    sf_transform_program *prog = NULL;

    seq->n = n;
    seq->items = sf_arena_alloc(s->arena, n * sizeof(sf_node *));
    for (size_t i = 0; i < n; i++)
        seq->items[i] = fx_scalar(s, stmts[i]);
    assert_int_equal(sf_transform_program_build(seq, &s->sink, &prog), SF_OK);
    assert_int_equal(s->n_errors, 0);
    return prog;
}

/* A new transform component over `prog` (it compiles its edit at create). */
static void use_built(tfx *f, sf_transform_program *prog, int error_mode)
{
    f->cfg.error_mode = error_mode;
    f->cfg.program = prog;
    if (f->comp.type != NULL)
        f->comp.type->destroy(&f->comp);
    memset(&f->comp, 0, sizeof(f->comp));
    f->comp.type = &sf_transform_processor_type;
    f->comp.id = "transform/test";
    f->comp.config = &f->cfg;
    assert_int_equal(sf_transform_processor_type.create(&f->comp, &f->cfg), SF_OK);
}

static void use_program(tfx *f, const char *const *stmts, size_t n, int error_mode)
{
    use_built(f, program_of(&f->s, stmts, n), error_mode);
}

static int setup(void **state)
{
    tfx *f = sf_calloc(1, sizeof(*f));
    sf_otlp_request *req;

    fx_sink_init(&f->s);
    f->build = sf_arena_create(16384, 0);
    req = mk_request(f->build);
    f->wire_len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
    f->wire = sf_malloc(f->wire_len);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, f->wire);
    use_program(f, policy, N_POLICY, SF_ERROR_MODE_PROPAGATE);
    f->arena = sf_arena_create(8192, 0);
    assert_int_equal(sf_request_decode(&f->batch, f->arena, f->wire, f->wire_len,
                                     SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    assert_int_equal(f->batch.spans, FIXTURE_SPANS);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    tfx *f = *state;

    sf_transform_processor_type.destroy(&f->comp);
    sf_request_release(&f->batch);
    sf_arena_destroy(f->arena);
    sf_free(f->packed);
    sf_free(f->wire);
    sf_arena_destroy(f->build);
    fx_sink_release(&f->s);
    sf_free(f);
    return 0;
}

/* A fresh batch over data[0, len) (taken: f->packed) holding `spans` spans
 * through the transform's consume, which rewrites it; on SF_OK the
 * rewritten bytes are decoded and f->batch.req is the new tree (pointers
 * into the old one must be fetched again). On failure f->batch.req stays
 * the tree the test built, so it can corrupt it further.
 * In a pipeline the core's codec pass has set batch.spans before any
 * processor runs (sf_request.h); consume counts its incoming and dropped spans
 * from it, so the harness sets it from what it packed. */
static sf_status consume_bytes(tfx *f, uint8_t *data, size_t len, size_t spans)
{
    sf_otlp_request *before = f->batch.req;
    sf_status st;

    sf_request_release(&f->batch);
    sf_free(f->packed);
    f->packed = data;
    sf_request_init(&f->batch, f->arena, data, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    f->batch.spans = spans;
    st = sf_component_process(&f->comp, &f->batch);
    if (st != SF_OK) {
        f->batch.req = before;
        return st;
    }
    assert_ptr_equal(f->batch.edited_by, &f->comp);
    assert_int_equal(sf_request_tree(&f->batch), SF_OK);
    return SF_OK;
}

/* The test's (possibly modified) tree, packed with protobuf-c, through
 * consume_bytes. */
static sf_status consume(tfx *f)
{
    const sf_otlp_request *req = f->batch.req;
    size_t n = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
    uint8_t *data = sf_malloc(n + 1);

    assert_non_null(data);
    assert_int_equal(
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, data),
        n);
    return consume_bytes(f, data, n, sf_otlp_count_spans(req));
}

/* consume_bytes on a copy of the first `len` bytes of the fixture request
 * (of FIXTURE_SPANS spans). */
static sf_status consume_prefix(tfx *f, size_t len)
{
    uint8_t *data = sf_malloc(len + 1);

    assert_non_null(data);
    memcpy(data, f->wire, len);
    return consume_bytes(f, data, len, FIXTURE_SPANS);
}

/* ---- checks -------------------------------------------------------------- */

static void assert_attr_keys(sf_otlp_kv **kv, size_t n, size_t want, ...)
{
    va_list ap;

    assert_int_equal(n, want);
    va_start(ap, want);
    for (size_t i = 0; i < want; i++)
        assert_string_equal(kv[i]->key, va_arg(ap, const char *));
    va_end(ap);
}

static bool is_allowed(sf_otlp_ctx c, const char *key)
{
    for (size_t i = 0; i < 4 && allowed[c][i] != NULL; i++) {
        if (strcmp(allowed[c][i], key) == 0)
            return true;
    }
    return false;
}

static void assert_only_allowed(sf_otlp_ctx c, sf_otlp_kv **kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_allowed(c, kv[i]->key))
            fail_msg("%s attribute '%s' is not allowlisted", sf_otlp_ctx_name(c), kv[i]->key);
    }
}

/* Every attribute anywhere in `req` is allowlisted, every status message is
 * empty: what may leave the VM. */
static void assert_request_filtered(const sf_otlp_request *req)
{
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];

        if (rs->resource)
            assert_only_allowed(SF_OTLP_RESOURCE, rs->resource->attributes,
                                rs->resource->n_attributes);
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[j];

            if (ss->scope)
                assert_only_allowed(SF_OTLP_SCOPE, ss->scope->attributes,
                                    ss->scope->n_attributes);
            for (size_t k = 0; k < ss->n_spans; k++) {
                const sf_otlp_span *sp = ss->spans[k];

                assert_only_allowed(SF_OTLP_SPAN, sp->attributes, sp->n_attributes);
                if (sp->status)
                    assert_string_equal(sp->status->message, "");
                for (size_t e = 0; e < sp->n_events; e++)
                    assert_only_allowed(SF_OTLP_SPANEVENT, sp->events[e]->attributes,
                                        sp->events[e]->n_attributes);
                for (size_t l = 0; l < sp->n_links; l++)
                    assert_only_allowed(SF_OTLP_LINK, sp->links[l]->attributes,
                                        sp->links[l]->n_attributes);
            }
        }
    }
}

static sf_otlp_span *span_at(const sf_request *b, size_t rs, size_t k)
{
    return b->req->resource_spans[rs]->scope_spans[0]->spans[k];
}

/* Packed bytes of one KeyValue, to compare values byte for byte. */
static size_t pack_kv(const sf_otlp_kv *kv, uint8_t *out, size_t cap)
{
    size_t n = opentelemetry__proto__common__v1__key_value__get_packed_size(kv);

    assert_true(n <= cap);
    return opentelemetry__proto__common__v1__key_value__pack(kv, out);
}

/* The transform's own series (its metrics callback): removals by context,
 * key and cause; keys not of the safe shape as 'other'. */
static char *transform_series(tfx *f)
{
    size_t need = sf_transform_processor_type.metrics(&f->comp, NULL, 0);
    char *buf = malloc(need + 1);

    assert_non_null(buf);
    buf[0] = '\0';                      /* as the core hands it over */
    assert_int_equal(sf_transform_processor_type.metrics(&f->comp, buf, need + 1), need);
    return buf;
}

/* Removed keys are named, in the series and the log line, only when the
 * config names them: user.email, secret.token, prompt and the rest that
 * the client chose count as 'other', whatever their shape. */
static void test_removals_counted_by_key(void **state)
{
    tfx *f = *state;
    char *text, *log;

    sf_log_set_level(SF_LOG_WARN);
    sf_test_stderr_begin();
    assert_int_equal(consume(f), SF_OK);
    log = sf_test_stderr_end(NULL);
    sf_log_set_level(SF_LOG_ERROR);
    text = transform_series(f);
    /* user.email (A, D), Gen_AI.Request.Model and prompt (A) */
    assert_non_null(strstr(text, "context=\"span\",key=\"other\",cause=\"not_kept\"} 4\n"));
    assert_non_null(strstr(text, "context=\"resource\",key=\"other\",cause=\"not_kept\"} 2\n"));
    assert_non_null(strstr(text, "context=\"spanevent\",key=\"other\",cause=\"not_kept\"} 4\n"));
    assert_non_null(strstr(log, "removing span attribute 'other': the key is not kept"));
    for (const char *w = "user.email\0secret.token\0prompt\0Gen_AI\0host.name\0"; *w;
         w += strlen(w) + 1) {
        if (strstr(text, w) != NULL || strstr(log, w) != NULL)
            fail_msg("'%s' named in the series or the log", w);
    }
    assert_null(strstr(text, "gen_ai.request.model"));     /* kept: never counted */
    assert_non_null(sf_transform_processor_type.metrics_help);
    assert_null(strstr(text, "# HELP"));                    /* the core writes it once */
    free(text);
    free(log);
    assert_int_equal(consume_prefix(f, f->wire_len), SF_OK);    /* the same request again */
    text = transform_series(f);
    assert_non_null(strstr(text, "context=\"span\",key=\"other\",cause=\"not_kept\"} 8\n"));
    free(text);
}

/* A key the config names (delete_key) is named when it is removed. */
static void test_removals_named_when_configured(void **state)
{
    tfx *f = *state;
    static const char *const stmts[] = {
        "keep_keys(resource.attributes, [])",
        "delete_key(span.attributes, \"user.email\")",
        "delete_key(spanevent.attributes, \"prompt\")",
    };
    char *text, *log;

    use_program(f, stmts, 3, SF_ERROR_MODE_PROPAGATE);
    sf_log_set_level(SF_LOG_WARN);
    sf_test_stderr_begin();
    assert_int_equal(consume(f), SF_OK);
    log = sf_test_stderr_end(NULL);
    sf_log_set_level(SF_LOG_ERROR);
    text = transform_series(f);
    assert_non_null(strstr(text, "context=\"span\",key=\"user.email\",cause=\"not_kept\"} 2\n"));
    assert_non_null(strstr(text, "context=\"spanevent\",key=\"prompt\",cause=\"not_kept\"} 2\n"));
    assert_non_null(strstr(text, "context=\"resource\",key=\"other\",cause=\"not_kept\"} 3\n"));
    assert_non_null(strstr(log, "removing span attribute 'user.email': the key is not kept"));
    assert_null(strstr(text, "secret.token"));
    assert_null(strstr(log, "secret.token"));
    free(text);
    free(log);
}

/* ---- filter --------------------------------------------------------------- */

static void test_keep_keys_everywhere(void **state)
{
    tfx *f = *state;
    sf_otlp_request *req = f->batch.req;
    sf_otlp_span *a = span_at(&f->batch, 0, 0);
    uint8_t before[3][256], after[256];
    size_t before_len[3];

    /* remember the kept values' exact bytes */
    before_len[0] = pack_kv(a->attributes[0], before[0], sizeof(before[0]));  /* gen_ai... */
    before_len[1] = pack_kv(a->attributes[3], before[1], sizeof(before[1]));  /* unicode */
    before_len[2] = pack_kv(a->attributes[4], before[2], sizeof(before[2]));  /* int */

    assert_int_equal(consume(f), SF_OK);
    req = f->batch.req;
    a = span_at(&f->batch, 0, 0);

    /* resource: 3 -> 1, dropped 1 + 2 */
    assert_attr_keys(req->resource_spans[0]->resource->attributes,
                     req->resource_spans[0]->resource->n_attributes, 1, "service.name");
    assert_int_equal(req->resource_spans[0]->resource->dropped_attributes_count, 3);
    assert_string_equal(req->resource_spans[0]->resource->attributes[0]->value->string_value, "vllm");
    /* scope */
    assert_attr_keys(req->resource_spans[0]->scope_spans[0]->scope->attributes,
                     req->resource_spans[0]->scope_spans[0]->scope->n_attributes, 1, "scope.keep");
    assert_int_equal(req->resource_spans[0]->scope_spans[0]->scope->dropped_attributes_count, 1);
    /* span A: order kept, case variant removed, dropped 3 + 3 */
    assert_attr_keys(a->attributes, a->n_attributes, 3, SPAN_KEEP_A, UNICODE_KEY, "http.status_code");
    assert_int_equal(a->dropped_attributes_count, 6);
    for (int i = 0; i < 3; i++) {
        size_t n = pack_kv(a->attributes[i], after, sizeof(after));
        assert_int_equal(n, before_len[i]);
        assert_memory_equal(after, before[i], n);
    }
    assert_string_equal(a->status->message, "");
    assert_int_equal(a->status->code,
                     OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
    /* events: 3 -> 1 each */
    assert_int_equal(a->n_events, 2);
    for (int e = 0; e < 2; e++) {
        assert_attr_keys(a->events[e]->attributes, a->events[e]->n_attributes, 1, "event.keep");
        assert_int_equal(a->events[e]->dropped_attributes_count, 2);
        assert_string_equal(a->events[e]->attributes[0]->value->string_value, "k");
    }
    /* link */
    assert_attr_keys(a->links[0]->attributes, a->links[0]->n_attributes, 1, "link.keep");
    assert_int_equal(a->links[0]->dropped_attributes_count, 1);
    /* span B: kept, value of another type untouched; no events is fine */
    assert_attr_keys(span_at(&f->batch, 0, 1)->attributes, span_at(&f->batch, 0, 1)->n_attributes,
                     1, "http.status_code");
    assert_string_equal(span_at(&f->batch, 0, 1)->attributes[0]->value->string_value, "not-an-int");
    assert_int_equal(span_at(&f->batch, 0, 1)->dropped_attributes_count, 0);
    assert_null(span_at(&f->batch, 0, 1)->status);
    /* span C: status message stays empty */
    assert_string_equal(span_at(&f->batch, 0, 2)->status->message, "");
    /* span D under a resource-less ResourceSpans */
    assert_null(req->resource_spans[1]->resource);
    assert_int_equal(span_at(&f->batch, 1, 0)->n_attributes, 0);
    assert_int_equal(span_at(&f->batch, 1, 0)->dropped_attributes_count, 1);

    /* counters: 2 + 1 + 3 + 2*2 + 1 + 1 removed */
    assert_int_equal(sf_counter_get(&f->comp.counters.incoming_items), 4);
    assert_int_equal(sf_counter_get(&f->comp.counters.outgoing_items), 4);
    assert_int_equal(sf_counter_get(&f->comp.counters.removed_attributes), 12);
    assert_int_equal(sf_counter_get(&f->comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]), 0);
    assert_request_filtered(req);
}

static void test_filtered_batch_packs_and_decodes(void **state)
{
    tfx *f = *state;
    sf_buf *buf = NULL;
    sf_arena *a2 = sf_arena_create(8192, 0);
    sf_request b2;

    assert_int_equal(consume(f), SF_OK);
    assert_int_equal(sf_request_encode(&f->batch, &buf), SF_OK);
    assert_true(buf->len < f->wire_len);
    assert_null(memmem(buf->data, buf->len, "alice@example.com", 17));
    assert_null(memmem(buf->data, buf->len, "hunter2", 7));
    assert_null(memmem(buf->data, buf->len, "case-variant", 12));
    assert_null(memmem(buf->data, buf->len, "tell me a secret", 16));
    assert_non_null(memmem(buf->data, buf->len, "llama-3-70b", 11));
    assert_int_equal(sf_request_decode(&b2, a2, buf->data, buf->len, SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    assert_int_equal(b2.spans, 4);
    assert_request_filtered(b2.req);
    assert_int_equal(span_at(&b2, 0, 0)->n_attributes, 3);
    assert_int_equal(span_at(&b2, 0, 0)->dropped_attributes_count, 6);
    sf_request_release(&b2);
    sf_buf_unref(buf);
    sf_arena_destroy(a2);
}

static void test_empty_allowlist_drops_all_and_delete_key(void **state)
{
    tfx *f = *state;
    static const char *const stmts[] = {
        "keep_keys(resource.attributes, [])",
        "delete_key(span.attributes, \"user.email\")",
        "delete_key(spanevent.attributes, \"prompt\")",
    };
    sf_otlp_span *a = span_at(&f->batch, 0, 0);

    use_program(f, stmts, 3, SF_ERROR_MODE_PROPAGATE);
    assert_int_equal(consume(f), SF_OK);
    a = span_at(&f->batch, 0, 0);
    assert_int_equal(f->batch.req->resource_spans[0]->resource->n_attributes, 0);
    assert_int_equal(f->batch.req->resource_spans[0]->resource->dropped_attributes_count, 4);
    assert_attr_keys(a->attributes, a->n_attributes, 5, SPAN_KEEP_A, "Gen_AI.Request.Model",
                     UNICODE_KEY, "http.status_code", "prompt");
    assert_int_equal(a->dropped_attributes_count, 4);
    assert_attr_keys(a->events[1]->attributes, a->events[1]->n_attributes, 2,
                     "event.keep", "event.drop");
    /* no span status statement: the message is left alone */
    assert_string_equal(a->status->message, "secret error: alice@example.com");
    /* scope and links untouched: no statements for them */
    assert_int_equal(f->batch.req->resource_spans[0]->scope_spans[0]->scope->n_attributes, 2);
    assert_int_equal(a->links[0]->n_attributes, 2);
    /* 3 resource + 1 (A) + 1 (D) + 2 events */
    assert_int_equal(sf_counter_get(&f->comp.counters.removed_attributes), 7);
}

static void test_keep_keys_twice_intersects(void **state)
{
    tfx *f = *state;
    static const char *const stmts[] = {
        "keep_keys(span.attributes, [\"" SPAN_KEEP_A "\", \"user.email\", \"prompt\"])",
        "keep_keys(span.attributes, [\"prompt\", \"" SPAN_KEEP_A "\"])",
    };
    sf_otlp_span *a = span_at(&f->batch, 0, 0);

    use_program(f, stmts, 2, SF_ERROR_MODE_PROPAGATE);
    assert_int_equal(consume(f), SF_OK);
    a = span_at(&f->batch, 0, 0);
    assert_attr_keys(a->attributes, a->n_attributes, 2, SPAN_KEEP_A, "prompt");
    assert_int_equal(a->dropped_attributes_count, 3 + 4);
}

static void test_dropped_count_saturates(void **state)
{
    tfx *f = *state;
    sf_otlp_span *a = span_at(&f->batch, 0, 0);

    a->dropped_attributes_count = UINT32_MAX - 1;
    assert_int_equal(consume(f), SF_OK);
    a = span_at(&f->batch, 0, 0);
    assert_int_equal(a->dropped_attributes_count, UINT32_MAX);
}

/* ---- fail closed ----------------------------------------------------------- */

/* consume writes new bytes (the codec's output buffer), nothing in the
 * batch's arena; releasing the batch gives every byte back, on success and
 * on refusal alike. */
static void test_consume_frees_what_it_allocates(void **state)
{
    tfx *f = *state;
    size_t before = sf_alloc_in_use(), used = sf_arena_used(f->arena);
    sf_request b;

    sf_request_init(&b, f->arena, f->wire, f->wire_len, SF_OTLP_DEFAULT_MAX_DEPTH);
    sf_alloc_fail_at(0, 0);
    assert_int_equal(sf_component_process(&f->comp, &b), SF_OK);
    /* one allocation: the output, sized from the input, which the filtered
     * request does not outgrow */
    assert_int_equal(sf_alloc_count(), 1);
    assert_int_equal(sf_arena_used(f->arena), used);
    assert_non_null(b.wire);
    assert_true(b.wire->len < f->wire_len);
    assert_true(sf_alloc_in_use() > before);
    sf_request_release(&b);
    assert_int_equal(sf_alloc_in_use(), before);

    /* refused (cut short): nothing kept, nothing left over */
    sf_request_init(&b, f->arena, f->wire, f->wire_len - 1, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_component_process(&f->comp, &b), SF_FILTER);
    assert_null(b.wire);
    sf_request_release(&b);
    assert_int_equal(sf_alloc_in_use(), before);
    assert_int_equal(sf_arena_used(f->arena), used);
}

/* Fail every allocation of "create arena, consume, decode the output" in
 * turn: each run either fails before consume, or consume fails the batch
 * (SF_ENOMEM or SF_FILTER) and passes nothing on, or what it passes on
 * holds only allowlisted keys (decoding it for reading may then fail with
 * SF_ENOMEM: the reader's failure, not the filter's). Nothing leaks. */
typedef struct outcomes {
    tfx *f;
    size_t ok, failed_before, failed_consume, failed_read;
} outcomes;

/* Filter the fixture's request in a new arena and read the result. */
static sf_status filter_scenario(void *arg)
{
    outcomes *o = arg;
    sf_arena *a = sf_arena_create(512, 0);
    sf_request b;
    sf_status st;

    if (a == NULL) {
        o->failed_before++;
        return SF_ENOMEM;
    }
    sf_request_init(&b, a, o->f->wire, o->f->wire_len, SF_OTLP_DEFAULT_MAX_DEPTH);
    st = sf_component_process(&o->f->comp, &b);
    if (st != SF_OK) {
        if (st != SF_FILTER)
            assert_int_equal(st, SF_ENOMEM);
        assert_null(b.wire);            /* nothing to pass on */
        o->failed_consume++;
    } else if ((st = sf_request_tree(&b)) != SF_OK) {
        assert_int_equal(st, SF_ENOMEM);
        o->failed_read++;
    } else {
        assert_request_filtered(b.req);
        assert_int_equal(span_at(&b, 0, 0)->n_attributes, 3);
        o->ok++;
    }
    sf_request_release(&b);
    sf_arena_destroy(a);
    return st;
}

static void test_alloc_failure_injection(void **state)
{
    outcomes o = { .f = *state };
    const sf_torture t = { .name = "transform", .run = filter_scenario, .arg = &o,
                           .sticky = true };
    uint64_t total = sf_torture_run(&t);

    assert_true(total > 3);
    assert_int_equal(o.failed_before + o.failed_consume + o.failed_read, total);
    assert_true(o.failed_consume >= 1);     /* the codec's output buffer */
    assert_int_equal(o.ok, 1);              /* the run where nothing failed */
}

/* An arena with no room left: filtering still works, since the codec writes
 * into its own buffer; only reading the result as a tree needs an arena. */
static void test_exhausted_arena(void **state)
{
    tfx *f = *state;
    sf_arena *a = sf_arena_create(8192, 65536), *reader = sf_arena_create(8192, 0);
    sf_request b;
    int n = 0;

    assert_int_equal(sf_request_decode(&b, a, f->wire, f->wire_len, SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    while (sf_arena_alloc(a, 16) != NULL)
        assert_true(++n < 8192);
    assert_null(sf_arena_alloc(a, 1));
    assert_true(sf_arena_failed(a));
    assert_int_equal(sf_component_process(&f->comp, &b), SF_OK);
    assert_int_equal(sf_request_tree(&b), SF_ENOMEM);      /* no room for a tree */
    b.arena = reader;
    assert_int_equal(sf_request_tree(&b), SF_OK);
    assert_request_filtered(b.req);
    assert_int_equal(span_at(&b, 0, 0)->n_attributes, 3);
    sf_request_release(&b);
    sf_arena_destroy(reader);
    sf_arena_destroy(a);
}

/* The processor refused the batch: nothing passed on or counted as
 * filtered, its spans (all of them: the batch is refused whole) counted as
 * dropped, which this returns. In a pipeline the core refuses such bytes
 * itself before any processor runs (run_route). */
static uint64_t assert_filter_failed(tfx *f)
{
    uint64_t dropped;

    assert_int_equal(consume(f), SF_FILTER);
    assert_null(f->batch.wire);
    assert_int_equal(sf_counter_get(&f->comp.counters.incoming_items), 4);
    assert_int_equal(sf_counter_get(&f->comp.counters.outgoing_items), 0);
    dropped = sf_counter_get(&f->comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]);
    assert_int_equal(dropped, f->batch.spans);
    assert_true(dropped >= 1 && dropped <= 4);
    assert_int_equal(sf_counter_get(&f->comp.counters.removed_attributes), 0);
    return dropped;
}

/* The tree path had to survive dangling pointers (a NULL attribute array,
 * KeyValue, key, message); bytes have none. What consume meets instead is
 * corrupt bytes in the same places, built here by packing a tree whose
 * strings are not UTF-8 or whose ids have the wrong length: each fails the
 * whole batch closed. */
static void test_corrupt_attributes_fail_closed(void **state)
{
    tfx *f = *state;

    span_at(&f->batch, 0, 1)->attributes[0]->value->string_value = "\xed\xa0\x80"; /* surrogate */
    assert_filter_failed(f);
}

static void test_corrupt_kv_fails_closed(void **state)
{
    tfx *f = *state;

    span_at(&f->batch, 1, 0)->attributes[0]->key = "user.\xc0\xae";     /* overlong */
    assert_filter_failed(f);
}

static void test_corrupt_key_fails_closed(void **state)
{
    tfx *f = *state;

    span_at(&f->batch, 0, 0)->events[1]->attributes[2]->key = "event.\xe5\x90"; /* cut short */
    assert_filter_failed(f);
}

static void test_corrupt_messages_fail_closed(void **state)
{
    tfx *f = *state;

    uint64_t dropped;

    span_at(&f->batch, 0, 0)->links[0]->span_id.len = 7;            /* a link */
    dropped = assert_filter_failed(f);
    span_at(&f->batch, 1, 0)->trace_id.len = 15;                    /* a span */
    assert_int_equal(consume(f), SF_FILTER);
    dropped += f->batch.spans;
    span_at(&f->batch, 0, 0)->links[0]->span_id.len = 8;
    assert_int_equal(consume(f), SF_FILTER);
    assert_int_equal(f->batch.spans, 4);        /* the span D's trace id is the first fault */
    dropped += f->batch.spans;
    span_at(&f->batch, 1, 0)->trace_id.len = 16;
    f->batch.req->resource_spans[1]->schema_url = "\xff";           /* a ResourceSpans */
    assert_int_equal(consume(f), SF_FILTER);
    dropped += f->batch.spans;
    assert_int_equal(consume_prefix(f, f->wire_len - 1), SF_FILTER); /* the request */
    dropped += f->batch.spans;
    assert_int_equal(sf_counter_get(&f->comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]),
                     dropped);
    assert_int_equal(sf_counter_get(&f->comp.counters.outgoing_items), 0);
}

static void test_no_request_fails_even_when_ignoring(void **state)
{
    tfx *f = *state;
    uint8_t *junk = sf_malloc(1);

    use_program(f, policy, N_POLICY, SF_ERROR_MODE_IGNORE);
    assert_int_equal(consume_prefix(f, f->wire_len - 1), SF_FILTER);   /* cut short */
    junk[0] = 1 << 3 | 7;                                             /* wire type 7 */
    assert_int_equal(consume_bytes(f, junk, 1, 0), SF_FILTER);
}

/* A group's propagate wins over the processor's ignore for its statements;
 * corrupt bytes fail closed under either. */
static void test_group_error_mode_overrides(void **state)
{
    tfx *f = *state;
    fx_sink *s = &f->s;
    sf_node *node = fx_seq(s, 1,
        fx_map(s, 3, "context", fx_scalar(s, "span"), "error_mode", fx_scalar(s, "propagate"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"a\"])")));
    sf_transform_program *prog = NULL;

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_OK);
    use_built(f, prog, SF_ERROR_MODE_IGNORE);
    assert_int_equal(sf_transform_op_error_mode(&f->cfg, sf_transform_op_get(prog, SF_OTLP_SPAN, 0)),
                     SF_ERROR_MODE_PROPAGATE);
    span_at(&f->batch, 0, 1)->attributes[0]->value->string_value = "\xed\xa0\x80";
    assert_int_equal(consume(f), SF_FILTER);
}

/* ---- error_mode ignore / silent -------------------------------------------- */

/* On the tree path a statement could meet an item it could not run on (a
 * NULL key, a NULL link) and, under ignore/silent, be skipped for that item
 * only. Bytes have no such item: the codec reads the whole request before
 * any of it is passed on, and keep_keys, delete_key and set cannot fail on
 * valid input. So under ignore and silent a corrupt request is still
 * refused whole (nothing partly filtered passes), and a valid one is
 * filtered exactly as under propagate. */
static void check_error_mode(tfx *f, int mode)
{
    sf_otlp_span *a = span_at(&f->batch, 0, 0);
    uint64_t dropped;

    use_program(f, policy, N_POLICY, mode);
    a->attributes[1]->key = "user.\xc0\xae";    /* where the tree path had a NULL key */
    a->links[0]->span_id.len = 7;               /* ... and a NULL link */
    dropped = assert_filter_failed(f);

    assert_int_equal(consume_prefix(f, f->wire_len), SF_OK);
    a = span_at(&f->batch, 0, 0);
    assert_attr_keys(a->attributes, a->n_attributes, 3, SPAN_KEEP_A, UNICODE_KEY, "http.status_code");
    assert_int_equal(a->dropped_attributes_count, 6);
    assert_string_equal(a->status->message, "");
    assert_attr_keys(a->events[0]->attributes, a->events[0]->n_attributes, 1, "event.keep");
    assert_attr_keys(a->links[0]->attributes, a->links[0]->n_attributes, 1, "link.keep");
    assert_int_equal(f->batch.req->resource_spans[0]->resource->n_attributes, 1);
    assert_int_equal(span_at(&f->batch, 1, 0)->n_attributes, 0);
    assert_int_equal(sf_counter_get(&f->comp.counters.outgoing_items), 4);
    /* as under propagate: 2 + 1 + 3 + 2*2 + 1 + 1 */
    assert_int_equal(sf_counter_get(&f->comp.counters.removed_attributes), 12);
    assert_int_equal(sf_counter_get(&f->comp.counters.dropped_spans[SF_REASON_FILTER_FAILED]),
                     dropped);
    assert_request_filtered(f->batch.req);
}

static void test_error_mode_ignore(void **state)
{
    check_error_mode(*state, SF_ERROR_MODE_IGNORE);
}

static void test_error_mode_silent(void **state)
{
    check_error_mode(*state, SF_ERROR_MODE_SILENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keep_keys_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removals_counted_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removals_named_when_configured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filtered_batch_packs_and_decodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_allowlist_drops_all_and_delete_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_keys_twice_intersects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_count_saturates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consume_frees_what_it_allocates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failure_injection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exhausted_arena, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_attributes_fail_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_kv_fails_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_key_fails_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_messages_fail_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_request_fails_even_when_ignoring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_error_mode_overrides, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_mode_ignore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_mode_silent, setup, teardown),
    };

    sf_log_set_level(SF_LOG_ERROR);     /* the fail paths warn by design */
    return cmocka_run_group_tests_name("processors/transform", tests, NULL, NULL);
}
