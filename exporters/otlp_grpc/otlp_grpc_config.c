/* exporters/otlp_grpc/otlp_grpc_config.c: the `otlp` exporter's config map,
 * in the upstream collector's layout, and its cross-field checks (a gRPC
 * target rather than a URL, TLS files that can be read, metadata gRPC will
 * send). Header values may be secrets: no message here ever prints one. */
#include "otlp_grpc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const sf_config_row tls_rows[] = {
    { .key = "insecure", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_otlp_tls_config, insecure),
      .help = "plaintext gRPC (no TLS): only for a gateway on a trusted link" },
    { .key = "ca_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlp_tls_config, ca_file),
      .help = "PEM file of the CAs that sign the gateway's certificate (default: system roots)" },
    { .key = "cert_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlp_tls_config, cert_file),
      .help = "PEM client certificate for mutual TLS (with key_file)" },
    { .key = "key_file", .type = SF_CFG_STR, .offset = offsetof(sf_otlp_tls_config, key_file),
      .help = "PEM private key of cert_file" },
    { .key = "server_name_override", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlp_tls_config, server_name_override),
      .help = "name sent as SNI, checked in the gateway's certificate and sent as :authority, "
              "instead of the endpoint's host (the address stays the endpoint's)" },
    { .key = "insecure_skip_verify", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "skipping certificate verification is not supported: give the gateway's CA "
              "in 'ca_file'" },
    { 0 }
};

const sf_config_row sf_otlpgrpc_config_map[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(sf_otlpgrpc_config, endpoint),
      .help = "gateway address, host:port (or dns:///host:port)" },
    { .key = "tls", .type = SF_CFG_SECTION, .offset = offsetof(sf_otlpgrpc_config, tls),
      .sub = tls_rows, .help = "transport security (TLS unless insecure: true)" },
    { .key = "headers", .type = SF_CFG_STRMAP, .offset = offsetof(sf_otlpgrpc_config, headers),
      .help = "gRPC metadata sent with every call (lowercase keys); values are never logged" },
    { .key = "compression", .type = SF_CFG_ENUM, .def = "gzip",
      .offset = offsetof(sf_otlpgrpc_config, compression), .choices = SF_COMPRESSION_CHOICES,
      .upstream = "snappy",
      .help = "message compression (grpc-encoding): gzip or none (zstd is refused: gRPC core "
              "1.51 cannot send it)" },
    { .key = "compression_params", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlpgrpc_config, compression_params),
      .sub = sf_compression_params_rows, .help = "compression settings (spanfence's addition)" },
    { .key = "timeout", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_otlpgrpc_config, timeout),
      .help = "deadline of one Export call", .min = 1, .max = 3600000 },
    { .key = "sending_queue", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlpgrpc_config, sending_queue), .sub = sf_sending_queue_rows,
      .help = "bounded in-memory queue" },
    { .key = "retry_on_failure", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlpgrpc_config, retry_on_failure), .sub = sf_retry_rows,
      .help = "capped retries with exponential backoff" },
    { .key = "balancer_name", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "keepalive", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

/* Metadata the gRPC transport writes itself. */
static const char *const reserved_keys[] = { "content-type", "te", "user-agent", NULL };

/* host:port, host non-empty, port 1-65535; an IPv6 host is bracketed. */
static bool is_host_port(const char *s)
{
    const char *colon = strrchr(s, ':');
    char *end;
    long port;

    if (colon == NULL || colon == s || colon[1] == '\0')
        return false;
    if (s[0] == '[' && colon[-1] != ']')
        return false;
    if (s[0] != '[' && memchr(s, ':', (size_t)(colon - s)) != NULL)
        return false;       /* unbracketed IPv6, or "a:b:c" */
    if (strpbrk(s, "/ \t@?#") != NULL)
        return false;
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    return errno == 0 && *end == '\0' && isdigit((unsigned char)colon[1]) && port >= 1 &&
           port <= 65535;
}

static sf_status check_endpoint(sf_cfg_ctx *ctx, const char *endpoint)
{
    const sf_node *at = sf_node_get(sf_cfg_value(ctx), "endpoint");
    const char *hp = endpoint;

    if (endpoint == NULL || endpoint[0] == '\0') {
        sf_cfg_error(ctx, sf_cfg_node(ctx), NULL, "'endpoint' is required");
        return SF_CONFIG;
    }
    if (strncasecmp(endpoint, "http://", 7) == 0 || strncasecmp(endpoint, "https://", 8) == 0) {
        sf_cfg_error(ctx, at, "endpoint",
                     "'%s' is a URL: the otlp exporter takes host:port (use the otlphttp "
                     "exporter for OTLP/HTTP)", endpoint);
        return SF_CONFIG;
    }
    if (strncmp(hp, "dns:///", 7) == 0)
        hp += 7;
    if (!is_host_port(hp)) {
        sf_cfg_error(ctx, at, "endpoint", "'%s' is not host:port", endpoint);
        return SF_CONFIG;
    }
    return SF_OK;
}

static sf_status check_file(sf_cfg_ctx *ctx, const sf_node *tls, const char *key,
                            const char *path)
{
    char reason[128], subpath[32];
    FILE *f;

    if (path == NULL)
        return SF_OK;
    if (path[0] != '\0') {
        f = fopen(path, "r");
        if (f != NULL) {
            fclose(f);
            return SF_OK;
        }
        snprintf(reason, sizeof(reason), "%s", strerror(errno));
    } else {
        snprintf(reason, sizeof(reason), "empty path");
    }
    reason[0] = (char)tolower((unsigned char)reason[0]);
    snprintf(subpath, sizeof(subpath), "tls.%s", key);
    sf_cfg_error(ctx, sf_node_get(tls, key), subpath, "cannot read '%s': %s", path, reason);
    return SF_CONFIG;
}

static sf_status check_tls(sf_cfg_ctx *ctx, const sf_otlp_tls_config *t)
{
    const sf_node *tls = sf_node_get(sf_cfg_value(ctx), "tls");
    const sf_node *tls_at = tls;
    sf_status st = SF_OK;
    const sf_node *v = sf_cfg_value(ctx);

    /* Point at the `tls` key itself for section-wide problems. */
    for (size_t k = 0; v != NULL && v->kind == SF_NODE_MAP && k < v->n; k++)
        if (strcmp(v->keys[k]->text, "tls") == 0)
            tls_at = v->keys[k];
    if (sf_cfg_check_server_name(ctx, tls, t->server_name_override, t->insecure) != SF_OK)
        st = SF_CONFIG;
    if (t->insecure) {
        if (t->ca_file != NULL || t->cert_file != NULL || t->key_file != NULL)
            sf_cfg_warn(ctx, sf_node_get(tls, "insecure"), "tls.insecure",
                        "'insecure' is true: 'ca_file', 'cert_file' and 'key_file' are not used");
        return st;
    }
    if (check_file(ctx, tls, "ca_file", t->ca_file) != SF_OK)
        st = SF_CONFIG;
    if (check_file(ctx, tls, "cert_file", t->cert_file) != SF_OK)
        st = SF_CONFIG;
    if (check_file(ctx, tls, "key_file", t->key_file) != SF_OK)
        st = SF_CONFIG;
    if ((t->cert_file == NULL) != (t->key_file == NULL)) {
        sf_cfg_error(ctx, tls_at, "tls", "'cert_file' and 'key_file' must be given together");
        st = SF_CONFIG;
    }
    return st;
}

/* gRPC's rule for metadata keys (grpc_header_key_is_legal). */
static bool is_metadata_key(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr("-_.", *s) != NULL))
            return false;
    return true;
}

static bool has_upper(const char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            return true;
    return false;
}

/* gRPC's rule for text values (grpc_header_nonbin_value_is_legal). */
static bool is_metadata_value(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

static sf_status check_header(sf_cfg_ctx *ctx, const sf_node *at, const char *name,
                              const char *value)
{
    size_t len = strlen(name);

    if (has_upper(name)) {
        sf_cfg_error(ctx, at, "headers", "'%s' has uppercase letters: gRPC metadata keys "
                     "are lowercase", name);
        return SF_CONFIG;
    }
    if (!is_metadata_key(name)) {
        sf_cfg_error(ctx, at, "headers", "'%s' is not a valid metadata key (letters, digits, "
                     "'-', '_', '.')", name);
        return SF_CONFIG;
    }
    if (strncmp(name, "grpc-", 5) == 0) {
        sf_cfg_error(ctx, at, "headers", "'%s' is reserved for gRPC itself", name);
        return SF_CONFIG;
    }
    for (const char *const *r = reserved_keys; *r; r++) {
        if (strcmp(name, *r) == 0) {
            sf_cfg_error(ctx, at, "headers", "'%s' is set by the exporter", name);
            return SF_CONFIG;
        }
    }
    if (len >= 4 && strcmp(name + len - 4, "-bin") == 0) {
        sf_cfg_error(ctx, at, "headers", "'%s' is binary metadata, which is not supported",
                     name);
        return SF_CONFIG;
    }
    /* never quote the value: it may be a bearer token */
    if (!is_metadata_value(value)) {
        sf_cfg_error(ctx, at, "headers", "value of '%s' has a line break or other control "
                     "or non-ASCII character", name);
        return SF_CONFIG;
    }
    return SF_OK;
}

sf_status sf_otlpgrpc_check(sf_cfg_ctx *ctx, void *config)
{
    sf_otlpgrpc_config *c = config;
    const sf_node *headers = sf_node_get(sf_cfg_value(ctx), "headers");
    sf_status st = SF_OK;

    if (check_endpoint(ctx, c->endpoint) != SF_OK)
        st = SF_CONFIG;
    if (c->compression == SF_COMPRESSION_ZSTD) {
        /* Measured when the exporter was gRPC core: core rewrote a
         * "grpc-encoding: zstd" to "identity" (its compression enum has no
         * zstd). The exporter speaks HTTP/2 itself now and could send zstd,
         * but gRPC core gateways (1.51, Debian's) still cannot read it, and
         * the message and behaviour stay as they were (exporters/README.md). */
        sf_cfg_error(ctx, sf_node_get(sf_cfg_value(ctx), "compression"), "compression",
                     "zstd is not available on the otlp (gRPC) exporter: gRPC core 1.51 can "
                     "send only gzip or deflate; use gzip, or the otlphttp exporter for zstd");
        st = SF_CONFIG;
    } else if (sf_compression_check(ctx, c->compression, &c->compression_params) != SF_OK) {
        st = SF_CONFIG;
    }
    (void)sf_sending_queue_check(ctx, &c->sending_queue);
    if (check_tls(ctx, &c->tls) != SF_OK)
        st = SF_CONFIG;
    for (size_t i = 0; i < c->headers.n; i++) {
        const char *name = c->headers.keys[i];
        const sf_node *at = headers;

        /* Point at the header's own key, when the mapping has it. */
        for (size_t k = 0; headers != NULL && headers->kind == SF_NODE_MAP && k < headers->n; k++)
            if (strcmp(headers->keys[k]->text, name) == 0)
                at = headers->keys[k];
        if (check_header(ctx, at, name, c->headers.values[i] ? c->headers.values[i] : "") !=
            SF_OK)
            st = SF_CONFIG;
    }
    return st;
}

bool sf_otlpgrpc_describe(const void *config, sf_export_desc *out)
{
    const sf_otlpgrpc_config *c = config;

    *out = (sf_export_desc){ .endpoint_key = "endpoint", .endpoint = c->endpoint,
                             .sending_queue = &c->sending_queue,
                             .retry_on_failure = &c->retry_on_failure };
    return true;
}
