/* receivers/prometheus/prometheus.c: the `prometheus` receiver: scrapes
 * the targets of its static_configs with libcurl, parses the exposition
 * (prom_parse.c), converts it to an OTLP metrics request (prom_convert.c)
 * and emits it into the metrics pipelines that list the receiver, through
 * the same processors (the fence) as OTLP input.
 *
 * DESIGN. One scraper thread per target (at most SF_PROM_MAX_TARGETS per
 * receiver), each with its own curl handle, arena, body buffer and
 * start-time table: nothing is shared between them but the stop flag
 * (under `lock`, with a monotonic condvar for the waits) and relaxed
 * atomic counters that the metrics thread reads. Every scrape is bounded:
 * scrape_timeout ends the transfer (a body that never ends included),
 * body_size_limit the decompressed bytes, the parser's limits the lines,
 * samples and labels, and the arena the memory of one scrape (8 times the
 * body limit). A refused scrape sends up 0 (and the other scrape_*
 * series), counts its reason, and says why in the log at most once a
 * minute per target and reason. */
#include "prometheus.h"
#include "prom_convert.h"
#include "prom_parse.h"

#include "sf_dynbuf.h"
#include "sf_libcurl.h"
#include "sf_time.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    PM_SCRAPES,
    PM_DUPLICATES,
    PM_DROPPED_POINTS,
    PM_EXEMPLARS,
    PM_COUNT
};

#define LOG_EVERY_MS 60000

typedef struct prom_receiver prom_receiver;

typedef struct target {
    prom_receiver *r;
    const sf_prom_scrape_config *sc;
    char host[256];
    char port[8];
    char *instance;                 /* the target as configured: host:port */
    char *url;
    char *connect_to_entry;
    char *host_header;
    struct curl_slist *headers;
    struct curl_slist *connect_to;
    sf_prom_label *labels;          /* the static labels, sorted */
    size_t n_labels;
    sf_prom_target desc;
    sf_prom_limits limits;
    sf_prom_starts *starts;
    pthread_t thread;
    bool started;
    /* the scraper thread's alone */
    int64_t last_log_ms;
    sf_prom_err last_logged;
    uint64_t suppressed;
    bool failing;
    /* read by the metrics thread */
    _Atomic uint64_t failed[SF_PROM_ERR_COUNT];
    _Atomic int up;
} target;

struct prom_receiver {
    sf_component *self;
    const sf_prometheus_receiver_config *cfg;
    target *targets;
    size_t n_targets;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic bool stop;
};

/* ---- one scrape ---------------------------------------------------------------- */

typedef struct body {
    sf_dynbuf buf;
    bool too_large;
} body;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    body *b = arg;

    if (sf_dynbuf_add(&b->buf, data, size * n) != SF_OK) {
        b->too_large = true;
        return 0;                       /* ends the transfer: CURLE_WRITE_ERROR */
    }
    return size * n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    prom_receiver *r = arg;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return atomic_load_explicit(&r->stop, memory_order_relaxed) ? 1 : 0;
}

static void note_failure(target *t, sf_prom_err e, const char *detail)
{
    int64_t now = sf_now_ms();

    atomic_fetch_add_explicit(&t->failed[e], 1, memory_order_relaxed);
    if (t->failing && e == t->last_logged && now - t->last_log_ms < LOG_EVERY_MS) {
        t->suppressed++;
        return;
    }
    sf_warn("receiver %s: scrape of %s (job %s) refused (%s): %s%s", sf_component_id(t->r->self),
            t->url, t->sc->job_name, sf_prom_err_label(e), detail,
            t->suppressed ? "; earlier refusals not logged" : "");
    t->failing = true;
    t->last_logged = e;
    t->last_log_ms = now;
    t->suppressed = 0;
}

static void emit(target *t, const uint8_t *bytes, size_t len, size_t points)
{
    sf_component *self = t->r->self;
    sf_request batch;
    sf_arena *scratch;
    sf_status st;

    if (!sf_component_may_accept(self)) {
        sf_component_refuse(self, SF_TRANSPORT_HTTP, SF_SIGNAL_METRICS, points,
                            SF_REASON_MEMORY_LIMIT);
        return;
    }
    scratch = sf_arena_create(16 * 1024, 0);
    if (scratch == NULL) {
        sf_component_refuse(self, SF_TRANSPORT_HTTP, SF_SIGNAL_METRICS, points,
                            SF_REASON_MEMORY_LIMIT);
        return;
    }
    sf_request_init_signal(&batch, scratch, SF_SIGNAL_METRICS, bytes, len,
                           SF_OTLP_DEFAULT_MAX_DEPTH);
    st = sf_component_emit(self, SF_TRANSPORT_HTTP, &batch);
    if (st != SF_OK)
        sf_debug("receiver %s: a scrape of %s was not taken: %s", sf_component_id(self), t->url,
                 sf_status_str(st));
    sf_request_release(&batch);
    sf_arena_destroy(scratch);
}

static void scrape_once(target *t, CURL *curl, body *b, sf_arena *arena)
{
    prom_receiver *r = t->r;
    sf_counters *counters = sf_component_counters(r->self);
    sf_prom_scrape_info info = { .up = false };
    sf_prom_result res;
    sf_prom_convert_stats cs;
    sf_prom_err err = SF_PROM_ERR_OK;
    char detail[192] = "";
    int64_t t0 = sf_now_us();
    CURLcode rc;
    long code = 0;
    uint8_t *bytes;
    size_t len;

    sf_count(&counters->values[PM_SCRAPES], 1);
    info.time_ns = (uint64_t)sf_wall_ms() * 1000000ULL;
    sf_arena_reset(arena);
    sf_dynbuf_reset(&b->buf);
    b->too_large = false;
    memset(&res, 0, sizeof(res));
    rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK) {
        if (b->too_large) {
            err = SF_PROM_ERR_BODY_TOO_LARGE;
            snprintf(detail, sizeof(detail), "the body is larger than body_size_limit (%lld "
                     "bytes)", (long long)t->sc->body_size_limit);
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {
            err = SF_PROM_ERR_TIMEOUT;
            snprintf(detail, sizeof(detail), "not done within scrape_timeout (%lld ms)",
                     (long long)t->sc->scrape_timeout);
        } else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) {
            err = SF_PROM_ERR_CONNECT;
            snprintf(detail, sizeof(detail), "%s", curl_easy_strerror(rc));
        } else if (rc == CURLE_ABORTED_BY_CALLBACK) {
            return;                     /* shutting down: nothing to report */
        } else {
            err = SF_PROM_ERR_TRANSPORT;
            snprintf(detail, sizeof(detail), "%s", curl_easy_strerror(rc));
        }
    } else if (code != 200) {
        err = SF_PROM_ERR_HTTP_STATUS;
        snprintf(detail, sizeof(detail), "HTTP status %ld", code);
    } else {
        char *ct = NULL;
        sf_prom_format fmt;

        curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
        fmt = sf_prom_format_of(ct);
        err = sf_prom_parse((const uint8_t *)sf_dynbuf_ptr(&b->buf), sf_dynbuf_len(&b->buf), fmt,
                            &t->limits, arena, &res);
        if (err != SF_PROM_ERR_OK)
            snprintf(detail, sizeof(detail), "%s (%s)", res.err_text,
                     fmt == SF_PROM_OPENMETRICS ? "OpenMetrics" : "text 0.0.4");
    }
    info.up = err == SF_PROM_ERR_OK;
    info.duration_s = (double)(sf_now_us() - t0) / 1e6;
    if (!info.up) {
        note_failure(t, err, detail);
    } else if (t->failing) {
        sf_info("receiver %s: %s scraped again", sf_component_id(r->self), t->url);
        t->failing = false;
    }
    atomic_store_explicit(&t->up, info.up ? 1 : 0, memory_order_relaxed);
    if (info.up) {
        sf_count(&counters->values[PM_DUPLICATES], res.duplicates);
        sf_count(&counters->values[PM_EXEMPLARS], res.exemplars);
    }
    if (sf_prom_convert(info.up ? &res : NULL, &t->desc, &info, t->starts, arena, &bytes, &len,
                        &cs) != SF_OK) {
        /* the scrape's memory (8x its body limit) ran out: say so, send up 0 */
        note_failure(t, SF_PROM_ERR_NO_MEMORY, "the converted scrape does not fit its memory");
        atomic_store_explicit(&t->up, 0, memory_order_relaxed);
        sf_arena_reset(arena);
        info.up = false;
        if (sf_prom_convert(NULL, &t->desc, &info, t->starts, arena, &bytes, &len, &cs) != SF_OK)
            return;
    }
    sf_count(&counters->values[PM_DROPPED_POINTS], cs.dropped);
    emit(t, bytes, len, cs.points);
}

/* ---- the scraper threads ---------------------------------------------------------- */

static CURL *make_curl(target *t, body *b, char *errbuf)
{
    const sf_prom_scrape_config *sc = t->sc;
    CURL *c = curl_easy_init();
    bool ok = true;

    if (c == NULL)
        return NULL;
#define SET(opt, val) ok = ok && curl_easy_setopt(c, opt, val) == CURLE_OK
    SET(CURLOPT_URL, t->url);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, b);
    SET(CURLOPT_NOPROGRESS, 0L);
    SET(CURLOPT_XFERINFOFUNCTION, on_progress);
    SET(CURLOPT_XFERINFODATA, t->r);
    SET(CURLOPT_TIMEOUT_MS, (long)sc->scrape_timeout);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)sc->scrape_timeout);
    SET(CURLOPT_HTTPHEADER, t->headers);
    SET(CURLOPT_USERAGENT, "spanfence/" SF_VERSION);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, sc->follow_redirects ? 1L : 0L);
    SET(CURLOPT_MAXREDIRS, 5L);
    /* identity when compression is off: no Accept-Encoding at all */
    if (sc->enable_compression)
        SET(CURLOPT_ACCEPT_ENCODING, "gzip");
    if (sc->scheme == 1) {
        const sf_prom_tls_config *tls = &sc->tls_config;

        if (tls->ca_file)
            SET(CURLOPT_CAINFO, tls->ca_file);
        if (tls->cert_file)
            SET(CURLOPT_SSLCERT, tls->cert_file);
        if (tls->key_file)
            SET(CURLOPT_SSLKEY, tls->key_file);
        if (tls->insecure_skip_verify) {
            SET(CURLOPT_SSL_VERIFYPEER, 0L);
            SET(CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (t->connect_to)
            SET(CURLOPT_CONNECT_TO, t->connect_to);
    }
#undef SET
    if (!ok) {
        curl_easy_cleanup(c);
        return NULL;
    }
    return c;
}

static void *scraper_main(void *arg)
{
    target *t = arg;
    prom_receiver *r = t->r;
    char errbuf[CURL_ERROR_SIZE] = "";
    body b;
    sf_arena *arena;
    CURL *curl;
    int64_t next;

    sf_dynbuf_init(&b.buf, (size_t)t->sc->body_size_limit);
    b.too_large = false;
    arena = sf_arena_create(256 * 1024, (size_t)t->sc->body_size_limit * 8 + (1u << 20));
    curl = make_curl(t, &b, errbuf);
    if (arena == NULL || curl == NULL) {
        sf_error("receiver %s: cannot set up the scraper of %s (out of memory); it does not "
                 "scrape", sf_component_id(r->self), t->url);
        goto out;
    }
    next = sf_now_ms();
    pthread_mutex_lock(&r->lock);
    while (!atomic_load(&r->stop)) {
        pthread_mutex_unlock(&r->lock);
        scrape_once(t, curl, &b, arena);
        next += t->sc->scrape_interval;
        if (next <= sf_now_ms())        /* a scrape took longer than the interval: skip */
            next = sf_now_ms() + t->sc->scrape_interval;
        pthread_mutex_lock(&r->lock);
        while (!atomic_load(&r->stop) && sf_now_ms() < next)
            sf_cond_wait_until(&r->cond, &r->lock, next);
    }
    pthread_mutex_unlock(&r->lock);
out:
    if (curl)
        curl_easy_cleanup(curl);
    sf_arena_destroy(arena);
    sf_dynbuf_release(&b.buf);
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------------- */

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const sf_prom_label *)a)->name, ((const sf_prom_label *)b)->name);
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_printf(const char *fmt, ...)
{
    sf_dynbuf d;
    va_list ap;
    sf_status st;

    sf_dynbuf_init(&d, 1 << 16);
    va_start(ap, fmt);
    st = sf_dynbuf_vprintf(&d, fmt, ap);
    va_end(ap);
    if (st != SF_OK) {
        sf_dynbuf_release(&d);
        return NULL;
    }
    return sf_dynbuf_take(&d, NULL);
}

static sf_status target_init(prom_receiver *r, target *t, const sf_prom_scrape_config *sc,
                             const sf_prom_static_config *sg, const char *addr)
{
    const sf_prometheus_receiver_config *cfg = r->cfg;
    const char *scheme = sc->scheme == 1 ? "https" : "http";
    const char *url_host = addr;
    sf_dynbuf query;
    char accept[512], header[600];
    CURL *esc = NULL;

    t->r = r;
    t->sc = sc;
    if (!sf_prom_split_target(addr, t->host, sizeof(t->host), t->port, sizeof(t->port)))
        return SF_CONFIG;
    t->instance = str_printf("%s", addr);
    sf_dynbuf_init(&query, 1 << 16);
    if (sc->params.n > 0 && (esc = curl_easy_init()) == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < sc->params.n; i++) {
        char *n = curl_easy_escape(esc, sc->params.names[i], 0);
        char *v = curl_easy_escape(esc, sc->params.values[i], 0);

        if (n == NULL || v == NULL ||
            sf_dynbuf_printf(&query, "%c%s=%s", i ? '&' : '?', n, v) != SF_OK) {
            curl_free(n);
            curl_free(v);
            curl_easy_cleanup(esc);
            sf_dynbuf_release(&query);
            return SF_ENOMEM;
        }
        curl_free(n);
        curl_free(v);
    }
    if (esc)
        curl_easy_cleanup(esc);
    if (sc->scheme == 1 && sc->tls_config.server_name != NULL) {
        /* the certificate's name: the URL's host, connected to the target */
        t->connect_to_entry = str_printf("%s:%s:%s:%s", sc->tls_config.server_name, t->port,
                                         t->host, t->port);
        t->host_header = str_printf("Host: %s", addr);
        if (t->connect_to_entry == NULL || t->host_header == NULL) {
            sf_dynbuf_release(&query);
            return SF_ENOMEM;
        }
        t->connect_to = curl_slist_append(NULL, t->connect_to_entry);
        url_host = NULL;
    }
    if (url_host != NULL)
        t->url = str_printf("%s://%s%s%s", scheme, addr, sc->metrics_path,
                            sf_dynbuf_ptr(&query));
    else
        t->url = str_printf("%s://%s:%s%s%s", scheme, sc->tls_config.server_name, t->port,
                            sc->metrics_path, sf_dynbuf_ptr(&query));
    sf_dynbuf_release(&query);
    if (t->instance == NULL || t->url == NULL)
        return SF_ENOMEM;
    sf_prom_accept_header(&sc->scrape_protocols, accept, sizeof(accept));
    snprintf(header, sizeof(header), "Accept: %s", accept);
    t->headers = curl_slist_append(NULL, header);
    snprintf(header, sizeof(header), "X-Prometheus-Scrape-Timeout-Seconds: %g",
             (double)sc->scrape_timeout / 1000.0);
    if (t->headers)
        t->headers = curl_slist_append(t->headers, header);
    if (t->headers && t->host_header)
        t->headers = curl_slist_append(t->headers, t->host_header);
    if (t->headers == NULL)
        return SF_ENOMEM;
    t->n_labels = sg->labels.n;
    t->labels = sf_calloc(t->n_labels ? t->n_labels : 1, sizeof(*t->labels));
    if (t->labels == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < t->n_labels; i++) {
        t->labels[i].name = sg->labels.keys[i];
        t->labels[i].value = sg->labels.values[i];
        t->labels[i].value_len = strlen(sg->labels.values[i]);
    }
    qsort(t->labels, t->n_labels, sizeof(*t->labels), label_cmp);
    t->desc = (sf_prom_target){ .job = sc->job_name, .instance = t->instance, .host = t->host,
                                .port = t->port, .scheme = scheme, .labels = t->labels,
                                .n_labels = t->n_labels, .honor_labels = sc->honor_labels,
                                .honor_timestamps = sc->honor_timestamps };
    t->limits = (sf_prom_limits){ .max_line = (size_t)cfg->line_length_limit,
                                  .sample_limit = (size_t)sc->sample_limit,
                                  .label_limit = (size_t)sc->label_limit,
                                  .label_name_length = (size_t)sc->label_name_length_limit,
                                  .label_value_length = (size_t)sc->label_value_length_limit };
    t->starts = sf_prom_starts_create((size_t)sc->sample_limit * 2);
    if (t->starts == NULL)
        return SF_ENOMEM;
    return SF_OK;
}

static void target_release(target *t)
{
    sf_prom_starts_destroy(t->starts);
    curl_slist_free_all(t->headers);
    curl_slist_free_all(t->connect_to);
    sf_free(t->labels);
    sf_free(t->instance);
    sf_free(t->url);
    sf_free(t->connect_to_entry);
    sf_free(t->host_header);
}

static void prom_destroy(sf_component *self);

static sf_status prom_create(sf_component *self, const void *config)
{
    const sf_prometheus_receiver_config *cfg = config;
    prom_receiver *r;
    size_t n = 0;

    /* libcurl is loaded when a component needs it (sf_libcurl.h): a
     * missing one is a config-time error */
    if (sf_libcurl_load() != SF_OK) {
        sf_error("receiver %s: %s", sf_component_id(self), sf_libcurl_error());
        return SF_IO;
    }
    if ((r = sf_calloc(1, sizeof(*r))) == NULL)
        return SF_ENOMEM;
    r->self = self;
    r->cfg = cfg;
    pthread_mutex_init(&r->lock, NULL);
    sf_cond_init(&r->cond);
    sf_component_set_ctx(self, r);
    sf_component_set_transports(self, 1u << SF_TRANSPORT_HTTP);
    for (size_t i = 0; i < cfg->config.scrape_configs.n; i++) {
        const sf_prom_scrape_config *sc = (const sf_prom_scrape_config *)cfg->config.scrape_configs.v + i;

        for (size_t k = 0; k < sc->static_configs.n; k++)
            n += ((const sf_prom_static_config *)sc->static_configs.v)[k].targets.n;
    }
    r->targets = sf_calloc(n ? n : 1, sizeof(*r->targets));
    if (r->targets == NULL)
        goto out_destroy;
    for (size_t i = 0; i < cfg->config.scrape_configs.n; i++) {
        const sf_prom_scrape_config *sc = (const sf_prom_scrape_config *)cfg->config.scrape_configs.v + i;

        for (size_t k = 0; k < sc->static_configs.n; k++) {
            const sf_prom_static_config *sg = (const sf_prom_static_config *)sc->static_configs.v + k;

            for (size_t j = 0; j < sg->targets.n; j++) {
                sf_status st = target_init(r, &r->targets[r->n_targets], sc, sg,
                                           sg->targets.v[j]);

                r->n_targets++;
                if (st != SF_OK) {
                    prom_destroy(self);
                    return st;
                }
            }
        }
    }
    return SF_OK;

out_destroy:
    prom_destroy(self);
    return SF_ENOMEM;
}

static sf_status prom_start(sf_component *self)
{
    prom_receiver *r = sf_component_ctx(self);

    if (!sf_component_receives(self, SF_SIGNAL_METRICS))
        sf_warn("receiver %s: no metrics pipeline lists it; nothing is scraped",
                sf_component_id(self));
    else
        for (size_t i = 0; i < r->n_targets; i++) {
            target *t = &r->targets[i];
            int e = pthread_create(&t->thread, NULL, scraper_main, t);

            if (e != 0) {
                sf_error("receiver %s: cannot start the scraper of %s: %s",
                         sf_component_id(self), t->url, strerror(e));
                return SF_ENOMEM;
            }
            t->started = true;
        }
    sf_info("receiver %s: scraping %zu target(s)", sf_component_id(self), r->n_targets);
    return SF_OK;
}

static void prom_shutdown(sf_component *self)
{
    prom_receiver *r = sf_component_ctx(self);

    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    atomic_store(&r->stop, true);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < r->n_targets; i++) {
        if (r->targets[i].started)
            pthread_join(r->targets[i].thread, NULL);
        r->targets[i].started = false;
    }
}

static void prom_destroy(sf_component *self)
{
    prom_receiver *r = sf_component_ctx(self);

    if (r == NULL)
        return;
    prom_shutdown(self);
    for (size_t i = 0; i < r->n_targets; i++)
        target_release(&r->targets[i]);
    sf_free(r->targets);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    sf_free(r);
    sf_component_set_ctx(self, NULL);
}

/* ---- metrics ------------------------------------------------------------------------- */

static const char prom_metrics_help[] =
    "# HELP spanfence_receiver_prometheus_failed_scrapes Scrapes refused (up 0), by target "
    "and reason.\n"
    "# TYPE spanfence_receiver_prometheus_failed_scrapes counter\n"
    "# HELP spanfence_receiver_prometheus_up Whether the last scrape of the target "
    "succeeded.\n"
    "# TYPE spanfence_receiver_prometheus_up gauge\n";

static size_t prom_metrics(sf_component *self, char *buf, size_t size)
{
    prom_receiver *r = sf_component_ctx(self);
    size_t len = 0;

    for (size_t i = 0; i < r->n_targets; i++) {
        target *t = &r->targets[i];

        sf_metrics_put(buf, size, &len, "spanfence_receiver_prometheus_up{receiver=\"%s\","
                       "job=\"%s\",instance=\"%s\"} %d\n", sf_component_id(self),
                       t->sc->job_name, t->instance,
                       atomic_load_explicit(&t->up, memory_order_relaxed));
        for (int e = 1; e < SF_PROM_ERR_COUNT; e++) {
            uint64_t v = atomic_load_explicit(&t->failed[e], memory_order_relaxed);

            if (v == 0)
                continue;
            sf_metrics_put(buf, size, &len, "spanfence_receiver_prometheus_failed_scrapes{"
                           "receiver=\"%s\",job=\"%s\",instance=\"%s\",reason=\"%s\"} %llu\n",
                           sf_component_id(self), t->sc->job_name, t->instance,
                           sf_prom_err_label((sf_prom_err)e), (unsigned long long)v);
        }
    }
    return len;
}

static const sf_metric_row prom_metric_rows[] = {
    [PM_SCRAPES] = { .name = "spanfence_receiver_prometheus_scrapes",
      .help = "Scrapes attempted." },
    [PM_DUPLICATES] = { .name = "spanfence_receiver_prometheus_duplicate_series",
      .help = "Samples dropped as a repeat of a series earlier in the same scrape." },
    [PM_DROPPED_POINTS] = { .name = "spanfence_receiver_prometheus_dropped_points",
      .help = "Points not converted: gauge histograms, histograms and summaries without a "
              "count, histograms with decreasing buckets." },
    [PM_EXEMPLARS] = { .name = "spanfence_receiver_prometheus_ignored_exemplars",
      .help = "OpenMetrics exemplars read and ignored." },
    { 0 }
};

const sf_component_type sf_prometheus_receiver_type = {
    .name = "prometheus",
    .kind = SF_KIND_RECEIVER,
    .description = "scrapes Prometheus text and OpenMetrics targets into metrics pipelines",
    .signals = SF_SIGNALS_METRICS,
    .config_size = sizeof(sf_prometheus_receiver_config),
    .config_map = sf_prometheus_receiver_config_map,
    .check = sf_prometheus_receiver_check,
    .create = prom_create,
    .start = prom_start,
    .shutdown = prom_shutdown,
    .destroy = prom_destroy,
    .metric_rows = prom_metric_rows,
    .metrics = prom_metrics,
    .metrics_help = prom_metrics_help,
};
