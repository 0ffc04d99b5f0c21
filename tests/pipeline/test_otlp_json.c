/* tests/pipeline/test_otlp_json.c: the OTLP/JSON codec: exact round trips
 * (JSON -> protobuf -> JSON), decoded trees checked field by field after a
 * protobuf-c pack/unpack, encoding of a hand-built request, the lenient input
 * forms, every refusal with its exact message, and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_torture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"
#include "sf_otlp_json.h"

#define ANY_CASE(c) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##c
#define SPAN_PATH "resourceSpans[0].scopeSpans[0].spans[0]"

/* Test JSON is written with ' for " to stay readable; q() swaps them into
 * one of a few rotating static buffers. */
static const char *q(const char *s)
{
    static char bufs[4][8192];
    static int next;
    char *b = bufs[next++ % 4];
    size_t i;

    assert_true(strlen(s) < sizeof(bufs[0]));
    for (i = 0; s[i] != '\0'; i++)
        b[i] = s[i] == '\'' ? '"' : s[i];
    b[i] = '\0';
    return b;
}

/* A request holding one span whose fields are `inner`. */
static const char *span_json(const char *inner)
{
    static char buf[8192];

    snprintf(buf, sizeof(buf), "{'resourceSpans':[{'scopeSpans':[{'spans':[{%s}]}]}]}", inner);
    return q(buf);
}

typedef struct fixture {
    sf_arena *arena;
    size_t in_use;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    f->in_use = sf_alloc_in_use();
    f->arena = sf_arena_create(4096, 0);
    if (f->arena == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    sf_arena_destroy(f->arena);
    /* nothing the codec allocated outlives the test */
    assert_int_equal(sf_alloc_in_use(), f->in_use);
    free(f);
    return 0;
}

/* Canonical OTLP/JSON (what the encoder writes) with every field set. */
static const char FULL[] =
    "{'resourceSpans':[{'resource':{'attributes':["
    "{'key':'service.name','value':{'stringValue':'sglang'}},"
    "{'key':'host.count','value':{'intValue':'3'}}],'droppedAttributesCount':1},"
    "'scopeSpans':[{'scope':{'name':'sglang.tracer','version':'1.2.3','attributes':["
    "{'key':'scope.flag','value':{'boolValue':true}}],'droppedAttributesCount':2},"
    "'spans':[{'traceId':'5b8efff798038103d269b633813fc60c','spanId':'eee19b7ec3c1b174',"
    "'traceState':'vendor=1','parentSpanId':'eee19b7ec3c1b173','flags':769,'name':'generate',"
    "'kind':2,'startTimeUnixNano':'1544712660000000000','endTimeUnixNano':'18446744073709551615',"
    "'attributes':["
    "{'key':'max','value':{'intValue':'9223372036854775807'}},"
    "{'key':'min','value':{'intValue':'-9223372036854775808'}},"
    "{'key':'zero','value':{'intValue':'0'}},"
    "{'key':'tenth','value':{'doubleValue':0.1}},"
    "{'key':'tiny','value':{'doubleValue':1e-300}},"
    "{'key':'nan','value':{'doubleValue':'NaN'}},"
    "{'key':'inf','value':{'doubleValue':'Infinity'}},"
    "{'key':'ninf','value':{'doubleValue':'-Infinity'}},"
    "{'key':'ok','value':{'boolValue':false}},"
    "{'key':'blob','value':{'bytesValue':'AAEC/w=='}},"
    "{'key':'empty','value':{'stringValue':''}},"
    "{'key':'text','value':{'stringValue':'caf\xc3\xa9 \\'q\\' \\\\ \\n'}},"
    "{'key':'list','value':{'arrayValue':{'values':["
    "{'stringValue':'a'},{'intValue':'1'},{'arrayValue':{}}]}}},"
    "{'key':'map','value':{'kvlistValue':{'values':["
    "{'key':'inner','value':{'kvlistValue':{'values':["
    "{'key':'leaf','value':{'doubleValue':-2.5}}]}}},"
    "{'key':'novalue'}]}}},"
    "{'key':'unset','value':{}}],"
    "'droppedAttributesCount':3,"
    "'events':[{'timeUnixNano':'1544712660500000000','name':'first_token',"
    "'attributes':[{'key':'tokens','value':{'intValue':'42'}}],'droppedAttributesCount':4}],"
    "'droppedEventsCount':5,"
    "'links':[{'traceId':'0af7651916cd43dd8448eb211c80319c','spanId':'b7ad6b7169203331',"
    "'traceState':'l=2','attributes':[{'key':'link.kind','value':{'stringValue':'follows'}}],"
    "'droppedAttributesCount':6,'flags':256}],"
    "'droppedLinksCount':7,"
    "'status':{'message':'boom','code':2}}],"
    "'schemaUrl':'https://opentelemetry.io/schemas/1.21.0'}],"
    "'schemaUrl':'https://opentelemetry.io/schemas/1.20.0'}]}";

static void assert_roundtrip(fixture *f, const char *in, const char *expect)
{
    sf_otlp_request *req = NULL;
    char err[256] = "untouched";
    char *out = NULL;
    size_t out_len = 0;

    assert_int_equal(sf_otlp_json_decode(f->arena, in, strlen(in), SF_OTLP_DEFAULT_MAX_DEPTH,
                                         &req, err, sizeof(err)), SF_OK);
    assert_string_equal(err, "");
    assert_non_null(req);
    assert_int_equal(sf_otlp_json_encode(req, &out, &out_len), SF_OK);
    assert_string_equal(out, expect);
    assert_int_equal(out_len, strlen(expect));
    sf_free(out);
}

static void test_roundtrip_canonical(void **state)
{
    const char *full = q(FULL);

    assert_roundtrip(*state, full, full);
}

/* Everything a receiver must take besides the canonical form. */
static void test_roundtrip_lenient_forms(void **state)
{
    const char *in = span_json(
        "'trace_id':'5B8EFFF798038103D269B633813FC60C','span_id':'EEE19B7EC3C1B174',"
        "'parentSpanId':'','kind':'SPAN_KIND_CLIENT',"
        "'start_time_unix_nano':1544712660000000000,'endTimeUnixNano':'1544712661000000000',"
        "'attributes':["
        "{'key':'n','value':{'int_value':9223372036854775807}},"
        "{'key':'m','value':{'intValue':-9223372036854775808}},"
        "{'key':'e','value':{'intValue':1e3}},"
        "{'key':'d','value':{'double_value':'1.5'}},"
        "{'key':'i','value':{'doubleValue':2}},"
        "{'key':'b','value':{'bytes_value':'AAEC/w'}},"
        "{'key':'u','value':{'bytesValue':'_-8='}},"     /* URL-safe alphabet */
        "{'key':'v','value':{'bytesValue':'AP_-ABCD_w'}},"   /* and unpadded */
        "{'key':'s','value':{'stringValue':'x','futureValue':1,'boolValue':null}},"
        "{'key':'k','value':{'kvlist_value':{'values':[]}}}],"
        "'status':{'code':'STATUS_CODE_OK','message':null},"
        "'droppedEventsCount':'8','flags':1,"
        "'unknownField':{'deep':[1,2,{'x':null}]},'events':null");
    const char *expect = span_json(
        "'traceId':'5b8efff798038103d269b633813fc60c','spanId':'eee19b7ec3c1b174',"
        "'flags':1,'kind':3,"
        "'startTimeUnixNano':'1544712660000000000','endTimeUnixNano':'1544712661000000000',"
        "'attributes':["
        "{'key':'n','value':{'intValue':'9223372036854775807'}},"
        "{'key':'m','value':{'intValue':'-9223372036854775808'}},"
        "{'key':'e','value':{'intValue':'1000'}},"
        "{'key':'d','value':{'doubleValue':1.5}},"
        "{'key':'i','value':{'doubleValue':2}},"
        "{'key':'b','value':{'bytesValue':'AAEC/w=='}},"
        "{'key':'u','value':{'bytesValue':'/+8='}},"
        "{'key':'v','value':{'bytesValue':'AP/+ABCD/w=='}},"
        "{'key':'s','value':{'stringValue':'x'}},"
        "{'key':'k','value':{'kvlistValue':{}}}],"
        "'droppedEventsCount':8,'status':{'code':1}");
    char with_blanks[8192];

    assert_roundtrip(*state, in, expect);
    /* blanks around the top object are fine */
    snprintf(with_blanks, sizeof(with_blanks), " \n%s\r\n\t ", in);
    assert_roundtrip(*state, with_blanks, expect);
    assert_roundtrip(*state, q("{}"), q("{}"));
    assert_roundtrip(*state, q("{'resourceSpans':[]}"), q("{}"));
    assert_roundtrip(*state, q("{'resourceSpans':[{}]}"), q("{'resourceSpans':[{}]}"));
}

static const uint8_t TRACE_ID[16] = { 0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03,
                                      0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c };
static const uint8_t SPAN_ID[8] = { 0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74 };

static void assert_bytes(ProtobufCBinaryData b, const void *data, size_t len)
{
    assert_int_equal(b.len, len);
    assert_memory_equal(b.data, data, len);
}

static const sf_otlp_any *attr(sf_otlp_kv *const *kvs, size_t n, size_t i, const char *key)
{
    assert_true(i < n);
    assert_string_equal(kvs[i]->key, key);
    assert_non_null(kvs[i]->value);
    return kvs[i]->value;
}

/* Decode, pack with protobuf-c, unpack again: every field survives. */
static void test_decode_pack_unpack(void **state)
{
    fixture *f = *state;
    const char *full = q(FULL);
    sf_otlp_request *req = NULL;
    char err[256];
    uint8_t *wire;
    size_t wire_len, spans = 0;
    sf_otlp_request *u;
    const sf_otlp_resource_spans *rs;
    const sf_otlp_scope_spans *ss;
    const sf_otlp_span *s;
    const sf_otlp_any *a;

    assert_int_equal(sf_otlp_json_decode(f->arena, full, strlen(full), 32, &req, err,
                                         sizeof(err)), SF_OK);
    wire_len = protobuf_c_message_get_packed_size(&req->base);
    wire = malloc(wire_len);
    assert_non_null(wire);
    assert_int_equal(protobuf_c_message_pack(&req->base, wire), wire_len);
    assert_int_equal(sf_otlp_scan(wire, wire_len, 32, &spans), SF_OK);
    assert_int_equal(spans, 1);
    u = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, wire_len, wire);
    assert_non_null(u);

    assert_int_equal(u->n_resource_spans, 1);
    rs = u->resource_spans[0];
    assert_string_equal(rs->schema_url, "https://opentelemetry.io/schemas/1.20.0");
    assert_non_null(rs->resource);
    assert_int_equal(rs->resource->n_attributes, 2);
    assert_int_equal(rs->resource->dropped_attributes_count, 1);
    a = attr(rs->resource->attributes, 2, 0, "service.name");
    assert_int_equal(a->value_case, ANY_CASE(STRING_VALUE));
    assert_string_equal(a->string_value, "sglang");
    a = attr(rs->resource->attributes, 2, 1, "host.count");
    assert_int_equal(a->value_case, ANY_CASE(INT_VALUE));
    assert_int_equal(a->int_value, 3);

    assert_int_equal(rs->n_scope_spans, 1);
    ss = rs->scope_spans[0];
    assert_string_equal(ss->schema_url, "https://opentelemetry.io/schemas/1.21.0");
    assert_string_equal(ss->scope->name, "sglang.tracer");
    assert_string_equal(ss->scope->version, "1.2.3");
    assert_int_equal(ss->scope->dropped_attributes_count, 2);
    a = attr(ss->scope->attributes, ss->scope->n_attributes, 0, "scope.flag");
    assert_int_equal(a->value_case, ANY_CASE(BOOL_VALUE));
    assert_true(a->bool_value);

    assert_int_equal(ss->n_spans, 1);
    s = ss->spans[0];
    assert_bytes(s->trace_id, TRACE_ID, 16);
    assert_bytes(s->span_id, SPAN_ID, 8);
    assert_bytes(s->parent_span_id, "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x73", 8);
    assert_string_equal(s->trace_state, "vendor=1");
    assert_int_equal(s->flags, 769);
    assert_string_equal(s->name, "generate");
    assert_int_equal(s->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER);
    assert_true(s->start_time_unix_nano == UINT64_C(1544712660000000000));
    assert_true(s->end_time_unix_nano == UINT64_MAX);
    assert_int_equal(s->dropped_attributes_count, 3);
    assert_int_equal(s->dropped_events_count, 5);
    assert_int_equal(s->dropped_links_count, 7);

    assert_int_equal(s->n_attributes, 15);
    a = attr(s->attributes, s->n_attributes, 0, "max");
    assert_int_equal(a->value_case, ANY_CASE(INT_VALUE));
    assert_true(a->int_value == INT64_MAX);
    a = attr(s->attributes, s->n_attributes, 1, "min");
    assert_true(a->int_value == INT64_MIN);
    a = attr(s->attributes, s->n_attributes, 2, "zero");
    assert_int_equal(a->value_case, ANY_CASE(INT_VALUE));
    assert_true(a->int_value == 0);
    a = attr(s->attributes, s->n_attributes, 3, "tenth");
    assert_int_equal(a->value_case, ANY_CASE(DOUBLE_VALUE));
    assert_true(a->double_value == 0.1);
    a = attr(s->attributes, s->n_attributes, 4, "tiny");
    assert_true(a->double_value == 1e-300);
    a = attr(s->attributes, s->n_attributes, 5, "nan");
    assert_true(isnan(a->double_value));
    a = attr(s->attributes, s->n_attributes, 6, "inf");
    assert_true(isinf(a->double_value) && a->double_value > 0);
    a = attr(s->attributes, s->n_attributes, 7, "ninf");
    assert_true(isinf(a->double_value) && a->double_value < 0);
    a = attr(s->attributes, s->n_attributes, 8, "ok");
    assert_int_equal(a->value_case, ANY_CASE(BOOL_VALUE));
    assert_false(a->bool_value);
    a = attr(s->attributes, s->n_attributes, 9, "blob");
    assert_int_equal(a->value_case, ANY_CASE(BYTES_VALUE));
    assert_bytes(a->bytes_value, "\x00\x01\x02\xff", 4);
    a = attr(s->attributes, s->n_attributes, 10, "empty");
    assert_int_equal(a->value_case, ANY_CASE(STRING_VALUE));
    assert_string_equal(a->string_value, "");
    a = attr(s->attributes, s->n_attributes, 11, "text");
    assert_string_equal(a->string_value, "caf\xc3\xa9 \"q\" \\ \n");
    a = attr(s->attributes, s->n_attributes, 12, "list");
    assert_int_equal(a->value_case, ANY_CASE(ARRAY_VALUE));
    assert_int_equal(a->array_value->n_values, 3);
    assert_string_equal(a->array_value->values[0]->string_value, "a");
    assert_true(a->array_value->values[1]->int_value == 1);
    assert_int_equal(a->array_value->values[2]->value_case, ANY_CASE(ARRAY_VALUE));
    assert_int_equal(a->array_value->values[2]->array_value->n_values, 0);
    a = attr(s->attributes, s->n_attributes, 13, "map");
    assert_int_equal(a->value_case, ANY_CASE(KVLIST_VALUE));
    assert_int_equal(a->kvlist_value->n_values, 2);
    {
        const sf_otlp_any *inner = attr(a->kvlist_value->values, 2, 0, "inner");
        const sf_otlp_any *leaf;
        assert_int_equal(inner->value_case, ANY_CASE(KVLIST_VALUE));
        leaf = attr(inner->kvlist_value->values, inner->kvlist_value->n_values, 0, "leaf");
        assert_true(leaf->double_value == -2.5);
        assert_string_equal(a->kvlist_value->values[1]->key, "novalue");
        assert_null(a->kvlist_value->values[1]->value);
    }
    a = attr(s->attributes, s->n_attributes, 14, "unset");
    assert_int_equal(a->value_case, ANY_CASE(_NOT_SET));

    assert_int_equal(s->n_events, 1);
    assert_true(s->events[0]->time_unix_nano == UINT64_C(1544712660500000000));
    assert_string_equal(s->events[0]->name, "first_token");
    assert_int_equal(s->events[0]->dropped_attributes_count, 4);
    a = attr(s->events[0]->attributes, s->events[0]->n_attributes, 0, "tokens");
    assert_true(a->int_value == 42);

    assert_int_equal(s->n_links, 1);
    assert_bytes(s->links[0]->trace_id,
                 "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c", 16);
    assert_bytes(s->links[0]->span_id, "\xb7\xad\x6b\x71\x69\x20\x33\x31", 8);
    assert_string_equal(s->links[0]->trace_state, "l=2");
    assert_int_equal(s->links[0]->dropped_attributes_count, 6);
    assert_int_equal(s->links[0]->flags, 256);
    a = attr(s->links[0]->attributes, s->links[0]->n_attributes, 0, "link.kind");
    assert_string_equal(a->string_value, "follows");

    assert_non_null(s->status);
    assert_string_equal(s->status->message, "boom");
    assert_int_equal(s->status->code,
                     OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);

    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
        u, NULL);
    free(wire);
}

/* ---- protobuf -> JSON ---------------------------------------------------- */

static void test_encode_small_exact(void **state)
{
    fixture *f = *state;
    sf_otlp_any v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sf_otlp_kv kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    sf_otlp_kv *kvs[] = { &kv };
    sf_otlp_status status = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    sf_otlp_span span = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sf_otlp_span *spans[] = { &span };
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_scope_spans *sss[] = { &ss };
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource_spans *rss[] = { &rs };
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    const char *expect = q("{'resourceSpans':[{'scopeSpans':[{'spans':[{"
                           "'traceId':'5b8efff798038103d269b633813fc60c',"
                           "'spanId':'eee19b7ec3c1b174','name':'a/b',"
                           "'startTimeUnixNano':'1','endTimeUnixNano':'2',"
                           "'attributes':[{'key':'k','value':{'intValue':'-1'}}],"
                           "'status':{}}]}]}]}");
    char *out = NULL;
    size_t out_len = 0;
    sf_otlp_request *back = NULL;
    char err[256];

    (void)f;
    v.value_case = ANY_CASE(INT_VALUE);
    v.int_value = -1;
    kv.key = "k";
    kv.value = &v;
    span.trace_id.len = 16;
    span.trace_id.data = (uint8_t *)TRACE_ID;
    span.span_id.len = 8;
    span.span_id.data = (uint8_t *)SPAN_ID;
    span.name = "a/b";
    span.start_time_unix_nano = 1;
    span.end_time_unix_nano = 2;
    span.n_attributes = 1;
    span.attributes = kvs;
    span.status = &status;           /* present but empty: written as {} */
    ss.n_spans = 1;
    ss.spans = spans;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    req.n_resource_spans = 1;
    req.resource_spans = rss;

    assert_int_equal(sf_otlp_json_encode(&req, &out, &out_len), SF_OK);
    assert_string_equal(out, expect);
    assert_int_equal(out_len, strlen(expect));
    assert_int_equal(sf_otlp_json_decode(f->arena, out, out_len, 32, &back, err, sizeof(err)),
                     SF_OK);
    assert_bytes(back->resource_spans[0]->scope_spans[0]->spans[0]->trace_id, TRACE_ID, 16);
    assert_true(back->resource_spans[0]->scope_spans[0]->spans[0]->attributes[0]->value->int_value
                == -1);
    assert_non_null(back->resource_spans[0]->scope_spans[0]->spans[0]->status);
    sf_free(out);
}

static sf_otlp_kv *mk_kv(sf_arena *a, const char *key, sf_otlp_any *v)
{
    sf_otlp_kv *kv = sf_arena_alloc(a, sizeof(*kv));

    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static sf_otlp_any *mk_any(sf_arena *a, int value_case)
{
    sf_otlp_any *v = sf_arena_alloc(a, sizeof(*v));

    opentelemetry__proto__common__v1__any_value__init(v);
    v->value_case = value_case;
    return v;
}

/* Packed bytes of a request, malloc'd, for equality of whole trees. */
static uint8_t *packed(const sf_otlp_request *r, size_t *len)
{
    uint8_t *buf;

    *len = protobuf_c_message_get_packed_size(&r->base);
    buf = malloc(*len ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(&r->base, buf), *len);
    return buf;
}

/* A request built in code with every field of every message set encodes
 * and decodes back to the same protobuf bytes. */
static void test_encode_every_field_decodes_back_equal(void **state)
{
    fixture *f = *state;
    sf_arena *a = sf_arena_create(4096, 0);
    sf_otlp_request *req = NULL, *back = NULL;
    sf_otlp_any *v[8];
    sf_otlp_any **arr_vals;
    sf_otlp_kv **kvl_vals, **attrs;
    char *out = NULL, err[256];
    size_t out_len, len1, len2;
    uint8_t *p1, *p2;

    assert_non_null(a);
    /* start from the decoded canonical tree, then set what JSON cannot
     * reach by the canonical text alone: extreme values built in code */
    assert_int_equal(sf_otlp_json_decode(a, q(FULL), strlen(FULL), 32, &req, err, sizeof(err)),
                     SF_OK);
    v[0] = mk_any(a, ANY_CASE(STRING_VALUE));
    v[0]->string_value = "s";
    v[1] = mk_any(a, ANY_CASE(BOOL_VALUE));
    v[1]->bool_value = 1;
    v[2] = mk_any(a, ANY_CASE(INT_VALUE));
    v[2]->int_value = INT64_MIN;
    v[3] = mk_any(a, ANY_CASE(DOUBLE_VALUE));
    v[3]->double_value = 4.9406564584124654e-324;       /* smallest subnormal */
    v[4] = mk_any(a, ANY_CASE(BYTES_VALUE));
    v[4]->bytes_value.len = 5;
    v[4]->bytes_value.data = (uint8_t *)"\xfb\xff\x00\x10\x83";
    v[5] = mk_any(a, ANY_CASE(ARRAY_VALUE));
    v[5]->array_value = sf_arena_alloc(a, sizeof(*v[5]->array_value));
    opentelemetry__proto__common__v1__array_value__init(v[5]->array_value);
    arr_vals = sf_arena_alloc(a, 2 * sizeof(*arr_vals));
    arr_vals[0] = v[0];
    arr_vals[1] = v[3];
    v[5]->array_value->n_values = 2;
    v[5]->array_value->values = arr_vals;
    v[6] = mk_any(a, ANY_CASE(KVLIST_VALUE));
    v[6]->kvlist_value = sf_arena_alloc(a, sizeof(*v[6]->kvlist_value));
    opentelemetry__proto__common__v1__key_value_list__init(v[6]->kvlist_value);
    kvl_vals = sf_arena_alloc(a, 1 * sizeof(*kvl_vals));
    kvl_vals[0] = mk_kv(a, "nested", v[5]);
    v[6]->kvlist_value->n_values = 1;
    v[6]->kvlist_value->values = kvl_vals;
    v[7] = mk_any(a, ANY_CASE(DOUBLE_VALUE));
    v[7]->double_value = 1.7976931348623157e308;
    attrs = sf_arena_alloc(a, 8 * sizeof(*attrs));
    for (int i = 0; i < 8; i++) {
        static const char *const keys[] = { "s", "b", "i", "d", "y", "a", "m", "big" };
        attrs[i] = mk_kv(a, keys[i], v[i]);
    }
    req->resource_spans[0]->scope_spans[0]->spans[0]->events[0]->attributes = attrs;
    req->resource_spans[0]->scope_spans[0]->spans[0]->events[0]->n_attributes = 8;
    req->resource_spans[0]->scope_spans[0]->spans[0]->start_time_unix_nano = 0;
    req->resource_spans[0]->scope_spans[0]->spans[0]->kind = 5;

    assert_int_equal(sf_otlp_json_encode(req, &out, &out_len), SF_OK);
    assert_non_null(strstr(out, q("'events':[{'timeUnixNano':'1544712660500000000',"
                                  "'name':'first_token','attributes':["
                                  "{'key':'s','value':{'stringValue':'s'}},"
                                  "{'key':'b','value':{'boolValue':true}},"
                                  "{'key':'i','value':{'intValue':'-9223372036854775808'}},"
                                  "{'key':'d','value':{'doubleValue':4.94065645841247e-324}},"
                                  "{'key':'y','value':{'bytesValue':'+/8AEIM='}},"
                                  "{'key':'a','value':{'arrayValue':{'values':["
                                  "{'stringValue':'s'},"
                                  "{'doubleValue':4.94065645841247e-324}]}}},"
                                  "{'key':'m','value':{'kvlistValue':{'values':["
                                  "{'key':'nested','value':{'arrayValue':{'values':["
                                  "{'stringValue':'s'},"
                                  "{'doubleValue':4.94065645841247e-324}]}}}]}}},"
                                  "{'key':'big','value':{'doubleValue':1.7976931348623157e+308}}"
                                  "],'droppedAttributesCount':4}]")));
    /* zero start time is omitted, kind 5 is a number */
    assert_null(strstr(out, "startTimeUnixNano"));
    assert_non_null(strstr(out, q("'kind':5,'endTimeUnixNano'")));
    assert_int_equal(sf_otlp_json_decode(f->arena, out, out_len, 32, &back, err, sizeof(err)),
                     SF_OK);
    p1 = packed(req, &len1);
    p2 = packed(back, &len2);
    assert_int_equal(len1, len2);
    assert_memory_equal(p1, p2, len1);
    free(p1);
    free(p2);
    sf_free(out);
    sf_arena_destroy(a);
}

/* protobuf-c does not check UTF-8; the JSON line must stay valid. */
static void test_encode_replaces_bad_utf8(void **state)
{
    sf_otlp_span span = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sf_otlp_span *spans[] = { &span };
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_scope_spans *sss[] = { &ss };
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource_spans *rss[] = { &rs };
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    char *out = NULL;
    size_t out_len;

    (void)state;
    /* a stray continuation byte, an overlong '/', a surrogate, a cut 3-byte
     * sequence at the end; the valid 4-byte emoji stays */
    span.name = "a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "\xf0\x9f\x98\x80" "d\xe2\x82";
    ss.n_spans = 1;
    ss.spans = spans;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    req.n_resource_spans = 1;
    req.resource_spans = rss;
    assert_int_equal(sf_otlp_json_encode(&req, &out, &out_len), SF_OK);
    assert_string_equal(out, span_json("'name':'a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd"
                                       "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                                       "\xf0\x9f\x98\x80" "d\xef\xbf\xbd\xef\xbf\xbd'"));
    sf_free(out);
}

static void test_encode_response(void **state)
{
    sf_otlp_response resp = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
    char *out = NULL;
    size_t out_len;

    (void)state;
    assert_int_equal(sf_otlp_json_encode_response(&resp, &out, &out_len), SF_OK);
    assert_string_equal(out, "{}");
    assert_int_equal(out_len, 2);
    sf_free(out);
    resp.partial_success = &ps;
    ps.rejected_spans = 9223372036854775807;
    ps.error_message = "attribute \"x\" not allowed";
    assert_int_equal(sf_otlp_json_encode_response(&resp, &out, &out_len), SF_OK);
    assert_string_equal(out, "{\"partialSuccess\":{\"rejectedSpans\":\"9223372036854775807\","
                             "\"errorMessage\":\"attribute \\\"x\\\" not allowed\"}}");
    sf_free(out);
}

/* ---- refusals ------------------------------------------------------------ */

static void assert_refused(fixture *f, const char *json, size_t len, unsigned max_depth,
                           sf_status want, const char *want_err)
{
    sf_otlp_request *req = (sf_otlp_request *)&req;     /* must be reset to NULL */
    char err[256] = "untouched";

    assert_int_equal(sf_otlp_json_decode(f->arena, json, len, max_depth, &req, err,
                                         sizeof(err)), want);
    assert_string_equal(err, want_err);
    assert_null(req);
}

static void refused(fixture *f, const char *json, const char *want_err)
{
    assert_refused(f, json, strlen(json), 32, SF_INVALID, want_err);
}

static void test_refuses_bad_json(void **state)
{
    fixture *f = *state;
    const char full_then_junk[] = "{}\0{}";

    refused(f, "", "empty json");
    refused(f, "[]", "not a json object");
    refused(f, "\"x\"", "not a json object");
    refused(f, "null", "not a json object");
    refused(f, "42", "not a json object");
    refused(f, q("{'resourceSpans':["), "truncated json");
    refused(f, q("{'resourceSpans':[{'scopeSpans'"), "truncated json");
    refused(f, "{} x", "trailing data at offset 3");
    refused(f, "{}{}", "trailing data at offset 2");
    refused(f, q("{'a':1,}"), "invalid json at offset 7: unexpected character");
    refused(f, q("{'a':'\xff'}"), "invalid json at offset 6: invalid utf-8 string");
    /* the explicit length is honoured: nothing after len is read, and a NUL
     * inside len is trailing data */
    assert_refused(f, q("{}{}"), 3, 32, SF_INVALID, "trailing data at offset 2");
    assert_refused(f, q("{'resourceSpans':[]}"), 10, 32, SF_INVALID, "truncated json");
    assert_refused(f, full_then_junk, sizeof(full_then_junk) - 1, 32, SF_INVALID,
                   "trailing data at offset 2");
}

static void test_refuses_bad_ids_and_bytes(void **state)
{
    fixture *f = *state;

    refused(f, span_json("'traceId':'5b8efff798038103d269b633813fc60'"),
            SPAN_PATH ".traceId: not 32 hex digits");
    refused(f, span_json("'traceId':'5b8efff798038103d269b633813fc60c00'"),
            SPAN_PATH ".traceId: not 32 hex digits");
    refused(f, span_json("'trace_id':'5b8efff798038103d269b633813fc6xz'"),
            SPAN_PATH ".traceId: not 32 hex digits");
    refused(f, span_json("'spanId':'eee19b7ec3c1b1 4'"), SPAN_PATH ".spanId: not 16 hex digits");
    refused(f, span_json("'parentSpanId':'W+GbfsPBsXQ='"),
            SPAN_PATH ".parentSpanId: not 16 hex digits");
    refused(f, span_json("'spanId':12"), SPAN_PATH ".spanId: expected a hex string");
    refused(f, span_json("'links':[{},{'traceId':'00'}]"),
            SPAN_PATH ".links[1].traceId: not 32 hex digits");
    refused(f, span_json("'attributes':[{'key':'b','value':{'bytesValue':'A'}}]"),
            SPAN_PATH ".attributes[0].value.bytesValue: not valid base64");
    refused(f, span_json("'attributes':[{'key':'b','value':{'bytesValue':'AB=C'}}]"),
            SPAN_PATH ".attributes[0].value.bytesValue: not valid base64");
    refused(f, span_json("'attributes':[{'key':'b','value':{'bytesValue':'AB='}}]"),
            SPAN_PATH ".attributes[0].value.bytesValue: not valid base64");
    refused(f, span_json("'attributes':[{'key':'b','value':{'bytesValue':'AAA==='}}]"),
            SPAN_PATH ".attributes[0].value.bytesValue: not valid base64");
    refused(f, span_json("'attributes':[{'key':'b','value':{'bytesValue':'AA.*'}}]"),
            SPAN_PATH ".attributes[0].value.bytesValue: not valid base64");
}

static void test_refuses_wrong_types(void **state)
{
    fixture *f = *state;

    refused(f, q("{'resourceSpans':{}}"), "resourceSpans: expected an array");
    refused(f, q("{'resourceSpans':[null]}"), "resourceSpans[0]: expected an object");
    refused(f, q("{'resourceSpans':[{'resource':'x'}]}"),
            "resourceSpans[0].resource: expected an object");
    refused(f, q("{'resourceSpans':[{'resource':{'attributes':[{'key':1}]}}]}"),
            "resourceSpans[0].resource.attributes[0].key: expected a string");
    refused(f, q("{'resourceSpans':[{'schemaUrl':true}]}"),
            "resourceSpans[0].schemaUrl: expected a string");
    refused(f, span_json("'name':'a\\u0000b'"), SPAN_PATH ".name: string contains a nul character");
    refused(f, span_json("'kind':'SPAN_KIND_BOGUS'"), SPAN_PATH ".kind: unknown enum name");
    refused(f, span_json("'kind':2147483648"), SPAN_PATH ".kind: integer out of range");
    refused(f, span_json("'status':{'code':[]}"), SPAN_PATH ".status.code: expected an integer");
    refused(f, span_json("'flags':-1"), SPAN_PATH ".flags: integer out of range");
    refused(f, span_json("'droppedAttributesCount':4294967296"),
            SPAN_PATH ".droppedAttributesCount: integer out of range");
    refused(f, span_json("'droppedLinksCount':1.5"), SPAN_PATH ".droppedLinksCount: not an integer");
    refused(f, span_json("'startTimeUnixNano':'-1'"),
            SPAN_PATH ".startTimeUnixNano: integer out of range");
    refused(f, span_json("'endTimeUnixNano':'18446744073709551616'"),
            SPAN_PATH ".endTimeUnixNano: integer out of range");
    refused(f, span_json("'endTimeUnixNano':'1e3'"), SPAN_PATH ".endTimeUnixNano: not an integer");
    refused(f, span_json("'endTimeUnixNano':' 1'"), SPAN_PATH ".endTimeUnixNano: not an integer");
    refused(f, span_json("'events':[{'timeUnixNano':{}}]"),
            SPAN_PATH ".events[0].timeUnixNano: expected an integer");
    refused(f, span_json("'attributes':[{'key':'i','value':{'intValue':'9223372036854775808'}}]"),
            SPAN_PATH ".attributes[0].value.intValue: integer out of range");
    refused(f, span_json("'attributes':[{'key':'i','value':{'intValue':'-9223372036854775809'}}]"),
            SPAN_PATH ".attributes[0].value.intValue: integer out of range");
    refused(f, span_json("'attributes':[{'key':'i','value':{'intValue':9223372036854775808}}]"),
            SPAN_PATH ".attributes[0].value.intValue: integer out of range");
    refused(f, span_json("'attributes':[{'key':'i','value':{'intValue':''}}]"),
            SPAN_PATH ".attributes[0].value.intValue: not an integer");
    refused(f, span_json("'attributes':[{'key':'b','value':{'boolValue':'true'}}]"),
            SPAN_PATH ".attributes[0].value.boolValue: expected true or false");
    refused(f, span_json("'attributes':[{'key':'d','value':{'doubleValue':'abc'}}]"),
            SPAN_PATH ".attributes[0].value.doubleValue: not a number");
    refused(f, span_json("'attributes':[{'key':'d','value':{'doubleValue':'inf'}}]"),
            SPAN_PATH ".attributes[0].value.doubleValue: not a number");
    refused(f, span_json("'attributes':[{'key':'d','value':{'doubleValue':NaN}}]"),
            SPAN_PATH ".attributes[0].value.doubleValue: not a finite number");
    refused(f, span_json("'attributes':[{'key':'d','value':{'doubleValue':1e999}}]"),
            SPAN_PATH ".attributes[0].value.doubleValue: not a finite number");
    refused(f, span_json("'attributes':[{'key':'x','value':{'stringValue':'a','intValue':1}}]"),
            SPAN_PATH ".attributes[0].value.intValue: more than one value set");
    refused(f, span_json("'attributes':[{'key':'x','value':{'arrayValue':[]}}]"),
            SPAN_PATH ".attributes[0].value.arrayValue: expected an object");
    refused(f, span_json("'attributes':[{'key':'x','value':'plain'}]"),
            SPAN_PATH ".attributes[0].value: expected an object");
    refused(f, span_json("'traceId':'','trace_id':''"), SPAN_PATH ".traceId: field given twice");
}

/* Python's json_format.Parse refuses a member given twice at any level,
 * known field or not ("Failed to load JSON: duplicate key name"); json-c
 * keeps the last one silently. */
static void test_refuses_duplicate_members(void **state)
{
    fixture *f = *state;
    sf_otlp_request *req = NULL;
    char err[256];
    const char *ok;

    refused(f, q("{'resourceSpans':[],'resourceSpans':[]}"),
            "member 'resourceSpans' given twice (offset 20)");
    refused(f, span_json("'name':'a','name':'b'"), "member 'name' given twice (offset 55)");
    /* the same name spelled with an escape is the same name */
    refused(f, span_json("'name':'a','n\\u0061me':'b'"), "member 'name' given twice (offset 55)");
    /* unknown members too, at any depth */
    refused(f, q("{'x':1,'x':2}"), "member 'x' given twice (offset 7)");
    refused(f, span_json("'unknown':{'deep':[{'a':1,'a':1}]}"),
            "member 'a' given twice (offset 70)");
    refused(f, span_json("'attributes':[{'key':'k','value':{'stringValue':'v','stringValue':'w'}}]"),
            "member 'stringValue' given twice (offset 96)");
    /* a name not worth repeating is not repeated */
    refused(f, q("{'a b':1,'a b':2}"), "a member name given twice (offset 9)");
    /* camelCase and snake_case of one field are one field (as before) */
    refused(f, span_json("'traceId':'','trace_id':''"), SPAN_PATH ".traceId: field given twice");
    /* one name in sibling objects, or in an object and the one inside it, is fine */
    ok = span_json("'attributes':[{'key':'a','value':{'kvlistValue':{'values':["
                   "{'key':'a','value':{'stringValue':'a'}}]}}},{'key':'a'}],'x':{'x':{'x':1}}");
    assert_int_equal(sf_otlp_json_decode(f->arena, ok, strlen(ok), 32, &req, err, sizeof(err)),
                     SF_OK);
    assert_int_equal(req->resource_spans[0]->scope_spans[0]->spans[0]->n_attributes, 2);
}

/* A \uXXXX escape of half a UTF-16 surrogate pair names no character:
 * json-c writes U+FFFD for it, Go's protojson refuses it anywhere in the
 * text ("invalid escape code"), Python's json_format in every string it
 * reads ("Unpaired surrogate"). Refused anywhere, as protojson does. */
static void test_refuses_lone_surrogates(void **state)
{
    fixture *f = *state;
    sf_otlp_request *req = NULL;
    char err[256];
    const char *pair;

    refused(f, span_json("'name':'\\ud800'"), "lone utf-16 surrogate \\ud800 at offset 52");
    refused(f, span_json("'name':'\\ud800x'"), "lone utf-16 surrogate \\ud800 at offset 52");
    refused(f, span_json("'name':'\\uDBFF\\u0041'"), "lone utf-16 surrogate \\udbff at offset 52");
    refused(f, span_json("'name':'\\udc00'"), "lone utf-16 surrogate \\udc00 at offset 52");
    refused(f, span_json("'name':'x\\ud800\\ud800'"), "lone utf-16 surrogate \\ud800 at offset 53");
    refused(f, span_json("'name':'\\ude00\\ud83d'"), "lone utf-16 surrogate \\ude00 at offset 52");
    refused(f, span_json("'name':'\\\\ud800\\udfff'"), "lone utf-16 surrogate \\udfff at offset 59");
    refused(f, q("{'unknown':'\\ud800'}"), "lone utf-16 surrogate \\ud800 at offset 12");
    refused(f, q("{'\\ud800':1}"), "lone utf-16 surrogate \\ud800 at offset 2");
    refused(f, q("{'x':'\\ud800'}"), "lone utf-16 surrogate \\ud800 at offset 6");
    /* a pair is one character; "\\ud800" is a backslash and text */
    pair = span_json("'name':'\\ud83d\\ude00 \\uD83D\\uDE00'");
    assert_int_equal(sf_otlp_json_decode(f->arena, pair, strlen(pair), 32, &req, err,
                                         sizeof(err)), SF_OK);
    assert_string_equal(req->resource_spans[0]->scope_spans[0]->spans[0]->name,
                        "\xf0\x9f\x98\x80 \xf0\x9f\x98\x80");
    pair = span_json("'name':'\\\\ud800'");
    assert_int_equal(sf_otlp_json_decode(f->arena, pair, strlen(pair), 32, &req, err,
                                         sizeof(err)), SF_OK);
    assert_string_equal(req->resource_spans[0]->scope_spans[0]->spans[0]->name, "\\ud800");
}

/* Member names json-c reads otherwise than JSON does: single-quoted (json-c
 * takes them even in strict mode), and cut at a \u0000 (so
 * "resourceSpans\u0000x" would be read as resourceSpans). */
static void test_refuses_names_json_c_misreads(void **state)
{
    fixture *f = *state;

    refused(f, "{'resourceSpans':[]}", "member name not in double quotes at offset 1");
    refused(f, "{\"resourceSpans\":[{'scopeSpans':[]}]}",
            "member name not in double quotes at offset 19");
    refused(f, q("{'resourceSpans\\u0000x':[{'x':1}]}"),
            "member name with a \\u0000 escape before offset 23");
    /* a quote inside a string is text */
    refused(f, span_json("'name':'it\\'s','name':''"), "member 'name' given twice (offset 59)");
}

/* Resource.entity_refs (opentelemetry.proto.common.v1.EntityRef) is decoded
 * as the schema has it, not skipped as unknown: the same request in JSON and
 * protobuf means the same. */
static void test_decodes_entity_refs(void **state)
{
    fixture *f = *state;
    const char *in = q("{'resourceSpans':[{'resource':{'attributes':[],'entityRefs':["
                       "{'schemaUrl':'https://s/1','type':'service','idKeys':['service.name',"
                       "'service.namespace'],'descriptionKeys':['service.version']},"
                       "{'schema_url':'','id_keys':[],'description_keys':['']},{}]}}]}");
    const char *canonical = q("{'resourceSpans':[{'resource':{'entityRefs':["
                              "{'schemaUrl':'https://s/1','type':'service','idKeys':["
                              "'service.name','service.namespace'],'descriptionKeys':["
                              "'service.version']},{'descriptionKeys':['']},{}]}}]}");
    sf_otlp_request *req = NULL, *u;
    const sf_otlp_resource *r;
    char err[256];
    uint8_t *wire;
    size_t wire_len;

    assert_int_equal(sf_otlp_json_decode(f->arena, in, strlen(in), 32, &req, err, sizeof(err)),
                     SF_OK);
    wire_len = protobuf_c_message_get_packed_size(&req->base);
    wire = malloc(wire_len);
    assert_non_null(wire);
    assert_int_equal(protobuf_c_message_pack(&req->base, wire), wire_len);
    u = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, wire_len, wire);
    assert_non_null(u);
    r = u->resource_spans[0]->resource;
    assert_int_equal(r->n_entity_refs, 3);
    assert_string_equal(r->entity_refs[0]->schema_url, "https://s/1");
    assert_string_equal(r->entity_refs[0]->type, "service");
    assert_int_equal(r->entity_refs[0]->n_id_keys, 2);
    assert_string_equal(r->entity_refs[0]->id_keys[0], "service.name");
    assert_string_equal(r->entity_refs[0]->id_keys[1], "service.namespace");
    assert_int_equal(r->entity_refs[0]->n_description_keys, 1);
    assert_string_equal(r->entity_refs[0]->description_keys[0], "service.version");
    assert_int_equal(r->entity_refs[1]->n_id_keys, 0);
    assert_int_equal(r->entity_refs[1]->n_description_keys, 1);
    assert_string_equal(r->entity_refs[1]->description_keys[0], "");
    assert_int_equal(r->entity_refs[2]->n_description_keys, 0);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
        u, NULL);
    free(wire);
    /* and back out as the encoder writes them */
    assert_roundtrip(f, in, canonical);

    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':{}}}]}"),
            "resourceSpans[0].resource.entityRefs: expected an array");
    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':[{'idKeys':'a'}]}}]}"),
            "resourceSpans[0].resource.entityRefs[0].idKeys: expected an array");
    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':[{'descriptionKeys':['a',null]}]}}]}"),
            "resourceSpans[0].resource.entityRefs[0].descriptionKeys[1]: expected a string");
    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':[{'type':7}]}}]}"),
            "resourceSpans[0].resource.entityRefs[0].type: expected a string");
    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':[{'idKeys':['a\\u0000']}]}}]}"),
            "resourceSpans[0].resource.entityRefs[0].idKeys[0]: string contains a nul character");
    refused(f, q("{'resourceSpans':[{'resource':{'entityRefs':[],'entity_refs':[]}}]}"),
            "resourceSpans[0].resource.entityRefs: field given twice");
}

static const char *nested_arrays(unsigned levels)
{
    static char inner[4096];
    char tmp[4096];
    int n;

    snprintf(inner, sizeof(inner), "{'stringValue':'leaf'}");
    for (unsigned i = 0; i < levels; i++) {
        n = snprintf(tmp, sizeof(tmp), "{'arrayValue':{'values':[%s]}}", inner);
        assert_true(n > 0 && (size_t)n < sizeof(tmp));
        memcpy(inner, tmp, sizeof(inner));
    }
    n = snprintf(tmp, sizeof(tmp), "'attributes':[{'key':'deep','value':%s}]", inner);
    assert_true(n > 0 && (size_t)n < sizeof(tmp));
    return span_json(tmp);
}

/* JSON and protobuf input obey the same depth rule. */
static void test_depth_limit_matches_wire_check(void **state)
{
    fixture *f = *state;
    const char *at = nested_arrays(3);
    sf_otlp_request *req = NULL;
    char err[256];
    uint8_t *wire;
    size_t wire_len;

    assert_int_equal(sf_otlp_json_decode(f->arena, at, strlen(at), 3, &req, err, sizeof(err)),
                     SF_OK);
    wire = packed(req, &wire_len);
    assert_int_equal(sf_otlp_scan(wire, wire_len, 3, NULL), SF_OK);
    assert_int_equal(sf_otlp_scan(wire, wire_len, 2, NULL), SF_INVALID);
    free(wire);
}

static void test_refuses_too_deep(void **state)
{
    fixture *f = *state;
    const char *at = nested_arrays(3);

    assert_refused(f, at, strlen(at), 2, SF_INVALID,
                   SPAN_PATH ".attributes[0].value.arrayValue.values[0].arrayValue.values[0]"
                   ".arrayValue: nesting deeper than 2");
    assert_refused(f, at, strlen(at), 0, SF_INVALID,
                   SPAN_PATH ".attributes[0].value.arrayValue: nesting deeper than 0");
    /* a key-value list is a level too */
    at = q("{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':"
           "{'kvlistValue':{'values':[{'key':'a','value':{'arrayValue':{}}}]}}}]}}]}");
    assert_refused(f, at, strlen(at), 1, SF_INVALID,
                   "resourceSpans[0].resource.attributes[0].value.kvlistValue.values[0].value"
                   ".arrayValue: nesting deeper than 1");
}

/* The tokener's own limit stops deep JSON anywhere, even in unknown fields,
 * before the tree is built. */
static void test_tokener_depth_limit(void **state)
{
    fixture *f = *state;
    static char deep[4096];
    size_t n = 0;

    n += (size_t)snprintf(deep, sizeof(deep), "{\"x\":");
    for (int i = 0; i < 100; i++)
        deep[n++] = '[';
    for (int i = 0; i < 100; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    /* max_depth 2 allows 32 + 4 * 2 = 40 JSON levels: the object and 39
     * arrays; the 40th '[' is at offset 5 + 39 */
    assert_refused(f, deep, n, 2, SF_INVALID, "invalid json at offset 44: nesting too deep");
}

/* ---- memory --------------------------------------------------------------- */

static void test_arena_exhausted_is_enomem(void **state)
{
    sf_arena *small = sf_arena_create(1024, 1024);
    const char *full = q(FULL);
    sf_otlp_request *req = NULL;
    char err[256];

    (void)state;
    assert_non_null(small);
    assert_int_equal(sf_otlp_json_decode(small, full, strlen(full), 32, &req, err, sizeof(err)),
                     SF_ENOMEM);
    assert_string_equal(err, "out of memory");
    assert_null(req);
    sf_arena_destroy(small);
}

static sf_status decode_scenario(void *arg)
{
    const char *full = q(FULL);
    sf_otlp_request *req = NULL;
    char err[256];
    sf_arena *a = sf_arena_create(256, 0);
    sf_status st;

    (void)arg;
    if (a == NULL)
        return SF_ENOMEM;
    st = sf_otlp_json_decode(a, full, strlen(full), 32, &req, err, sizeof(err));
    if (st == SF_ENOMEM) {
        assert_string_equal(err, "out of memory");
        assert_null(req);
    }
    sf_arena_destroy(a);
    return st;
}

/* Fail each counted allocation of a decode in turn (arena chunks). */
static void test_decode_alloc_failures(void **state)
{
    const sf_torture t = { .name = "json decode", .run = decode_scenario, .sticky = true,
                           .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) > 4);    /* the arena's chunk and more than 3 of decode's */
}

static sf_status encode_scenario(void *arg)
{
    const sf_otlp_request *req = arg;
    char *out = (char *)&out;
    size_t out_len;
    sf_status st = sf_otlp_json_encode(req, &out, &out_len);

    if (st != SF_OK) {
        assert_null(out);
        return st;
    }
    assert_non_null(strstr(out, q("{'key':'k','value':{'bytesValue':'YWJj'}}")));
    sf_free(out);
    return st;
}

/* Fail each counted allocation of an encode in turn. */
static void test_encode_alloc_failures(void **state)
{
    fixture *f = *state;
    sf_otlp_span span = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sf_otlp_span *spans[] = { &span };
    sf_otlp_any v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sf_otlp_kv kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    sf_otlp_kv *kvs[] = { &kv };
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_scope_spans *sss[] = { &ss };
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource_spans *rss[] = { &rs };
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    uint8_t long_id[40] = { 0 };
    const sf_torture t = { .name = "json encode", .run = encode_scenario, .arg = &req,
                           .expect = SF_ENOMEM };

    (void)f;
    span.name = "bad\xff";                  /* needs the U+FFFD copy */
    span.trace_id.len = sizeof(long_id);    /* longer than the stack buffer */
    span.trace_id.data = long_id;
    v.value_case = ANY_CASE(BYTES_VALUE);   /* needs the base64 buffer */
    v.bytes_value.len = 3;
    v.bytes_value.data = (uint8_t *)"abc";
    kv.key = "k";
    kv.value = &v;
    span.n_attributes = 1;
    span.attributes = kvs;
    ss.n_spans = 1;
    ss.spans = spans;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    req.n_resource_spans = 1;
    req.resource_spans = rss;

    assert_int_equal(sf_torture_run(&t), 4);
}

/* ---- logs and metrics (sf_otlp_json_to_wire / from_wire) ---------------------- */

/* JSON text of signal sg -> protobuf -> the codec -> JSON: `want`. */
static void sig_roundtrip(fixture *f, sf_signal sg, const char *json, const char *want,
                          size_t items)
{
    const uint8_t *wire = NULL;
    size_t len = 0, out_len = 0;
    char err[256];
    sf_otlp_stats st;
    sf_buf *canon = NULL;
    char *out = NULL;

    assert_int_equal(sf_otlp_json_to_wire(sg, f->arena, json, strlen(json), 32, &wire, &len,
                                          err, sizeof(err)), SF_OK);
    assert_int_equal(sf_otlp_rewrite_signal(sg, wire, len, 32, NULL, &canon, &st), SF_OK);
    assert_int_equal(st.spans, items);
    assert_int_equal(sf_otlp_json_from_wire(sg, f->arena, canon->data, canon->len, &out,
                                            &out_len), SF_OK);
    if (strcmp(out, want) != 0)
        fail_msg("got  %s\nwant %s", out, want);
    assert_int_equal(out_len, strlen(want));
    /* the output reads back to the same bytes */
    assert_int_equal(sf_otlp_json_to_wire(sg, f->arena, out, out_len, 32, &wire, &len, err,
                                          sizeof(err)), SF_OK);
    assert_int_equal(len, canon->len);
    assert_memory_equal(wire, canon->data, len);
    sf_free(out);
    sf_buf_unref(canon);
}

static void sig_refused(fixture *f, sf_signal sg, const char *json, const char *why)
{
    const uint8_t *wire = NULL;
    size_t len = 0;
    char err[256];

    assert_int_equal(sf_otlp_json_to_wire(sg, f->arena, json, strlen(json), 32, &wire, &len,
                                          err, sizeof(err)), SF_INVALID);
    assert_string_equal(err, why);
}

static void test_logs_json(void **state)
{
    fixture *f = *state;

    assert_true(sf_otlp_json_maps(SF_SIGNAL_LOGS));
    /* snake_case and names read; ids hex; a kvlist body; int64 as a number */
    sig_roundtrip(f, SF_SIGNAL_LOGS, q("{'resource_logs':[{'resource':{'attributes':["
        "{'key':'service.name','value':{'stringValue':'engine'}}]},'scopeLogs':[{'scope':"
        "{'name':'app'},'log_records':[{'timeUnixNano':1700000000000000000,"
        "'severityNumber':'SEVERITY_NUMBER_WARN','severityText':'WARN','body':{'kvlistValue':"
        "{'values':[{'key':'n','value':{'intValue':3}}]}},'flags':1,"
        "'traceId':'0102030405060708090a0b0c0d0e0f10','span_id':'0a0b0c0d0e0f1011',"
        "'eventName':'ev','observedTimeUnixNano':'5'},{'body':{'stringValue':''}}],"
        "'schemaUrl':'s'}]}]}"),
        q("{'resourceLogs':[{'resource':{'attributes':[{'key':'service.name','value':"
        "{'stringValue':'engine'}}]},'scopeLogs':[{'scope':{'name':'app'},'logRecords':"
        "[{'timeUnixNano':'1700000000000000000','severityNumber':13,'severityText':'WARN',"
        "'body':{'kvlistValue':{'values':[{'key':'n','value':{'intValue':'3'}}]}},'flags':1,"
        "'traceId':'0102030405060708090a0b0c0d0e0f10','spanId':'0a0b0c0d0e0f1011',"
        "'observedTimeUnixNano':'5','eventName':'ev'},{'body':{'stringValue':''}}],"
        "'schemaUrl':'s'}]}]}"), 2);
    sig_refused(f, SF_SIGNAL_LOGS, q("{'resourceLogs':[{'scopeLogs':[{'logRecords':"
        "[{'traceId':'0102'}]}]}]}"), "resourceLogs[0].scopeLogs[0].logRecords[0].traceId: "
        "not 32 hex digits");
    sig_refused(f, SF_SIGNAL_LOGS, q("{'resourceLogs':[{'scopeLogs':[{'logRecords':"
        "[{'severityText':'a','severity_text':'b'}]}]}]}"),
        "resourceLogs[0].scopeLogs[0].logRecords[0].severityText: field given twice");
    sig_refused(f, SF_SIGNAL_LOGS, q("{'resourceLogs':[{'scopeLogs':[{'logRecords':"
        "[{'severityNumber':'LOUD'}]}]}]}"),
        "resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber: unknown enum name");
    sig_refused(f, SF_SIGNAL_LOGS, q("{'resourceLogs':[{'scopeLogs':[{'logRecords':"
        "[{'body':{'stringValue':'a','intValue':1}}]}]}]}"),
        "resourceLogs[0].scopeLogs[0].logRecords[0].body.intValue: a second member of a oneof");
    sig_refused(f, SF_SIGNAL_LOGS, q("{'resourceLogs':[{'resourceLogs':1},{'a':1,'a':2}]}"),
        "member 'a' given twice (offset 43)");
}

static void test_metrics_json(void **state)
{
    fixture *f = *state;

    /* a gauge's asInt 0 and a sum's asDouble 0 are kept (oneof presence), a
     * histogram's sum 0 too (optional); buckets, bounds, exponential
     * buckets with negative offset and scale, a summary, an exemplar */
    sig_roundtrip(f, SF_SIGNAL_METRICS, q("{'resourceMetrics':[{'scopeMetrics':[{'metrics':["
        "{'name':'g','unit':'1','gauge':{'dataPoints':[{'asInt':'0','timeUnixNano':'9',"
        "'attributes':[{'key':'model','value':{'stringValue':'m'}}],'exemplars':[{'asDouble':"
        "0.5,'traceId':'0102030405060708090a0b0c0d0e0f10','spanId':'0a0b0c0d0e0f1011',"
        "'filteredAttributes':[{'key':'k','value':{'boolValue':true}}]}]}]}},"
        "{'name':'s','sum':{'dataPoints':[{'asDouble':0},{'asDouble':2.5,'flags':1}],"
        "'aggregationTemporality':'AGGREGATION_TEMPORALITY_CUMULATIVE','isMonotonic':true}},"
        "{'name':'h','histogram':{'dataPoints':[{'count':'3','sum':0,'bucketCounts':['1',2],"
        "'explicitBounds':[0.1,1],'min':0.05,'max':'Infinity'}],'aggregationTemporality':1}},"
        "{'name':'e','exponentialHistogram':{'dataPoints':[{'scale':-3,'zeroCount':'1',"
        "'negative':{'offset':-2,'bucketCounts':['0','7']},'zeroThreshold':1e-9}]}},"
        "{'name':'q','summary':{'dataPoints':[{'count':'10','sum':4.5,'quantileValues':"
        "[{'quantile':0.5,'value':0.4},{'value':1}]}]},'metadata':[{'key':'x','value':{}}]}"
        "]}]}]}"),
        q("{'resourceMetrics':[{'scopeMetrics':[{'metrics':["
        "{'name':'g','unit':'1','gauge':{'dataPoints':[{'timeUnixNano':'9','exemplars':"
        "[{'asDouble':0.5,'spanId':'0a0b0c0d0e0f1011','traceId':'0102030405060708090a0b0c0d0e0f10',"
        "'filteredAttributes':[{'key':'k','value':{'boolValue':true}}]}],'asInt':'0',"
        "'attributes':[{'key':'model','value':{'stringValue':'m'}}]}]}},"
        "{'name':'s','sum':{'dataPoints':[{'asDouble':0},{'asDouble':2.5,'flags':1}],"
        "'aggregationTemporality':2,'isMonotonic':true}},"
        "{'name':'h','histogram':{'dataPoints':[{'count':'3','sum':0,'bucketCounts':['1','2'],"
        "'explicitBounds':[0.1,1],'min':0.05,'max':'Infinity'}],'aggregationTemporality':1}},"
        "{'name':'e','exponentialHistogram':{'dataPoints':[{'scale':-3,'zeroCount':'1',"
        "'negative':{'offset':-2,'bucketCounts':['0','7']},'zeroThreshold':1e-09}]}},"
        "{'name':'q','summary':{'dataPoints':[{'count':'10','sum':4.5,'quantileValues':"
        "[{'quantile':0.5,'value':0.4},{'value':1}]}]},'metadata':[{'key':'x','value':{}}]}"
        "]}]}]}"), 6);
    sig_refused(f, SF_SIGNAL_METRICS, q("{'resourceMetrics':[{'scopeMetrics':[{'metrics':"
        "[{'gauge':{},'sum':{}}]}]}]}"),
        "resourceMetrics[0].scopeMetrics[0].metrics[0].sum: a second member of a oneof");
    sig_refused(f, SF_SIGNAL_METRICS, q("{'resourceMetrics':[{'scopeMetrics':[{'metrics':"
        "[{'histogram':{'dataPoints':[{'bucketCounts':['-1']}]}}]}]}]}"),
        "resourceMetrics[0].scopeMetrics[0].metrics[0].histogram.dataPoints[0]."
        "bucketCounts[0]: integer out of range");
    sig_refused(f, SF_SIGNAL_METRICS, q("{'resourceMetrics':[{'scopeMetrics':[{'metrics':"
        "[{'exponentialHistogram':{'dataPoints':[{'scale':2147483648}]}}]}]}]}"),
        "resourceMetrics[0].scopeMetrics[0].metrics[0].exponentialHistogram.dataPoints[0]."
        "scale: integer out of range");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_logs_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_canonical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_lenient_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_pack_unpack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_small_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_every_field_decodes_back_equal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_encode_replaces_bad_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_ids_and_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_duplicate_members, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_lone_surrogates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_names_json_c_misreads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decodes_entity_refs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit_matches_wire_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_too_deep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokener_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arena_exhausted_is_enomem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_alloc_failures, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
