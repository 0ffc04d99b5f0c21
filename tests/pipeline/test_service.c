/* tests/pipeline/test_service.c: the service (pipeline/sf_service.c): built
 * from a config, started, its metrics page rendered, shut down; the memory
 * budget it owns (two memory limiters: the tightest applies whichever
 * starts last, and the limits are lifted at shutdown); and building it
 * (sf_service_create, what `spanfence validate` runs) under the torture
 * helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_http.h"
#include "tests/sf_torture.h"

static char yaml[2048];

/* An otlp receiver (gRPC and HTTP on free loopback ports), the given
 * processors and a debug exporter. */
static const char *config(const char *processors, const char *list)
{
    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: {endpoint: '127.0.0.1:%d'}, "
             "http: {endpoint: '127.0.0.1:%d'}}}}\n"
             "processors:\n%s"
             "exporters: {debug: {verbosity: basic}}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], processors: [%s], exporters: [debug]}}\n",
             sf_test_free_port(), sf_test_free_port(), processors, list);
    return yaml;
}

static sf_config *load(const char *text)
{
    sf_diag *d = sf_diag_create("s.yaml");
    sf_config *cfg = NULL;

    assert_int_equal(sf_config_load_string("s.yaml", text, strlen(text), d, &cfg), SF_OK);
    sf_diag_destroy(d);
    return cfg;
}

static void test_lifecycle_and_metrics(void **state)
{
    sf_config *cfg = load(config("  transform/allowlist:\n    trace_statements:\n"
                                 "      - keep_keys(span.attributes, [\"a\"])\n",
                                 "transform/allowlist"));
    sf_diag *d = sf_diag_create("s.yaml");
    sf_service *svc = NULL;
    sf_totals t;
    char *page = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(sf_service_create(cfg, d, &svc), SF_OK);
    assert_int_equal(sf_diag_count(d), 0);
    assert_int_equal(sf_service_start(svc), SF_OK);
    assert_int_equal(sf_service_render_metrics(svc, &page, &len), SF_OK);
    assert_int_equal(strlen(page), len);
    assert_non_null(strstr(page, "# TYPE otelcol_receiver_accepted_spans counter\n"));
    assert_non_null(strstr(page, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                 "transport=\"grpc\"} 0\n"));
    assert_non_null(strstr(page, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                 "transport=\"http\"} 0\n"));
    assert_non_null(strstr(page, "otelcol_exporter_sent_spans{exporter=\"debug\"} 0\n"));
    assert_non_null(strstr(page, "spanfence_memory_allocated_bytes "));
    sf_free(page);
    sf_service_totals(svc, &t);
    assert_int_equal(t.accepted, 0);
    assert_int_equal(t.exported, 0);
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_diag_destroy(d);
    sf_config_destroy(cfg);
}

/* Two memory limiters, the tighter one first: it is still the one that
 * applies after the looser one started (the service's budget, not "the
 * last limiter started wins"); all limits go at shutdown. */
static void test_memory_budget_is_the_tightest(void **state)
{
    sf_config *cfg = load(config("  memory_limiter/tight: {check_interval: 1s, limit_mib: 2048}\n"
                                 "  memory_limiter/loose: {check_interval: 1s, limit_mib: 4096}\n",
                                 "memory_limiter/tight, memory_limiter/loose"));
    sf_diag *d = sf_diag_create("s.yaml");
    sf_service *svc = NULL;
    size_t soft, hard;

    (void)state;
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(hard, 0);
    assert_int_equal(sf_service_create(cfg, d, &svc), SF_OK);
    assert_int_equal(sf_service_start(svc), SF_OK);
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(hard, (size_t)2048 << 20);
    assert_int_equal(soft, ((size_t)2048 << 20) - ((size_t)2048 << 20) / 5);
    sf_service_shutdown(svc);
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(soft, 0);
    assert_int_equal(hard, 0);
    sf_service_destroy(svc);
    sf_diag_destroy(d);
    sf_config_destroy(cfg);
}

static sf_status create_scenario(void *arg)
{
    const sf_config *cfg = arg;
    sf_diag *d = sf_diag_create("s.yaml");
    sf_service *svc = NULL;
    sf_status st;

    if (d == NULL)
        return SF_ENOMEM;
    st = sf_service_create(cfg, d, &svc);
    if (st != SF_OK)
        assert_null(svc);
    sf_service_destroy(svc);
    sf_diag_destroy(d);
    return st;
}

static void test_create_survives_allocation_failure(void **state)
{
    sf_config *cfg = load(config("  transform/allowlist:\n    trace_statements:\n"
                                 "      - keep_keys(span.attributes, [\"a\"])\n"
                                 "  memory_limiter: {check_interval: 1s, limit_mib: 4096}\n"
                                 "  batch: {}\n",
                                 "memory_limiter, transform/allowlist, batch"));
    const sf_torture t = { .name = "service create", .run = create_scenario, .arg = cfg,
                           .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 5);
    sf_config_destroy(cfg);
}

/* POST body to url; the HTTP status, or 0 when no answer came (the
 * connection closed first). */
static long post(const char *url, const void *body, size_t len)
{
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    CURL *c = curl_easy_init();
    sf_test_http_answer a = { 0 };
    long code = 0;

    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sf_test_http_body_);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    free(a.body);
    return code;
}

static uint64_t received(const sf_service *svc)
{
    sf_totals t;
    uint64_t n;

    sf_service_totals(svc, &t);
    n = t.accepted;
    for (int r = 0; r < SF_REASON_COUNT; r++)
        n += t.refused[r];
    return n;
}

/* A service with an HTTP OTLP receiver on a free port, the processors
 * `processors` (YAML under processors:, NULL: none) run in the order
 * `list`, and a debug exporter, started; its traces URL in url. */
static sf_service *start_http(const char *processors, const char *list, sf_config **cfg,
                              char *url, size_t url_size)
{
    int port = sf_test_free_port();
    char text[1024];
    sf_diag *d = sf_diag_create("s.yaml");
    sf_service *svc = NULL;

    snprintf(text, sizeof(text),
             "receivers: {otlp: {protocols: {http: {endpoint: '127.0.0.1:%d'}}}}\n"
             "%s%s"
             "exporters: {debug: {verbosity: basic}}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], processors: [%s], exporters: [debug]}}\n",
             port, processors ? "processors:\n" : "", processors ? processors : "",
             list ? list : "");
    snprintf(url, url_size, "http://127.0.0.1:%d/v1/traces", port);
    *cfg = load(text);
    assert_int_equal(sf_service_create(*cfg, d, &svc), SF_OK);
    assert_int_equal(sf_service_start(svc), SF_OK);
    sf_diag_destroy(d);
    return svc;
}

/* Whichever of spanfence's allocations fails while a request is received,
 * decoded and queued, a request that is answered has its spans counted,
 * accepted or refused: received = accepted + refused. (One whose
 * connection is dropped unanswered, when even its context cannot be made,
 * was never read: the client sees no answer and sends it again.) With no processor in the pipeline, a request whose
 * codec pass found no memory for its output was refused with 0 spans, and
 * e2e/flood_http, at the hard limit, found one request missing. */
static void test_every_span_counted_when_allocation_fails(void **state)
{
    char url[64];
    sf_config *cfg;
    sf_service *svc = start_http(NULL, NULL, &cfg, url, sizeof(url));
    size_t len = 0;
    uint8_t *body = sf_test_pack_spans(7, 1, "s", 1, &len);
    uint64_t before, allocs = 0, refused_ones = 0;

    (void)state;
    /* How many allocations one request makes, none failing. */
    before = received(svc);
    sf_alloc_fail_at(0, 0);
    assert_int_equal(post(url, body, len), 200);
    allocs = sf_alloc_count();
    assert_int_equal(received(svc) - before, 7);
    assert_true(allocs > 0);
    for (uint64_t k = 1; k <= allocs; k++) {
        long code;

        before = received(svc);
        sf_alloc_fail_at(k, 0);
        code = post(url, body, len);
        sf_alloc_fail_at(0, 0);
        if (code == 0)
            continue;       /* dropped unanswered */
        if (code != 200)
            refused_ones++;
        if (received(svc) - before != 7)
            fail_msg("allocation %llu of %llu failed: answered %ld, %llu spans counted, not 7",
                     (unsigned long long)k, (unsigned long long)allocs, code,
                     (unsigned long long)(received(svc) - before));
    }
    assert_true(refused_ones > 0);      /* some failures did reach the request's path */
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    free(body);
}

/* Two editing processors in one pipeline: the core runs both edits, the
 * first in its pass, the second just before its processor's consume, and
 * each processor only accounts for its own (sf_component_process): the
 * request leaves, counted by both. */
static void test_core_runs_every_edit(void **state)
{
    char url[64];
    sf_config *cfg;
    sf_service *svc = start_http(
        "  transform/first: {trace_statements: ['set(span.status.message, \"\")']}\n"
        "  transform/second: {trace_statements: ['set(span.trace_state, \"\")']}\n",
        "transform/first, transform/second", &cfg, url, sizeof(url));
    size_t len = 0, plen = 0;
    uint8_t *body = sf_test_pack_spans(7, 1, "s", 1, &len);
    char *page = NULL;
    sf_totals t;

    (void)state;
    assert_int_equal(post(url, body, len), 200);
    SF_TEST_WAIT_FOR((sf_service_totals(svc, &t), t.exported == 7));
    assert_int_equal(sf_service_render_metrics(svc, &page, &plen), SF_OK);
    assert_non_null(strstr(page, "otelcol_processor_incoming_items{processor=\"transform/second\","
                                 "otel_signal=\"traces\"} 7\n"));
    assert_non_null(strstr(page, "otelcol_processor_outgoing_items{processor=\"transform/second\","
                                 "otel_signal=\"traces\"} 7\n"));
    sf_free(page);
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle_and_metrics),
        cmocka_unit_test(test_memory_budget_is_the_tightest),
        cmocka_unit_test(test_create_survives_allocation_failure),
        cmocka_unit_test(test_every_span_counted_when_allocation_fails),
        cmocka_unit_test(test_core_runs_every_edit),
    };

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
