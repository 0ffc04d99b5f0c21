/* tests/receivers/test_otlp_receiver_http.c: the `otlp` receiver's HTTP
 * server (receivers/otlp/receiver_http.c), run inside the real service and
 * called with libcurl on loopback: protobuf, OTLP/JSON and deflate bodies
 * accepted and counted; malformed bodies 400 with a google.rpc.Status in
 * the request's encoding; wrong path, method, content type and encoding
 * 404/405/415; a body past max_request_body_size 413; and every span
 * accounted for (received = accepted + refused). The same for logs and
 * metrics on /v1/logs and /v1/metrics, when pipelines of theirs list the
 * receiver: each signal's items counted under it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zlib.h>

#include "bench/sample_batch.h"
#include "google/rpc/status.pb-c.h"
#include "sf_log.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_http.h"
#include "tests/pipeline/sf_pb_build.h"

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

/* A valid one-span OTLP/JSON request. */
static const char ONE_SPAN_JSON[] =
    "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"
    "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
    "\"name\":\"s\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}]}]}]}";

/* The upstream receiver parses Content-Type with Go's mime.ParseMediaType
 * and answers 415 when it does not parse: so does this one. */
static void test_content_type_must_parse_as_a_media_type(void **state)
{
    fixture *f = *state;
    static const struct { const char *type; long want; } cases[] = {
        { JSON, 200 }, { "Application/JSON", 200 }, { JSON ";charset=utf-8", 200 },
        { JSON "; charset=\"utf-8\"", 200 }, { JSON " ; charset = utf-8", 200 },
        { JSON ";", 200 }, { JSON "; charset=utf-8;", 200 },
        { JSON "; charset=utf-8; CHARSET=utf-8", 200 }, { JSON "; x=\"a;b\\\"c\"", 200 },
        { "  " JSON "  ", 200 },
        { JSON " garbage", 415 }, { JSON ",text/plain", 415 }, { JSON "; charset", 415 },
        { JSON "; =utf-8", 415 }, { JSON ";;", 415 },
        { JSON "; charset=utf-8; charset=latin1", 415 }, { JSON "; a=\"unterminated", 415 },
        { JSON "/x", 415 }, { "application /json", 415 }, { "application/", 415 },
        { "/json", 415 }, { "application", 415 }, { JSON "; a=b c", 415 }, { JSON "; a=b;;", 415 },
        { JSON "; a=\xc3\xa9", 415 }, { JSON "x", 415 }, { "", 415 },
    };
    sf_test_http_answer a;
    sf_totals t;
    uint64_t taken = 0;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        a = sf_test_http_request(NULL, f->url, cases[i].type, NULL, ONE_SPAN_JSON,
                                 strlen(ONE_SPAN_JSON));
        if (a.code != cases[i].want)
            fail_msg("Content-Type '%s': %ld, want %ld", cases[i].type, a.code, cases[i].want);
        taken += a.code == 200;
        free(a.body);
    }
    sf_service_totals(f->svc, &t);
    assert_int_equal(t.accepted, taken);
    assert_int_equal(taken, 10);
}

/* JSON refused for what json-c's tree hides answers 400 in JSON (the
 * message escaped: it quotes "\ud800"), and its spans are counted. */
static void test_json_refusals_are_400_and_counted(void **state)
{
    fixture *f = *state;
    static const char dup[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"a\"},{\"name\":\"b\","
        "\"name\":\"c\"}]}]}]}";
    static const char lone[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"\\ud800\"}]}]}]}";
    sf_test_http_answer a;
    sf_totals t;

    a = sf_test_http_request(NULL, f->url, JSON, NULL, dup, strlen(dup));
    assert_int_equal(a.code, 400);
    assert_string_equal(a.body, "{\"code\":3,\"message\":\"member 'name' given twice (offset 68)\"}");
    free(a.body);
    a = sf_test_http_request(NULL, f->url, JSON, NULL, lone, strlen(lone));
    assert_int_equal(a.code, 400);
    assert_string_equal(a.body, "{\"code\":3,\"message\":\"lone utf-16 surrogate \\\\ud800 at "
                                "offset 52\"}");
    free(a.body);
    sf_service_totals(f->svc, &t);
    assert_int_equal(t.accepted, 0);
    assert_int_equal(t.refused[SF_REASON_MALFORMED], 2 + 1);
}

/* One HTTP/1.1 exchange on a raw socket: `head` (without the blank line)
 * and `body`; returns the status code and whether the answer said
 * Connection: close (e2e/decoder_refusals sees the close itself). */
static long raw_exchange(const char *base, const char *head, const char *body, bool *close_hdr)
{
    int port = atoi(strrchr(base, ':') + 1);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    char req[2048], resp[4096];
    size_t got = 0;
    long code = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int n;

    assert_true(fd >= 0);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    n = snprintf(req, sizeof(req), "%s\r\n\r\n%s", head, body);
    assert_true(n > 0 && (size_t)n < sizeof(req));
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    shutdown(fd, SHUT_WR);
    /* until the whole answer is in (the server may keep the connection) */
    while (got < sizeof(resp) - 1) {
        ssize_t r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
        const char *end, *cl;

        if (r <= 0)
            break;
        got += (size_t)r;
        resp[got] = '\0';
        end = strstr(resp, "\r\n\r\n");
        cl = strstr(resp, "\r\nContent-Length: ");
        if (end != NULL && cl != NULL && cl < end
            && got >= (size_t)(end + 4 - resp) + strtoul(cl + 18, NULL, 10))
            break;
    }
    resp[got] = '\0';
    close(fd);
    sscanf(resp, "HTTP/1.1 %ld", &code);
    *close_hdr = strstr(resp, "\r\nConnection: close\r\n") != NULL;
    return code;
}

/* Header lines two readers could read two ways: refused, never read as
 * libmicrohttpd's first-line lookup would have it. */
static void test_ambiguous_framing_is_refused(void **state)
{
    fixture *f = *state;
    char head[512];
    bool closed;
    sf_totals t;
    size_t n = strlen(ONE_SPAN_JSON);
    char chunked[1024];

    snprintf(chunked, sizeof(chunked), "%zx\r\n%s\r\n0\r\n\r\n", n, ONE_SPAN_JSON);
    /* control: the same body, chunked alone, and with a Content-Length alone */
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nTransfer-Encoding: chunked");
    assert_int_equal(raw_exchange(f->base, head, chunked, &closed), 200);
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nContent-Length: %zu\r\nContent-Encoding: identity", n);
    assert_int_equal(raw_exchange(f->base, head, ONE_SPAN_JSON, &closed), 200);

    /* RFC 9112 §6.3: both framings; answered, and the connection closed */
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked");
    assert_int_equal(raw_exchange(f->base, head, chunked, &closed), 400);
    assert_true(closed);
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nTransfer-Encoding: chunked\r\nContent-Length: %zu", n);
    assert_int_equal(raw_exchange(f->base, head, chunked, &closed), 400);
    assert_true(closed);
    /* two lengths that differ */
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nContent-Length: %zu\r\nContent-Length: 5", n);
    assert_int_equal(raw_exchange(f->base, head, ONE_SPAN_JSON, &closed), 400);
    /* two Content-Encoding lines are stacked codings: 415, even when both say identity */
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nContent-Length: %zu\r\nContent-Encoding: identity\r\n"
             "Content-Encoding: identity", n);
    assert_int_equal(raw_exchange(f->base, head, ONE_SPAN_JSON, &closed), 415);
    /* two Content-Type lines are no media type: 415 */
    snprintf(head, sizeof(head), "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
             JSON "\r\nContent-Length: %zu\r\nContent-Type: " JSON, n);
    assert_int_equal(raw_exchange(f->base, head, ONE_SPAN_JSON, &closed), 415);

    sf_service_totals(f->svc, &t);
    assert_int_equal(t.accepted, 2);
}

/* ---- logs and metrics ---------------------------------------------------- */

/* The receiver in traces, logs and metrics pipelines. */
static int setup_signals(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char yaml[1024];
    int port = sf_test_free_port();

    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {http: {endpoint: '127.0.0.1:%d', "
             "max_request_body_size: 64KiB}}}}\n"
             "exporters: {debug: {verbosity: basic}}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines:\n"
             "    traces: {receivers: [otlp], exporters: [debug]}\n"
             "    logs: {receivers: [otlp], exporters: [debug]}\n"
             "    metrics: {receivers: [otlp], exporters: [debug]}\n", port);
    f->svc = sf_test_service_start("h.yaml", yaml, &f->cfg);
    snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%d", port);
    snprintf(f->url, sizeof(f->url), "%s/v1/logs", f->base);
    *state = f;
    return 0;
}

/* An ExportLogsServiceRequest of `n` log records with `pad` bytes of body
 * each (pad < 2048). */
static void logs_request(pb *b, int n, size_t pad)
{
    static char text[2048];

    memset(text, 'x', pad);
    text[pad] = '\0';
    pb_init(b);
    pb_open(b, 1);
    pb_open(b, 2);
    for (int i = 0; i < n; i++) {
        pb_open(b, 2);
        pb_uint(b, 2, 9);
        pb_open(b, 5);
        pb_str(b, 1, text);
        pb_closen(b, 2);
    }
    pb_closen(b, 2);
}

/* Logs: accepted (protobuf, deflate), a body past the limit refused 413
 * with its log records counted as they streamed past, a malformed one 400
 * naming the logs request; traces' counts untouched. Metrics likewise
 * accepted. */
static void test_logs_and_metrics_accepted_and_refused_per_signal(void **state)
{
    fixture *f = *state;
    static pb b;
    static uint8_t big[3 * sizeof(b.d)];
    char url[128];
    uLongf zlen;
    uint8_t *z;
    sf_test_http_answer a;
    sf_totals t, tr;

    logs_request(&b, 4, 10);
    a = sf_test_http_request(NULL, f->url, PROTO, NULL, b.d, b.n);
    assert_int_equal(a.code, 200);
    free(a.body);
    zlen = compressBound(b.n);
    z = malloc(zlen);
    assert_int_equal(compress(z, &zlen, b.d, b.n), Z_OK);
    a = sf_test_http_request(NULL, f->url, PROTO, "deflate", z, zlen);
    assert_int_equal(a.code, 200);
    free(a.body);
    free(z);

    /* ~30 KB three times over (one request: repeated fields merge): past
     * 64 KiB, 45 log records */
    logs_request(&b, 15, 2000);
    for (int i = 0; i < 3; i++)
        memcpy(big + (size_t)i * b.n, b.d, b.n);
    a = sf_test_http_request(NULL, f->url, PROTO, NULL, big, 3 * b.n);
    assert_int_equal(a.code, 413);
    free(a.body);

    a = sf_test_http_request(NULL, f->url, PROTO, NULL, "\x0a\x05\x12", 3);
    assert_int_equal(a.code, 400);
    assert_int_equal(rpc_code(&a), 3);
    free(a.body);

    sf_service_totals_signal(f->svc, SF_SIGNAL_LOGS, &t);
    assert_int_equal(t.accepted, 8);
    assert_int_equal(t.refused[SF_REASON_TOO_LARGE], 45);
    assert_int_equal(t.refused[SF_REASON_MALFORMED], 0);    /* it had no record */
    sf_service_totals(f->svc, &tr);
    assert_int_equal(tr.accepted, 0);
    assert_int_equal(refused(&tr), 0);

    snprintf(url, sizeof(url), "%s/v1/metrics", f->base);
    pb_init(&b);
    pb_open(&b, 1);
    pb_open(&b, 2);
    pb_open(&b, 2);
    pb_str(&b, 1, "m");
    pb_open(&b, 5);
    for (int i = 0; i < 3; i++) {
        pb_open(&b, 1);
        pb_fix64(&b, 6, (uint64_t)i);
        pb_close(&b);
    }
    pb_closen(&b, 4);
    a = sf_test_http_request(NULL, url, PROTO, NULL, b.d, b.n);
    assert_int_equal(a.code, 200);
    free(a.body);
    sf_service_totals_signal(f->svc, SF_SIGNAL_METRICS, &t);
    assert_int_equal(t.accepted, 3);
    assert_int_equal(refused(&t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accepts_protobuf_json_and_deflate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_is_400_in_the_request_encoding, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wrong_path_method_type_encoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large_is_413_and_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_content_type_must_parse_as_a_media_type, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_json_refusals_are_400_and_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_framing_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_logs_and_metrics_accepted_and_refused_per_signal,
                                        setup_signals, teardown),
    };
    int rc;

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
