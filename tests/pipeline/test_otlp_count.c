/* tests/pipeline/test_otlp_count.c: the streaming span counters agree with
 * the wire check's count (protobuf) and with the encoder's input (OTLP/JSON)
 * for every way of cutting a request into pieces (one byte at a time, odd
 * sizes, whole), on several resource/scope shapes; truncated and malformed
 * input stops without reading out of bounds; the count of a decoded tree
 * (sf_otlp_count_spans) agrees too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bench/sample_batch.h"
#include "sf_pb_build.h"
#include "sf_request.h"
#include "sf_otlp_count.h"
#include "sf_otlp_json.h"

static size_t count_in_pieces(const uint8_t *p, size_t len, size_t piece)
{
    sf_span_counter c;

    sf_span_counter_init(&c);
    for (size_t off = 0; off < len; off += piece)
        sf_span_counter_feed(&c, p + off, len - off < piece ? len - off : piece);
    assert_false(c.bad);
    return c.spans;
}

static void test_matches_wire_check(void **state)
{
    static const size_t sizes[] = { 0, 1, 3, 512 };
    static const size_t pieces[] = { 1, 2, 7, 4096, 1 << 30 };

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = 0, want = 0;
        uint8_t *req = sf_sample_request(sizes[i], i, &len);

        assert_non_null(req);
        assert_int_equal(sf_otlp_scan(req, len, 32, &want), SF_OK);
        assert_int_equal(want, sizes[i]);
        for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++)
            assert_int_equal(count_in_pieces(req, len, pieces[k]), want);
        sf_free(req);
    }
}

/* Two requests back to back are one request with both resource_spans
 * (protobuf concatenation merges repeated fields). */
static void test_concatenated_and_empty_levels(void **state)
{
    size_t la = 0, lb = 0, want = 0;
    uint8_t *a = sf_sample_request(5, 1, &la), *b = sf_sample_request(9, 2, &lb);
    /* resource_spans {} ; resource_spans { scope_spans {} } */
    static const uint8_t empties[] = { 0x0a, 0x00, 0x0a, 0x02, 0x12, 0x00 };
    uint8_t *both = sf_malloc(la + lb + sizeof(empties));

    (void)state;
    memcpy(both, a, la);
    memcpy(both + la, empties, sizeof(empties));
    memcpy(both + la + sizeof(empties), b, lb);
    assert_int_equal(sf_otlp_scan(both, la + lb + sizeof(empties), 32, &want), SF_OK);
    assert_int_equal(want, 14);
    assert_int_equal(count_in_pieces(both, la + lb + sizeof(empties), 1), 14);
    assert_int_equal(count_in_pieces(both, la + lb + sizeof(empties), 333), 14);
    sf_free(both);
    sf_free(a);
    sf_free(b);
}

static void test_malformed_stops(void **state)
{
    /* A ResourceSpans claiming 5 bytes holding a field claiming 100. */
    static const uint8_t overrun[] = { 0x0a, 0x05, 0x12, 0x64, 0x12, 0x00, 0x00 };
    /* an unknown group (the codec skips them) closed by another field's end */
    static const uint8_t group[] = { 0x0b, 0x14 };
    static const uint8_t long_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff, 0x01 };
    sf_span_counter c;

    (void)state;
    sf_span_counter_init(&c);
    sf_span_counter_feed(&c, overrun, sizeof(overrun));
    assert_true(c.bad);
    sf_span_counter_init(&c);
    sf_span_counter_feed(&c, group, sizeof(group));
    assert_true(c.bad);
    {
        /* a balanced unknown group, then a ResourceSpans > ScopeSpans > span */
        static const uint8_t skipped[] = { 0x2b, 0x0a, 0x01, 0x7f, 0x2c,
                                           0x0a, 0x04, 0x12, 0x02, 0x12, 0x00 };

        sf_span_counter_init(&c);
        sf_span_counter_feed(&c, skipped, sizeof(skipped));
        assert_false(c.bad);
        assert_int_equal(c.spans, 1);
        assert_int_equal(sf_otlp_scan(skipped, sizeof(skipped), 32, NULL), SF_OK);
    }
    sf_span_counter_init(&c);
    sf_span_counter_feed(&c, long_varint, sizeof(long_varint));
    assert_true(c.bad);

    /* Truncated: the spans whose headers arrived are counted. */
    size_t len = 0;
    uint8_t *req = sf_sample_request(20, 3, &len);
    sf_span_counter_init(&c);
    sf_span_counter_feed(&c, req, len / 2);
    assert_false(c.bad);
    assert_in_range(c.spans, 8, 12);
    sf_free(req);
}

static size_t json_count_in_pieces(const char *p, size_t len, size_t piece)
{
    sf_json_span_counter c;

    sf_json_span_counter_init(&c);
    for (size_t off = 0; off < len; off += piece)
        sf_json_span_counter_feed(&c, (const uint8_t *)p + off, len - off < piece ? len - off : piece);
    assert_false(c.bad);
    return c.spans;
}

/* OTLP/JSON: the sample requests through spanfence's own encoder. */
static void test_json_matches(void **state)
{
    static const size_t sizes[] = { 0, 1, 3, 512 };
    static const size_t pieces[] = { 1, 5, 4096, 1 << 30 };

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = 0, jlen = 0;
        uint8_t *req = sf_sample_request(sizes[i], i, &len);
        sf_otlp_request *tree =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                NULL, len, req);
        char *json = NULL;

        assert_non_null(tree);
        assert_int_equal(sf_otlp_count_spans(tree), sizes[i]);
        assert_int_equal(sf_otlp_json_encode(tree, &json, &jlen), SF_OK);
        for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++)
            assert_int_equal(json_count_in_pieces(json, jlen, pieces[k]), sizes[i]);
        sf_free(json);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            tree, NULL);
        sf_free(req);
    }
}

/* Spans arrays off the path, strings that look like structure, escapes,
 * snake_case keys, and events/links inside spans are not spans. */
static void test_json_shapes(void **state)
{
    static const char doc[] =
        "{\"spans\":[{}],\"resource_spans\":[{\"resource\":{\"attributes\":[{\"key\":\"a\","
        "\"value\":{\"stringValue\":\"]}{[\\\"spans\\\":[{\"}}]},\"scope_spans\":["
        "{\"scope\":{\"name\":\"spans\"},\"spans\":[{\"name\":\"s1\",\"events\":[{},{}],"
        "\"links\":[{\"spanId\":\"x\"}]},{\"name\":\"s2\"}]},{\"spans\":[]}]},"
        "{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":\"k\",\"value\":{"
        "\"arrayValue\":{\"values\":[{\"kvlistValue\":{\"values\":[{\"key\":\"spans\","
        "\"value\":{}}]}}]}}}]}]}]}]}";

    (void)state;
    assert_int_equal(json_count_in_pieces(doc, sizeof(doc) - 1, 1), 3);
    assert_int_equal(json_count_in_pieces(doc, sizeof(doc) - 1, 1000), 3);
}

/* ---- logs and metrics ----------------------------------------------------------- */

static size_t count_signal_in_pieces(sf_signal s, const uint8_t *p, size_t len, size_t piece)
{
    sf_span_counter c;

    sf_span_counter_init_signal(&c, s);
    for (size_t off = 0; off < len; off += piece)
        sf_span_counter_feed(&c, p + off, len - off < piece ? len - off : piece);
    assert_false(c.bad);
    return c.spans;
}

/* records per scope: 3 then 0 then 2, in two resources */
static void logs_bytes(pb *b)
{
    static const int records[] = { 3, 0, 2 };

    pb_init(b);
    for (int r = 0; r < 2; r++) {
        pb_open(b, 1);
        pb_open(b, 1);
        kv_str(b, 1, "service.name", "x");
        pb_close(b);
        for (int sc = r; sc < 3; sc += 2) {
            pb_open(b, 2);
            pb_open(b, 1);
            pb_str(b, 1, "scope");
            pb_close(b);
            for (int i = 0; i < records[sc]; i++) {
                pb_open(b, 2);
                pb_str(b, 3, "INFO");
                pb_open(b, 5);
                pb_str(b, 1, "body");
                pb_close(b);
                pb_close(b);
            }
            pb_str(b, 3, "https://schema");
            pb_close(b);
        }
        pb_close(b);
    }
}

/* every metric type, n points each (n = 1..5), and metadata */
static void metrics_bytes(pb *b)
{
    static const uint32_t types[] = { 5, 7, 9, 10, 11 };

    pb_init(b);
    pb_open(b, 1);
    pb_open(b, 2);
    for (int t = 0; t < 5; t++) {
        pb_open(b, 2);
        pb_str(b, 1, "sglang:metric");
        pb_open(b, types[t]);
        for (int i = 0; i <= t; i++) {
            pb_open(b, 1);
            pb_fix64(b, 3, 1000);
            pb_close(b);
        }
        if (types[t] == 7)
            pb_uint(b, 2, 2);
        pb_close(b);
        kv_str(b, 12, "k", "v");
        pb_close(b);
    }
    pb_closen(b, 2);
}

static void test_logs_metrics_match_codec(void **state)
{
    static const size_t pieces[] = { 1, 2, 7, 4096 };
    pb b;
    size_t want;

    (void)state;
    logs_bytes(&b);
    assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_LOGS, b.d, b.n, 32, &want), SF_OK);
    assert_int_equal(want, 5);
    for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++)
        assert_int_equal(count_signal_in_pieces(SF_SIGNAL_LOGS, b.d, b.n, pieces[k]), want);
    /* the trace counter counts them too (the same path, the same numbers):
     * the receiver tells it the signal */
    assert_int_equal(count_in_pieces(b.d, b.n, 4096), 5);   /* same path, same numbers */
    metrics_bytes(&b);
    assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_METRICS, b.d, b.n, 32, &want), SF_OK);
    assert_int_equal(want, 15);
    for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++)
        assert_int_equal(count_signal_in_pieces(SF_SIGNAL_METRICS, b.d, b.n, pieces[k]), want);
}

static size_t json_signal_in_pieces(sf_signal s, const char *p, size_t piece)
{
    sf_json_span_counter c;
    size_t len = strlen(p);

    sf_json_span_counter_init_signal(&c, s);
    for (size_t off = 0; off < len; off += piece)
        sf_json_span_counter_feed(&c, (const uint8_t *)p + off, len - off < piece ? len - off : piece);
    assert_false(c.bad);
    return c.spans;
}

static void test_logs_metrics_json(void **state)
{
    /* 3 records; a kvlist body holding a "logRecords" key counts nothing */
    static const char logs[] =
        "{\"resourceLogs\":[{\"resource\":{\"attributes\":[]},\"scopeLogs\":["
        "{\"scope\":{\"name\":\"a\"},\"logRecords\":[{\"body\":{\"kvlistValue\":{\"values\":"
        "[{\"key\":\"logRecords\",\"value\":{\"arrayValue\":{\"values\":[{},{}]}}}]}}},"
        "{\"severityText\":\"x\"}]}]},"
        "{\"resource_logs\":[]},{\"scope_logs\":[{\"log_records\":[{\"body\":{\"stringValue\":\"}\"}}]}]}]}";
    /* 1 + 2 + 1 + 1 + 2 points; exemplars and metadata count nothing */
    static const char metrics[] =
        "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":["
        "{\"name\":\"g\",\"gauge\":{\"dataPoints\":[{\"asInt\":\"0\",\"exemplars\":[{},{}]}]},"
        "\"metadata\":[{\"key\":\"dataPoints\"}]},"
        "{\"name\":\"s\",\"sum\":{\"aggregationTemporality\":2,\"dataPoints\":[{},{}]}},"
        "{\"name\":\"h\",\"histogram\":{\"data_points\":[{\"bucketCounts\":[\"1\"]}]}},"
        "{\"name\":\"e\",\"exponentialHistogram\":{\"dataPoints\":[{\"positive\":{}}]}},"
        "{\"name\":\"q\",\"summary\":{\"dataPoints\":[{},{\"quantileValues\":[{}]}]}}"
        "]}]}]}";
    static const size_t pieces[] = { 1, 5, 1 << 20 };

    (void)state;
    for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
        assert_int_equal(json_signal_in_pieces(SF_SIGNAL_LOGS, logs, pieces[k]), 3);
        assert_int_equal(json_signal_in_pieces(SF_SIGNAL_METRICS, metrics, pieces[k]), 7);
        /* read as traces, neither has a span */
        assert_int_equal(json_signal_in_pieces(SF_SIGNAL_TRACES, logs, pieces[k]), 0);
        assert_int_equal(json_signal_in_pieces(SF_SIGNAL_TRACES, metrics, pieces[k]), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logs_metrics_match_codec),
        cmocka_unit_test(test_logs_metrics_json),
        cmocka_unit_test(test_json_matches),
        cmocka_unit_test(test_json_shapes),
        cmocka_unit_test(test_matches_wire_check),
        cmocka_unit_test(test_concatenated_and_empty_levels),
        cmocka_unit_test(test_malformed_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
