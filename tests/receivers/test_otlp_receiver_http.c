/* tests/receivers/test_otlp_receiver_http.c: the `otlp` receiver's HTTP
 * server (receivers/otlp/receiver_http.c), run inside the real service and
 * called with libcurl on loopback: protobuf, OTLP/JSON and deflate bodies
 * accepted and counted; malformed bodies 400 with a google.rpc.Status in
 * the request's encoding; wrong path, method, content type and encoding
 * 404/405/415; a body past max_request_body_size 413; and every span
 * accounted for (received = accepted + refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "bench/sample_batch.h"
#include "google/rpc/status.pb-c.h"
#include "sf_log.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_http.h"

#define PROTO "application/x-protobuf"
#define JSON "application/json"

typedef struct fixture {
    char url[128], base[64];
    sf_config *cfg;
    sf_service *svc;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char yaml[1024];
    int port = sf_test_free_port();

    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {http: {endpoint: '127.0.0.1:%d', "
             "max_request_body_size: 64KiB}}}}\n"
             "exporters: {debug: {verbosity: basic}}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}\n", port);
    f->svc = sf_test_service_start("h.yaml", yaml, &f->cfg);
    snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%d", port);
    snprintf(f->url, sizeof(f->url), "%s/v1/traces", f->base);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    sf_test_service_stop(f->svc, f->cfg);
    free(f);
    return 0;
}

static uint64_t refused(const sf_totals *t)
{
    uint64_t n = 0;

    for (int r = 0; r < SF_REASON_COUNT; r++)
        n += t->refused[r];
    return n;
}

/* The gRPC code in a protobuf google.rpc.Status body. */
static int rpc_code(const sf_test_http_answer *a)
{
    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, a->len, (uint8_t *)a->body);
    int code;

    assert_non_null(st);
    assert_true(st->message != NULL && st->message[0] != '\0');
    code = st->code;
    google__rpc__status__free_unpacked(st, NULL);
    return code;
}

static void test_accepts_protobuf_json_and_deflate(void **state)
{
    fixture *f = *state;
    size_t len = 0;
    uint8_t *req = sf_sample_request(10, 1, &len);
    uLongf zlen = compressBound(len);
    uint8_t *z = malloc(zlen);
    sf_test_http_answer a;
    sf_totals t;
    static const char json[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"
        "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
        "\"name\":\"s\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}]}]}]}";

    assert_non_null(req);
    a = sf_test_http_request(NULL, f->url, PROTO, NULL, req, len);
    assert_int_equal(a.code, 200);
    assert_int_equal(a.len, 0);     /* an empty ExportTraceServiceResponse */
    free(a.body);

    a = sf_test_http_request(NULL, f->url, JSON "; charset=utf-8", NULL, json, strlen(json));
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body, "{}");
    free(a.body);

    assert_int_equal(compress(z, &zlen, req, len), Z_OK);
    a = sf_test_http_request(NULL, f->url, PROTO, "deflate", z, zlen);
    assert_int_equal(a.code, 200);
    free(a.body);

    sf_service_totals(f->svc, &t);
    assert_int_equal(t.accepted, 10 + 1 + 10);
    assert_int_equal(refused(&t), 0);
    free(z);
    sf_free(req);
}

static void test_malformed_is_400_in_the_request_encoding(void **state)
{
    fixture *f = *state;
    static const uint8_t garbage[] = { 0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01 };
    sf_test_http_answer a;

    a = sf_test_http_request(NULL, f->url, PROTO, NULL, garbage, sizeof(garbage));
    assert_int_equal(a.code, 400);
    assert_int_equal(rpc_code(&a), 3);      /* INVALID_ARGUMENT */
    assert_false(a.retry_after);
    free(a.body);

    a = sf_test_http_request(NULL, f->url, JSON, NULL, "{\"resourceSpans\": [", 19);
    assert_int_equal(a.code, 400);
    assert_non_null(strstr(a.body, "\"code\":3"));
    free(a.body);

    /* deflate that is not */
    a = sf_test_http_request(NULL, f->url, PROTO, "gzip", "not gzip", 8);
    assert_int_equal(a.code, 400);
    assert_int_equal(rpc_code(&a), 3);
    free(a.body);
}

static void test_wrong_path_method_type_encoding(void **state)
{
    fixture *f = *state;
    char url[128];
    sf_test_http_answer a;

    snprintf(url, sizeof(url), "%s/v1/metrics", f->base);
    a = sf_test_http_request(NULL, url, PROTO, NULL, "", 0);
    assert_int_equal(a.code, 404);
    free(a.body);
    a = sf_test_http_request("PUT", f->url, PROTO, NULL, "", 0);
    assert_int_equal(a.code, 405);
    free(a.body);
    a = sf_test_http_request(NULL, f->url, "text/plain", NULL, "x", 1);
    assert_int_equal(a.code, 415);
    free(a.body);
    a = sf_test_http_request(NULL, f->url, PROTO, "br", "x", 1);
    assert_int_equal(a.code, 415);
    assert_int_equal(rpc_code(&a), 3);
    free(a.body);
}

static void test_too_large_is_413_and_counted(void **state)
{
    fixture *f = *state;
    size_t len = 0;
    uint8_t *req = sf_sample_request(200, 2, &len);   /* ~200 KB, past 64 KiB */
    sf_test_http_answer a;
    sf_totals t;

    assert_non_null(req);
    assert_true(len > 64 * 1024);
    a = sf_test_http_request(NULL, f->url, PROTO, NULL, req, len);
    assert_int_equal(a.code, 413);
    assert_int_equal(rpc_code(&a), 8);      /* RESOURCE_EXHAUSTED */
    free(a.body);
    sf_service_totals(f->svc, &t);
    assert_int_equal(t.accepted, 0);
    assert_int_equal(t.refused[SF_REASON_TOO_LARGE], 200);   /* counted as it streamed past */
    sf_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accepts_protobuf_json_and_deflate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_is_400_in_the_request_encoding, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wrong_path_method_type_encoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large_is_413_and_counted, setup, teardown),
    };
    int rc;

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
