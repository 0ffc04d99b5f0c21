/* receivers/otlp/otlp_http.c: OTLP/HTTP server (POST /v1/traces, protobuf
 * or JSON, optionally gzip/deflate) on libmicrohttpd.
 *
 * DESIGN
 * - libmicrohttpd runs a pool of `THREADS` threads (epoll); a request's body
 *   is gathered into a buffer bounded by max_request_body_size, and the sum
 *   of all buffered bodies is bounded too (BUFFER_BUDGET bodies' worth):
 *   past it new bodies are refused with 503 + Retry-After, so many slow
 *   uploads cannot exhaust memory.
 * - Decompression is bounded by the same size limit while inflating (a gzip
 *   bomb gets 413 after producing at most that many bytes).
 * - Decoding uses an arena from a small pool (one per thread in steady
 *   state), reset after every request.
 * - Status codes follow the OTLP/HTTP specification: 200 with an
 *   ExportTraceServiceResponse in the request's encoding; 400 with a
 *   google.rpc.Status for malformed input; 413 too large; 415 unknown
 *   content type or encoding; 503 + Retry-After when the queue is full or
 *   memory is short; 500 (not retryable) when the batch failed closed. */
#include "otlp_http.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "google/rpc/status.pb-c.h"
#include "sf_net.h"
#include "sf_otlp_json.h"
#include "sf_zlib.h"

#define THREADS 2
#define ARENA_POOL 4
#define ARENA_CHUNK (1024 * 1024)
#define BUFFER_BUDGET 4         /* max bodies' worth of buffered uploads */
#define RETRY_AFTER "5"
/* A refused body is read and dropped up to this many times the size limit
 * (so the client gets its answer); past it the connection is closed. */
#define DISCARD_FACTOR 4

enum { CT_PROTO, CT_JSON };
enum { CE_IDENTITY, CE_COMPRESSED };

typedef struct http_req {
    int ct;
    int ce;
    uint8_t *body;
    size_t len, cap;
    size_t reserved;            /* bytes counted against the buffer budget */
    bool responded;
    /* Refused while the body was still arriving: libmicrohttpd takes a
     * response only once the upload is complete, so the rest of the body is
     * read and discarded (no memory kept) and this answer goes out then. */
    unsigned refuse_http;
    int refuse_rpc;
    const char *refuse_msg;
    size_t discarded;           /* body bytes read and dropped after a refusal */
} http_req;

struct sf_otlp_http_server {
    sf_component *self;
    const sf_otlp_http_config *cfg;
    unsigned max_depth;
    size_t max_body;
    struct MHD_Daemon *daemon;
    _Atomic size_t buffered;    /* bytes of request bodies being gathered */
    size_t budget;
    pthread_mutex_t pool_lock;
    sf_arena *pool[ARENA_POOL];
    size_t n_pool;
};

/* ---- arenas -------------------------------------------------------------- */

static sf_arena *arena_take(sf_otlp_http_server *srv)
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

static void arena_give(sf_otlp_http_server *srv, sf_arena *a)
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

static enum MHD_Result send_bytes(struct MHD_Connection *conn, unsigned code, const char *type,
                                  const void *body, size_t len, bool retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO;
    if (type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (retry_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* An error as google.rpc.Status, in the request's encoding. */
static enum MHD_Result send_status(struct MHD_Connection *conn, http_req *rq, unsigned http,
                                   int rpc_code, const char *msg)
{
    bool retry = http == 429 || http == 503;

    if (rq != NULL)
        rq->responded = true;
    if (rq != NULL && rq->ct == CT_JSON) {
        char buf[512];
        int n = snprintf(buf, sizeof(buf), "{\"code\":%d,\"message\":\"%s\"}", rpc_code, msg);
        return send_bytes(conn, http, "application/json", buf,
                          (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, retry);
    } else {
        Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
        uint8_t buf[512];
        size_t n;

        st.code = rpc_code;
        st.message = (char *)msg;
        if (google__rpc__status__get_packed_size(&st) > sizeof(buf))
            st.message = (char *)"error";
        n = google__rpc__status__pack(&st, buf);
        return send_bytes(conn, http, "application/x-protobuf", buf, n, retry);
    }
}

/* ---- request handling ------------------------------------------------------ */

static bool media_type_is(const char *value, const char *type)
{
    size_t n = strlen(type);
    return strncasecmp(value, type, n) == 0 && (value[n] == '\0' || value[n] == ';' ||
                                                value[n] == ' ');
}

/* Remember a refusal decided before or during the upload; it is answered
 * when the upload ends. */
static enum MHD_Result refuse_later(sf_otlp_http_server *srv, http_req *rq, unsigned http,
                                    int rpc, const char *msg, sf_reason reason)
{
    sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0, reason);
    rq->refuse_http = http;
    rq->refuse_rpc = rpc;
    rq->refuse_msg = msg;
    /* Give the buffer back at once: the rest of the body is discarded. */
    atomic_fetch_sub(&srv->buffered, rq->reserved);
    rq->reserved = 0;
    sf_free(rq->body);
    rq->body = NULL;
    rq->len = rq->cap = 0;
    return MHD_YES;
}

/* Headers are in: decide whether to take the body at all. */
static enum MHD_Result begin(sf_otlp_http_server *srv, struct MHD_Connection *conn,
                             const char *url, const char *method, void **req_cls)
{
    const char *ct, *ce, *cl;
    http_req *rq;
    int ctype, cenc = CE_IDENTITY;

    if (strcmp(url, srv->cfg->traces_url_path) != 0)
        return send_status(conn, NULL, 404, 5, "not found: spanfence accepts traces only");
    if (strcmp(method, "POST") != 0)
        return send_status(conn, NULL, 405, 3, "method not allowed: use POST");
    ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct != NULL && media_type_is(ct, "application/x-protobuf"))
        ctype = CT_PROTO;
    else if (ct != NULL && media_type_is(ct, "application/json"))
        ctype = CT_JSON;
    else {
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0, SF_REASON_MALFORMED);
        return send_status(conn, NULL, 415, 3,
                           "unsupported content type: use application/x-protobuf or application/json");
    }
    ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce != NULL && (strcasecmp(ce, "gzip") == 0 || strcasecmp(ce, "deflate") == 0))
        cenc = CE_COMPRESSED;
    else if (ce != NULL && strcasecmp(ce, "identity") != 0 && ce[0] != '\0') {
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0, SF_REASON_MALFORMED);
        http_req tmp = { .ct = ctype };
        return send_status(conn, &tmp, 415, 3,
                           "unsupported content encoding: use gzip, deflate or none");
    }
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL && strtoull(cl, NULL, 10) > DISCARD_FACTOR * srv->max_body) {
        /* Far too large to read just to say so: answer now and close. */
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0, SF_REASON_TOO_LARGE);
        http_req tmp = { .ct = ctype };
        return send_status(conn, &tmp, 413, 8, "request body too large");
    }
    rq = sf_calloc(1, sizeof(*rq));
    if (rq == NULL)
        return MHD_NO;
    rq->ct = ctype;
    rq->ce = cenc;
    *req_cls = rq;
    if (cl != NULL && strtoull(cl, NULL, 10) > srv->max_body) {
        /* Read and drop the body, then answer 413: a client that streams its
         * body (the OTLP SDKs do) would otherwise see a broken pipe instead
         * of the status, and retry the same request. */
        return refuse_later(srv, rq, 413, 8, "request body too large", SF_REASON_TOO_LARGE);
    }
    return MHD_YES;
}

/* More body bytes: append within the per-request and global bounds. */
static enum MHD_Result gather(sf_otlp_http_server *srv, http_req *rq, const char *data,
                              size_t *size)
{
    size_t n = *size;

    *size = 0;
    if (rq->refuse_http != 0) {     /* discard the rest, up to a point */
        rq->discarded += n;
        return rq->discarded > DISCARD_FACTOR * srv->max_body ? MHD_NO : MHD_YES;
    }
    if (rq->len + n > srv->max_body)
        return refuse_later(srv, rq, 413, 8, "request body too large", SF_REASON_TOO_LARGE);
    if (rq->len + n > rq->cap) {
        size_t ncap = rq->cap ? rq->cap * 2 : 64 * 1024;
        uint8_t *nb;

        while (ncap < rq->len + n)
            ncap *= 2;
        if (ncap > srv->max_body)
            ncap = srv->max_body;
        if (atomic_fetch_add(&srv->buffered, ncap - rq->cap) + (ncap - rq->cap) > srv->budget) {
            atomic_fetch_sub(&srv->buffered, ncap - rq->cap);
            return refuse_later(srv, rq, 503, 14, "too many requests in progress, retry later",
                                SF_REASON_MEMORY_LIMIT);
        }
        rq->reserved += ncap - rq->cap;
        nb = sf_realloc(rq->body, ncap);
        if (nb == NULL)
            return refuse_later(srv, rq, 503, 14, "out of memory, retry later",
                                SF_REASON_MEMORY_LIMIT);
        rq->body = nb;
        rq->cap = ncap;
    }
    memcpy(rq->body + rq->len, data, n);
    rq->len += n;
    return MHD_YES;
}

static enum MHD_Result finish(sf_otlp_http_server *srv, struct MHD_Connection *conn,
                              http_req *rq)
{
    const uint8_t *data = rq->body;
    size_t len = rq->len;
    uint8_t *inflated = NULL, *packed = NULL;
    sf_arena *arena;
    sf_batch batch;
    sf_status st = SF_OK;
    char err[256] = "";
    enum MHD_Result ret;

    if (!sf_component_may_accept(srv->self)) {
        size_t spans = 0;

        /* Count what is refused when that costs no allocation. */
        if (rq->ce == CE_IDENTITY && rq->ct == CT_PROTO)
            sf_otlp_scan(rq->body, rq->len, srv->max_depth, &spans);
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, spans, SF_REASON_MEMORY_LIMIT);
        return send_status(conn, rq, 503, 14, "memory limit reached, retry later");
    }
    if (rq->ce == CE_COMPRESSED) {
        st = sf_inflate(rq->body, rq->len, srv->max_body, &inflated, &len);
        if (st != SF_OK) {
            sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0,
                                st == SF_TOOBIG ? SF_REASON_TOO_LARGE : SF_REASON_MALFORMED);
            if (st == SF_TOOBIG)
                return send_status(conn, rq, 413, 8, "request body too large after decompression");
            if (st == SF_ENOMEM)
                return send_status(conn, rq, 503, 14, "out of memory, retry later");
            return send_status(conn, rq, 400, 3, "request body could not be decompressed");
        }
        data = inflated;
    }
    arena = arena_take(srv);
    if (arena == NULL) {
        sf_free(inflated);
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, 0, SF_REASON_MEMORY_LIMIT);
        return send_status(conn, rq, 503, 14, "out of memory, retry later");
    }
    if (rq->ct == CT_JSON) {
        /* OTLP/JSON becomes protobuf first: from here on every batch is
         * bytes, whichever way it came in. */
        sf_otlp_request *req = NULL;
        st = sf_otlp_json_decode(arena, (const char *)data, len, srv->max_depth, &req, err,
                                 sizeof(err));
        if (st == SF_OK) {
            len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
            packed = sf_arena_alloc(arena, len ? len : 1);
            if (packed == NULL)
                st = SF_ENOMEM;
            else
                len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, packed);
            data = packed;
        }
        memset(&batch, 0, sizeof(batch));
    }
    if (st == SF_OK) {
        /* The codec's pass inside emit is also the validation. */
        sf_batch_init(&batch, arena, data, len, srv->max_depth);
        st = sf_component_emit(srv->self, SF_TRANSPORT_HTTP, &batch);
        if (st == SF_INVALID)
            snprintf(err, sizeof(err), "request is not a valid ExportTraceServiceRequest: %s",
                     batch.stats.error != NULL ? batch.stats.error : "malformed");
        sf_batch_release(&batch);
        if (st == SF_OK)
            ret = rq->ct == CT_JSON ? send_bytes(conn, 200, "application/json", "{}", 2, false)
                                    : send_bytes(conn, 200, "application/x-protobuf", "", 0, false);
        else if (sf_status_retryable(st))
            ret = send_status(conn, rq, 503, 14, st == SF_FULL ? "export queue is full, retry later"
                                                               : "temporarily unavailable, retry later");
        else if (st == SF_INVALID)
            ret = send_status(conn, rq, 400, 3, err);
        else if (st == SF_FILTER)
            ret = send_status(conn, rq, 500, 13, "batch dropped: it could not be filtered (fail closed)");
        else
            ret = send_status(conn, rq, 500, 13, sf_status_str(st));
    } else {
        sf_component_refuse(srv->self, SF_TRANSPORT_HTTP, batch.spans,
                            st == SF_INVALID ? SF_REASON_MALFORMED : SF_REASON_MEMORY_LIMIT);
        if (st == SF_INVALID)
            ret = send_status(conn, rq, 400, 3, err[0] ? err : "invalid request");
        else
            ret = send_status(conn, rq, 503, 14, "out of memory, retry later");
    }
    arena_give(srv, arena);
    sf_free(inflated);
    rq->responded = true;
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    sf_otlp_http_server *srv = cls;
    http_req *rq = *req_cls;

    (void)version;
    if (rq == NULL)
        return begin(srv, conn, url, method, req_cls);
    if (*upload_size != 0)
        return gather(srv, rq, upload, upload_size);
    if (rq->responded)
        return MHD_YES;
    if (rq->refuse_http != 0)
        return send_status(conn, rq, rq->refuse_http, rq->refuse_rpc, rq->refuse_msg);
    return finish(srv, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    sf_otlp_http_server *srv = cls;
    http_req *rq = *req_cls;

    (void)conn;
    (void)toe;
    if (rq == NULL)
        return;
    atomic_fetch_sub(&srv->buffered, rq->reserved);
    sf_free(rq->body);
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

sf_status sf_otlp_http_create(sf_component *self, const sf_otlp_http_config *cfg,
                              unsigned max_depth, sf_otlp_http_server **out)
{
    sf_otlp_http_server *srv = sf_calloc(1, sizeof(*srv));

    *out = NULL;
    if (srv == NULL)
        return SF_ENOMEM;
    srv->self = self;
    srv->cfg = cfg;
    srv->max_depth = max_depth;
    srv->max_body = (size_t)cfg->max_request_body_size;
    srv->budget = srv->max_body * BUFFER_BUDGET;
    pthread_mutex_init(&srv->pool_lock, NULL);
    *out = srv;
    return SF_OK;
}

sf_status sf_otlp_http_start(sf_otlp_http_server *srv)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;

    if (sf_net_resolve(srv->cfg->endpoint, &addr, &alen) != SF_OK) {
        sf_error("receiver '%s': cannot resolve '%s'", sf_component_id(srv->self),
                 srv->cfg->endpoint);
        return SF_IO;
    }
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                                   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                   MHD_OPTION_THREAD_POOL_SIZE, (unsigned)THREADS,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                                   MHD_OPTION_END);
    if (srv->daemon == NULL) {
        sf_error("receiver '%s': cannot listen for OTLP/HTTP on '%s' (address in use or invalid)",
                 sf_component_id(srv->self), srv->cfg->endpoint);
        return SF_IO;
    }
    sf_info("receiver '%s': OTLP/HTTP listening on %s%s", sf_component_id(srv->self),
            srv->cfg->endpoint, srv->cfg->traces_url_path);
    return SF_OK;
}

void sf_otlp_http_shutdown(sf_otlp_http_server *srv)
{
    if (srv->daemon == NULL)
        return;
    /* Stop accepting new connections, then let requests in progress end. */
    MHD_quiesce_daemon(srv->daemon);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}

void sf_otlp_http_destroy(sf_otlp_http_server *srv)
{
    if (srv == NULL)
        return;
    sf_otlp_http_shutdown(srv);
    for (size_t i = 0; i < srv->n_pool; i++)
        sf_arena_destroy(srv->pool[i]);
    pthread_mutex_destroy(&srv->pool_lock);
    sf_free(srv);
}
