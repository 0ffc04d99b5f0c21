/* exporters/otlp_http/otlp_http_config.c: the `otlphttp` exporter's config
 * map, in the upstream collector's layout, and its cross-field checks (a
 * usable http(s) URL, headers that cannot inject or override framing).
 * Header values may be secrets: no message here ever prints one. */
#include "otlp_http.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

const sf_config_row sf_otlphttp_config_map[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_config, endpoint),
      .help = "base URL of the gateway; /v1/traces is appended" },
    { .key = "traces_endpoint", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_config, traces_endpoint),
      .help = "full URL for traces (overrides endpoint)" },
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
    { .key = "tls", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
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

sf_status sf_otlphttp_check(sf_cfg_ctx *ctx, void *config)
{
    sf_otlphttp_config *c = config;
    const sf_node *headers = sf_node_get(sf_cfg_value(ctx), "headers");
    sf_status st = SF_OK;

    if ((c->endpoint == NULL || c->endpoint[0] == '\0') &&
        (c->traces_endpoint == NULL || c->traces_endpoint[0] == '\0')) {
        sf_cfg_error(ctx, sf_cfg_node(ctx), NULL, "'endpoint' or 'traces_endpoint' is required");
        return SF_CONFIG;
    }
    if (sf_compression_check(ctx, c->compression, &c->compression_params) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "endpoint", c->endpoint) != SF_OK)
        st = SF_CONFIG;
    if (check_url(ctx, "traces_endpoint", c->traces_endpoint) != SF_OK)
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
