/* tests/exporters/test_otlp_http.c: the `otlphttp` exporter against a real
 * HTTP server (libmicrohttpd on 127.0.0.1, port chosen by the kernel) that
 * records every request, gunzips and decodes its body with protobuf-c, and
 * answers from a script: delivery with headers and gzip, retry on 503,
 * permanent 400, 429 with Retry-After, partial success, connection refused,
 * a full queue, the synchronous mode, and the config checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sf_process.h"
#include "sf_time.h"
#include "tests/sf_test_http.h"

#include "tests/sf_test.h"
#include "tests/sf_torture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "exporters/otlp_http/otlp_http.h"
#include "internal/sf_core.h"

#define SECRET "Bearer sekret-token-42"
#define MAX_REQS 32

extern const sf_component_type sf_otlphttp_exporter_type;

/* ---- the server ---------------------------------------------------------- */

typedef struct request {
    char method[8];
    char path[128];
    char content_type[64];
    char content_encoding[32];
    char api_key[64];
    int decoded;                /* body gunzipped (if needed) and unpacked */
    size_t spans;
    uint8_t span_ids[8][8];
    int64_t t_ms;
} request;

typedef struct server {
    struct MHD_Daemon *d;
    uint16_t port;
    pthread_mutex_t mu;
    int n;
    request reqs[MAX_REQS];
    int script[MAX_REQS];       /* HTTP status of request i; 200 after */
    int n_script;
    int64_t rejected;           /* partial_success.rejected_spans in 200s */
} server;

static void copy_header(struct MHD_Connection *c, const char *name, char *out, size_t cap)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);

    snprintf(out, cap, "%s", v ? v : "");
}

static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
    size_t cap = 1 << 20;
    uint8_t *out = malloc(cap);
    z_stream z = { 0 };
    int rc;

    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return NULL;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    rc = inflate(&z, Z_FINISH);
    *out_len = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

static void decode_body(request *r, const uint8_t *body, size_t len)
{
    sf_otlp_request *req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, len, body);

    if (req == NULL)
        return;
    r->decoded = 1;
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        for (size_t j = 0; j < req->resource_spans[i]->n_scope_spans; j++) {
            sf_otlp_scope_spans *ss = req->resource_spans[i]->scope_spans[j];

            for (size_t k = 0; k < ss->n_spans; k++) {
                if (r->spans < 8 && ss->spans[k]->span_id.len == 8)
                    memcpy(r->span_ids[r->spans], ss->spans[k]->span_id.data, 8);
                r->spans++;
            }
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    server *s = cls;
    sf_test_http_upload *u;
    struct MHD_Response *resp;
    request *r;
    int i, code;
    uint8_t reply[64];
    size_t reply_len = 0;
    enum MHD_Result ret;

    (void)version;
    if (sf_test_http_upload_more(con_cls, upload_data, upload_data_size))
        return MHD_YES;
    u = *con_cls;
    pthread_mutex_lock(&s->mu);
    i = s->n++;
    r = &s->reqs[i < MAX_REQS ? i : MAX_REQS - 1];
    memset(r, 0, sizeof(*r));
    r->t_ms = sf_now_ms();
    snprintf(r->method, sizeof(r->method), "%s", method);
    snprintf(r->path, sizeof(r->path), "%s", url);
    copy_header(conn, "Content-Type", r->content_type, sizeof(r->content_type));
    copy_header(conn, "Content-Encoding", r->content_encoding, sizeof(r->content_encoding));
    copy_header(conn, "Authorization", r->api_key, sizeof(r->api_key));
    if (strcmp(r->content_encoding, "gzip") == 0) {
        size_t plain_len;
        uint8_t *plain = gunzip(u->data, u->len, &plain_len);

        if (plain != NULL)
            decode_body(r, plain, plain_len);
        free(plain);
    } else {
        decode_body(r, u->data, u->len);
    }
    code = i < s->n_script ? s->script[i] : 200;
    if (code == 200) {
        sf_otlp_response out = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
        Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps =
            OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;

        if (s->rejected > 0) {
            ps.rejected_spans = s->rejected;
            ps.error_message = "attribute value too long";
            out.partial_success = &ps;
        }
        reply_len = opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(
            &out, reply);
    }
    pthread_mutex_unlock(&s->mu);

    resp = MHD_create_response_from_buffer(reply_len, reply, MHD_RESPMEM_MUST_COPY);
    if (code == 200)
        MHD_add_response_header(resp, "Content-Type", "application/x-protobuf");
    if (code == 429 || code == 503)
        MHD_add_response_header(resp, "Retry-After", code == 429 ? "1" : "0");
    ret = MHD_queue_response(conn, (unsigned)code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void server_start(server *s)
{
    pthread_mutex_init(&s->mu, NULL);
    s->d = sf_test_http_start(on_request, s, sf_test_http_upload_done, &s->port);
}

static void server_stop(server *s)
{
    if (s->d != NULL)
        MHD_stop_daemon(s->d);
    s->d = NULL;
    pthread_mutex_destroy(&s->mu);
}

static int server_requests(server *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- the exporter under test ------------------------------------------- */

typedef struct fixture {
    server srv;
    char endpoint[128];
    char *hkeys[1], *hvalues[1];
    sf_otlphttp_config cfg;
    struct sf_component comp;
    bool created, started;
    sf_arena *arena;
    sf_request batch;
    uint64_t submitted;
} fixture;

/* A 3-span request decoded into an arena, as a receiver would hand it on. */
static void make_batch(fixture *x)
{
    sf_test_three_span_request(&x->arena, &x->batch);
}

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof(*x));

    server_start(&x->srv);
    snprintf(x->endpoint, sizeof(x->endpoint), "http://127.0.0.1:%u/", x->srv.port);
    x->hkeys[0] = "Authorization";
    x->hvalues[0] = SECRET;
    x->cfg = (sf_otlphttp_config){
        .endpoint = x->endpoint,
        .headers = { .n = 1, .keys = x->hkeys, .values = x->hvalues },
        .compression = SF_COMPRESSION_GZIP,
        .timeout = 5000,
        .sending_queue = { .present = true, .enabled = true, .queue_size = 10,
                           .num_consumers = 2 },
        .retry_on_failure = { .present = true, .enabled = true, .initial_interval = 10,
                              .multiplier = 1.5, .randomization_factor = 0.5,
                              .max_interval = 100, .max_elapsed_time = 10000 },
    };
    x->comp.type = &sf_otlphttp_exporter_type;
    x->comp.id = "otlphttp/gateway";
    x->comp.config = &x->cfg;
    make_batch(x);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;

    if (x->created) {
        x->comp.type->shutdown(&x->comp);
        x->comp.type->destroy(&x->comp);
    }
    sf_request_release(&x->batch);
    sf_arena_destroy(x->arena);
    server_stop(&x->srv);
    free(x);
    return 0;
}

static void create_and_start(fixture *x)
{
    assert_int_equal(x->comp.type->create(&x->comp, &x->cfg), SF_OK);
    x->created = true;
    assert_non_null(sf_component_ctx(&x->comp));
    assert_int_equal(x->comp.type->start(&x->comp), SF_OK);
}

static sf_status consume(fixture *x)
{
    sf_status st = x->comp.type->consume(&x->comp, &x->batch);

    if (st == SF_OK)
        x->submitted += x->batch.spans;
    return st;
}

static uint64_t failed(fixture *x, sf_reason r)
{
    return sf_counter_get(&x->comp.counters.send_failed_spans[r]);
}

static void assert_invariant(fixture *x)
{
    sf_test_assert_accounted(&x->comp.counters, x->submitted);
}

static void assert_delivered(const request *r)
{
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->content_type, "application/x-protobuf");
    assert_string_equal(r->api_key, SECRET);
    assert_true(r->decoded);
    assert_int_equal(r->spans, 3);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(r->span_ids[i], sf_test_span_ids[i], 8);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_gzip_delivery(void **state)
{
    fixture *x = *state;

    create_and_start(x);
    assert_int_equal(atomic_load(&x->comp.counters.queue_capacity), 10);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3 &&
             atomic_load(&x->comp.counters.queued_spans) == 0);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_string_equal(x->srv.reqs[0].path, "/v1/traces");   /* no "//" */
    assert_string_equal(x->srv.reqs[0].content_encoding, "gzip");
    assert_delivered(&x->srv.reqs[0]);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 0);
    assert_invariant(x);
}

static void test_retry_after_503_delivers_once_and_logs_no_secret(void **state)
{
    fixture *x = *state;
    char log[8192];
    char path[] = "/tmp/sf_otlphttp_log_XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    ssize_t n;

    assert_true(fd >= 0);
    dup2(fd, STDERR_FILENO);
    sf_log_set_level(SF_LOG_DEBUG);
    x->srv.script[0] = 503;
    x->srv.n_script = 1;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    x->comp.type->shutdown(&x->comp);
    sf_log_set_level(SF_LOG_OFF);
    dup2(saved, STDERR_FILENO);
    close(saved);
    n = pread(fd, log, sizeof(log) - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    log[n] = '\0';
    assert_non_null(strstr(log, "http 503"));   /* the capture works... */
    assert_null(strstr(log, "sekret"));         /* ...and holds no token */
    assert_int_equal(server_requests(&x->srv), 2);
    assert_delivered(&x->srv.reqs[0]);
    assert_delivered(&x->srv.reqs[1]);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 3);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 1);
    assert_int_equal(failed(x, SF_REASON_PERMANENT_ERROR) + failed(x, SF_REASON_RETRIES_EXHAUSTED), 0);
    assert_invariant(x);
}

static void test_400_is_permanent(void **state)
{
    fixture *x = *state;

    x->srv.script[0] = 400;
    x->srv.n_script = 1;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(failed(x, SF_REASON_PERMANENT_ERROR) == 3);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 0);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 0);
    assert_int_equal(atomic_load(&x->comp.counters.queued_spans), 0);
    assert_invariant(x);
}

static void test_429_honours_retry_after(void **state)
{
    fixture *x = *state;

    x->srv.script[0] = 429;     /* Retry-After: 1 */
    x->srv.n_script = 1;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 2);
    /* computed backoff would be 5-15 ms; the hint says 1 s */
    assert_true(x->srv.reqs[1].t_ms - x->srv.reqs[0].t_ms >= 950);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 1);
    assert_invariant(x);
}

static void test_traces_endpoint_uncompressed(void **state)
{
    fixture *x = *state;
    char url[128];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/custom/traces", x->srv.port);
    x->cfg.traces_endpoint = url;
    x->cfg.compression = SF_COMPRESSION_NONE;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_string_equal(x->srv.reqs[0].path, "/custom/traces");
    assert_string_equal(x->srv.reqs[0].content_encoding, "");
    assert_delivered(&x->srv.reqs[0]);
    assert_invariant(x);
}

/* An instance for logs (metrics) posts to <endpoint>/v1/logs, or to
 * logs_endpoint when set, never to traces_endpoint: the path upstream's
 * exporter uses per signal. Shown to fail with build_url ignoring the
 * instance's signal (the request went to /custom/traces). */
static void test_signal_paths(void **state)
{
    fixture *x = *state;
    char traces[128], metrics[128];

    snprintf(traces, sizeof(traces), "http://127.0.0.1:%u/custom/traces", x->srv.port);
    snprintf(metrics, sizeof(metrics), "http://127.0.0.1:%u/custom/metrics", x->srv.port);
    x->cfg.traces_endpoint = traces;
    x->cfg.compression = SF_COMPRESSION_NONE;
    x->comp.signal = SF_SIGNAL_LOGS;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_string_equal(x->srv.reqs[0].path, "/v1/logs");
    assert_invariant(x);
    x->comp.type->shutdown(&x->comp);
    x->comp.type->destroy(&x->comp);

    x->cfg.metrics_endpoint = metrics;
    x->comp.signal = SF_SIGNAL_METRICS;
    x->submitted = 0;
    memset(&x->comp.counters, 0, sizeof(x->comp.counters));
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 2);
    assert_string_equal(x->srv.reqs[1].path, "/custom/metrics");
    assert_invariant(x);
}

static void test_partial_success_counts_rejected(void **state)
{
    fixture *x = *state;

    x->srv.rejected = 1;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->comp.counters.queued_spans) == 0 && server_requests(&x->srv) == 1);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 2);
    assert_int_equal(failed(x, SF_REASON_PERMANENT_ERROR), 1);
    assert_invariant(x);
}

static void test_connection_refused_exhausts_retries(void **state)
{
    fixture *x = *state;

    server_stop(&x->srv);           /* nothing listens on the port now */
    pthread_mutex_init(&x->srv.mu, NULL);
    x->cfg.retry_on_failure.max_elapsed_time = 150;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(failed(x, SF_REASON_RETRIES_EXHAUSTED) == 3);
    assert_true(sf_counter_get(&x->comp.counters.retries) >= 1);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 0);
    SF_TEST_WAIT_FOR(atomic_load(&x->comp.counters.queued_spans) == 0);
    assert_invariant(x);
}

static void test_full_queue_passes_full_through(void **state)
{
    fixture *x = *state;

    x->cfg.sending_queue.queue_size = 1;
    assert_int_equal(x->comp.type->create(&x->comp, &x->cfg), SF_OK);
    x->created = true;              /* not started: the queue only fills */
    assert_int_equal(consume(x), SF_OK);
    assert_int_equal(consume(x), SF_FULL);
    assert_int_equal(sf_counter_get(&x->comp.counters.enqueue_failed_spans), 3);
    assert_int_equal(atomic_load(&x->comp.counters.queue_size), 1);
    assert_invariant(x);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(failed(x, SF_REASON_SHUTDOWN), 3);
    assert_int_equal(consume(x), SF_STOPPED);
    assert_int_equal(server_requests(&x->srv), 0);
    assert_invariant(x);
}

static void test_queue_disabled_is_synchronous(void **state)
{
    fixture *x = *state;

    x->cfg.sending_queue.enabled = false;
    x->srv.script[0] = 200;
    x->srv.script[1] = 503;
    x->srv.script[2] = 400;
    x->srv.n_script = 3;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    /* no waiting: the request is done when consume returns */
    assert_int_equal(server_requests(&x->srv), 1);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 3);
    assert_int_equal(x->comp.type->consume(&x->comp, &x->batch), SF_RETRY);
    assert_int_equal(x->comp.type->consume(&x->comp, &x->batch), SF_PERMANENT);
    assert_int_equal(server_requests(&x->srv), 3);
    assert_int_equal(failed(x, SF_REASON_RETRIES_EXHAUSTED), 3);
    assert_int_equal(failed(x, SF_REASON_PERMANENT_ERROR), 3);
    x->submitted += 6;      /* attempted, hence accounted */
    assert_invariant(x);
}

static void test_create_survives_allocation_failure(void **state)
{
    fixture *x = *state;

    assert_true(sf_torture_create(&x->comp, &x->cfg, true) >= 5);
}

static const char *load_exporter(const char *exporter_yaml)
{
    return sf_test_load_exporter("otlphttp/gw", exporter_yaml);
}

static void test_check_urls_and_headers(void **state)
{
    (void)state;
    assert_string_equal(load_exporter("    endpoint: https://gateway.internal:4318\n"), "");
    assert_string_equal(load_exporter("    endpoint: gateway.internal:4318\n"),
                        "x.yaml:7:15: exporters.otlphttp/gw.endpoint: 'gateway.internal:4318' "
                        "is not an http:// or https:// URL\n");
    assert_string_equal(load_exporter("    traces_endpoint: ftp://x/v1/traces\n"),
                        "x.yaml:7:22: exporters.otlphttp/gw.traces_endpoint: 'ftp://x/v1/traces' "
                        "is not an http:// or https:// URL\n");
    assert_string_equal(load_exporter("    traces_endpoint: http://\n"),
                        "x.yaml:7:22: exporters.otlphttp/gw.traces_endpoint: 'http://' "
                        "is not an http:// or https:// URL\n");
    assert_string_equal(load_exporter("    compression: none\n"),
                        "x.yaml:6:3: exporters.otlphttp/gw: 'endpoint' or 'traces_endpoint' "
                        "is required\n");
    /* The value is never quoted: it may be a bearer token. */
    assert_string_equal(load_exporter("    endpoint: http://gw:4318\n"
                                      "    headers:\n"
                                      "      Authorization: \"Bearer abc\\r\\nX-Evil: 1\"\n"),
                        "x.yaml:9:7: exporters.otlphttp/gw.headers: value of 'Authorization' "
                        "contains a line break\n");
    assert_string_equal(load_exporter("    endpoint: http://gw:4318\n"
                                      "    headers:\n"
                                      "      Content-Type: text/plain\n"),
                        "x.yaml:9:7: exporters.otlphttp/gw.headers: 'Content-Type' is set by "
                        "the exporter\n");
    assert_string_equal(load_exporter("    endpoint: http://gw:4318\n"
                                      "    headers:\n"
                                      "      \"Bad Name\": x\n"),
                        "x.yaml:9:7: exporters.otlphttp/gw.headers: 'Bad Name' is not a valid "
                        "header name\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gzip_delivery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_503_delivers_once_and_logs_no_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_400_is_permanent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_honours_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_traces_endpoint_uncompressed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_success_counts_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused_exhausts_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_passes_full_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_disabled_is_synchronous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_survives_allocation_failure, setup, teardown),
        cmocka_unit_test(test_check_urls_and_headers),
    };

    sf_log_set_level(SF_LOG_OFF);
    /* Components made by hand, outside a service: the core's start-up. */
    if (sf_process_init() != SF_OK)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
