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

/* A worker is the shared one (sf_curl_worker): its reply is
 * OTLPHTTP_REPLY_MAX bytes. With tls.server_name_override the URL's host is
 * that name (apply_server_name). */
typedef struct otlphttp {
    sf_curl_export base;        /* first (sf_curl.h) */
    const sf_otlphttp_tls *tls;     /* the config's: lives as long as it */
} otlphttp;

/* ---- library setup ------------------------------------------------------ */

/* libcurl is loaded and initialised by create (sf_curl_export_create);
 * libdeflate's counted allocator is set by the core (sf_compress.c). */

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
static CURLcode perform(const otlphttp *x, sf_curl_worker *w)
{
    CURLcode rc;

    rc = sf_curl_perform(w->multi, w->curl, x->base.out.sender, &w->call, OTLPHTTP_POLL_MS,
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
static int64_t reply_rejected(const otlphttp *x, sf_curl_worker *w, const sf_buf *buf)
{
    const char *ctype = NULL;

    if (w->call.reply_len == 0 || w->call.reply_len >= OTLPHTTP_REPLY_MAX)
        return 0;
    if (curl_easy_getinfo(w->curl, CURLINFO_CONTENT_TYPE, &ctype) != CURLE_OK || ctype == NULL ||
        strncasecmp(ctype, "application/x-protobuf", 22) != 0)
        return 0;
    return sf_curl_reply_rejected(x->base.id, x->base.signal, buf->spans, w->call.reply,
                                  w->call.reply_len);
}

static void otlphttp_send(void *exporter, unsigned worker, const sf_buf *buf,
                          sf_send_result *res)
{
    otlphttp *x = exporter;
    sf_curl_worker *w = sf_curl_export_worker(&x->base, worker);
    const uint8_t *body;
    size_t len;
    long code = 0;
    curl_off_t retry_after = 0;
    CURLcode rc;
    sf_status st;

    st = sf_curl_worker_compress(w, x->base.compression, buf, &body, &len, res);
    if (st != SF_OK) {
        res->status = st == SF_ENOMEM ? SF_RETRY : SF_PERMANENT;
        return;
    }
    w->call.reply_len = 0;
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
    rc = perform(x, w);
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
static sf_status apply_server_name(sf_curl_export *x, const char *name, char **host)
{
    CURLU *u = curl_url();
    char *h = NULL, *port = NULL, *explicit_port = NULL, *url = NULL;
    char *host_value = NULL, *new_url = NULL;
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
    ct = sf_curl_connect_to(name, h, strlen(h), port);
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
static sf_status build_headers(sf_curl_export *x, const sf_otlphttp_config *c, const char *host)
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

static sf_status worker_init(otlphttp *x, sf_curl_worker *w)
{
    if (sf_curl_worker_init(w, &x->base, OTLPHTTP_REPLY_MAX) != SF_OK)
        return SF_ENOMEM;
    if (set_tls(w->curl, x->tls) != CURLE_OK) {
        sf_curl_worker_release(w);
        return SF_ENOMEM;
    }
    return SF_OK;
}

/* ---- lifecycle ------------------------------------------------------------ */

static sf_status otlphttp_create(sf_component *self, const void *config)
{
    const sf_otlphttp_config *c = config;
    otlphttp *x;
    sf_curl_export *b;
    char *host = NULL;
    sf_status st;

    st = sf_curl_export_create(self, sizeof(*x), sizeof(sf_curl_worker), NULL, c->compression,
                               &c->compression_params, c->timeout > 0 ? c->timeout : 30000,
                               &c->sending_queue, &c->retry_on_failure, otlphttp_send);
    if (st != SF_OK)
        return st;
    x = sf_component_ctx(self);
    b = &x->base;
    x->tls = &c->tls;
    st = SF_ENOMEM;
    if ((c->endpoint == NULL || c->endpoint[0] == '\0') &&
        sf_otlphttp_signal_endpoint(c, b->signal) == NULL) {
        /* validate runs create: said there, for the pipeline's signal */
        sf_error("exporter %s: a %s pipeline lists it, but it has neither 'endpoint' nor "
                 "'%s_endpoint'", b->id, sf_signal_name(b->signal), sf_signal_name(b->signal));
        st = SF_CONFIG;
        goto out_destroy;
    }
    b->url = build_url(c, b->signal);
    if (b->url == NULL)
        goto out_destroy;
    if (c->tls.server_name_override != NULL &&
        (st = apply_server_name(b, c->tls.server_name_override, &host)) != SF_OK) {
        if (st == SF_INVALID)
            sf_error("exporter %s: tls.server_name_override cannot be applied to the endpoint's "
                     "URL", b->id);
        goto out_destroy;
    }
    st = build_headers(b, c, host);
    sf_free(host);
    if (st != SF_OK)
        goto out_destroy;
    for (unsigned i = 0; i < b->n_workers; i++) {
        st = worker_init(x, sf_curl_export_worker(b, i));
        if (st != SF_OK)
            goto out_destroy;
    }
    return SF_OK;

out_destroy:
    sf_curl_export_destroy(self);
    return st;
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
    .destroy = sf_curl_export_destroy,
    .suspend = sf_sender_export_suspend,
    .resume = sf_sender_export_resume,
    .describe_export = sf_otlphttp_describe,
};
