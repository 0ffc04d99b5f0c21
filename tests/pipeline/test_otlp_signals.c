/* tests/pipeline/test_otlp_signals.c: the codec (sf_otlp_wire.h) on OTLP
 * logs and metrics, on hand-built bytes: canonical requests pass unchanged
 * and protobuf-c reads them; oneofs keep the member set last (a point's
 * value, a metric's type) and their presence (0 is written); repeated
 * numbers leave packed and minimal; the refusals of the new types (sint32,
 * packed payloads) and of ids; unknown and old-schema fields are dropped
 * and counted; items (log records, data points) are counted, the losing
 * members of a oneof not; edits: keysets of the log, metric and datapoint
 * contexts, the body rule, severity text and metric names through field_fn,
 * exemplars dropped or kept; inserts and upserts; the request API. */
#define _GNU_SOURCE     /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <math.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_request.h"
#include "sf_otlp_wire.h"
#include "sf_pb_build.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

#define MAX_DEPTH SF_OTLP_DEFAULT_MAX_DEPTH

/* ---- helpers ---------------------------------------------------------------- */

static sf_status rw_sig(sf_signal s, const pb *in, const sf_otlp_edit *e, sf_buf **out,
                        sf_otlp_stats *st)
{
    return sf_otlp_rewrite_signal(s, in->d, in->n, MAX_DEPTH, e, out, st);
}

static void dump(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%s (%zu):", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %02x", p[i]);
    fprintf(stderr, "\n");
}

/* protobuf-c reads the output whole, without an unknown field at the top. */
static void pbc_reads(sf_signal s, const uint8_t *p, size_t n)
{
    ProtobufCMessage *m = s == SF_SIGNAL_LOGS
        ? (ProtobufCMessage *)opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(NULL, n, p)
        : (ProtobufCMessage *)opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, n, p);

    assert_non_null(m);
    assert_int_equal(m->n_unknown_fields, 0);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* `in` with edit e is `want` (idempotent: `want` again is itself). */
static void expect_sig(sf_signal s, const pb *in, const sf_otlp_edit *e, const pb *want,
                       sf_otlp_stats *st)
{
    sf_otlp_stats local;
    sf_buf *out = NULL, *again = NULL;

    assert_int_equal(rw_sig(s, in, e, &out, st != NULL ? st : &local), SF_OK);
    if (out->len != want->n || memcmp(out->data, want->d, want->n) != 0) {
        dump("got ", out->data, out->len);
        dump("want", want->d, want->n);
        fail_msg("output differs");
    }
    pbc_reads(s, out->data, out->len);
    assert_int_equal(sf_otlp_rewrite_signal(s, out->data, out->len, MAX_DEPTH, NULL, &again,
                                            &local), SF_OK);
    assert_memory_equal(again->data, out->data, out->len);
    sf_buf_unref(again);
    sf_buf_unref(out);
}

static void expect_invalid(sf_signal s, const pb *in, const char *why)
{
    sf_otlp_stats st;
    sf_buf *out = NULL;

    assert_int_equal(rw_sig(s, in, NULL, &out, &st), SF_INVALID);
    assert_null(out);
    assert_non_null(st.error);
    assert_string_equal(st.error, why);
}

static uint64_t dbits(double d)
{
    uint64_t u;

    memcpy(&u, &d, 8);
    return u;
}

/* ---- logs ---------------------------------------------------------------------- */

/* One log record with every field, body a string (canonical, in order). */
static void log_record(pb *b, const char *body, const char *severity_text, const char *attr)
{
    pb_open(b, 2);                          /* ScopeLogs.log_records */
    pb_fix64(b, 1, 1700000000000000000ull); /* time_unix_nano */
    pb_uint(b, 2, 9);                       /* severity_number INFO */
    pb_str(b, 3, severity_text);
    pb_open(b, 5);                          /* body */
    pb_str(b, 1, body);
    pb_close(b);
    kv_str(b, 6, "level", "info");
    kv_str(b, 6, attr, "x");
    pb_fix32(b, 8, 1);                      /* flags */
    pb_bytes(b, 9, TID, 16);
    pb_bytes(b, 10, SID, 8);
    pb_fix64(b, 11, 1700000000000000001ull); /* observed_time_unix_nano */
    pb_str(b, 12, "app.request");           /* event_name */
    pb_close(b);
}

/* request { resource_logs { resource {attrs}, scope_logs { scope, records } } } */
static void logs_request(pb *b, int records)
{
    pb_init(b);
    pb_open(b, 1);
    pb_open(b, 1);
    kv_str(b, 1, "service.name", "engine");
    pb_close(b);
    pb_open(b, 2);
    pb_open(b, 1);
    pb_str(b, 1, "app");
    pb_close(b);
    for (int i = 0; i < records; i++)
        log_record(b, i == 0 ? "request from 10.0.0.1: prompt=hello" : "ok", "INFO", "prompt");
    pb_closen(b, 2);
}

static void test_logs_canonical_unchanged(void **state)
{
    pb in;
    sf_otlp_stats st;
    size_t items = 0;

    (void)state;
    logs_request(&in, 3);
    expect_sig(SF_SIGNAL_LOGS, &in, NULL, &in, &st);
    assert_int_equal(st.spans, 3);
    assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_LOGS, in.d, in.n, MAX_DEPTH, &items), SF_OK);
    assert_int_equal(items, 3);
    /* the same bytes are no trace request: a ResourceSpans' scope_spans
     * field holds a ScopeSpans, whose field 2 is a span; read as traces the
     * log record's fixed64 field 1 is a trace id of the wrong wire type */
    assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_TRACES, in.d, in.n, MAX_DEPTH, &items),
                     SF_INVALID);
    assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_COUNT, in.d, in.n, MAX_DEPTH, &items),
                     SF_UNSUPPORTED);
}

static void test_logs_old_and_unknown_fields_dropped(void **state)
{
    pb in, want;
    sf_otlp_stats st;

    (void)state;
    /* OTLP 0.15-0.18's instrumentation_library_logs (ResourceLogs 1000), the
     * reserved LogRecord 4, an unknown field in ScopeLogs */
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 1000);
    pb_open(&in, 2);
    pb_str(&in, 3, "old");
    pb_closen(&in, 2);
    pb_open(&in, 2);
    pb_uint(&in, 9, 5);
    pb_open(&in, 2);
    pb_uint(&in, 4, 1);
    pb_str(&in, 3, "WARN");
    pb_closen(&in, 3);
    pb_init(&want);
    pb_open(&want, 1);
    pb_open(&want, 2);
    pb_open(&want, 2);
    pb_str(&want, 3, "WARN");
    pb_closen(&want, 3);
    expect_sig(SF_SIGNAL_LOGS, &in, NULL, &want, &st);
    assert_int_equal(st.spans, 1);
    assert_int_equal(st.dropped_fields[SF_OTLP_MSG_RESOURCE_LOGS], 1);
    assert_int_equal(st.dropped_fields[SF_OTLP_MSG_SCOPE_LOGS], 1);
    assert_int_equal(st.dropped_fields[SF_OTLP_MSG_LOG_RECORD], 1);
    assert_string_equal(sf_otlp_msg_label(SF_OTLP_MSG_LOG_RECORD), "LogRecord");
}

static void test_logs_refusals(void **state)
{
    pb in;

    (void)state;
    pb_init(&in);                       /* a trace id of 5 bytes */
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_bytes(&in, 9, TID, 5);
    pb_closen(&in, 3);
    expect_invalid(SF_SIGNAL_LOGS, &in, "trace id is not 16 bytes");
    pb_init(&in);                       /* severity text not UTF-8 */
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_str(&in, 3, "\xc0\xaf");
    pb_closen(&in, 3);
    expect_invalid(SF_SIGNAL_LOGS, &in, "string field is not UTF-8");
    pb_init(&in);                       /* flags (fixed32) as a varint */
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_uint(&in, 8, 1);
    pb_closen(&in, 3);
    expect_invalid(SF_SIGNAL_LOGS, &in, "known field with the wrong wire type");
}

/* field_fn: severity text and event name leave as "<field>", metric names
 * upper-cased ("" clears). */
static sf_status field_fn(const void *ctx, void **state, sf_otlp_field f, const uint8_t *in,
                          size_t len, sf_otlp_text *out)
{
    (void)ctx;
    (void)state;
    if (f == SF_OTLP_FIELD_METRIC_NAME) {
        if (sf_otlp_text_reserve(out, len + 1) != SF_OK)
            return SF_ENOMEM;
        for (size_t i = 0; i < len; i++)
            out->data[i] = in[i] >= 'a' && in[i] <= 'z' ? (uint8_t)(in[i] - 32) : in[i];
        out->len = len;
        return SF_OK;
    }
    {
        const char *name = sf_otlp_field_name(f);
        size_t n = strlen(name);

        if (sf_otlp_text_reserve(out, n + 2) != SF_OK)
            return SF_ENOMEM;
        out->data[0] = '<';
        memcpy(out->data + 1, name, n);
        out->data[n + 1] = '>';
        out->len = n + 2;
    }
    return SF_OK;
}

static void test_logs_edit(void **state)
{
    static const char *const keys[] = { "level" };
    static const bool keep[] = { true };
    static const char *const ok_set[] = { "ok" };
    const sf_otlp_value_alt alt = { .types = SF_OTLP_VAL_STRING, .shape = SF_OTLP_STR_SET,
                                    .n_set = 1, .set = ok_set };
    const sf_otlp_value_rule body_rule = { .n_alts = 1, .alts = &alt };
    sf_otlp_keyset *ks;
    sf_otlp_edit e = { 0 };
    sf_otlp_stats st;
    pb in, want;

    (void)state;
    assert_int_equal(sf_otlp_keyset_create(1, keys, keep, false, &ks), SF_OK);
    e.keys[SF_OTLP_LOG] = ks;
    e.fields = SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_LOG_BODY) |
               SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_LOG_SEVERITY_TEXT) |
               SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_LOG_EVENT_NAME);
    e.field_fn = field_fn;
    e.body_rule = &body_rule;
    logs_request(&in, 2);
    /* record 0: its body fails the rule (dropped); record 1 "ok" stays;
     * the 'prompt' attribute is removed (dropped_attributes_count 1) */
    pb_init(&want);
    pb_open(&want, 1);
    pb_open(&want, 1);
    kv_str(&want, 1, "service.name", "engine");
    pb_close(&want);
    pb_open(&want, 2);
    pb_open(&want, 1);
    pb_str(&want, 1, "app");
    pb_close(&want);
    for (int i = 0; i < 2; i++) {
        pb_open(&want, 2);
        pb_fix64(&want, 1, 1700000000000000000ull);
        pb_uint(&want, 2, 9);
        pb_str(&want, 3, "<log.severity_text>");
        if (i == 1) {
            pb_open(&want, 5);
            pb_str(&want, 1, "ok");
            pb_close(&want);
        }
        kv_str(&want, 6, "level", "info");
        pb_uint(&want, 7, 1);
        pb_fix32(&want, 8, 1);
        pb_bytes(&want, 9, TID, 16);
        pb_bytes(&want, 10, SID, 8);
        pb_fix64(&want, 11, 1700000000000000001ull);
        pb_str(&want, 12, "<log.event_name>");
        pb_close(&want);
    }
    pb_closen(&want, 2);
    expect_sig(SF_SIGNAL_LOGS, &in, &e, &want, &st);
    assert_int_equal(st.dropped_bodies, 1);
    assert_int_equal(st.removed_attributes, 2);
    assert_int_equal(st.spans, 2);

    /* no body rule: every body is dropped; not governed: every body stays */
    e.body_rule = NULL;
    {
        sf_buf *out = NULL;

        assert_int_equal(rw_sig(SF_SIGNAL_LOGS, &in, &e, &out, &st), SF_OK);
        assert_int_equal(st.dropped_bodies, 2);
        sf_buf_unref(out);
        e.fields = 0;
        assert_int_equal(rw_sig(SF_SIGNAL_LOGS, &in, &e, &out, &st), SF_OK);
        assert_int_equal(st.dropped_bodies, 0);
        assert_non_null(memmem(out->data, out->len, "prompt=hello", 12));
        sf_buf_unref(out);
    }
    sf_otlp_keyset_destroy(ks);
}

/* ---- metrics ------------------------------------------------------------------- */

/* request { resource_metrics { scope_metrics { metrics { ... (left open) */
static void open_metric(pb *b, const char *name)
{
    pb_init(b);
    pb_open(b, 1);
    pb_open(b, 2);
    pb_open(b, 2);
    pb_str(b, 1, name);
}

/* An exemplar (canonical): filtered attribute, time, value, ids. */
static void exemplar(pb *b, uint32_t num)
{
    pb_open(b, num);
    pb_fix64(b, 2, 7);
    pb_fix64(b, 3, dbits(0.25));
    pb_bytes(b, 4, SID, 8);
    pb_bytes(b, 5, TID, 16);
    kv_str(b, 7, "prompt", "secret");
    kv_str(b, 7, "route", "/v1");
    pb_close(b);
}

/* Every metric type, canonical: 1 gauge point (as_int 0: present), 2 sum
 * points, 1 histogram point, 1 exponential histogram point, 1 summary
 * point: 6 items. */
static void metrics_request(pb *b)
{
    pb_init(b);
    pb_open(b, 1);
    pb_open(b, 1);
    kv_str(b, 1, "service.name", "sglang");
    pb_close(b);
    pb_open(b, 2);
    pb_open(b, 1);
    pb_str(b, 1, "sglang");
    pb_close(b);
    /* gauge */
    pb_open(b, 2);
    pb_str(b, 1, "sglang:num_running_reqs");
    pb_str(b, 2, "running requests");
    pb_str(b, 3, "{request}");
    pb_open(b, 5);
    pb_open(b, 1);
    pb_fix64(b, 3, 1000);
    exemplar(b, 5);
    pb_fix64(b, 6, 0);                      /* as_int 0: written */
    kv_str(b, 7, "model_name", "llama");
    pb_closen(b, 2);
    kv_str(b, 12, "prompt", "metadata");
    pb_close(b);
    /* sum, two points */
    pb_open(b, 2);
    pb_str(b, 1, "sglang:prompt_tokens_total");
    pb_open(b, 7);
    for (int i = 0; i < 2; i++) {
        pb_open(b, 1);
        pb_fix64(b, 2, 1);
        pb_fix64(b, 3, 2);
        pb_fix64(b, 4, dbits(i ? 0.0 : 12.5));  /* as_double 0.0: written */
        kv_str(b, 7, "model_name", "llama");
        pb_uint(b, 8, 1);
        pb_close(b);
    }
    pb_uint(b, 2, 2);                       /* cumulative */
    pb_uint(b, 3, 1);                       /* monotonic */
    pb_closen(b, 2);
    /* histogram */
    pb_open(b, 2);
    pb_str(b, 1, "sglang:time_to_first_token_seconds");
    pb_open(b, 9);
    pb_open(b, 1);
    pb_fix64(b, 3, 2);
    pb_fix64(b, 4, 3);                      /* count */
    pb_fix64(b, 5, 0);                      /* sum 0.0: present, written */
    pb_tag(b, 6, LEN);                      /* bucket_counts, packed */
    pb_var(b, 24);
    for (uint64_t v = 1; v <= 3; v++)
        pb_raw(b, &v, 8);
    pb_tag(b, 7, LEN);                      /* explicit_bounds, packed */
    pb_var(b, 16);
    {
        uint64_t x = dbits(0.1), y = dbits(1.0);

        pb_raw(b, &x, 8);
        pb_raw(b, &y, 8);
    }
    exemplar(b, 8);
    pb_fix64(b, 11, dbits(0.05));           /* min */
    pb_fix64(b, 12, dbits(2.0));            /* max */
    pb_close(b);
    pb_uint(b, 2, 1);
    pb_closen(b, 2);
    /* exponential histogram */
    pb_open(b, 2);
    pb_str(b, 1, "latency.exp");
    pb_open(b, 10);
    pb_open(b, 1);
    kv_str(b, 1, "model_name", "llama");
    pb_fix64(b, 4, 5);
    pb_uint(b, 6, 5);                       /* scale -3 (zigzag 5) */
    pb_fix64(b, 7, 1);                      /* zero_count */
    pb_open(b, 8);                          /* positive */
    pb_uint(b, 1, 3);                       /* offset -2 */
    pb_tag(b, 2, LEN);
    pb_var(b, 3);
    pb_byte(b, 1);
    pb_byte(b, 0);
    pb_byte(b, 2);
    pb_close(b);
    pb_fix64(b, 14, dbits(1e-9));           /* zero_threshold */
    pb_close(b);
    pb_uint(b, 2, 2);
    pb_closen(b, 2);
    /* summary */
    pb_open(b, 2);
    pb_str(b, 1, "rpc.duration");
    pb_open(b, 11);
    pb_open(b, 1);
    pb_fix64(b, 4, 10);
    pb_fix64(b, 5, dbits(4.5));
    pb_open(b, 6);
    pb_fix64(b, 1, dbits(0.5));
    pb_fix64(b, 2, dbits(0.4));
    pb_close(b);
    pb_close(b);
    pb_closen(b, 2);
    pb_closen(b, 2);
}

static void test_metrics_canonical_unchanged(void **state)
{
    pb in;
    sf_otlp_stats st;
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req;
    Opentelemetry__Proto__Metrics__V1__Metric **m;

    (void)state;
    metrics_request(&in);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &in, &st);
    assert_int_equal(st.spans, 6);
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, in.n, in.d);
    assert_non_null(req);
    m = req->resource_metrics[0]->scope_metrics[0]->metrics;
    assert_int_equal(m[0]->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    assert_int_equal(m[0]->gauge->data_points[0]->value_case,
                     OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT);
    assert_int_equal(m[1]->sum->data_points[1]->value_case,
                     OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE);
    assert_int_equal(m[2]->histogram->data_points[0]->_sum_case,
                     OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___SUM_SUM);
    assert_int_equal(m[2]->histogram->data_points[0]->n_bucket_counts, 3);
    assert_int_equal(m[3]->exponential_histogram->data_points[0]->scale, -3);
    assert_int_equal(m[3]->exponential_histogram->data_points[0]->positive->offset, -2);
    assert_int_equal(m[3]->exponential_histogram->data_points[0]->positive->bucket_counts[2], 2);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
}

/* Each case alone in its request: one that stream() cannot write makes
 * the whole request go through generic(), which would hide the others. */
static void test_metrics_canonicalised(void **state)
{
    pb in, want;
    sf_otlp_stats st;

    (void)state;
    /* a point's value given as_double then as_int: the last wins */
    open_metric(&in, "m");
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_fix64(&in, 4, dbits(1.5));
    pb_fix64(&in, 6, 42);
    pb_closen(&in, 5);
    open_metric(&want, "m");
    pb_open(&want, 5);
    pb_open(&want, 1);
    pb_fix64(&want, 6, 42);
    pb_closen(&want, 5);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);
    assert_int_equal(st.spans, 1);

    /* a gauge, then a sum: the sum wins; the gauge's point is not counted */
    open_metric(&in, "m");
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_fix64(&in, 4, dbits(1.5));
    pb_closen(&in, 2);
    pb_open(&in, 7);
    pb_open(&in, 1);
    pb_close(&in);
    pb_open(&in, 1);
    pb_close(&in);
    pb_closen(&in, 4);
    open_metric(&want, "m");
    pb_open(&want, 7);
    pb_open(&want, 1);
    pb_close(&want);
    pb_open(&want, 1);
    pb_close(&want);
    pb_closen(&want, 4);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);
    assert_int_equal(st.spans, 2);

    /* a sum given twice: merged, as protobuf merges a message member */
    open_metric(&in, "m");
    pb_open(&in, 7);
    pb_open(&in, 1);
    pb_close(&in);
    pb_closen(&in, 1);
    pb_open(&in, 7);
    pb_uint(&in, 2, 2);
    pb_closen(&in, 4);
    open_metric(&want, "m");
    pb_open(&want, 7);
    pb_open(&want, 1);
    pb_close(&want);
    pb_uint(&want, 2, 2);
    pb_closen(&want, 4);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);
    assert_int_equal(st.spans, 1);

    /* bucket counts unpacked, packed, unpacked: one packed field */
    open_metric(&in, "h");
    pb_open(&in, 9);
    pb_open(&in, 1);
    pb_fix64(&in, 6, 1);
    pb_tag(&in, 6, LEN);
    pb_var(&in, 16);
    {
        uint64_t a = 2, b = 3;

        pb_raw(&in, &a, 8);
        pb_raw(&in, &b, 8);
    }
    pb_fix64(&in, 6, 4);
    pb_closen(&in, 5);
    open_metric(&want, "h");
    pb_open(&want, 9);
    pb_open(&want, 1);
    pb_tag(&want, 6, LEN);
    pb_var(&want, 32);
    for (uint64_t v = 1; v <= 4; v++)
        pb_raw(&want, &v, 8);
    pb_closen(&want, 5);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);

    /* one packed occurrence with non-minimal varints: made minimal */
    open_metric(&in, "e");
    pb_open(&in, 10);
    pb_open(&in, 1);
    pb_open(&in, 9);
    pb_tag(&in, 2, LEN);
    pb_var(&in, 5);
    pb_byte(&in, 0x81);                     /* 1 in two bytes */
    pb_byte(&in, 0x00);
    pb_byte(&in, 0x80);                     /* 0 in two bytes */
    pb_byte(&in, 0x00);
    pb_byte(&in, 7);
    pb_closen(&in, 6);
    open_metric(&want, "e");
    pb_open(&want, 10);
    pb_open(&want, 1);
    pb_open(&want, 9);
    pb_tag(&want, 2, LEN);
    pb_var(&want, 3);
    pb_byte(&want, 1);
    pb_byte(&want, 0);
    pb_byte(&want, 7);
    pb_closen(&want, 6);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);
    assert_int_equal(st.spans, 1);
}

static void test_metrics_refusals(void **state)
{
    pb in;

    (void)state;
    open_metric(&in, "e");              /* a sint32 past 32 bits */
    pb_open(&in, 10);
    pb_open(&in, 1);
    pb_uint(&in, 6, 1ull << 33);
    pb_closen(&in, 5);
    expect_invalid(SF_SIGNAL_METRICS, &in, "sint32 field out of range");
    open_metric(&in, "h");              /* packed fixed64 of 7 bytes */
    pb_open(&in, 9);
    pb_open(&in, 1);
    pb_bytes(&in, 6, "1234567", 7);
    pb_closen(&in, 5);
    expect_invalid(SF_SIGNAL_METRICS, &in, "packed field is not whole elements");
    open_metric(&in, "e");              /* a packed varint cut short */
    pb_open(&in, 10);
    pb_open(&in, 1);
    pb_open(&in, 8);
    pb_bytes(&in, 2, "\x01\x80", 2);
    pb_closen(&in, 6);
    expect_invalid(SF_SIGNAL_METRICS, &in, "packed field is not whole elements");
    open_metric(&in, "g");              /* an exemplar's span id of 3 bytes */
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_open(&in, 5);
    pb_bytes(&in, 4, SID, 3);
    pb_closen(&in, 6);
    expect_invalid(SF_SIGNAL_METRICS, &in, "span id is not 8 bytes");
    open_metric(&in, "g");              /* as_int as a varint */
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_uint(&in, 6, 1);
    pb_closen(&in, 5);
    expect_invalid(SF_SIGNAL_METRICS, &in, "known field with the wrong wire type");
}

static void test_metrics_old_fields_dropped(void **state)
{
    pb in, want;
    sf_otlp_stats st;

    (void)state;
    /* the old IntGauge (Metric 4) and a point's old labels (field 1) */
    open_metric(&in, "m");
    pb_open(&in, 4);
    pb_open(&in, 1);
    pb_closen(&in, 2);
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_open(&in, 1);
    pb_str(&in, 1, "k");
    pb_close(&in);
    pb_closen(&in, 2);
    pb_closen(&in, 3);
    open_metric(&want, "m");
    pb_open(&want, 5);
    pb_open(&want, 1);
    pb_closen(&want, 2);
    pb_closen(&want, 3);
    expect_sig(SF_SIGNAL_METRICS, &in, NULL, &want, &st);
    assert_int_equal(st.dropped_fields[SF_OTLP_MSG_METRIC], 1);
    assert_int_equal(st.dropped_fields[SF_OTLP_MSG_NUMBER_POINT], 1);
    assert_int_equal(st.spans, 1);
}

/* The metric edit: names through field_fn, metadata and datapoint keysets,
 * exemplars dropped or kept (their filtered attributes by the datapoint
 * keyset). */
static void test_metrics_edit(void **state)
{
    static const char *const keys[] = { "model_name", "route" };
    static const bool keep[] = { true, true };
    sf_otlp_keyset *dp, *none;
    sf_otlp_edit e = { 0 };
    sf_otlp_stats st;
    sf_buf *out = NULL;
    pb in;
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req;
    Opentelemetry__Proto__Metrics__V1__Metric **m;

    (void)state;
    assert_int_equal(sf_otlp_keyset_create(2, keys, keep, false, &dp), SF_OK);
    assert_int_equal(sf_otlp_keyset_create(0, NULL, NULL, false, &none), SF_OK);
    e.keys[SF_OTLP_DATAPOINT] = dp;
    e.keys[SF_OTLP_METRIC] = none;
    e.fields = SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_METRIC_NAME) |
               SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_METRIC_DESCRIPTION) |
               SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_EXEMPLARS);
    e.field_fn = field_fn;
    metrics_request(&in);
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.spans, 6);
    assert_int_equal(st.dropped_exemplars, 2);
    assert_null(memmem(out->data, out->len, "prompt", 6));
    assert_null(memmem(out->data, out->len, "secret", 6));
    assert_null(memmem(out->data, out->len, "metadata", 8));
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    m = req->resource_metrics[0]->scope_metrics[0]->metrics;
    assert_string_equal(m[0]->name, "SGLANG:NUM_RUNNING_REQS");
    assert_string_equal(m[0]->description, "<metric.description>");
    assert_string_equal(m[0]->unit, "{request}");       /* not governed */
    assert_int_equal(m[0]->n_metadata, 0);
    assert_int_equal(m[0]->gauge->data_points[0]->n_exemplars, 0);
    assert_int_equal(m[0]->gauge->data_points[0]->n_attributes, 1);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    sf_buf_unref(out);

    /* exemplars kept: ids stay, filtered attributes by the datapoint keyset */
    e.keep_exemplars = true;
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.dropped_exemplars, 0);
    assert_null(memmem(out->data, out->len, "secret", 6));
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    m = req->resource_metrics[0]->scope_metrics[0]->metrics;
    {
        const Opentelemetry__Proto__Metrics__V1__Exemplar *x =
            m[2]->histogram->data_points[0]->exemplars[0];

        assert_int_equal(x->n_filtered_attributes, 1);
        assert_string_equal(x->filtered_attributes[0]->key, "route");
        assert_int_equal(x->trace_id.len, 16);
        assert_int_equal(x->span_id.len, 8);
    }
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    sf_buf_unref(out);
    sf_otlp_keyset_destroy(dp);
    sf_otlp_keyset_destroy(none);
}

/* ---- dropping metrics (keep_metric_fn) ------------------------------------------ */

/* Drops metrics whose name starts with "sglang:", and the nameless; says
 * FAILED of "rpc.duration" and NOMEM of "nomem" (the test's ctx[1] on). */
static int keep_not_sglang(const void *ctx, void **state, const uint8_t *name, size_t len)
{
    int *c = (int *)ctx;

    (void)state;
    c[0]++;
    if (c[1] && len == 12 && memcmp(name, "rpc.duration", 12) == 0)
        return SF_OTLP_METRIC_FAILED;
    if (len == 5 && memcmp(name, "nomem", 5) == 0)
        return SF_OTLP_METRIC_NOMEM;
    return len > 0 && !(len >= 7 && memcmp(name, "sglang:", 7) == 0) ? SF_OTLP_METRIC_KEEP
                                                                     : SF_OTLP_METRIC_DROP;
}

static void test_metrics_dropped_by_name(void **state)
{
    int calls[2] = { 0, 0 };
    sf_otlp_edit e = { .ctx = calls, .keep_metric_fn = keep_not_sglang };
    sf_otlp_stats st;
    sf_buf *out = NULL, *again = NULL;
    pb in;
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req;
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm;

    (void)state;
    /* the gauge (1 point), the sum (2) and the histogram (1) are sglang's */
    metrics_request(&in);
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(calls[0], 5);
    assert_int_equal(st.spans, 2);
    assert_int_equal(st.filtered_items, 4);
    assert_int_equal(st.filter_failed_items, 0);
    assert_null(memmem(out->data, out->len, "sglang:", 7));
    assert_null(memmem(out->data, out->len, "running requests", 16));
    assert_null(memmem(out->data, out->len, "secret", 6));     /* an exemplar of a dropped one */
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    sm = req->resource_metrics[0]->scope_metrics[0];
    assert_int_equal(sm->n_metrics, 2);
    assert_string_equal(sm->metrics[0]->name, "latency.exp");
    assert_string_equal(sm->metrics[1]->name, "rpc.duration");
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    /* what is left passes unchanged */
    assert_int_equal(sf_otlp_rewrite_signal(SF_SIGNAL_METRICS, out->data, out->len, MAX_DEPTH,
                                            &e, &again, &st), SF_OK);
    assert_int_equal(st.filtered_items, 0);
    assert_int_equal(again->len, out->len);
    assert_memory_equal(again->data, out->data, out->len);
    sf_buf_unref(again);
    sf_buf_unref(out);

    /* FAILED: dropped too, its points also counted apart */
    calls[1] = 1;
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.spans, 1);
    assert_int_equal(st.filtered_items, 5);
    assert_int_equal(st.filter_failed_items, 1);
    assert_null(memmem(out->data, out->len, "rpc.duration", 12));
    sf_buf_unref(out);
    calls[1] = 0;

    /* NOMEM: the pass fails, nothing is written */
    open_metric(&in, "nomem");
    pb_closen(&in, 3);
    out = (sf_buf *)1;
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_ENOMEM);
    assert_null(out);

    /* a name that is not UTF-8 is not judged: the walk refuses it */
    calls[0] = 0;
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_bytes(&in, 1, "sglang:\xff", 8);
    pb_closen(&in, 3);
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_INVALID);
    assert_int_equal(calls[0], 0);

    /* the name a decoder sees: the last of two; none is ""; a metric of
     * scalars only (no data: the whole-message copy) is judged too */
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);                    /* "x", then "sglang:y": dropped */
    pb_str(&in, 1, "x");
    pb_str(&in, 2, "MARK1");
    pb_str(&in, 1, "sglang:y");
    pb_open(&in, 5);
    pb_open(&in, 1);
    pb_fix64(&in, 6, 1);
    pb_closen(&in, 3);
    pb_open(&in, 2);                    /* no name: dropped */
    pb_str(&in, 2, "MARK2");
    pb_close(&in);
    pb_open(&in, 2);                    /* "sglang:z", then "kept" */
    pb_str(&in, 1, "sglang:z");
    pb_str(&in, 3, "1");
    pb_str(&in, 1, "kept");
    pb_close(&in);
    pb_closen(&in, 2);
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.spans, 0);
    assert_int_equal(st.filtered_items, 1);
    assert_null(memmem(out->data, out->len, "MARK", 4));
    assert_non_null(memmem(out->data, out->len, "kept", 4));
    sf_buf_unref(out);

    /* a dropped metric is still read and checked */
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_str(&in, 1, "sglang:bad");
    pb_bytes(&in, 2, "\xff", 1);        /* description: not UTF-8 */
    pb_closen(&in, 3);
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_INVALID);
    assert_null(out);
}

/* ---- inserts ------------------------------------------------------------------- */

/* ---- numbers that are numbers: histogram points ------------------------------ */

/* One HistogramDataPoint: count, bucket_counts and explicit_bounds, packed
 * or one field an element. */
static void hist_point(pb *b, uint64_t count, const uint64_t *counts, size_t nc,
                       const double *bounds, size_t nb, bool packed_fields)
{
    pb_open(b, 1);
    pb_fix64(b, 3, 2);
    pb_fix64(b, 4, count);
    if (packed_fields && nc > 0) {
        pb_tag(b, 6, LEN);
        pb_var(b, 8 * nc);
        pb_raw(b, counts, 8 * nc);
    }
    for (size_t i = 0; !packed_fields && i < nc; i++)
        pb_fix64(b, 6, counts[i]);
    if (packed_fields && nb > 0) {
        pb_tag(b, 7, LEN);
        pb_var(b, 8 * nb);
        pb_raw(b, bounds, 8 * nb);
    }
    for (size_t i = 0; !packed_fields && i < nb; i++)
        pb_fix64(b, 7, dbits(bounds[i]));
    pb_close(b);
}

static void test_metrics_histogram_numbers(void **state)
{
    static const double ttft[] = { 0.1, 1.0 };
    static const sf_otlp_bounds set = { .metric = "sglang:time_to_first_token_seconds", .n = 2,
                                        .v = ttft };
    static const uint64_t good[] = { 1, 2, 0 };
    static const double down[] = { 1.0, 0.1 };
    double nan_b[2] = { 0.1, 0 }, spelt[2];
    sf_otlp_edit e = { .check_histograms = true };
    sf_otlp_stats st;
    sf_buf *out = NULL;
    pb in;
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req;
    Opentelemetry__Proto__Metrics__V1__Histogram *h;

    (void)state;
    nan_b[1] = NAN;
    memcpy(&spelt[0], "MRK00001", 8);       /* increasing doubles spelling text */
    memcpy(&spelt[1], "MRK00002", 8);
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_str(&in, 1, "sglang:time_to_first_token_seconds");
    pb_open(&in, 9);
    hist_point(&in, 3, good, 3, ttft, 2, true);            /* 0: kept */
    hist_point(&in, 4, good, 3, ttft, 2, true);            /* 1: counts sum to 3, not 4 */
    hist_point(&in, 3, good, 3, down, 2, true);            /* 2: decreasing */
    hist_point(&in, 3, good, 2, ttft, 2, true);            /* 3: 2 counts for 2 bounds */
    hist_point(&in, 3, good, 3, nan_b, 2, true);           /* 4: NaN */
    hist_point(&in, 3, good, 3, spelt, 2, true);           /* 5: consistent, not the set */
    hist_point(&in, 3, good, 3, ttft, 2, false);           /* 6: kept, unpacked */
    hist_point(&in, 5, NULL, 0, NULL, 0, true);            /* 7: no buckets: kept */
    pb_closen(&in, 4);

    /* consistency alone: 5 (spelt, consistent) leaves */
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.dropped_points, 4);
    assert_int_equal(st.spans, 4);
    assert_non_null(memmem(out->data, out->len, "MRK0000", 7));
    sf_buf_unref(out);

    /* the declared set: 5 goes too */
    e.n_bounds = 1;
    e.bounds = &set;
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.dropped_points, 5);
    assert_int_equal(st.spans, 3);
    assert_null(memmem(out->data, out->len, "MRK0000", 7));
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    h = req->resource_metrics[0]->scope_metrics[0]->metrics[0]->histogram;
    assert_int_equal(h->n_data_points, 3);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(h->data_points[i]->n_explicit_bounds, 2);
        assert_true(h->data_points[i]->explicit_bounds[1] == 1.0);
        assert_int_equal(h->data_points[i]->count, 3);
    }
    assert_int_equal(h->data_points[2]->count, 5);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    /* what is left passes unchanged */
    {
        sf_buf *again = NULL;

        assert_int_equal(sf_otlp_rewrite_signal(SF_SIGNAL_METRICS, out->data, out->len,
                                                MAX_DEPTH, &e, &again, &st), SF_OK);
        assert_int_equal(st.dropped_points, 0);
        assert_int_equal(again->len, out->len);
        sf_buf_unref(again);
    }
    sf_buf_unref(out);
    /* a set for another metric: these points are checked for consistency only */
    {
        static const sf_otlp_bounds other = { .metric = "sglang:e2e_request_latency_seconds",
                                              .n = 2, .v = ttft };

        e.bounds = &other;
        assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
        assert_int_equal(st.dropped_points, 4);
        sf_buf_unref(out);
    }
    /* without check_histograms nothing is judged */
    e.check_histograms = false;
    assert_int_equal(rw_sig(SF_SIGNAL_METRICS, &in, &e, &out, &st), SF_OK);
    assert_int_equal(st.dropped_points, 0);
    assert_int_equal(st.spans, 8);
    sf_buf_unref(out);
}

static void test_inserts(void **state)
{
    static const sf_otlp_insert res_ins[] = { { "service.name", "vm-7", true, false },
                                              { "vm.id", "vm-7", true, false } };
    static const sf_otlp_insert log_ins[] = { { "level", "debug", false, false },
                                              { "env", "prod", false, false },
                                              { "logger", "x", false, true } };
    static const char *const keys[] = { "level" };
    static const bool keep[] = { true };
    sf_otlp_keyset *ks;
    sf_otlp_edit e = { 0 };
    sf_otlp_stats st;
    pb in, want;

    (void)state;
    assert_int_equal(sf_otlp_keyset_create(1, keys, keep, false, &ks), SF_OK);
    e.n_inserts[SF_OTLP_RESOURCE] = 2;
    e.inserts[SF_OTLP_RESOURCE] = res_ins;
    e.n_inserts[SF_OTLP_LOG] = 3;     /* the update of an absent key adds nothing */
    e.inserts[SF_OTLP_LOG] = log_ins;
    e.keys[SF_OTLP_LOG] = ks;           /* inserted keys are not judged by it */
    logs_request(&in, 1);
    pb_init(&want);
    pb_open(&want, 1);
    pb_open(&want, 1);
    kv_str(&want, 1, "service.name", "vm-7");      /* upserted in place */
    kv_str(&want, 1, "vm.id", "vm-7");             /* added */
    pb_close(&want);
    pb_open(&want, 2);
    pb_open(&want, 1);
    pb_str(&want, 1, "app");
    pb_close(&want);
    pb_open(&want, 2);
    pb_fix64(&want, 1, 1700000000000000000ull);
    pb_uint(&want, 2, 9);
    pb_str(&want, 3, "INFO");
    pb_open(&want, 5);
    pb_str(&want, 1, "request from 10.0.0.1: prompt=hello");
    pb_close(&want);
    kv_str(&want, 6, "level", "info");             /* present: not inserted */
    kv_str(&want, 6, "env", "prod");               /* absent: inserted */
    pb_uint(&want, 7, 1);                          /* 'prompt' removed */
    pb_fix32(&want, 8, 1);
    pb_bytes(&want, 9, TID, 16);
    pb_bytes(&want, 10, SID, 8);
    pb_fix64(&want, 11, 1700000000000000001ull);
    pb_str(&want, 12, "app.request");
    pb_closen(&want, 3);
    expect_sig(SF_SIGNAL_LOGS, &in, &e, &want, &st);
    assert_int_equal(st.inserted, 3);

    /* a record without attributes gets the inserts at their place; an
     * absent resource is written to hold its inserts */
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    pb_open(&in, 2);
    pb_str(&in, 3, "WARN");
    kv_str(&in, 6, "logger", "secret-name");
    pb_str(&in, 12, "ev");
    pb_closen(&in, 3);
    pb_init(&want);
    pb_open(&want, 1);
    pb_open(&want, 1);
    kv_str(&want, 1, "service.name", "vm-7");
    kv_str(&want, 1, "vm.id", "vm-7");
    pb_close(&want);
    pb_open(&want, 2);
    pb_open(&want, 2);
    pb_str(&want, 3, "WARN");
    kv_str(&want, 6, "logger", "x");               /* updated in place */
    kv_str(&want, 6, "level", "debug");
    kv_str(&want, 6, "env", "prod");
    pb_str(&want, 12, "ev");
    pb_closen(&want, 3);
    expect_sig(SF_SIGNAL_LOGS, &in, &e, &want, &st);

    /* an insert that is not UTF-8 fails the call */
    {
        static const sf_otlp_insert bad_ins[] = { { "k", "\xff", false, false } };
        sf_buf *out = NULL;

        e.inserts[SF_OTLP_LOG] = bad_ins;
        e.n_inserts[SF_OTLP_LOG] = 1;
        assert_int_equal(rw_sig(SF_SIGNAL_LOGS, &in, &e, &out, &st), SF_FILTER);
        assert_null(out);
    }
    sf_otlp_keyset_destroy(ks);
}

/* ---- the request API ------------------------------------------------------------ */

static void test_request_signal(void **state)
{
    sf_request b;
    sf_buf *out = NULL;
    pb in;

    (void)state;
    metrics_request(&in);
    assert_int_equal(sf_request_init_signal(&b, NULL, SF_SIGNAL_METRICS, in.d, in.n, MAX_DEPTH),
                     SF_OK);
    assert_int_equal(b.signal, SF_SIGNAL_METRICS);
    assert_int_equal(sf_request_encode(&b, &out), SF_OK);
    assert_int_equal(b.spans, 6);
    assert_int_equal(out->spans, 6);
    assert_int_equal(sf_request_tree(&b), SF_UNSUPPORTED);
    sf_buf_unref(out);
    sf_request_release(&b);
    /* the same bytes as traces: invalid */
    sf_request_init(&b, NULL, in.d, in.n, MAX_DEPTH);
    assert_int_equal(b.signal, SF_SIGNAL_TRACES);
    assert_int_equal(sf_request_encode(&b, &out), SF_INVALID);
    sf_request_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logs_canonical_unchanged),
        cmocka_unit_test(test_logs_old_and_unknown_fields_dropped),
        cmocka_unit_test(test_logs_refusals),
        cmocka_unit_test(test_logs_edit),
        cmocka_unit_test(test_metrics_canonical_unchanged),
        cmocka_unit_test(test_metrics_canonicalised),
        cmocka_unit_test(test_metrics_refusals),
        cmocka_unit_test(test_metrics_old_fields_dropped),
        cmocka_unit_test(test_metrics_edit),
        cmocka_unit_test(test_metrics_dropped_by_name),
        cmocka_unit_test(test_metrics_histogram_numbers),
        cmocka_unit_test(test_inserts),
        cmocka_unit_test(test_request_signal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
