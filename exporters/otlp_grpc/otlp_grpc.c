/* exporters/otlp_grpc/otlp_grpc.c: the otlp (gRPC) exporter: sends encoded,
 * filtered batches as unary OTLP/gRPC Export calls, spoken with libcurl over
 * HTTP/2 (no gRPC core), through the shared sending queue and retry engine
 * (sf_sender.h).
 *
 * DESIGN
 * Wire: a unary call is one HTTP/2 POST to the signal's Export method with
 *   content-type application/grpc, te: trailers, grpc-timeout (the
 *   configured timeout) and the configured headers as metadata; its body is
 *   the message behind gRPC's 5-byte prefix (flag 1 and grpc-encoding: gzip
 *   when compressed). The status comes from grpc-status, grpc-message
 *   (percent-encoded) and grpc-status-details-bin (base64) in the trailers,
 *   or in the headers of a trailers-only reply; libcurl hands both to the
 *   header callback. A reply without grpc-status gets the gRPC spec's
 *   status for its HTTP status (503 UNAVAILABLE, 404 UNIMPLEMENTED, ...),
 *   and a transfer libcurl could not finish gets UNAVAILABLE (what gRPC
 *   core says of a connection or handshake that fails), DEADLINE_EXCEEDED
 *   when the timeout ran out, CANCELLED when shutdown cut it short.
 *   Plaintext (tls.insecure) is h2c with prior knowledge; TLS negotiates h2
 *   with ALPN.
 * Threads: consume() runs on receiver threads and only submits to the
 *   sender (never blocks, unless the queue is disabled). The sender's
 *   consumer threads call otlpgrpc_send() with their worker index; each
 *   worker owns one CURL easy handle (kept, so its connection is reused: a
 *   TCP connection of its own, as gRPC core's local subchannel pool gave),
 *   the multi handle that drives it in 200 ms steps so the call can be cut
 *   short once the shutdown drain time is over, and a compressor. Handles
 *   and headers are made in start() and read-only until destroy().
 * Secrets: configured metadata values may be bearer tokens. They live only
 *   in the curl header list (wiped before it is freed); CURLOPT_VERBOSE
 *   stays off and no log line prints a header.
 * Results (OTLP/gRPC spec): OK is sent (a partial_success in the reply
 *   splits the count); UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
 *   DATA_LOSS and CANCELLED are retried, RESOURCE_EXHAUSTED only when the
 *   server sent a google.rpc.RetryInfo (grpc-status-details-bin), whose
 *   retry_delay is honoured; everything else is permanent. */
#include "otlp_grpc.h"
#include "sf_arena.h"
#include "sf_curl.h"
#include "sf_encoding.h"
#include "sf_time.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <sys/socket.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"

#define RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"
/* How often a waiting consumer looks at sf_sender_aborting(). */
#define OTLPGRPC_POLL_MS 200
/* Shutdown's drain time is over: a call whose message is sent gets this
 * long more for its status (the server may have the spans: counting them
 * dropped would be wrong); one still sending is cancelled at once. */
#define OTLPGRPC_REPLY_GRACE_MS 2000
/* Longest server hint honoured (as the otlphttp exporter's Retry-After). */
#define OTLPGRPC_RETRY_DELAY_MAX_MS 86400000LL
/* A reply message larger than this is not a partial-success report we act
 * on: the rest is read and discarded. */
#define OTLPGRPC_REPLY_MAX 8192
/* Decoded grpc-status-details-bin kept; a larger one is ignored. */
#define OTLPGRPC_DETAILS_MAX 4096
/* gRPC's length prefix: a compressed flag and a 32-bit big-endian length. */
#define GRPC_PREFIX_LEN 5

/* gRPC's status codes (grpc/status.h), by number. */
enum {
    GRPC_OK = 0, GRPC_CANCELLED = 1, GRPC_UNKNOWN = 2, GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4, GRPC_NOT_FOUND = 5, GRPC_ALREADY_EXISTS = 6,
    GRPC_PERMISSION_DENIED = 7, GRPC_RESOURCE_EXHAUSTED = 8, GRPC_FAILED_PRECONDITION = 9,
    GRPC_ABORTED = 10, GRPC_OUT_OF_RANGE = 11, GRPC_UNIMPLEMENTED = 12, GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14, GRPC_DATA_LOSS = 15, GRPC_UNAUTHENTICATED = 16,
};

static const char *const grpc_status_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
};

static const char *grpc_status_name(int code)
{
    if (code < 0 || code >= (int)(sizeof(grpc_status_names) / sizeof(grpc_status_names[0])))
        return "status";
    return grpc_status_names[code];
}

typedef struct otlpgrpc otlpgrpc;

typedef struct otlpgrpc_worker {
    sf_curl_worker h;           /* first: the handles, the compressor and the reply (sf_curl.h) */
    otlpgrpc *x;
    /* this call's request: the prefix, then `body` */
    uint8_t prefix[GRPC_PREFIX_LEN];
    const uint8_t *body;
    size_t body_len, sent;      /* bytes of prefix + body handed to curl */
    /* h2c: the kept connection speaks HTTP/2 (see send_h2c) */
    bool h2c_up;
    bool refuse_new;            /* open no socket: reuse the kept connection or fail */
    bool refused;               /* ... and a socket was refused */
    /* this call's reply: its body in h.call (OTLPGRPC_REPLY_MAX bytes, prefix
     * included), its status here */
    int grpc_status;            /* -1: no grpc-status seen */
    char message[128];          /* grpc-message, percent-decoded, bounded */
    uint8_t *details;           /* grpc-status-details-bin, decoded (OTLPGRPC_DETAILS_MAX) */
    size_t details_len;
} otlpgrpc_worker;

/* base.url: http(s)://host:port/<method>, the override's name as host;
 * base.workers: otlpgrpc_worker. */
struct otlpgrpc {
    sf_curl_export base;        /* first (sf_curl.h) */
    const sf_otlpgrpc_config *cfg;
};

/* ---- reading the reply ------------------------------------------------------ */

/* A trimmed header value: `line` is "name: value\r\n"; NULL unless the
 * name is `name`. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *v, *end = line + len;

    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return NULL;
    v = line + nl + 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *vlen = (size_t)(end - v);
    return v;
}

/* Headers and, after the body, trailers (libcurl passes HTTP/2 trailers
 * here too): the last grpc-status, grpc-message and details seen win, so
 * a trailers-only reply and a full one read the same. */
static size_t on_header(char *data, size_t size, size_t n, void *userp)
{
    otlpgrpc_worker *w = userp;
    size_t len = size * n, vlen;
    const char *v;

    if ((v = header_value(data, len, "grpc-status", &vlen)) != NULL) {
        int code = 0;

        for (size_t i = 0; i < vlen && code <= 1000; i++)
            code = (v[i] >= '0' && v[i] <= '9') ? code * 10 + (v[i] - '0') : 1000 + 1;
        w->grpc_status = vlen > 0 && code <= 1000 ? code : GRPC_UNKNOWN;
    } else if ((v = header_value(data, len, "grpc-message", &vlen)) != NULL) {
        /* percent-encoded (gRPC's PROTOCOL-HTTP2) */
        sf_percent_decode(w->message, sizeof(w->message), v, vlen);
    } else if ((v = header_value(data, len, "grpc-status-details-bin", &vlen)) != NULL) {
        /* a -bin value is base64, padded or not (gRPC sends it unpadded) */
        ssize_t d = sf_base64_decode(w->details, OTLPGRPC_DETAILS_MAX, v, vlen);

        w->details_len = d > 0 ? (size_t)d : 0;
    }
    return len;
}

/* The request body: the prefix, then the message, copied as libcurl asks
 * (no copy of the message made beforehand). */
static size_t on_read(char *out, size_t size, size_t n, void *userp)
{
    otlpgrpc_worker *w = userp;
    size_t cap = size * n, done = 0;

    if (w->sent < GRPC_PREFIX_LEN) {
        size_t k = GRPC_PREFIX_LEN - w->sent;

        if (k > cap)
            k = cap;
        memcpy(out, w->prefix + w->sent, k);
        w->sent += k;
        done = k;
    }
    if (done < cap && w->sent >= GRPC_PREFIX_LEN) {
        size_t off = w->sent - GRPC_PREFIX_LEN, k = w->body_len - off;

        if (k > cap - done)
            k = cap - done;
        memcpy(out + done, w->body + off, k);
        w->sent += k;
        done += k;
    }
    return done;
}

/* Opens the call's socket, unless the call must reuse the kept h2c
 * connection (send_h2c): then no socket, so nothing is sent as HTTP/1.1. */
static curl_socket_t on_open_socket(void *userp, curlsocktype purpose,
                                    struct curl_sockaddr *addr)
{
    otlpgrpc_worker *w = userp;

    (void)purpose;
    if (w->refuse_new) {
        w->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

/* The retry_delay of a google.rpc.RetryInfo in the status details, in ms
 * (at least 1), or -1 when the server sent none. */
static int64_t retry_info_ms(const uint8_t *details, size_t len)
{
    Google__Rpc__Status *st;
    int64_t ms = -1;

    if (len == 0)
        return -1;
    st = google__rpc__status__unpack(sf_pb_counted_allocator(), len, details);
    if (st == NULL)
        return -1;
    for (size_t d = 0; d < st->n_details && ms < 0; d++) {
        Google__Protobuf__Any *any = st->details[d];
        Google__Rpc__RetryInfo *ri;

        if (any->type_url == NULL || strcmp(any->type_url, RETRY_INFO_TYPE) != 0)
            continue;
        ri = google__rpc__retry_info__unpack(sf_pb_counted_allocator(), any->value.len,
                                             any->value.data);
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
        google__rpc__retry_info__free_unpacked(ri, sf_pb_counted_allocator());
    }
    google__rpc__status__free_unpacked(st, sf_pb_counted_allocator());
    return ms;
}

/* Spans an OK reply says the server rejected (OTLP partial_success). A
 * reply that is not one uncompressed message is not read: without
 * grpc-accept-encoding the server sends it uncompressed. */
static int64_t reply_rejected(otlpgrpc *x, const otlpgrpc_worker *w, const sf_buf *buf)
{
    uint32_t mlen;

    if (w->h.call.reply_len < GRPC_PREFIX_LEN || w->h.call.reply_len >= OTLPGRPC_REPLY_MAX ||
        w->h.call.reply[0] != 0)
        return 0;
    mlen = (uint32_t)w->h.call.reply[1] << 24 | (uint32_t)w->h.call.reply[2] << 16 |
           (uint32_t)w->h.call.reply[3] << 8 | w->h.call.reply[4];
    if (mlen != w->h.call.reply_len - GRPC_PREFIX_LEN)
        return 0;
    return sf_curl_reply_rejected(x->base.id, x->base.signal, buf->spans,
                                  w->h.call.reply + GRPC_PREFIX_LEN, mlen);
}

static void map_status(int code, const char *message, const otlpgrpc_worker *w,
                       sf_send_result *res)
{
    int64_t hint = w != NULL ? retry_info_ms(w->details, w->details_len) : -1;
    char text[100];

    sf_printable_copy(text, sizeof(text), message, strlen(message));
    snprintf(res->detail, sizeof(res->detail), "grpc %s: %s", grpc_status_name(code), text);
    switch (code) {
    case GRPC_UNAVAILABLE:
    case GRPC_DEADLINE_EXCEEDED:
    case GRPC_ABORTED:
    case GRPC_OUT_OF_RANGE:
    case GRPC_DATA_LOSS:
    case GRPC_CANCELLED:            /* also ours, at shutdown: the sender drops it */
        res->status = SF_RETRY;
        break;
    case GRPC_RESOURCE_EXHAUSTED:
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

/* gRPC's status for a reply without grpc-status (a proxy's answer), as
 * gRPC's "HTTP to gRPC Status Code Mapping". */
static int status_of_http(long http)
{
    switch (http) {
    case 400: return GRPC_INTERNAL;
    case 401: return GRPC_UNAUTHENTICATED;
    case 403: return GRPC_PERMISSION_DENIED;
    case 404: return GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return GRPC_UNAVAILABLE;
    default:  return GRPC_UNKNOWN;
    }
}

/* gRPC's status for a transfer libcurl could not finish. */
static int status_of_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return GRPC_DEADLINE_EXCEEDED;
    case CURLE_ABORTED_BY_CALLBACK:     /* shutdown cut it short */
        return GRPC_CANCELLED;
    default:
        /* no connection, a handshake that failed (the gateway may be
         * mid-rotation), a reset stream: gRPC core's UNAVAILABLE */
        return GRPC_UNAVAILABLE;
    }
}

/* ---- one call --------------------------------------------------------------- */

/* One call on the worker's multi handle, bounded by CURLOPT_TIMEOUT_MS
 * (the call's deadline). Once shutdown's drain time is over the call ends
 * within OTLPGRPC_POLL_MS, unless its message is sent whole: then it may
 * wait OTLPGRPC_REPLY_GRACE_MS more for its status, so spans the server
 * took are counted sent, not dropped. */
static CURLcode perform(otlpgrpc_worker *w)
{
    CURLcode rc;

    rc = sf_curl_perform(w->h.multi, w->h.curl, w->x->base.out.sender, &w->h.call,
                         OTLPGRPC_POLL_MS, OTLPGRPC_REPLY_GRACE_MS);
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        /* Cut short: close the connection, so the server learns the call
         * is cancelled now (libcurl would keep an HTTP/2 connection and
         * its reset of the stream unsent), as gRPC core's cancel did. */
        curl_easy_setopt(w->h.curl, CURLOPT_FORBID_REUSE, 1L);
    }
    curl_multi_remove_handle(w->h.multi, w->h.curl);
    curl_easy_setopt(w->h.curl, CURLOPT_FORBID_REUSE, 0L);
    return rc;
}

/* One call over plaintext HTTP/2. libcurl 7.88 (Debian 12) cannot reuse
 * an h2c connection made with prior knowledge: asked for prior knowledge
 * again, it layers a second HTTP/2 filter on the connection and the call
 * fails at once with "Error in the HTTP2 framing layer" (curl issue
 * 10634, fixed in 8.0.0). So a call after one that went over HTTP/2 asks
 * for plain HTTP/2, which takes the kept connection as it is; it must not
 * open a new one (plain HTTP/2 over http:// would be HTTP/1.1 with an
 * Upgrade, which gRPC servers refuse), so the socket callback refuses new
 * sockets then, and a call that found no connection to reuse (the server
 * closed it) goes again at once with prior knowledge, nothing sent, on a
 * new connection, as does a call after one that failed. */
static CURLcode send_h2c(otlpgrpc_worker *w)
{
    CURLcode rc;
    long version = 0;

    if (w->h2c_up) {
        w->refuse_new = true;
        w->refused = false;
        curl_easy_setopt(w->h.curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_0);
        rc = perform(w);
        w->refuse_new = false;
        curl_easy_setopt(w->h.curl, CURLOPT_HTTP_VERSION,
                         (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        if (!(w->refused && rc == CURLE_COULDNT_CONNECT))
            goto out_note_version;
    }
    /* a new connection: an old one in the cache would be reused, and fail */
    curl_easy_setopt(w->h.curl, CURLOPT_FRESH_CONNECT, 1L);
    rc = perform(w);
    curl_easy_setopt(w->h.curl, CURLOPT_FRESH_CONNECT, 0L);

out_note_version:
    w->h2c_up = rc == CURLE_OK &&
                curl_easy_getinfo(w->h.curl, CURLINFO_HTTP_VERSION, &version) == CURLE_OK &&
                version == CURL_HTTP_VERSION_2_0;
    return rc;
}

/* The call's outcome: curl's, the server's grpc-status, or the HTTP
 * status of a reply without one. */
static void read_result(otlpgrpc *x, otlpgrpc_worker *w, const sf_buf *buf, CURLcode rc,
                        sf_send_result *res)
{
    long http = 0;
    char text[64];

    if (rc != CURLE_OK) {
        map_status(status_of_curl(rc), curl_easy_strerror(rc), NULL, res);
        return;
    }
    if (w->grpc_status == GRPC_OK) {
        res->status = SF_OK;
        res->rejected_spans = reply_rejected(x, w, buf);
        return;
    }
    if (w->grpc_status > 0) {
        map_status(w->grpc_status, w->message, w, res);
        return;
    }
    /* No status: not a gRPC server's answer (a proxy's, or a stream
     * closed early). */
    curl_easy_getinfo(w->h.curl, CURLINFO_RESPONSE_CODE, &http);
    if (http == 200)
        snprintf(text, sizeof(text), "no grpc-status in the reply");
    else
        snprintf(text, sizeof(text), "http %ld without grpc-status", http);
    map_status(http == 200 ? GRPC_UNKNOWN : status_of_http(http), text, NULL, res);
}

static void otlpgrpc_send(void *exporter, unsigned worker, const sf_buf *buf,
                          sf_send_result *res)
{
    otlpgrpc *x = exporter;
    otlpgrpc_worker *w = sf_curl_export_worker(&x->base, worker);
    const uint8_t *body;
    size_t len;
    CURLcode rc;

    if (w->h.curl == NULL) {      /* queue disabled and not started yet */
        res->status = SF_RETRY;
        snprintf(res->detail, sizeof(res->detail), "exporter not started");
        return;
    }
    if (sf_curl_worker_compress(&w->h, x->base.compression, buf, &body, &len, res) != SF_OK) {
        res->status = SF_RETRY;
        return;
    }
    if (len > UINT32_MAX) {
        res->status = SF_PERMANENT;
        snprintf(res->detail, sizeof(res->detail), "grpc: message over 4 GiB");
        return;
    }
    w->prefix[0] = w->h.zc != NULL ? 1 : 0;
    w->prefix[1] = (uint8_t)(len >> 24);
    w->prefix[2] = (uint8_t)(len >> 16);
    w->prefix[3] = (uint8_t)(len >> 8);
    w->prefix[4] = (uint8_t)len;
    w->body = body;
    w->body_len = len;
    w->sent = 0;
    w->h.call.reply_len = 0;
    w->grpc_status = -1;
    w->message[0] = '\0';
    w->details_len = 0;
    curl_easy_setopt(w->h.curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(GRPC_PREFIX_LEN + len));
    rc = x->cfg->tls.insecure ? send_h2c(w) : perform(w);
    w->body = NULL;
    read_result(x, w, buf, rc, res);
}

/* ---- setup and teardown ------------------------------------------------------ */

/* The endpoint's host and port (host:port or dns:///host:port, checked at
 * load time); `host` keeps an IPv6 host's brackets. */
static bool split_endpoint(const char *endpoint, const char **host, size_t *host_len,
                           const char **port)
{
    const char *colon;

    if (strncmp(endpoint, "dns:///", 7) == 0)
        endpoint += 7;
    colon = strrchr(endpoint, ':');
    if (colon == NULL || colon == endpoint)
        return false;
    *host = endpoint;
    *host_len = (size_t)(colon - endpoint);
    *port = colon + 1;
    return true;
}

/* The call's URL: http:// with tls.insecure (h2c), https:// otherwise, to
 * the endpoint, or to server_name_override's name with CURLOPT_CONNECT_TO
 * sending the connection to the endpoint (libcurl takes the SNI name and
 * the name checked in the certificate from the URL). */
static sf_status build_url(otlpgrpc *x)
{
    const sf_otlp_tls_config *t = &x->cfg->tls;
    const char *scheme = t->insecure ? "http" : "https", *host, *port;
    const char *method = sf_signal_grpc_method(x->base.signal);
    const char *name = !t->insecure ? t->server_name_override : NULL;
    size_t host_len, len;

    if (!split_endpoint(x->cfg->endpoint, &host, &host_len, &port))
        return SF_INVALID;
    if (name != NULL) {
        x->base.connect_to = sf_curl_connect_to(name, host, host_len, port);
        if (x->base.connect_to == NULL)
            return SF_ENOMEM;
        host = name;
        host_len = strlen(name);
    }
    len = strlen(scheme) + 3 + host_len + 1 + strlen(port) + strlen(method) + 1;
    if ((x->base.url = sf_malloc(len)) == NULL)
        return SF_ENOMEM;
    snprintf(x->base.url, len, "%s://%.*s:%s%s", scheme, (int)host_len, host, port, method);
    return SF_OK;
}

/* The call's headers: gRPC's own, then the configured metadata. With
 * server_name_override the :authority is the name alone, as grpc-go and
 * gRPC core (grpc.ssl_target_name_override) send it; libcurl makes
 * :authority of a Host header. */
static sf_status build_headers(otlpgrpc *x)
{
    const sf_strmap *md = &x->cfg->headers;
    struct curl_slist *h = NULL;
    char timeout[24];

    /* grpc-timeout: at most 8 digits; the config caps the timeout at 1 h */
    snprintf(timeout, sizeof(timeout), "%" PRId64 "m", x->base.timeout_ms);
    if (sf_curl_header_add(&h, "content-type", "application/grpc", true) != SF_OK ||
        sf_curl_header_add(&h, "te", "trailers", true) != SF_OK ||
        sf_curl_header_add(&h, "grpc-timeout", timeout, true) != SF_OK ||
        /* no "Expect: 100-continue" round trip before each message */
        curl_slist_append(h, "Expect:") == NULL)
        goto out_free_headers;
    if (x->base.compression == SF_COMPRESSION_GZIP &&
        sf_curl_header_add(&h, "grpc-encoding", "gzip", true) != SF_OK)
        goto out_free_headers;
    if (!x->cfg->tls.insecure && x->cfg->tls.server_name_override != NULL &&
        sf_curl_header_add(&h, "host", x->cfg->tls.server_name_override, true) != SF_OK)
        goto out_free_headers;
    for (size_t i = 0; i < md->n; i++) {
        if (sf_curl_header_add(&h, md->keys[i], md->values[i] ? md->values[i] : "", true) != SF_OK)
            goto out_free_headers;
    }
    x->base.headers = h;
    return SF_OK;

out_free_headers:
    sf_curl_headers_free(h);
    return SF_ENOMEM;
}

/* TLS with the exporter's settings: the CAs (default: the system's), the
 * client certificate and key; libcurl verifies the peer and its name. */
static CURLcode set_tls(CURL *c, const sf_otlp_tls_config *t)
{
    CURLcode rc;

    if (t->insecure)
        return curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    rc = curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(c, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2);
    if (rc == CURLE_OK && t->ca_file != NULL)
        rc = curl_easy_setopt(c, CURLOPT_CAINFO, t->ca_file);
    if (rc == CURLE_OK && t->cert_file != NULL && t->key_file != NULL) {
        rc = curl_easy_setopt(c, CURLOPT_SSLCERT, t->cert_file);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(c, CURLOPT_SSLKEY, t->key_file);
    }
    return rc;
}

/* The worker's own part (sf_curl_export_destroy releases its handles). */
static void worker_release(void *worker)
{
    otlpgrpc_worker *w = worker;

    sf_free(w->details);
    w->details = NULL;
}

static sf_status worker_init(otlpgrpc *x, otlpgrpc_worker *w)
{
    CURL *c;

    w->x = x;
    if (sf_curl_worker_init(&w->h, &x->base, OTLPGRPC_REPLY_MAX) != SF_OK)
        return SF_ENOMEM;
    c = w->h.curl;
    w->details = sf_malloc(OTLPGRPC_DETAILS_MAX);
    if (w->details == NULL ||
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_READDATA, w) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, w) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HEADERDATA, w) != CURLE_OK ||
        set_tls(c, &x->cfg->tls) != CURLE_OK ||
        /* one connection per worker: a new one replaces the old */
        curl_multi_setopt(w->h.multi, CURLMOPT_MAXCONNECTS, 1L) != CURLM_OK) {
        sf_curl_worker_release(&w->h);
        worker_release(w);
        return SF_ENOMEM;
    }
    return SF_OK;
}

/* ---- lifecycle ---------------------------------------------------------------- */

/* No connections here: `spanfence validate` runs create. */
static sf_status otlpgrpc_create(sf_component *self, const void *config)
{
    const sf_otlpgrpc_config *c = config;
    otlpgrpc *x;
    sf_status st;

    st = sf_curl_export_create(self, sizeof(*x), sizeof(otlpgrpc_worker), worker_release,
                               c->compression, &c->compression_params,
                               c->timeout > 0 ? c->timeout : 5000, &c->sending_queue,
                               &c->retry_on_failure, otlpgrpc_send);
    if (st != SF_OK)
        return st;
    x = sf_component_ctx(self);
    x->cfg = c;
    return SF_OK;
}

/* What start() made is undone by destroy(), also after a failed start. */
static sf_status otlpgrpc_start(sf_component *self)
{
    otlpgrpc *x = sf_component_ctx(self);
    sf_status st;

    st = build_url(x);
    if (st == SF_INVALID)
        sf_error("exporter %s: endpoint '%s' is not host:port", x->base.id, x->cfg->endpoint);
    if (st != SF_OK)
        return st;
    st = build_headers(x);
    if (st != SF_OK)
        return st;
    for (unsigned i = 0; i < x->base.n_workers; i++) {
        st = worker_init(x, sf_curl_export_worker(&x->base, i));
        if (st != SF_OK)
            return st;
    }
    return sf_sender_export_start(self);
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
    .destroy = sf_curl_export_destroy,
    .suspend = sf_sender_export_suspend,
    .resume = sf_sender_export_resume,
    .describe_export = sf_otlpgrpc_describe,
};
