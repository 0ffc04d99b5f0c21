/* exporters/otlp_http/otlp_http_config.c: the `otlphttp` exporter's config
 * map, in the upstream collector's layout. */
#include "otlp_http.h"

#include <stddef.h>
#include <string.h>

const sf_config_row sf_otlphttp_config_map[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(sf_otlphttp_config, endpoint),
      .help = "base URL of the gateway; /v1/traces is appended" },
    { .key = "traces_endpoint", .type = SF_CFG_STR,
      .offset = offsetof(sf_otlphttp_config, traces_endpoint),
      .help = "full URL for traces (overrides endpoint)" },
    { .key = "headers", .type = SF_CFG_STRMAP, .offset = offsetof(sf_otlphttp_config, headers),
      .help = "HTTP headers sent with every request; values are never logged" },
    { .key = "compression", .type = SF_CFG_ENUM, .def = "gzip",
      .offset = offsetof(sf_otlphttp_config, compression), .choices = "gzip|none",
      .help = "request body compression" },
    { .key = "encoding", .type = SF_CFG_ENUM, .def = "proto",
      .offset = offsetof(sf_otlphttp_config, encoding), .choices = "proto",
      .help = "request body encoding" },
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

sf_status sf_otlphttp_check(sf_cfg_ctx *ctx, void *config)
{
    sf_otlphttp_config *c = config;

    if ((c->endpoint == NULL || c->endpoint[0] == '\0') &&
        (c->traces_endpoint == NULL || c->traces_endpoint[0] == '\0')) {
        sf_cfg_error(ctx, sf_cfg_node(ctx), NULL, "'endpoint' or 'traces_endpoint' is required");
        return SF_CONFIG;
    }
    return SF_OK;
}
