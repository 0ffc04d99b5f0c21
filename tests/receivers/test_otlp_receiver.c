/* tests/receivers/test_otlp_receiver.c: the `otlp` receiver's gRPC server,
 * run inside the real service (config -> sf_service_create -> start) and
 * called with the gRPC core client: the status for every kind of request,
 * the UNIMPLEMENTED catch-all, refusal when the exporter's queue is full,
 * the spans of calls refused for memory counted (gzip'd or not), and
 * a shutdown that completes although a client opened a call and never sent
 * its message; and that what is exported is the codec's output for exactly
 * the bytes sent, whether the message arrived in one slice (read in place)
 * or in many (copied into the worker's buffer), and when the codec wrote it
 * into a pooled buffer an earlier call had used (sf_buf_take). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>
#include <grpc/compression.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "bench/sample_batch.h"
#include "sf_request.h"
#include "sf_log.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_test_grpc.h"

#define EXPORT "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

typedef struct fixture {
    int port;
    char dir[64];
    sf_config *cfg;
    sf_service *svc;
    sf_test_grpc_client g;
} fixture;

/* Start the service on a config whose one exporter is `id` with `settings`. */
static void start(fixture *f, const char *id, const char *settings)
{
    char yaml[2048];

    f->port = sf_test_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: {endpoint: '127.0.0.1:%d', "
             "max_recv_msg_size_mib: 1}}, max_value_depth: 8}}\n"
             "processors:\n  transform/allowlist:\n    trace_statements:\n"
             "      - keep_keys(span.attributes, [\"gen_ai.request.id\"])\n"
             "exporters:\n  %s:%s"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], processors: [transform/allowlist], "
             "exporters: [%s]}}\n",
             f->port, id, settings, id);
    f->svc = sf_test_service_start("r.yaml", yaml, &f->cfg);

    sf_test_grpc_connect(&f->g, f->port);
}

static void stop(fixture *f)
{
    sf_test_grpc_close(&f->g);
    sf_test_service_stop(f->svc, f->cfg);
}

/* One unary call with `data` as the message; returns the status. */
static grpc_status_code call(fixture *f, const char *method, const void *data, size_t len)
{
    return sf_test_grpc_call(f->g.ch, f->g.cq, method, data, len);
}

static grpc_status_code export_sample(fixture *f, size_t spans, uint64_t seed)
{
    size_t len = 0;
    uint8_t *data = sf_sample_request(spans, seed, &len);
    grpc_status_code st;

    assert_non_null(data);
    st = call(f, EXPORT, data, len);
    sf_free(data);
    return st;
}

/* n levels of ArrayValue nesting in one span attribute. */
static uint8_t *nested_request(unsigned n, size_t *len)
{
    size_t cap = 16 * (size_t)n + 256, pos = cap;
    uint8_t *buf = malloc(cap), *out;
    size_t inner = 0;

    /* Build from the inside out: AnyValue{array_value{values: AnyValue{...}}}. */
    buf[--pos] = 0x01;              /* innermost AnyValue: bool_value = true */
    buf[--pos] = 0x10;
    inner = 2;
    for (unsigned i = 0; i < n; i++) {
        /* ArrayValue: field 1 (AnyValue), then AnyValue: field 5 (ArrayValue) */
        for (int k = 0; k < 2; k++) {
            size_t l = inner;
            uint8_t v[10];
            int nv = 0;
            do {
                v[nv++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
                l >>= 7;
            } while (l);
            for (int j = nv - 1; j >= 0; j--)
                buf[--pos] = v[j];
            buf[--pos] = k == 0 ? 0x0a : 0x2a;
            inner += (size_t)nv + 1;
        }
    }
    /* KeyValue{key "k", value}, Span{attributes}, ScopeSpans, ResourceSpans, request */
    {
        static const uint8_t prefixes[] = { 0x12, 0x4a, 0x12, 0x12, 0x0a };
        for (size_t p = 0; p < sizeof(prefixes); p++) {
            size_t l = inner;
            uint8_t v[10];
            int nv = 0;
            do {
                v[nv++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
                l >>= 7;
            } while (l);
            for (int j = nv - 1; j >= 0; j--)
                buf[--pos] = v[j];
            buf[--pos] = prefixes[p];
            inner += (size_t)nv + 1;
            if (p == 0) {           /* the key, before the value */
                buf[--pos] = 'k';
                buf[--pos] = 0x01;
                buf[--pos] = 0x0a;
                inner += 3;
            }
        }
    }
    *len = inner;
    out = malloc(inner);
    memcpy(out, buf + pos, inner);
    free(buf);
    return out;
}

static void test_statuses(void **state)
{
    fixture f = { 0 };
    static const uint8_t garbage[] = { 0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01 };
    uint8_t *deep, *big;
    size_t len;

    (void)state;
    start(&f, "debug", " {verbosity: basic}\n");
    assert_int_equal(export_sample(&f, 64, 1), GRPC_STATUS_OK);
    assert_int_equal(call(&f, EXPORT, "", 0), GRPC_STATUS_OK);              /* empty request */
    assert_int_equal(call(&f, EXPORT, garbage, sizeof(garbage)), GRPC_STATUS_INVALID_ARGUMENT);
    deep = nested_request(8, &len);                                         /* at the cap */
    assert_int_equal(call(&f, EXPORT, deep, len), GRPC_STATUS_OK);
    free(deep);
    deep = nested_request(9, &len);                                         /* past it */
    assert_int_equal(call(&f, EXPORT, deep, len), GRPC_STATUS_INVALID_ARGUMENT);
    free(deep);
    deep = nested_request(5000, &len);          /* would overflow protobuf-c's stack */
    assert_int_equal(call(&f, EXPORT, deep, len), GRPC_STATUS_INVALID_ARGUMENT);
    free(deep);
    big = calloc(1, (2u << 20));
    assert_int_equal(call(&f, EXPORT, big, 2u << 20), GRPC_STATUS_RESOURCE_EXHAUSTED);
    free(big);
    assert_int_equal(call(&f, "/some.Other/Method", "x", 1), GRPC_STATUS_UNIMPLEMENTED);
    /* Still serving after all of that. */
    assert_int_equal(export_sample(&f, 8, 2), GRPC_STATUS_OK);
    stop(&f);
}

/* No processor, a file exporter writing length-prefixed protobuf: each
 * record must be sf_otlp_rewrite()'s canonical form of a request as sent. */
static void test_exported_bytes_small_and_large(void **state)
{
    fixture f = { 0 };
    char yaml[1024], path[96];
    /* ~1 KB, ~40 KB, ~900 KB, and ~880 KB into the buffer the third left */
    size_t lens[4] = { 0 }, spans[4] = { 1, 40, 900, 880 };
    uint8_t *req[4];
    FILE *fp;

    (void)state;
    snprintf(f.dir, sizeof(f.dir), "/tmp/sf_rx_XXXXXX");
    assert_non_null(mkdtemp(f.dir));
    snprintf(path, sizeof(path), "%s/out.pb", f.dir);
    f.port = sf_test_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: {endpoint: '127.0.0.1:%d', "
             "max_recv_msg_size_mib: 2}}, max_value_depth: 8}}\n"
             "exporters: {file: {path: '%s', format: proto}}\n"
             "service:\n  telemetry: {metrics: {level: none}}\n"
             "  pipelines: {traces: {receivers: [otlp], exporters: [file]}}\n", f.port, path);
    f.svc = sf_test_service_start("r.yaml", yaml, &f.cfg);
    sf_test_grpc_connect(&f.g, f.port);
    for (int i = 0; i < 4; i++) {
        req[i] = sf_sample_request_random(spans[i], 7 + (uint64_t)i, &lens[i]);
        assert_non_null(req[i]);
        assert_int_equal(call(&f, EXPORT, req[i], lens[i]), GRPC_STATUS_OK);
        /* The large output's buffer goes back to the pool once the file
         * is written (the workers take theirs from it). */
        for (int w = 0; i == 2 && sf_buf_pool_idle_bytes() < lens[2]; w++) {
            assert_true(w < 30000);            /* a stuck run's bound, not a speed */
            usleep(1000);
        }
    }
    assert_true(lens[2] > 512 * 1024);         /* gRPC hands this over in many slices */
    stop(&f);

    fp = fopen(path, "rb");
    assert_non_null(fp);
    for (int i = 0; i < 4; i++) {
        uint8_t hdr[4], *got;
        size_t n;
        sf_buf *want = NULL;

        assert_int_equal(fread(hdr, 1, 4, fp), 4);
        n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
        assert_int_equal(sf_otlp_rewrite(req[i], lens[i], 8, NULL, &want, NULL), SF_OK);
        assert_int_equal(want->spans, spans[i]);
        assert_int_equal(n, want->len);
        got = malloc(n);
        assert_non_null(got);
        assert_int_equal(fread(got, 1, n, fp), n);
        assert_memory_equal(got, want->data, n);
        free(got);
        sf_buf_unref(want);
        sf_free(req[i]);
    }
    assert_int_equal(fgetc(fp), EOF);
    fclose(fp);
    unlink(path);
    rmdir(f.dir);
}

/* The exporter's queue holds one batch and the gateway is down: the next
 * batches are refused with UNAVAILABLE (retryable), not queued. Merging in
 * the queue is off: with it, what arrives while the first export is in
 * flight goes into the next request and frees the queue, as many batches
 * as the in-flight send lasts (1 loaded run in 10 of tools/repeat.sh saw
 * fewer than 4 refusals). */
static void test_queue_full_is_unavailable(void **state)
{
    fixture f = { 0 };
    int unavailable = 0;

    (void)state;
    start(&f, "otlphttp", "\n    endpoint: http://127.0.0.1:1\n"
              "    sending_queue: {queue_size: 1, num_consumers: 1, batch: {enabled: false}}\n"
              "    retry_on_failure: {initial_interval: 10s, max_elapsed_time: 60s}\n");
    for (int i = 0; i < 6; i++) {
        grpc_status_code st = export_sample(&f, 4, (uint64_t)i);
        assert_true(st == GRPC_STATUS_OK || st == GRPC_STATUS_UNAVAILABLE);
        unavailable += st == GRPC_STATUS_UNAVAILABLE;
    }
    /* At most one batch in the consumer's hands and one in the queue. */
    assert_true(unavailable >= 4);
    stop(&f);
}

/* Memory short: a call is refused UNAVAILABLE and its spans are still
 * counted over its message's bytes, inflated when it came gzip'd
 * (sf_count_inflate): a small message counted whole when refused, a large
 * one from the piece that found memory short on. */
static void test_memory_refused_compressed_counted(void **state)
{
    fixture f = { 0 };
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg gzip = { .type = GRPC_ARG_INTEGER,
                      .key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
                      .value.integer = GRPC_COMPRESS_GZIP };
    grpc_channel_args args = { .num_args = 1, .args = &gzip };
    static const size_t spans[] = { 5, 700 };
    char target[64];
    grpc_channel *gz;
    sf_totals t;

    (void)state;
    start(&f, "debug", " {verbosity: basic}\n");
    snprintf(target, sizeof(target), "127.0.0.1:%d", f.port);
    gz = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    assert_int_equal(export_sample(&f, 3, 1), GRPC_STATUS_OK);
    sf_alloc_set_external_pressure(1);
    for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        size_t len = 0;
        uint8_t *data = sf_sample_request(spans[i], 7 + i, &len);

        assert_int_equal(sf_test_grpc_call(gz, f.g.cq, EXPORT, data, len),
                         GRPC_STATUS_UNAVAILABLE);
        assert_int_equal(call(&f, EXPORT, data, len), GRPC_STATUS_UNAVAILABLE);
        sf_free(data);
    }
    sf_alloc_set_external_pressure(0);
    sf_service_totals(f.svc, &t);
    assert_int_equal(t.accepted, 3);
    assert_int_equal(t.refused[SF_REASON_MEMORY_LIMIT], 2 * (5 + 700));
    assert_int_equal(sf_reasons_sum(t.refused), 2 * (5 + 700));
    grpc_channel_destroy(gz);
    stop(&f);
}

/* A client that opens a call and never sends its message must not hold
 * shutdown forever: after the grace period the server cancels it. */
static void test_shutdown_with_stalled_call(void **state)
{
    fixture f = { 0 };
    grpc_slice m = grpc_slice_from_static_string(EXPORT);
    grpc_op op;
    grpc_call *c;
    grpc_status_code status;
    grpc_slice details;
    grpc_metadata_array trail;
    grpc_op rop;

    (void)state;
    start(&f, "debug", " {verbosity: basic}\n");
    c = grpc_channel_create_call(f.g.ch, NULL, GRPC_PROPAGATE_DEFAULTS, f.g.cq, m, NULL,
                                 gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    assert_int_equal(grpc_call_start_batch(c, &op, 1, (void *)1, NULL), GRPC_CALL_OK);
    grpc_completion_queue_pluck(f.g.cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_metadata_array_init(&trail);
    memset(&rop, 0, sizeof(rop));
    rop.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    rop.data.recv_status_on_client.trailing_metadata = &trail;
    rop.data.recv_status_on_client.status = &status;
    rop.data.recv_status_on_client.status_details = &details;
    assert_int_equal(grpc_call_start_batch(c, &rop, 1, (void *)2, NULL), GRPC_CALL_OK);
    usleep(200 * 1000);

    /* Returns (after the grace period) although the call is still open;
     * without the cancel after the grace period this would hang until the
     * test runner's timeout. */
    sf_service_shutdown(f.svc);
    grpc_call_cancel(c, NULL);
    grpc_completion_queue_pluck(f.g.cq, (void *)2, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    assert_int_not_equal(status, GRPC_STATUS_OK);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&trail);
    grpc_call_unref(c);
    stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_exported_bytes_small_and_large),
        cmocka_unit_test(test_queue_full_is_unavailable),
        cmocka_unit_test(test_memory_refused_compressed_counted),
        cmocka_unit_test(test_shutdown_with_stalled_call),
    };
    int rc;

    sf_log_set_level(getenv("SF_TEST_LOG") ? SF_LOG_DEBUG : SF_LOG_OFF);
    grpc_init();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    grpc_shutdown();
    return rc;
}
