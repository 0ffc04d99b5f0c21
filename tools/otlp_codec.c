/* tools/otlp_codec.c: the e2e schema test's window into OUR generated OTLP
 * code. It decodes request bytes with sf_request_decode (wire check + protobuf-c
 * unpack into an arena) and prints a canonical JSON of every field, re-packs
 * the decoded tree with the generated pack, and emits a fixed request with
 * every field and value variant set, so an independent implementation can
 * check both directions.
 *
 *   otlp_codec decode [--max-depth N] < request.bin > request.json
 *   otlp_codec reencode < request.bin > request.bin
 *   otlp_codec encode-sample > request.bin
 *   otlp_codec rewrite traces|logs|metrics [fence] < request.bin > canonical.bin
 *
 * rewrite runs the codec (sf_otlp_rewrite_signal) on a request of the
 * signal and writes its canonical bytes; with `fence`, under the fixed
 * policy edit below (the codec-level differential's policy,
 * tests/e2e/privacy/signals_codec.py). It prints "items N" and the edit's
 * counts on stderr; a refused request exits 3 with the codec's reason.
 *
 * Canonical JSON: proto field names; every field printed, defaults included;
 * ids and bytes as lowercase hex; 64-bit integers as decimal strings; doubles
 * as the hex of their IEEE-754 bits (exact, no formatting drift); an absent
 * sub-message is null; AnyValue is {} or one of {"string"|"bool"|"int"|
 * "double"|"array"|"kvlist"|"bytes": ...}. The root also carries
 * "unknown_fields": how many fields protobuf-c kept as unknown, tree-wide. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"

/* ---- output helpers ------------------------------------------------------ */

static size_t unknown_fields;

static void count_unknown(const ProtobufCMessage *m)
{
    unknown_fields += m->n_unknown_fields;
}

static void put_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"':  fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            if (*p < 0x20)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
    }
    putchar('"');
}

static void put_hex(ProtobufCBinaryData b)
{
    putchar('"');
    for (size_t i = 0; i < b.len; i++)
        printf("%02x", b.data[i]);
    putchar('"');
}

static void put_u64(uint64_t v)
{
    printf("\"%" PRIu64 "\"", v);
}

static void put_double(double d)
{
    uint64_t bits;

    memcpy(&bits, &d, sizeof(bits));
    printf("\"%016" PRIx64 "\"", bits);
}

/* ---- canonical JSON of a decoded request --------------------------------- */

static void put_kvs(size_t n, sf_otlp_kv **kvs);

static void put_any(const sf_otlp_any *v)
{
    count_unknown(&v->base);
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        fputs("{\"string\":", stdout);
        put_str(v->string_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        printf("{\"bool\":%s", v->bool_value ? "true" : "false");
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        printf("{\"int\":\"%" PRId64 "\"", v->int_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        fputs("{\"double\":", stdout);
        put_double(v->double_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        count_unknown(&v->array_value->base);
        fputs("{\"array\":[", stdout);
        for (size_t i = 0; i < v->array_value->n_values; i++) {
            if (i)
                putchar(',');
            put_any(v->array_value->values[i]);
        }
        putchar(']');
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        count_unknown(&v->kvlist_value->base);
        fputs("{\"kvlist\":", stdout);
        put_kvs(v->kvlist_value->n_values, v->kvlist_value->values);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
        fputs("{\"bytes\":", stdout);
        put_hex(v->bytes_value);
        break;
    default:
        putchar('{');
        break;
    }
    putchar('}');
}

static void put_kvs(size_t n, sf_otlp_kv **kvs)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        count_unknown(&kvs[i]->base);
        if (i)
            putchar(',');
        fputs("{\"key\":", stdout);
        put_str(kvs[i]->key);
        fputs(",\"value\":", stdout);
        if (kvs[i]->value != NULL)
            put_any(kvs[i]->value);
        else
            fputs("null", stdout);
        putchar('}');
    }
    putchar(']');
}

static void put_event(const sf_otlp_event *e)
{
    count_unknown(&e->base);
    fputs("{\"time_unix_nano\":", stdout);
    put_u64(e->time_unix_nano);
    fputs(",\"name\":", stdout);
    put_str(e->name);
    fputs(",\"attributes\":", stdout);
    put_kvs(e->n_attributes, e->attributes);
    printf(",\"dropped_attributes_count\":%" PRIu32 "}", e->dropped_attributes_count);
}

static void put_link(const sf_otlp_link *l)
{
    count_unknown(&l->base);
    fputs("{\"trace_id\":", stdout);
    put_hex(l->trace_id);
    fputs(",\"span_id\":", stdout);
    put_hex(l->span_id);
    fputs(",\"trace_state\":", stdout);
    put_str(l->trace_state);
    fputs(",\"attributes\":", stdout);
    put_kvs(l->n_attributes, l->attributes);
    printf(",\"dropped_attributes_count\":%" PRIu32 ",\"flags\":%" PRIu32 "}",
           l->dropped_attributes_count, l->flags);
}

static void put_span(const sf_otlp_span *s)
{
    count_unknown(&s->base);
    fputs("{\"trace_id\":", stdout);
    put_hex(s->trace_id);
    fputs(",\"span_id\":", stdout);
    put_hex(s->span_id);
    fputs(",\"trace_state\":", stdout);
    put_str(s->trace_state);
    fputs(",\"parent_span_id\":", stdout);
    put_hex(s->parent_span_id);
    printf(",\"flags\":%" PRIu32 ",\"name\":", s->flags);
    put_str(s->name);
    printf(",\"kind\":%d,\"start_time_unix_nano\":", (int)s->kind);
    put_u64(s->start_time_unix_nano);
    fputs(",\"end_time_unix_nano\":", stdout);
    put_u64(s->end_time_unix_nano);
    fputs(",\"attributes\":", stdout);
    put_kvs(s->n_attributes, s->attributes);
    printf(",\"dropped_attributes_count\":%" PRIu32 ",\"events\":[", s->dropped_attributes_count);
    for (size_t i = 0; i < s->n_events; i++) {
        if (i)
            putchar(',');
        put_event(s->events[i]);
    }
    printf("],\"dropped_events_count\":%" PRIu32 ",\"links\":[", s->dropped_events_count);
    for (size_t i = 0; i < s->n_links; i++) {
        if (i)
            putchar(',');
        put_link(s->links[i]);
    }
    printf("],\"dropped_links_count\":%" PRIu32 ",\"status\":", s->dropped_links_count);
    if (s->status != NULL) {
        count_unknown(&s->status->base);
        fputs("{\"message\":", stdout);
        put_str(s->status->message);
        printf(",\"code\":%d}", (int)s->status->code);
    } else {
        fputs("null", stdout);
    }
    putchar('}');
}

static void put_request(const sf_otlp_request *req)
{
    count_unknown(&req->base);
    fputs("{\"resource_spans\":[", stdout);
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];

        count_unknown(&rs->base);
        if (i)
            putchar(',');
        fputs("{\"resource\":", stdout);
        if (rs->resource != NULL) {
            count_unknown(&rs->resource->base);
            fputs("{\"attributes\":", stdout);
            put_kvs(rs->resource->n_attributes, rs->resource->attributes);
            printf(",\"dropped_attributes_count\":%" PRIu32 "}",
                   rs->resource->dropped_attributes_count);
        } else {
            fputs("null", stdout);
        }
        fputs(",\"schema_url\":", stdout);
        put_str(rs->schema_url);
        fputs(",\"scope_spans\":[", stdout);
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[j];

            count_unknown(&ss->base);
            if (j)
                putchar(',');
            fputs("{\"scope\":", stdout);
            if (ss->scope != NULL) {
                count_unknown(&ss->scope->base);
                fputs("{\"name\":", stdout);
                put_str(ss->scope->name);
                fputs(",\"version\":", stdout);
                put_str(ss->scope->version);
                fputs(",\"attributes\":", stdout);
                put_kvs(ss->scope->n_attributes, ss->scope->attributes);
                printf(",\"dropped_attributes_count\":%" PRIu32 "}",
                       ss->scope->dropped_attributes_count);
            } else {
                fputs("null", stdout);
            }
            fputs(",\"schema_url\":", stdout);
            put_str(ss->schema_url);
            fputs(",\"spans\":[", stdout);
            for (size_t k = 0; k < ss->n_spans; k++) {
                if (k)
                    putchar(',');
                put_span(ss->spans[k]);
            }
            fputs("]}", stdout);
        }
        fputs("]}", stdout);
    }
    /* unknown_fields is complete only after the walk above */
    printf("],\"unknown_fields\":%zu}\n", unknown_fields);
}

/* ---- the fixed sample request ------------------------------------------- */

typedef Opentelemetry__Proto__Common__V1__ArrayValue sample_array;
typedef Opentelemetry__Proto__Common__V1__KeyValueList sample_kvlist;

#define ANY_INIT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT
#define KV_INIT OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT
#define ARR_INIT OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT
#define KVL_INIT OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE_LIST__INIT
#define CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define BIN(s) ((ProtobufCBinaryData){ sizeof(s) - 1, (uint8_t *)(s) })

static void set_str(sf_otlp_any *a, const char *s)
{
    a->value_case = CASE(STRING_VALUE);
    a->string_value = (char *)s;
}

static void set_int(sf_otlp_any *a, int64_t v)
{
    a->value_case = CASE(INT_VALUE);
    a->int_value = v;
}

static void set_double(sf_otlp_any *a, double v)
{
    a->value_case = CASE(DOUBLE_VALUE);
    a->double_value = v;
}

static void set_bool(sf_otlp_any *a, int v)
{
    a->value_case = CASE(BOOL_VALUE);
    a->bool_value = v;
}

static void kv_set(sf_otlp_kv *kv, const char *key, sf_otlp_any *v)
{
    kv->key = (char *)key;
    kv->value = v;
}

/* Everything the sample points at lives in static storage: the function
 * fills it and packs it once. The shape is documented in
 * tests/e2e/schema_compat.test.js, which asserts it value by value. */
static int encode_sample(void)
{
    /* --- span A's attribute values --- */
    static sf_otlp_any v_s = ANY_INIT, v_empty = ANY_INIT, v_bt = ANY_INIT, v_bf = ANY_INIT,
        v_imin = ANY_INIT, v_imax = ANY_INIT, v_ineg = ANY_INIT, v_d = ANY_INIT,
        v_dneg0 = ANY_INIT, v_dinf = ANY_INIT, v_dbig = ANY_INIT, v_bytes = ANY_INIT,
        v_unset = ANY_INIT, v_arr = ANY_INIT, v_kv = ANY_INIT, v_earr = ANY_INIT;
    /* arr = ["x", 7, 0.5, true, [[1], {k: "v"}], bytes 00ff, {}] */
    static sf_otlp_any a0 = ANY_INIT, a1 = ANY_INIT, a2 = ANY_INIT, a3 = ANY_INIT,
        a4 = ANY_INIT, a5 = ANY_INIT, a6 = ANY_INIT, a40 = ANY_INIT, a41 = ANY_INIT,
        a400 = ANY_INIT, a41v = ANY_INIT;
    static sample_array arr = ARR_INIT, arr4 = ARR_INIT, arr40 = ARR_INIT, earr = ARR_INIT;
    static sample_kvlist kvl41 = KVL_INIT;
    static sf_otlp_kv kv41 = KV_INIT;
    /* kv = {inner: "v", nested: {deep: -1}, noval: <no value>} */
    static sf_otlp_any k_inner = ANY_INIT, k_nested = ANY_INIT, k_deep = ANY_INIT;
    static sample_kvlist kvl = KVL_INIT, kvl_nested = KVL_INIT;
    static sf_otlp_kv kv_inner = KV_INIT, kv_nested = KV_INIT, kv_noval = KV_INIT, kv_deep = KV_INIT;
    static sf_otlp_kv sa[16];

    static sf_otlp_any *arr_vals[7], *arr4_vals[2], *arr40_vals[1];
    static sf_otlp_kv *kvl41_vals[1], *kvl_vals[3], *kvl_nested_vals[1], *sa_ptrs[16];

    /* --- events, links, status --- */
    static sf_otlp_any e_bid = ANY_INIT, e_bs = ANY_INIT, l_attr = ANY_INIT;
    static sf_otlp_kv e_kvs[2], l_kvs[1];
    static sf_otlp_kv *e_ptrs[2], *l_ptrs[1];
    static sf_otlp_event ev0 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT,
        ev1 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT;
    static sf_otlp_event *evs[2];
    static sf_otlp_link ln0 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__LINK__INIT;
    static sf_otlp_link *lns[1];
    static sf_otlp_status st = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;

    /* --- spans, scopes, resources --- */
    static sf_otlp_span sp_a = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT,
        sp_b = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT,
        sp_c = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    static sf_otlp_span *spans0[2], *spans1[1];
    static sf_otlp_any r_name = ANY_INIT, r_host = ANY_INIT, sc_attr = ANY_INIT;
    static sf_otlp_kv r_kvs[2], sc_kvs[1];
    static sf_otlp_kv *r_ptrs[2], *sc_ptrs[1];
    static sf_otlp_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    static sf_otlp_scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    static sf_otlp_scope_spans ss0 = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT,
        ss1 = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    static sf_otlp_scope_spans *ss0p[1], *ss1p[1];
    static sf_otlp_resource_spans rs0 = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT,
        rs1 = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    static sf_otlp_resource_spans *rsp[2];
    static sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;

    size_t i, len;
    uint8_t *out;
    int rc = 1;

    set_str(&v_s, "hello \"quoted\"\n\t\\ \xc3\xbcn\xc3\xaf \xe2\x98\x83");
    set_str(&v_empty, "");
    set_bool(&v_bt, 1);
    set_bool(&v_bf, 0);
    set_int(&v_imin, INT64_MIN);
    set_int(&v_imax, INT64_MAX);
    set_int(&v_ineg, -42);
    set_double(&v_d, 3.141592653589793);
    set_double(&v_dneg0, -0.0);
    set_double(&v_dinf, INFINITY);
    set_double(&v_dbig, 1e308);
    v_bytes.value_case = CASE(BYTES_VALUE);
    v_bytes.bytes_value = BIN("\x00\x01\xfe\xff");

    set_str(&a0, "x");
    set_int(&a1, 7);
    set_double(&a2, 0.5);
    set_bool(&a3, 1);
    set_int(&a400, 1);
    arr40_vals[0] = &a400;
    arr40.n_values = 1;
    arr40.values = arr40_vals;
    a40.value_case = CASE(ARRAY_VALUE);
    a40.array_value = &arr40;
    set_str(&a41v, "v");
    kv_set(&kv41, "k", &a41v);
    kvl41_vals[0] = &kv41;
    kvl41.n_values = 1;
    kvl41.values = kvl41_vals;
    a41.value_case = CASE(KVLIST_VALUE);
    a41.kvlist_value = &kvl41;
    arr4_vals[0] = &a40;
    arr4_vals[1] = &a41;
    arr4.n_values = 2;
    arr4.values = arr4_vals;
    a4.value_case = CASE(ARRAY_VALUE);
    a4.array_value = &arr4;
    a5.value_case = CASE(BYTES_VALUE);
    a5.bytes_value = BIN("\x00\xff");
    /* a6 stays an AnyValue with nothing set */
    arr_vals[0] = &a0; arr_vals[1] = &a1; arr_vals[2] = &a2; arr_vals[3] = &a3;
    arr_vals[4] = &a4; arr_vals[5] = &a5; arr_vals[6] = &a6;
    arr.n_values = 7;
    arr.values = arr_vals;
    v_arr.value_case = CASE(ARRAY_VALUE);
    v_arr.array_value = &arr;
    v_earr.value_case = CASE(ARRAY_VALUE);
    v_earr.array_value = &earr;

    set_str(&k_inner, "v");
    kv_set(&kv_inner, "inner", &k_inner);
    set_int(&k_deep, -1);
    kv_set(&kv_deep, "deep", &k_deep);
    kvl_nested_vals[0] = &kv_deep;
    kvl_nested.n_values = 1;
    kvl_nested.values = kvl_nested_vals;
    k_nested.value_case = CASE(KVLIST_VALUE);
    k_nested.kvlist_value = &kvl_nested;
    kv_set(&kv_nested, "nested", &k_nested);
    kv_set(&kv_noval, "noval", NULL);
    kvl_vals[0] = &kv_inner; kvl_vals[1] = &kv_nested; kvl_vals[2] = &kv_noval;
    kvl.n_values = 3;
    kvl.values = kvl_vals;
    v_kv.value_case = CASE(KVLIST_VALUE);
    v_kv.kvlist_value = &kvl;

    {
        static const struct { const char *key; sf_otlp_any *v; } rows[] = {
            { "s", &v_s }, { "empty", &v_empty }, { "b_true", &v_bt }, { "b_false", &v_bf },
            { "i_min", &v_imin }, { "i_max", &v_imax }, { "i_neg", &v_ineg },
            { "d", &v_d }, { "d_neg0", &v_dneg0 }, { "d_inf", &v_dinf }, { "d_big", &v_dbig },
            { "arr", &v_arr }, { "kv", &v_kv }, { "bytes", &v_bytes }, { "unset", &v_unset },
            { "novalue", NULL },
        };
        for (i = 0; i < 16; i++) {
            opentelemetry__proto__common__v1__key_value__init(&sa[i]);
            kv_set(&sa[i], rows[i].key, rows[i].v);
            sa_ptrs[i] = &sa[i];
        }
    }

    set_str(&e_bid, "b-1");
    set_int(&e_bs, 8);
    opentelemetry__proto__common__v1__key_value__init(&e_kvs[0]);
    opentelemetry__proto__common__v1__key_value__init(&e_kvs[1]);
    kv_set(&e_kvs[0], "bid", &e_bid);
    kv_set(&e_kvs[1], "batch_size", &e_bs);
    e_ptrs[0] = &e_kvs[0];
    e_ptrs[1] = &e_kvs[1];
    ev0.time_unix_nano = UINT64_C(1700000000000000001);
    ev0.name = "gen_ai.content.prompt";
    ev0.n_attributes = 2;
    ev0.attributes = e_ptrs;
    ev0.dropped_attributes_count = 2;
    /* ev1: every field at its default */
    evs[0] = &ev0;
    evs[1] = &ev1;

    set_double(&l_attr, 2.5);
    opentelemetry__proto__common__v1__key_value__init(&l_kvs[0]);
    kv_set(&l_kvs[0], "link.attr", &l_attr);
    l_ptrs[0] = &l_kvs[0];
    ln0.trace_id = BIN("\xa0\xa1\xa2\xa3\xa4\xa5\xa6\xa7\xa8\xa9\xaa\xab\xac\xad\xae\xaf");
    ln0.span_id = BIN("\xb0\xb1\xb2\xb3\xb4\xb5\xb6\xb7");
    ln0.trace_state = "ls=1";
    ln0.n_attributes = 1;
    ln0.attributes = l_ptrs;
    ln0.dropped_attributes_count = 1;
    ln0.flags = 0x100;
    lns[0] = &ln0;

    st.message = "boom: secret";
    st.code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;

    sp_a.trace_id = BIN("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10");
    sp_a.span_id = BIN("\x11\x12\x13\x14\x15\x16\x17\x18");
    sp_a.trace_state = "vendor=a,other=b";
    sp_a.parent_span_id = BIN("\x21\x22\x23\x24\x25\x26\x27\x28");
    sp_a.flags = 0x301;
    sp_a.name = "chat completion \xe2\x98\x83";
    sp_a.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    sp_a.start_time_unix_nano = UINT64_C(1700000000123456789);
    sp_a.end_time_unix_nano = UINT64_MAX;
    sp_a.n_attributes = 16;
    sp_a.attributes = sa_ptrs;
    sp_a.dropped_attributes_count = 5;
    sp_a.n_events = 2;
    sp_a.events = evs;
    sp_a.dropped_events_count = 4;
    sp_a.n_links = 1;
    sp_a.links = lns;
    sp_a.dropped_links_count = 6;
    sp_a.status = &st;

    /* span B: ids and name only, no status message */
    sp_b.trace_id = sp_a.trace_id;
    sp_b.span_id = BIN("\x31\x32\x33\x34\x35\x36\x37\x38");
    sp_b.name = "minimal";

    /* span C (second resource): consumer, one empty-array attribute */
    {
        static sf_otlp_kv c_kv;
        static sf_otlp_kv *c_ptrs[1];
        opentelemetry__proto__common__v1__key_value__init(&c_kv);
        kv_set(&c_kv, "empty_arr", &v_earr);
        c_ptrs[0] = &c_kv;
        sp_c.trace_id = BIN("\xff\xee\xdd\xcc\xbb\xaa\x99\x88\x77\x66\x55\x44\x33\x22\x11\x00");
        sp_c.span_id = BIN("\x41\x42\x43\x44\x45\x46\x47\x48");
        sp_c.name = "consume";
        sp_c.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CONSUMER;
        sp_c.start_time_unix_nano = 1;
        sp_c.end_time_unix_nano = 2;
        sp_c.n_attributes = 1;
        sp_c.attributes = c_ptrs;
    }

    set_str(&r_name, "sample-svc");
    set_int(&r_host, 12345);
    opentelemetry__proto__common__v1__key_value__init(&r_kvs[0]);
    opentelemetry__proto__common__v1__key_value__init(&r_kvs[1]);
    kv_set(&r_kvs[0], "service.name", &r_name);
    kv_set(&r_kvs[1], "host.pid", &r_host);
    r_ptrs[0] = &r_kvs[0];
    r_ptrs[1] = &r_kvs[1];
    res.n_attributes = 2;
    res.attributes = r_ptrs;
    res.dropped_attributes_count = 3;

    set_bool(&sc_attr, 1);
    opentelemetry__proto__common__v1__key_value__init(&sc_kvs[0]);
    kv_set(&sc_kvs[0], "scope.attr", &sc_attr);
    sc_ptrs[0] = &sc_kvs[0];
    scope.name = "spanfence.sample";
    scope.version = "1.2.3";
    scope.n_attributes = 1;
    scope.attributes = sc_ptrs;
    scope.dropped_attributes_count = 1;

    spans0[0] = &sp_a;
    spans0[1] = &sp_b;
    ss0.scope = &scope;
    ss0.n_spans = 2;
    ss0.spans = spans0;
    ss0.schema_url = "https://example.test/scope-schema";
    ss0p[0] = &ss0;
    rs0.resource = &res;
    rs0.n_scope_spans = 1;
    rs0.scope_spans = ss0p;
    rs0.schema_url = "https://opentelemetry.io/schemas/1.21.0";

    spans1[0] = &sp_c;
    ss1.n_spans = 1;
    ss1.spans = spans1;
    ss1p[0] = &ss1;
    rs1.n_scope_spans = 1;
    rs1.scope_spans = ss1p;

    rsp[0] = &rs0;
    rsp[1] = &rs1;
    req.n_resource_spans = 2;
    req.resource_spans = rsp;

    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    out = sf_malloc(len ? len : 1);
    if (out == NULL) {
        fputs("otlp_codec: out of memory\n", stderr);
        return 1;
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, out);
    if (fwrite(out, 1, len, stdout) == len && fflush(stdout) == 0)
        rc = 0;
    sf_free(out);
    return rc;
}

/* ---- stdin --------------------------------------------------------------- */

/* Reads all of stdin into a counted buffer; NULL on no memory. */
static uint8_t *read_stdin(size_t *len_out)
{
    size_t cap = 65536, len = 0;
    uint8_t *buf = sf_malloc(cap);

    while (buf != NULL) {
        size_t n = fread(buf + len, 1, cap - len, stdin);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            uint8_t *bigger = sf_realloc(buf, cap * 2);
            if (bigger == NULL) {
                sf_free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    *len_out = len;
    return buf;
}

static int decode_or_reencode(int reencode, unsigned max_depth)
{
    size_t len = 0;
    uint8_t *data = read_stdin(&len);
    sf_arena *arena = NULL;
    sf_request batch;
    sf_buf *enc = NULL;
    sf_status st;
    int rc = 1;

    if (data == NULL) {
        fputs("otlp_codec: out of memory\n", stderr);
        return 1;
    }
    arena = sf_arena_create(65536, 0);
    if (arena == NULL) {
        fputs("otlp_codec: out of memory\n", stderr);
        goto out_free_data;
    }
    st = sf_request_decode(&batch, arena, data, len, max_depth);
    if (st != SF_OK) {
        fprintf(stderr, "otlp_codec: decode: %s\n", sf_status_str(st));
        goto out_destroy_arena;
    }
    if (!reencode) {
        put_request(batch.req);
        rc = fflush(stdout) == 0 ? 0 : 1;
        goto out_release_batch;
    }
    /* Pack the decoded tree with the generated code itself (not a batch's
     * cached or received bytes), so the round trip really re-encodes. */
    enc = sf_buf_create(
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(batch.req));
    if (enc == NULL) {
        fputs("otlp_codec: out of memory\n", stderr);
        goto out_release_batch;
    }
    enc->len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
        batch.req, enc->data);
    if (fwrite(enc->data, 1, enc->len, stdout) == enc->len && fflush(stdout) == 0)
        rc = 0;
    sf_buf_unref(enc);
out_release_batch:
    sf_request_release(&batch);
out_destroy_arena:
    sf_arena_destroy(arena);
out_free_data:
    sf_free(data);
    return rc;
}

/* ---- rewrite: the codec under a fixed policy --------------------------------- */

/* The policy (signals_codec.py has the same lists): per context the keys
 * kept; log bodies only the string "ok"; every governed string from the
 * scope on cleared; exemplars dropped; a kvlist, bytes or nested array
 * value removed; the resource gets vm.id upserted. */
static const char *const fence_resource[] = { "service.name", "host.arch" };
static const char *const fence_log[] = { "level", "logger" };
static const char *const fence_datapoint[] = { "model_name", "tp_rank", "le" };
static const char *const fence_span[] = { "gen_ai.request.id" };
static const bool fence_keep[] = { true, true, true };
static const char *const fence_body_set[] = { "ok" };
static const sf_otlp_value_alt fence_body_alt = { .types = SF_OTLP_VAL_STRING,
                                                  .shape = SF_OTLP_STR_SET, .n_set = 1,
                                                  .set = fence_body_set };
static const sf_otlp_value_rule fence_body = { .n_alts = 1, .alts = &fence_body_alt };
static const sf_otlp_insert fence_upsert[] = { { "vm.id", "vm-1", true } };

static sf_status fence_edit(sf_otlp_edit *e, sf_otlp_keyset *ks[5])
{
    sf_status st;

    memset(e, 0, sizeof(*e));
    if ((st = sf_otlp_keyset_create(2, fence_resource, fence_keep, false, &ks[0])) != SF_OK ||
        (st = sf_otlp_keyset_create(2, fence_log, fence_keep, false, &ks[1])) != SF_OK ||
        (st = sf_otlp_keyset_create(3, fence_datapoint, fence_keep, false, &ks[2])) != SF_OK ||
        (st = sf_otlp_keyset_create(1, fence_span, fence_keep, false, &ks[3])) != SF_OK ||
        (st = sf_otlp_keyset_create(0, NULL, NULL, false, &ks[4])) != SF_OK)
        return st;
    e->keys[SF_OTLP_RESOURCE] = ks[0];
    e->keys[SF_OTLP_LOG] = ks[1];
    e->keys[SF_OTLP_DATAPOINT] = ks[2];
    e->keys[SF_OTLP_SPAN] = ks[3];
    e->keys[SF_OTLP_SCOPE] = ks[4];
    e->keys[SF_OTLP_METRIC] = ks[4];
    e->keys[SF_OTLP_SPANEVENT] = ks[4];
    e->keys[SF_OTLP_LINK] = ks[4];
    e->scalar_values_only = true;
    e->one_value_per_key = true;
    for (int f = SF_OTLP_FIELD_SCOPE_NAME; f < SF_OTLP_FIELD_COUNT; f++)
        e->fields |= SF_OTLP_FIELD_BIT(f);
    e->body_rule = &fence_body;
    e->n_inserts[SF_OTLP_RESOURCE] = 1;
    e->inserts[SF_OTLP_RESOURCE] = fence_upsert;
    return SF_OK;
}

static int rewrite(const char *signal, bool fence, unsigned max_depth)
{
    static const char *const names[SF_SIGNAL_COUNT] = { "traces", "logs", "metrics" };
    sf_otlp_keyset *ks[5] = { NULL };
    sf_otlp_edit edit;
    sf_otlp_stats st;
    sf_buf *out = NULL;
    size_t len = 0;
    uint8_t *data;
    sf_status rs;
    int s, rc = 1;

    for (s = 0; s < SF_SIGNAL_COUNT && strcmp(signal, names[s]) != 0; s++)
        ;
    if (s == SF_SIGNAL_COUNT)
        return 2;
    data = read_stdin(&len);
    if (data == NULL || (fence && fence_edit(&edit, ks) != SF_OK)) {
        fputs("otlp_codec: out of memory\n", stderr);
        goto out_free;
    }
    rs = sf_otlp_rewrite_signal((sf_signal)s, data, len, max_depth, fence ? &edit : NULL, &out,
                                &st);
    if (rs != SF_OK) {
        fprintf(stderr, "otlp_codec: %s: %s\n", sf_status_str(rs),
                st.error != NULL ? st.error : "-");
        rc = rs == SF_INVALID ? 3 : 1;
        goto out_free;
    }
    fprintf(stderr, "items %zu removed_attributes %" PRIu64 " dropped_bodies %" PRIu64
            " dropped_exemplars %" PRIu64 " inserted %" PRIu64 "\n", st.spans,
            st.removed_attributes, st.dropped_bodies, st.dropped_exemplars, st.inserted);
    if (fwrite(out->data, 1, out->len, stdout) == out->len && fflush(stdout) == 0)
        rc = 0;
out_free:
    sf_buf_unref(out);
    for (int i = 0; i < 5; i++)
        sf_otlp_keyset_destroy(ks[i]);
    sf_free(data);
    return rc;
}

static void usage(void)
{
    fputs("usage: otlp_codec decode [--max-depth N] < request.bin > request.json\n"
          "       otlp_codec reencode < request.bin > request.bin\n"
          "       otlp_codec encode-sample > request.bin\n"
          "       otlp_codec rewrite traces|logs|metrics [fence] < request.bin > out.bin\n",
          stderr);
}

int main(int argc, char **argv)
{
    unsigned max_depth = SF_OTLP_DEFAULT_MAX_DEPTH;
    int rc;

    if (argc < 2) {
        usage();
        return 2;
    }
    if (strcmp(argv[1], "rewrite") == 0) {
        rc = argc == 3 || (argc == 4 && strcmp(argv[3], "fence") == 0)
                 ? rewrite(argv[2], argc == 4, max_depth) : 2;
        if (rc == 2)
            usage();
        if (rc == 0 && sf_alloc_in_use() != 0) {
            fprintf(stderr, "otlp_codec: %zu bytes still allocated at exit\n", sf_alloc_in_use());
            rc = 1;
        }
        return rc;
    }
    if (argc == 4 && strcmp(argv[2], "--max-depth") == 0) {
        char *end;
        unsigned long v = strtoul(argv[3], &end, 10);
        if (*end != '\0' || v == 0 || v > 100000) {
            usage();
            return 2;
        }
        max_depth = (unsigned)v;
    } else if (argc != 2) {
        usage();
        return 2;
    }

    if (strcmp(argv[1], "decode") == 0)
        rc = decode_or_reencode(0, max_depth);
    else if (strcmp(argv[1], "reencode") == 0)
        rc = decode_or_reencode(1, max_depth);
    else if (strcmp(argv[1], "encode-sample") == 0 && argc == 2)
        rc = encode_sample();
    else {
        usage();
        return 2;
    }
    if (rc == 0 && sf_alloc_in_use() != 0) {
        fprintf(stderr, "otlp_codec: %zu bytes still allocated at exit\n", sf_alloc_in_use());
        rc = 1;
    }
    return rc;
}
