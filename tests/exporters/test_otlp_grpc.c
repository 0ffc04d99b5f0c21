/* tests/exporters/test_otlp_grpc.c: the otlp (gRPC) exporter against a real gRPC
 * server (gRPC core on 127.0.0.1, port chosen by the kernel, decompression
 * off so the test sees what went over the wire) that records every Export
 * call, decodes it with protobuf-c and answers from a script: delivery with
 * metadata and gzip, UNAVAILABLE then OK, INVALID_ARGUMENT, RetryInfo,
 * partial success, no listener, cancel at shutdown, the synchronous mode,
 * and the config checks through the real loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_test.h"
#include "tests/sf_torture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "exporters/otlp_grpc/otlp_grpc.h"
#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "internal/sf_core.h"

#define SECRET "sekret-token-42"
#define MAX_REQS 32
#define SLOTS 4
#define EXPORT_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

extern const sf_component_type sf_otlpgrpc_exporter_type;

/* cmocka's asserts must not run on the server thread (they longjmp). */
#define SERVER_CHECK(cond)                                                  \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "test server: %s failed (line %d)\n", #cond, __LINE__); \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* ---- the server ---------------------------------------------------------- */

typedef struct reply {
    grpc_status_code code;
    const char *details;
    int64_t retry_delay_ms;     /* >= 0: send a RetryInfo with this delay */
    bool hang;                  /* never answer (until the client gives up) */
} reply;

typedef struct request {
    int decoded;                /* payload read and unpacked */
    int compression;            /* grpc_compression_algorithm as received */
    size_t spans;
    uint8_t span_ids[8][8];
    char api_key[64];           /* "x-api-key" metadata */
    char tenant[64];            /* "x-tenant" metadata */
    char user_agent[128];
} request;

typedef struct server server;

typedef struct slot {
    server *s;
    int state;                  /* 0 waiting for a call, 1 replying, 2 hanging */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    grpc_byte_buffer *out;
    grpc_slice details;
    grpc_metadata trailer;
    uint8_t trailer_buf[128];
    int cancelled;
} slot;

struct server {
    grpc_server *srv;
    grpc_completion_queue *cq;
    void *method;
    pthread_t thread;
    int port;
    bool stopping;              /* under mu */
    int shutdown_tag;
    pthread_mutex_t mu;
    int n;
    request reqs[MAX_REQS];
    reply script[MAX_REQS];     /* answer to call i; OK after n_script */
    int n_script;
    int64_t rejected;           /* partial_success.rejected_spans in OKs */
    int cancelled;              /* hanging calls the client cancelled */
    slot slots[SLOTS];
};

static void md_copy(const grpc_metadata_array *md, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < md->count; i++) {
        if (grpc_slice_str_cmp(md->metadata[i].key, key) == 0) {
            size_t len = GRPC_SLICE_LENGTH(md->metadata[i].value);

            if (len >= cap)
                len = cap - 1;
            memcpy(out, GRPC_SLICE_START_PTR(md->metadata[i].value), len);
            out[len] = '\0';
        }
    }
}

static void record(server *s, slot *sl, request *r)
{
    static uint8_t wire[65536], plain[65536];  /* one server thread */
    size_t wire_len = 0, plain_len, body_len = 0;
    const uint8_t *body = wire;
    sf_otlp_request *req;
    int rc;

    memset(r, 0, sizeof(*r));
    md_copy(&sl->md, "x-api-key", r->api_key, sizeof(r->api_key));
    md_copy(&sl->md, "x-tenant", r->tenant, sizeof(r->tenant));
    md_copy(&sl->md, "user-agent", r->user_agent, sizeof(r->user_agent));
    (void)s;
    if (sl->payload == NULL)
        return;
    SERVER_CHECK(sl->payload->type == GRPC_BB_RAW);
    r->compression = sl->payload->data.raw.compression;
    /* Joined as they came over the wire (grpc_byte_buffer_reader would
     * inflate a compressed message, and so hide whether it was). */
    for (size_t i = 0; i < sl->payload->data.raw.slice_buffer.count; i++) {
        grpc_slice sc = sl->payload->data.raw.slice_buffer.slices[i];

        SERVER_CHECK(wire_len + GRPC_SLICE_LENGTH(sc) <= sizeof(wire));
        memcpy(wire + wire_len, GRPC_SLICE_START_PTR(sc), GRPC_SLICE_LENGTH(sc));
        wire_len += GRPC_SLICE_LENGTH(sc);
    }
    if (r->compression == GRPC_COMPRESS_GZIP) {
        z_stream z;

        memset(&z, 0, sizeof(z));
        SERVER_CHECK(inflateInit2(&z, 15 + 16) == Z_OK);
        z.next_in = wire;
        z.avail_in = (uInt)wire_len;
        z.next_out = plain;
        z.avail_out = sizeof(plain);
        rc = inflate(&z, Z_FINISH);
        plain_len = z.total_out;
        inflateEnd(&z);
        if (rc != Z_STREAM_END)
            return;
        body = plain;
        body_len = plain_len;
    } else if (r->compression == GRPC_COMPRESS_NONE) {
        body_len = wire_len;
    } else {
        return;
    }
    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, body_len, body);
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

static void slot_clear(slot *sl)
{
    if (sl->call != NULL)
        grpc_call_unref(sl->call);
    sl->call = NULL;
    grpc_metadata_array_destroy(&sl->md);
    if (sl->payload != NULL)
        grpc_byte_buffer_destroy(sl->payload);
    sl->payload = NULL;
    if (sl->out != NULL)
        grpc_byte_buffer_destroy(sl->out);
    sl->out = NULL;
    grpc_slice_unref(sl->details);
    sl->details = grpc_empty_slice();
    sl->state = 0;
}

static void slot_post(slot *sl)
{
    server *s = sl->s;

    pthread_mutex_lock(&s->mu);
    if (!s->stopping) {
        grpc_metadata_array_init(&sl->md);
        SERVER_CHECK(grpc_server_request_registered_call(s->srv, s->method, &sl->call,
                                                         &sl->deadline, &sl->md, &sl->payload,
                                                         s->cq, s->cq, sl) == GRPC_CALL_OK);
    }
    pthread_mutex_unlock(&s->mu);
}

/* The status details trailer: a google.rpc.Status holding a RetryInfo. */
static size_t pack_retry_info(int64_t delay_ms, uint8_t *out, size_t cap)
{
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Rpc__RetryInfo ri = GOOGLE__RPC__RETRY_INFO__INIT;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT, *anyp = &any;
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    uint8_t ri_buf[32];

    d.seconds = delay_ms / 1000;
    d.nanos = (int32_t)(delay_ms % 1000) * 1000000;
    ri.retry_delay = &d;
    any.type_url = "type.googleapis.com/google.rpc.RetryInfo";
    any.value.len = google__rpc__retry_info__pack(&ri, ri_buf);
    any.value.data = ri_buf;
    st.code = GRPC_STATUS_RESOURCE_EXHAUSTED;
    st.message = "slow down";
    st.n_details = 1;
    st.details = &anyp;
    SERVER_CHECK(google__rpc__status__get_packed_size(&st) <= cap);
    return google__rpc__status__pack(&st, out);
}

static void answer(server *s, slot *sl)
{
    grpc_op ops[4];
    size_t n = 0;
    reply rep = { .code = GRPC_STATUS_OK, .retry_delay_ms = -1 };
    int64_t rejected;
    int i;

    pthread_mutex_lock(&s->mu);
    i = s->n++;
    record(s, sl, &s->reqs[i < MAX_REQS ? i : MAX_REQS - 1]);
    if (i < s->n_script)
        rep = s->script[i];
    rejected = s->rejected;
    pthread_mutex_unlock(&s->mu);

    memset(ops, 0, sizeof(ops));
    if (rep.hang) {
        /* Only learn when the client gives up. */
        ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[0].data.recv_close_on_server.cancelled = &sl->cancelled;
        sl->state = 2;
        SERVER_CHECK(grpc_call_start_batch(sl->call, ops, 1, sl, NULL) == GRPC_CALL_OK);
        return;
    }
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (rep.code == GRPC_STATUS_OK) {
        sf_otlp_response out = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
        Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps =
            OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
        uint8_t buf[128];
        grpc_slice body;

        if (rejected > 0) {
            ps.rejected_spans = rejected;
            ps.error_message = "attribute value too long";
            out.partial_success = &ps;
        }
        body = grpc_slice_from_copied_buffer(
            (const char *)buf,
            opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(&out, buf));
        sl->out = grpc_raw_byte_buffer_create(&body, 1);
        grpc_slice_unref(body);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = sl->out;
    }
    sl->details = grpc_slice_from_copied_string(rep.details ? rep.details : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = rep.code;
    ops[n].data.send_status_from_server.status_details = &sl->details;
    if (rep.retry_delay_ms >= 0) {
        size_t len = pack_retry_info(rep.retry_delay_ms, sl->trailer_buf, sizeof(sl->trailer_buf));

        sl->trailer.key = grpc_slice_from_static_string("grpc-status-details-bin");
        sl->trailer.value = grpc_slice_from_static_buffer(sl->trailer_buf, len);
        ops[n].data.send_status_from_server.trailing_metadata_count = 1;
        ops[n].data.send_status_from_server.trailing_metadata = &sl->trailer;
    }
    n++;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &sl->cancelled;
    sl->state = 1;
    SERVER_CHECK(grpc_call_start_batch(sl->call, ops, n, sl, NULL) == GRPC_CALL_OK);
}

static void *server_main(void *arg)
{
    server *s = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                   NULL);
        slot *sl = ev.tag;

        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.tag == &s->shutdown_tag) {
            grpc_completion_queue_shutdown(s->cq);
            continue;
        }
        if (sl->state == 2) {
            pthread_mutex_lock(&s->mu);
            s->cancelled += sl->cancelled;
            pthread_mutex_unlock(&s->mu);
        }
        if (sl->state != 0 || !ev.success) {    /* answered, or server stopping */
            slot_clear(sl);
            slot_post(sl);
            continue;
        }
        answer(s, sl);
    }
    return NULL;
}

/* A whole file as a string (test fixtures). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, 65535, f);
    fclose(f);
    assert_true(n > 0);
    return buf;
}

/* `tls`: serve TLS with tests/exporters/tls/server.{pem,key} (a self-signed
 * certificate for 127.0.0.1) and require a client certificate it signed. */
static void server_start(server *s, bool tls)
{
    grpc_arg args[2];
    grpc_channel_args cargs = { .num_args = 2, .args = args };
    grpc_server_credentials *creds;
    char addr[] = "127.0.0.1:0";

    pthread_mutex_init(&s->mu, NULL);
    grpc_init();
    memset(args, 0, sizeof(args));
    /* see the bytes as sent: a gzip message stays compressed and says so */
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
    args[0].value.integer = 0;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[1].value.integer = 0;
    s->srv = grpc_server_create(&cargs, NULL);
    s->method = grpc_server_register_method(s->srv, EXPORT_METHOD, NULL,
                                            GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->srv, s->cq, NULL);
    if (tls) {
        char *cert = slurp(SF_SOURCE_DIR "/tests/exporters/tls/server.pem");
        char *key = slurp(SF_SOURCE_DIR "/tests/exporters/tls/server.key");
        grpc_ssl_pem_key_cert_pair pair = { .private_key = key, .cert_chain = cert };

        creds = grpc_ssl_server_credentials_create_ex(
            cert, &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
        free(cert);
        free(key);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    assert_non_null(creds);
    s->port = grpc_server_add_http2_port(s->srv, addr, creds);
    grpc_server_credentials_release(creds);
    assert_true(s->port > 0);
    grpc_server_start(s->srv);
    for (int i = 0; i < SLOTS; i++) {
        s->slots[i].s = s;
        s->slots[i].details = grpc_empty_slice();
        slot_post(&s->slots[i]);
    }
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

/* Stop listening; the recorded requests stay readable. */
static void server_stop(server *s)
{
    if (s->srv == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    grpc_server_shutdown_and_notify(s->srv, s->cq, &s->shutdown_tag);
    grpc_server_cancel_all_calls(s->srv);
    pthread_join(s->thread, NULL);
    for (int i = 0; i < SLOTS; i++)
        if (s->slots[i].call != NULL)
            slot_clear(&s->slots[i]);
    grpc_server_destroy(s->srv);
    s->srv = NULL;
    grpc_completion_queue_destroy(s->cq);
    grpc_shutdown();
}

static int server_requests(server *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static int server_cancelled(server *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->cancelled;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- the exporter under test ------------------------------------------- */

typedef struct fixture {
    server srv;
    char endpoint[64];
    char *hkeys[2], *hvalues[2];
    sf_otlpgrpc_config cfg;
    struct sf_component comp;
    bool created;
    sf_arena *arena;
    sf_request batch;
    uint64_t submitted;
    size_t mem_before;
} fixture;

/* A 3-span request decoded into an arena, as a receiver would hand it on. */
static void make_batch(fixture *x)
{
    sf_test_three_span_request(&x->arena, &x->batch);
}

static int setup_common(void **state, bool tls)
{
    fixture *x = calloc(1, sizeof(*x));

    server_start(&x->srv, tls);
    snprintf(x->endpoint, sizeof(x->endpoint), "127.0.0.1:%d", x->srv.port);
    x->hkeys[0] = "x-api-key";
    x->hvalues[0] = SECRET;
    x->hkeys[1] = "x-tenant";
    x->hvalues[1] = "cvm-7";
    x->cfg = (sf_otlpgrpc_config){
        .endpoint = x->endpoint,
        .tls = { .present = true, .insecure = true },
        .headers = { .n = 2, .keys = x->hkeys, .values = x->hvalues },
        .compression = SF_COMPRESSION_GZIP,
        .timeout = 5000,
        .sending_queue = { .present = true, .enabled = true, .queue_size = 10,
                           .num_consumers = 2 },
        .retry_on_failure = { .present = true, .enabled = true, .initial_interval = 10,
                              .multiplier = 1.5, .randomization_factor = 0.5,
                              .max_interval = 100, .max_elapsed_time = 10000 },
    };
    x->comp.type = &sf_otlpgrpc_exporter_type;
    x->comp.id = "otlp/gateway";
    x->comp.config = &x->cfg;
    x->mem_before = sf_alloc_in_use();
    make_batch(x);
    *state = x;
    return 0;
}

static int setup(void **state)
{
    return setup_common(state, false);
}

static int setup_tls(void **state)
{
    return setup_common(state, true);
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
    /* every counted byte the exporter took is back */
    assert_int_equal(sf_alloc_in_use(), x->mem_before);
    server_stop(&x->srv);
    pthread_mutex_destroy(&x->srv.mu);
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
    assert_string_equal(r->api_key, SECRET);
    assert_string_equal(r->tenant, "cvm-7");
    assert_true(r->decoded);
    assert_int_equal(r->spans, 3);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(r->span_ids[i], sf_test_span_ids[i], 8);
}

static void script(fixture *x, int i, grpc_status_code code, const char *details,
                   int64_t retry_delay_ms)
{
    x->srv.script[i] = (reply){ .code = code, .details = details,
                                .retry_delay_ms = retry_delay_ms };
    if (x->srv.n_script <= i)
        x->srv.n_script = i + 1;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_gzip_delivery_with_metadata(void **state)
{
    fixture *x = *state;

    create_and_start(x);
    assert_int_equal(atomic_load(&x->comp.counters.queue_capacity), 10);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3 &&
             atomic_load(&x->comp.counters.queued_spans) == 0);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_int_equal(x->srv.reqs[0].compression, GRPC_COMPRESS_GZIP);
    assert_delivered(&x->srv.reqs[0]);
    assert_non_null(strstr(x->srv.reqs[0].user_agent, "spanfence/"));
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 0);
    assert_invariant(x);
}

static void test_uncompressed_dns_target(void **state)
{
    fixture *x = *state;
    char ep[64];

    snprintf(ep, sizeof(ep), "dns:///127.0.0.1:%d", x->srv.port);
    x->cfg.endpoint = ep;
    x->cfg.compression = SF_COMPRESSION_NONE;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_int_equal(x->srv.reqs[0].compression, GRPC_COMPRESS_NONE);
    assert_delivered(&x->srv.reqs[0]);
    assert_invariant(x);
}

static void test_unavailable_twice_then_ok_logs_no_secret(void **state)
{
    fixture *x = *state;
    char log[16384];
    char path[] = "/tmp/sf_otlpgrpc_log_XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    ssize_t n;

    assert_true(fd >= 0);
    dup2(fd, STDERR_FILENO);
    sf_log_set_level(SF_LOG_DEBUG);
    script(x, 0, GRPC_STATUS_UNAVAILABLE, "gateway restarting", -1);
    script(x, 1, GRPC_STATUS_UNAVAILABLE, "gateway restarting", -1);
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
    assert_non_null(strstr(log, "grpc UNAVAILABLE: gateway restarting"));   /* capture works */
    assert_null(strstr(log, "sekret"));                                      /* no token */
    assert_int_equal(server_requests(&x->srv), 3);
    for (int i = 0; i < 3; i++)
        assert_delivered(&x->srv.reqs[i]);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 3);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 2);
    assert_int_equal(failed(x, SF_REASON_PERMANENT_ERROR) + failed(x, SF_REASON_RETRIES_EXHAUSTED), 0);
    assert_invariant(x);
}

static void test_invalid_argument_is_permanent(void **state)
{
    fixture *x = *state;

    script(x, 0, GRPC_STATUS_INVALID_ARGUMENT, "bad span", -1);
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

static void test_resource_exhausted_without_retry_info_is_permanent(void **state)
{
    fixture *x = *state;

    script(x, 0, GRPC_STATUS_RESOURCE_EXHAUSTED, "message too large", -1);
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(failed(x, SF_REASON_PERMANENT_ERROR) == 3);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 0);
    assert_invariant(x);
}

/* With a computed backoff of 30-90 s, only the server's 20 ms hint can
 * bring the retry inside the wait below. */
static void test_resource_exhausted_with_retry_info_honours_delay(void **state)
{
    fixture *x = *state;

    x->cfg.retry_on_failure.initial_interval = 60000;
    x->cfg.retry_on_failure.max_interval = 60000;
    x->cfg.retry_on_failure.max_elapsed_time = 300000;
    script(x, 0, GRPC_STATUS_RESOURCE_EXHAUSTED, "slow down", 20);
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 2);
    assert_int_equal(sf_counter_get(&x->comp.counters.retries), 1);
    assert_delivered(&x->srv.reqs[1]);
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

static void test_no_listener_exhausts_retries(void **state)
{
    fixture *x = *state;

    server_stop(&x->srv);           /* nothing listens on the port now */
    x->cfg.retry_on_failure.max_elapsed_time = 1500;   /* room for retries under valgrind */
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(failed(x, SF_REASON_RETRIES_EXHAUSTED) == 3);
    assert_true(sf_counter_get(&x->comp.counters.retries) >= 1);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 0);
    SF_TEST_WAIT_FOR(atomic_load(&x->comp.counters.queued_spans) == 0);
    assert_invariant(x);
}

/* A call the server never answers, with a deadline far beyond the drain
 * time: shutdown cancels it and counts the batch as dropped at shutdown. */
static void test_shutdown_cancels_call_in_flight(void **state)
{
    fixture *x = *state;

    x->cfg.timeout = 600000;        /* drain: 5 s */
    x->srv.script[0] = (reply){ .hang = true };
    x->srv.n_script = 1;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(server_requests(&x->srv) == 1);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(failed(x, SF_REASON_SHUTDOWN), 3);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 0);
    assert_int_equal(atomic_load(&x->comp.counters.queued_spans), 0);
    SF_TEST_WAIT_FOR(server_cancelled(&x->srv) == 1);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_invariant(x);
}

static void test_queue_disabled_is_synchronous(void **state)
{
    fixture *x = *state;

    x->cfg.sending_queue.enabled = false;
    script(x, 0, GRPC_STATUS_OK, NULL, -1);
    script(x, 1, GRPC_STATUS_UNAVAILABLE, "busy", -1);
    script(x, 2, GRPC_STATUS_PERMISSION_DENIED, "no", -1);
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    /* no waiting: the call is done when consume returns */
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

static void test_full_queue_passes_full_through(void **state)
{
    fixture *x = *state;

    x->cfg.sending_queue.queue_size = 1;
    assert_int_equal(x->comp.type->create(&x->comp, &x->cfg), SF_OK);
    x->created = true;              /* not started: the queue only fills */
    assert_int_equal(consume(x), SF_OK);
    assert_int_equal(consume(x), SF_FULL);
    assert_int_equal(sf_counter_get(&x->comp.counters.enqueue_failed_spans), 3);
    assert_invariant(x);
    x->comp.type->shutdown(&x->comp);
    assert_int_equal(failed(x, SF_REASON_SHUTDOWN), 3);
    assert_int_equal(consume(x), SF_STOPPED);
    assert_int_equal(server_requests(&x->srv), 0);
    assert_invariant(x);
}

static void test_create_survives_allocation_failure(void **state)
{
    fixture *x = *state;

    assert_true(sf_torture_create(&x->comp, &x->cfg, true) >= 4);
}

static void test_registry_names(void **state)
{
    (void)state;
    assert_ptr_equal(sf_registry_find(SF_KIND_EXPORTER, "otlp"), &sf_otlpgrpc_exporter_type);
    assert_ptr_equal(sf_registry_find(SF_KIND_EXPORTER, "otlp_grpc"), &sf_otlpgrpc_exporter_type);
}

static const char *load_exporter(const char *exporter_yaml)
{
    return sf_test_load_exporter("otlp/gw", exporter_yaml);
}

static void test_tls_with_client_certificate(void **state)
{
    fixture *x = *state;

    x->cfg.tls = (sf_otlp_tls_config){
        .present = true,
        .ca_file = SF_SOURCE_DIR "/tests/exporters/tls/server.pem",
        .cert_file = SF_SOURCE_DIR "/tests/exporters/tls/server.pem",
        .key_file = SF_SOURCE_DIR "/tests/exporters/tls/server.key",
    };
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->comp.counters.sent_spans) == 3);
    assert_int_equal(server_requests(&x->srv), 1);
    assert_delivered(&x->srv.reqs[0]);
    assert_invariant(x);
}

/* TLS by default: the test CA is not among the default roots, so the
 * handshake fails (retryable: the gateway may be mid-rotation) until the
 * retries run out, and nothing reaches the server. */
static void test_tls_unknown_ca_never_delivers(void **state)
{
    fixture *x = *state;

    x->cfg.tls = (sf_otlp_tls_config){ .present = true };
    x->cfg.retry_on_failure.max_elapsed_time = 300;
    create_and_start(x);
    assert_int_equal(consume(x), SF_OK);
    SF_TEST_WAIT_FOR(failed(x, SF_REASON_RETRIES_EXHAUSTED) == 3);
    assert_int_equal(sf_counter_get(&x->comp.counters.sent_spans), 0);
    assert_int_equal(server_requests(&x->srv), 0);
    assert_invariant(x);
}

static void test_check_endpoint(void **state)
{
    (void)state;
    assert_string_equal(load_exporter("    endpoint: gateway.internal:4317\n"), "");
    assert_string_equal(load_exporter("    endpoint: dns:///gateway.internal:4317\n"), "");
    assert_string_equal(load_exporter("    endpoint: \"[::1]:4317\"\n"), "");
    assert_string_equal(load_exporter("    endpoint: http://gateway.internal:4317\n"),
                        "x.yaml:7:15: exporters.otlp/gw.endpoint: 'http://gateway.internal:4317' "
                        "is a URL: the otlp exporter takes host:port (use the otlphttp exporter "
                        "for OTLP/HTTP)\n");
    assert_string_equal(load_exporter("    endpoint: gateway.internal\n"),
                        "x.yaml:7:15: exporters.otlp/gw.endpoint: 'gateway.internal' is not "
                        "host:port\n");
    assert_string_equal(load_exporter("    endpoint: gw:99999\n"),
                        "x.yaml:7:15: exporters.otlp/gw.endpoint: 'gw:99999' is not host:port\n");
    assert_string_equal(load_exporter("    compression: none\n"),
                        "x.yaml:6:3: exporters.otlp/gw: 'endpoint' is required\n");
}

static void test_check_tls(void **state)
{
    char yaml[1024];
    char ca[] = "/tmp/sf_otlpgrpc_ca_XXXXXX";
    int fd = mkstemp(ca);

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    snprintf(yaml, sizeof(yaml), "    endpoint: gw:4317\n    tls:\n      ca_file: %s\n", ca);
    assert_string_equal(load_exporter(yaml), "");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    tls:\n"
                                      "      ca_file: /nonexistent/ca.pem\n"),
                        "x.yaml:9:16: exporters.otlp/gw.tls.ca_file: cannot read "
                        "'/nonexistent/ca.pem': no such file or directory\n");
    snprintf(yaml, sizeof(yaml), "    endpoint: gw:4317\n    tls:\n      cert_file: %s\n", ca);
    assert_string_equal(load_exporter(yaml),
                        "x.yaml:8:5: exporters.otlp/gw.tls: 'cert_file' and 'key_file' must be "
                        "given together\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    tls:\n"
                                      "      insecure_skip_verify: true\n"),
                        "x.yaml:9:7: exporters.otlp/gw.tls.insecure_skip_verify: skipping "
                        "certificate verification is not supported: give the gateway's CA in "
                        "'ca_file'\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    tls:\n"
                                      "      insecure: true\n"
                                      "      ca_file: /nonexistent/ca.pem\n"),
                        "x.yaml:9:17: exporters.otlp/gw.tls.insecure: warning: 'insecure' is "
                        "true: 'ca_file', 'cert_file' and 'key_file' are not used\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    balancer_name: round_robin\n"),
                        "x.yaml:8:5: exporters.otlp/gw.balancer_name: warning: 'balancer_name' "
                        "has no effect in spanfence\n");
    unlink(ca);
}

static void test_check_headers(void **state)
{
    (void)state;
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      x-api-key: abc\n"), "");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      X-Api-Key: abc\n"),
                        "x.yaml:9:7: exporters.otlp/gw.headers: 'X-Api-Key' has uppercase "
                        "letters: gRPC metadata keys are lowercase\n");
    /* The value is never quoted: it may be a bearer token. */
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      authorization: \"Bearer abc\\r\\nx: 1\"\n"),
                        "x.yaml:9:7: exporters.otlp/gw.headers: value of 'authorization' has a "
                        "line break or other control or non-ASCII character\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      grpc-timeout: 1S\n"),
                        "x.yaml:9:7: exporters.otlp/gw.headers: 'grpc-timeout' is reserved for "
                        "gRPC itself\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      content-type: text/plain\n"),
                        "x.yaml:9:7: exporters.otlp/gw.headers: 'content-type' is set by the "
                        "exporter\n");
    assert_string_equal(load_exporter("    endpoint: gw:4317\n"
                                      "    headers:\n"
                                      "      \"bad key\": x\n"),
                        "x.yaml:9:7: exporters.otlp/gw.headers: 'bad key' is not a valid "
                        "metadata key (letters, digits, '-', '_', '.')\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gzip_delivery_with_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uncompressed_dns_target, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unavailable_twice_then_ok_logs_no_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_argument_is_permanent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resource_exhausted_without_retry_info_is_permanent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resource_exhausted_with_retry_info_honours_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_success_counts_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_listener_exhausts_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_cancels_call_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_disabled_is_synchronous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_passes_full_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_survives_allocation_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_with_client_certificate, setup_tls, teardown),
        cmocka_unit_test_setup_teardown(test_tls_unknown_ca_never_delivers, setup_tls, teardown),
        cmocka_unit_test(test_registry_names),
        cmocka_unit_test(test_check_endpoint),
        cmocka_unit_test(test_check_tls),
        cmocka_unit_test(test_check_headers),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
