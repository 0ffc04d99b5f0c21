/* receivers/otlp/h2_conn.h: the OTLP/gRPC server's state (server, worker,
 * connection, stream), shared by its three files (h2_server.c, h2_conn.c,
 * receiver_grpc.c), what the HTTP/2 connection (h2_conn.c) offers them, and
 * the table it calls up through (h2_up): the connection layer calls neither
 * of the others, so the three files call in one direction (event layer ->
 * call -> connection, event layer -> connection). */
#ifndef SF_RECEIVERS_OTLP_H2_CONN_H
#define SF_RECEIVERS_OTLP_H2_CONN_H

#include "conn_order.h"
#include "otlp_limit.h"
#include "otlp_server.h"
#include "sf_arena.h"
#include "sf_dynbuf.h"
#include "sf_count_inflate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <nghttp2/nghttp2.h>

typedef struct sf_receiver_grpc sf_receiver_grpc;

/* Decoded request headers, like gRPC's default (names + values + 32 each). */
#define MAX_HEADER_LIST 16384
/* A complete call that finds memory short waits this long (parked) for
 * the other workers to reclaim the partial messages they hold, before it
 * is refused. Two ticks: every worker reclaims at its tick too. */
#define PARK_MS (2 * TICK_MS)
/* A deferred stream of a client under its share waits this long for its
 * message's room while memory is short (h2_conn.c settle), then is refused;
 * while a client over its share still holds bytes (being reclaimed, in
 * this worker, another or the HTTP server), up to DEFER_WAIT_MAX_MS. */
#define DEFER_WAIT_MS (3 * TICK_MS)
#define DEFER_WAIT_MAX_MS (20 * TICK_MS)
#define TICK_MS 100
/* Message buffers a worker keeps between calls, and the largest it keeps. */
#define SPARES 2
#define SPARE_MAX_BYTES ((size_t)1024 * 1024)
/* Ranks of a connection's progress, for a newcomer past the caps. */
#define H2_RANKS 4

typedef struct worker worker;
typedef struct h2_conn h2_conn;

enum { KIND_EXPORT, KIND_METRICS, KIND_LOGS, KIND_OTHER };

typedef struct h2_stream {
    int32_t id;
    h2_conn *c;
    uint8_t kind;
    sf_count_coding enc;        /* grpc-encoding: identity (or none), gzip or deflate */
    bool enc_other;             /* another grpc-encoding (zstd, ...): not served */
    char enc_name[24];
    bool post, grpc_type;       /* :method POST, content-type application/grpc* */
    bool answered;              /* an answer was submitted; further data ignored */
    bool refusing;              /* memory refused: the message is counted, not kept */
    bool deferred;              /* holds unconsumed window (worker over budget) */
    bool reserved;              /* its buffer holds the whole message */
    bool parked;                /* complete, waiting for memory (worker's parked list) */
    int64_t park_deadline_ms;   /* refused if memory is still short then; 0: never parked */
    int64_t wait_since_ms;      /* deferred, memory short, since; 0: not waiting */
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
    sf_otlp_hold hold;          /* its buffer while partial, charged to its client's share */
    sf_count_inflate count;     /* refusing: its spans, inflated when compressed */
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
    uint64_t client;            /* sf_net_client_key of its peer: shares and limits */
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
    /* Flood limits (h2_conn.c): frames that cost us work and bring
     * nothing. Decompression is the client's (srv->clients). */
    sf_otlp_bucket lim_window_update, lim_empty_data, lim_priority, lim_resets;
    bool calmed;                /* closed for a limit: GOAWAY ENHANCE_YOUR_CALM sent */
    bool failed;                /* ended for the client's frames: a GOAWAY with an
                                 * error code, or nghttp2 gave up (conn_fatal) */
    /* Where it stands for a newcomer past the caps (h2_conn_victim): its
     * rank and its place in that rank's list, least progress first. */
    unsigned rank;
    unsigned n_parked;          /* its calls waiting for memory */
    conn_link rlink;            /* on w->ranks[rank] */
    h2_conn *prev, *next;
};

struct worker {
    sf_receiver_grpc *srv;
    pthread_t thread;
    bool running;
    int ep;
    int wake;                   /* eventfd: shutdown */
    int poke;                   /* eventfd: another worker asks to reclaim, or has reclaimed */
    _Atomic bool peer_asked;    /* the HTTP server asks (its server type's reclaim_soon) */
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
    /* Its connections by how far they are from progress (H2_RANKS ranks,
     * h2_conn.c conn_rank), each list least recent first: a newcomer past
     * the caps finds whose place it takes without looking at them all. */
    conn_list ranks[H2_RANKS];
    _Atomic unsigned n_parked;
    bool stopping;
    int64_t stop_deadline_ms;
};

/* What the HTTP/2 connection calls up into: the gRPC call (receiver_grpc.c,
 * grpc_call.h) and the event layer (h2_server.c), filled by the event layer
 * before any worker starts, as libuv's handles reach their owners through
 * the callbacks set on them and h2o's connections through
 * h2o_conn_callbacks_t. */
typedef struct h2_up {
    /* the gRPC call: headers and message in, answers and refusals out */
    nghttp2_on_header_callback on_header;
    nghttp2_on_data_chunk_recv_callback on_data_chunk;
    void (*headers_done)(h2_stream *s);
    void (*finish)(h2_stream *s);
    void (*answer)(h2_stream *s, int code, const char *why);
    void (*refuse)(h2_stream *s, sf_reason reason, int code, const char *why);
    void (*start_refusing)(h2_stream *s);
    /* the event layer: connection caps, pokes between workers, the
     * listening socket in a worker's epoll set */
    void (*caps_give)(sf_receiver_grpc *srv, uint32_t bucket);
    void (*workers_poke)(worker *self, bool parked_only);
    /* Every worker reclaims the partial messages of clients over their
     * share soon (its server type's reclaim_soon). */
    void (*reclaim_soon)(void *srv);
    void (*worker_listen)(worker *w, bool on);
    /* A connection ended, or a call was reset, for its client's frames
     * (h2_conn.failed, RST_STREAM with an error code): the event layer
     * paces accepting while they come too fast. True while it does (past
     * the rate): such a client's connection is then ended at once. */
    bool (*client_failed)(worker *w);
} h2_up;

struct sf_receiver_grpc {
    otlp_server_env env;        /* the receiver, its depth cap, both servers' clients */
    const h2_up *up;            /* set at create, read-only after */
    const sf_receiver_grpc_config *cfg;
    size_t max_msg;
    size_t budget;              /* per worker */
    sf_otlp_reclaim_fn peer_reclaim;    /* the HTTP server's reclaim_soon, or NULL */
    void *peer;
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
    _Atomic uint64_t closed[SF_OTLP_CLOSE_COUNT];  /* connections closed for a flood limit */
    _Atomic uint64_t evicted;   /* connections closed to give a newcomer their place */
    /* Connections ended and calls reset for their clients' frames, and
     * connections evicted past the caps, server-wide (under peer_lock):
     * past either rate no worker accepts until calm_until_ms. */
    sf_otlp_bucket lim_failed, lim_evicted;
    _Atomic int64_t calm_until_ms;
    _Atomic int64_t calm_said_ms;   /* h2_say_due: the pace's warnings */
    _Atomic int64_t evict_said_ms;
    _Atomic int64_t stalled_said_ms;    /* ... a stalled client's call ended */
    _Atomic int64_t fatal_said_ms;  /* ... a connection nghttp2 gave up on */
};

/* A warning said at most once per H2_SAY_MS (per server and kind): true
 * when this caller is to say it now (`said_ms` then moves to now_ms). */
#define H2_SAY_MS 10000
bool h2_say_due(_Atomic int64_t *said_ms, int64_t now_ms);

/* nghttp2's memory, counted (sf_calloc_unlimited, never refused). */
void *h2_mem_malloc(size_t size, void *ud);
void h2_mem_free(void *p, void *ud);
void *h2_mem_calloc(size_t n, size_t size, void *ud);
void *h2_mem_realloc(void *p, size_t size, void *ud);
/* The session callbacks and options every connection shares. */
sf_status h2_setup_nghttp2(sf_receiver_grpc *srv);

/* Streams: the worker's parked list, a message's buffer, its window. */
void h2_stream_park(h2_stream *s);
void h2_stream_unpark(h2_stream *s);
void h2_stream_drop_message(h2_stream *s);
void h2_stream_consume(h2_stream *s);
void h2_worker_undefer(worker *w);
size_t h2_worker_reclaim(worker *w, const h2_stream *keep);
/* The same for the HTTP server: clients over their share only. */
size_t h2_worker_reclaim_over(worker *w);
/* Ask the other workers to reclaim (or, parked_only, tell those with
 * parked calls that memory was freed), through the event layer. */
void h2_workers_poke_others(worker *self, bool parked_only);

/* Connections. */
h2_conn *h2_conn_new(worker *w, int fd, uint32_t bucket);
void h2_conn_close(h2_conn *c);
bool h2_conn_flush(h2_conn *c);
bool h2_conn_read(h2_conn *c);
h2_conn *h2_conn_idlest(worker *w, h2_conn *except);
/* The worker's connection making the least progress, for a newcomer past
 * the caps (never `except`): calls open with none complete (partial
 * messages held, answers not read; silent longest first), then no preface
 * yet, then idle (one that never made a call first). No age shields a
 * holder; one with a call waiting for memory, or with bytes waiting
 * unread, is passed over. NULL when none is left. */
h2_conn *h2_conn_victim(worker *w, h2_conn *except);
void h2_conn_goaway(h2_conn *c, uint32_t code);
/* Close for a flood limit: GOAWAY ENHANCE_YOUR_CALM saying `why`, counted
 * once; the connection is read no more and closes once that is out. */
void h2_conn_calm(h2_conn *c, sf_otlp_close why);
/* Whether the connection's client may inflate another message now
 * (sf_otlp_inflate_open; *slot for the charge after); a client refused
 * persistently has this connection closed (h2_conn_calm). */
bool h2_conn_inflate_open(h2_conn *c, unsigned *slot);
void h2_worker_flush_dirty(worker *w);
void h2_worker_bury(worker *w);
void h2_worker_retry_parked(worker *w);
void h2_worker_tick(worker *w, int64_t now);

#endif
