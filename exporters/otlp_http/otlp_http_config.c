/* exporters/otlp_http/otlp_http_config.c: the `otlphttp` exporter's config
 * map, in the upstream collector's layout, and its cross-field checks (a
 * usable http(s) URL, headers that cannot inject or override framing).
 * Header values may be secrets: no message here ever prints one. */
#include "otlp_http.h"

#include <stddef.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <strings.h>

static const sf_config_row tls_rows[] = {
    { .key = "ca_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_tls, ca_file),
      .help = "PEM file of the CAs that sign the gateway's certificate (default: system roots)" },
    { .key = "cert_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_tls, cert_file),
      .help = "PEM client certificate for mutual TLS (with key_file)" },
    { .key = "key_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_tls, key_file),
      .help = "PEM private key of cert_file" },
    { .key = "min_version", .type = SF_CFG_ENUM, .def = "1.2",
      .offset = offsetof(sf_otlphttp_tls, min_version), .choices = "1.2|1.3|1.0|1.1",
      .help = "lowest TLS version accepted (upstream's default 1.2)" },
    { .key = "max_version", .type = SF_CFG_ENUM, .def = "",
      .offset = offsetof(sf_otlphttp_tls, max_version), .choices = "|1.2|1.3|1.0|1.1",
      .help = "highest TLS version offered (default: the library's)" },
    { .key = "insecure", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_otlphttp_tls, insecure),
      .help = "upstream's; the URL's scheme decides TLS here (https://)" },
    { .key = "insecure_skip_verify", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "skipping certificate verification is not supported: give the gateway's CA "
              "in 'ca_file'" },
    { .key = "server_name_override", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_tls, server_name_override),
      .help = "name sent as SNI and checked in the gateway's certificate, instead of the "
              "endpoint's host (the Host header and the address stay the endpoint's)" },
    { .key = "ca_pem", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "ca_pem is not supported by spanfence: use 'ca_file'" },
    { .key = "cert_pem", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "cert_pem is not supported by spanfence: use 'cert_file'" },
    { .key = "key_pem", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "key_pem is not supported by spanfence: use 'key_file'" },
    { .key = "include_system_ca_certs_pool", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "reload_interval", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "cipher_suites", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

const sf_config_row sf_otlphttp_config_map[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_config, endpoint),
      .help = "base URL of the gateway; /v1/traces, /v1/logs or /v1/metrics is appended" },
    { .key = "traces_endpoint", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_config, traces_endpoint),
      .help = "full URL for traces (overrides endpoint)" },
    { .key = "logs_endpoint", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_config, logs_endpoint),
      .help = "full URL for logs (overrides endpoint)" },
    { .key = "metrics_endpoint", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_config, metrics_endpoint),
      .help = "full URL for metrics (overrides endpoint)" },
    { .key = "headers", .type = SF_CFG_STRMAP, .offset = offsetof(sf_otlphttp_config, headers),
      .help = "HTTP headers sent with every request; values are never logged" },
    { .key = "compression", .type = SF_CFG_ENUM, .def = "gzip",
      .offset = offsetof(sf_otlphttp_config, compression), .choices = SF_COMPRESSION_CHOICES,
      .upstream = "zlib|deflate|snappy|lz4",
      .help = "request body compression (Content-Encoding)" },
    { .key = "compression_params", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlphttp_config, compression_params),
      .sub = sf_compression_params_rows, .help = "compression settings" },
    { .key = "encoding", .type = SF_CFG_ENUM, .def = "proto",
      .offset = offsetof(sf_otlphttp_config, encoding), .choices = "proto",
      .upstream = "json", .help = "request body encoding" },
    { .key = "timeout", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_otlphttp_config, timeout),
      .help = "time limit of one request", .min = 1, .max = 3600000 },
    { .key = "sending_queue", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlphttp_config, sending_queue), .sub = sf_sending_queue_rows,
      .help = "bounded in-memory queue" },
    { .key = "retry_on_failure", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlphttp_config, retry_on_failure), .sub = sf_retry_rows,
      .help = "capped retries with exponential backoff" },
    { .key = "tls", .type = SF_CFG_SECTION, .offset = offsetof(sf_otlphttp_config, tls),
      .sub = tls_rows, .help = "TLS to an https:// endpoint (upstream's configtls keys)" },
    { 0 }
};

/* Headers the exporter writes itself: a configured one would contradict
 * the body it describes. */
static const char *const reserved_headers[] = {
    "content-type", "content-encoding", "content-length", "transfer-encoding", NULL
};

static bool has_http_scheme(const char *url)
{
    return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

/* RFC 9110 token characters. */
static bool is_token(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c) != NULL))
            return false;
    }
    return true;
}

static sf_status check_url(sf_cfg_ctx *ctx, const char *key, const char *url)
{
    if (url == NULL || url[0] == '\0')
        return SF_OK;
    if (has_http_scheme(url) && url[url[4] == ':' ? 7 : 8] != '\0')
        return SF_OK;
    sf_cfg_error(ctx, sf_node_get(sf_cfg_value(ctx), key), key,
                 "'%s' is not an http:// or https:// URL", url);
    return SF_CONFIG;
}

/* The tls section: files readable now (a typo fails validate, not the
 * first send), a certificate with its key, versions in order. */
static sf_status check_tls(sf_cfg_ctx *ctx, const sf_otlphttp_config *c)
{
    const sf_node *tls = sf_node_get(sf_cfg_value(ctx), "tls");
    const char *const keys[] = { "ca_file", "cert_file", "key_file" };
    const char *const files[] = { c->tls.ca_file, c->tls.cert_file, c->tls.key_file };
    /* TLS versions in order, by choice index (1.2|1.3|1.0|1.1) */
    static const int order[] = { 2, 3, 0, 1 };
    sf_status st = SF_OK;

    if (!c->tls.present)
        return SF_OK;
    for (int i = 0; i < 3; i++) {
        const sf_node *at = sf_node_get(tls, keys[i]);

        if (files[i] != NULL && access(files[i], R_OK) != 0) {
            sf_cfg_error(ctx, at ? at : tls, "tls", "cannot read %s '%s': %s", keys[i], files[i],
                         strerror(errno));
            st = SF_CONFIG;
        }
    }
    if ((c->tls.cert_file == NULL) != (c->tls.key_file == NULL)) {
        sf_cfg_error(ctx, tls, "tls", "'cert_file' and 'key_file' go together (mutual TLS)");
        st = SF_CONFIG;
    }
    if (c->tls.max_version > 0 && order[c->tls.max_version - 1] < order[c->tls.min_version]) {
        sf_cfg_error(ctx, sf_node_get(tls, "max_version"), "tls",
                     "'max_version' is lower than 'min_version'");
        st = SF_CONFIG;
    }
    if (sf_cfg_check_server_name(ctx, tls, c->tls.server_name_override, c->tls.insecure) !=
        SF_OK) {
        st = SF_CONFIG;
    } else if (c->tls.server_name_override != NULL) {
        const char *url = c->traces_endpoint != NULL ? c->traces_endpoint : c->endpoint;

        if (url != NULL && strncasecmp(url, "http://", 7) == 0) {
            sf_cfg_error(ctx, sf_node_get(tls, "server_name_override"), "tls.server_name_override",
                         "needs TLS, but '%s' is http:// (use https://)",
                         c->traces_endpoint != NULL ? "traces_endpoint" : "endpoint");
            st = SF_CONFIG;
        }
    }
    /* Upstream's insecure has no use here (the scheme decides), except to
     * refuse a server name without TLS above: warned as an ignored key. */
    for (size_t k = 0; tls != NULL && tls->kind == SF_NODE_MAP && k < tls->n; k++)
        if (strcmp(tls->keys[k]->text, "insecure") == 0 &&
            !(c->tls.insecure && c->tls.server_name_override != NULL))
            sf_cfg_warn(ctx, tls->keys[k], "tls.insecure", "'insecure' has no effect in spanfence");
    if (c->endpoint != NULL && c->traces_endpoint == NULL && strncasecmp(c->endpoint, "http://", 7) == 0 &&
        (c->tls.ca_file != NULL || c->tls.cert_file != NULL))
        sf_cfg_warn(ctx, tls, "tls", "'tls' has no effect on an http:// endpoint: use https://");
    return st;
}

sf_status sf_otlphttp_check(sf_cfg_ctx *ctx, void *config)
{
    sf_otlphttp_config *c = config;
    const sf_node *headers = sf_node_get(sf_cfg_value(ctx), "headers");
    sf_status st = SF_OK;

    if ((c->endpoint == NULL || c->endpoint[0] == '\0') &&
        (c->traces_endpoint == NULL || c->traces_endpoint[0] == '\0') &&
        (c->logs_endpoint == NULL || c->logs_endpoint[0] == '\0') &&
        (c->metrics_endpoint == NULL || c->metrics_endpoint[0] == '\0')) {
        sf_cfg_error(ctx, sf_cfg_node(ctx), NULL, "'endpoint' or 'traces_endpoint' is required");
        return SF_CONFIG;
    }
    if (sf_compression_check(ctx, c->compression, &c->compression_params) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "endpoint", c->endpoint) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "traces_endpoint", c->traces_endpoint) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "logs_endpoint", c->logs_endpoint) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "metrics_endpoint", c->metrics_endpoint) != SF_OK)
        st = SF_CONFIG;
    (void)sf_sending_queue_check(ctx, &c->sending_queue);
    if (check_tls(ctx, c) != SF_OK)
        st = SF_CONFIG;
    for (size_t i = 0; i < c->headers.n; i++) {
        const char *name = c->headers.keys[i];
        const char *value = c->headers.values[i] ? c->headers.values[i] : "";
        const sf_node *at = headers;

        /* Point at the header's own key, when the mapping has it. */
        for (size_t k = 0; headers != NULL && headers->kind == SF_NODE_MAP && k < headers->n; k++)
            if (strcmp(headers->keys[k]->text, name) == 0)
                at = headers->keys[k];
        if (!is_token(name)) {
            sf_cfg_error(ctx, at, "headers", "'%s' is not a valid header name", name);
            st = SF_CONFIG;
            continue;
        }
        for (const char *const *r = reserved_headers; *r; r++) {
            if (strcasecmp(name, *r) == 0) {
                sf_cfg_error(ctx, at, "headers", "'%s' is set by the exporter", name);
                st = SF_CONFIG;
            }
        }
        /* never quote the value: it may be a bearer token */
        if (strpbrk(value, "\r\n") != NULL) {
            sf_cfg_error(ctx, at, "headers", "value of '%s' contains a line break", name);
            st = SF_CONFIG;
        }
    }
    return st;
}

const char *sf_otlphttp_signal_endpoint(const sf_otlphttp_config *c, sf_signal signal)
{
    switch (signal) {
    case SF_SIGNAL_LOGS:    return c->logs_endpoint;
    case SF_SIGNAL_METRICS: return c->metrics_endpoint;
    default:                return c->traces_endpoint;
    }
}

bool sf_otlphttp_describe(const void *config, sf_export_desc *out)
{
    const sf_otlphttp_config *c = config;

    *out = (sf_export_desc){ .endpoint_key = "endpoint", .endpoint = c->endpoint,
                             .override_key = "traces_endpoint",
                             .overridden = c->traces_endpoint != NULL,
                             .sending_queue = &c->sending_queue,
                             .retry_on_failure = &c->retry_on_failure };
    return true;
}
