/* processors/memory_limiter/memory_limiter_config.c: config map and checks
 * of the `memory_limiter` processor. */
#include "memory_limiter.h"

#include <stddef.h>

const sf_config_row sf_memory_limiter_config_map[] = {
    { .key = "check_interval", .type = SF_CFG_DURATION, .def = "1s",
      .offset = offsetof(sf_memory_limiter_config, check_interval),
      .help = "how often the process RSS is sampled", .min = 10, .max = 60000 },
    { .key = "limit_mib", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_memory_limiter_config, limit_mib),
      .help = "hard limit, MiB: allocations past it fail and data is refused",
      .min = 0, .max = 1 << 20 },
    { .key = "spike_limit_mib", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_memory_limiter_config, spike_limit_mib),
      .help = "headroom below the limit where new data starts being refused (default 20%)",
      .min = 0, .max = 1 << 20 },
    { .key = "limit_percentage", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_memory_limiter_config, limit_percentage),
      .help = "hard limit as a percentage of total memory", .min = 0, .max = 100 },
    { .key = "spike_limit_percentage", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_memory_limiter_config, spike_limit_percentage),
      .help = "headroom as a percentage of total memory", .min = 0, .max = 100 },
    { 0 }
};

sf_status sf_memory_limiter_check(sf_cfg_ctx *ctx, void *config)
{
    sf_memory_limiter_config *c = config;
    const sf_node *v = sf_cfg_value(ctx);

    if ((c->limit_mib > 0) == (c->limit_percentage > 0)) {
        sf_cfg_error(ctx, sf_cfg_node(ctx), NULL,
                     "set exactly one of 'limit_mib' and 'limit_percentage'");
        return SF_CONFIG;
    }
    if (c->limit_mib > 0 && c->spike_limit_mib >= c->limit_mib) {
        sf_cfg_error(ctx, sf_node_get(v, "spike_limit_mib"), "spike_limit_mib",
                     "must be below 'limit_mib' (%lld)", (long long)c->limit_mib);
        return SF_CONFIG;
    }
    if (c->limit_percentage > 0 && c->spike_limit_percentage >= c->limit_percentage) {
        sf_cfg_error(ctx, sf_node_get(v, "spike_limit_percentage"), "spike_limit_percentage",
                     "must be below 'limit_percentage' (%lld)", (long long)c->limit_percentage);
        return SF_CONFIG;
    }
    return SF_OK;
}
