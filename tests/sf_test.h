/* tests/sf_test.h: helpers shared by the cmocka tests (header-only; include
 * it after <cmocka.h>). */
#ifndef SF_TEST_H
#define SF_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/socket.h>

#include "sf_arena.h"
#include "sf_request.h"
#include "sf_config.h"
#include "sf_metrics.h"
#include "sf_service.h"

/* An hour in ms: a backoff or timeout a test sets so long that only the
 * behaviour under test (a cut, a drain) can end it before the test ends; the
 * test then asserts that it ended in less than half of it, a bound that is
 * the setting itself, not a guess at the machine's speed. */
#define SF_TEST_HOUR_MS ((int64_t)3600 * 1000)

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
 * closed), for a server whose config names its port. A port computed from
 * the pid instead can fall in the kernel's ephemeral range (32768-60999)
 * and be held by some other test's client connection when the server binds
 * it: sf_service_start then fails with SF_IO. */
static inline int sf_test_free_port(void)
{
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
    socklen_t alen = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &alen), 0);
    close(fd);
    return ntohs(addr.sin_port);
}

/* Load `yaml` as the file `name` and return every diagnostic, one per line
 * ("" when the config is clean), in a static buffer. */
static inline const char *sf_test_config_messages(const char *name, const char *yaml)
{
    static char out[8192];
    sf_diag *d = sf_diag_create(name);
    sf_config *cfg = NULL;
    size_t n = 0;

    sf_config_load_string(name, yaml, strlen(yaml), d, &cfg);
    out[0] = '\0';
    for (size_t i = 0; i < sf_diag_count(d) && n < sizeof(out); i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n", sf_diag_message(d, i));
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    return out;
}

/* The diagnostics of "x.yaml": an otlp receiver and exporter `id` whose
 * settings are `exporter_yaml` (indented by 4), in one traces pipeline. The
 * exporter's key is on line 6. */
static inline const char *sf_test_load_exporter(const char *id, const char *exporter_yaml)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
             "exporters:\n  %s:\n%s"
             "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n"
             "      exporters: [%s]\n", id, exporter_yaml, id);
    return sf_test_config_messages("x.yaml", yaml);
}

/* Load `yaml` (as the file `name`), build the service and start it: the
 * real collector in this process. The caller stops it with
 * sf_test_service_stop(). */
static inline sf_service *sf_test_service_start(const char *name, const char *yaml,
                                                sf_config **cfg)
{
    sf_diag *d = sf_diag_create(name);
    sf_service *svc = NULL;
    sf_status st;

    assert_int_equal(sf_config_load_string(name, yaml, strlen(yaml), d, cfg), SF_OK);
    assert_int_equal(sf_service_create(*cfg, d, &svc), SF_OK);
    sf_diag_destroy(d);
    st = sf_service_start(svc);
    if (st != SF_OK)
        fail_msg("sf_service_start: %s (the log says why unless the config turns it off)",
                 sf_status_name(st));
    return svc;
}

static inline void sf_test_service_stop(sf_service *svc, sf_config *cfg)
{
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
}

/* Poll up to 10 s for a condition that should hold in milliseconds (a
 * bound on a hang, not a timing assertion). */
#define SF_TEST_WAIT_FOR(cond)                                              \
    do {                                                                    \
        for (int w_ = 0; w_ < 5000 && !(cond); w_++)                        \
            usleep(2000);                                                   \
        assert_true(cond);                                                  \
    } while (0)

/* The sender's accounting: every span submitted is sent, failed (for any
 * reason) or still queued. */
static inline void sf_test_assert_accounted(sf_counters *k, uint64_t submitted)
{
    int64_t queued = atomic_load(&k->queued_spans);
    uint64_t failed = 0;

    for (int r = 0; r < SF_REASON_COUNT; r++)
        failed += sf_counter_get(&k->send_failed_spans[r]);
    assert_true(queued >= 0);
    assert_int_equal(submitted, sf_counter_get(&k->sent_spans) + failed + (uint64_t)queued);
}

/* A packed request of `spans` spans named `name` in one resource and scope,
 * span i's id the little-endian uint32 first_id + i (then zeros), all in
 * the trace {trace_byte, 0, ...}: malloc'd (the caller frees it), its
 * length in *len. Tests that count spans by id read the first 4 bytes. */
static inline uint8_t *sf_test_pack_spans(size_t spans, uint32_t first_id, const char *name,
                                          uint8_t trace_byte, size_t *len)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_resource_spans *rsp = &rs;
    sf_otlp_scope_spans *ssp = &ss;
    size_t n = spans ? spans : 1;
    sf_otlp_span *sp = calloc(n, sizeof(*sp));
    sf_otlp_span **spp = calloc(n, sizeof(*spp));
    uint8_t (*ids)[8] = calloc(n, 8);
    uint8_t trace_id[16] = { trace_byte };
    uint8_t *out;

    assert_non_null(sp);
    assert_non_null(spp);
    assert_non_null(ids);
    for (size_t i = 0; i < spans; i++) {
        uint32_t id = first_id + (uint32_t)i;

        opentelemetry__proto__trace__v1__span__init(&sp[i]);
        memcpy(ids[i], &id, sizeof(id));
        sp[i].span_id = (ProtobufCBinaryData){ .len = 8, .data = ids[i] };
        sp[i].trace_id = (ProtobufCBinaryData){ .len = 16, .data = trace_id };
        sp[i].name = (char *)name;
        spp[i] = &sp[i];
    }
    ss.n_spans = spans;
    ss.spans = spp;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    *len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    out = malloc(*len ? *len : 1);
    assert_non_null(out);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, out);
    free(ids);
    free(spp);
    free(sp);
    return out;
}

/* Span ids of sf_test_three_span_request(), for checking what arrived. */
static const uint8_t sf_test_span_ids[3][8] = {
    { 1, 1, 1, 1, 1, 1, 1, 1 }, { 2, 2, 2, 2, 2, 2, 2, 2 }, { 0xfe, 3, 3, 3, 3, 3, 3, 0x01 },
};

/* A 3-span request packed by protobuf-c and decoded into a new arena
 * (*arena, the caller destroys it), as a receiver would hand it on. */
static inline void sf_test_three_span_request(sf_arena **arena, sf_request *batch)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_span spans[3], *sp[3];
    sf_otlp_resource_spans *rsp = &rs;
    sf_otlp_scope_spans *ssp = &ss;
    uint8_t trace_id[16] = { 0xab, 0xcd };
    uint8_t buf[1024];
    size_t len;

    for (int i = 0; i < 3; i++) {
        sf_otlp_span init = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;

        spans[i] = init;
        spans[i].trace_id = (ProtobufCBinaryData){ 16, trace_id };
        spans[i].span_id = (ProtobufCBinaryData){ 8, (uint8_t *)sf_test_span_ids[i] };
        spans[i].name = "llm.generate";
        spans[i].start_time_unix_nano = 1000 + (uint64_t)i;
        spans[i].end_time_unix_nano = 2000 + (uint64_t)i;
        sp[i] = &spans[i];
    }
    ss.n_spans = 3;
    ss.spans = sp;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    assert_true(len <= sizeof(buf));
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    *arena = sf_arena_create(4096, 0);
    assert_non_null(*arena);
    assert_int_equal(sf_request_decode(batch, *arena, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    assert_int_equal(batch->spans, 3);
}

#endif
