/* receivers/otlp/receiver_grpc.c: the gRPC call of the `otlp` receiver's
 * OTLP/gRPC server: its headers, the 5-byte message framing (compression
 * flag), grpc-status and its trailers, and a complete message turned into
 * an OTLP request for the core (sf_component_emit). The HTTP/2 connection
 * it runs on is h2_conn.c (which calls up through the h2_up table h2_server.c
 * fills with grpc_call.h's functions); sockets,
 * accept, workers and caps are h2_server.c. The server is unary Export over
 * HTTP/2 on libnghttp2 (Debian's, which gets security fixes), in
 * spanfence's own epoll loop. gRPC core stays on the exporter side only.
 *
 * DESIGN
 * - Why not gRPC core here: Debian's gRPC 1.51 has none of the 2023 HTTP/2
 *   fixes (rapid reset, CONTINUATION, header-list and HPACK bombs, EMFILE
 *   on accept), and its quota covers neither pending calls nor the HPACK
 *   parser. Debian's libnghttp2 1.52.0+deb12u3 carries the CVE-2023-44487,
 *   CVE-2024-28182 and 2026 fixes and exposes the flood limits, which are
 *   all turned on below (stream reset rate, CONTINUATION count, SETTINGS
 *   and outbound ACK caps); the header list is capped in grpc_on_header.
 * - `workers` threads, each with its own epoll set holding the one
 *   listening socket (EPOLLEXCLUSIVE: a connection wakes one worker) and
 *   the connections it accepted. A connection lives on one thread; the
 *   pipeline runs on it (sf_component_emit) when a call's message is
 *   complete, into that worker's arena, reset after every call. No slot is
 *   held while the answer is written: the answer (a few dozen bytes) is
 *   handed to nghttp2 and the worker goes on. An answer not written within
 *   REPLY_TIMEOUT_MS (a peer that never opens its window) is cancelled
 *   (RST_STREAM) and its stream freed; a connection whose output has not
 *   drained for WRITE_STALL_MS is closed; while output waits, the
 *   connection is not read (nothing more to answer piles up).
 * - Messages are held whole (the codec reads one contiguous request), so
 *   what may be buffered is bounded by flow control, not by trust: streams
 *   open with a STREAM_WINDOW window, and a stream's WINDOW_UPDATE is held
 *   back while its worker buffers more than its share of the memory limit
 *   (budget), so waiting streams cost at most their window. A stream that
 *   has its buffer gets a window of its whole message (one WINDOW_UPDATE,
 *   not one per 32 KiB). The connection window is returned at once (one
 *   waiting stream cannot block another). Each worker keeps SPARES message
 *   buffers of up to 1 MiB between calls (a fresh one is an mmap: a page
 *   fault per 4 KiB and a munmap per call), and take the codec's output
 *   buffers from the pool of warm ones (sf_buf_pool_use, sf_request.h): a
 *   buffer goes back to it once its exporters have sent it and is written
 *   again with its pages in place (page faults in the codec's writes were
 *   most of what this receiver cost above gRPC core's). The pool's idle
 *   buffers are counted, bounded, and freed at the next tick while memory
 *   is short.
 * - Per-call cost: a connection's frames are gathered into one send() per
 *   turn (an answer is HEADERS, DATA and trailers).
 * - Everything is counted: message buffers through sf_dynbuf (refused at
 *   the hard limit: the stream then only counts its spans), and nghttp2's
 *   own memory through a custom nghttp2_mem on sf_calloc_unlimited /
 *   sf_realloc_unlimited (counted, never refused: its size is capped by
 *   the protocol limits and connection caps, and a failure would only drop
 *   a connection).
 * - When memory is short the call is refused (UNAVAILABLE) and its spans
 *   are counted over its bytes (sf_count_inflate.h: inflated when
 *   compressed, up to the size limit, charged to the client), so received =
 *   accepted + refused holds. But first the partial messages held pay for
 *   it (h2_worker_reclaim): those of clients over their share of the bytes
 *   held for incomplete messages (otlp_limit.h, shared with the HTTP
 *   server, which a worker asks to reclaim when the client over its share
 *   holds there), then the most bytes with the least recent progress
 *   first, until 1/RECLAIM_HEADROOM of the soft limit is free. A call
 *   whose client went silent is answered UNAVAILABLE at once; one waiting
 *   for our window or still sending is counted from then on and answered
 *   when complete. A complete call that still finds memory short waits
 *   PARK_MS (parked) while the other workers, poked through an eventfd,
 *   reclaim theirs; every worker also reclaims at its tick. A whole-message
 *   buffer is not taken while memory has no room for it below the soft
 *   limit (the stream waits on its window, and is refused at the tick if
 *   memory stays short); waiting streams are admitted the client holding
 *   least first, and one of a client under its share asks for its room
 *   (otlp_limit.h sf_otlp_want: clients holding more are then over their
 *   share and pay first) and waits DEFER_WAIT_MS for it (h2_conn.c
 *   worker_settle_deferred). Counted in spanfence_receiver_reclaimed_*.
 * - Connections are capped in all (max_connections, and at most what a
 *   quarter of the hard limit holds at CONN_COST each: an nghttp2 session
 *   is about 27 KiB, so 1,024 idle connections would take 40% of a 64 MiB
 *   limit and push the memory limiter into refusing real calls) and per
 *   peer address (max_connections_per_peer): a connection past a cap takes the place of
 *   the worker's connection making the least progress (h2_conn_victim: calls
 *   held open without progress, then handshakes, then idle ones; not one
 *   whose bytes wait unread), or is closed.
 * - CPU floods are bounded per connection (h2_conn.c LIM_*): WINDOW_UPDATE,
 *   empty DATA, PRIORITY and the resets we send past a rate get GOAWAY
 *   ENHANCE_YOUR_CALM. Decompression is bounded per client, across its
 *   connections and both servers (otlp_limit.h SF_OTLP_INFLATE_*): a call
 *   past the client's rate is refused RESOURCE_EXHAUSTED before it is
 *   inflated, the connection closed if its client goes on
 *   (spanfence_receiver_closed_connections).
 *   One that has not sent its preface within HANDSHAKE_TIMEOUT_MS is
 *   closed; keepalive server_parameters and enforcement_policy keep their
 *   gRPC meaning (ping after `time`, close after `timeout`, GOAWAY after
 *   max_connection_idle / max_connection_age (+ grace), too_many_pings).
 * - accept() failing for want of fds or memory (EMFILE, ENFILE, ENOMEM,
 *   ENOBUFS) frees the worker's longest-idle connection, takes the
 *   listening socket out of that worker's epoll set for a backoff (50 ms
 *   doubling to 1 s), and is logged once until an accept succeeds again;
 *   the listener never stops. */
#include "grpc_call.h"
#include "h2_conn.h"
#include "otlp_answer.h"
#include "sf_arena.h"
#include "sf_net.h"
#include "sf_count_inflate.h"
#include "sf_time.h"
#include "sf_zlib.h"

#include <stdio.h>
#include <string.h>

#include <nghttp2/nghttp2.h>


/* Messages up to this size get their exact buffer at once, before the
 * budget is asked (h2_stream_consume asks it for the larger ones). */
#define SMALL_MESSAGE (64 * 1024)

/* The signal of a call's method (traces for anything not logs/metrics,
 * which is refused before any item is counted). */
static sf_signal kind_signal(unsigned kind)
{
    return kind == KIND_LOGS ? SF_SIGNAL_LOGS : kind == KIND_METRICS ? SF_SIGNAL_METRICS
                                                                     : SF_SIGNAL_TRACES;
}

/* gRPC's grpc-message is percent-encoded (outside printable ASCII, '%'). */
static void percent_encode(const char *in, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)in; *p != '\0' && o + 4 < size; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '%') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), \
                   NGHTTP2_NV_FLAG_NO_COPY_NAME }

/* The OK answer's one message (an empty ExportTraceServiceResponse, 5 bytes
 * of gRPC framing), then the trailers. */
static ssize_t reply_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                          uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    h2_stream *s = src->ptr;
    nghttp2_nv trailers[] = { NV("grpc-status", "0") };

    (void)ud;
    if (len < 5)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    memset(buf, 0, 5);
    s->data_sent = true;
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (nghttp2_submit_trailer(ng, id, trailers, 1) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return 5;
}

/* Answer a call: OK with its message, or trailers only with the status. */
void grpc_stream_answer(h2_stream *s, int code, const char *why)
{
    h2_conn *c = s->c;
    char status[12], message[sizeof(s->message) * 3];

    if (s->answered)
        return;
    s->answered = true;
    h2_stream_unpark(s);
    s->status = code;
    s->progress_ms = sf_now_ms();
    c->ping_strikes = 0;            /* as gRPC: sending resets the ping strikes */
    h2_stream_drop_message(s);
    h2_worker_undefer(c->w);
    if (code == SF_RPC_OK) {
        nghttp2_nv hdrs[] = { NV(":status", "200"), NV("content-type", "application/grpc") };
        nghttp2_data_provider dp = { .source.ptr = s, .read_callback = reply_read };

        nghttp2_submit_response(c->ng, s->id, hdrs, 2, &dp);
        return;
    }
    snprintf(status, sizeof(status), "%d", code);
    percent_encode(why != NULL ? why : "", message, sizeof(message));
    {
        nghttp2_nv hdrs[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
                              NV("grpc-status", status), NV("grpc-message", message) };

        nghttp2_submit_response(c->ng, s->id, hdrs, why != NULL ? 4 : 3, NULL);
    }
    /* The client may still be sending: what it sends is not read into
     * memory (answered streams drop their data), and nghttp2 ends the
     * stream with RST_STREAM NO_ERROR once the answer is out. */
}

static void stream_answer_status(h2_stream *s, sf_status st, const char *why)
{
    const sf_otlp_answer *a = sf_otlp_answer_of(st);

    grpc_stream_answer(s, a->grpc, why != NULL ? why : a->message);
}

/* Refuse a call, counted: with the spans counted so far when its message
 * was being counted (refusing), else none (nothing of it was decoded). */
void grpc_stream_refuse(h2_stream *s, sf_reason reason, int code, const char *why)
{
    size_t items = s->refusing ? sf_count_inflate_items(&s->count) : 0;

    sf_component_refuse(s->c->w->srv->env.self, SF_TRANSPORT_GRPC, kind_signal(s->kind), items,
                        reason);
    grpc_stream_answer(s, code, why);
}

/* Count spans over a refused message's bytes, inflating when compressed
 * (at most max_msg bytes: a bomb is not inflated past the size limit just
 * to count it), charged to its client's decompression. */
static void stream_count(h2_stream *s, const uint8_t *p, size_t n)
{
    size_t inflated = sf_count_inflate_feed(&s->count, p, n);

    if (inflated > 0)
        sf_otlp_inflate_charge_client(s->c->w->srv->env.clients, s->c->client, inflated,
                                      s->c->last_read_ms);
}

/* (Re)start counting the message: compressed when its prefix says so. A
 * stream refused before its first prefix is in starts again at the prefix
 * (nothing was counted yet). */
static void stream_count_start(h2_stream *s)
{
    sf_count_coding coding = (s->flags & 1) ? s->enc : SF_COUNT_IDENTITY;

    sf_count_inflate_init(&s->count, kind_signal(s->kind), false, coding, s->c->w->srv->max_msg);
}

/* From now on the message is counted, not kept. */
void grpc_stream_start_refusing(h2_stream *s)
{
    if (s->refusing)
        return;
    s->refusing = true;
    stream_count_start(s);
    stream_count(s, (const uint8_t *)sf_dynbuf_ptr(&s->msg), sf_dynbuf_len(&s->msg));
    h2_stream_drop_message(s);
    h2_worker_undefer(s->c->w);
}

/* gRPC core 1.51 clients and upstream's exporters may send zstd under a
 * grpc-encoding we do not serve; said plainly (as before). */
static bool looks_zstd(const uint8_t *p, size_t len)
{
    return len >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/* A call's message is complete: decode, run the pipeline, answer. */
void grpc_stream_finish(h2_stream *s)
{
    sf_receiver_grpc *srv = s->c->w->srv;
    worker *w = s->c->w;
    const uint8_t *bytes;
    uint8_t *inflated = NULL;
    size_t len;
    sf_request batch;
    sf_status st;

    if (s->answered)
        return;
    if (s->messages == 0 || (s->prefix_got > 0 && s->prefix_got < 5)) {
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INVALID_ARGUMENT, "missing request message");
        return;
    }
    if (s->msg_got < s->msg_len) {
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "grpc: the request message ended before its length");
        return;
    }
    if (!s->refusing && !sf_component_may_accept(srv->env.self)) {
        /* Memory is short: partial messages pay for it before a complete
         * call is refused, this worker's now, the other workers' within
         * PARK_MS (poked now, and each reclaims at its tick); clients
         * holding more than this one first of all (sf_otlp_want). */
        sf_otlp_want(srv->env.clients, s->c->client, 0, sf_now_ms());
        h2_worker_reclaim(w, s);
        if (!sf_component_may_accept(srv->env.self)) {
            int64_t now = sf_now_ms();

            if (s->park_deadline_ms == 0) {
                s->park_deadline_ms = now + PARK_MS;
                h2_workers_poke_others(w, false);
                if (srv->peer_reclaim != NULL &&
                    !sf_otlp_over_share(srv->env.clients, s->c->client))
                    srv->peer_reclaim(srv->peer);   /* the HTTP uploads too */
            }
            if (now < s->park_deadline_ms) {
                h2_stream_park(s);
                return;
            }
            grpc_stream_start_refusing(s);
        }
    }
    if (s->refusing) {
        /* Refused before it is decoded; its spans are still counted, so
         * the refusal is visible in span terms. */
        sf_component_refuse(srv->env.self, SF_TRANSPORT_GRPC, kind_signal(s->kind),
                            sf_count_inflate_items(&s->count),
                            SF_REASON_MEMORY_LIMIT);
        stream_answer_status(s, SF_MEMLIMIT, NULL);
        return;
    }
    bytes = (const uint8_t *)sf_dynbuf_ptr(&s->msg);
    len = sf_dynbuf_len(&s->msg);
    if (s->flags & 1) {
        unsigned slot;

        /* Decompression is paid per client: one inflating more than its
         * share a second is refused before it costs more. */
        if (!h2_conn_inflate_open(s->c, &slot)) {
            grpc_stream_refuse(s, SF_REASON_TOO_LARGE, SF_RPC_RESOURCE_EXHAUSTED,
                               "decompression rate of this client exceeded: send less "
                               "compressed data a second, or uncompressed; retry later");
            return;
        }
        st = sf_inflate(bytes, len, srv->max_msg, &inflated, &len);
        sf_otlp_inflate_charge(srv->env.clients, slot, st == SF_OK ? len : st == SF_TOOBIG
                               ? srv->max_msg : sf_dynbuf_len(&s->msg));
        if (st == SF_TOOBIG) {
            grpc_stream_refuse(s, SF_REASON_TOO_LARGE, SF_RPC_RESOURCE_EXHAUSTED,
                          "grpc: received message after decompression larger than max");
            return;
        }
        if (st == SF_ENOMEM) {
            grpc_stream_start_refusing(s);
            sf_component_refuse(srv->env.self, SF_TRANSPORT_GRPC, kind_signal(s->kind),
                                sf_count_inflate_items(&s->count), SF_REASON_MEMORY_LIMIT);
            stream_answer_status(s, SF_MEMLIMIT, NULL);
            return;
        }
        if (st != SF_OK) {
            grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                          "grpc: failed to decompress the received message");
            return;
        }
        bytes = inflated;
    }
    /* The codec's pass inside emit is also the validation: a malformed
     * request comes back SF_INVALID with nothing of it queued. */
    sf_request_init_signal(&batch, w->arena, kind_signal(s->kind), bytes, len, srv->env.max_depth);
    batch.client = s->c->client;    /* the queues' shares */
    st = sf_component_emit(srv->env.self, SF_TRANSPORT_GRPC, &batch);
    if (st == SF_INVALID) {
        char why[160];
        int code = sf_otlp_answer_of(st)->grpc;

        snprintf(why, sizeof(why), "request is not a valid %s: %s",
                 sf_otlp_request_name(kind_signal(s->kind)),
                 batch.stats.error != NULL ? batch.stats.error : "malformed");
        if (looks_zstd(bytes, len)) {
            code = SF_RPC_UNIMPLEMENTED;
            snprintf(why, sizeof(why), "the message looks zstd-compressed: grpc-encoding zstd "
                     "is not supported over gRPC here (gzip, deflate or identity; zstd over "
                     "OTLP/HTTP)");
        }
        sf_request_release(&batch);
        sf_free(inflated);
        sf_arena_reset(w->arena);
        grpc_stream_answer(s, code, why);
        return;
    }
    sf_request_release(&batch);
    sf_free(inflated);
    sf_arena_reset(w->arena);
    stream_answer_status(s, st, NULL);
}

/* Headers complete: answer at once what will not be served. */
void grpc_stream_headers_done(h2_stream *s)
{
    sf_receiver_grpc *srv = s->c->w->srv;
    char why[96];

    if (!s->post || !s->grpc_type) {
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "not a gRPC request (POST with content-type application/grpc)");
        return;
    }
    if (s->kind != KIND_OTHER && !sf_component_receives(srv->env.self, kind_signal(s->kind))) {
        sf_signal other = kind_signal(s->kind);

        /* As upstream's receiver, which registers a signal's service only
         * when a pipeline of it lists the receiver: UNIMPLEMENTED (the SDK
         * does not retry it), saying why, and counted. */
        sf_component_unexported(srv->env.self, SF_TRANSPORT_GRPC, other);
        snprintf(why, sizeof(why), "no %s pipeline lists this receiver: send %s elsewhere",
                 sf_signal_name(other), sf_signal_name(other));
        grpc_stream_answer(s, SF_RPC_UNIMPLEMENTED, why);
        return;
    }
    if (s->kind == KIND_OTHER) {
        grpc_stream_answer(s, SF_RPC_UNIMPLEMENTED,
                      "unknown method: spanfence serves the Export methods of "
                      "TraceService, LogsService and MetricsService only");
        return;
    }
    if (s->enc_other) {
        /* grpc-go's answer and words (rpc_util.go checkRecvPayload). */
        snprintf(why, sizeof(why), "grpc: Decompressor is not installed for grpc-encoding \"%s\"",
                 s->enc_name);
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_UNIMPLEMENTED, why);
    }
}

/* A message's 5-byte prefix is in: check it as grpc-go does. */
static bool stream_prefix_done(h2_stream *s)
{
    sf_receiver_grpc *srv = s->c->w->srv;
    char why[120];

    s->messages++;
    s->flags = s->prefix[0];
    s->msg_len = (uint32_t)s->prefix[1] << 24 | (uint32_t)s->prefix[2] << 16 |
                 (uint32_t)s->prefix[3] << 8 | s->prefix[4];
    s->msg_got = 0;
    if (s->messages > 1) {
        /* A unary call carries one message: gRPC's status code table names
         * this cardinality violation UNIMPLEMENTED. */
        h2_stream_drop_message(s);
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_UNIMPLEMENTED,
                      "grpc: more than one request message in a unary call");
        return false;
    }
    if (s->flags & ~1u) {
        snprintf(why, sizeof(why), "grpc: received unexpected payload format %u", s->flags);
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL, why);
        return false;
    }
    if ((s->flags & 1) && s->enc == SF_COUNT_IDENTITY) {
        grpc_stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "grpc: compressed flag set with identity or empty encoding");
        return false;
    }
    if (s->msg_len > srv->max_msg) {
        snprintf(why, sizeof(why), "grpc: received message larger than max (%u vs. %zu)",
                 s->msg_len, srv->max_msg);
        grpc_stream_refuse(s, SF_REASON_TOO_LARGE, SF_RPC_RESOURCE_EXHAUSTED, why);
        return false;
    }
    if (s->refusing)
        stream_count_start(s);      /* refused before its prefix: now its coding is known */
    else if (s->msg.buf == NULL && s->c->w->n_spare > 0)
        s->msg = s->c->w->spare[--s->c->w->n_spare];
    return true;                    /* its buffer is reserved in h2_stream_consume */
}

/* ---- nghttp2 callbacks of the call --------------------------------------------- */

/* grpc-timeout: up to 8 digits and a unit (H M S m u n). */
static int64_t parse_timeout(const uint8_t *v, size_t n)
{
    int64_t x = 0;

    if (n < 2 || n > 9)
        return 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
        x = x * 10 + (v[i] - '0');
    }
    switch (v[n - 1]) {
    case 'H': return x * 3600000;
    case 'M': return x * 60000;
    case 'S': return x * 1000;
    case 'm': return x;
    case 'u': return x / 1000 + 1;
    case 'n': return x / 1000000 + 1;
    default: return 0;
    }
}

#define IS(name, lit) (name##len == sizeof(lit) - 1 && memcmp(name, lit, sizeof(lit) - 1) == 0)

int grpc_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    h2_stream *s;

    (void)flags;
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (s == NULL)
        return 0;
    if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;                   /* trailers from the client: ignored */
    s->hdr_bytes += namelen + valuelen + 32;
    if (s->hdr_bytes > MAX_HEADER_LIST)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;   /* RST_STREAM: nothing kept */
    if (IS(name, ":path")) {
        /* the signals' Export methods (sf_signal.c), by kind */
        static const int kinds[SF_SIGNAL_COUNT] = {
            [SF_SIGNAL_TRACES] = KIND_EXPORT, [SF_SIGNAL_LOGS] = KIND_LOGS,
            [SF_SIGNAL_METRICS] = KIND_METRICS,
        };

        s->kind = KIND_OTHER;
        for (int g = 0; g < SF_SIGNAL_COUNT; g++) {
            const char *m = sf_signal_grpc_method((sf_signal)g);

            if (valuelen == strlen(m) && memcmp(value, m, valuelen) == 0)
                s->kind = kinds[g];
        }
    } else if (IS(name, ":method")) {
        s->post = IS(value, "POST");
    } else if (IS(name, "content-type")) {
        s->grpc_type = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                       (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (IS(name, "grpc-encoding")) {
        s->enc = IS(value, "gzip") ? SF_COUNT_GZIP : IS(value, "deflate") ? SF_COUNT_DEFLATE
               : SF_COUNT_IDENTITY;
        s->enc_other = !IS(value, "identity") && s->enc == SF_COUNT_IDENTITY;
        snprintf(s->enc_name, sizeof(s->enc_name), "%.*s", (int)(valuelen < 20 ? valuelen : 20),
                 (const char *)value);
    } else if (IS(name, "grpc-timeout")) {
        int64_t ms = parse_timeout(value, valuelen);
        if (ms > 0)
            s->deadline_ms = sf_now_ms() + ms;
    }
    return 0;
}

int grpc_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);

    (void)flags;
    /* The connection window is returned at once; the stream's when the
     * worker's budget allows (h2_stream_consume). */
    nghttp2_session_consume_connection(ng, len);
    if (s == NULL)
        return 0;
    if (s->answered) {
        nghttp2_session_consume_stream(ng, id, len);
        return 0;
    }
    s->progress_ms = c->last_read_ms;
    s->unconsumed += len;
    while (len > 0 && !s->answered) {
        if (s->prefix_got < 5) {
            size_t k = 5 - s->prefix_got < len ? 5 - s->prefix_got : len;

            memcpy(s->prefix + s->prefix_got, data, k);
            s->prefix_got += (unsigned)k;
            data += k;
            len -= k;
            if (s->prefix_got == 5 && !stream_prefix_done(s))
                break;
            continue;
        }
        {
            size_t k = s->msg_len - s->msg_got < len ? s->msg_len - s->msg_got : len;

            /* Memory short: the message would be refused when complete, so
             * it is counted from now on instead of buffered (thousands of
             * streams' windows would otherwise fill memory to the hard
             * limit, where RSS passes it by the process's own size). Not a
             * message admitted with its whole buffer (s->reserved): its
             * bytes cost nothing more, and it was given that room; it is
             * reclaimed as any partial message is, in its client's turn. */
            if (!s->refusing && !s->reserved && k > 0 &&
                !sf_component_may_accept(c->w->srv->env.self)) {
                /* Partial messages held without progress pay first. A
                 * small message (its exact buffer, reclaimable itself
                 * while partial) and the piece that completes a message
                 * are kept: grpc_stream_finish then waits for memory, or
                 * refuses. */
                sf_otlp_want(c->w->srv->env.clients, c->client, k, sf_now_ms());
                h2_worker_reclaim(c->w, s);
                if (s->msg_len > SMALL_MESSAGE && s->msg_got + k < s->msg_len &&
                    !sf_component_may_accept(c->w->srv->env.self))
                    grpc_stream_start_refusing(s);
            }
            if (!s->refusing && k > 0 && sf_dynbuf_len(&s->msg) == 0 && !s->reserved &&
                s->msg_len <= SMALL_MESSAGE)
                (void)sf_dynbuf_reserve(&s->msg, s->msg_len);   /* small: exact at once */
            if (s->refusing)
                stream_count(s, data, k);
            else if (sf_dynbuf_add(&s->msg, data, k) != SF_OK) {
                grpc_stream_start_refusing(s);   /* past the hard limit: counted, not kept */
                stream_count(s, data, k);   /* the piece that did not fit, too */
            }
            s->msg_got += k;
            data += k;
            len -= k;
            if (s->msg_got == s->msg_len)
                s->prefix_got = 0;          /* a next message, if any, is refused */
        }
    }
    if (s->answered) {
        nghttp2_session_consume_stream(ng, id, s->unconsumed);
        s->unconsumed = 0;
        return 0;
    }
    h2_stream_consume(s);
    return 0;
}
