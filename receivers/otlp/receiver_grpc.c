/* receivers/otlp/receiver_grpc.c: OTLP/gRPC server on the gRPC core C API.
 *
 * DESIGN
 * - `workers` threads (by default one per CPU the process may run on: a
 *   second worker on one CPU only adds context switches, measured 7% more
 *   CPU per span with the collector pinned to one core), each blocked in
 *   grpc_completion_queue_next() on a completion queue of its own. gRPC does
 *   the socket I/O on those threads.
 * - Each worker pre-posts SLOTS call slots for the registered Export method
 *   and one catch-all slot that answers any other method UNIMPLEMENTED at
 *   once (without it such calls would hang until the client's deadline,
 *   holding their buffers).
 * - Memory gRPC holds is bounded, not just counted:
 *   - an Export call is matched on its headers and its message is read only
 *     once it has a slot (GRPC_SRM_PAYLOAD_NONE, then RECV_MESSAGE), so at
 *     most workers x SLOTS messages are in memory; calls waiting for a slot
 *     hold their HTTP/2 stream window (lookahead_bytes, BDP probing off),
 *     not their message;
 *   - max_concurrent_streams (default 16) per connection: further calls
 *     wait in the client;
 *   - a resource quota sized from the memory limiter backs that up (under
 *     pressure gRPC shrinks its flow-control windows);
 *   - keepalive, max_connection_idle/age and a handshake timeout end
 *     idle, half-open and silent connections.
 * - When memory is short the call is refused (UNAVAILABLE) before its
 *   message is copied: the spans are counted over the message's slices
 *   (sf_otlp_count.h) and the slices are freed.
 * - The codec reads one contiguous request. A message that arrived as one
 *   slice is read in place; one in several slices (a 500 KB message comes
 *   in tens to hundreds) is copied into the worker's receive buffer, which
 *   is kept from call to call up to RX_RETAIN bytes. Allocating the copy
 *   afresh per call (grpc_byte_buffer_reader_readall) cost more than the
 *   copy: blocks from 128 KiB up are mmaps (main.c), so every request paid
 *   a page fault per 4 KiB page and a munmap, 9% of the collector's CPU.
 * - A call is answered in one batch (initial metadata, message, status,
 *   close) right after the request was decoded into the worker's arena and
 *   run through the pipeline (sf_component_emit). The arena is reset after
 *   every call, so the heap does not shrink and regrow per request.
 * - Slots belong to their worker's thread; the only shared state is
 *   `stopping` (under post_lock, so no slot is re-posted on a server that
 *   is being destroyed) and the shutdown notification. */
#define _GNU_SOURCE                 /* sched_getaffinity, CPU_COUNT */
#include "receiver_grpc.h"
#include "otlp_answer.h"
#include "sf_dynbuf.h"
#include "sf_grpc.h"
#include "sf_net.h"
#include "sf_otlp_count.h"
#include "sf_time.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#define EXPORT_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define METRICS_METHOD "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
#define LOGS_METHOD "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define SLOTS 2
/* Window of a stream whose message is not being read yet. */
#define STREAM_LOOKAHEAD (16 * 1024)
/* Largest read buffer of a connection. */
#define TCP_MAX_READ_CHUNK (32 * 1024)
/* A connection that has not sent its HTTP/2 preface by then is closed. */
#define HANDSHAKE_TIMEOUT_MS 10000
/* Resource quota when no memory_limiter runs. */
#define DEFAULT_QUOTA ((size_t)256 << 20)
#define ARENA_CHUNK (1024 * 1024)
/* Receive buffer kept between calls; a larger one is freed after its call. */
#define RX_RETAIN ((size_t)1024 * 1024)
#define SHUTDOWN_GRACE_MS 5000

typedef struct worker worker;

typedef struct call_slot {
    bool catch_all;             /* the UNIMPLEMENTED slot */
    bool reading;               /* waiting for the request message */
    bool replying;              /* waiting for the reply batch to complete */
    worker *w;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details;  /* catch_all only */
    grpc_byte_buffer *payload;  /* Export only */
    grpc_byte_buffer *reply;
    grpc_slice status_details;
    int cancelled;
} call_slot;

struct worker {
    sf_receiver_grpc *srv;
    grpc_completion_queue *cq;
    pthread_t thread;
    bool running;
    sf_arena *arena;
    sf_dynbuf rx;               /* a request's slices, contiguous */
    call_slot slots[SLOTS + 1];
};

struct sf_receiver_grpc {
    sf_component *self;
    const sf_receiver_grpc_config *cfg;
    unsigned max_depth;
    size_t max_msg;
    grpc_server *server;
    grpc_resource_quota *quota;
    void *method;
    unsigned n_workers;
    worker *workers;
    bool grpc_inited;
    bool started;
    pthread_mutex_t post_lock;
    bool stopping;              /* under post_lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool shutdown_done;         /* under lock */
    int shutdown_tag;           /* its address is the tag */
};

/* ---- slots ------------------------------------------------------------------ */

static void slot_clear(call_slot *s)
{
    if (s->call != NULL)
        grpc_call_unref(s->call);
    s->call = NULL;
    grpc_metadata_array_destroy(&s->md);
    if (s->catch_all)
        grpc_call_details_destroy(&s->details);
    if (s->payload != NULL)
        grpc_byte_buffer_destroy(s->payload);
    s->payload = NULL;
    if (s->reply != NULL)
        grpc_byte_buffer_destroy(s->reply);
    s->reply = NULL;
    grpc_slice_unref(s->status_details);
    s->status_details = grpc_empty_slice();
    s->reading = false;
    s->replying = false;
}

/* Offer the slot for the next call, unless the server is stopping.
 * Returns whether it was posted (the slot is then owned by gRPC). */
static bool slot_post(call_slot *s)
{
    sf_receiver_grpc *srv = s->w->srv;
    grpc_call_error err = GRPC_CALL_ERROR;

    pthread_mutex_lock(&srv->post_lock);
    if (!srv->stopping) {
        grpc_metadata_array_init(&s->md);
        if (s->catch_all) {
            grpc_call_details_init(&s->details);
            err = grpc_server_request_call(srv->server, &s->call, &s->details, &s->md,
                                           s->w->cq, s->w->cq, s);
        } else {
            err = grpc_server_request_registered_call(srv->server, srv->method, &s->call,
                                                      &s->deadline, &s->md, NULL,
                                                      s->w->cq, s->w->cq, s);
        }
        if (err != GRPC_CALL_OK) {
            grpc_metadata_array_destroy(&s->md);
            if (s->catch_all)
                grpc_call_details_destroy(&s->details);
        }
    }
    pthread_mutex_unlock(&srv->post_lock);
    if (err != GRPC_CALL_OK && !srv->stopping)
        sf_error("receiver '%s': grpc: cannot accept calls: %s",
                 sf_component_id(srv->self), grpc_call_error_to_string(err));
    return err == GRPC_CALL_OK;
}

static void slot_reply(call_slot *s, grpc_status_code code, const char *details)
{
    grpc_op ops[4];
    size_t n = 0;

    memset(ops, 0, sizeof(ops));
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    n++;
    if (code == GRPC_STATUS_OK) {
        /* An empty ExportTraceServiceResponse encodes to zero bytes. */
        grpc_slice empty = grpc_empty_slice();
        s->reply = grpc_raw_byte_buffer_create(&empty, 1);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = s->reply;
        n++;
    }
    s->status_details = grpc_slice_from_copied_string(details);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n].data.send_status_from_server.status_details = &s->status_details;
    n++;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &s->cancelled;
    n++;
    s->replying = true;
    if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
        slot_clear(s);
        slot_post(s);
    }
}

/* Answer with the table's gRPC code for `st` (otlp_answer.h), and its
 * message unless `why` says more. */
static void slot_answer(call_slot *s, sf_status st, const char *why)
{
    const sf_otlp_answer *a = sf_otlp_answer_of(st);

    slot_reply(s, (grpc_status_code)a->grpc, why != NULL ? why : a->message);
}

/* gRPC core 1.51 knows only identity, deflate and gzip: a message with any
 * other grpc-encoding (zstd, as upstream's exporters can send) reaches us
 * still compressed, with nothing to say so (core logs "Error parsing
 * metadata ... grpc-encoding" and drops the header). Only a message the
 * codec refused is looked at, so no valid request is ever refused for its
 * first bytes: the zstd frame magic then names the real problem. */
static bool looks_zstd(const uint8_t *p, size_t len)
{
    return len >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/* The request's bytes in one piece: its only slice in place (*one holds
 * the reference), or its slices copied into w->rx. false when the copy
 * cannot be had (no memory, or longer than the receive limit): the reader
 * is then spent. `hint`: the expected length (exact when not compressed). */
static bool read_request(worker *w, grpc_byte_buffer_reader *reader, size_t hint,
                         grpc_slice *one, const uint8_t **data, size_t *len)
{
    grpc_slice piece;
    size_t n = 0;
    bool ok = true;

    *one = grpc_empty_slice();
    sf_dynbuf_reset(&w->rx);
    while (grpc_byte_buffer_reader_next(reader, &piece) != 0) {
        if (n++ == 0) {
            *one = piece;
            continue;
        }
        if (n == 2) {               /* a second slice: from here on, copy */
            if (hint <= w->rx.max)
                (void)sf_dynbuf_reserve(&w->rx, hint);   /* else it grows as it goes */
            ok = sf_dynbuf_add(&w->rx, GRPC_SLICE_START_PTR(*one),
                               GRPC_SLICE_LENGTH(*one)) == SF_OK;
            grpc_slice_unref(*one);
            *one = grpc_empty_slice();
        }
        ok = ok && sf_dynbuf_add(&w->rx, GRPC_SLICE_START_PTR(piece),
                                 GRPC_SLICE_LENGTH(piece)) == SF_OK;
        grpc_slice_unref(piece);
    }
    if (!ok)
        return false;
    *data = n >= 2 ? (const uint8_t *)sf_dynbuf_ptr(&w->rx) : GRPC_SLICE_START_PTR(*one);
    *len = n >= 2 ? sf_dynbuf_len(&w->rx) : GRPC_SLICE_LENGTH(*one);
    return true;
}

/* After a call: keep the receive buffer for the next one unless it grew
 * past RX_RETAIN (one outsized request does not pin its size). */
static void rx_done(worker *w)
{
    if (sf_dynbuf_capacity(&w->rx) > RX_RETAIN)
        sf_dynbuf_release(&w->rx);
    else
        sf_dynbuf_reset(&w->rx);
}

/* What a call held of its request, once the pipeline has run on it. */
static void release_request(call_slot *s, sf_request *batch, grpc_slice data)
{
    sf_request_release(batch);
    grpc_slice_unref(data);
    rx_done(s->w);
    sf_arena_reset(s->w->arena);
}

/* A new Export call with its request: decode, run the pipeline, answer. */
static void handle_export(call_slot *s)
{
    sf_receiver_grpc *srv = s->w->srv;
    grpc_byte_buffer_reader reader;
    grpc_slice data;
    const uint8_t *bytes;
    size_t len;
    sf_request batch;
    sf_status st;

    if (s->payload == NULL) {
        sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, 0, SF_REASON_MALFORMED);
        slot_answer(s, SF_INVALID, "missing request message");
        return;
    }
    if (!grpc_byte_buffer_reader_init(&reader, s->payload)) {
        sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, 0, SF_REASON_MALFORMED);
        slot_answer(s, SF_INVALID, "request could not be decompressed");
        return;
    }
    if (!sf_component_may_accept(srv->self)) {
        /* Refused before the message is copied or decoded; its spans are
         * still counted, over its slices, so the refusal is visible in span
         * terms (received = accepted + refused). */
        sf_span_counter sc;
        grpc_slice piece;

        sf_span_counter_init(&sc);
        while (grpc_byte_buffer_reader_next(&reader, &piece) != 0) {
            sf_span_counter_feed(&sc, GRPC_SLICE_START_PTR(piece), GRPC_SLICE_LENGTH(piece));
            grpc_slice_unref(piece);
        }
        grpc_byte_buffer_reader_destroy(&reader);
        grpc_byte_buffer_destroy(s->payload);
        s->payload = NULL;
        sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, sc.spans, SF_REASON_MEMORY_LIMIT);
        slot_answer(s, SF_MEMLIMIT, NULL);
        return;
    }
    if (!read_request(s->w, &reader, grpc_byte_buffer_length(s->payload), &data, &bytes,
                      &len)) {
        /* No room for the copy in the worker's buffer: the one gRPC makes
         * (its allocation is outside the count). */
        grpc_slice_unref(data);
        rx_done(s->w);
        grpc_byte_buffer_reader_destroy(&reader);
        if (!grpc_byte_buffer_reader_init(&reader, s->payload)) {
            sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, 0, SF_REASON_MALFORMED);
            slot_answer(s, SF_INVALID, "request could not be decompressed");
            return;
        }
        data = grpc_byte_buffer_reader_readall(&reader);
        bytes = GRPC_SLICE_START_PTR(data);
        len = GRPC_SLICE_LENGTH(data);
    }
    grpc_byte_buffer_reader_destroy(&reader);
    grpc_byte_buffer_destroy(s->payload);    /* what it holds is in `data` or the copy */
    s->payload = NULL;
    /* The codec's pass inside emit is also the validation: a malformed
     * request comes back SF_INVALID with nothing of it queued. */
    sf_request_init(&batch, s->w->arena, bytes, len, srv->max_depth);
    st = sf_component_emit(srv->self, SF_TRANSPORT_GRPC, &batch);
    if (st == SF_INVALID) {
        char why[160];

        grpc_status_code code = (grpc_status_code)sf_otlp_answer_of(st)->grpc;

        snprintf(why, sizeof(why), "%s: %s", sf_otlp_answer_of(st)->message,
                 batch.stats.error != NULL ? batch.stats.error : "malformed");
        if (looks_zstd(bytes, len)) {
            code = GRPC_STATUS_UNIMPLEMENTED;
            snprintf(why, sizeof(why), "the message looks zstd-compressed: grpc-encoding zstd "
                     "is not supported over gRPC here (gzip, deflate or identity; zstd over "
                     "OTLP/HTTP)");
        }
        release_request(s, &batch, data);
        slot_reply(s, code, why);
        return;
    }
    release_request(s, &batch, data);
    slot_answer(s, st, NULL);
}

/* A matched Export call: read its message now that a slot holds it. */
static void start_read(call_slot *s)
{
    grpc_op op;

    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->payload;
    s->reading = true;
    if (grpc_call_start_batch(s->call, &op, 1, s, NULL) != GRPC_CALL_OK) {
        slot_clear(s);
        slot_post(s);
    }
}

static void handle_event(call_slot *s, int success)
{
    if (s->replying) {              /* the answer went out (or the call died) */
        slot_clear(s);
        slot_post(s);
        return;
    }
    if (!success) {
        /* A read that failed (the client went away): take the next call.
         * A request that failed: the server is shutting down. */
        bool repost = s->reading;

        slot_clear(s);
        if (repost)
            slot_post(s);
        return;
    }
    if (s->catch_all) {
        sf_signal other = grpc_slice_str_cmp(s->details.method, METRICS_METHOD) == 0
                        ? SF_SIGNAL_METRICS
                        : grpc_slice_str_cmp(s->details.method, LOGS_METHOD) == 0
                        ? SF_SIGNAL_LOGS : SF_SIGNAL_TRACES;

        /* metrics or logs: spanfence exports traces only, so they are
         * refused with UNIMPLEMENTED (the SDK does not retry it) saying why,
         * and counted, never answered as accepted and dropped unseen; a
         * metrics or logs pipeline listing this receiver changes only the
         * message. Anything else is not served. */
        if (other != SF_SIGNAL_TRACES)
            sf_component_unexported(s->w->srv->self, SF_TRANSPORT_GRPC, other);
        if (other != SF_SIGNAL_TRACES && sf_component_receives(s->w->srv->self, other)) {
            slot_reply(s, GRPC_STATUS_UNIMPLEMENTED, other == SF_SIGNAL_METRICS
                       ? "spanfence exports traces only; the metrics pipeline that lists this "
                         "receiver is not run, so metrics are refused"
                       : "spanfence exports traces only; the logs pipeline that lists this "
                         "receiver is not run, so logs are refused");
        } else if (other != SF_SIGNAL_TRACES) {
            slot_reply(s, GRPC_STATUS_UNIMPLEMENTED, other == SF_SIGNAL_METRICS
                       ? "spanfence exports traces only, and no metrics pipeline lists this "
                         "receiver: send metrics elsewhere"
                       : "spanfence exports traces only, and no logs pipeline lists this "
                         "receiver: send logs elsewhere");
        } else {
            slot_reply(s, GRPC_STATUS_UNIMPLEMENTED, "unknown method: spanfence serves "
                       EXPORT_METHOD " only");
        }
    } else if (!s->reading) {
        start_read(s);
    } else {
        s->reading = false;
        handle_export(s);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sf_receiver_grpc *srv = w->srv;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &srv->shutdown_tag) {
            pthread_mutex_lock(&srv->lock);
            srv->shutdown_done = true;
            pthread_cond_broadcast(&srv->cond);
            pthread_mutex_unlock(&srv->lock);
            continue;
        }
        handle_event(ev.tag, ev.success);
    }
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------- */

/* Most workers `workers: 0` gives. */
#define AUTO_WORKERS_MAX 8

/* The configured worker count, or for 0 the CPUs this process may run on. */
static unsigned worker_count(int64_t configured)
{
    cpu_set_t set;
    int n;

    if (configured > 0)
        return (unsigned)configured;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > AUTO_WORKERS_MAX ? AUTO_WORKERS_MAX : (unsigned)n;
}

sf_status sf_receiver_grpc_create(sf_component *self, const sf_receiver_grpc_config *cfg,
                              unsigned max_depth, sf_receiver_grpc **out)
{
    sf_receiver_grpc *srv = sf_calloc(1, sizeof(*srv));

    *out = NULL;
    if (srv == NULL)
        return SF_ENOMEM;
    srv->self = self;
    srv->cfg = cfg;
    srv->max_depth = max_depth;
    srv->max_msg = (size_t)cfg->max_recv_msg_size_mib * 1024 * 1024;
    srv->n_workers = worker_count(cfg->workers);
    srv->workers = sf_calloc(srv->n_workers, sizeof(*srv->workers));
    if (srv->workers == NULL) {
        sf_free(srv);
        return SF_ENOMEM;
    }
    pthread_mutex_init(&srv->post_lock, NULL);
    pthread_mutex_init(&srv->lock, NULL);
    sf_cond_init(&srv->cond);       /* shutdown waits are timed on CLOCK_MONOTONIC */
    *out = srv;
    return SF_OK;
}

sf_status sf_receiver_grpc_start(sf_receiver_grpc *srv)
{
    const sf_otlp_keepalive_server *ka = &srv->cfg->keepalive.server_parameters;
    const sf_otlp_keepalive_enforcement *kp = &srv->cfg->keepalive.enforcement_policy;
    grpc_arg args[16];
    grpc_channel_args cargs = { .num_args = 0, .args = args };
    grpc_server_credentials *creds;
    char why[128];
    size_t soft, hard, quota;
    int port;

    sf_grpc_init();
    srv->grpc_inited = true;

    /* What gRPC core allocates is outside the count: the memory limiter's
     * hard limit (or a fixed 256 MiB without one) is its quota too. */
    sf_alloc_limits(&soft, &hard);
    quota = hard > 0 ? hard : DEFAULT_QUOTA;
    srv->quota = grpc_resource_quota_create("spanfence-otlp-receiver");
    grpc_resource_quota_resize(srv->quota, quota);

    memset(args, 0, sizeof(args));
#define INT_ARG(k, v) do { \
        args[cargs.num_args].type = GRPC_ARG_INTEGER; \
        args[cargs.num_args].key = (char *)(k); \
        args[cargs.num_args++].value.integer = (int)(v); \
    } while (0)
    INT_ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, srv->max_msg);
    /* gRPC enables SO_REUSEPORT by default: a second collector on the same
     * port would start silently and take half the connections. */
    INT_ARG(GRPC_ARG_ALLOW_REUSEPORT, 0);
    INT_ARG(GRPC_ARG_MAX_CONCURRENT_STREAMS, srv->cfg->max_concurrent_streams);
    /* A stream waiting for a slot may hold this much of its message; BDP
     * probing would grow it to megabytes per stream. */
    INT_ARG(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, STREAM_LOOKAHEAD);
    INT_ARG(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    /* gRPC grows a connection's read buffer up to 4 MiB by default. */
    INT_ARG(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, TCP_MAX_READ_CHUNK);
    INT_ARG(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, HANDSHAKE_TIMEOUT_MS);
    INT_ARG(GRPC_ARG_KEEPALIVE_TIME_MS, ka->time > 0 ? ka->time : INT32_MAX);
    INT_ARG(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ka->timeout);
    if (ka->max_connection_idle > 0)
        INT_ARG(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ka->max_connection_idle);
    if (ka->max_connection_age > 0)
        INT_ARG(GRPC_ARG_MAX_CONNECTION_AGE_MS, ka->max_connection_age);
    if (ka->max_connection_age_grace > 0)
        INT_ARG(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, ka->max_connection_age_grace);
    INT_ARG(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kp->min_time);
    INT_ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, kp->permit_without_stream ? 1 : 0);
#undef INT_ARG
    args[cargs.num_args].type = GRPC_ARG_POINTER;
    args[cargs.num_args].key = (char *)GRPC_ARG_RESOURCE_QUOTA;
    args[cargs.num_args].value.pointer.p = srv->quota;
    args[cargs.num_args++].value.pointer.vtable = grpc_resource_quota_arg_vtable();
    srv->server = grpc_server_create(&cargs, NULL);
    srv->method = grpc_server_register_method(srv->server, EXPORT_METHOD, NULL,
                                              GRPC_SRM_PAYLOAD_NONE, 0);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        w->srv = srv;
        w->cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(srv->server, w->cq, NULL);
        sf_dynbuf_init(&w->rx, srv->max_msg);
        w->arena = sf_arena_create(ARENA_CHUNK, srv->max_msg * 16 + ARENA_CHUNK);
        if (w->arena == NULL)
            return SF_ENOMEM;       /* shutdown() cleans up what exists */
    }
    /* gRPC core reports a port in use with a long status blob: say it in
     * one line first */
    if (sf_net_bind_problem(srv->cfg->endpoint, why, sizeof(why)) != NULL) {
        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s': %s",
                 sf_component_id(srv->self), srv->cfg->endpoint, why);
        return SF_IO;
    }
    creds = grpc_insecure_server_credentials_create();
    port = grpc_server_add_http2_port(srv->server, srv->cfg->endpoint, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s' (address in use or invalid)",
                 sf_component_id(srv->self), srv->cfg->endpoint);
        return SF_IO;
    }
    grpc_server_start(srv->server);
    srv->started = true;
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        for (unsigned k = 0; k <= SLOTS; k++) {
            call_slot *s = &w->slots[k];
            s->w = w;
            s->catch_all = k == SLOTS;
            s->status_details = grpc_empty_slice();
            slot_post(s);
        }
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return SF_ENOMEM;
        w->running = true;
    }
    sf_info("receiver '%s': OTLP/gRPC listening on %s (port %d; %u workers, %lld streams per "
            "connection, %zu MiB resource quota)", sf_component_id(srv->self), srv->cfg->endpoint,
            port, srv->n_workers, (long long)srv->cfg->max_concurrent_streams, quota >> 20);
    return SF_OK;
}

static bool wait_shutdown(sf_receiver_grpc *srv, int64_t ms)
{
    int64_t until = sf_deadline_ms(ms);
    bool done;

    pthread_mutex_lock(&srv->lock);
    while (!srv->shutdown_done)
        if (!sf_cond_wait_until(&srv->cond, &srv->lock, until))
            break;
    done = srv->shutdown_done;
    pthread_mutex_unlock(&srv->lock);
    return done;
}

void sf_receiver_grpc_shutdown(sf_receiver_grpc *srv)
{
    if (srv->server == NULL)
        goto out_grpc;

    pthread_mutex_lock(&srv->post_lock);
    srv->stopping = true;
    pthread_mutex_unlock(&srv->post_lock);

    if (srv->started && srv->n_workers > 0 && srv->workers[0].running) {
        grpc_server_shutdown_and_notify(srv->server, srv->workers[0].cq, &srv->shutdown_tag);
        if (!wait_shutdown(srv, SHUTDOWN_GRACE_MS)) {
            /* A client that opened a call and never finished it would hold
             * shutdown forever. */
            sf_warn("receiver '%s': calls still open after %d ms, cancelling them",
                    sf_component_id(srv->self), SHUTDOWN_GRACE_MS);
            grpc_server_cancel_all_calls(srv->server);
            /* The server may be destroyed only once shutdown completed;
             * cancelling completes it, so keep waiting (and saying so). */
            while (!wait_shutdown(srv, SHUTDOWN_GRACE_MS)) {
                sf_warn("receiver '%s': gRPC server shutdown still pending, cancelling again",
                        sf_component_id(srv->self));
                grpc_server_cancel_all_calls(srv->server);
            }
        }
    } else {
        /* Never started (or no thread to see the tag): nothing in flight. */
        grpc_server_cancel_all_calls(srv->server);
    }
    grpc_server_destroy(srv->server);
    srv->server = NULL;

    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        if (w->cq == NULL)
            continue;
        grpc_completion_queue_shutdown(w->cq);
        if (w->running) {
            pthread_join(w->thread, NULL);
            w->running = false;
        } else {
            /* Drain the queue ourselves. */
            while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                              NULL).type != GRPC_QUEUE_SHUTDOWN)
                ;
        }
        for (unsigned k = 0; k <= SLOTS; k++)
            if (w->slots[k].call != NULL || w->slots[k].replying)
                slot_clear(&w->slots[k]);
        grpc_completion_queue_destroy(w->cq);
        w->cq = NULL;
    }
out_grpc:
    if (srv->quota != NULL) {
        grpc_resource_quota_unref(srv->quota);
        srv->quota = NULL;
    }
    if (srv->grpc_inited) {
        sf_grpc_shutdown();
        srv->grpc_inited = false;
    }
}

void sf_receiver_grpc_destroy(sf_receiver_grpc *srv)
{
    if (srv == NULL)
        return;
    sf_receiver_grpc_shutdown(srv);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        sf_arena_destroy(srv->workers[i].arena);
        sf_dynbuf_release(&srv->workers[i].rx);
    }
    pthread_mutex_destroy(&srv->post_lock);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    sf_free(srv->workers);
    sf_free(srv);
}
