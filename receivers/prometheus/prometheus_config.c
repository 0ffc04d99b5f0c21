/* receivers/prometheus/prometheus_config.c: the `prometheus` receiver's
 * config map, in upstream's layout: `config` is a Prometheus configuration
 * (global, scrape_configs, static_configs), whose keys keep Prometheus'
 * names and meanings. What spanfence does not do (service discovery,
 * relabeling, authentication, remote write) is refused with what to do
 * instead, never ignored; the limits Prometheus leaves unbounded by
 * default have bounded defaults here. */
#include "prometheus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_SD "spanfence scrapes static_configs only: list the targets (host:port) there"
#define NO_RELABEL "relabeling is not supported: keep or drop series with the filter and " \
                   "transform processors of the metrics pipeline"
#define NO_AUTH "authentication is not supported: the scraped engines listen on loopback " \
                "inside the VM"

static const sf_config_row tls_rows[] = {
    { .key = "ca_file", .type = SF_CFG_STR, .offset = offsetof(sf_prom_tls_config, ca_file),
      .help = "CA certificates (PEM) to verify the target with" },
    { .key = "cert_file", .type = SF_CFG_STR,
      .offset = offsetof(sf_prom_tls_config, cert_file),
      .help = "client certificate (PEM), with key_file" },
    { .key = "key_file", .type = SF_CFG_STR, .offset = offsetof(sf_prom_tls_config, key_file),
      .help = "client key (PEM), with cert_file" },
    { .key = "server_name", .type = SF_CFG_STR,
      .offset = offsetof(sf_prom_tls_config, server_name),
      .help = "the name the target's certificate must have (SNI too)" },
    { .key = "insecure_skip_verify", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_prom_tls_config, insecure_skip_verify),
      .help = "do not verify the target's certificate" },
    { .key = "min_version", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "max_version", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "ca", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "inline certificates are not supported: use ca_file" },
    { .key = "cert", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "inline certificates are not supported: use cert_file" },
    { .key = "key", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "inline keys are not supported: use key_file" },
    { 0 }
};

static const sf_config_row static_rows[] = {
    { .key = "targets", .type = SF_CFG_STRLIST,
      .offset = offsetof(sf_prom_static_config, targets),
      .help = "host:port of each target (instance)" },
    { .key = "labels", .type = SF_CFG_STRMAP, .offset = offsetof(sf_prom_static_config, labels),
      .help = "labels added to every series of these targets" },
    { 0 }
};

/* params: {name: [value, ...]} */
static sf_status parse_params(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_prom_params *p = field;
    size_t total = 0, k = 0;
    sf_status st = SF_OK;

    memset(p, 0, sizeof(*p));
    if (node->kind == SF_NODE_SCALAR && node->is_null)
        return SF_OK;
    if (node->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, node, NULL, "expected a mapping of parameter names to lists of "
                     "values");
        return SF_CONFIG;
    }
    for (size_t i = 0; i < node->n; i++)
        total += node->items[i]->kind == SF_NODE_SEQ ? node->items[i]->n : 1;
    p->names = sf_cfg_alloc(ctx, (total ? total : 1) * sizeof(*p->names));
    p->values = sf_cfg_alloc(ctx, (total ? total : 1) * sizeof(*p->values));
    if (p->names == NULL || p->values == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *v = node->items[i];

        if (v->kind != SF_NODE_SEQ) {
            sf_cfg_error(ctx, v, node->keys[i]->text, "expected a list of values");
            st = SF_CONFIG;
            continue;
        }
        for (size_t j = 0; j < v->n; j++) {
            if (v->items[j]->kind != SF_NODE_SCALAR) {
                sf_cfg_error(ctx, v->items[j], node->keys[i]->text, "expected a string");
                st = SF_CONFIG;
                continue;
            }
            p->names[k] = node->keys[i]->text;
            p->values[k] = v->items[j]->text;
            k++;
        }
    }
    p->n = k;
    return st;
}

static const sf_config_row scrape_rows[] = {
    { .key = "job_name", .type = SF_CFG_STR, .offset = offsetof(sf_prom_scrape_config, job_name),
      .help = "the job: service.name of what is scraped (required, unique)" },
    { .key = "scrape_interval", .type = SF_CFG_DURATION,
      .offset = offsetof(sf_prom_scrape_config, scrape_interval),
      .help = "how often to scrape (default: global.scrape_interval)",
      .min = 0, .max = 24 * 3600000LL },
    { .key = "scrape_timeout", .type = SF_CFG_DURATION,
      .offset = offsetof(sf_prom_scrape_config, scrape_timeout),
      .help = "a scrape not done by then is refused, up 0 (default: global.scrape_timeout, "
              "at most the interval)", .min = 0, .max = 24 * 3600000LL },
    { .key = "metrics_path", .type = SF_CFG_STR, .def = "/metrics",
      .offset = offsetof(sf_prom_scrape_config, metrics_path),
      .help = "HTTP path of the exposition" },
    { .key = "scheme", .type = SF_CFG_ENUM, .def = "http", .choices = "http|https",
      .offset = offsetof(sf_prom_scrape_config, scheme), .help = "http or https" },
    { .key = "honor_labels", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_prom_scrape_config, honor_labels),
      .help = "exposed labels win over target labels (false: they become exported_NAME)" },
    { .key = "honor_timestamps", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_prom_scrape_config, honor_timestamps),
      .help = "use the timestamps the target exposes" },
    { .key = "enable_compression", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_prom_scrape_config, enable_compression),
      .help = "ask for gzip (bounds apply to the decompressed body)" },
    { .key = "follow_redirects", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_prom_scrape_config, follow_redirects),
      .help = "follow HTTP redirects (at most 5)" },
    { .key = "params", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_prom_scrape_config, params),
      .parse = parse_params, .help = "URL query parameters: {name: [value, ...]}" },
    { .key = "tls_config", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_prom_scrape_config, tls_config), .sub = tls_rows,
      .help = "TLS towards https targets" },
    { .key = "static_configs", .type = SF_CFG_LIST,
      .offset = offsetof(sf_prom_scrape_config, static_configs), .sub = static_rows,
      .elem_size = sizeof(sf_prom_static_config), .help = "the targets and their labels" },
    { .key = "scrape_protocols", .type = SF_CFG_STRLIST,
      .offset = offsetof(sf_prom_scrape_config, scrape_protocols),
      .help = "formats to ask for, preferred first: OpenMetricsText1.0.0, "
              "OpenMetricsText0.0.1, PrometheusText0.0.4 (the default, in this order)" },
    { .key = "body_size_limit", .type = SF_CFG_SIZE, .def = SF_PROM_DEFAULT_BODY_SIZE_LIMIT,
      .offset = offsetof(sf_prom_scrape_config, body_size_limit),
      .help = "largest exposition, decompressed; a larger one is refused (up 0)",
      .min = 1024, .max = (int64_t)1 << 30 },
    { .key = "sample_limit", .type = SF_CFG_INT, .def = "100000",
      .offset = offsetof(sf_prom_scrape_config, sample_limit),
      .help = "most samples in one scrape; more: the scrape is refused (up 0)",
      .min = 1, .max = 10000000 },
    { .key = "label_limit", .type = SF_CFG_INT, .def = "64",
      .offset = offsetof(sf_prom_scrape_config, label_limit),
      .help = "most labels on one sample; more: the scrape is refused", .min = 1, .max = 4096 },
    { .key = "label_name_length_limit", .type = SF_CFG_INT, .def = "256",
      .offset = offsetof(sf_prom_scrape_config, label_name_length_limit),
      .help = "longest label name (bytes); longer: the scrape is refused",
      .min = 1, .max = 65536 },
    { .key = "label_value_length_limit", .type = SF_CFG_INT, .def = "4096",
      .offset = offsetof(sf_prom_scrape_config, label_value_length_limit),
      .help = "longest label value (bytes, unescaped); longer: the scrape is refused",
      .min = 1, .max = 1048576 },
    { .key = "target_limit", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "keep_dropped_targets", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "track_timestamps_staleness", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "scrape_classic_histograms", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "relabel_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_RELABEL },
    { .key = "metric_relabel_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_RELABEL },
    { .key = "basic_auth", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_AUTH },
    { .key = "authorization", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_AUTH },
    { .key = "oauth2", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_AUTH },
    { .key = "bearer_token", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_AUTH },
    { .key = "bearer_token_file", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_AUTH },
    { .key = "proxy_url", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "proxies are not supported: targets are scraped directly" },
    { .key = "file_sd_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_SD },
    { .key = "http_sd_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_SD },
    { .key = "dns_sd_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = NO_SD },
    { .key = "kubernetes_sd_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_SD },
    { .key = "consul_sd_configs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_SD },
    { 0 }
};

static const sf_config_row global_rows[] = {
    { .key = "scrape_interval", .type = SF_CFG_DURATION, .def = "1m",
      .offset = offsetof(sf_prom_global_config, scrape_interval),
      .help = "default scrape interval", .min = 1000, .max = 24 * 3600000LL },
    { .key = "scrape_timeout", .type = SF_CFG_DURATION, .def = "10s",
      .offset = offsetof(sf_prom_global_config, scrape_timeout),
      .help = "default scrape timeout", .min = 100, .max = 24 * 3600000LL },
    { .key = "evaluation_interval", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "external_labels", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "external_labels are not supported: add attributes with the resource processor" },
    { 0 }
};

static const sf_config_row prom_rows[] = {
    { .key = "global", .type = SF_CFG_SECTION, .offset = offsetof(sf_prom_config_section, global),
      .sub = global_rows, .help = "defaults of every scrape config" },
    { .key = "scrape_configs", .type = SF_CFG_LIST,
      .offset = offsetof(sf_prom_config_section, scrape_configs), .sub = scrape_rows,
      .elem_size = sizeof(sf_prom_scrape_config), .help = "the jobs to scrape" },
    { .key = "scrape_config_files", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "write the scrape configs inline" },
    { .key = "rule_files", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "recording and alerting rules are not supported" },
    { .key = "alerting", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "alerting is not supported" },
    { .key = "remote_write", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "export with an otlphttp or otlp exporter in the metrics pipeline" },
    { .key = "remote_read", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "remote_read is not supported" },
    { .key = "storage", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "spanfence keeps no metrics storage" },
    { 0 }
};

const sf_config_row sf_prometheus_receiver_config_map[] = {
    { .key = "config", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_prometheus_receiver_config, config), .sub = prom_rows,
      .help = "a Prometheus configuration: global and scrape_configs (static_configs)" },
    { .key = "line_length_limit", .type = SF_CFG_SIZE, .def = "64KiB",
      .offset = offsetof(sf_prometheus_receiver_config, line_length_limit),
      .help = "longest exposition line; longer: the scrape is refused (spanfence's own key)",
      .min = 256, .max = 16 << 20 },
    { .key = "trim_metric_suffixes", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "metric names are kept as exposed (the fence's policy names them so)" },
    { .key = "use_start_time_metric", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "start times come from _created series, else from when a series was first seen" },
    { .key = "start_time_metric_regex", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "start times come from _created series, else from when a series was first seen" },
    { .key = "target_allocator", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = NO_SD },
    { .key = "api_server", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "the Prometheus API server is not supported" },
    { .key = "report_extra_scrape_metrics", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

bool sf_prom_split_target(const char *target, char *host, size_t host_size, char *port,
                          size_t port_size)
{
    const char *colon, *h = target;
    size_t hl;
    char *end;
    long p;

    if (target == NULL || *target == '\0' || strpbrk(target, "/?#@ \t") != NULL)
        return false;
    if (target[0] == '[') {
        const char *rb = strchr(target, ']');

        if (rb == NULL || rb[1] != ':')
            return false;
        h = target + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(target, ':');
        if (colon == NULL || memchr(target, ':', (size_t)(colon - target)) != NULL)
            return false;
        hl = (size_t)(colon - target);
    }
    if (hl == 0 || hl >= host_size)
        return false;
    p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p <= 0 || p > 65535 || strlen(colon + 1) >= port_size)
        return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, port_size, "%ld", p);
    return true;
}

static const struct {
    const char *name;
    const char *media;
} protocols[] = {
    { "OpenMetricsText1.0.0", "application/openmetrics-text;version=1.0.0" },
    { "OpenMetricsText0.0.1", "application/openmetrics-text;version=0.0.1" },
    { "PrometheusText0.0.4", "text/plain;version=0.0.4" },
};

static int protocol_index(const char *name)
{
    for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
        if (strcmp(protocols[i].name, name) == 0)
            return (int)i;
    return -1;
}

void sf_prom_accept_header(const sf_strlist *list, char *buf, size_t size)
{
    /* Prometheus: each protocol with a decreasing q from 0.5 (its five
     * known protocols plus one), then any type */
    int weight = 5;
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < (list && list->n ? list->n : 3); i++) {
        int k = list && list->n ? protocol_index(list->v[i]) : (int)i;
        int w;

        if (k < 0)
            continue;
        w = snprintf(buf + len, size - len, "%s;q=0.%d,", protocols[k].media, weight--);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
    }
    snprintf(buf + len, size - len, "*/*;q=0.%d", weight > 0 ? weight : 1);
}

sf_status sf_prometheus_receiver_check(sf_cfg_ctx *ctx, void *config)
{
    sf_prometheus_receiver_config *c = config;
    const sf_node *value = sf_cfg_value(ctx);
    const sf_node *cfg = value ? sf_node_get(value, "config") : NULL;
    const sf_node *list = cfg && cfg->kind == SF_NODE_MAP ? sf_node_get(cfg, "scrape_configs")
                                                           : NULL;
    const sf_prom_global_config *g = &c->config.global;
    sf_prom_scrape_config *sc = c->config.scrape_configs.v;
    sf_status st = SF_OK;
    size_t targets = 0;
    char path[96];

    if (c->config.scrape_configs.n == 0) {
        sf_cfg_error(ctx, cfg ? cfg : sf_cfg_node(ctx), "config.scrape_configs",
                     "at least one scrape config is required");
        return SF_CONFIG;
    }
    for (size_t i = 0; i < c->config.scrape_configs.n; i++) {
        const sf_node *item = list && list->kind == SF_NODE_SEQ && i < list->n ? list->items[i]
                                                                                : NULL;
        const sf_node *at = item ? item : sf_cfg_node(ctx);
        sf_prom_scrape_config *s = &sc[i];
        int64_t timeout_set = s->scrape_timeout;

        snprintf(path, sizeof(path), "config.scrape_configs[%zu]", i);
        if (s->job_name == NULL || s->job_name[0] == '\0') {
            sf_cfg_error(ctx, at, path, "missing required key 'job_name'");
            st = SF_CONFIG;
        }
        for (size_t k = 0; k < i && s->job_name; k++) {
            if (sc[k].job_name && strcmp(sc[k].job_name, s->job_name) == 0) {
                sf_cfg_error(ctx, at, path, "job_name '%s' is already used by "
                             "scrape_configs[%zu]", s->job_name, k);
                st = SF_CONFIG;
                break;
            }
        }
        if (s->scrape_interval == 0)
            s->scrape_interval = g->scrape_interval;
        if (s->scrape_timeout == 0)
            s->scrape_timeout = g->scrape_timeout;
        if (s->scrape_interval < 1000) {
            sf_cfg_error(ctx, at, path, "scrape_interval must be at least 1s");
            st = SF_CONFIG;
        }
        /* Prometheus: a default timeout longer than the interval is cut to
         * the interval; one set explicitly is an error */
        if (s->scrape_timeout > s->scrape_interval) {
            if (timeout_set > 0) {
                sf_cfg_error(ctx, at, path, "scrape_timeout (%lld ms) is longer than "
                             "scrape_interval (%lld ms)", (long long)s->scrape_timeout,
                             (long long)s->scrape_interval);
                st = SF_CONFIG;
            } else {
                s->scrape_timeout = s->scrape_interval;
            }
        }
        if (s->metrics_path == NULL || s->metrics_path[0] != '/') {
            sf_cfg_error(ctx, at, path, "metrics_path must start with '/'");
            st = SF_CONFIG;
        }
        if (s->scheme == 0 && s->tls_config.present)
            sf_cfg_warn(ctx, at, path, "tls_config has no effect with scheme http");
        if ((s->tls_config.cert_file == NULL) != (s->tls_config.key_file == NULL)) {
            sf_cfg_error(ctx, at, path, "tls_config: cert_file and key_file go together");
            st = SF_CONFIG;
        }
        if (s->tls_config.server_name != NULL && !sf_is_host_name(s->tls_config.server_name)) {
            sf_cfg_error(ctx, at, path, "tls_config.server_name '%s' is not a host name",
                         s->tls_config.server_name);
            st = SF_CONFIG;
        }
        for (size_t k = 0; k < s->scrape_protocols.n; k++) {
            if (protocol_index(s->scrape_protocols.v[k]) < 0) {
                sf_cfg_error(ctx, at, path, "scrape_protocols: '%s' is not supported (use "
                             "OpenMetricsText1.0.0, OpenMetricsText0.0.1, "
                             "PrometheusText0.0.4)", s->scrape_protocols.v[k]);
                st = SF_CONFIG;
            }
        }
        for (size_t k = 0; k < s->static_configs.n; k++) {
            const sf_prom_static_config *sg = (const sf_prom_static_config *)s->static_configs.v + k;

            for (size_t t = 0; t < sg->targets.n; t++) {
                char host[256], port[8];

                targets++;
                if (!sf_prom_split_target(sg->targets.v[t], host, sizeof(host), port,
                                          sizeof(port))) {
                    sf_cfg_error(ctx, at, path, "static_configs[%zu].targets[%zu]: '%s' is "
                                 "not host:port", k, t, sg->targets.v[t]);
                    st = SF_CONFIG;
                }
            }
            for (size_t l = 0; l < sg->labels.n; l++) {
                const char *n = sg->labels.keys[l];
                bool ok = n[0] != '\0' && !(n[0] >= '0' && n[0] <= '9');

                for (const char *p = n; ok && *p; p++)
                    ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                         (*p >= '0' && *p <= '9') || *p == '_';
                if (!ok || strcmp(n, "job") == 0 || strcmp(n, "instance") == 0) {
                    sf_cfg_error(ctx, at, path, "static_configs[%zu].labels: '%s' is not a "
                                 "label name to set here%s", k, n,
                                 ok ? " (job and instance come from job_name and targets)" : "");
                    st = SF_CONFIG;
                }
            }
        }
    }
    if (targets == 0 && st == SF_OK) {
        sf_cfg_error(ctx, cfg ? cfg : sf_cfg_node(ctx), "config.scrape_configs",
                     "no targets: list them under static_configs[].targets");
        st = SF_CONFIG;
    }
    if (targets > SF_PROM_MAX_TARGETS) {
        sf_cfg_error(ctx, cfg ? cfg : sf_cfg_node(ctx), "config.scrape_configs",
                     "%zu targets: at most %d per receiver (one scraper thread each)", targets,
                     SF_PROM_MAX_TARGETS);
        st = SF_CONFIG;
    }
    return st;
}
