/* tests/pipeline/test_service.c: the service (pipeline/sf_service.c): built
 * from a config, started, its metrics page rendered, shut down; the memory
 * budget it owns (two memory limiters: the tightest applies whichever
 * starts last, and the limits are lifted at shutdown); building it
 * (sf_service_create, what `spanfence validate` runs) under the torture
 * helper; and logs and metrics pipelines run beside traces, each signal
 * through its own exporter instance, queue and counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_otlp_wire.h"
#include "sf_service.h"
#include "sf_pb_build.h"
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

/* ---- logs and metrics ------------------------------------------------------ */

/* An ExportLogsServiceRequest of `records` log records (string bodies). */
static void logs_body(pb *b, int records)
{
    pb_init(b);
    pb_open(b, 1);                          /* resource_logs */
    pb_open(b, 1);                          /* resource */
    kv_str(b, 1, "service.name", "app");
    pb_close(b);
    pb_open(b, 2);                          /* scope_logs */
    for (int i = 0; i < records; i++) {
        pb_open(b, 2);                      /* log_records */
        pb_fix64(b, 1, 1700000000000000000ull + (uint64_t)i);
        pb_uint(b, 2, 9);                   /* severity_number INFO */
        pb_open(b, 5);                      /* body */
        pb_str(b, 1, "request done");
        pb_close(b);
        pb_close(b);
    }
    pb_closen(b, 2);
}

/* An ExportMetricsServiceRequest: one gauge of `points` int data points. */
static void metrics_body(pb *b, int points)
{
    pb_init(b);
    pb_open(b, 1);                          /* resource_metrics */
    pb_open(b, 2);                          /* scope_metrics */
    pb_open(b, 2);                          /* metrics */
    pb_str(b, 1, "sglang:num_running_reqs");
    pb_open(b, 5);                          /* gauge */
    for (int i = 0; i < points; i++) {
        pb_open(b, 1);                      /* data_points */
        pb_fix64(b, 3, 1700000000000000000ull);
        pb_fix64(b, 6, (uint64_t)i);        /* as_int */
        pb_close(b);
    }
    pb_closen(b, 4);
}

/* A stand-in gateway: what arrived on each OTLP path, as items the codec
 * counts in the bodies (so a body of the wrong signal would not count). */
typedef struct sink {
    pthread_mutex_t mu;
    size_t requests[SF_SIGNAL_COUNT];
    size_t items[SF_SIGNAL_COUNT];
    size_t other;                   /* requests to any other path */
    size_t bad;                     /* bodies not of their path's signal */
} sink;

static enum MHD_Result sink_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_size,
                                    void **con_cls)
{
    sink *k = cls;
    sf_test_http_upload *u;
    struct MHD_Response *r;
    enum MHD_Result ret;
    int sig = -1;

    (void)method, (void)version;
    if (sf_test_http_upload_more(con_cls, upload_data, upload_size))
        return MHD_YES;
    u = *con_cls;
    for (int s = 0; s < SF_SIGNAL_COUNT; s++) {
        char path[32];

        snprintf(path, sizeof(path), "/v1/%s", sf_signal_name((sf_signal)s));
        if (strcmp(url, path) == 0)
            sig = s;
    }
    pthread_mutex_lock(&k->mu);
    if (sig < 0) {
        k->other++;
    } else {
        size_t n = 0;

        /* (no assert here: this is the server's thread) */
        if (sf_otlp_scan_signal((sf_signal)sig, u->data, u->len, SF_OTLP_DEFAULT_MAX_DEPTH,
                                &n) != SF_OK)
            k->bad++;
        k->requests[sig]++;
        k->items[sig] += n;
    }
    pthread_mutex_unlock(&k->mu);
    r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/x-protobuf");
    ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static size_t sink_items(sink *k, sf_signal s)
{
    size_t n;

    pthread_mutex_lock(&k->mu);
    n = k->items[s];
    pthread_mutex_unlock(&k->mu);
    return n;
}

static long post_to(const char *url, const char *type, const void *body, size_t len)
{
    sf_test_http_answer a = sf_test_http_request(NULL, url, type, NULL, body, len);

    free(a.body);
    return a.code;
}

/* A service whose otlp receiver (HTTP, port *port) feeds a traces, a logs
 * and a metrics pipeline, all exporting with one otlphttp exporter (its
 * settings `exporter`) and, before it, the processors `procs` (a flow
 * list, "" for none). */
static sf_service *start_signals(const char *exporter, const char *procs, int *port,
                                 sf_config **cfg)
{
    char text[2048];
    sf_diag *d = sf_diag_create("s.yaml");
    sf_service *svc = NULL;

    *port = sf_test_free_port();
    snprintf(text, sizeof(text),
             "receivers: {otlp: {protocols: {http: {endpoint: '127.0.0.1:%d'}}}}\n"
             "processors: {memory_limiter: {check_interval: 1s, limit_mib: 4096}, batch: {}}\n"
             "exporters: {otlphttp: %s}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines:\n"
             "    traces: {receivers: [otlp], processors: [%s], exporters: [otlphttp]}\n"
             "    logs: {receivers: [otlp], processors: [%s], exporters: [otlphttp]}\n"
             "    metrics: {receivers: [otlp], processors: [%s], exporters: [otlphttp]}\n",
             *port, exporter, procs, procs, procs);
    *cfg = load(text);
    assert_int_equal(sf_service_create(*cfg, d, &svc), SF_OK);
    assert_int_equal(sf_service_start(svc), SF_OK);
    sf_diag_destroy(d);
    return svc;
}

/* The signal's accounting adds up: accepted = exported + in queue + failed. */
static void assert_balanced(const sf_service *svc, sf_signal s, uint64_t accepted)
{
    sf_totals t;
    uint64_t failed = 0;

    sf_service_totals_signal(svc, s, &t);
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        failed += t.send_failed[r] + t.dropped[r];
        assert_int_equal(t.refused[r], 0);
    }
    assert_int_equal(t.accepted, accepted);
    assert_int_equal(t.exported + failed, accepted);
}

/* Log requests on /v1/logs and a metrics one on /v1/metrics go through their own pipelines (memory_limiter, batch) to
 * the gateway's /v1/logs and /v1/metrics; each signal is counted under its
 * own names, on the receiver, the processors and the exporter, and its
 * accounting adds up on its own. Traces beside them are unchanged. */
static void test_logs_and_metrics_pipelines_run(void **state)
{
    sink k = { .mu = PTHREAD_MUTEX_INITIALIZER };
    uint16_t gw;
    struct MHD_Daemon *d = sf_test_http_start(sink_handler, &k, sf_test_http_upload_done, &gw);
    char exporter[128], url[96], *page = NULL;
    size_t len = 0, plen = 0;
    uint8_t *spans = sf_test_pack_spans(4, 1, "s", 1, &len);
    sf_config *cfg;
    sf_service *svc;
    int port;
    pb b;

    (void)state;
    snprintf(exporter, sizeof(exporter), "{endpoint: 'http://127.0.0.1:%u', compression: none}",
             (unsigned)gw);
    svc = start_signals(exporter, "memory_limiter, batch", &port, &cfg);
    logs_body(&b, 3);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/logs", port);
    assert_int_equal(post_to(url, "application/x-protobuf", b.d, b.n), 200);
    logs_body(&b, 2);
    assert_int_equal(post_to(url, "application/x-protobuf", b.d, b.n), 200);
    metrics_body(&b, 5);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/metrics", port);
    assert_int_equal(post_to(url, "application/x-protobuf", b.d, b.n), 200);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
    assert_int_equal(post_to(url, "application/x-protobuf", spans, len), 200);

    SF_TEST_WAIT_FOR(sink_items(&k, SF_SIGNAL_LOGS) == 5 && sink_items(&k, SF_SIGNAL_METRICS) == 5 &&
                     sink_items(&k, SF_SIGNAL_TRACES) == 4);
    assert_int_equal(k.other, 0);
    assert_int_equal(k.bad, 0);
    assert_balanced(svc, SF_SIGNAL_LOGS, 5);
    assert_balanced(svc, SF_SIGNAL_METRICS, 5);
    assert_balanced(svc, SF_SIGNAL_TRACES, 4);
    assert_int_equal(sf_service_render_metrics(svc, &page, &plen), SF_OK);
    assert_non_null(strstr(page, "otelcol_receiver_accepted_log_records{receiver=\"otlp\","
                                 "transport=\"http\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_receiver_accepted_metric_points{receiver=\"otlp\","
                                 "transport=\"http\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                 "transport=\"http\"} 4\n"));
    assert_non_null(strstr(page, "otelcol_exporter_sent_log_records{exporter=\"otlphttp\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_exporter_sent_metric_points{exporter=\"otlphttp\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_exporter_sent_spans{exporter=\"otlphttp\"} 4\n"));
    assert_non_null(strstr(page, "otelcol_processor_incoming_items{processor=\"batch\","
                                 "otel_signal=\"logs\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_processor_accepted_metric_points{processor="
                                 "\"memory_limiter\"} 5\n"));
    assert_non_null(strstr(page, "otelcol_exporter_queue_capacity{exporter=\"otlphttp\","
                                 "data_type=\"metrics\"}"));
    sf_free(page);
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    MHD_stop_daemon(d);
    free(spans);
}

/* One otlphttp exporter serves traces and logs, its gateway down and its
 * queue small: a flood of traces fills the traces queue (the receiver
 * answers 503, spans counted enqueue-failed) and logs are still taken,
 * into a queue of their own. With one queue shared by the signals, the
 * logs request was refused (shown by giving the exporter one instance for
 * every signal: the logs POST answered 503). */
static void test_trace_flood_cannot_fill_the_logs_queue(void **state)
{
    char exporter[256], url[96];
    size_t len = 0;
    uint8_t *spans = sf_test_pack_spans(2, 1, "s", 1, &len);
    sf_config *cfg;
    sf_service *svc;
    sf_totals t, l;
    int port, closed = sf_test_free_port();
    long code = 200;
    pb b;

    (void)state;
    snprintf(exporter, sizeof(exporter),
             "{endpoint: 'http://127.0.0.1:%d', compression: none, timeout: 1s, "
             "sending_queue: {queue_size: 2, num_consumers: 1}, "
             "retry_on_failure: {initial_interval: 30s, max_interval: 30s, max_elapsed_time: 60s}}",
             closed);
    svc = start_signals(exporter, "", &port, &cfg);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
    /* bounded: the queue holds 2 batches and the consumer one in backoff */
    for (int i = 0; i < 50 && code == 200; i++)
        code = post_to(url, "application/x-protobuf", spans, len);
    assert_int_equal(code, 503);
    sf_service_totals_signal(svc, SF_SIGNAL_TRACES, &t);
    assert_true(t.enqueue_failed > 0);

    logs_body(&b, 3);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/logs", port);
    assert_int_equal(post_to(url, "application/x-protobuf", b.d, b.n), 200);
    metrics_body(&b, 2);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/metrics", port);
    assert_int_equal(post_to(url, "application/x-protobuf", b.d, b.n), 200);
    sf_service_totals_signal(svc, SF_SIGNAL_LOGS, &l);
    assert_int_equal(l.accepted, 3);
    assert_int_equal(l.enqueue_failed, 0);
    sf_service_shutdown(svc);
    /* nothing left behind unaccounted: what was queued failed at shutdown */
    assert_balanced(svc, SF_SIGNAL_LOGS, 3);
    assert_balanced(svc, SF_SIGNAL_METRICS, 2);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    free(spans);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle_and_metrics),
        cmocka_unit_test(test_memory_budget_is_the_tightest),
        cmocka_unit_test(test_create_survives_allocation_failure),
        cmocka_unit_test(test_every_span_counted_when_allocation_fails),
        cmocka_unit_test(test_core_runs_every_edit),
        cmocka_unit_test(test_logs_and_metrics_pipelines_run),
        cmocka_unit_test(test_trace_flood_cannot_fill_the_logs_queue),
    };

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
