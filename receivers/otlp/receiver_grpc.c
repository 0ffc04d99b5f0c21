/* receivers/otlp/receiver_grpc.c: the OTLP/gRPC server of the `otlp`
 * receiver: unary Export over HTTP/2 on libnghttp2 (Debian's, which gets
 * security fixes), in spanfence's own epoll loop. gRPC core stays on the
 * exporter side only.
 *
 * DESIGN
 * - Why not gRPC core here: Debian's gRPC 1.51 has none of the 2023 HTTP/2
 *   fixes (rapid reset, CONTINUATION, header-list and HPACK bombs, EMFILE
 *   on accept), and its quota covers neither pending calls nor the HPACK
 *   parser. Debian's libnghttp2 1.52.0+deb12u3 carries the CVE-2023-44487,
 *   CVE-2024-28182 and 2026 fixes and exposes the flood limits, which are
 *   all turned on below (stream reset rate, CONTINUATION count, SETTINGS
 *   and outbound ACK caps); the header list is capped in on_header.
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
 *   are counted over its bytes (inflated first when gzip), so received =
 *   accepted + refused holds. But first the partial messages held pay for
 *   it (worker_reclaim): the most bytes with the least recent progress
 *   first, until 1/RECLAIM_HEADROOM of the soft limit is free. A call
 *   whose client went silent is answered UNAVAILABLE at once; one waiting
 *   for our window or still sending is counted from then on and answered
 *   when complete. A complete call that still finds memory short waits
 *   PARK_MS (parked) while the other workers, poked through an eventfd,
 *   reclaim theirs; every worker also reclaims at its tick. A whole-message
 *   buffer is not taken while memory has no room for it below the soft
 *   limit (the stream waits on its window, and is refused at the tick if
 *   memory stays short). Counted in spanfence_receiver_reclaimed_*.
 * - Connections are capped in all (max_connections, and at most what a
 *   quarter of the hard limit holds at CONN_COST each: an nghttp2 session
 *   is about 27 KiB, so 1,024 idle connections would take 40% of a 64 MiB
 *   limit and push the memory limiter into refusing real calls) and per
 *   peer address (max_connections_per_peer): a connection past a cap takes the place of
 *   the worker's longest-idle connection (no call open), or is closed.
 *   One that has not sent its preface within HANDSHAKE_TIMEOUT_MS is
 *   closed; keepalive server_parameters and enforcement_policy keep their
 *   gRPC meaning (ping after `time`, close after `timeout`, GOAWAY after
 *   max_connection_idle / max_connection_age (+ grace), too_many_pings).
 * - accept() failing for want of fds or memory (EMFILE, ENFILE, ENOMEM,
 *   ENOBUFS) frees the worker's longest-idle connection, takes the
 *   listening socket out of that worker's epoll set for a backoff (50 ms
 *   doubling to 1 s), and is logged once until an accept succeeds again;
 *   the listener never stops. */
#define _GNU_SOURCE                 /* accept4, sched_getaffinity, CPU_COUNT */
#include "receiver_grpc.h"
#include "otlp_answer.h"
#include "sf_arena.h"
#include "sf_dynbuf.h"
#include "sf_net.h"
#include "sf_otlp_count.h"
#include "sf_time.h"
#include "sf_zlib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <zlib.h>

#define EXPORT_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define METRICS_METHOD "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
#define LOGS_METHOD "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

/* Window a stream opens with (and keeps while its worker is over budget).
 * Large enough for an engine's usual call to arrive whole: with 64 KiB a
 * 100-span call (about 97 KB) waited for a WINDOW_UPDATE each time, one
 * more send, wake-up and read per call (engine benchmark: 4-10% more
 * collector CPU per call and a higher p50). gRPC core and grpc-go grow
 * their windows past this by BDP probing. */
#define STREAM_WINDOW (256 * 1024)
/* Messages up to this size get their exact buffer at once, before the
 * budget is asked (stream_consume asks it for the larger ones). */
#define SMALL_MESSAGE (64 * 1024)
/* Connection window: returned at once, so large enough for many streams. */
#define CONN_WINDOW (4 * 1024 * 1024)
/* Decoded request headers, like gRPC's default (names + values + 32 each). */
#define MAX_HEADER_LIST 16384
/* nghttp2 flood limits (CVE-2023-44487, CVE-2024-28182). A client that
 * cancels calls faster than this, sustained, gets GOAWAY. */
#define RST_BURST 200
#define RST_RATE 50
#define MAX_CONTINUATIONS 8
#define MAX_SETTINGS 32
#define MAX_OUTBOUND_ACK 100
/* A connection that has not sent its HTTP/2 preface by then is closed. */
#define HANDSHAKE_TIMEOUT_MS 10000
/* An answer not written by then is cancelled (RST_STREAM CANCEL). */
#define REPLY_TIMEOUT_MS 10000
/* Output that has not drained for this long closes the connection. */
#define WRITE_STALL_MS 20000
/* A call whose message makes no progress for this long is ended. */
#define STREAM_STALL_MS 30000
/* A complete call that finds memory short waits this long (parked) for
 * the other workers to reclaim the partial messages they hold, before it
 * is refused. Two ticks: every worker reclaims at its tick too. */
#define PARK_MS (2 * TICK_MS)
/* Reclaiming goes on until this share of the soft limit is free again
 * (1/RECLAIM_HEADROOM), so the next complete call finds room even while
 * the holders take back what they can. */
#define RECLAIM_HEADROOM 16
/* A reclaimed call whose client has sent nothing on the connection for
 * this long, with the window open and the connection read, is answered at
 * once; others (waiting for our window, or a client busy with other
 * streams) are counted from then on and answered UNAVAILABLE when
 * complete, so a client that goes on gets its answer and its spans are
 * counted (received = accepted + refused). */
#define RECLAIM_STALL_MS 1000
/* What a worker reads from one connection before serving the others:
 * READS_PER_TURN reads of READ_CHUNK. A chunk holds a 100-span call
 * (about 97 KB) whole, so such a call costs one recv(), not two. */
#define READ_CHUNK (128 * 1024)
/* Frames are gathered for one send() while this much room is left. */
#define OUT_FRAME_MAX (16384 + 64)
#define READS_PER_TURN 2
#define TICK_MS 100
/* Message buffers a worker keeps between calls, and the largest it keeps. */
#define SPARES 2
#define SPARE_MAX_BYTES ((size_t)1024 * 1024)
/* Output a connection may have waiting (it is not read meanwhile). */
#define MAX_PENDING_OUT (1024 * 1024)
#define ARENA_CHUNK (1024 * 1024)
#define SHUTDOWN_GRACE_MS 5000
#define ACCEPT_BACKOFF_MIN_MS 50
#define ACCEPT_BACKOFF_MAX_MS 1000
#define ACCEPT_LOG_MS 10000
/* Buffered message bytes per worker when no memory_limiter runs. */
#define DEFAULT_BUDGET ((size_t)64 << 20)
#define PEER_BUCKETS 4096
/* What a connection is taken to cost (its nghttp2 session, measured about
 * 27 KiB counted), for the cap the memory limit puts on connections. */
#define CONN_COST ((size_t)32 * 1024)
/* Pings a client may send too often before GOAWAY too_many_pings (gRPC's). */
#define MAX_PING_STRIKES 2
/* grpc/status.h's, which otlp_answer.h has no use for. */
#define RPC_DEADLINE_EXCEEDED 4

typedef struct worker worker;
typedef struct h2_conn h2_conn;

enum { KIND_EXPORT, KIND_METRICS, KIND_LOGS, KIND_OTHER };

/* The signal of a call's method (traces for anything not logs/metrics,
 * which is refused before any item is counted). */
static sf_signal kind_signal(unsigned kind)
{
    return kind == KIND_LOGS ? SF_SIGNAL_LOGS : kind == KIND_METRICS ? SF_SIGNAL_METRICS
                                                                     : SF_SIGNAL_TRACES;
}
enum { ENC_IDENTITY, ENC_GZIP, ENC_DEFLATE, ENC_OTHER };

typedef struct h2_stream {
    int32_t id;
    h2_conn *c;
    uint8_t kind;
    uint8_t enc;
    char enc_name[24];
    bool post, grpc_type;       /* :method POST, content-type application/grpc* */
    bool answered;              /* an answer was submitted; further data ignored */
    bool refusing;              /* memory refused: the message is counted, not kept */
    bool deferred;              /* holds unconsumed window (worker over budget) */
    bool reserved;              /* its buffer holds the whole message */
    bool parked;                /* complete, waiting for memory (worker's parked list) */
    int64_t park_deadline_ms;   /* refused if memory is still short then; 0: never parked */
    size_t hdr_bytes;
    int64_t deadline_ms;        /* grpc-timeout; 0: none */
    int64_t progress_ms;        /* last byte of its message, or its answer */
    /* the gRPC message framing */
    uint8_t prefix[5];
    unsigned prefix_got;
    unsigned messages;
    uint8_t flags;
    uint32_t msg_len;
    size_t msg_got;
    size_t unconsumed;          /* bytes received but not yet returned to the window */
    sf_dynbuf msg;
    sf_span_counter counter;    /* refusing */
    z_stream *z;                /* refusing a compressed message: inflated to count */
    bool z_failed;
    /* the answer */
    int status;
    char message[200];
    bool data_sent;
    struct h2_stream *prev, *next;  /* the worker's deferred list */
    struct h2_stream *cprev, *cnext;    /* its connection's streams */
    struct h2_stream *pprev, *pnext;    /* the worker's parked list */
} h2_stream;

struct h2_conn {
    worker *w;
    int fd;
    nghttp2_session *ng;
    uint32_t peer_bucket;
    bool preface;               /* a SETTINGS frame arrived */
    bool goaway;                /* graceful GOAWAY sent */
    bool closing;               /* close once output is flushed */
    bool want_out;              /* EPOLLOUT registered */
    bool dirty;                 /* on the worker's dirty list */
    h2_conn *dirty_next;
    unsigned streams;           /* open streams */
    unsigned calls;             /* streams it has opened */
    h2_stream *stream_list;
    bool dead;                  /* closed; freed at the end of the worker's turn */
    int64_t opened_ms, idle_since_ms, last_read_ms, goaway_ms;
    int64_t ping_sent_ms;       /* keepalive ping outstanding since; 0: none */
    int64_t client_ping_ms;     /* last client ping */
    unsigned ping_strikes;
    const uint8_t *out;         /* output not yet written, in pend */
    size_t out_len;
    sf_dynbuf pend;
    int64_t out_since_ms;
    h2_conn *prev, *next;
};

struct worker {
    sf_receiver_grpc *srv;
    pthread_t thread;
    bool running;
    int ep;
    int wake;                   /* eventfd: shutdown */
    int poke;                   /* eventfd: another worker asks to reclaim, or has reclaimed */
    bool listening;             /* the listening socket is in ep */
    int64_t accept_resume_ms;
    int64_t accept_backoff_ms;
    sf_arena *arena;
    h2_conn *conns;
    h2_conn *graveyard;         /* closed this turn: events may still name them */
    h2_conn *dirty;             /* have frames to send that no event of theirs will flush */
    uint8_t obuf[64 * 1024];    /* a connection's frames, gathered for one send() */
    sf_dynbuf spare[SPARES];    /* message buffers kept between calls */
    unsigned n_spare;
    unsigned n_conns;
    size_t reserved;            /* whole-message buffers its streams hold */
    h2_stream *deferred;        /* streams waiting for budget, oldest first */
    h2_stream *deferred_tail;
    h2_stream *parked;          /* complete calls waiting for memory */
    _Atomic unsigned n_parked;
    bool stopping;
    int64_t stop_deadline_ms;
};

struct sf_receiver_grpc {
    sf_component *self;
    const sf_receiver_grpc_config *cfg;
    unsigned max_depth;
    size_t max_msg;
    size_t budget;              /* per worker */
    unsigned max_conns;         /* max_connections, within the memory limit */
    int lfd;
    unsigned n_workers;
    worker *workers;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    nghttp2_mem mem;
    _Atomic unsigned n_conns;
    _Atomic bool accept_failing;
    _Atomic bool accept_warned;     /* a warning is out, not yet followed by "again" */
    _Atomic int64_t accept_warned_ms;
    pthread_mutex_t peer_lock;
    uint16_t *peers;            /* connections per peer-address bucket, under peer_lock */
    _Atomic uint64_t reclaimed_calls;   /* partial messages answered UNAVAILABLE and freed */
    _Atomic uint64_t reclaimed_bytes;
};

static const char tag_listen, tag_wake, tag_poke;

/* ---- nghttp2's memory, counted --------------------------------------------- */

static void *mem_malloc(size_t size, void *ud) { (void)ud; return sf_calloc_unlimited(1, size); }
static void mem_free(void *p, void *ud) { (void)ud; sf_free(p); }
static void *mem_calloc(size_t n, size_t size, void *ud)
{
    (void)ud;
    return sf_calloc_unlimited(n, size);
}
static void *mem_realloc(void *p, size_t size, void *ud)
{
    (void)ud;
    return sf_realloc_unlimited(p, size);
}

/* ---- peers ------------------------------------------------------------------- */

static uint32_t peer_bucket_of(const struct sockaddr_storage *ss)
{
    const uint8_t *p;
    size_t n;
    uint32_t h = 2166136261u;

    if (ss->ss_family == AF_INET6) {
        p = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
        n = 16;
    } else {
        p = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
        n = 4;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h % PEER_BUCKETS;
}

/* Take a place for a connection from `bucket`: false when a cap is full. */
static bool caps_take(sf_receiver_grpc *srv, uint32_t bucket, bool *peer_full)
{
    bool ok;

    pthread_mutex_lock(&srv->peer_lock);
    *peer_full = srv->peers[bucket] >= srv->cfg->max_connections_per_peer;
    ok = !*peer_full && atomic_load(&srv->n_conns) < srv->max_conns;
    if (ok) {
        srv->peers[bucket]++;
        atomic_fetch_add(&srv->n_conns, 1);
    }
    pthread_mutex_unlock(&srv->peer_lock);
    return ok;
}

static void caps_give(sf_receiver_grpc *srv, uint32_t bucket)
{
    pthread_mutex_lock(&srv->peer_lock);
    srv->peers[bucket]--;
    atomic_fetch_sub(&srv->n_conns, 1);
    pthread_mutex_unlock(&srv->peer_lock);
}

/* ---- streams ----------------------------------------------------------------- */

static void deferred_unlink(worker *w, h2_stream *s)
{
    if (!s->deferred)
        return;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        w->deferred = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    else
        w->deferred_tail = s->prev;
    s->prev = s->next = NULL;
    s->deferred = false;
}

static void stream_unpark(h2_stream *s)
{
    worker *w = s->c->w;

    if (!s->parked)
        return;
    if (s->pprev != NULL)
        s->pprev->pnext = s->pnext;
    else
        w->parked = s->pnext;
    if (s->pnext != NULL)
        s->pnext->pprev = s->pprev;
    s->pprev = s->pnext = NULL;
    s->parked = false;
    atomic_fetch_sub(&w->n_parked, 1);
}

static void stream_park(h2_stream *s)
{
    worker *w = s->c->w;

    if (s->parked)
        return;
    s->parked = true;
    s->pnext = w->parked;
    if (w->parked != NULL)
        w->parked->pprev = s;
    w->parked = s;
    atomic_fetch_add(&w->n_parked, 1);
}

static void stream_drop_message(h2_stream *s)
{
    worker *w = s->c->w;

    /* Kept for the next call when small enough: a fresh buffer from 128 KiB
     * up is an mmap, paid a page fault per 4 KiB and a munmap per call
     * (measured: 4x the CPU per span of gRPC core's receiver without it). */
    if (s->msg.buf != NULL && sf_dynbuf_capacity(&s->msg) <= SPARE_MAX_BYTES &&
        w->n_spare < SPARES) {
        sf_dynbuf_reset(&s->msg);
        w->spare[w->n_spare++] = s->msg;
        sf_dynbuf_init(&s->msg, w->srv->max_msg);
    } else {
        sf_dynbuf_release(&s->msg);
    }
    if (s->reserved) {
        s->c->w->reserved -= s->msg_len;
        s->reserved = false;
    }
}

/* Whether a stream's whole message fits the worker's budget, or is the
 * only one (so one call always makes progress). */
static bool worker_budget_allows(const worker *w, const h2_stream *s)
{
    return w->reserved == 0 || w->reserved + s->msg_len <= w->srv->budget;
}

/* Whether memory has room for a stream's whole message: not short, and
 * the buffer itself would not take it past the soft limit (every complete
 * call would then wait for it). */
static bool memory_allows(const worker *w, const h2_stream *s)
{
    size_t soft, hard;

    if (!sf_component_may_accept(w->srv->self))
        return false;
    sf_alloc_limits(&soft, &hard);
    return soft == 0 || sf_alloc_in_use() + s->msg_len < soft;
}

/* Whether a stream may take its whole message's buffer now: the worker's
 * budget and memory allow it (the tick lets it go on once they do, or
 * refuses it while memory stays short). Streams that wait hold at most
 * their window, partly received. */
static bool budget_allows(const worker *w, const h2_stream *s)
{
    return worker_budget_allows(w, s) && memory_allows(w, s);
}

static void stream_free(h2_stream *s)
{
    h2_conn *c = s->c;

    if (s->cprev != NULL)
        s->cprev->cnext = s->cnext;
    else
        c->stream_list = s->cnext;
    if (s->cnext != NULL)
        s->cnext->cprev = s->cprev;
    c->streams--;
    deferred_unlink(c->w, s);
    stream_unpark(s);
    stream_drop_message(s);
    if (s->z != NULL) {
        inflateEnd(s->z);
        sf_free(s->z);
    }
    sf_free(s);
}

static void stream_start_refusing(h2_stream *s);

/* Frames of `c` are due that no event of its own may flush (a
 * WINDOW_UPDATE, an answer given on another connection's event). */
static void conn_mark_dirty(h2_conn *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    c->dirty_next = c->w->dirty;
    c->w->dirty = c;
}

/* Return what a stream has received to its window (budget permitting;
 * otherwise it waits on the worker's deferred list). */
static void stream_consume(h2_stream *s)
{
    worker *w = s->c->w;

    if (s->unconsumed == 0)
        return;
    if (!s->answered && !s->refusing && !s->reserved && s->messages == 1 &&
        !budget_allows(w, s)) {
        if (!s->deferred) {
            s->deferred = true;
            s->prev = w->deferred_tail;
            if (w->deferred_tail != NULL)
                w->deferred_tail->next = s;
            else
                w->deferred = s;
            w->deferred_tail = s;
        }
        return;
    }
    deferred_unlink(w, s);
    conn_mark_dirty(s->c);
    if (!s->answered && !s->refusing && !s->reserved && s->messages == 1) {
        /* Within budget: the whole message's buffer, once. */
        if (sf_dynbuf_reserve(&s->msg, s->msg_len) == SF_OK) {
            s->reserved = true;
            w->reserved += s->msg_len;
            /* Its buffer is there: open the window to the whole message,
             * one WINDOW_UPDATE instead of one per 32 KiB. */
            if (s->msg_len > STREAM_WINDOW)
                nghttp2_session_set_local_window_size(s->c->ng, NGHTTP2_FLAG_NONE, s->id,
                                                      (int32_t)(s->msg_len + 5));
        } else {
            stream_start_refusing(s);
        }
    }
    nghttp2_session_consume_stream(s->c->ng, s->id, s->unconsumed);
    s->unconsumed = 0;
}

/* Budget freed: let waiting streams go on, oldest first. */
static void worker_undefer(worker *w)
{
    while (w->deferred != NULL && budget_allows(w, w->deferred)) {
        h2_stream *s = w->deferred;

        deferred_unlink(w, s);
        stream_consume(s);
    }
}

/* At a tick: a waiting stream that the worker's budget would admit but
 * memory has no room for is refused (counted from now on, its window
 * returned, answered UNAVAILABLE when complete) rather than left waiting
 * until STREAM_STALL_MS while memory stays short (counted as reclaimed
 * when it held bytes). */
static size_t stream_held(const h2_stream *s);

static void worker_settle_deferred(worker *w)
{
    for (;;) {
        h2_stream *s = w->deferred;
        size_t held;

        while (s != NULL && !(worker_budget_allows(w, s) && !memory_allows(w, s)))
            s = s->next;
        if (s == NULL)
            return;
        held = stream_held(s);
        if (held > 0) {
            atomic_fetch_add(&w->srv->reclaimed_calls, 1);
            atomic_fetch_add(&w->srv->reclaimed_bytes, held);
        }
        deferred_unlink(w, s);
        stream_start_refusing(s);
        stream_consume(s);
    }
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
static void stream_answer(h2_stream *s, int code, const char *why)
{
    h2_conn *c = s->c;
    char status[12], message[sizeof(s->message) * 3];

    if (s->answered)
        return;
    s->answered = true;
    stream_unpark(s);
    s->status = code;
    s->progress_ms = sf_now_ms();
    c->ping_strikes = 0;            /* as gRPC: sending resets the ping strikes */
    stream_drop_message(s);
    worker_undefer(c->w);
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

    stream_answer(s, a->grpc, why != NULL ? why : a->message);
}

/* Refuse a call for a reason the client caused, counted. */
static void stream_refuse(h2_stream *s, sf_reason reason, int code, const char *why)
{
    sf_component_refuse(s->c->w->srv->self, SF_TRANSPORT_GRPC, kind_signal(s->kind), 0, reason);
    stream_answer(s, code, why);
}

/* ---- reclaiming memory ---------------------------------------------------------- */

/* The bytes a stream holds for a message that is not complete (its
 * buffer): what reclaiming it would give back. */
static size_t stream_held(const h2_stream *s)
{
    if (s->answered || s->refusing || s->parked || s->messages == 0 || s->msg_got >= s->msg_len)
        return 0;
    return sf_dynbuf_capacity(&s->msg);
}

/* Whether reclaiming should go on: memory short, or less than the
 * headroom free below the soft limit. */
static bool reclaim_wanted(const sf_receiver_grpc *srv)
{
    size_t soft, hard;

    if (!sf_component_may_accept(srv->self))
        return true;
    sf_alloc_limits(&soft, &hard);
    return soft > 0 && sf_alloc_in_use() + soft / RECLAIM_HEADROOM >= soft;
}

/* Memory is short, and a complete call would be refused for it: first
 * refuse (UNAVAILABLE) and free the partial messages this worker holds, the
 * most bytes with the least recent progress first (bytes times the time
 * since their last byte), until memory is no longer short, with a headroom
 * (RECLAIM_HEADROOM), or none is left.
 * `keep` (the stream asking) is never taken. A client that stopped sending
 * (held windows, then silence) thus pays for the memory it holds, not
 * every client whose call is complete. Returns the bytes freed. */
static size_t worker_reclaim(worker *w, const h2_stream *keep)
{
    sf_receiver_grpc *srv = w->srv;
    int64_t now = sf_now_ms();
    size_t freed = 0;

    while (reclaim_wanted(srv)) {
        h2_stream *victim = NULL;
        uint64_t best = 0;
        size_t held = 0;

        for (h2_conn *c = w->conns; c != NULL; c = c->next) {
            for (h2_stream *st = c->stream_list; st != NULL; st = st->cnext) {
                size_t h = stream_held(st);
                uint64_t score;

                if (h == 0 || st == keep)
                    continue;
                score = (uint64_t)h * (uint64_t)(now - st->progress_ms + TICK_MS);
                if (victim == NULL || score > best) {
                    victim = st;
                    best = score;
                    held = h;
                }
            }
        }
        if (victim == NULL)
            break;
        atomic_fetch_add(&srv->reclaimed_calls, 1);
        atomic_fetch_add(&srv->reclaimed_bytes, held);
        freed += held;
        if (!victim->deferred && victim->c->out_len == 0 &&
            now - victim->c->last_read_ms >= RECLAIM_STALL_MS) {
            stream_refuse(victim, SF_REASON_MEMORY_LIMIT, SF_RPC_UNAVAILABLE,
                          "memory is short: this call's partial message was reclaimed (no "
                          "recent progress); retry");
        } else {
            stream_start_refusing(victim);
            stream_consume(victim);     /* its window back: the rest is counted as it comes */
        }
        conn_mark_dirty(victim->c);
    }
    return freed;
}

/* Ask the other workers to reclaim what they hold (or tell those with
 * parked calls that memory was freed). */
static void workers_poke(worker *self, bool parked_only)
{
    sf_receiver_grpc *srv = self->srv;
    uint64_t one = 1;

    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (w == self || w->poke < 0 || (parked_only && atomic_load(&w->n_parked) == 0))
            continue;
        if (write(w->poke, &one, sizeof(one)) != sizeof(one)) {
            /* The counter is full: a poke is pending anyway. */
        }
    }
}

/* Count spans over a refused message's bytes, inflating when compressed. */
static void stream_count(h2_stream *s, const uint8_t *p, size_t n)
{
    uint8_t out[16384];

    if (s->enc == ENC_IDENTITY || !(s->flags & 1)) {
        sf_span_counter_feed(&s->counter, p, n);
        return;
    }
    if (s->z_failed)
        return;
    if (s->z == NULL) {
        s->z = sf_calloc_unlimited(1, sizeof(*s->z));
        if (s->z == NULL || inflateInit2(s->z, s->enc == ENC_GZIP ? 15 + 16 : 15) != Z_OK) {
            sf_free(s->z);
            s->z = NULL;
            s->z_failed = true;
            return;
        }
    }
    s->z->next_in = (Bytef *)p;
    s->z->avail_in = (uInt)n;
    while (s->z->avail_in > 0) {
        int zr;

        s->z->next_out = out;
        s->z->avail_out = sizeof(out);
        zr = inflate(s->z, Z_NO_FLUSH);
        sf_span_counter_feed(&s->counter, out, sizeof(out) - s->z->avail_out);
        if (zr != Z_OK) {
            s->z_failed = zr != Z_STREAM_END;
            break;
        }
    }
}

/* From now on the message is counted, not kept. */
static void stream_start_refusing(h2_stream *s)
{
    if (s->refusing)
        return;
    s->refusing = true;
    sf_span_counter_init_signal(&s->counter, kind_signal(s->kind));
    stream_count(s, (const uint8_t *)sf_dynbuf_ptr(&s->msg), sf_dynbuf_len(&s->msg));
    stream_drop_message(s);
    worker_undefer(s->c->w);
}

/* gRPC core 1.51 clients and upstream's exporters may send zstd under a
 * grpc-encoding we do not serve; said plainly (as before). */
static bool looks_zstd(const uint8_t *p, size_t len)
{
    return len >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/* A call's message is complete: decode, run the pipeline, answer. */
static void stream_finish(h2_stream *s)
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
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INVALID_ARGUMENT, "missing request message");
        return;
    }
    if (s->msg_got < s->msg_len) {
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "grpc: the request message ended before its length");
        return;
    }
    if (!s->refusing && !sf_component_may_accept(srv->self)) {
        /* Memory is short: partial messages pay for it before a complete
         * call is refused, this worker's now, the other workers' within
         * PARK_MS (poked now, and each reclaims at its tick). */
        worker_reclaim(w, s);
        if (!sf_component_may_accept(srv->self)) {
            int64_t now = sf_now_ms();

            if (s->park_deadline_ms == 0) {
                s->park_deadline_ms = now + PARK_MS;
                workers_poke(w, false);
            }
            if (now < s->park_deadline_ms) {
                stream_park(s);
                return;
            }
            stream_start_refusing(s);
        }
    }
    if (s->refusing) {
        /* Refused before it is decoded; its spans are still counted, so
         * the refusal is visible in span terms. */
        sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, kind_signal(s->kind), s->counter.spans,
                            SF_REASON_MEMORY_LIMIT);
        stream_answer_status(s, SF_MEMLIMIT, NULL);
        return;
    }
    bytes = (const uint8_t *)sf_dynbuf_ptr(&s->msg);
    len = sf_dynbuf_len(&s->msg);
    if (s->flags & 1) {
        st = sf_inflate(bytes, len, srv->max_msg, &inflated, &len);
        if (st == SF_TOOBIG) {
            stream_refuse(s, SF_REASON_TOO_LARGE, SF_RPC_RESOURCE_EXHAUSTED,
                          "grpc: received message after decompression larger than max");
            return;
        }
        if (st == SF_ENOMEM) {
            stream_start_refusing(s);
            sf_component_refuse(srv->self, SF_TRANSPORT_GRPC, kind_signal(s->kind),
                                s->counter.spans, SF_REASON_MEMORY_LIMIT);
            stream_answer_status(s, SF_MEMLIMIT, NULL);
            return;
        }
        if (st != SF_OK) {
            stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                          "grpc: failed to decompress the received message");
            return;
        }
        bytes = inflated;
    }
    /* The codec's pass inside emit is also the validation: a malformed
     * request comes back SF_INVALID with nothing of it queued. */
    sf_request_init_signal(&batch, w->arena, kind_signal(s->kind), bytes, len, srv->max_depth);
    st = sf_component_emit(srv->self, SF_TRANSPORT_GRPC, &batch);
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
        stream_answer(s, code, why);
        return;
    }
    sf_request_release(&batch);
    sf_free(inflated);
    sf_arena_reset(w->arena);
    stream_answer_status(s, st, NULL);
}

/* Headers complete: answer at once what will not be served. */
static void stream_headers_done(h2_stream *s)
{
    sf_receiver_grpc *srv = s->c->w->srv;
    char why[96];

    if (!s->post || !s->grpc_type) {
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "not a gRPC request (POST with content-type application/grpc)");
        return;
    }
    if (s->kind != KIND_OTHER && !sf_component_receives(srv->self, kind_signal(s->kind))) {
        sf_signal other = kind_signal(s->kind);

        /* As upstream's receiver, which registers a signal's service only
         * when a pipeline of it lists the receiver: UNIMPLEMENTED (the SDK
         * does not retry it), saying why, and counted. */
        sf_component_unexported(srv->self, SF_TRANSPORT_GRPC, other);
        snprintf(why, sizeof(why), "no %s pipeline lists this receiver: send %s elsewhere",
                 sf_signal_name(other), sf_signal_name(other));
        stream_answer(s, SF_RPC_UNIMPLEMENTED, why);
        return;
    }
    if (s->kind == KIND_OTHER) {
        stream_answer(s, SF_RPC_UNIMPLEMENTED,
                      "unknown method: spanfence serves the Export methods of "
                      "TraceService, LogsService and MetricsService only");
        return;
    }
    if (s->enc == ENC_OTHER) {
        /* grpc-go's answer and words (rpc_util.go checkRecvPayload). */
        snprintf(why, sizeof(why), "grpc: Decompressor is not installed for grpc-encoding \"%s\"",
                 s->enc_name);
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_UNIMPLEMENTED, why);
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
        stream_drop_message(s);
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_UNIMPLEMENTED,
                      "grpc: more than one request message in a unary call");
        return false;
    }
    if (s->flags & ~1u) {
        snprintf(why, sizeof(why), "grpc: received unexpected payload format %u", s->flags);
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL, why);
        return false;
    }
    if ((s->flags & 1) && s->enc == ENC_IDENTITY) {
        stream_refuse(s, SF_REASON_MALFORMED, SF_RPC_INTERNAL,
                      "grpc: compressed flag set with identity or empty encoding");
        return false;
    }
    if (s->msg_len > srv->max_msg) {
        snprintf(why, sizeof(why), "grpc: received message larger than max (%u vs. %zu)",
                 s->msg_len, srv->max_msg);
        stream_refuse(s, SF_REASON_TOO_LARGE, SF_RPC_RESOURCE_EXHAUSTED, why);
        return false;
    }
    if (!s->refusing && s->msg.buf == NULL && s->c->w->n_spare > 0)
        s->msg = s->c->w->spare[--s->c->w->n_spare];
    return true;                    /* its buffer is reserved in stream_consume */
}

/* ---- nghttp2 callbacks --------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->w->stopping)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s = sf_calloc_unlimited(1, sizeof(*s));
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s->id = f->hd.stream_id;
    s->c = c;
    s->kind = KIND_OTHER;
    s->progress_ms = sf_now_ms();
    sf_dynbuf_init(&s->msg, c->w->srv->max_msg);
    nghttp2_session_set_stream_user_data(ng, s->id, s);
    s->cnext = c->stream_list;
    if (c->stream_list != NULL)
        c->stream_list->cprev = s;
    c->stream_list = s;
    c->streams++;
    c->calls++;
    return 0;
}

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

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
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
        s->kind = IS(value, EXPORT_METHOD) ? KIND_EXPORT : IS(value, METRICS_METHOD) ? KIND_METRICS
                : IS(value, LOGS_METHOD) ? KIND_LOGS : KIND_OTHER;
    } else if (IS(name, ":method")) {
        s->post = IS(value, "POST");
    } else if (IS(name, "content-type")) {
        s->grpc_type = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                       (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (IS(name, "grpc-encoding")) {
        s->enc = IS(value, "identity") ? ENC_IDENTITY : IS(value, "gzip") ? ENC_GZIP
               : IS(value, "deflate") ? ENC_DEFLATE : ENC_OTHER;
        snprintf(s->enc_name, sizeof(s->enc_name), "%.*s", (int)(valuelen < 20 ? valuelen : 20),
                 (const char *)value);
    } else if (IS(name, "grpc-timeout")) {
        int64_t ms = parse_timeout(value, valuelen);
        if (ms > 0)
            s->deadline_ms = sf_now_ms() + ms;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);

    (void)flags;
    /* The connection window is returned at once; the stream's when the
     * worker's budget allows (stream_consume). */
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
             * limit, where RSS passes it by the process's own size). */
            if (!s->refusing && k > 0 && !sf_component_may_accept(c->w->srv->self)) {
                /* Partial messages held without progress pay first. A
                 * small message (its exact buffer, reclaimable itself
                 * while partial) and the piece that completes a message
                 * are kept: stream_finish then waits for memory, or
                 * refuses. */
                worker_reclaim(c->w, s);
                if (s->msg_len > SMALL_MESSAGE && s->msg_got + k < s->msg_len &&
                    !sf_component_may_accept(c->w->srv->self))
                    stream_start_refusing(s);
            }
            if (!s->refusing && k > 0 && sf_dynbuf_len(&s->msg) == 0 && !s->reserved &&
                s->msg_len <= SMALL_MESSAGE)
                (void)sf_dynbuf_reserve(&s->msg, s->msg_len);   /* small: exact at once */
            if (s->refusing)
                stream_count(s, data, k);
            else if (sf_dynbuf_add(&s->msg, data, k) != SF_OK) {
                stream_start_refusing(s);   /* past the hard limit: counted, not kept */
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
    stream_consume(s);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_conn *c = ud;
    const sf_otlp_keepalive_enforcement *kp = &c->w->srv->cfg->keepalive.enforcement_policy;
    h2_stream *s;

    switch (f->hd.type) {
    case NGHTTP2_SETTINGS:
        c->preface = true;
        return 0;
    case NGHTTP2_PING:
        if (f->hd.flags & NGHTTP2_FLAG_ACK) {
            c->ping_sent_ms = 0;
            return 0;
        }
        /* enforcement_policy, as gRPC: a ping sooner than min_time after the
         * last one, or with no call open unless permitted, is a strike. */
        if ((c->streams == 0 && !kp->permit_without_stream) ||
            (c->client_ping_ms != 0 && c->last_read_ms - c->client_ping_ms < kp->min_time))
            c->ping_strikes++;
        c->client_ping_ms = c->last_read_ms;
        if (c->ping_strikes > MAX_PING_STRIKES) {
            static const char debug[] = "too_many_pings";

            nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
                                  nghttp2_session_get_last_proc_stream_id(ng),
                                  NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)debug,
                                  sizeof(debug) - 1);
            c->closing = true;
        }
        return 0;
    case NGHTTP2_HEADERS:
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (s == NULL)
            return 0;
        if (f->headers.cat == NGHTTP2_HCAT_REQUEST)
            stream_headers_done(s);
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
            stream_finish(s);
        return 0;
    case NGHTTP2_DATA:
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (s != NULL && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            stream_finish(s);
        return 0;
    default:
        return 0;
    }
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);

    (void)error_code;
    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    stream_free(s);
    if (c->streams == 0)
        c->idle_since_ms = sf_now_ms();
    worker_undefer(c->w);
    return 0;
}

/* ---- connections --------------------------------------------------------------- */

static bool conn_flush(h2_conn *c);

/* Close now; the struct is freed at the end of the worker's turn (an event
 * of this turn may still point at it). */
static void conn_close(h2_conn *c)
{
    worker *w = c->w;

    if (c->dead)
        return;
    c->dead = true;
    /* nghttp2_session_del does not call on_stream_close. */
    while (c->stream_list != NULL)
        stream_free(c->stream_list);
    nghttp2_session_del(c->ng);
    sf_dynbuf_release(&c->pend);
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    caps_give(w->srv, c->peer_bucket);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    w->n_conns--;
    c->next = w->graveyard;
    w->graveyard = c;
    worker_undefer(w);
}

/* Send what connections owe that no event of theirs will flush. */
static void worker_flush_dirty(worker *w)
{
    while (w->dirty != NULL) {
        h2_conn *c = w->dirty;

        w->dirty = c->dirty_next;
        c->dirty = false;
        if (!c->dead && !conn_flush(c))
            conn_close(c);
    }
}

static void worker_bury(worker *w)
{
    while (w->graveyard != NULL) {
        h2_conn *c = w->graveyard;

        w->graveyard = c->next;
        sf_free(c);
    }
}

static void conn_want_out(h2_conn *c, bool on)
{
    /* While output waits the connection is not read: EPOLLOUT only. */
    struct epoll_event ev = { .events = on ? EPOLLOUT : EPOLLIN, .data.ptr = c };

    if (c->want_out == on)
        return;
    c->want_out = on;
    epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Write what nghttp2 has to send. false: the connection is to be closed. */
/* Keep output the socket did not take; c->out points at it. */
static bool conn_keep(h2_conn *c, const uint8_t *p, size_t n)
{
    if (n == 0)
        return true;
    if (sf_dynbuf_add(&c->pend, p, n) != SF_OK)
        return false;
    c->out = (const uint8_t *)sf_dynbuf_ptr(&c->pend);
    c->out_len = sf_dynbuf_len(&c->pend);
    c->out_since_ms = sf_now_ms();
    return true;
}

/* Write what nghttp2 has to send, its frames gathered into one send() (an
 * answer is three frames; a send each cost a wake-up each in the client),
 * keeping what the socket does not take. false: close the connection. */
static bool conn_flush(h2_conn *c)
{
    worker *w = c->w;

    for (;;) {
        const uint8_t *p = w->obuf;
        size_t n = 0;
        ssize_t k;

        if (c->out_len > 0) {
            p = c->out;
            n = c->out_len;
        } else {
            while (n + OUT_FRAME_MAX <= sizeof(w->obuf)) {
                const uint8_t *d;
                ssize_t m = nghttp2_session_mem_send(c->ng, &d);

                if (m < 0)
                    return false;
                if (m == 0)
                    break;
                if (n + (size_t)m > sizeof(w->obuf)) {     /* larger than any frame we send */
                    if (!conn_keep(c, w->obuf, n) || !conn_keep(c, d, (size_t)m))
                        return false;
                    break;
                }
                memcpy(w->obuf + n, d, (size_t)m);
                n += (size_t)m;
            }
            if (c->out_len > 0)
                continue;
            if (n == 0)
                break;
        }
        k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return false;
        if (k < 0)
            k = 0;
        if (p == w->obuf) {
            if ((size_t)k == n)
                continue;
            if (!conn_keep(c, w->obuf + k, n - (size_t)k))
                return false;
            conn_want_out(c, true);
            return true;
        }
        c->out += k;
        c->out_len -= (size_t)k;
        if (c->out_len == 0) {
            sf_dynbuf_release(&c->pend);
            continue;
        }
        conn_want_out(c, true);
        return true;
    }
    conn_want_out(c, false);
    if (c->closing)
        return false;
    return nghttp2_session_want_read(c->ng) || nghttp2_session_want_write(c->ng);
}

/* Read a bounded amount, then let the worker serve other connections.
 * false: the connection is to be closed. */
static bool conn_read(h2_conn *c)
{
    uint8_t buf[READ_CHUNK];

    if (c->out_len > 0)
        return true;                /* answers wait to be written: no more input */
    for (int i = 0; i < READS_PER_TURN; i++) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        c->last_read_ms = sf_now_ms();
        if (nghttp2_session_mem_recv(c->ng, buf, (size_t)n) < 0)
            return false;
        if ((size_t)n < sizeof(buf) || c->closing)
            return true;
    }
    return true;
}

/* How much a connection with no call open is worth keeping: one that
 * never sent its preface least, then one that never made a call, then one
 * that has (a client between calls). */
static unsigned conn_worth(const h2_conn *c)
{
    return (c->preface ? 1u : 0u) + (c->calls > 0 ? 2u : 0u);
}

/* The worker's connection with no call open to give up first: the least
 * worth keeping, idle longest among those. */
static h2_conn *conn_idlest(worker *w, h2_conn *except)
{
    h2_conn *best = NULL;

    for (h2_conn *c = w->conns; c != NULL; c = c->next)
        if (c != except && c->streams == 0 &&
            (best == NULL || conn_worth(c) < conn_worth(best) ||
             (conn_worth(c) == conn_worth(best) && c->idle_since_ms < best->idle_since_ms)))
            best = c;
    return best;
}

static void conn_goaway(h2_conn *c, uint32_t code)
{
    if (c->goaway)
        return;
    c->goaway = true;
    c->goaway_ms = sf_now_ms();
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          code, NULL, 0);
}

static h2_conn *conn_new(worker *w, int fd, uint32_t bucket)
{
    sf_receiver_grpc *srv = w->srv;
    h2_conn *c = sf_calloc_unlimited(1, sizeof(*c));
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)srv->cfg->max_concurrent_streams },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
    };
    struct epoll_event ev = { .events = EPOLLIN };

    if (c == NULL)
        return NULL;
    c->w = w;
    c->fd = fd;
    c->peer_bucket = bucket;
    c->opened_ms = c->idle_since_ms = c->last_read_ms = sf_now_ms();
    sf_dynbuf_init(&c->pend, MAX_PENDING_OUT);
    if (nghttp2_session_server_new3(&c->ng, srv->cbs, c, srv->opt, &srv->mem) != 0) {
        sf_free(c);
        return NULL;
    }
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        nghttp2_session_del(c->ng);
        sf_free(c);
        return NULL;
    }
    ev.data.ptr = c;
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        nghttp2_session_del(c->ng);
        sf_free(c);
        return NULL;
    }
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    return c;
}

static void accept_pause(worker *w, int err)
{
    sf_receiver_grpc *srv = w->srv;
    h2_conn *idle = conn_idlest(w, NULL);

    /* Logged once per episode, and episodes at most every ACCEPT_LOG_MS:
     * under a sustained attack accept() fails and succeeds by turns. */
    if (!atomic_exchange(&srv->accept_failing, true) && !atomic_load(&srv->accept_warned) &&
        sf_now_ms() - atomic_load(&srv->accept_warned_ms) >= ACCEPT_LOG_MS) {
        atomic_store(&srv->accept_warned_ms, sf_now_ms());
        atomic_store(&srv->accept_warned, true);
        sf_warn("receiver '%s': OTLP/gRPC cannot accept connections (%s): closing idle "
                "connections and retrying with backoff", sf_component_id(srv->self),
                strerror(err));
    }
    if (idle != NULL)
        conn_close(idle);           /* frees an fd for the next try */
    w->accept_backoff_ms = w->accept_backoff_ms == 0 ? ACCEPT_BACKOFF_MIN_MS
                         : w->accept_backoff_ms * 2 > ACCEPT_BACKOFF_MAX_MS
                         ? ACCEPT_BACKOFF_MAX_MS : w->accept_backoff_ms * 2;
    w->accept_resume_ms = sf_now_ms() + w->accept_backoff_ms;
    if (w->listening) {
        epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
        w->listening = false;
    }
}

static void worker_listen(worker *w, bool on)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = (void *)&tag_listen };

    if (w->listening == on)
        return;
    if (on && epoll_ctl(w->ep, EPOLL_CTL_ADD, w->srv->lfd, &ev) != 0)
        return;
    if (!on)
        epoll_ctl(w->ep, EPOLL_CTL_DEL, w->srv->lfd, NULL);
    w->listening = on;
}

static void do_accept(worker *w)
{
    sf_receiver_grpc *srv = w->srv;

    for (int i = 0; i < 16; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        uint32_t bucket;
        bool peer_full;
        int one = 1;
        h2_conn *c;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                accept_pause(w, errno);
            return;                 /* EAGAIN, or a connection that went away */
        }
        w->accept_backoff_ms = 0;
        if (atomic_exchange(&srv->accept_failing, false) && atomic_exchange(&srv->accept_warned, false))
            sf_info("receiver '%s': OTLP/gRPC accepting connections again",
                    sf_component_id(srv->self));
        bucket = peer_bucket_of(&ss);
        if (!caps_take(srv, bucket, &peer_full)) {
            /* Over a cap: the new connection takes the place of the
             * worker's longest-idle one, if it has one. */
            h2_conn *idle = conn_idlest(w, NULL);

            if (idle != NULL)
                conn_close(idle);
            if (idle == NULL || !caps_take(srv, bucket, &peer_full)) {
                close(fd);
                continue;
            }
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = conn_new(w, fd, bucket);
        if (c == NULL) {
            close(fd);
            caps_give(srv, bucket);
            continue;
        }
        if (!conn_flush(c))
            conn_close(c);
    }
}

/* Complete calls that waited for memory: served now, parked again, or
 * refused once their PARK_MS is over. */
static void worker_retry_parked(worker *w)
{
    h2_stream *s = w->parked;

    w->parked = NULL;
    while (s != NULL) {
        h2_stream *next = s->pnext;

        s->parked = false;
        s->pprev = s->pnext = NULL;
        atomic_fetch_sub(&w->n_parked, 1);
        stream_finish(s);           /* may park it again, at the list's head */
        conn_mark_dirty(s->c);
        s = next;
    }
}

/* Timers: handshake, keepalive, idle, age, stalled answers and output. */
static void worker_tick(worker *w, int64_t now)
{
    const sf_otlp_keepalive_server *ka = &w->srv->cfg->keepalive.server_parameters;
    h2_conn *next;

    /* Idle output buffers are the first memory to give back, then the
     * partial messages held longest without progress. */
    if (sf_alloc_under_pressure())
        sf_buf_pool_trim();
    if (!sf_component_may_accept(w->srv->self) && worker_reclaim(w, NULL) > 0)
        workers_poke(w, true);
    /* Streams deferred while memory was short go on once it is not, or
     * are refused while it stays short. */
    worker_undefer(w);
    worker_settle_deferred(w);
    if (!w->listening && !w->stopping && now >= w->accept_resume_ms) {
        worker_listen(w, true);
        /* With no client waiting, no accept() would say the trouble is
         * over: an fd to spare says it. */
        if (atomic_load(&w->srv->accept_failing)) {
            int fd = dup(w->srv->lfd);

            if (fd >= 0) {
                close(fd);
                if (atomic_exchange(&w->srv->accept_failing, false) &&
                    atomic_exchange(&w->srv->accept_warned, false))
                    sf_info("receiver '%s': OTLP/gRPC accepting connections again",
                            sf_component_id(w->srv->self));
            }
        }
    }
    for (h2_conn *c = w->conns; c != NULL; c = next) {
        bool close_now = false;

        next = c->next;
        if (!c->preface && now - c->opened_ms >= HANDSHAKE_TIMEOUT_MS)
            close_now = true;
        if (c->out_len > 0 && now - c->out_since_ms >= WRITE_STALL_MS)
            close_now = true;
        if (c->ping_sent_ms != 0 && now - c->ping_sent_ms >= ka->timeout)
            close_now = true;
        if (c->goaway && ka->max_connection_age_grace > 0 && c->streams > 0 &&
            now - c->goaway_ms >= ka->max_connection_age_grace)
            close_now = true;
        if (c->goaway && c->streams == 0 && c->out_len == 0)
            close_now = true;
        if (w->stopping && now >= w->stop_deadline_ms)
            close_now = true;
        if (close_now) {
            conn_close(c);
            continue;
        }
        if (ka->time > 0 && c->ping_sent_ms == 0 && c->preface && now - c->last_read_ms >= ka->time) {
            if (nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, NULL) == 0)
                c->ping_sent_ms = now;
        }
        if (ka->max_connection_idle > 0 && c->streams == 0 &&
            now - c->idle_since_ms >= ka->max_connection_idle)
            conn_goaway(c, NGHTTP2_NO_ERROR);
        if (ka->max_connection_age > 0 && now - c->opened_ms >= ka->max_connection_age)
            conn_goaway(c, NGHTTP2_NO_ERROR);
        if (w->stopping)
            conn_goaway(c, NGHTTP2_NO_ERROR);
        /* Calls: an answer the peer does not take, a deadline passed, a
         * message that stopped coming. */
        for (h2_stream *st = c->stream_list; st != NULL; st = st->cnext) {
            if (st->answered && now - st->progress_ms >= REPLY_TIMEOUT_MS)
                nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
            else if (!st->answered && st->deadline_ms != 0 && now >= st->deadline_ms)
                stream_answer(st, RPC_DEADLINE_EXCEEDED, "deadline exceeded");
            else if (!st->answered && now - st->progress_ms >= STREAM_STALL_MS)
                stream_answer(st, SF_RPC_UNAVAILABLE, "request message stalled");
        }
        if (!conn_flush(c))
            conn_close(c);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    int64_t next_tick = sf_now_ms() + TICK_MS;

    sf_buf_pool_use(true);
    for (;;) {
        struct epoll_event evs[64];
        int64_t now = sf_now_ms();
        int n = epoll_wait(w->ep, evs, 64, (int)(next_tick > now ? next_tick - now : 0));

        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;

            if (p == &tag_listen) {
                if (!w->stopping)
                    do_accept(w);
                continue;
            }
            if (p == &tag_poke) {
                uint64_t v;
                ssize_t r = read(w->poke, &v, sizeof(v));

                (void)r;
                if (!sf_component_may_accept(w->srv->self) && worker_reclaim(w, NULL) > 0)
                    workers_poke(w, true);
                continue;
            }
            if (p == &tag_wake) {
                uint64_t v;
                ssize_t r = read(w->wake, &v, sizeof(v));

                (void)r;
                if (!w->stopping) {
                    w->stopping = true;
                    w->stop_deadline_ms = sf_now_ms() + SHUTDOWN_GRACE_MS;
                    worker_listen(w, false);
                    for (h2_conn *c = w->conns; c != NULL; c = c->next)
                        conn_goaway(c, NGHTTP2_NO_ERROR);
                }
                continue;
            }
            {
                h2_conn *c = p;
                bool ok = true;

                if (c->dead)
                    continue;
                if (evs[i].events & (EPOLLERR | EPOLLHUP))
                    ok = (evs[i].events & EPOLLIN) != 0;
                if (ok && (evs[i].events & EPOLLOUT))
                    ok = conn_flush(c);
                if (ok && (evs[i].events & EPOLLIN))
                    ok = conn_read(c);
                if (ok)
                    ok = conn_flush(c);
                if (!ok)
                    conn_close(c);
            }
        }
        if (w->parked != NULL)
            worker_retry_parked(w);
        now = sf_now_ms();
        if (now >= next_tick || w->stopping) {
            worker_tick(w, now);
            next_tick = now + TICK_MS;
        }
        worker_flush_dirty(w);
        worker_bury(w);
        if (w->stopping && w->conns == NULL)
            break;
    }
    sf_buf_pool_use(false);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------- */

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
    srv->lfd = -1;
    srv->n_workers = worker_count(cfg->workers);
    srv->workers = sf_calloc(srv->n_workers, sizeof(*srv->workers));
    srv->peers = sf_calloc(PEER_BUCKETS, sizeof(*srv->peers));
    if (srv->workers == NULL || srv->peers == NULL) {
        sf_free(srv->workers);
        sf_free(srv->peers);
        sf_free(srv);
        return SF_ENOMEM;
    }
    for (unsigned i = 0; i < srv->n_workers; i++) {
        srv->workers[i].ep = -1;
        srv->workers[i].wake = -1;
        srv->workers[i].poke = -1;
    }
    pthread_mutex_init(&srv->peer_lock, NULL);
    srv->mem = (nghttp2_mem){ .mem_user_data = srv, .malloc = mem_malloc, .free = mem_free,
                              .calloc = mem_calloc, .realloc = mem_realloc };
    *out = srv;
    return SF_OK;
}

static sf_status setup_nghttp2(sf_receiver_grpc *srv)
{
    if (nghttp2_session_callbacks_new(&srv->cbs) != 0 || nghttp2_option_new(&srv->opt) != 0)
        return SF_ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(srv->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(srv->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->cbs, on_stream_close);
    nghttp2_option_set_no_auto_window_update(srv->opt, 1);
    nghttp2_option_set_stream_reset_rate_limit(srv->opt, RST_BURST, RST_RATE);
    nghttp2_option_set_max_continuations(srv->opt, MAX_CONTINUATIONS);
    nghttp2_option_set_max_settings(srv->opt, MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(srv->opt, MAX_OUTBOUND_ACK);
    /* Closed streams kept for priority bookkeeping cost memory per reset. */
    nghttp2_option_set_no_closed_streams(srv->opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(srv->opt, 256);
    return SF_OK;
}

static sf_status open_listener(sf_receiver_grpc *srv)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    int one = 1;

    if (sf_net_resolve(srv->cfg->endpoint, &addr, &alen) != SF_OK) {
        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s' (invalid address)",
                 sf_component_id(srv->self), srv->cfg->endpoint);
        return SF_IO;
    }
    srv->lfd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->lfd < 0 ||
        setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(srv->lfd, (struct sockaddr *)&addr, alen) != 0 || listen(srv->lfd, 1024) != 0) {
        char why[128];

        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s': %s",
                 sf_component_id(srv->self), srv->cfg->endpoint,
                 sf_net_errno_text(errno, why, sizeof(why)));
        return SF_IO;
    }
    return SF_OK;
}

sf_status sf_receiver_grpc_start(sf_receiver_grpc *srv)
{
    size_t soft, hard;
    sf_status st;

    st = setup_nghttp2(srv);
    if (st != SF_OK)
        return st;
    st = open_listener(srv);
    if (st != SF_OK)
        return st;
    /* What streams may buffer: a share of the hard limit (the rest is the
     * queue's and the batches'), split among the workers. */
    sf_alloc_limits(&soft, &hard);
    srv->budget = (hard > 0 ? hard / 4 : DEFAULT_BUDGET) / srv->n_workers;
    if (srv->budget < srv->max_msg)
        srv->budget = srv->max_msg;
    srv->max_conns = (unsigned)srv->cfg->max_connections;
    if (hard > 0 && hard / 4 / CONN_COST < srv->max_conns)
        srv->max_conns = hard / 4 / CONN_COST > 16 ? (unsigned)(hard / 4 / CONN_COST) : 16;
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = (void *)&tag_wake };
        struct epoll_event pev = { .events = EPOLLIN, .data.ptr = (void *)&tag_poke };

        w->srv = srv;
        w->arena = sf_arena_create(ARENA_CHUNK, srv->max_msg * 16 + ARENA_CHUNK);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        w->poke = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->arena == NULL || w->ep < 0 || w->wake < 0 || w->poke < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->wake, &ev) != 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->poke, &pev) != 0)
            return SF_ENOMEM;       /* shutdown() cleans up what exists */
        worker_listen(w, true);
        if (!w->listening)
            return SF_IO;
    }
    /* Threads once every worker's eventfds exist: a worker pokes others. */
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return SF_ENOMEM;
        w->running = true;
    }
    sf_info("receiver '%s': OTLP/gRPC listening on %s (nghttp2 %s; %u workers, %lld streams per "
            "connection, %lld connections, %lld per peer)", sf_component_id(srv->self),
            srv->cfg->endpoint, nghttp2_version(0)->version_str, srv->n_workers,
            (long long)srv->cfg->max_concurrent_streams, (long long)srv->max_conns,
            (long long)srv->cfg->max_connections_per_peer);
    return SF_OK;
}

void sf_receiver_grpc_shutdown(sf_receiver_grpc *srv)
{
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        uint64_t one = 1;

        if (w->running && write(w->wake, &one, sizeof(one)) != sizeof(one))
            sf_warn("receiver '%s': cannot wake a gRPC worker", sf_component_id(srv->self));
    }
    /* All joined before any fd closes: a worker may poke another's. */
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (w->running) {
            pthread_join(w->thread, NULL);
            w->running = false;
        }
    }
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        while (w->conns != NULL)
            conn_close(w->conns);
        worker_bury(w);
        if (w->ep >= 0)
            close(w->ep);
        if (w->wake >= 0)
            close(w->wake);
        if (w->poke >= 0)
            close(w->poke);
        w->ep = w->wake = w->poke = -1;
        w->listening = false;
    }
    if (srv->lfd >= 0) {
        close(srv->lfd);
        srv->lfd = -1;
    }
    if (srv->cbs != NULL) {
        nghttp2_session_callbacks_del(srv->cbs);
        srv->cbs = NULL;
    }
    if (srv->opt != NULL) {
        nghttp2_option_del(srv->opt);
        srv->opt = NULL;
    }
}

void sf_receiver_grpc_reclaimed(const sf_receiver_grpc *srv, uint64_t *calls, uint64_t *bytes)
{
    sf_receiver_grpc *s = (sf_receiver_grpc *)srv;

    *calls = atomic_load(&s->reclaimed_calls);
    *bytes = atomic_load(&s->reclaimed_bytes);
}

bool sf_receiver_grpc_accepting(const sf_receiver_grpc *srv)
{
    return !atomic_load(&((sf_receiver_grpc *)srv)->accept_failing);
}

void sf_receiver_grpc_destroy(sf_receiver_grpc *srv)
{
    if (srv == NULL)
        return;
    sf_receiver_grpc_shutdown(srv);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        sf_arena_destroy(srv->workers[i].arena);
        while (srv->workers[i].n_spare > 0)
            sf_dynbuf_release(&srv->workers[i].spare[--srv->workers[i].n_spare]);
    }
    /* What its workers gave back to the pool of output buffers goes too
     * (the receiver of a reload fills it again). */
    sf_buf_pool_trim();
    pthread_mutex_destroy(&srv->peer_lock);
    sf_free(srv->peers);
    sf_free(srv->workers);
    sf_free(srv);
}
