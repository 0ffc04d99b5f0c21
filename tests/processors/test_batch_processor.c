/* tests/processors/test_batch_processor.c: the `batch` processor's config (defaults,
 * checks with positions, upstream keys it ignores) and the whole path: OTLP
 * over HTTP into the receiver, through `batch`, out of otlphttp to a
 * loopback sink that decodes every request; batches are merged in the
 * exporter's queue, each span arrives once, and a pipeline without `batch`
 * sends one request per batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_test.h"
#include "tests/sf_test_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "processors/batch/batch.h"
#include "sf_service.h"

/* ---- config ---------------------------------------------------------------- */

static char messages[2048];

/* Load a config whose traces pipeline runs `batch` with `settings` (YAML
 * lines under `batch:`); returns the diagnostics, one per line, and the
 * decoded config in *out when asked (a copy). */
static const char *load(const char *settings, sf_batch_config *out)
{
    char yaml[1024];
    sf_diag *d = sf_diag_create("b.yaml");
    sf_config *cfg = NULL;
    size_t n = 0;

    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: }}}\n"
             "processors:\n  batch:\n%s"
             "exporters: {otlphttp: {endpoint: 'http://127.0.0.1:1'}}\n"
             "service:\n  pipelines:\n    traces: {receivers: [otlp], processors: [batch], "
             "exporters: [otlphttp]}\n",
             settings);
    sf_config_load_string("b.yaml", yaml, strlen(yaml), d, &cfg);
    messages[0] = '\0';
    for (size_t i = 0; i < sf_diag_count(d); i++)
        n += (size_t)snprintf(messages + n, sizeof(messages) - n, "%s\n", sf_diag_message(d, i));
    if (out != NULL) {
        sf_config_component *c = cfg ? sf_config_find(cfg, "batch") : NULL;

        assert_non_null(c);
        *out = *(sf_batch_config *)c->config;
    }
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    return messages;
}

static void test_defaults_are_upstream(void **state)
{
    sf_batch_config c;

    (void)state;
    assert_string_equal(load("", &c), "");
    assert_int_equal(c.send_batch_size, 8192);
    assert_int_equal(c.send_batch_max_size, 0);
    assert_int_equal(c.timeout, 200);
    assert_string_equal(load("    send_batch_size: 100\n    send_batch_max_size: 100\n"
                             "    timeout: 1s\n", &c), "");
    assert_int_equal(c.send_batch_size, 100);
    assert_int_equal(c.send_batch_max_size, 100);
    assert_int_equal(c.timeout, 1000);
    assert_string_equal(load("    send_batch_size: 0\n    timeout: 0s\n", &c), "");
    assert_int_equal(c.send_batch_size, 0);
    assert_int_equal(c.timeout, 0);
}

static void test_config_checks(void **state)
{
    (void)state;
    assert_string_equal(load("    send_batch_size: 500\n    send_batch_max_size: 300\n", NULL),
                        "b.yaml:5:26: processors.batch.send_batch_max_size: must be 0 or at "
                        "least 'send_batch_size' (500)\n");
    /* the default size counts too */
    assert_string_equal(load("    send_batch_max_size: 1000\n", NULL),
                        "b.yaml:4:26: processors.batch.send_batch_max_size: must be 0 or at "
                        "least 'send_batch_size' (8192)\n");
    assert_string_equal(load("    send_batch_size: -1\n", NULL),
                        "b.yaml:4:22: processors.batch.send_batch_size: value '-1' is out of "
                        "range (expected 0 to 2147483647)\n");
    assert_string_equal(load("    timeout: 5\n", NULL),
                        "b.yaml:4:14: processors.batch.timeout: duration needs a unit, e.g. "
                        "'5s'\n");
    assert_string_equal(load("    send_batch_sise: 5\n", NULL),
                        "b.yaml:4:5: processors.batch: unknown key 'send_batch_sise' (did you mean "
                        "'send_batch_size'?)\n");
    assert_string_equal(load("    metadata_keys: [tenant]\n    metadata_cardinality_limit: 10\n",
                             NULL),
                        "b.yaml:4:5: processors.batch.metadata_keys: warning: 'metadata_keys' has "
                        "no effect in spanfence\n"
                        "b.yaml:5:5: processors.batch.metadata_cardinality_limit: warning: "
                        "'metadata_cardinality_limit' has no effect in spanfence\n");
}

/* ---- the whole path ------------------------------------------------------------ */

#define MAX_REQS 64

typedef struct sink {
    struct MHD_Daemon *d;
    uint16_t port;
    pthread_mutex_t mu;
    int n;
    size_t spans[MAX_REQS];     /* spans decoded from request i */
    unsigned seen[1024];        /* times each span id arrived */
} sink;

static void record(sink *s, const uint8_t *data, size_t len)
{
    sf_otlp_request *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len,
                                                                                          data);
    size_t n = 0;

    assert_non_null(req);
    for (size_t r = 0; r < req->n_resource_spans; r++)
        for (size_t k = 0; k < req->resource_spans[r]->n_scope_spans; k++) {
            sf_otlp_scope_spans *ss = req->resource_spans[r]->scope_spans[k];

            for (size_t i = 0; i < ss->n_spans; i++) {
                uint32_t id = 0;

                assert_int_equal(ss->spans[i]->span_id.len, 8);
                memcpy(&id, ss->spans[i]->span_id.data, sizeof(id));
                assert_true(id < 1024);
                s->seen[id]++;
                n++;
            }
        }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                            NULL);
    if (s->n < MAX_REQS)
        s->spans[s->n] = n;
    s->n++;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    sink *s = cls;
    sf_test_http_upload *u;
    struct MHD_Response *resp;
    enum MHD_Result ret;

    (void)url, (void)method, (void)version;
    if (sf_test_http_upload_more(con_cls, upload_data, upload_data_size))
        return MHD_YES;
    u = *con_cls;
    pthread_mutex_lock(&s->mu);
    record(s, u->data, u->len);
    pthread_mutex_unlock(&s->mu);
    resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/x-protobuf");
    ret = MHD_queue_response(conn, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void sink_start(sink *s)
{
    pthread_mutex_init(&s->mu, NULL);
    s->d = sf_test_http_start(on_request, s, sf_test_http_upload_done, &s->port);
}

static void sink_stop(sink *s)
{
    MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->mu);
}

/* POST one OTLP/HTTP request of `spans` spans with ids first..; HTTP code. */
static long post_spans(uint16_t port, uint32_t first, size_t spans)
{
    size_t len;
    uint8_t *body = sf_test_pack_spans(spans, first, "decode", 7, &len);
    char url[128];
    sf_test_http_answer a;

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", port);
    a = sf_test_http_request(NULL, url, "application/x-protobuf", NULL, body, len);
    free(a.body);
    free(body);
    return a.code;
}

static int sink_requests(sink *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Run 6 requests of 10 spans through a service whose traces pipeline has
 * `processors` ("[batch]" or "[]"); returns the sink's record. */
static void run_pipeline(sink *s, const char *processors, char *metrics, size_t metrics_size)
{
    char yaml[2048];
    uint16_t port = (uint16_t)sf_test_free_port();
    size_t mem = sf_alloc_in_use();
    sf_diag *d = sf_diag_create("p.yaml");
    sf_config *cfg = NULL;
    sf_service *svc = NULL;
    sf_totals t;
    char *text = NULL;
    size_t text_len = 0;

    sink_start(s);
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%u\n"
             "processors:\n  batch:\n    send_batch_size: 30\n    timeout: 10s\n"
             "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%u\n"
             "    compression: none\n"
             "    sending_queue: {num_consumers: 2, batch: {enabled: false}}\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: error}}\n"
             "  pipelines:\n    traces: {receivers: [otlp], processors: %s, "
             "exporters: [otlphttp]}\n",
             port, s->port, processors);
    assert_int_equal(sf_config_load_string("p.yaml", yaml, strlen(yaml), d, &cfg), SF_OK);
    assert_int_equal(sf_service_create(cfg, d, &svc), SF_OK);
    sf_diag_destroy(d);
    assert_int_equal(sf_service_start(svc), SF_OK);
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(post_spans(port, i * 10, 10), 200);
    for (int w = 0; w < 5000; w++) {
        sf_service_totals(svc, &t);
        if (t.exported >= 60)
            break;
        usleep(2000);
    }
    assert_int_equal(t.exported, 60);
    assert_int_equal(t.accepted, 60);
    assert_int_equal(sf_service_render_metrics(svc, &text, &text_len), SF_OK);
    snprintf(metrics, metrics_size, "%s", text);
    sf_free(text);
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    assert_int_equal(sf_alloc_in_use(), mem);
    sink_stop(s);
}

static void test_pipeline_merges_in_exporter_queue(void **state)
{
    sink *s = calloc(1, sizeof(*s));
    char *metrics = calloc(1, 65536);

    (void)state;
    assert_non_null(s);
    assert_non_null(metrics);
    run_pipeline(s, "[batch]", metrics, 65536);
    /* 6 x 10 spans, send_batch_size 30: two requests of 30 */
    assert_int_equal(s->n, 2);
    assert_int_equal(s->spans[0], 30);
    assert_int_equal(s->spans[1], 30);
    for (int id = 0; id < 60; id++)
        assert_int_equal(s->seen[id], 1);
    assert_non_null(strstr(metrics, "otelcol_processor_incoming_items{processor=\"batch\",otel_signal=\"traces\"} 60\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_outgoing_items{processor=\"batch\",otel_signal=\"traces\"} 60\n"));
    assert_non_null(strstr(metrics, "otelcol_exporter_sent_spans{exporter=\"otlphttp\"} 60\n"));
    /* upstream's batchprocessor series, the default reader's names (no
     * _total): two requests of 30, both sent on the size trigger */
    assert_non_null(strstr(metrics, "# TYPE otelcol_processor_batch_batch_send_size histogram\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_bucket{processor=\"batch\",le=\"25\"} 0\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_bucket{processor=\"batch\",le=\"50\"} 2\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_bucket{processor=\"batch\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_sum{processor=\"batch\"} 60\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_count{processor=\"batch\"} 2\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_batch_size_trigger_send{processor=\"batch\"} 2\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_timeout_trigger_send{processor=\"batch\"} 0\n"));
    assert_non_null(strstr(metrics, "otelcol_processor_batch_metadata_cardinality{processor=\"batch\"} 1\n"));
    /* the bytes histogram is upstream's at level detailed only */
    assert_null(strstr(metrics, "otelcol_processor_batch_batch_send_size_bytes"));
    free(metrics);
    free(s);
}

/* The same exporter without `batch` in its pipeline, and its queue's own
 * merging off (sending_queue.batch.enabled: false; the processor's
 * settings replace the queue's when it is there): one request per batch. */
static void test_pipeline_without_batch_sends_each(void **state)
{
    sink *s = calloc(1, sizeof(*s));
    char *metrics = calloc(1, 65536);

    (void)state;
    assert_non_null(s);
    assert_non_null(metrics);
    run_pipeline(s, "[]", metrics, 65536);
    assert_int_equal(sink_requests(s), 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(s->spans[i], 10);
    for (int id = 0; id < 60; id++)
        assert_int_equal(s->seen[id], 1);
    assert_null(strstr(metrics, "otelcol_processor_batch_"));     /* no batch processor */
    free(metrics);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_upstream),
        cmocka_unit_test(test_config_checks),
        cmocka_unit_test(test_pipeline_merges_in_exporter_queue),
        cmocka_unit_test(test_pipeline_without_batch_sends_each),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
