/* exporters/otlp_http/otlp_http.c: the `otlphttp` exporter: POSTs encoded,
 * filtered batches as OTLP/HTTP protobuf (optionally gzip or zstd) with libcurl,
 * through the shared sending queue and retry engine (sf_sender.h).
 *
 * DESIGN
 * Threads: consume() runs on receiver threads and only submits to the
 *   sender (never blocks, unless the queue is disabled). The sender's
 *   consumer threads call otlphttp_send() with their worker index; each
 *   worker owns one CURL easy handle (reused, so connections are kept
 *   alive) and one compressor (sf_compress.h) with its buffer. Nothing else is written
 *   after create.
 * Bounded attempts: each request runs on the worker's own multi handle
 *   (perform()), so the whole attempt, name lookup included, ends within
 *   `timeout`, and shutdown never waits on a resolver thread.
 * Secrets: configured header values may be bearer tokens. They live only in
 *   the curl header list (wiped before it is freed); CURLOPT_VERBOSE stays
 *   off, and no log line here prints a header or the URL (it may hold
 *   userinfo).
 * Results: 2xx is sent (a partial_success in the reply splits the count);
 *   connection-level curl errors and HTTP 429/502/503/504 are retried
 *   (honouring Retry-After); everything else is permanent. */
#include "otlp_http.h"
#include "sf_arena.h"
#include "sf_curl.h"
#include "sf_libcurl.h"
#include "sf_encoding.h"
#include "sf_time.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A reply body larger than this is not a partial-success report we act
 * on: the rest is read and discarded. */
#define OTLPHTTP_REPLY_MAX 8192
/* Longest the shutdown drain may take, whatever the request timeout. */
#define OTLPHTTP_DRAIN_MAX_MS 5000
/* The default gzip level is 1 (SF_GZIP_LEVEL_DEFAULT): the exporter's
 * gzip is the most expensive stage of the pipeline (field notes: 311 k
 * spans/s at level 1 against 190 k at 6), while level 6 only shaves a few
 * bytes off ~110 B per filtered span; on a 2-vCPU VM shared with the
 * serving engine the CPU matters more than the wire. libdeflate rather than
 * zlib: the whole body is in memory, so no stream is needed, and on a
 * 512-span filtered batch (177 KB) its level 1 took 0.33-0.45 ms against
 * zlib's 0.61-0.83 ms for a body 4% larger. */
/* How often a request in flight looks at the shutdown state. */
#define OTLPHTTP_POLL_MS 50
/* Shutdown's drain time is over: a request whose body is sent whole gets
 * this long more for its reply (the server may have the spans: counting
 * them dropped would be wrong); one still sending its body ends at once. */
#define OTLPHTTP_REPLY_GRACE_MS 2000

typedef struct otlphttp otlphttp;

typedef struct otlphttp_worker {
    otlphttp *x;
    CURL *curl;
    CURLM *multi;               /* drives `curl`, so the wait can be cut short */
    sf_compressor *zc;          /* NULL without compression */
    sf_curl_call call;          /* the reply: OTLPHTTP_REPLY_MAX bytes */
} otlphttp_worker;

struct otlphttp {
    sf_sender_export out;       /* first: the sender's component side (sf_sender.h) */
    const char *id;
    sf_signal signal;           /* of the pipelines this instance serves */
    sf_counters *counters;
    const sf_otlphttp_tls *tls;     /* the config's: lives as long as it */
    char *url;                  /* with tls.server_name_override, its host is that name */
    struct curl_slist *headers; /* holds secrets: wiped before freeing */
    struct curl_slist *connect_to;  /* server_name_override: "NAME:PORT:HOST:PORT"; or NULL */
    sf_compression compression;
    int level;
    int64_t timeout_ms;
    unsigned n_workers;
    otlphttp_worker *workers;
};

/* ---- library setup ------------------------------------------------------ */

/* libcurl is loaded and initialised by create (sf_libcurl.h); libdeflate's
 * counted allocator is set by the core (sf_compress.c). */

/* ---- one request ---------------------------------------------------------- */

/* One transfer on the worker's multi handle. The whole attempt (name
 * lookup, connect, TLS, body, reply) is bounded by CURLOPT_TIMEOUT_MS: the
 * Debian libcurl uses the threaded resolver, which the timeout covers, and
 * CURLOPT_QUICK_EXIT lets a lookup that is still blocked in getaddrinfo()
 * be left to its thread instead of joined (a DNS server that never answers
 * held each attempt for resolv.conf's 2 x 5 s otherwise). Once shutdown's
 * drain time is over the transfer ends within OTLPHTTP_POLL_MS, unless its
 * body is sent whole: then it may wait OTLPHTTP_REPLY_GRACE_MS more for the
 * reply, so spans the server took are counted sent, not dropped. */
static CURLcode perform(otlphttp_worker *w)
{
    CURLcode rc;

    rc = sf_curl_perform(w->multi, w->curl, w->x->out.sender, &w->call, OTLPHTTP_POLL_MS,
                         OTLPHTTP_REPLY_GRACE_MS);
    curl_multi_remove_handle(w->multi, w->curl);
    return rc;
}

/* Connection-level failures a later attempt may get past. Everything
 * else (bad URL, TLS verification, unsupported protocol) is permanent. */
static bool curl_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:    /* DNS in a fresh VM comes up late */
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_ABORTED_BY_CALLBACK:     /* shutdown: the sender drops it */
        return true;
    default:
        return false;
    }
}

/* Spans a 2xx reply says the server rejected (OTLP partial_success). */
static int64_t reply_rejected(otlphttp *x, otlphttp_worker *w, const sf_buf *buf)
{
    const char *ctype = NULL;

    if (w->call.reply_len == 0 || w->call.reply_len >= OTLPHTTP_REPLY_MAX)
        return 0;
    if (curl_easy_getinfo(w->curl, CURLINFO_CONTENT_TYPE, &ctype) != CURLE_OK || ctype == NULL ||
        strncasecmp(ctype, "application/x-protobuf", 22) != 0)
        return 0;
    return sf_curl_reply_rejected(x->id, x->signal, buf->spans, w->call.reply, w->call.reply_len);
}

static void otlphttp_send(void *exporter, unsigned worker, const sf_buf *buf,
                          sf_send_result *res)
{
    otlphttp *x = exporter;
    otlphttp_worker *w = &x->workers[worker];
    const uint8_t *body = buf->data;
    size_t len = buf->len;
    long code = 0;
    curl_off_t retry_after = 0;
    CURLcode rc;

    if (w->zc != NULL) {
        sf_status st = sf_compressor_run(w->zc, buf->data, buf->len, &body, &len);

        if (st != SF_OK) {
            res->status = st == SF_ENOMEM ? SF_RETRY : SF_PERMANENT;
            snprintf(res->detail, sizeof(res->detail), "%s: %s",
                     sf_compression_name(x->compression), sf_status_str(st));
            return;
        }
    }
    w->call.reply_len = 0;
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
    rc = perform(w);
    if (rc != CURLE_OK) {
        res->status = curl_retryable(rc) ? SF_RETRY : SF_PERMANENT;
        if (rc == CURLE_PEER_FAILED_VERIFICATION)
            snprintf(res->detail, sizeof(res->detail), "TLS: the gateway's certificate is not "
                     "trusted (not signed by tls.ca_file or the system CAs, or not for the "
                     "endpoint's host): %s", curl_easy_strerror(rc));
        else if (rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE)
            snprintf(res->detail, sizeof(res->detail), "TLS: tls.cert_file, key_file or "
                     "ca_file could not be used: %s", curl_easy_strerror(rc));
        else
            snprintf(res->detail, sizeof(res->detail), "%s", curl_easy_strerror(rc));
        return;
    }
    curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
        res->status = SF_OK;
        res->rejected_spans = reply_rejected(x, w, buf);
        return;
    }
    snprintf(res->detail, sizeof(res->detail), "http %ld", code);
    if (code == 429 || code == 502 || code == 503 || code == 504) {
        res->status = SF_RETRY;
        /* curl parses both forms of Retry-After (seconds, HTTP-date) */
        if (curl_easy_getinfo(w->curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
            retry_after > 0)
            res->retry_after_ms = (retry_after > 86400 ? 86400 : (int64_t)retry_after) * 1000;
        return;
    }
    res->status = SF_PERMANENT;
}

/* ---- setup and teardown -------------------------------------------------- */

/* The signal's URL, as upstream's: its own <signal>_endpoint when set,
 * else the endpoint with /v1/<signal> appended. */
static char *build_url(const sf_otlphttp_config *c, sf_signal signal)
{
    const char *own = sf_otlphttp_signal_endpoint(c, signal);
    const char *path = sf_signal_http_path(signal);
    size_t len, nl = strlen(path);
    char *url;

    if (own != NULL && own[0] != '\0')
        return sf_strdup(own);
    len = strlen(c->endpoint);
    while (len > 0 && c->endpoint[len - 1] == '/')
        len--;
    url = sf_malloc(len + nl + 1);
    if (url == NULL)
        return NULL;
    memcpy(url, c->endpoint, len);
    memcpy(url + len, path, nl + 1);
    return url;
}

/* tls.server_name_override, as upstream's (Go's tls.Config.ServerName):
 * the name is the one SNI sends and the certificate is checked against;
 * the connection still goes to the endpoint's host and port, and the Host
 * header is still the endpoint's. libcurl takes both names from the URL,
 * so the URL gets the override as its host, CURLOPT_CONNECT_TO sends the
 * connection to the endpoint's real host:port, and an explicit Host header
 * keeps the endpoint's host[:port]. On SF_OK `x->url` is the rewritten
 * URL, `x->connect_to` is set and `*host` (sf_free) is the Host value. */
static sf_status apply_server_name(otlphttp *x, const char *name, char **host)
{
    CURLU *u = curl_url();
    char *h = NULL, *port = NULL, *explicit_port = NULL, *url = NULL;
    char *line, *host_value = NULL, *new_url = NULL;
    struct curl_slist *ct = NULL;
    sf_status st = SF_INVALID;
    size_t len;

    if (u == NULL)
        return SF_ENOMEM;
    if (curl_url_set(u, CURLUPART_URL, x->url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out_cleanup;
    if (curl_url_get(u, CURLUPART_PORT, &explicit_port, 0) != CURLUE_OK)
        explicit_port = NULL;           /* CURLUE_NO_PORT: the scheme's */
    if (curl_url_set(u, CURLUPART_HOST, name, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
        goto out_cleanup;
    st = SF_ENOMEM;
    len = strlen(name) + strlen(h) + 2 * strlen(port) + 4;
    if ((line = sf_malloc(len)) != NULL) {
        snprintf(line, len, "%s:%s:%s:%s", name, port, h, port);
        ct = curl_slist_append(NULL, line);     /* copies */
        sf_free(line);
    }
    len = strlen(h) + (explicit_port ? strlen(explicit_port) + 1 : 0) + 1;
    if ((host_value = sf_malloc(len)) != NULL)
        snprintf(host_value, len, "%s%s%s", h, explicit_port ? ":" : "",
                 explicit_port ? explicit_port : "");
    new_url = sf_strdup(url);
    if (ct == NULL || host_value == NULL || new_url == NULL) {
        curl_slist_free_all(ct);
        sf_free(host_value);
        sf_free(new_url);
        goto out_cleanup;
    }
    sf_free(x->url);
    x->url = new_url;
    x->connect_to = ct;
    *host = host_value;
    st = SF_OK;

out_cleanup:
    curl_free(url);
    curl_free(explicit_port);
    curl_free(port);
    curl_free(h);
    curl_url_cleanup(u);
    return st;
}

static bool has_header(const sf_strmap *headers, const char *name)
{
    for (size_t i = 0; i < headers->n; i++)
        if (strcasecmp(headers->keys[i], name) == 0)
            return true;
    return false;
}

/* `host`: the Host header to send (server_name_override), or NULL for
 * libcurl's own, from the URL. A configured Host header wins. */
static sf_status build_headers(otlphttp *x, const sf_otlphttp_config *c, const char *host)
{
    struct curl_slist *h = NULL;

    if (sf_curl_header_add(&h, "Content-Type", "application/x-protobuf", false) != SF_OK)
        goto out_free_headers;
    if (x->compression != SF_COMPRESSION_NONE &&
        sf_curl_header_add(&h, "Content-Encoding", sf_compression_name(x->compression), false) != SF_OK)
        goto out_free_headers;
    /* no "Expect: 100-continue" round trip before each body */
    if (sf_curl_header_add(&h, "Expect", "", false) != SF_OK)
        goto out_free_headers;
    if (host != NULL && !has_header(&c->headers, "Host") &&
        sf_curl_header_add(&h, "Host", host, false) != SF_OK)
        goto out_free_headers;
    for (size_t i = 0; i < c->headers.n; i++) {
        if (sf_curl_header_add(&h, c->headers.keys[i],
                          c->headers.values[i] ? c->headers.values[i] : "", false) != SF_OK)
            goto out_free_headers;
    }
    x->headers = h;
    return SF_OK;

out_free_headers:
    sf_curl_headers_free(h);
    return SF_ENOMEM;
}

/* tls: the CAs, the client certificate and key, the versions. libcurl
 * verifies the peer and its name (SNI is the URL's host: the endpoint's,
 * or server_name_override, see apply_server_name) by default. */
static CURLcode set_tls(CURL *c, const sf_otlphttp_tls *t)
{
    /* by choice index: 1.2|1.3|1.0|1.1 */
    static const long min_v[] = { CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_TLSv1_3,
                                  CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_TLSv1_1 };
    static const long max_v[] = { CURL_SSLVERSION_MAX_DEFAULT, CURL_SSLVERSION_MAX_TLSv1_2,
                                  CURL_SSLVERSION_MAX_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_0,
                                  CURL_SSLVERSION_MAX_TLSv1_1 };
    CURLcode rc = CURLE_OK;

    if (t == NULL || !t->present)
        return curl_easy_setopt(c, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2);
    if (t->ca_file != NULL)
        rc = curl_easy_setopt(c, CURLOPT_CAINFO, t->ca_file);
    if (rc == CURLE_OK && t->cert_file != NULL)
        rc = curl_easy_setopt(c, CURLOPT_SSLCERT, t->cert_file);
    if (rc == CURLE_OK && t->key_file != NULL)
        rc = curl_easy_setopt(c, CURLOPT_SSLKEY, t->key_file);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(c, CURLOPT_SSLVERSION, min_v[t->min_version] | max_v[t->max_version]);
    return rc;
}

static sf_status worker_init(otlphttp *x, otlphttp_worker *w)
{
    CURL *c;

    w->x = x;
    if (sf_curl_call_init(&w->call, OTLPHTTP_REPLY_MAX) != SF_OK)
        return SF_ENOMEM;
    if (x->compression != SF_COMPRESSION_NONE &&
        (w->zc = sf_compressor_create(x->compression, x->level)) == NULL)
        goto out_release_call;
    c = curl_easy_init();
    if (c == NULL)
        goto out_release_call;
    /* Fixed per handle; only the body changes per request. */
    if (sf_curl_post_options(c, x->url, x->headers, x->timeout_ms, &w->call) != CURLE_OK ||
        (x->connect_to != NULL &&
         curl_easy_setopt(c, CURLOPT_CONNECT_TO, x->connect_to) != CURLE_OK) ||
        set_tls(c, x->tls) != CURLE_OK)
        goto out_cleanup_curl;
    w->multi = curl_multi_init();
    if (w->multi == NULL)
        goto out_cleanup_curl;
    w->curl = c;
    return SF_OK;

out_cleanup_curl:
    curl_easy_cleanup(c);
out_release_call:
    sf_compressor_destroy(w->zc);
    w->zc = NULL;
    sf_curl_call_release(&w->call);
    return SF_ENOMEM;
}

static void worker_release(otlphttp_worker *w)
{
    curl_multi_cleanup(w->multi);
    curl_easy_cleanup(w->curl);
    sf_compressor_destroy(w->zc);
    w->zc = NULL;
    sf_curl_call_release(&w->call);
}

/* ---- lifecycle ------------------------------------------------------------ */

static sf_status otlphttp_create(sf_component *self, const void *config)
{
    const sf_otlphttp_config *c = config;
    otlphttp *x;
    char *host = NULL;
    unsigned i = 0;
    sf_status st = SF_ENOMEM;

    /* libcurl is loaded when a component needs it (sf_libcurl.h): a
     * missing one is a config-time error */
    if (sf_libcurl_load() != SF_OK) {
        sf_error("exporter %s: %s", sf_component_id(self), sf_libcurl_error());
        return SF_IO;
    }
    x = sf_calloc(1, sizeof(*x));
    if (x == NULL)
        return SF_ENOMEM;
    x->id = sf_component_id(self);
    x->signal = sf_component_signal(self);
    x->counters = sf_component_counters(self);
    x->compression = (sf_compression)c->compression;
    x->level = sf_compression_level(x->compression, &c->compression_params);
    x->timeout_ms = c->timeout > 0 ? c->timeout : 30000;
    x->out.drain_ms = x->timeout_ms < OTLPHTTP_DRAIN_MAX_MS ? x->timeout_ms : OTLPHTTP_DRAIN_MAX_MS;
    x->out.send_timeout_ms = x->timeout_ms;
    x->tls = &c->tls;
    if ((c->endpoint == NULL || c->endpoint[0] == '\0') &&
        sf_otlphttp_signal_endpoint(c, x->signal) == NULL) {
        /* validate runs create: said there, for the pipeline's signal */
        sf_error("exporter %s: a %s pipeline lists it, but it has neither 'endpoint' nor "
                 "'%s_endpoint'", x->id, sf_signal_name(x->signal), sf_signal_name(x->signal));
        st = SF_CONFIG;
        goto out_free_ctx;
    }
    x->url = build_url(c, x->signal);
    if (x->url == NULL)
        goto out_free_ctx;
    if (c->tls.server_name_override != NULL &&
        (st = apply_server_name(x, c->tls.server_name_override, &host)) != SF_OK) {
        if (st == SF_INVALID)
            sf_error("exporter %s: tls.server_name_override cannot be applied to the endpoint's "
                     "URL", x->id);
        goto out_free_url;
    }
    st = build_headers(x, c, host);
    sf_free(host);
    if (st != SF_OK)
        goto out_free_url;
    st = SF_ENOMEM;
    x->out.sender = sf_sender_create(x->id, &c->sending_queue, &c->retry_on_failure, otlphttp_send,
                                 x, x->counters);
    if (x->out.sender == NULL)
        goto out_free_headers;
    x->n_workers = sf_sender_workers(x->out.sender);
    x->workers = sf_calloc(x->n_workers, sizeof(*x->workers));
    if (x->workers == NULL)
        goto out_destroy_sender;
    for (i = 0; i < x->n_workers; i++) {
        if (worker_init(x, &x->workers[i]) != SF_OK)
            goto out_release_workers;
    }
    sf_component_set_ctx(self, x);
    return SF_OK;

out_release_workers:
    while (i-- > 0)
        worker_release(&x->workers[i]);
    sf_free(x->workers);
out_destroy_sender:
    sf_sender_destroy(x->out.sender);
out_free_headers:
    sf_curl_headers_free(x->headers);
out_free_url:
    curl_slist_free_all(x->connect_to);
    sf_free(x->url);
out_free_ctx:
    sf_free(x);
    return st;
}

static void otlphttp_destroy(sf_component *self)
{
    otlphttp *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    sf_sender_destroy(x->out.sender);   /* joins the consumers first */
    for (unsigned i = 0; i < x->n_workers; i++)
        worker_release(&x->workers[i]);
    sf_free(x->workers);
    sf_curl_headers_free(x->headers);
    curl_slist_free_all(x->connect_to);
    sf_free(x->url);
    sf_free(x);
    sf_component_set_ctx(self, NULL);
}

const sf_component_type sf_otlphttp_exporter_type = {
    .name = "otlphttp",
    .alias = "otlp_http",
    .kind = SF_KIND_EXPORTER,
    .description = "OTLP over HTTP (protobuf) to the telemetry gateway",
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_otlphttp_config),
    .config_map = sf_otlphttp_config_map,
    .check = sf_otlphttp_check,
    .create = otlphttp_create,
    .start = sf_sender_export_start,
    .consume = sf_sender_export_consume,
    .shutdown = sf_sender_export_shutdown,
    .destroy = otlphttp_destroy,
    .suspend = sf_sender_export_suspend,
    .resume = sf_sender_export_resume,
    .describe_export = sf_otlphttp_describe,
};
