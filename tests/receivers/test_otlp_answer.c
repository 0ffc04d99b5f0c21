/* tests/receivers/test_otlp_answer.c: the status-to-answer table both OTLP
 * servers answer from (receivers/otlp/otlp_answer.h), tested two ways:
 * every sf_status walked, its gRPC and HTTP answers agreeing in kind (and
 * in retryability with sf_status_retryable); and the real receiver serving
 * both protocols at once, sent the same requests over gRPC and HTTP, the
 * HTTP answer's google.rpc.Status carrying the very code the gRPC call got
 * and the HTTP status being the one the table gives for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "bench/sample_batch.h"
#include "google/rpc/status.pb-c.h"
#include "receivers/otlp/otlp_answer.h"
#include "sf_log.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_grpc.h"
#include "tests/sf_test_http.h"

#define EXPORT "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

/* What a client should do with an answer. */
typedef enum { K_OK, K_BAD, K_TOOBIG, K_RETRY, K_FAIL, K_OTHER } kind;

static kind grpc_kind(int code)
{
    switch (code) {
    case GRPC_STATUS_OK:                 return K_OK;
    case GRPC_STATUS_INVALID_ARGUMENT:   return K_BAD;
    case GRPC_STATUS_RESOURCE_EXHAUSTED: return K_TOOBIG;
    case GRPC_STATUS_UNAVAILABLE:        return K_RETRY;
    case GRPC_STATUS_INTERNAL:           return K_FAIL;
    default:                             return K_OTHER;
    }
}

static kind http_kind(long code)
{
    switch (code) {
    case 200: return K_OK;
    case 400: return K_BAD;
    case 413: return K_TOOBIG;
    case 503: return K_RETRY;
    case 500: return K_FAIL;
    default:  return K_OTHER;
    }
}

/* The table's own gRPC numbers are gRPC's. */
static void test_codes_are_grpcs(void **state)
{
    (void)state;
    assert_int_equal(SF_RPC_OK, GRPC_STATUS_OK);
    assert_int_equal(SF_RPC_INVALID_ARGUMENT, GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(SF_RPC_NOT_FOUND, GRPC_STATUS_NOT_FOUND);
    assert_int_equal(SF_RPC_RESOURCE_EXHAUSTED, GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_int_equal(SF_RPC_UNIMPLEMENTED, GRPC_STATUS_UNIMPLEMENTED);
    assert_int_equal(SF_RPC_INTERNAL, GRPC_STATUS_INTERNAL);
    assert_int_equal(SF_RPC_UNAVAILABLE, GRPC_STATUS_UNAVAILABLE);
}

/* Every status: both halves of its answer say the same thing. */
static void test_every_status_agrees(void **state)
{
    static const sf_status all[] = {
#define SF_STATUS_ALL(name, val, retry, msg) SF_##name,
        SF_STATUS_MAP(SF_STATUS_ALL)
#undef SF_STATUS_ALL
    };

    (void)state;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        sf_status st = all[i];
        const sf_otlp_answer *a = sf_otlp_answer_of(st);
        kind g = grpc_kind(a->grpc), h = http_kind(a->http);

        assert_non_null(a->message);
        if (g != h || g == K_OTHER)
            fail_msg("%s: gRPC %d and HTTP %u disagree", sf_status_name(st), a->grpc, a->http);
        /* OK only for OK, retryable exactly when the status is. */
        assert_int_equal(g == K_OK, st == SF_OK);
        assert_int_equal(g == K_RETRY, sf_status_retryable(st));
        assert_int_equal(a->message[0] == '\0', st == SF_OK);
    }
    /* The disagreements this table ended: malformed is 400, too large 413. */
    assert_int_equal(sf_otlp_answer_of(SF_INVALID)->http, 400);
    assert_int_equal(sf_otlp_answer_of(SF_INVALID)->grpc, GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(sf_otlp_answer_of(SF_TOOBIG)->http, 413);
    assert_int_equal(sf_otlp_answer_of(SF_TOOBIG)->grpc, GRPC_STATUS_RESOURCE_EXHAUSTED);
    /* A value outside the enum still gets an answer, a permanent one. */
    assert_int_equal(grpc_kind(sf_otlp_answer_of((sf_status)-999)->grpc), K_FAIL);
    assert_int_equal(sf_otlp_answer_of((sf_status)-999)->http, 500);
}

/* ---- the real receiver, both protocols --------------------------------- */

typedef struct fixture {
    char url[96];
    sf_config *cfg;
    sf_service *svc;
    sf_test_grpc_client g;
} fixture;

static void start(fixture *f, const char *exporter)
{
    char yaml[2048];
    int gport = sf_test_free_port(), hport = sf_test_free_port();

    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: {endpoint: '127.0.0.1:%d', "
             "max_recv_msg_size_mib: 1}, http: {endpoint: '127.0.0.1:%d', "
             "max_request_body_size: 1MiB}}, max_value_depth: 8}}\n"
             "processors:\n  transform/allowlist:\n    trace_statements:\n"
             "      - keep_keys(span.attributes, [\"gen_ai.request.id\"])\n"
             "exporters:\n  %s\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], processors: [transform/allowlist], "
             "exporters: [%.*s]}}\n",
             gport, hport, exporter, (int)strcspn(exporter, ":"), exporter);
    f->svc = sf_test_service_start("a.yaml", yaml, &f->cfg);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/v1/traces", hport);
    sf_test_grpc_connect(&f->g, gport);
}

static void stop(fixture *f)
{
    sf_test_grpc_close(&f->g);
    sf_test_service_stop(f->svc, f->cfg);
}

/* One unary Export call with `data`; returns its status. */
static grpc_status_code grpc_export(fixture *f, const void *data, size_t len)
{
    return sf_test_grpc_call(f->g.ch, f->g.cq, EXPORT, data, len);
}

/* The same request over HTTP: its status, and the gRPC code its
 * google.rpc.Status body carries (0 for a 200). */
static long http_export(fixture *f, const void *data, size_t len, int *rpc_code, bool *retry_after)
{
    sf_test_http_answer a = sf_test_http_request(NULL, f->url, "application/x-protobuf", NULL,
                                                 data, len);

    *rpc_code = 0;
    if (a.code != 200) {
        Google__Rpc__Status *st = google__rpc__status__unpack(NULL, a.len, (uint8_t *)a.body);

        assert_non_null(st);
        *rpc_code = st->code;
        google__rpc__status__free_unpacked(st, NULL);
    }
    *retry_after = a.retry_after;
    free(a.body);
    return a.code;
}

/* Send `data` both ways and check the answers agree; returns the kind. */
static kind both_ways(fixture *f, const void *data, size_t len)
{
    grpc_status_code g = grpc_export(f, data, len);
    bool retry_after;
    int rpc;
    long h = http_export(f, data, len, &rpc, &retry_after);

    if (rpc != (int)g || grpc_kind(g) != http_kind(h) || grpc_kind(g) == K_OTHER)
        fail_msg("gRPC %d but HTTP %ld with code %d", g, h, rpc);
    assert_int_equal(retry_after, http_kind(h) == K_RETRY);
    return grpc_kind(g);
}

static void test_same_request_same_answer(void **state)
{
    static const uint8_t garbage[] = { 0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01 };
    fixture f = { 0 };
    size_t len = 0;
    uint8_t *sample = sf_sample_request(16, 1, &len), *big;

    (void)state;
    start(&f, "debug: {verbosity: basic}");
    assert_int_equal(both_ways(&f, sample, len), K_OK);
    assert_int_equal(both_ways(&f, "", 0), K_OK);
    assert_int_equal(both_ways(&f, garbage, sizeof(garbage)), K_BAD);
    /* past both size limits (1 MiB each) */
    big = calloc(1, 2u << 20);
    assert_int_equal(both_ways(&f, big, 2u << 20), K_TOOBIG);
    free(big);
    stop(&f);
    sf_free(sample);
}

/* The exporter's queue holds one batch and its gateway is down: once gRPC
 * is refused as retryable, HTTP is too, with Retry-After. Refused only
 * counts once the consumer holds a batch (waiting 10 s to retry it) and the
 * queue holds the other: before the consumer has taken the first, a refusal
 * can be followed by room. Waited on the accepted count, not on a clock. */
static void test_queue_full_both_ways(void **state)
{
    const struct timespec pause = { .tv_nsec = 10 * 1000 * 1000 };
    fixture f = { 0 };
    size_t len = 0;
    uint8_t *sample = sf_sample_request(4, 2, &len);
    grpc_status_code g = GRPC_STATUS_OK;
    uint64_t per_call = 0;
    sf_totals t = { 0 };
    bool retry_after;
    int rpc;

    (void)state;
    start(&f, "otlphttp:\n    endpoint: http://127.0.0.1:1\n"
              "    sending_queue: {queue_size: 1, num_consumers: 1}\n"
              "    retry_on_failure: {initial_interval: 10s, max_elapsed_time: 60s}");
    assert_int_equal(grpc_export(&f, sample, len), GRPC_STATUS_OK);
    sf_service_totals(f.svc, &t);
    per_call = t.accepted;
    assert_true(per_call > 0);
    for (int i = 0; i < 1000 && !(g != GRPC_STATUS_OK && t.accepted == 2 * per_call); i++) {
        g = grpc_export(&f, sample, len);
        if (g != GRPC_STATUS_OK)
            nanosleep(&pause, NULL);    /* the consumer has yet to take the first */
        sf_service_totals(f.svc, &t);
    }
    assert_int_equal(t.accepted, 2 * per_call);     /* one held by the consumer, one queued */
    assert_int_equal(g, GRPC_STATUS_UNAVAILABLE);
    assert_int_equal(http_export(&f, sample, len, &rpc, &retry_after), 503);
    assert_int_equal(rpc, GRPC_STATUS_UNAVAILABLE);
    assert_true(retry_after);
    stop(&f);
    sf_free(sample);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes_are_grpcs),
        cmocka_unit_test(test_every_status_agrees),
        cmocka_unit_test(test_same_request_same_answer),
        cmocka_unit_test(test_queue_full_both_ways),
    };
    int rc;

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    grpc_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    grpc_shutdown();
    return rc;
}
