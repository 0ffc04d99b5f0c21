/* pipeline/cli/telemetry_push.c: service.telemetry.metrics.readers'
 * periodic reader, as ordinary components. The core decodes and checks the
 * reader (sf_config_push_reader) and runs no push of its own; this file
 * sits beside the registry's table because, like it, it names component
 * types. It writes a config layer the command merges last, as one more
 * --config:
 *   receivers  prometheus/spanfence_telemetry: scrapes the collector's own
 *              metrics endpoint every `interval`
 *   exporters  otlphttp/spanfence_telemetry (otlp/spanfence_telemetry for
 *              grpc): the reader's exporter settings
 *   pipelines  metrics/spanfence_telemetry: that receiver, the processors
 *              of the config's first metrics pipeline (the same fence as
 *              any metric), that exporter
 * so the push is validated, printed by print-config, held to the policy,
 * started, counted and reloaded as every pipeline is.
 *
 * DESIGN: every scalar is written double-quoted with YAML's escapes, and
 * `$` in values doubled: the layer is read by the same loader, which
 * expands ${env:...} in values, and what it holds is already expanded. */
#include "internal/sf_core.h"
#include "sf_cli.h"
#include "sf_config.h"
#include "sf_dynbuf.h"
#include "sf_net.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PUSH_NAME "spanfence_telemetry"
#define PUSH_LAYER_MAX (256u << 10)

/* The layer's text; `failed` once any append failed (no memory, over
 * PUSH_LAYER_MAX), so a short text is never used. */
typedef struct layer {
    sf_dynbuf b;
    bool failed;
} layer;

static void put(layer *l, const char *s)
{
    if (sf_dynbuf_addstr(&l->b, s) != SF_OK)
        l->failed = true;
}

static void putn(layer *l, const void *p, size_t n)
{
    if (sf_dynbuf_add(&l->b, p, n) != SF_OK)
        l->failed = true;
}

static void putf(layer *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(layer *l, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (sf_dynbuf_vprintf(&l->b, fmt, ap) != SF_OK)
        l->failed = true;
    va_end(ap);
}

static const char *const reserved[] = {
    "prometheus/" PUSH_NAME, "otlphttp/" PUSH_NAME, "otlp/" PUSH_NAME,
};

static void quoted(layer *b, const char *s, bool value);

/* An id as a plain scalar when it is one (print-config then shows it as
 * the user's ids are shown), else double-quoted. */
static void id_scalar(layer *b, const char *id)
{
    bool plain = id[0] != '\0' && strchr("-?:,[]{}#&*!|>'\"%@`", id[0]) == NULL;

    for (const char *p = id; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                (*p >= '0' && *p <= '9') || strchr("_/.-", *p) != NULL;
    if (plain)
        put(b, id);
    else
        quoted(b, id, false);
}

/* `s` as a double-quoted YAML scalar; `value`: `$` doubled too. */
static void quoted(layer *b, const char *s, bool value)
{
    put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            putf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            putf(b, "\\x%02x", *p);
        else if (*p == '$' && value)
            put(b, "$$");
        else
            putn(b, p, 1);
    }
    put(b, "\"");
}

/* The collector's metrics endpoint as a target to scrape: a wildcard
 * listen address is scraped on loopback. False when there is none. */
static bool scrape_target(const sf_config *cfg, char *buf, size_t size)
{
    char host[256];
    uint16_t port;

    if (cfg->metrics_address == NULL ||
        sf_net_split(cfg->metrics_address, host, sizeof(host), &port) != SF_OK || port == 0)
        return false;
    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0)
        snprintf(buf, size, "127.0.0.1:%u", (unsigned)port);
    else if (strcmp(host, "::") == 0)
        snprintf(buf, size, "[::1]:%u", (unsigned)port);
    else
        snprintf(buf, size, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
    return true;
}

static const sf_config_pipeline *first_metrics_pipeline(const sf_config *cfg)
{
    for (size_t i = 0; i < cfg->n_pipelines; i++)
        if (cfg->pipelines[i].signal == SF_SIGNAL_METRICS)
            return &cfg->pipelines[i];
    return NULL;
}

static void write_exporter(layer *b, const sf_config_push_reader *pr)
{
    int64_t retry = pr->timeout_ms > pr->export_timeout_ms ? pr->timeout_ms
                                                           : pr->export_timeout_ms;

    putf(b, "exporters:\n  %s/" PUSH_NAME ":\n", pr->grpc ? "otlp" : "otlphttp");
    put(b, pr->grpc ? "    endpoint: " : "    metrics_endpoint: ");
    quoted(b, pr->endpoint, true);
    putf(b, "\n    compression: %s\n    timeout: %lldms\n",
                     pr->gzip ? "gzip" : "none", (long long)pr->export_timeout_ms);
    /* one push, one request, one at a time and in order, as upstream's
     * periodic reader exports; a push not sent by the reader's timeout is
     * given up (the next one carries the same cumulative counts) */
    putf(b, "    sending_queue: {num_consumers: 1, batch: {enabled: false}}\n"
                     "    retry_on_failure: {max_elapsed_time: %lldms}\n", (long long)retry);
    if (pr->n_headers > 0) {
        put(b, "    headers:\n");
        for (size_t i = 0; i < pr->n_headers; i++) {
            put(b, "      ");
            quoted(b, pr->headers[i].name, false);
            put(b, ": ");
            quoted(b, pr->headers[i].value, true);
            put(b, "\n");
        }
    }
    if (pr->grpc && !pr->tls) {
        put(b, "    tls: {insecure: true}\n");
    } else if (pr->tls && (pr->certificate || pr->client_certificate)) {
        put(b, "    tls:\n");
        if (pr->certificate) {
            put(b, "      ca_file: ");
            quoted(b, pr->certificate, true);
            put(b, "\n");
        }
        if (pr->client_certificate && pr->client_key) {
            put(b, "      cert_file: ");
            quoted(b, pr->client_certificate, true);
            put(b, "\n      key_file: ");
            quoted(b, pr->client_key, true);
            put(b, "\n");
        }
    }
}

char *sf_cli_push_layer(const sf_config *cfg, char *err, size_t err_size)
{
    const sf_config_push_reader *pr;
    const sf_config_pipeline *fence;
    layer b = { .failed = false };
    char target[300];
    int64_t scrape_timeout;

    err[0] = '\0';
    if (cfg->n_push_readers == 0)
        return NULL;
    pr = &cfg->push_readers[0];
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        if (sf_config_find(cfg, reserved[i]) != NULL) {
            snprintf(err, err_size, "%s: the id '%s' is taken by the periodic reader's "
                     "components: rename yours", pr->path, reserved[i]);
            return NULL;
        }
    }
    for (size_t i = 0; i < cfg->n_pipelines; i++) {
        if (strcmp(cfg->pipelines[i].id, "metrics/" PUSH_NAME) == 0) {
            snprintf(err, err_size, "%s: the pipeline id 'metrics/" PUSH_NAME "' is taken by "
                     "the periodic reader's pipeline: rename yours", pr->path);
            return NULL;
        }
    }
    if (!scrape_target(cfg, target, sizeof(target))) {
        snprintf(err, err_size, "%s: a periodic reader pushes what the metrics endpoint "
                 "serves: give one (service.telemetry.metrics.address, or a pull reader) with "
                 "a port other than 0", pr->path);
        return NULL;
    }
    fence = first_metrics_pipeline(cfg);
    scrape_timeout = pr->timeout_ms < pr->interval_ms ? pr->timeout_ms : pr->interval_ms;
    if (scrape_timeout < 100)
        scrape_timeout = 100;
    sf_dynbuf_init(&b.b, PUSH_LAYER_MAX);
    putf(&b, "# %s: the periodic reader, as components (spanfence)\n"
                     "receivers:\n  prometheus/" PUSH_NAME ":\n    config:\n"
                     "      scrape_configs:\n        - job_name: ", pr->path);
    if (cfg->service_name != NULL && strchr(cfg->service_name, '$') == NULL)
        id_scalar(&b, cfg->service_name);
    else if (cfg->service_name != NULL)
        quoted(&b, cfg->service_name, true);
    else
        put(&b, "spanfence");
    putf(&b, "\n          scrape_interval: %lldms\n          scrape_timeout: %lldms\n"
                     "          static_configs: [{targets: [\"%s\"]}]\n",
                     (long long)pr->interval_ms, (long long)scrape_timeout, target);
    write_exporter(&b, pr);
    put(&b, "service:\n  pipelines:\n    metrics/" PUSH_NAME ":\n"
                     "      receivers: [prometheus/" PUSH_NAME "]\n      processors: [");
    for (size_t i = 0; fence != NULL && i < fence->n_processors; i++) {
        if (i > 0)
            put(&b, ", ");
        id_scalar(&b, fence->processors[i]->id);
    }
    putf(&b, "]\n      exporters: [%s/" PUSH_NAME "]\n",
                     pr->grpc ? "otlp" : "otlphttp");
    if (b.failed) {
        snprintf(err, err_size, "%s: the periodic reader's components do not fit in %u bytes "
                 "(or no memory)", pr->path, PUSH_LAYER_MAX);
        sf_dynbuf_release(&b.b);
        return NULL;
    }
    return sf_dynbuf_take(&b.b, NULL);
}

void sf_cli_push_describe(const sf_config *cfg, char *buf, size_t size)
{
    const sf_config_push_reader *pr;
    const sf_config_pipeline *fence;
    char target[300], url[1100];
    size_t used;

    buf[0] = '\0';
    if (cfg->n_push_readers == 0)
        return;
    pr = &cfg->push_readers[0];
    fence = NULL;
    /* the fence is the first metrics pipeline other than the push's own */
    for (size_t i = 0; i < cfg->n_pipelines; i++)
        if (cfg->pipelines[i].signal == SF_SIGNAL_METRICS &&
            strcmp(cfg->pipelines[i].id, "metrics/" PUSH_NAME) != 0) {
            fence = &cfg->pipelines[i];
            break;
        }
    if (!scrape_target(cfg, target, sizeof(target)))
        snprintf(target, sizeof(target), "?");
    used = (size_t)snprintf(buf, size, "%s: pushing the collector's own metrics (%s) every "
                            "%lld ms to %s (%s) as pipeline 'metrics/" PUSH_NAME "', ",
                            pr->path, target, (long long)pr->interval_ms,
                            sf_net_url_redacted(pr->endpoint, url, sizeof(url)),
                            pr->grpc ? "grpc" : "http/protobuf");
    if (used >= size)
        return;
    if (fence == NULL) {
        snprintf(buf + used, size - used, "with no processor: the config has no other metrics "
                 "pipeline to take its fence from");
        return;
    }
    used += (size_t)snprintf(buf + used, size - used, "through the processors of pipeline "
                             "'%s' (", fence->id);
    for (size_t i = 0; i < fence->n_processors && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 fence->processors[i]->id);
    if (used < size)
        snprintf(buf + used, size - used, "%s)", fence->n_processors ? "" : "none");
}
