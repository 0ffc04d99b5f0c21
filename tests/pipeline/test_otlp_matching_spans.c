/* tests/pipeline/test_otlp_matching_spans.c: sf_otlp_count_matching_spans, the
 * allocation-free walk that counts the spans of the resources carrying given
 * attributes, on requests packed by protobuf-c and on hand-encoded bytes
 * (merged repeated fields, malformed input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sf_alloc.h"
#include "sf_request.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue any_t;

/* ---- building requests ------------------------------------------------------ */

/* One resource: up to 4 attributes (value types chosen per attribute) and up
 * to 3 scopes of up to 8 spans. */
typedef struct res {
    bool has_resource;
    size_t n_attrs;
    kv_t kv[4];
    kv_t *kvp[4];
    any_t any[4];
    sf_otlp_resource resource;
    size_t n_scopes;
    sf_otlp_scope_spans ss[3];
    sf_otlp_scope_spans *ssp[3];
    sf_otlp_span sp[3][8];
    sf_otlp_span *spp[3][8];
    sf_otlp_resource_spans rs;
} res;

static void res_init(res *r, bool has_resource)
{
    memset(r, 0, sizeof(*r));
    opentelemetry__proto__trace__v1__resource_spans__init(&r->rs);
    opentelemetry__proto__resource__v1__resource__init(&r->resource);
    r->has_resource = has_resource;
}

static any_t *res_attr(res *r, const char *key)
{
    size_t i = r->n_attrs++;

    assert_true(i < 4);
    opentelemetry__proto__common__v1__key_value__init(&r->kv[i]);
    opentelemetry__proto__common__v1__any_value__init(&r->any[i]);
    r->kv[i].key = (char *)key;
    r->kv[i].value = &r->any[i];
    r->kvp[i] = &r->kv[i];
    return &r->any[i];
}

static void res_str(res *r, const char *key, const char *value)
{
    any_t *a = res_attr(r, key);

    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    a->string_value = (char *)value;
}

static void res_scope(res *r, size_t spans)
{
    size_t s = r->n_scopes++;

    assert_true(s < 3 && spans <= 8);
    opentelemetry__proto__trace__v1__scope_spans__init(&r->ss[s]);
    for (size_t i = 0; i < spans; i++) {
        opentelemetry__proto__trace__v1__span__init(&r->sp[s][i]);
        r->sp[s][i].name = "decode";
        r->spp[s][i] = &r->sp[s][i];
    }
    r->ss[s].n_spans = spans;
    r->ss[s].spans = r->spp[s];
    r->ssp[s] = &r->ss[s];
}

/* Pack `n` resources into buf; returns the length. */
static size_t pack(res *rs, size_t n, uint8_t *buf, size_t size)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans *v[8];
    size_t len;

    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        res *r = &rs[i];

        r->resource.n_attributes = r->n_attrs;
        r->resource.attributes = r->kvp;
        r->rs.resource = r->has_resource ? &r->resource : NULL;
        r->rs.n_scope_spans = r->n_scopes;
        r->rs.scope_spans = r->ssp;
        v[i] = &r->rs;
    }
    req.n_resource_spans = n;
    req.resource_spans = v;
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    assert_true(len <= size);
    return opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
}

static size_t count1(const uint8_t *b, size_t len, const char *k, const char *v)
{
    const char *keys[1] = { k }, *values[1] = { v };

    return sf_otlp_count_matching_spans(b, len, 1, keys, values);
}

/* ---- tests ------------------------------------------------------------------- */

/* r1 (3 spans in 2 scopes, host h1), r2 (4 spans), no resource (2 spans),
 * r1 again (5 spans, host h2). */
static size_t build_fleet(res *rs, uint8_t *buf, size_t size)
{
    res_init(&rs[0], true);
    res_str(&rs[0], "service.name", "sglang");
    res_str(&rs[0], "service.instance.id", "r1");
    res_str(&rs[0], "host.name", "h1");
    res_scope(&rs[0], 2);
    res_scope(&rs[0], 1);
    res_init(&rs[1], true);
    res_str(&rs[1], "service.instance.id", "r2");
    res_str(&rs[1], "host.name", "h1");
    res_scope(&rs[1], 4);
    res_init(&rs[2], false);
    res_scope(&rs[2], 2);
    res_init(&rs[3], true);
    res_str(&rs[3], "host.name", "h2");
    res_str(&rs[3], "service.instance.id", "r1");
    res_scope(&rs[3], 5);
    return pack(rs, 4, buf, size);
}

static void test_several_resources(void **state)
{
    static res rs[4];
    uint8_t buf[4096];
    size_t len = build_fleet(rs, buf, sizeof(buf)), all = 0;

    (void)state;
    assert_int_equal(sf_otlp_scan(buf, len, SF_OTLP_DEFAULT_MAX_DEPTH, &all), SF_OK);
    assert_int_equal(all, 14);
    assert_int_equal(count1(buf, len, "service.instance.id", "r1"), 8);
    assert_int_equal(count1(buf, len, "service.instance.id", "r2"), 4);
    assert_int_equal(count1(buf, len, "service.instance.id", "r3"), 0);
    assert_int_equal(count1(buf, len, "host.name", "h1"), 7);
    assert_int_equal(count1(buf, len, "service.name", "sglang"), 3);
    /* n == 0: every resource matches, the one without a Resource too */
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 0, NULL, NULL), 14);
    assert_int_equal(sf_otlp_count_matching_spans(buf, 0, 0, NULL, NULL), 0);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 1, NULL, NULL), 0);
}

static void test_partial_matches(void **state)
{
    static res rs[4];
    uint8_t buf[4096];
    size_t len = build_fleet(rs, buf, sizeof(buf));

    (void)state;
    /* exact and bytewise: no prefixes, no case folding, no trailing NUL */
    assert_int_equal(count1(buf, len, "service.instance.id", "r"), 0);
    assert_int_equal(count1(buf, len, "service.instance.id", "r10"), 0);
    assert_int_equal(count1(buf, len, "service.instance.id", "R1"), 0);
    assert_int_equal(count1(buf, len, "service.instance", "r1"), 0);
    assert_int_equal(count1(buf, len, "Service.Instance.Id", "r1"), 0);
    assert_int_equal(count1(buf, len, "service.instance.id", ""), 0);
    /* the value of another key does not count */
    assert_int_equal(count1(buf, len, "host.name", "r1"), 0);
}

static void test_multiple_keys(void **state)
{
    static res rs[4];
    uint8_t buf[4096];
    size_t len = build_fleet(rs, buf, sizeof(buf));
    const char *k2[2] = { "service.instance.id", "host.name" };
    const char *v_r1h1[2] = { "r1", "h1" }, *v_r1h2[2] = { "r1", "h2" };
    const char *v_r2h2[2] = { "r2", "h2" }, *v_r2h1[2] = { "r2", "h1" };
    const char *k3[3] = { "host.name", "service.name", "service.instance.id" };
    const char *v3[3] = { "h1", "sglang", "r1" }, *v3b[3] = { "h1", "vllm", "r1" };

    (void)state;
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 2, k2, v_r1h1), 3);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 2, k2, v_r1h2), 5);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 2, k2, v_r2h1), 4);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 2, k2, v_r2h2), 0);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 3, k3, v3), 3);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 3, k3, v3b), 0);
}

static void test_missing_resource(void **state)
{
    static res rs[3];
    uint8_t buf[2048];
    size_t len;

    (void)state;
    res_init(&rs[0], false);            /* no Resource at all */
    res_scope(&rs[0], 3);
    res_init(&rs[1], true);             /* an empty Resource */
    res_scope(&rs[1], 2);
    res_init(&rs[2], true);
    res_str(&rs[2], "service.instance.id", "r1");   /* no spans */
    len = pack(rs, 3, buf, sizeof(buf));
    assert_int_equal(count1(buf, len, "service.instance.id", "r1"), 0);
    assert_int_equal(sf_otlp_count_matching_spans(buf, len, 0, NULL, NULL), 5);
}

static void test_non_string_values(void **state)
{
    static res rs[6];
    uint8_t buf[4096];
    size_t len;
    any_t *a;
    kv_t inner;
    any_t inner_v, *items[1];
    Opentelemetry__Proto__Common__V1__ArrayValue arr =
        OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT;

    (void)state;
    res_init(&rs[0], true);
    a = res_attr(&rs[0], "service.instance.id");
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    a->int_value = 1;
    res_scope(&rs[0], 1);
    res_init(&rs[1], true);
    a = res_attr(&rs[1], "service.instance.id");
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE;
    a->bytes_value = (ProtobufCBinaryData){ 1, (uint8_t *)"1" };
    res_scope(&rs[1], 2);
    res_init(&rs[2], true);
    a = res_attr(&rs[2], "service.instance.id");
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    a->bool_value = true;
    res_scope(&rs[2], 3);
    res_init(&rs[3], true);             /* an array holding the string "1" */
    opentelemetry__proto__common__v1__any_value__init(&inner_v);
    inner_v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    inner_v.string_value = "1";
    items[0] = &inner_v;
    arr.n_values = 1;
    arr.values = items;
    a = res_attr(&rs[3], "service.instance.id");
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
    a->array_value = &arr;
    res_scope(&rs[3], 4);
    res_init(&rs[4], true);             /* a KeyValue without a value */
    opentelemetry__proto__common__v1__key_value__init(&inner);
    inner.key = "service.instance.id";
    rs[4].kv[0] = inner;
    rs[4].kvp[0] = &rs[4].kv[0];
    rs[4].n_attrs = 1;
    res_scope(&rs[4], 5);
    res_init(&rs[5], true);             /* the only string "1" */
    res_str(&rs[5], "service.instance.id", "1");
    res_scope(&rs[5], 6);
    len = pack(rs, 6, buf, sizeof(buf));
    assert_int_equal(sf_otlp_scan(buf, len, SF_OTLP_DEFAULT_MAX_DEPTH, NULL), SF_OK);
    assert_int_equal(count1(buf, len, "service.instance.id", "1"), 6);
    assert_int_equal(count1(buf, len, "service.instance.id", "true"), 0);
}

/* Hand-encoded: protobuf's merge rules for repeated singular fields. */
static void test_merged_fields(void **state)
{
    /* ResourceSpans with two Resource fields (merged: attributes add up),
     * one attribute each, and one ScopeSpans of 2 spans. */
    static const uint8_t two_resources[] = {
        0x0a, 0x22,                                     /* request.resource_spans */
        0x0a, 0x0c,                                     /* Resource */
        0x0a, 0x0a,                                     /* KeyValue */
        0x0a, 0x03, 'k', '.', 'a', 0x12, 0x03, 0x0a, 0x01, 'x',
        0x0a, 0x0c,                                     /* Resource again */
        0x0a, 0x0a,
        0x0a, 0x03, 'k', '.', 'b', 0x12, 0x03, 0x0a, 0x01, 'y',
        0x12, 0x04, 0x12, 0x00, 0x12, 0x00,             /* ScopeSpans, 2 empty spans */
    };
    /* A value set to string "x", then (merged AnyValue) to int 7: the last
     * member of the oneof wins, so it is not the string "x". */
    static const uint8_t string_then_int[] = {
        0x0a, 0x16,
        0x0a, 0x10,
        0x0a, 0x0e,
        0x0a, 0x03, 'k', '.', 'a', 0x12, 0x03, 0x0a, 0x01, 'x', 0x12, 0x02, 0x18, 0x07,
        0x12, 0x02, 0x12, 0x00,
    };
    /* ...and the reverse: int, then string "x" (a match). */
    static const uint8_t int_then_string[] = {
        0x0a, 0x16,
        0x0a, 0x10,
        0x0a, 0x0e,
        0x0a, 0x03, 'k', '.', 'a', 0x12, 0x02, 0x18, 0x07, 0x12, 0x03, 0x0a, 0x01, 'x',
        0x12, 0x02, 0x12, 0x00,
    };
    const char *keys[2] = { "k.a", "k.b" }, *values[2] = { "x", "y" };

    (void)state;
    assert_int_equal(sf_otlp_scan(two_resources, sizeof(two_resources), 32, NULL), SF_OK);
    assert_int_equal(sf_otlp_count_matching_spans(two_resources, sizeof(two_resources), 2, keys,
                                                  values), 2);
    assert_int_equal(sf_otlp_scan(string_then_int, sizeof(string_then_int), 32, NULL),
                     SF_OK);
    assert_int_equal(count1(string_then_int, sizeof(string_then_int), "k.a", "x"), 0);
    assert_int_equal(count1(int_then_string, sizeof(int_then_string), "k.a", "x"), 1);
}

/* sf_otlp_drop_resources: keep() refuses r1's entries */
static bool not_r1(void *ctx, const uint8_t *rs, size_t n)
{
    (*(int *)ctx)++;
    return count1(rs, n, "service.instance.id", "r1") == 0;
}

static bool none(void *ctx, const uint8_t *rs, size_t n)
{
    (void)ctx;
    (void)rs;
    (void)n;
    return false;
}

/* The fleet without r1's two entries is r2's and the unnamed one's, in
 * order, as valid bytes; an unknown top-level field is copied; dropping
 * everything leaves an empty (valid) request; a top level that does not
 * read as fields, and a request where nothing is dropped, give 0. */
static void test_drop_resources(void **state)
{
    static res rs[4];
    uint8_t buf[4096], out[4096 + 8], in2[4096 + 8];
    size_t len = build_fleet(rs, buf, sizeof(buf)), olen = 0, spans = 0;
    int asked = 0;

    (void)state;
    assert_int_equal(sf_otlp_drop_resources(buf, len, not_r1, &asked, out, &olen), 2);
    assert_int_equal(asked, 4);
    assert_int_equal(sf_otlp_scan(out, olen, SF_OTLP_DEFAULT_MAX_DEPTH, &spans), SF_OK);
    assert_int_equal(spans, 4 + 2);
    assert_int_equal(count1(out, olen, "service.instance.id", "r1"), 0);
    assert_int_equal(count1(out, olen, "service.instance.id", "r2"), 4);
    /* an unknown varint field 9 after the entries is kept as it is */
    memcpy(in2, buf, len);
    in2[len] = 0x48;
    in2[len + 1] = 0x07;
    assert_int_equal(sf_otlp_drop_resources(in2, len + 2, not_r1, &asked, out, &olen), 2);
    assert_true(olen >= 2 && out[olen - 2] == 0x48 && out[olen - 1] == 0x07);
    assert_int_equal(sf_otlp_drop_resources(buf, len, none, NULL, out, &olen), 4);
    assert_int_equal(olen, 0);
    assert_int_equal(sf_otlp_scan(out, olen, SF_OTLP_DEFAULT_MAX_DEPTH, &spans), SF_OK);
    /* nothing at all: nothing dropped */
    assert_int_equal(sf_otlp_drop_resources(buf, 0, none, NULL, out, &olen), 0);
    /* a cut inside the first entry's length: not fields, nothing dropped */
    assert_int_equal(sf_otlp_drop_resources(buf, 1, none, NULL, out, &olen), 0);
}

static void test_malformed(void **state)
{
    static res rs[4];
    static const uint8_t nested_overrun[] = {
        0x0a, 0x04, 0x12, 0x05, 0x12, 0x00,     /* ScopeSpans of 5 bytes in 4 */
        0x10, 0x01, 0x10, 0x01,
    };
    uint8_t buf[4096], bad[4096];
    size_t len = build_fleet(rs, buf, sizeof(buf)), valid = 0;

    (void)state;
    assert_int_equal(count1(buf, len, "service.instance.id", "r1"), 8);
    /* every truncation inside a field is refused whole (0), never read past
     * the end; a cut between ResourceSpans is a valid shorter request */
    for (size_t cut = 1; cut < len; cut++) {
        uint8_t *copy = sf_malloc(cut);     /* exact size: ASan sees any overread */
        size_t n;

        memcpy(copy, buf, cut);
        n = count1(copy, cut, "service.instance.id", "r1");
        if (sf_otlp_scan(copy, cut, SF_OTLP_DEFAULT_MAX_DEPTH, NULL) == SF_OK) {
            assert_int_equal(n, 3);         /* r1's first 3 spans, then r2, none */
            valid++;
        } else {
            assert_int_equal(n, 0);
        }
        sf_free(copy);
    }
    assert_int_equal(valid, 3);
    /* a ScopeSpans longer than its ResourceSpans (though not than the
     * request), a group wire type, a zero field number */
    assert_int_equal(sf_otlp_count_matching_spans(nested_overrun, sizeof(nested_overrun), 0,
                                                  NULL, NULL), 0);
    memcpy(bad, buf, len);
    bad[len] = 0x0b;                        /* field 1, start group */
    assert_int_equal(count1(bad, len + 1, "service.instance.id", "r1"), 0);
    bad[len] = 0x00;
    assert_int_equal(count1(bad, len + 1, "service.instance.id", "r1"), 0);
    /* an unknown varint field at the top is skipped */
    bad[len] = 0x10;
    bad[len + 1] = 0x05;
    assert_int_equal(count1(bad, len + 2, "service.instance.id", "r1"), 8);
    assert_int_equal(sf_alloc_in_use(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_several_resources),
        cmocka_unit_test(test_partial_matches),
        cmocka_unit_test(test_multiple_keys),
        cmocka_unit_test(test_missing_resource),
        cmocka_unit_test(test_non_string_values),
        cmocka_unit_test(test_merged_fields),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_drop_resources),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
