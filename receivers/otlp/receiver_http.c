/* receivers/otlp/receiver_http.c: OTLP/HTTP server (POST /v1/traces, protobuf
 * or JSON, optionally gzip/deflate/zstd) on libmicrohttpd.
 *
 * DESIGN
 * - libmicrohttpd runs a pool of `THREADS` threads (epoll); a request's body
 *   is gathered into a buffer bounded by max_request_body_size that grows
 *   to what arrived, rounded up (BODY_STEP), never to twice that; the sum
 *   of all buffered bodies is bounded too (BUFFER_BUDGET bodies' worth,
 *   within 1/BUDGET_SHARE of the hard memory limit).
 * - Refusals are decided when the headers are in, before any of the body is
 *   buffered: memory short (503), too large (413); the budget is taken as
 *   the body arrives, so a crawling upload holds only what it sent. A
 *   refused body is still read, so the client gets its answer, and its
 *   spans are counted as it streams past (sf_count_inflate.h, protobuf or
 *   OTLP/JSON; gzip/deflate/zstd decompressed piecewise), never held:
 *   received = accepted + refused. A refusal is counted once its answer
 *   could be read: one whose connection ends first (a deadline, the client
 *   gone) is not counted at all, unless a 503 went out ahead of
 *   libmicrohttpd (conn_answer_close); nor is a request pipelined behind
 *   such a 503.
 * - Fair shares of memory (reclaim()): when memory is short, or the budget
 *   has no room for a body's next bytes, the uploads in progress of clients
 *   holding more than their share of the held bytes (otlp_limit.h, shared
 *   with the gRPC server), then the others, the most bytes with the least
 *   recent progress first, are refused and their buffers freed, before a
 *   request that is complete (or sending) is refused; a client over its
 *   share takes only from others over theirs; one that sent nothing for
 *   RECLAIM_STALL_MS, with nothing waiting unread on its socket (it crawls;
 *   upload_crawls), is answered 503 at once and closed. A thread may reclaim another's
 *   request: each request has a lock, taken within conn_lock by the
 *   reclaimer and around gather() by its own thread (which never holds it
 *   while taking conn_lock), and a complete one (`finishing`) is never
 *   touched. Counted in spanfence_receiver_reclaimed_*{reason}.
 * - Fair connection handling (every client on loopback shares one address,
 *   so a per-address limit alone protects nothing): at most MAX_CONNECTIONS
 *   connections are served. A new connection past that takes the slot of
 *   the one making the least progress (conn_victim: headers incomplete
 *   first, then the upload with the least recent bytes, an idle keep-alive
 *   connection last; no age shields a holder), answered 503 when it had a
 *   request under way; a newcomer is refused (503, then closed, never a
 *   reset) only when every other slot is closing already. So slowloris,
 *   slow-upload and idle clients, reconnecting at once or not, cannot lock
 *   out a well-behaved one. A reaper enforces read_header_timeout, read_timeout
 *   and idle_timeout as deadlines (libmicrohttpd's own timeout only counts
 *   inactivity, which a byte every few seconds defeats). On shutdown new
 *   connections are closed as they come (the accept policy), idle ones are
 *   closed, and uploads in progress get SHUTDOWN_GRACE_MS.
 * - Decompression is bounded by the same size limit while inflating (a gzip
 *   or zstd bomb gets 413 after producing at most that many bytes), and per
 *   client by a rate shared with the gRPC server (otlp_limit.h
 *   SF_OTLP_INFLATE_*: 429 past it, the connection closed if its client
 *   goes on); zstd
 *   windows are limited to 8 MiB (RFC 9659), so a frame header cannot make
 *   the decoder reserve more.
 * - Decoding uses an arena from a small pool (one per thread in steady
 *   state), reset after every request.
 * - Header lines two readers could read two ways are refused before the
 *   body, counted as malformed: Content-Length with Transfer-Encoding, or
 *   two different Content-Lengths (400, connection closed: RFC 9112 §6.3);
 *   two Content-Encoding lines (stacked codings: 415); a Content-Type that
 *   is not exactly one media type, as Go's mime.ParseMediaType (the
 *   upstream receiver's parser) has it, or given twice (415).
 * - Status codes follow the OTLP/HTTP specification: 200 with an
 *   ExportTraceServiceResponse in the request's encoding; 400 with a
 *   google.rpc.Status for malformed input; 413 too large; 415 unknown
 *   content type or encoding; 503 + Retry-After when the queue is full or
 *   memory is short; 500 (not retryable) when the batch failed closed.
 *   Every answer that follows from an sf_status comes from the table in
 *   otlp_answer.h, the one the gRPC server answers from too. */
#include "otlp_server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/tcp.h>              /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "google/rpc/status.pb-c.h"
#include "conn_order.h"
#include "otlp_answer.h"
#include "otlp_limit.h"
#include "sf_compress.h"
#include "sf_net.h"
#include "sf_count_inflate.h"
#include "sf_dynbuf.h"
#include "sf_libmicrohttpd.h"
#include "sf_log.h"
#include "sf_otlp_json.h"
#include "sf_time.h"
#include "sf_zlib.h"

#define THREADS 2
#define ARENA_POOL 4
#define ARENA_CHUNK (1024 * 1024)
#define BUFFER_BUDGET 4         /* max bodies' worth of buffered uploads */
/* ... and at most this share of the hard memory limit (1/BUDGET_SHARE). */
#define BUDGET_SHARE 4
/* A body's buffer grows to what arrived, rounded up to BODY_STEP, and an
 * eighth more from BODY_STEP_EIGHTH up (a large body is then copied a
 * bounded number of times, not once per step). */
#define BODY_STEP ((size_t)64 * 1024)
#define BODY_STEP_EIGHTH ((size_t)1024 * 1024)
/* Reclaiming for memory goes on until this share of the soft limit is free
 * (1/RECLAIM_HEADROOM). */
#define RECLAIM_HEADROOM 16
/* An upload refused for memory that sends nothing for this long is
 * answered 503 and closed at once (it crawls); one still sending is
 * answered when its body is complete, as the SDKs expect. */
#define RECLAIM_STALL_MS 1000
#define RETRY_AFTER "5"
/* A refused body is read and dropped up to this many times the size limit
 * (so the client gets its answer); past it the connection is closed. */
#define DISCARD_FACTOR 4
/* Connections served at once; libmicrohttpd's own cap is CONNECTION_HEADROOM
 * higher, for evicted connections still closing (it closes a connection
 * past its cap without a word: the headroom keeps that from happening
 * while clients that reconnect at once churn the slots). */
#define MAX_CONNECTIONS 512
#define CONNECTION_HEADROOM 512
/* How many of the oldest connections with headers incomplete a newcomer
 * looks at for one with no bytes waiting (an ioctl each). */
#define VICTIM_LOOK 8
/* A connection that has sent nothing yet is not taken in its first
 * SILENT_GRACE_MS while libmicrohttpd's cap is far (the newcomer is served
 * past MAX_CONNECTIONS meanwhile, and the slot settled when a later one
 * comes or at the reaper's turn): a client just connected has had no time
 * to make progress. With clients reconnecting at once 1,000 a second on a
 * machine whose cores were busy, the oldest connections with headers
 * incomplete were all silent and 93-213 ms old, and 2-4 of 50 probe
 * requests each lost its connection before it was written (EPIPE). */
#define SILENT_GRACE_MS 300
#define PATIENT_CONNECTIONS (MAX_CONNECTIONS + CONNECTION_HEADROOM * 3 / 4)
#define REAP_INTERVAL_MS 200
#define SHUTDOWN_GRACE_MS 2000
/* A request under its share that finds memory short, with nothing of this
 * server's left to reclaim, waits this long at most for the gRPC server to
 * reclaim its partial messages (as a gRPC call parks, PARK_MS), looking
 * again whenever one is given back, and at least every PEER_LOOK_MS
 * (memory freed elsewhere, by an export, says nothing). */
#define PEER_WAIT_MS 200
#define PEER_LOOK_MS 20
/* json-c's parse tree, per byte of OTLP/JSON (22x measured on the sample
 * batch); charged to the counted memory while a JSON body is decoded. */
#define JSON_TREE_FACTOR 24

/* Also the order in which a newcomer takes a slot: headers incomplete
 * first, then an upload, then an idle keep-alive connection. */
typedef enum { CS_NEW, CS_BODY, CS_IDLE, CS_COUNT } conn_state;

/* One client connection (libmicrohttpd's socket context), in the server's
 * list under conn_lock. The fd stays open while the record is listed:
 * libmicrohttpd closes it only after the CLOSED notification removed it. */
typedef struct http_conn {
    struct http_conn *prev, *next;
    /* Its state's list, oldest `since` first (while not evicted): a
     * newcomer past the slots finds whose it takes without looking at
     * every connection (conn_victim). */
    conn_link slink;            /* on srv->by_state[state] (conn_list_in) */
    struct http_req *rq;        /* the request whose body is arriving */
    int fd;
    conn_state state;
    int64_t since;              /* entered `state`, monotonic ms */
    bool evicted;               /* shut down by us, not yet closed */
    uint64_t client;            /* sf_net_client_key of its peer: shares and limits */
    int64_t opened;             /* monotonic ms */
} http_conn;

enum { CT_PROTO, CT_JSON };

/* A request. Its thread (libmicrohttpd's) works on it under `lock` while the
 * body arrives; another thread reclaiming memory takes the lock (within
 * conn_lock) to refuse it and free its buffer. Once `finishing` it is its
 * thread's alone. */
typedef struct http_req {
    pthread_mutex_t lock;
    http_conn *conn;            /* its connection's record, under conn_lock */
    _Atomic size_t held;        /* `reserved` while reclaimable, else 0 */
    uint64_t client;            /* its connection's (sf_net_client_key) */
    sf_otlp_hold hold;          /* `held`, charged to its client's share (rq_hold) */
    _Atomic int64_t progress_ms;    /* the last body bytes */
    bool finishing;             /* the body is complete: no longer reclaimable */
    sf_signal signal;           /* of the path: /v1/traces, /v1/logs, /v1/metrics */
    int ct;
    sf_count_coding ce;         /* its Content-Encoding */
    sf_dynbuf body;             /* bounded by max_request_body_size */
    size_t reserved;            /* bytes counted against the buffer budget */
    bool responded;
    /* Refused while the body was still arriving: libmicrohttpd takes a
     * response only once the upload is complete, so the rest of the body is
     * read and discarded (no memory kept) and this answer goes out then. */
    unsigned refuse_http;
    int refuse_rpc;
    const char *refuse_msg;
    sf_reason refuse_reason;
    bool refusal_counted;
    /* Answered ahead of libmicrohttpd (conn_answer_close), under conn_lock:
     * a refusal is counted when its connection ends only then (the
     * client could read it). */
    bool answered_raw;
    size_t discarded;           /* body bytes read and dropped after a refusal */
    size_t expect;              /* Content-Length, when given and within the limit */
    /* The spans of a refused body, counted as it streams past (inflated
     * piecewise when compressed). */
    sf_count_inflate count;
} http_req;

#define BODY(rq) ((const uint8_t *)sf_dynbuf_ptr(&(rq)->body))

typedef struct sf_receiver_http sf_receiver_http;

struct sf_receiver_http {
    otlp_server_env env;        /* the receiver, its depth cap, both servers' clients */
    const sf_receiver_http_config *cfg;
    size_t max_body;
    struct MHD_Daemon *daemon;
    _Atomic size_t buffered;    /* bytes of request bodies being gathered */
    size_t budget;
    sf_otlp_reclaim_fn peer_reclaim;    /* the gRPC server's reclaim_soon, or NULL */
    void *peer;
    _Atomic bool reclaim_asked; /* by the gRPC server: the reaper reclaims at once */
    pthread_mutex_t pool_lock;
    sf_arena *pool[ARENA_POOL];
    size_t n_pool;
    /* connections */
    pthread_mutex_t conn_lock;
    pthread_cond_t reaper_cv;   /* on CLOCK_MONOTONIC */
    http_conn *conns;
    conn_list by_state[CS_COUNT];
    size_t n_conns, n_evicted;  /* listed; of them shut down, still closing */
    bool reaper_stop;
    bool reaper_running;
    pthread_t reaper;
    bool stopping;              /* shutting down: new connections are closed (on_accept) */
    _Atomic uint64_t reclaimed[SF_OTLP_RECLAIM_COUNT];
    _Atomic uint64_t reclaimed_bytes[SF_OTLP_RECLAIM_COUNT];
    _Atomic uint64_t evicted;       /* connections closed for a newcomer's slot */
    _Atomic uint64_t refused_conns; /* newcomers answered 503: every slot was closing */
    _Atomic uint64_t closed[SF_OTLP_CLOSE_COUNT];  /* connections closed for a limit */
};

/* ---- arenas -------------------------------------------------------------- */

static sf_arena *arena_take(sf_receiver_http *srv)
{
    sf_arena *a = NULL;

    pthread_mutex_lock(&srv->pool_lock);
    if (srv->n_pool > 0)
        a = srv->pool[--srv->n_pool];
    pthread_mutex_unlock(&srv->pool_lock);
    if (a == NULL)
        a = sf_arena_create(ARENA_CHUNK, srv->max_body * 16 + ARENA_CHUNK);
    return a;
}

static void arena_give(sf_receiver_http *srv, sf_arena *a)
{
    sf_arena_reset(a);
    pthread_mutex_lock(&srv->pool_lock);
    if (srv->n_pool < ARENA_POOL) {
        srv->pool[srv->n_pool++] = a;
        a = NULL;
    }
    pthread_mutex_unlock(&srv->pool_lock);
    sf_arena_destroy(a);
}

/* ---- responses ------------------------------------------------------------- */

/* send_bytes() flags */
#define SEND_RETRY_AFTER 1u
#define SEND_CLOSE 2u           /* Connection: close: the request's framing is in doubt */

static enum MHD_Result send_bytes(struct MHD_Connection *conn, unsigned code, const char *type,
                                  const void *body, size_t len, unsigned flags)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO;
    if (type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (flags & SEND_RETRY_AFTER)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER);
    if (flags & SEND_CLOSE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* An error as google.rpc.Status, in the request's encoding. */
static enum MHD_Result send_rpc_status_ex(struct MHD_Connection *conn, http_req *rq,
                                          unsigned http, int rpc_code, const char *msg,
                                          unsigned flags)
{
    if (http == 429 || http == 503)
        flags |= SEND_RETRY_AFTER;
    if (rq != NULL)
        rq->responded = true;
    if (rq != NULL && rq->ct == CT_JSON) {
        /* Messages may quote the request ("\\ud800", a member name): escaped,
         * so the answer is JSON whatever they hold. */
        char buf[512], text[384];
        int n;

        sf_json_escape(msg, text, sizeof(text));
        n = snprintf(buf, sizeof(buf), "{\"code\":%d,\"message\":\"%s\"}", rpc_code, text);
        return send_bytes(conn, http, "application/json", buf,
                          (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, flags);
    } else {
        Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
        uint8_t buf[512];
        size_t n;

        st.code = rpc_code;
        st.message = (char *)msg;
        if (google__rpc__status__get_packed_size(&st) > sizeof(buf))
            st.message = (char *)"error";
        n = google__rpc__status__pack(&st, buf);
        return send_bytes(conn, http, "application/x-protobuf", buf, n, flags);
    }
}

static enum MHD_Result send_rpc_status(struct MHD_Connection *conn, http_req *rq, unsigned http,
                                       int rpc_code, const char *msg)
{
    return send_rpc_status_ex(conn, rq, http, rpc_code, msg, 0);
}

/* The table's answer for `st` (otlp_answer.h), with its message unless
 * `msg` says more. */
static enum MHD_Result send_answer(struct MHD_Connection *conn, http_req *rq, sf_status st,
                                   const char *msg)
{
    const sf_otlp_answer *a = sf_otlp_answer_of(st);

    return send_rpc_status(conn, rq, a->http, a->grpc, msg != NULL ? msg : a->message);
}

/* ---- request handling ------------------------------------------------------ */

/* The client the connection counts as (sf_net_client_key). */
static uint64_t client_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    return ci != NULL ? sf_net_client_key(ci->client_addr) : 0;
}

/* ---- request headers ---- */

/* A token character as Go's mime package has it (RFC 2045: printable
 * US-ASCII but tspecials), which is what the upstream collector's OTLP
 * receiver parses Content-Type with. */
static bool is_token_char(char c)
{
    return c > 0x20 && c < 0x7f && strchr("()<>@,;:\\\"/[]?=", c) == NULL;
}

static size_t skip_blanks(const char *s, size_t i)
{
    while (s[i] == ' ' || s[i] == '\t')
        i++;
    return i;
}

static size_t skip_token(const char *s, size_t i)
{
    while (is_token_char(s[i]))
        i++;
    return i;
}

#define MEDIA_PARAMS_MAX 16

/* Whether a Content-Type value parses as one media type (RFC 9110 §8.3.1:
 * type "/" subtype, then ";" name "=" token-or-quoted-string parameters),
 * accepting what Go's mime.ParseMediaType accepts: blanks around ";" and
 * "=", one trailing ";", a parameter twice only with the same value. On
 * true, *type and *type_len are the "type/subtype" part. The upstream
 * receiver answers 415 to a value that does not parse, whatever it starts
 * with; so does this one. More than MEDIA_PARAMS_MAX parameters are
 * refused (Go has no such bound; no OTLP client sends more than one). */
static bool media_type_parse(const char *v, const char **type, size_t *type_len)
{
    struct { size_t name, name_len, value, value_len; } p[MEDIA_PARAMS_MAX];
    size_t n = 0, i = skip_blanks(v, 0), start = i;

    i = skip_token(v, i);
    if (i == start || v[i] != '/')
        return false;
    if (skip_token(v, i + 1) == i + 1)
        return false;
    i = skip_token(v, i + 1);
    *type = v + start;
    *type_len = i - start;
    for (;;) {
        size_t name, value;

        i = skip_blanks(v, i);
        if (v[i] == '\0')
            return true;
        if (v[i] != ';')
            return false;
        i = skip_blanks(v, i + 1);
        if (v[i] == '\0')
            return true;            /* a trailing ";" */
        name = i;
        i = skip_token(v, i);
        if (i == name || n == MEDIA_PARAMS_MAX)
            return false;
        p[n].name = name;
        p[n].name_len = i - name;
        i = skip_blanks(v, i);
        if (v[i] != '=')
            return false;
        i = skip_blanks(v, i + 1);
        if (v[i] == '"') {
            value = ++i;
            while (v[i] != '\0' && v[i] != '"')
                i += v[i] == '\\' && v[i + 1] != '\0' ? 2 : 1;
            if (v[i] != '"')
                return false;
            p[n].value = value;
            p[n].value_len = i++ - value;
        } else {
            value = i;
            i = skip_token(v, i);
            if (i == value)
                return false;
            p[n].value = value;
            p[n].value_len = i - value;
        }
        for (size_t k = 0; k < n; k++)
            if (p[k].name_len == p[n].name_len
                && strncasecmp(v + p[k].name, v + name, p[n].name_len) == 0
                && (p[k].value_len != p[n].value_len
                    || memcmp(v + p[k].value, v + p[n].value, p[n].value_len) != 0))
                return false;
        n++;
    }
}

static bool media_type_is(const char *type, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(type, want, len) == 0;
}

/* The header lines that frame the body and say what it is: how many of each
 * (libmicrohttpd keeps every line; MHD_lookup_connection_value sees only
 * the first), for refusing what two readers could read two ways. */
typedef struct framing {
    unsigned content_type, content_encoding, content_length, transfer_encoding;
    const char *first_length;
    bool lengths_differ;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    framing *fr = cls;

    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0) {
        fr->content_type++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0) {
        fr->content_encoding++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        fr->transfer_encoding++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (fr->content_length++ == 0)
            fr->first_length = value;
        else if (value == NULL || fr->first_length == NULL || strcmp(value, fr->first_length) != 0)
            fr->lengths_differ = true;
    }
    return MHD_YES;
}

/* Start counting a refused body's spans (sf_count_inflate.h): compressed
 * ones are inflated through a small buffer, at most max_body bytes of
 * output (a bomb costs no memory, little CPU). */
static void count_start(sf_receiver_http *srv, http_req *rq)
{
    sf_count_inflate_init(&rq->count, rq->signal, rq->ct == CT_JSON, rq->ce, srv->max_body);
}

/* Body bytes of a refused request: count their spans, keep nothing. */
static void count_feed(http_req *rq, const uint8_t *p, size_t n)
{
    (void)sf_count_inflate_feed(&rq->count, p, n);
}

/* Count a deferred refusal, with the spans seen, exactly once: when it is
 * answered, or when the connection ends first. */
static void count_refusal(sf_receiver_http *srv, http_req *rq)
{
    if (rq->refuse_http == 0 || rq->refusal_counted)
        return;
    rq->refusal_counted = true;
    sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal,
                        sf_count_inflate_items(&rq->count), rq->refuse_reason);
}

/* Charge what `rq` holds now (`held`) to its client's share of the held
 * bytes (otlp_limit.h), after every change of `held`. Under rq->lock, or
 * its thread's alone. */
static void rq_hold(sf_receiver_http *srv, http_req *rq)
{
    sf_otlp_hold_set(srv->env.clients, rq->client, &rq->hold, atomic_load(&rq->held), sf_now_ms());
}

/* Remember a refusal decided before or during the upload; it is answered
 * (and counted) when the upload ends. */
static enum MHD_Result refuse_later(sf_receiver_http *srv, http_req *rq, sf_status st,
                                    const char *msg, sf_reason reason)
{
    const sf_otlp_answer *a = sf_otlp_answer_of(st);

    rq->refuse_http = a->http;
    rq->refuse_rpc = a->grpc;
    rq->refuse_msg = msg != NULL ? msg : a->message;
    rq->refuse_reason = reason;
    count_start(srv, rq);
    count_feed(rq, BODY(rq), sf_dynbuf_len(&rq->body));    /* what was gathered so far */
    /* Give the buffer back at once: the rest of the body is discarded. */
    atomic_fetch_sub(&srv->buffered, rq->reserved);
    rq->reserved = 0;
    atomic_store(&rq->held, 0);
    rq_hold(srv, rq);
    sf_dynbuf_release(&rq->body);
    return MHD_YES;
}

/* ---- reclaiming -------------------------------------------------------------- */

static void conn_evict(sf_receiver_http *srv, http_conn *c, const char *why);

/* Whether memory is short, or less than the headroom is free below the
 * soft limit. */
static bool memory_wanted(const sf_receiver_http *srv)
{
    size_t soft, hard;

    if (!sf_component_may_accept(srv->env.self))
        return true;
    sf_alloc_limits(&soft, &hard);
    return soft > 0 && sf_alloc_in_use() + soft / RECLAIM_HEADROOM >= soft;
}

/* Whether memory has no room for a request's next bytes: for a body the
 * bytes do not complete, when less than the headroom is free (uploads
 * that crawl may fill memory only to there: the last sixteenth is for
 * requests that are complete); for one they complete, when memory is
 * short. */
static bool no_room(const sf_receiver_http *srv, bool incomplete)
{
    return incomplete ? memory_wanted(srv) : !sf_component_may_accept(srv->env.self);
}

/* Send `answer` (a whole HTTP response) now, ahead of libmicrohttpd, and
 * close the connection. Under conn_lock. */
static void conn_answer_close(sf_receiver_http *srv, http_conn *c, const char *answer, size_t len,
                              const char *why)
{
    if (c->evicted)
        return;                     /* closing already: it had its answer, or none is due */
    if (send(c->fd, answer, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the peer is gone or not reading: closed all the same */
    } else if (c->rq != NULL) {
        c->rq->answered_raw = true;
    }
    conn_evict(srv, c, why);
}

/* Whether `c`'s upload crawls: nothing arrived for RECLAIM_STALL_MS and no
 * byte waits unread on its socket. Bytes waiting mean the collector is
 * behind, not the client (its threads waited for memory, or the machine is
 * busy): such an upload is answered when its body is complete, its spans
 * counted whole, not cut off as a crawler. Under conn_lock. */
static bool upload_crawls(const http_conn *c, int64_t now)
{
    int unread = 0;

    if (now - atomic_load(&c->rq->progress_ms) < RECLAIM_STALL_MS)
        return false;
    return !(ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0);
}

/* Answer 503 now to an upload refused for memory, and close its
 * connection. Under conn_lock. */
static void answer_crawler(sf_receiver_http *srv, http_conn *c, const char *why)
{
    static const char answer[] =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " RETRY_AFTER "\r\n"
        "Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 74\r\n\r\n"
        "upload buffers are full: this upload made the least recent progress; retry";

    /* libmicrohttpd would answer only once the body is complete: the answer
     * goes out here, then the connection closes; the refusal is counted
     * when libmicrohttpd ends the request. */
    conn_answer_close(srv, c, answer, sizeof(answer) - 1, why);
}

/* While memory is short (a complete request would be refused) or the
 * bodies' budget has no room for `want` more bytes, the upload in progress
 * holding the most bytes with the least recent progress (bytes times the
 * time since its last bytes), never `keep`, is refused for memory and its
 * buffer freed: a crawling upload pays for the memory it holds, not a
 * client whose request is complete. One that sent nothing for
 * RECLAIM_STALL_MS is answered 503 and closed at once; one still sending
 * is answered when its body is complete (or by the reaper once it
 * stalls), so its spans are counted. Clients over their share of the held
 * bytes pay first; when `keep`'s client is over its share, or `over_only`
 * (the gRPC server asks), only they do. True when any was refused. Takes
 * conn_lock, then the victim's lock: call it holding neither. */
static bool reclaim(sf_receiver_http *srv, const http_req *keep, size_t want, bool over_only)
{
    bool any = false;
    bool keep_over = over_only ||
                     (keep != NULL && sf_otlp_over_share(srv->env.clients, keep->client));

    for (;;) {
        sf_otlp_reclaim why;
        http_conn *victim = NULL;
        http_req *rq;
        uint64_t best = 0;
        int64_t now = sf_now_ms();
        bool victim_over = false;

        if (memory_wanted(srv))
            why = SF_OTLP_RECLAIM_MEMORY;
        else if (atomic_load(&srv->buffered) + want > srv->budget)
            why = SF_OTLP_RECLAIM_BUDGET;
        else
            break;
        pthread_mutex_lock(&srv->conn_lock);
        for (http_conn *c = srv->conns; c != NULL; c = c->next) {
            size_t h;
            uint64_t score;
            bool over;

            if (c->rq == NULL || c->rq == keep || c->evicted)
                continue;
            h = atomic_load(&c->rq->held);
            if (h == 0)
                continue;
            /* Clients over their share of the held bytes first; one over
             * its share takes only from others over theirs. */
            over = sf_otlp_over_share(srv->env.clients, c->client);
            if ((keep_over || victim_over) && !over)
                continue;
            score = (uint64_t)h * (uint64_t)(now - atomic_load(&c->rq->progress_ms) +
                                             REAP_INTERVAL_MS);
            if (victim == NULL || (over && !victim_over) || score > best) {
                victim = c;
                best = score;
                victim_over = over;
            }
        }
        if (victim == NULL) {
            pthread_mutex_unlock(&srv->conn_lock);
            break;
        }
        if (!victim_over && srv->peer_reclaim != NULL && sf_otlp_any_over_share(srv->env.clients)) {
            /* A client over its share holds in the gRPC server: it pays
             * first (asked now). (Or its upload is being closed here:
             * given back within a turn.) */
            pthread_mutex_unlock(&srv->conn_lock);
            if (srv->peer_reclaim != NULL)
                srv->peer_reclaim(srv->peer);
            break;
        }
        rq = victim->rq;
        pthread_mutex_lock(&rq->lock);
        if (!rq->finishing && rq->refuse_http == 0 && rq->reserved > 0) {
            atomic_fetch_add(&srv->reclaimed[why], 1);
            atomic_fetch_add(&srv->reclaimed_bytes[why], rq->reserved);
            sf_otlp_reclaimed(srv->env.clients, 1, victim_over);
            refuse_later(srv, rq, SF_MEMLIMIT, NULL, SF_REASON_MEMORY_LIMIT);
            /* A crawler is answered and closed now; an upload still
             * sending, when its body is complete (or by the reaper, once
             * it stops). */
            if (upload_crawls(victim, now))
                answer_crawler(srv, victim, why == SF_OTLP_RECLAIM_MEMORY
                               ? "memory is short, its upload made the least progress"
                               : "the bodies' budget is full, its upload made the least progress");
            any = true;
        }
        atomic_store(&rq->held, 0);     /* not picked again */
        rq_hold(srv, rq);
        pthread_mutex_unlock(&rq->lock);
        pthread_mutex_unlock(&srv->conn_lock);
    }
    return any;
}

/* Memory is still short (`incomplete`: or less than the headroom free) for
 * `rq` after this server's own reclaim: when its client is under its share
 * and the gRPC server holds partial messages, ask it to reclaim them and
 * wait for it (sf_otlp_wait_given), at most PEER_WAIT_MS. Call it holding
 * no lock. */
static void reclaim_peer(sf_receiver_http *srv, const http_req *rq, bool incomplete)
{
    int64_t until = sf_now_ms() + PEER_WAIT_MS;
    size_t share, clients, held;

    if (srv->peer_reclaim == NULL || sf_otlp_over_share(srv->env.clients, rq->client))
        return;
    for (;;) {
        int64_t now;

        sf_otlp_share_state(srv->env.clients, &share, &clients, &held);
        if (held <= atomic_load(&srv->buffered) || !sf_otlp_any_over_share(srv->env.clients))
            return;                 /* the gRPC server holds nothing it would give */
        now = sf_now_ms();
        if (!no_room(srv, incomplete) || now >= until)
            return;
        srv->peer_reclaim(srv->peer);
        sf_otlp_wait_given(srv->env.clients,
                           now + PEER_LOOK_MS < until ? now + PEER_LOOK_MS : until);
    }
}

/* OTLP of a signal no pipeline listing the receiver carries (metrics or
 * logs, or traces when only logs/metrics pipelines list it):
 * refused with 404 as upstream's receiver does (it serves a signal's path
 * only then; the client's SDK does not retry it), in the request's
 * encoding, saying why, and counted; never answered as accepted and
 * dropped unseen. */
static enum MHD_Result other_signal(sf_receiver_http *srv, struct MHD_Connection *conn,
                                    sf_signal sig, const char *method)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *type;
    size_t type_len;
    http_req tmp = { .signal = sig, .ct = CT_PROTO };
    char why[96];

    if (ct != NULL && media_type_parse(ct, &type, &type_len) &&
        media_type_is(type, type_len, "application/json"))
        tmp.ct = CT_JSON;
    if (strcmp(method, "POST") != 0)
        return send_rpc_status_ex(conn, &tmp, 405, SF_RPC_INVALID_ARGUMENT,
                                  "method not allowed: use POST", 0);
    sf_component_unexported(srv->env.self, SF_TRANSPORT_HTTP, sig);
    snprintf(why, sizeof(why), "not found: no %s pipeline lists this receiver",
             sf_signal_name(sig));
    return send_rpc_status_ex(conn, &tmp, 404, SF_RPC_NOT_FOUND, why, 0);
}

/* Refuse a request from its headers alone (its body is not read, so no
 * spans are counted), answering in encoding `ctype`. */
static enum MHD_Result refuse_headers(sf_receiver_http *srv, struct MHD_Connection *conn,
                                      sf_signal sig, int ctype, unsigned http, const char *msg,
                                      unsigned flags)
{
    http_req tmp = { .signal = sig, .ct = ctype };

    sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, sig, 0, SF_REASON_MALFORMED);
    return send_rpc_status_ex(conn, &tmp, http, SF_RPC_INVALID_ARGUMENT, msg, flags);
}

/* Headers are in: decide whether to take the body at all. */
static enum MHD_Result begin(sf_receiver_http *srv, struct MHD_Connection *conn,
                             const char *url, const char *method, void **req_cls)
{
    const char *ct, *ce, *cl, *type;
    size_t type_len;
    framing fr = { 0 };
    http_req *rq;
    int ctype;
    sf_count_coding cenc = SF_COUNT_IDENTITY;
    sf_signal sig;

    if (strcmp(url, srv->cfg->traces_url_path) == 0)
        sig = SF_SIGNAL_TRACES;
    else if (strcmp(url, srv->cfg->logs_url_path) == 0)
        sig = SF_SIGNAL_LOGS;
    else if (strcmp(url, srv->cfg->metrics_url_path) == 0)
        sig = SF_SIGNAL_METRICS;
    else
        return send_rpc_status(conn, NULL, 404, SF_RPC_NOT_FOUND, "not found: spanfence "
                               "accepts OTLP on the traces, logs and metrics paths only");
    if (!sf_component_receives(srv->env.self, sig))
        return other_signal(srv, conn, sig, method);
    if (strcmp(method, "POST") != 0)
        return send_rpc_status(conn, NULL, 405, SF_RPC_INVALID_ARGUMENT, "method not allowed: use POST");
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &fr);
    if (fr.transfer_encoding > 0 && fr.content_length > 0) {
        /* RFC 9112 §6.3: a server may refuse it, and must close the
         * connection after answering: a proxy in front that framed the body
         * by Content-Length would see another request here. */
        return refuse_headers(srv, conn, sig, CT_PROTO, 400,
                              "both Content-Length and Transfer-Encoding given: send one",
                              SEND_CLOSE);
    }
    if (fr.lengths_differ)
        return refuse_headers(srv, conn, sig, CT_PROTO, 400,
                              "Content-Length given twice with different values", SEND_CLOSE);
    ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    /* Two Content-Type lines are one value "a, b" (RFC 9110 §5.3), which
     * is no media type. */
    if (ct == NULL || fr.content_type > 1 || !media_type_parse(ct, &type, &type_len))
        return refuse_headers(srv, conn, sig, CT_PROTO, 415, ct == NULL
                              ? "unsupported content type: use application/x-protobuf or "
                                "application/json"
                              : fr.content_type > 1
                              ? "unsupported content type: Content-Type given twice"
                              : "unsupported content type: not one media type (type/subtype, "
                                "then ;name=value parameters)", 0);
    if (media_type_is(type, type_len, "application/x-protobuf"))
        ctype = CT_PROTO;
    else if (media_type_is(type, type_len, "application/json"))
        ctype = CT_JSON;
    else
        return refuse_headers(srv, conn, sig, CT_PROTO, 415, "unsupported content type: use "
                              "application/x-protobuf or application/json", 0);
    if (fr.content_encoding > 1) {
        /* Two lines are the list "a, b" (RFC 9110 §5.3): stacked codings,
         * refused as in one line; reading only the first (as libmicrohttpd's
         * lookup and Go's Header.Get do) would decode what a proxy in front
         * read as another coding. */
        return refuse_headers(srv, conn, sig, ctype, 415, "unsupported content encoding: "
                              "Content-Encoding given twice (stacked codings are not supported)",
                              0);
    }
    ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce != NULL && strcasecmp(ce, "gzip") == 0)
        cenc = SF_COUNT_GZIP;
    else if (ce != NULL && strcasecmp(ce, "deflate") == 0)
        cenc = SF_COUNT_DEFLATE;
    else if (ce != NULL && strcasecmp(ce, "zstd") == 0)
        cenc = SF_COUNT_ZSTD;
    else if (ce != NULL && strcasecmp(ce, "identity") != 0 && ce[0] != '\0')
        return refuse_headers(srv, conn, sig, ctype, 415,
                              "unsupported content encoding: use gzip, deflate, zstd or none", 0);
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL && strtoull(cl, NULL, 10) > DISCARD_FACTOR * srv->max_body) {
        /* Far too large to read just to say so: answer now and close. */
        sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, sig, 0, SF_REASON_TOO_LARGE);
        http_req tmp = { .signal = sig, .ct = ctype };
        return send_answer(conn, &tmp, SF_TOOBIG, "request body too large");
    }
    /* Not refused at the hard limit (a few hundred bytes): it is what
     * answers 503 and counts the spans when memory is short. */
    rq = sf_calloc_unlimited(1, sizeof(*rq));
    if (rq == NULL)
        return MHD_NO;
    pthread_mutex_init(&rq->lock, NULL);
    atomic_store(&rq->progress_ms, sf_now_ms());
    rq->signal = sig;
    rq->ct = ctype;
    rq->ce = cenc;
    sf_dynbuf_init(&rq->body, srv->max_body);
    *req_cls = rq;
    {
        /* Listed on its connection, where reclaim() finds it. */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        http_conn *c = ci != NULL ? ci->socket_context : NULL;

        rq->client = c != NULL ? c->client : client_of(conn);
        if (c != NULL) {
            pthread_mutex_lock(&srv->conn_lock);
            c->rq = rq;
            rq->conn = c;
            pthread_mutex_unlock(&srv->conn_lock);
        }
    }
    if (cl != NULL && strtoull(cl, NULL, 10) > srv->max_body) {
        /* Read and drop the body, then answer 413: a client that streams its
         * body (the OTLP SDKs do) would otherwise see a broken pipe instead
         * of the status, and retry the same request. */
        return refuse_later(srv, rq, SF_TOOBIG, "request body too large", SF_REASON_TOO_LARGE);
    }
    /* Memory short: crawling uploads pay first; else refuse before
     * buffering any of the body. */
    if (!sf_component_may_accept(srv->env.self))
        reclaim(srv, rq, 0, false);
    if (!sf_component_may_accept(srv->env.self))
        return refuse_later(srv, rq, SF_MEMLIMIT, NULL,
                            SF_REASON_MEMORY_LIMIT);
    /* The buffer budget is taken as the body arrives (gather), so uploads
     * that crawl hold only what they sent, and a declared length takes
     * nothing yet. */
    if (cl != NULL)
        rq->expect = (size_t)strtoull(cl, NULL, 10);
    return MHD_YES;
}

/* Count and drop body bytes of a refused request, up to a point. */
static enum MHD_Result discard(sf_receiver_http *srv, http_req *rq, const char *data, size_t n)
{
    count_feed(rq, (const uint8_t *)data, n);
    rq->discarded += n;
    return rq->discarded > DISCARD_FACTOR * srv->max_body ? MHD_NO : MHD_YES;
}

/* More body bytes: append within the per-request and global bounds. Under
 * rq->lock (released while reclaiming from others). */
static enum MHD_Result gather(sf_receiver_http *srv, http_req *rq, const char *data,
                              size_t *size)
{
    size_t n = *size;
    bool incomplete;

    *size = 0;
    atomic_store(&rq->progress_ms, sf_now_ms());
    if (rq->refuse_http != 0)       /* count and discard the rest, up to a point */
        return discard(srv, rq, data, n);
    /* A body this chunk does not complete (its Content-Length is further
     * on, or unknown) leaves the headroom below the soft limit free, for
     * requests that are complete: uploads that crawl may fill memory only
     * to there, and the next one reclaims from them, not a whole request
     * arriving beside them. */
    incomplete = rq->expect == 0 || sf_dynbuf_len(&rq->body) + n < rq->expect;
    if (no_room(srv, incomplete)) {
        /* Uploads that crawl pay first (this one just made progress), then
         * the gRPC server's partial messages; clients holding more than
         * this one then will first of all (sf_otlp_want). */
        sf_otlp_want(srv->env.clients, rq->client, n, sf_now_ms());
        pthread_mutex_unlock(&rq->lock);
        reclaim(srv, rq, 0, false);
        reclaim_peer(srv, rq, incomplete);
        pthread_mutex_lock(&rq->lock);
        if (rq->refuse_http != 0)
            return discard(srv, rq, data, n);
    }
    /* Memory is still short: the body would be refused when complete, so it
     * is counted from now on and its buffer given back, instead of bodies
     * admitted before filling memory on to the hard limit. */
    if (no_room(srv, incomplete)) {
        refuse_later(srv, rq, SF_MEMLIMIT, NULL, SF_REASON_MEMORY_LIMIT);
        count_feed(rq, (const uint8_t *)data, n);
        rq->discarded += n;
        return MHD_YES;
    }
    if (sf_dynbuf_len(&rq->body) + n > srv->max_body) {
        refuse_later(srv, rq, SF_TOOBIG, "request body too large", SF_REASON_TOO_LARGE);
        count_feed(rq, (const uint8_t *)data, n);
        rq->discarded += n;
        return MHD_YES;
    }
    if (sf_dynbuf_len(&rq->body) + n > sf_dynbuf_capacity(&rq->body)) {
        size_t need = sf_dynbuf_len(&rq->body) + n;
        size_t ncap = need + (need >= BODY_STEP_EIGHTH ? need / 8 : 0);

        /* Capacity is chosen here, not by the buffer's doubling: what
         * arrived, rounded up (2 MiB and a byte must not hold 4 MiB of
         * the budget), taken from the buffer budget before it is
         * allocated. */
        ncap = (ncap + BODY_STEP - 1) / BODY_STEP * BODY_STEP;
        if (rq->expect >= need && ncap > rq->expect)
            ncap = rq->expect;      /* Content-Length: no more than the body */
        if (ncap > srv->max_body)
            ncap = srv->max_body;
        if (ncap > rq->reserved) {
            size_t more = ncap - rq->reserved;

            if (atomic_load(&srv->buffered) + more > srv->budget) {
                /* The budget is full: uploads that crawl pay first. */
                pthread_mutex_unlock(&rq->lock);
                reclaim(srv, rq, more, false);
                pthread_mutex_lock(&rq->lock);
                if (rq->refuse_http != 0)
                    return discard(srv, rq, data, n);
            }
            if (atomic_fetch_add(&srv->buffered, more) + more > srv->budget) {
                atomic_fetch_sub(&srv->buffered, more);
                refuse_later(srv, rq, SF_RETRY, "too many requests in progress, retry later",
                             SF_REASON_MEMORY_LIMIT);
                count_feed(rq, (const uint8_t *)data, n);
                return MHD_YES;
            }
            rq->reserved = ncap;
            atomic_store(&rq->held, ncap);
            rq_hold(srv, rq);
        }
        if (sf_dynbuf_reserve(&rq->body, ncap) != SF_OK) {
            refuse_later(srv, rq, SF_ENOMEM, NULL, SF_REASON_MEMORY_LIMIT);
            count_feed(rq, (const uint8_t *)data, n);
            return MHD_YES;
        }
    }
    sf_dynbuf_add(&rq->body, data, n);    /* within the bound and the room: cannot fail */
    return MHD_YES;
}

/* The spans of a body refused after decoding began: what the decoder saw,
 * or, when it saw none (OTLP/JSON is decoded whole first, and refused whole
 * for a member named twice or a lone surrogate), a streaming count of the
 * body. */
static size_t refused_spans(sf_receiver_http *srv, http_req *rq, const sf_request *batch,
                            sf_status st)
{
    if (batch->spans > 0 || (st == SF_INVALID && rq->ct != CT_JSON))
        return batch->spans;
    count_start(srv, rq);
    count_feed(rq, BODY(rq), sf_dynbuf_len(&rq->body));
    return sf_count_inflate_items(&rq->count);
}

/* Refuse a whole body now, counting its spans. */
static enum MHD_Result refuse_counted(sf_receiver_http *srv, struct MHD_Connection *conn,
                                      http_req *rq, sf_status st, const char *msg,
                                      sf_reason reason)
{
    count_start(srv, rq);
    count_feed(rq, BODY(rq), sf_dynbuf_len(&rq->body));
    sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal,
                        sf_count_inflate_items(&rq->count), reason);
    return send_answer(conn, rq, st, msg);
}

/* The record of a libmicrohttpd connection, or NULL (untracked). */
static http_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL ? ci->socket_context : NULL;
}

static enum MHD_Result finish(sf_receiver_http *srv, struct MHD_Connection *conn,
                              http_req *rq)
{
    const uint8_t *data = BODY(rq);
    size_t len = sf_dynbuf_len(&rq->body);
    uint8_t *inflated = NULL;
    sf_arena *arena;
    sf_request batch;
    sf_status st = SF_OK;
    char err[256] = "";
    enum MHD_Result ret;
    size_t charged = 0, soft, hard;

    if (!sf_component_may_accept(srv->env.self)) {
        sf_otlp_want(srv->env.clients, rq->client, 0, sf_now_ms());
        reclaim(srv, rq, 0, false);     /* uploads that crawl pay first */
    }
    if (!sf_component_may_accept(srv->env.self))
        reclaim_peer(srv, rq, false);   /* then the gRPC server's partial messages */
    if (!sf_component_may_accept(srv->env.self)) {
        /* Memory became short during the upload: refuse, counting spans. */
        return refuse_counted(srv, conn, rq, SF_MEMLIMIT, NULL,
                              SF_REASON_MEMORY_LIMIT);
    }
    if (rq->ce != SF_COUNT_IDENTITY) {
        const char *why = NULL;
        http_conn *hc = conn_of(conn);
        bool close = false;
        unsigned slot;

        /* Decompression is paid per client: past its share a second,
         * refused before it costs more; closed if the client goes on. */
        int64_t now = sf_now_ms();

        if (!sf_otlp_inflate_open(srv->env.clients, hc != NULL ? hc->client : 0,
                                  hc != NULL ? hc->opened : now, now, &slot, &close)) {
            if (close)
                atomic_fetch_add(&srv->closed[SF_OTLP_CLOSE_DECOMPRESSION], 1);
            sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal, 0,
                                SF_REASON_TOO_LARGE);
            return send_rpc_status_ex(conn, rq, 429, SF_RPC_RESOURCE_EXHAUSTED,
                                      "decompression rate of this client exceeded: send "
                                      "less compressed data a second, or uncompressed; retry "
                                      "later", close ? SEND_CLOSE : 0);
        }
        if (rq->ce == SF_COUNT_ZSTD)
            st = sf_unzstd(BODY(rq), sf_dynbuf_len(&rq->body), srv->max_body, &inflated, &len,
                           &why);
        else
            st = sf_inflate(BODY(rq), sf_dynbuf_len(&rq->body), srv->max_body, &inflated, &len);
        sf_otlp_inflate_charge(srv->env.clients, slot, st == SF_OK ? len : st == SF_TOOBIG
                               ? srv->max_body : sf_dynbuf_len(&rq->body));
        if (st == SF_ENOMEM)
            return refuse_counted(srv, conn, rq, SF_ENOMEM, NULL,
                                  SF_REASON_MEMORY_LIMIT);
        if (st != SF_OK) {
            sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal, 0,
                                st == SF_TOOBIG ? SF_REASON_TOO_LARGE : SF_REASON_MALFORMED);
            if (st == SF_TOOBIG)
                return send_answer(conn, rq, SF_TOOBIG, "request body too large after decompression");
            if (rq->ce != SF_COUNT_ZSTD)
                return send_answer(conn, rq, SF_INVALID, "request body could not be decompressed");
            snprintf(err, sizeof(err), "request body could not be decompressed: %s",
                     why != NULL ? why : "corrupt zstd data");
            return send_answer(conn, rq, SF_INVALID, err);
        }
        data = inflated;
    }
    if (rq->ct == CT_JSON) {
        /* json-c's tree is outside the count: charge an estimate of it
         * first. One that could never fit is not worth retrying. */
        sf_alloc_limits(&soft, &hard);
        charged = len < SIZE_MAX / JSON_TREE_FACTOR ? len * JSON_TREE_FACTOR : SIZE_MAX;
        if (hard != 0 && charged > hard) {
            sf_free(inflated);
            return refuse_counted(srv, conn, rq, SF_TOOBIG, "request too large to decode as "
                                  "OTLP/JSON within the memory limit: send protobuf, or smaller "
                                  "requests", SF_REASON_TOO_LARGE);
        }
        if (!sf_alloc_charge(charged)) {
            sf_free(inflated);
            return refuse_counted(srv, conn, rq, SF_MEMLIMIT, NULL,
                                  SF_REASON_MEMORY_LIMIT);
        }
    }
    arena = arena_take(srv);
    if (arena == NULL) {
        sf_free(inflated);
        sf_alloc_uncharge(charged);
        return refuse_counted(srv, conn, rq, SF_ENOMEM, NULL,
                              SF_REASON_MEMORY_LIMIT);
    }
    if (rq->ct == CT_JSON) {
        /* OTLP/JSON becomes protobuf first: from here on every batch is
         * bytes, whichever way it came in. */
        const uint8_t *packed = NULL;

        st = sf_otlp_json_to_wire(rq->signal, arena, (const char *)data, len, srv->env.max_depth,
                                  &packed, &len, err, sizeof(err));
        data = packed;
        memset(&batch, 0, sizeof(batch));
    }
    if (st == SF_OK) {
        /* The codec's pass inside emit is also the validation. */
        sf_request_init_signal(&batch, arena, rq->signal, data, len, srv->env.max_depth);
        batch.client = conn_of(conn) != NULL ? conn_of(conn)->client : client_of(conn);
        st = sf_component_emit(srv->env.self, SF_TRANSPORT_HTTP, &batch);
        if (st == SF_INVALID)
            snprintf(err, sizeof(err), "request is not a valid %s: %s",
                     sf_otlp_request_name(rq->signal),
                     batch.stats.error != NULL ? batch.stats.error : "malformed");
        sf_request_release(&batch);
        if (st == SF_OK)
            ret = rq->ct == CT_JSON ? send_bytes(conn, 200, "application/json", "{}", 2, 0)
                                    : send_bytes(conn, 200, "application/x-protobuf", "", 0, 0);
        else
            ret = send_answer(conn, rq, st, st == SF_INVALID ? err : NULL);
    } else if (st == SF_UNSUPPORTED) {
        /* OTLP/JSON the codec does not map for this signal yet: refused,
         * counted, saying what to send instead (never taken and lost) */
        sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal,
                            refused_spans(srv, rq, &batch, SF_INVALID), SF_REASON_MALFORMED);
        snprintf(err + strlen(err), sizeof(err) - strlen(err), ": send protobuf");
        ret = send_rpc_status_ex(conn, rq, 415, SF_RPC_INVALID_ARGUMENT, err, 0);
    } else {
        sf_component_refuse(srv->env.self, SF_TRANSPORT_HTTP, rq->signal,
                            refused_spans(srv, rq, &batch, st),
                            st == SF_INVALID ? SF_REASON_MALFORMED : SF_REASON_MEMORY_LIMIT);
        if (st == SF_INVALID)
            ret = send_answer(conn, rq, SF_INVALID, err[0] ? err : NULL);
        else
            ret = send_answer(conn, rq, SF_ENOMEM, NULL);
    }
    arena_give(srv, arena);
    sf_free(inflated);
    sf_alloc_uncharge(charged);
    rq->responded = true;
    return ret;
}

/* ---- connections ------------------------------------------------------------ */

#define HTTP_CONN_OF(l) CONN_ORDER_OF(l, http_conn, slink)

/* Out of its state's list. Under conn_lock. */
static void conn_list_out(sf_receiver_http *srv, http_conn *c)
{
    conn_order_remove(&srv->by_state[c->state], &c->slink);
}

/* Into its state's list at its `since`. Under conn_lock. */
static void conn_list_in(sf_receiver_http *srv, http_conn *c)
{
    conn_list_out(srv, c);
    conn_order_insert(&srv->by_state[c->state], &c->slink, c->since);
}

/* Under conn_lock. */
static void conn_evict(sf_receiver_http *srv, http_conn *c, const char *why)
{
    if (c->evicted)
        return;
    conn_list_out(srv, c);
    c->evicted = true;
    srv->n_evicted++;
    shutdown(c->fd, SHUT_RDWR);     /* libmicrohttpd sees the end and closes it */
    sf_debug("receiver '%s': http: closing a connection (%s)", sf_component_id(srv->env.self), why);
}

static void conn_set_state(sf_receiver_http *srv, struct MHD_Connection *conn,
                           conn_state st)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *c = ci != NULL ? ci->socket_context : NULL;

    if (c == NULL)
        return;
    pthread_mutex_lock(&srv->conn_lock);
    if (c->state != st) {
        bool ranked = c->slink.linked;

        conn_list_out(srv, c);
        c->state = st;
        c->since = sf_now_ms();
        if (ranked)
            conn_list_in(srv, c);
    }
    pthread_mutex_unlock(&srv->conn_lock);
}

static void conn_make_room(sf_receiver_http *srv, http_conn *newcomer);

/* Whether we shut the connection down (evicted, answered ahead, deadline). */
static bool conn_closing(sf_receiver_http *srv, struct MHD_Connection *conn)
{
    http_conn *c = conn_of(conn);
    bool closing;

    if (c == NULL)
        return false;
    pthread_mutex_lock(&srv->conn_lock);
    closing = c->evicted;
    pthread_mutex_unlock(&srv->conn_lock);
    return closing;
}

static bool rq_answered_raw(sf_receiver_http *srv, const http_req *rq)
{
    bool raw;

    pthread_mutex_lock(&srv->conn_lock);
    raw = rq->answered_raw;
    pthread_mutex_unlock(&srv->conn_lock);
    return raw;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    sf_receiver_http *srv = cls;
    http_conn *c;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

        c = ci != NULL ? sf_calloc(1, sizeof(*c)) : NULL;
        if (c == NULL)
            return;                 /* untracked: libmicrohttpd's limits still hold */
        c->fd = ci->connect_fd;
        c->state = CS_NEW;
        c->since = sf_now_ms();
        c->client = client_of(conn);
        c->opened = c->since;
        pthread_mutex_lock(&srv->conn_lock);
        c->next = srv->conns;
        if (srv->conns != NULL)
            srv->conns->prev = c;
        srv->conns = c;
        srv->n_conns++;
        conn_list_in(srv, c);
        conn_make_room(srv, c);
        pthread_mutex_unlock(&srv->conn_lock);
        *socket_context = c;
        return;
    }
    c = *socket_context;
    if (c == NULL)
        return;
    pthread_mutex_lock(&srv->conn_lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    conn_list_out(srv, c);
    srv->n_conns--;
    if (c->evicted)
        srv->n_evicted--;
    if (c->rq != NULL)
        c->rq->conn = NULL;
    pthread_mutex_unlock(&srv->conn_lock);
    sf_free(c);
    *socket_context = NULL;
}

/* What a connection with its headers incomplete is doing, as the kernel
 * sees it: 0 sent nothing yet (a client between connect and its first
 * write), 1 has bytes waiting unread (progress libmicrohttpd has not seen
 * yet: a request sent whole, not yet parsed), 2 sent bytes that were all
 * read, and its headers are still incomplete (it crawls). */
static int conn_new_progress(const http_conn *c)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int n = 0;

    if (ioctl(c->fd, FIONREAD, &n) == 0 && n > 0)
        return 1;
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_bytes_received == 0)
        return 0;
    return 2;
}

/* The connection a newcomer takes the slot of (never `except`), or NULL
 * when every other one is closing already: the least progress first, not
 * the oldest. One whose request headers are still incomplete (the longest
 * so first; among the VICTIM_LOOK oldest, one that sent bytes all read
 * before one that sent nothing yet, before one with bytes waiting unread),
 * then an upload (the least recent body bytes first), and only then a
 * keep-alive connection between requests (idle longest first): a client
 * that completes requests keeps its connection
 * while any slot is held by one that does not. No age shields a holder (a
 * client that reconnects at once would keep every slot younger than any).
 * Under conn_lock. */
static http_conn *conn_victim(sf_receiver_http *srv, const http_conn *except, bool patient)
{
    http_conn *oldest[VICTIM_LOOK];
    size_t n_oldest = 0;
    http_conn *best = NULL;
    int64_t best_key = 0, now = sf_now_ms();

    for (conn_link *l = srv->by_state[CS_NEW].head; l != NULL && n_oldest < VICTIM_LOOK;
         l = l->next)
        if (HTTP_CONN_OF(l) != except)
            oldest[n_oldest++] = HTTP_CONN_OF(l);
    if (n_oldest > 0) {
        http_conn *silent = NULL;

        for (size_t i = 0; i < n_oldest; i++) {
            int p = conn_new_progress(oldest[i]);

            if (p == 2)
                return oldest[i];
            if (p == 0 && silent == NULL && (!patient || now - oldest[i]->since >= SILENT_GRACE_MS))
                silent = oldest[i];
        }
        /* patient: the silent ones are young, the others have spoken */
        return silent != NULL ? silent : patient ? NULL : oldest[0];
    }
    for (conn_link *l = srv->by_state[CS_BODY].head; l != NULL; l = l->next) {
        http_conn *c = HTTP_CONN_OF(l);
        int64_t key = c->rq != NULL ? atomic_load(&c->rq->progress_ms) : c->since;

        if (c != except && (best == NULL || key < best_key)) {
            best = c;
            best_key = key;
        }
    }
    if (best != NULL)
        return best;
    for (conn_link *l = srv->by_state[CS_IDLE].head; l != NULL; l = l->next)
        if (HTTP_CONN_OF(l) != except)
            return HTTP_CONN_OF(l);
    return NULL;
}

/* Connections past MAX_CONNECTIONS take the slots of those making the
 * least progress, answered 503 when they had a request under way (an idle
 * one is just closed, as keep-alive allows). Silent ones in their grace are
 * waited for while libmicrohttpd's cap is far (patient); past that, or when
 * every other is closing already, the newcomer itself is answered 503 and
 * closed, never reset. `newcomer` NULL: the reaper settling the slots.
 * Under conn_lock. */
static void conn_make_room(sf_receiver_http *srv, http_conn *newcomer)
{
    static const char busy[] =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " RETRY_AFTER "\r\n"
        "Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 67\r\n\r\n"
        "too many connections: this one made the least progress; retry later";

    while (srv->n_conns - srv->n_evicted > MAX_CONNECTIONS) {
        bool patient = srv->n_conns < PATIENT_CONNECTIONS;
        http_conn *v = conn_victim(srv, newcomer, patient);

        if (v == NULL && patient)
            return;
        if (v == NULL) {
            if (newcomer != NULL) {
                atomic_fetch_add(&srv->refused_conns, 1);
                conn_answer_close(srv, newcomer, busy, sizeof(busy) - 1, "every slot is closing");
            }
            return;
        }
        atomic_fetch_add(&srv->evicted, 1);
        if (v->state == CS_IDLE)
            conn_evict(srv, v, "idle, its slot is needed");
        else
            conn_answer_close(srv, v, busy, sizeof(busy) - 1, v->state == CS_NEW
                              ? "headers incomplete, its slot is needed"
                              : "upload with the least recent progress, its slot is needed");
    }
}

/* New connections are closed while shutting down; slots are settled once
 * a connection has its record (conn_make_room). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    sf_receiver_http *srv = cls;
    enum MHD_Result ok;

    (void)addr;
    (void)len;
    pthread_mutex_lock(&srv->conn_lock);
    ok = srv->stopping ? MHD_NO : MHD_YES;
    pthread_mutex_unlock(&srv->conn_lock);
    return ok;
}

/* Deadlines: read_header_timeout, read_timeout, idle_timeout. */
static void *reaper_main(void *arg)
{
    sf_receiver_http *srv = arg;

    pthread_mutex_lock(&srv->conn_lock);
    while (!srv->reaper_stop) {
        int64_t now = sf_now_ms();
        bool asked = atomic_exchange(&srv->reclaim_asked, false);
        bool short_now = !sf_component_may_accept(srv->env.self);

        if (asked || short_now) {
            /* Memory short: uploads that crawl give it back (the gRPC
             * receiver's calls may be the ones waiting for it; asked by
             * it: the uploads of clients over their share). */
            pthread_mutex_unlock(&srv->conn_lock);
            reclaim(srv, NULL, 0, !short_now);
            pthread_mutex_lock(&srv->conn_lock);
            now = sf_now_ms();
        }

        conn_make_room(srv, NULL);
        for (http_conn *c = srv->conns; c != NULL; c = c->next) {
            int64_t age = now - c->since;

            if (c->rq != NULL && !c->evicted && upload_crawls(c, now)) {
                http_req *rq = c->rq;
                bool crawls;

                pthread_mutex_lock(&rq->lock);
                crawls = !rq->finishing && rq->refuse_http != 0 &&
                         rq->refuse_reason == SF_REASON_MEMORY_LIMIT;
                pthread_mutex_unlock(&rq->lock);
                if (crawls) {
                    answer_crawler(srv, c, "refused for memory, its upload stopped");
                    continue;
                }
            }
            if (c->state == CS_NEW && age > srv->cfg->read_header_timeout)
                conn_evict(srv, c, "read_header_timeout");
            else if (c->state == CS_BODY && age > srv->cfg->read_timeout)
                conn_evict(srv, c, "read_timeout");
            else if (c->state == CS_IDLE && age > srv->cfg->idle_timeout)
                conn_evict(srv, c, "idle_timeout");
        }
        sf_cond_wait_until(&srv->reaper_cv, &srv->conn_lock, sf_deadline_ms(REAP_INTERVAL_MS));
    }
    pthread_mutex_unlock(&srv->conn_lock);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    sf_receiver_http *srv = cls;
    http_req *rq = *req_cls;

    (void)version;
    if (rq == NULL) {
        /* A request pipelined behind one answered ahead of libmicrohttpd
         * (its connection shut down): nobody would read its answer, so it
         * is not taken, nor counted. */
        if (conn_closing(srv, conn))
            return MHD_NO;
        conn_set_state(srv, conn, CS_BODY);
        return begin(srv, conn, url, method, req_cls);
    }
    if (*upload_size != 0) {
        enum MHD_Result r;

        pthread_mutex_lock(&rq->lock);
        r = gather(srv, rq, upload, upload_size);
        pthread_mutex_unlock(&rq->lock);
        return r;
    }
    if (rq->responded)
        return MHD_YES;
    /* Complete, on a connection closed under it without an answer (a
     * deadline, shutdown): its answer could not be read, so it is neither
     * served nor counted. */
    if (conn_closing(srv, conn) && !rq_answered_raw(srv, rq))
        return MHD_NO;
    pthread_mutex_lock(&rq->lock);
    if (rq->refuse_http != 0) {
        pthread_mutex_unlock(&rq->lock);
        count_refusal(srv, rq);
        return send_rpc_status(conn, rq, rq->refuse_http, rq->refuse_rpc, rq->refuse_msg);
    }
    /* Complete: no longer reclaimable, its thread's alone from here. */
    rq->finishing = true;
    atomic_store(&rq->held, 0);
    rq_hold(srv, rq);
    pthread_mutex_unlock(&rq->lock);
    return finish(srv, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    sf_receiver_http *srv = cls;
    http_req *rq = *req_cls;
    bool raw;

    (void)toe;
    conn_set_state(srv, conn, CS_IDLE);
    if (rq == NULL)
        return;
    pthread_mutex_lock(&srv->conn_lock);     /* out of reclaim()'s reach */
    if (rq->conn != NULL && rq->conn->rq == rq)
        rq->conn->rq = NULL;
    rq->conn = NULL;
    raw = rq->answered_raw;
    pthread_mutex_unlock(&srv->conn_lock);
    pthread_mutex_destroy(&rq->lock);
    /* Refused, and the connection ended first: counted only when the
     * refusal was answered ahead of libmicrohttpd (a crawler's 503).
     * Otherwise the client never read an answer (it left, or a deadline
     * closed the connection): not counted as received at all. */
    if (raw)
        count_refusal(srv, rq);
    atomic_fetch_sub(&srv->buffered, rq->reserved);
    atomic_store(&rq->held, 0);
    rq_hold(srv, rq);
    sf_count_inflate_release(&rq->count);
    sf_dynbuf_release(&rq->body);
    sf_free(rq);
    *req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];

    (void)cls;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    sf_debug("http: %s", buf);
}

/* ---- lifecycle --------------------------------------------------------------- */

static sf_status server_create(const otlp_server_env *env, const void *config, void **out)
{
    const sf_receiver_http_config *cfg = config;
    sf_receiver_http *srv = sf_calloc(1, sizeof(*srv));

    *out = NULL;
    if (srv == NULL)
        return SF_ENOMEM;
    srv->env = *env;
    srv->cfg = cfg;
    srv->max_body = (size_t)cfg->max_request_body_size;
    srv->budget = srv->max_body * BUFFER_BUDGET;
    pthread_mutex_init(&srv->pool_lock, NULL);
    pthread_mutex_init(&srv->conn_lock, NULL);
    sf_cond_init(&srv->reaper_cv);
    *out = srv;
    return SF_OK;
}

/* The daemon's start on the receiver's listening socket: at start, or
 * after READY (sf_net_http_start_on). On error `fd` is closed. */
static sf_status start_daemon(void *arg, int fd)
{
    sf_receiver_http *srv = arg;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC;
    /* libmicrohttpd's timeout counts inactivity only; the reaper enforces
     * the deadlines. This one is the backstop. */
    unsigned idle_s = (unsigned)((srv->cfg->idle_timeout + 999) / 1000);

    srv->daemon = MHD_start_daemon(flags, 0, on_accept, srv, on_request, srv,
                                   MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                                   MHD_OPTION_THREAD_POOL_SIZE, (unsigned)THREADS,
                                   MHD_OPTION_CONNECTION_LIMIT,
                                   (unsigned)(MAX_CONNECTIONS + CONNECTION_HEADROOM),
                                   MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                   (unsigned)(MAX_CONNECTIONS + CONNECTION_HEADROOM),
                                   MHD_OPTION_CONNECTION_TIMEOUT, idle_s > 0 ? idle_s : 1u,
                                   MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                                   MHD_OPTION_END);
    if (srv->daemon == NULL) {
        const char *why = sf_libmicrohttpd_error();

        sf_error("receiver '%s': cannot serve OTLP/HTTP on '%s'%s%s",
                 sf_component_id(srv->env.self), srv->cfg->endpoint, why[0] ? ": " : "", why);
        close(fd);      /* a daemon that failed to start leaves it open */
        return SF_IO;
    }
    if (pthread_create(&srv->reaper, NULL, reaper_main, srv) != 0) {
        MHD_stop_daemon(srv->daemon);
        srv->daemon = NULL;
        return SF_ENOMEM;
    }
    srv->reaper_running = true;
    return SF_OK;
}

static sf_status server_start(void *server)
{
    sf_receiver_http *srv = server;
    char why[128];
    size_t soft, hard;
    sf_status st;
    int fd;

    /* The bodies' budget: BUFFER_BUDGET bodies, within a share of the hard
     * limit (the rest is the queue's and the batches'), never less than
     * one body. */
    sf_alloc_limits(&soft, &hard);
    srv->budget = srv->max_body * BUFFER_BUDGET;
    if (hard > 0 && hard / BUDGET_SHARE < srv->budget)
        srv->budget = hard / BUDGET_SHARE > srv->max_body ? hard / BUDGET_SHARE : srv->max_body;
    srv->stopping = false;
    st = sf_net_http_bind(srv->cfg->endpoint, &fd, why, sizeof(why));
    if (st == SF_INVALID) {
        sf_error("receiver '%s': cannot resolve '%s'", sf_component_id(srv->env.self),
                 srv->cfg->endpoint);
        return SF_IO;
    }
    if (st != SF_OK) {
        sf_error("receiver '%s': cannot listen for OTLP/HTTP on '%s': %s",
                 sf_component_id(srv->env.self), srv->cfg->endpoint, why);
        return SF_IO;
    }
    st = sf_net_http_start_on(&srv->daemon, "the OTLP/HTTP receiver", start_daemon, srv, fd);
    if (st != SF_OK)
        return st;
    sf_info("receiver '%s': OTLP/HTTP listening on %s%s", sf_component_id(srv->env.self),
            srv->cfg->endpoint, srv->cfg->traces_url_path);
    return SF_OK;
}

static void server_shutdown(void *server)
{
    sf_receiver_http *srv = server;
    int64_t until = sf_now_ms() + SHUTDOWN_GRACE_MS;
    bool busy;

    if (sf_net_http_cancel(&srv->daemon) || srv->daemon == NULL)
        return;     /* never started, or stopped */
    /* Close new connections as they come (not MHD_quiesce_daemon: with
     * the epoll worker pool it races the workers' own removal of the listen
     * socket, and libmicrohttpd 0.9.75 aborts the process on the ENOENT,
     * "Failed to remove listen FD from epoll set"); close those holding no
     * request; give uploads in progress a moment to end, then close the
     * rest. */
    pthread_mutex_lock(&srv->conn_lock);
    srv->stopping = true;
    pthread_mutex_unlock(&srv->conn_lock);
    do {
        busy = false;
        pthread_mutex_lock(&srv->conn_lock);
        for (http_conn *c = srv->conns; c != NULL; c = c->next) {
            if (c->state != CS_BODY || sf_now_ms() >= until)
                conn_evict(srv, c, "shutting down");
            else if (!c->evicted)
                busy = true;
        }
        pthread_mutex_unlock(&srv->conn_lock);
        if (busy) {
            struct timespec ts = { 0, 20 * 1000000L };
            nanosleep(&ts, NULL);
        }
    } while (busy);
    if (srv->reaper_running) {
        pthread_mutex_lock(&srv->conn_lock);
        srv->reaper_stop = true;
        pthread_cond_signal(&srv->reaper_cv);
        pthread_mutex_unlock(&srv->conn_lock);
        pthread_join(srv->reaper, NULL);
        srv->reaper_running = false;
    }
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}

static void server_destroy(void *server)
{
    sf_receiver_http *srv = server;

    if (srv == NULL)
        return;
    server_shutdown(srv);
    for (size_t i = 0; i < srv->n_pool; i++)
        sf_arena_destroy(srv->pool[i]);
    pthread_mutex_destroy(&srv->pool_lock);
    pthread_mutex_destroy(&srv->conn_lock);
    pthread_cond_destroy(&srv->reaper_cv);
    sf_free(srv);
}

static void server_reclaim_soon(void *server)
{
    sf_receiver_http *srv = server;

    atomic_store(&srv->reclaim_asked, true);
    pthread_cond_signal(&srv->reaper_cv);
}

static void server_set_peer(void *server, sf_otlp_reclaim_fn fn, void *peer)
{
    sf_receiver_http *srv = server;

    srv->peer_reclaim = fn;
    srv->peer = peer;
}

static void server_slots(const void *server, uint64_t *evicted, uint64_t *refused)
{
    sf_receiver_http *srv = (sf_receiver_http *)server;

    *evicted = atomic_load(&srv->evicted);
    *refused = atomic_load(&srv->refused_conns);
}

static uint64_t server_closed(const void *server, sf_otlp_close why)
{
    return atomic_load(&((sf_receiver_http *)server)->closed[why]);
}

static void server_reclaimed(const void *server, sf_otlp_reclaim why, uint64_t *requests,
                             uint64_t *bytes)
{
    sf_receiver_http *srv = (sf_receiver_http *)server;

    *requests = atomic_load(&srv->reclaimed[why]);
    *bytes = atomic_load(&srv->reclaimed_bytes[why]);
}

/* HTTP/1.1 has no frame floods: a connection is closed for its client's
 * decompression rate only; libmicrohttpd's accept is not watched. */
const otlp_server_type sf_otlp_http_server = {
    .name = "OTLP/HTTP",
    .transport = SF_TRANSPORT_HTTP,
    .label = "http",
    .reclaims = (1u << SF_OTLP_RECLAIM_COUNT) - 1,
    .closes = 1u << SF_OTLP_CLOSE_DECOMPRESSION,
    .refuses = true,
    .create = server_create,
    .start = server_start,
    .shutdown = server_shutdown,
    .destroy = server_destroy,
    .reclaim_soon = server_reclaim_soon,
    .set_peer = server_set_peer,
    .reclaimed = server_reclaimed,
    .closed = server_closed,
    .slots = server_slots,
};
