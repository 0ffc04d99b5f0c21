/* exporters/otlp_grpc/otlp_grpc.c: the otlp (gRPC) exporter: sends encoded,
 * filtered batches as unary OTLP/gRPC Export calls with the gRPC core C API,
 * through the shared sending queue and retry engine (sf_sender.h).
 *
 * DESIGN
 * Threads: consume() runs on receiver threads and only submits to the
 *   sender (never blocks, unless the queue is disabled). The sender's
 *   consumer threads call otlpgrpc_send() with their worker index; each
 *   worker owns one channel (with a local subchannel pool, so a TCP
 *   connection of its own) and one pluck completion queue. The consumer
 *   drives gRPC's I/O itself by plucking its call's tag, in 200 ms steps so
 *   it can cancel the call once the shutdown drain time is over. Channels
 *   and metadata are made in start() and read-only until destroy().
 * Secrets: configured metadata values may be bearer tokens. They are handed
 *   to gRPC as slices at start and never logged; gRPC's own tracing stays
 *   at its default (off).
 * Results (OTLP/gRPC spec): OK is sent (a partial_success in the reply
 *   splits the count); UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
 *   DATA_LOSS and CANCELLED are retried, RESOURCE_EXHAUSTED only when the
 *   server sent a google.rpc.RetryInfo (grpc-status-details-bin), whose
 *   retry_delay is honoured; everything else is permanent. */
#include "otlp_grpc.h"
#include "grpc_core.h"
#include "sf_time.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"

/* The Export method of each signal's service, by sf_signal. */
static const char *const export_methods[SF_SIGNAL_COUNT] = {
    [SF_SIGNAL_TRACES] = "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    [SF_SIGNAL_LOGS] = "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    [SF_SIGNAL_METRICS] = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
};
#define STATUS_DETAILS_KEY "grpc-status-details-bin"
#define RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"
/* Longest the shutdown drain may take, whatever the call deadline. */
#define OTLPGRPC_DRAIN_MAX_MS 5000
/* How often a waiting consumer looks at sf_sender_aborting(). */
#define OTLPGRPC_POLL_MS 200
/* Shutdown's drain time is over: a call whose message is sent gets this
 * long more for its status (the server may have the spans: counting them
 * dropped would be wrong); one still sending is cancelled at once. */
#define OTLPGRPC_REPLY_GRACE_MS 2000
/* gRPC's reconnect backoff grows to 120 s by default: a gateway that comes
 * back would stay unreachable long after the sender's own retries resumed. */
#define OTLPGRPC_MAX_RECONNECT_BACKOFF_MS 5000
/* Largest PEM file read for TLS. */
#define OTLPGRPC_PEM_MAX (1024 * 1024)
/* Longest server hint honoured (as the otlphttp exporter's Retry-After). */
#define OTLPGRPC_RETRY_DELAY_MAX_MS 86400000LL

typedef struct otlpgrpc otlpgrpc;

typedef struct otlpgrpc_worker {
    grpc_channel *channel;
    grpc_completion_queue *cq;  /* pluck: only this worker's call lives on it */
    sf_compressor *zc;          /* NULL without compression */
} otlpgrpc_worker;

struct otlpgrpc {
    sf_sender_export out;       /* first: the sender's component side (sf_sender.h) */
    const char *id;
    sf_signal signal;           /* of the pipelines this instance serves */
    const sf_otlpgrpc_config *cfg;
    sf_counters *counters;
    char *target;               /* "dns:///host:port" */
    sf_compression compression;
    int level;
    int64_t timeout_ms;
    sf_sender *sender;
    bool grpc_inited;
    grpc_slice method;
    size_t n_md;
    grpc_metadata *md;          /* values hold secrets: never logged */
    unsigned n_workers;
    otlpgrpc_worker *workers;
};

static void *pb_alloc(void *data, size_t size)
{
    (void)data;
    return sf_malloc(size);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    sf_free(p);
}

static ProtobufCAllocator pb_counted = { .alloc = pb_alloc, .free = pb_free };

/* Copy the server's words, bounded and without control characters. */
static void copy_printable(char *out, size_t cap, const char *in, size_t len)
{
    size_t i;

    for (i = 0; i + 1 < cap && i < len && in[i]; i++)
        out[i] = ((unsigned char)in[i] < 0x20 || in[i] == 0x7f) ? '?' : in[i];
    out[i] = '\0';
}

/* ---- reading the reply ------------------------------------------------------ */

/* The retry_delay of a google.rpc.RetryInfo in the trailers, in ms (at least
 * 1), or -1 when the server sent none. */
static int64_t retry_info_ms(const grpc_metadata_array *trailers)
{
    int64_t ms = -1;

    for (size_t i = 0; i < trailers->count && ms < 0; i++) {
        const grpc_metadata *m = &trailers->metadata[i];
        Google__Rpc__Status *st;

        if (grpc_slice_str_cmp(m->key, STATUS_DETAILS_KEY) != 0)
            continue;
        st = google__rpc__status__unpack(&pb_counted, GRPC_SLICE_LENGTH(m->value),
                                         GRPC_SLICE_START_PTR(m->value));
        if (st == NULL)
            continue;
        for (size_t d = 0; d < st->n_details && ms < 0; d++) {
            Google__Protobuf__Any *any = st->details[d];
            Google__Rpc__RetryInfo *ri;

            if (any->type_url == NULL || strcmp(any->type_url, RETRY_INFO_TYPE) != 0)
                continue;
            ri = google__rpc__retry_info__unpack(&pb_counted, any->value.len, any->value.data);
            if (ri == NULL)
                continue;
            ms = 1;     /* a RetryInfo without a delay still says "retry" */
            if (ri->retry_delay != NULL && ri->retry_delay->seconds >= 0 &&
                ri->retry_delay->nanos >= 0) {
                int64_t s = ri->retry_delay->seconds;

                if (s > OTLPGRPC_RETRY_DELAY_MAX_MS / 1000)
                    ms = OTLPGRPC_RETRY_DELAY_MAX_MS;
                else
                    ms = s * 1000 + (ri->retry_delay->nanos + 999999) / 1000000;
                if (ms < 1)
                    ms = 1;
            }
            google__rpc__retry_info__free_unpacked(ri, &pb_counted);
        }
        google__rpc__status__free_unpacked(st, &pb_counted);
    }
    return ms;
}

/* Spans an OK reply says the server rejected (OTLP partial_success). */
static int64_t reply_rejected(otlpgrpc *x, grpc_byte_buffer *reply, const sf_buf *buf)
{
    grpc_byte_buffer_reader reader;
    sf_otlp_response *resp;
    grpc_slice data;
    int64_t rejected = 0;

    if (reply == NULL || !grpc_byte_buffer_reader_init(&reader, reply))
        return 0;
    data = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    resp = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
        &pb_counted, GRPC_SLICE_LENGTH(data), GRPC_SLICE_START_PTR(data));
    grpc_slice_unref(data);
    if (resp == NULL)
        return 0;
    if (resp->partial_success != NULL && resp->partial_success->rejected_spans > 0) {
        const char *m = resp->partial_success->error_message ? resp->partial_success->error_message : "";
        char msg[201];

        copy_printable(msg, sizeof(msg), m, strlen(m));
        rejected = resp->partial_success->rejected_spans;
        sf_warn("exporter %s: server rejected %" PRId64 " of %zu %s: %s", x->id, rejected,
                buf->spans, sf_signal_items(x->signal), msg[0] ? msg : "(no message)");
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
        resp, &pb_counted);
    return rejected;
}

static void map_status(grpc_status_code code, const grpc_metadata_array *trailers,
                       const grpc_slice *details, sf_send_result *res)
{
    int64_t hint = retry_info_ms(trailers);
    char text[100];

    copy_printable(text, sizeof(text), (const char *)GRPC_SLICE_START_PTR(*details),
                   GRPC_SLICE_LENGTH(*details));
    snprintf(res->detail, sizeof(res->detail), "grpc %s: %s", sf_grpc_status_name(code), text);
    switch (code) {
    case GRPC_STATUS_UNAVAILABLE:
    case GRPC_STATUS_DEADLINE_EXCEEDED:
    case GRPC_STATUS_ABORTED:
    case GRPC_STATUS_OUT_OF_RANGE:
    case GRPC_STATUS_DATA_LOSS:
    case GRPC_STATUS_CANCELLED:         /* also ours, at shutdown: the sender drops it */
        res->status = SF_RETRY;
        break;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        /* Over a size limit the server sends no RetryInfo: resending the
         * same batch would fail the same way. */
        res->status = hint >= 0 ? SF_RETRY : SF_PERMANENT;
        break;
    default:
        res->status = SF_PERMANENT;
        break;
    }
    if (res->status == SF_RETRY && hint > 0)
        res->retry_after_ms = hint;
}

/* ---- one call --------------------------------------------------------------- */

static gpr_timespec after_ms(int64_t ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static void otlpgrpc_send(void *exporter, unsigned worker, const sf_buf *buf,
                          sf_send_result *res)
{
    otlpgrpc *x = exporter;
    otlpgrpc_worker *w = &x->workers[worker];
    grpc_metadata_array initial, trailers;
    grpc_byte_buffer *request, *reply = NULL;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice(), payload;
    grpc_op ops[6];
    grpc_call *call;
    grpc_call_error err;
    bool cancelled = false;
    int sent_tag, done_tag;
    int64_t give_up = 0;

    if (w->channel == NULL) {   /* queue disabled and not started yet */
        res->status = SF_RETRY;
        snprintf(res->detail, sizeof(res->detail), "exporter not started");
        return;
    }
    call = grpc_channel_create_call(w->channel, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq, x->method,
                                    NULL, after_ms(x->timeout_ms), NULL);
    if (call == NULL) {
        res->status = SF_RETRY;
        snprintf(res->detail, sizeof(res->detail), "grpc: cannot create a call");
        return;
    }
    if (w->zc != NULL) {
        const uint8_t *z;
        size_t zlen;
        sf_status st = sf_compressor_run(w->zc, buf->data, buf->len, &z, &zlen);

        if (st != SF_OK) {
            res->status = SF_RETRY;
            snprintf(res->detail, sizeof(res->detail), "%s: %s",
                     sf_compression_name(x->compression), sf_status_str(st));
            grpc_call_unref(call);
            return;
        }
        /* Already compressed: core sends it with the compressed flag and
         * the channel's grpc-encoding, without compressing it again. */
        payload = grpc_slice_from_copied_buffer((const char *)z, zlen);
        request = grpc_raw_compressed_byte_buffer_create(&payload, 1, GRPC_COMPRESS_GZIP);
    } else {
        /* A copy: gRPC moves a sent buffer's slices out, and the sf_buf is
         * shared with other exporters and retries. */
        payload = grpc_slice_from_copied_buffer((const char *)buf->data, buf->len);
        request = grpc_raw_byte_buffer_create(&payload, 1);
    }
    grpc_slice_unref(payload);
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailers);

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = x->n_md;
    ops[0].data.send_initial_metadata.metadata = x->md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &reply;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailers;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    /* Two batches: sending (whose completion says the message is written)
     * and receiving the status. */
    err = grpc_call_start_batch(call, ops, 3, &sent_tag, NULL);
    if (err != GRPC_CALL_OK) {
        res->status = SF_PERMANENT;
        snprintf(res->detail, sizeof(res->detail), "grpc: %s", grpc_call_error_to_string(err));
        goto out_unref_call;
    }
    err = grpc_call_start_batch(call, ops + 3, 3, &done_tag, NULL);
    if (err != GRPC_CALL_OK) {
        /* the sending batch is started: it must be seen before the call goes */
        grpc_call_cancel(call, NULL);
        while (grpc_completion_queue_pluck(w->cq, &sent_tag, after_ms(OTLPGRPC_POLL_MS),
                                           NULL).type != GRPC_OP_COMPLETE)
            ;
        res->status = SF_PERMANENT;
        snprintf(res->detail, sizeof(res->detail), "grpc: %s", grpc_call_error_to_string(err));
        goto out_unref_call;
    }
    /* Both batches always complete (the deadline bounds them); cancelling
     * only makes them complete sooner. Their tags must be seen before the
     * call goes. Once shutdown's drain time is over, a call still sending
     * is cancelled at once, one whose message is out gets
     * OTLPGRPC_REPLY_GRACE_MS more for its status. */
    for (;;) {
        grpc_event ev = grpc_completion_queue_pluck(w->cq, &sent_tag, after_ms(OTLPGRPC_POLL_MS),
                                                    NULL);

        if (ev.type == GRPC_OP_COMPLETE)
            break;
        if (!cancelled && sf_sender_aborting(x->out.sender)) {
            grpc_call_cancel(call, NULL);
            cancelled = true;
        }
    }
    for (;;) {
        grpc_event ev = grpc_completion_queue_pluck(w->cq, &done_tag, after_ms(OTLPGRPC_POLL_MS),
                                                    NULL);

        if (ev.type == GRPC_OP_COMPLETE)
            break;
        if (!cancelled && sf_sender_aborting(x->out.sender)) {
            int64_t now = sf_now_ms();

            if (give_up == 0) {
                give_up = now + OTLPGRPC_REPLY_GRACE_MS;
            } else if (now >= give_up) {
                grpc_call_cancel(call, NULL);
                cancelled = true;
            }
        }
    }
    if (code == GRPC_STATUS_OK) {
        res->status = SF_OK;
        res->rejected_spans = reply_rejected(x, reply, buf);
    } else {
        map_status(code, &trailers, &details, res);
    }

out_unref_call:
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailers);
    grpc_slice_unref(details);
    if (reply != NULL)
        grpc_byte_buffer_destroy(reply);
    grpc_byte_buffer_destroy(request);
    grpc_call_unref(call);
}

/* ---- setup and teardown ------------------------------------------------------ */

static char *build_target(const char *endpoint)
{
    static const char prefix[] = "dns:///";
    size_t len = strlen(endpoint);
    char *t;

    if (strncmp(endpoint, prefix, sizeof(prefix) - 1) == 0)
        return sf_strdup(endpoint);
    t = sf_malloc(sizeof(prefix) - 1 + len + 1);
    if (t == NULL)
        return NULL;
    memcpy(t, prefix, sizeof(prefix) - 1);
    memcpy(t + sizeof(prefix) - 1, endpoint, len + 1);
    return t;
}

/* A whole PEM file as a string; NULL (and logged) when it cannot be read. */
static char *read_pem(const char *id, const char *path)
{
    FILE *f = fopen(path, "r");
    char *pem;
    size_t n;

    if (f == NULL) {
        sf_error("exporter %s: cannot read '%s'", id, path);
        return NULL;
    }
    pem = sf_malloc(OTLPGRPC_PEM_MAX + 1);
    if (pem == NULL)
        goto out_close;
    n = fread(pem, 1, OTLPGRPC_PEM_MAX + 1, f);
    if (ferror(f) || n > OTLPGRPC_PEM_MAX) {
        sf_error("exporter %s: cannot read '%s' (unreadable or over %d bytes)", id, path,
                 OTLPGRPC_PEM_MAX);
        goto out_free_pem;
    }
    pem[n] = '\0';
    fclose(f);
    return pem;

out_free_pem:
    explicit_bzero(pem, OTLPGRPC_PEM_MAX + 1);
    sf_free(pem);
out_close:
    fclose(f);
    return NULL;
}

static void free_pem(char *pem)
{
    if (pem != NULL) {
        explicit_bzero(pem, strlen(pem));
        sf_free(pem);
    }
}

static grpc_channel_credentials *make_credentials(otlpgrpc *x)
{
    const sf_otlp_tls_config *t = &x->cfg->tls;
    grpc_ssl_pem_key_cert_pair pair;
    grpc_channel_credentials *creds = NULL;
    char *ca = NULL, *cert = NULL, *key = NULL;

    if (t->insecure)
        return grpc_insecure_credentials_create();
    if (t->ca_file != NULL && (ca = read_pem(x->id, t->ca_file)) == NULL)
        goto out_free_pems;
    if (t->cert_file != NULL && t->key_file != NULL) {
        cert = read_pem(x->id, t->cert_file);
        key = read_pem(x->id, t->key_file);
        if (cert == NULL || key == NULL)
            goto out_free_pems;
        pair.cert_chain = cert;
        pair.private_key = key;
    }
    /* gRPC copies the PEM strings. */
    creds = grpc_ssl_credentials_create(ca, key != NULL ? &pair : NULL, NULL, NULL);

out_free_pems:
    free_pem(key);
    free_pem(cert);
    free_pem(ca);
    return creds;
}

static void release_metadata(otlpgrpc *x)
{
    for (size_t i = 0; i < x->n_md; i++) {
        grpc_slice_unref(x->md[i].key);
        grpc_slice_unref(x->md[i].value);
    }
    sf_free(x->md);
    x->md = NULL;
    x->n_md = 0;
}

static sf_status build_metadata(otlpgrpc *x)
{
    const sf_strmap *h = &x->cfg->headers;

    if (h->n == 0)
        return SF_OK;
    x->md = sf_calloc(h->n, sizeof(*x->md));
    if (x->md == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < h->n; i++) {
        x->md[i].key = grpc_slice_from_copied_string(h->keys[i]);
        x->md[i].value = grpc_slice_from_copied_string(h->values[i] ? h->values[i] : "");
        x->n_md++;
    }
    return SF_OK;
}

static sf_status open_channels(otlpgrpc *x)
{
    grpc_arg args[5];
    grpc_channel_args cargs = { .num_args = 0, .args = args };
    grpc_channel_credentials *creds;

    memset(args, 0, sizeof(args));
    /* A connection per worker: a shared one would serialise the workers'
     * calls on one TCP stream and one gRPC I/O path. */
    args[cargs.num_args].type = GRPC_ARG_INTEGER;
    args[cargs.num_args].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[cargs.num_args++].value.integer = 1;
    args[cargs.num_args].type = GRPC_ARG_INTEGER;
    args[cargs.num_args].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[cargs.num_args++].value.integer = OTLPGRPC_MAX_RECONNECT_BACKOFF_MS;
    args[cargs.num_args].type = GRPC_ARG_STRING;
    args[cargs.num_args].key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING;
    args[cargs.num_args++].value.string = (char *)"spanfence/" SF_VERSION;
    if (x->compression == SF_COMPRESSION_GZIP) {
        args[cargs.num_args].type = GRPC_ARG_INTEGER;
        args[cargs.num_args].key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
        args[cargs.num_args++].value.integer = GRPC_COMPRESS_GZIP;
    }
    /* upstream's server_name_override (grpc-go's TLS ServerName): SNI, the
     * name verified in the certificate, and, as grpc-go's authority from
     * the credentials, the calls' :authority (core sets its default
     * authority from this arg). */
    if (!x->cfg->tls.insecure && x->cfg->tls.server_name_override != NULL) {
        args[cargs.num_args].type = GRPC_ARG_STRING;
        args[cargs.num_args].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[cargs.num_args++].value.string = x->cfg->tls.server_name_override;
    }
    creds = make_credentials(x);
    if (creds == NULL)
        return SF_IO;
    for (unsigned i = 0; i < x->n_workers; i++) {
        otlpgrpc_worker *w = &x->workers[i];

        w->cq = grpc_completion_queue_create_for_pluck(NULL);
        w->channel = grpc_channel_create(x->target, creds, &cargs);
        if (x->compression != SF_COMPRESSION_NONE && w->zc == NULL &&
            (w->zc = sf_compressor_create(x->compression, x->level)) == NULL) {
            grpc_channel_credentials_release(creds);
            return SF_ENOMEM;
        }
    }
    grpc_channel_credentials_release(creds);
    return SF_OK;
}

static void close_channels(otlpgrpc *x)
{
    for (unsigned i = 0; i < x->n_workers; i++) {
        otlpgrpc_worker *w = &x->workers[i];

        if (w->channel != NULL)
            grpc_channel_destroy(w->channel);
        w->channel = NULL;
        if (w->cq != NULL) {
            /* Every call's tag was plucked: the queue is empty. */
            grpc_completion_queue_shutdown(w->cq);
            grpc_completion_queue_destroy(w->cq);
        }
        w->cq = NULL;
        sf_compressor_destroy(w->zc);
        w->zc = NULL;
    }
}

/* ---- lifecycle ---------------------------------------------------------------- */

/* No gRPC here: `spanfence validate` runs create, and gRPC starts threads. */
static sf_status otlpgrpc_create(sf_component *self, const void *config)
{
    const sf_otlpgrpc_config *c = config;
    otlpgrpc *x;

    x = sf_calloc(1, sizeof(*x));
    if (x == NULL)
        return SF_ENOMEM;
    x->id = sf_component_id(self);
    x->signal = sf_component_signal(self);
    x->cfg = c;
    x->counters = sf_component_counters(self);
    x->compression = (sf_compression)c->compression;
    x->level = sf_compression_level(x->compression, &c->compression_params);
    x->timeout_ms = c->timeout > 0 ? c->timeout : 5000;
    x->out.drain_ms = x->timeout_ms < OTLPGRPC_DRAIN_MAX_MS ? x->timeout_ms : OTLPGRPC_DRAIN_MAX_MS;
    x->out.send_timeout_ms = x->timeout_ms;
    x->target = build_target(c->endpoint);
    if (x->target == NULL)
        goto out_free_ctx;
    x->out.sender = sf_sender_create(x->id, &c->sending_queue, &c->retry_on_failure, otlpgrpc_send,
                                 x, x->counters);
    if (x->out.sender == NULL)
        goto out_free_target;
    x->n_workers = sf_sender_workers(x->out.sender);
    x->workers = sf_calloc(x->n_workers, sizeof(*x->workers));
    if (x->workers == NULL)
        goto out_destroy_sender;
    sf_component_set_ctx(self, x);
    return SF_OK;

out_destroy_sender:
    sf_sender_destroy(x->out.sender);
out_free_target:
    sf_free(x->target);
out_free_ctx:
    sf_free(x);
    return SF_ENOMEM;
}

/* What start() made is undone by destroy(), also after a failed start. */
static sf_status otlpgrpc_start(sf_component *self)
{
    otlpgrpc *x = sf_component_ctx(self);
    sf_status st;

    sf_grpc_init();
    x->grpc_inited = true;
    x->method = grpc_slice_from_static_string(export_methods[x->signal]);
    st = build_metadata(x);
    if (st != SF_OK)
        return st;
    st = open_channels(x);
    if (st != SF_OK)
        return st;
    return sf_sender_export_start(self);
}

static void otlpgrpc_destroy(sf_component *self)
{
    otlpgrpc *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    sf_sender_destroy(x->out.sender);   /* joins the consumers: no call in flight after */
    close_channels(x);
    release_metadata(x);
    if (x->grpc_inited)
        sf_grpc_shutdown();
    sf_free(x->workers);
    sf_free(x->target);
    sf_free(x);
    sf_component_set_ctx(self, NULL);
}

const sf_component_type sf_otlpgrpc_exporter_type = {
    .name = "otlp",
    .alias = "otlp_grpc",
    .kind = SF_KIND_EXPORTER,
    .description = "OTLP over gRPC to the telemetry gateway",
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_otlpgrpc_config),
    .config_map = sf_otlpgrpc_config_map,
    .check = sf_otlpgrpc_check,
    .create = otlpgrpc_create,
    .start = otlpgrpc_start,
    .consume = sf_sender_export_consume,
    .shutdown = sf_sender_export_shutdown,
    .destroy = otlpgrpc_destroy,
    .suspend = sf_sender_export_suspend,
    .resume = sf_sender_export_resume,
    .describe_export = sf_otlpgrpc_describe,
};
