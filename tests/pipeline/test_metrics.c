/* tests/pipeline/test_metrics.c: the collector's own metrics (sf_metrics.h,
 * sf_metrics.c): every drop reason has one distinct label, and the /metrics
 * endpoint of a real service answers GET /metrics with the Prometheus page
 * (counts that move as spans arrive), /healthz, 404 for other paths and 405
 * for other methods. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/sample_batch.h"
#include "sf_log.h"
#include "sf_metrics.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_http.h"

static void test_reason_labels(void **state)
{
    (void)state;
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        const char *l = sf_reason_label((sf_reason)r);

        assert_true(l[0] != '\0' && strcmp(l, "unknown") != 0);
        for (const char *p = l; *p; p++)    /* a Prometheus label value as written */
            assert_true((*p >= 'a' && *p <= 'z') || *p == '_');
        for (int o = 0; o < r; o++)
            assert_string_not_equal(l, sf_reason_label((sf_reason)o));
    }
    assert_string_equal(sf_reason_label(SF_REASON_COUNT), "unknown");
}

static sf_test_http_answer get(const char *method, const char *url)
{
    return sf_test_http_request(method, url, "text/plain", NULL, NULL, 0);
}

static void test_reasons_sum(void **state)
{
    sf_totals t = { 0 };

    (void)state;
    assert_int_equal(sf_reasons_sum(t.dropped), 0);
    t.dropped[0] = 2;
    t.dropped[SF_REASON_COUNT - 1] = 40;
    t.refused[1] = 1000;            /* another row: not counted */
    assert_int_equal(sf_reasons_sum(t.dropped), 42);
}

static void test_endpoint(void **state)
{
    char yaml[1024], url[128], traces[128];
    int mport = sf_test_free_port(), hport = sf_test_free_port();
    sf_config *cfg = NULL;
    sf_service *svc;
    sf_test_http_answer a;
    size_t len = 0;
    uint8_t *req = sf_sample_request(5, 3, &len);

    (void)state;
    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {http: {endpoint: '127.0.0.1:%d'}}}}\n"
             "exporters: {debug: {verbosity: basic}}\n"
             "service:\n  telemetry: {metrics: {level: normal, address: '127.0.0.1:%d'}}\n"
             "  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}\n", hport, mport);
    svc = sf_test_service_start("m.yaml", yaml, &cfg);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", mport);
    a = get("GET", url);
    assert_int_equal(a.code, 200);
    assert_non_null(strstr(a.body, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                   "transport=\"http\"} 0\n"));
    free(a.body);

    snprintf(traces, sizeof(traces), "http://127.0.0.1:%d/v1/traces", hport);
    a = sf_test_http_request(NULL, traces, "application/x-protobuf", NULL, req, len);
    assert_int_equal(a.code, 200);
    free(a.body);
    a = get("GET", url);                /* rendered afresh on every scrape */
    assert_int_equal(a.code, 200);
    assert_non_null(strstr(a.body, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                   "transport=\"http\"} 5\n"));
    assert_non_null(strstr(a.body, "otelcol_exporter_sent_spans{exporter=\"debug\"} 5\n"));
    /* queued is read before sent and failed: a send that ends during the
     * scrape is then in one of them, never in neither (sf_metrics.c) */
    {
        const char *queued = strstr(a.body, "spanfence_exporter_queued_spans{");
        const char *sent = strstr(a.body, "otelcol_exporter_sent_spans{");
        const char *failed = strstr(a.body, "otelcol_exporter_send_failed_spans{");

        assert_non_null(queued);
        assert_true(queued < sent && queued < failed);
    }
    free(a.body);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", mport);
    a = get("GET", url);
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body, "ok\n");
    free(a.body);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/other", mport);
    a = get("GET", url);
    assert_int_equal(a.code, 404);
    free(a.body);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", mport);
    a = get("DELETE", url);
    assert_int_equal(a.code, 405);
    free(a.body);

    sf_test_service_stop(svc, cfg);
    sf_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reason_labels),
        cmocka_unit_test(test_reasons_sum),
        cmocka_unit_test(test_endpoint),
    };
    int rc;

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
