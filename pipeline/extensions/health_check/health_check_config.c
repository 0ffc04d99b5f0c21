/* pipeline/extensions/health_check/health_check_config.c: the
 * `health_check` extension's config map, upstream's keys: endpoint, path,
 * response_body, check_collector_pipeline (enabled, interval,
 * exporter_failure_threshold); the HTTP server keys spanfence does not use
 * are accepted with a warning. */
#include "health_check.h"
#include "sf_net.h"

#include <stdio.h>
#include <string.h>

static const sf_config_row body_rows[] = {
    { .key = "healthy", .type = SF_CFG_STR, .offset = offsetof(sf_hc_bodies, healthy),
      .help = "body of the 200 answer (default: upstream's JSON status)" },
    { .key = "unhealthy", .type = SF_CFG_STR, .offset = offsetof(sf_hc_bodies, unhealthy),
      .help = "body of the 503 answer (default: upstream's JSON status)" },
    { 0 }
};

static const sf_config_row pipeline_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_hc_pipeline_check, enabled),
      .help = "answer 503 while an exporter keeps failing" },
    { .key = "interval", .type = SF_CFG_DURATION, .def = "5m",
      .offset = offsetof(sf_hc_pipeline_check, interval),
      .help = "the window failed sends are counted in", .min = 1, .max = 86400000 },
    { .key = "exporter_failure_threshold", .type = SF_CFG_INT, .def = "5",
      .offset = offsetof(sf_hc_pipeline_check, exporter_failure_threshold),
      .help = "failed sends of one exporter within 'interval' that make the collector "
              "unhealthy", .min = 1, .max = SF_FAILURE_LOG },
    { 0 }
};

const sf_config_row sf_hc_config_map[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .def = "localhost:13133",
      .offset = offsetof(sf_hc_config, endpoint),
      .help = "host:port the health endpoint listens on" },
    { .key = "path", .type = SF_CFG_STR, .def = "/", .offset = offsetof(sf_hc_config, path),
      .help = "URL path answered (others get 404)" },
    { .key = "response_body", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_hc_config, response_body), .sub = body_rows,
      .help = "fixed answer bodies instead of the JSON status" },
    { .key = "check_collector_pipeline", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_hc_config, check_collector_pipeline), .sub = pipeline_rows,
      .help = "unhealthy while an exporter keeps failing (upstream's legacy keys)" },
    { .key = "tls", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "tls on the health endpoint is not supported by spanfence; "
              "serve it on loopback or a private network" },
    { .key = "auth", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "auth on the health endpoint is not supported by spanfence" },
    { .key = "cors", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "include_metadata", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "response_headers", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "max_request_body_size", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "read_timeout", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "read_header_timeout", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "write_timeout", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "idle_timeout", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

sf_status sf_hc_check(sf_cfg_ctx *ctx, void *config)
{
    sf_hc_config *c = config;
    const sf_node *value = sf_cfg_value(ctx);
    const char *why;
    char buf[128];
    sf_status st = SF_OK;

    why = sf_net_endpoint_problem(c->endpoint, buf, sizeof(buf));
    if (why != NULL) {
        const sf_node *at = sf_node_get(value, "endpoint");

        sf_cfg_error(ctx, at ? at : sf_cfg_node(ctx), "endpoint", "invalid endpoint '%s': %s",
                     c->endpoint, why);
        st = SF_CONFIG;
    }
    if (c->path[0] != '/') {
        const sf_node *at = sf_node_get(value, "path");

        sf_cfg_error(ctx, at ? at : sf_cfg_node(ctx), "path",
                     "path '%s' must start with '/'", c->path);
        st = SF_CONFIG;
    }
    return st;
}
