/* processors/batch/batch_config.c: config map and checks of the `batch`
 * processor: upstream's keys and defaults; the metadata keys (batching per
 * client metadata) are accepted and have no effect. */
#include "batch.h"
#include "sf_sender.h"

#include <stddef.h>

const sf_config_row sf_batch_config_map[] = {
    { .key = "send_batch_size", .type = SF_CFG_INT, .def = "8192",
      .offset = offsetof(sf_batch_config, send_batch_size),
      .help = "spans after which a request is sent without waiting for the timeout "
              "(0: send what is queued at once)",
      .min = 0, .max = INT32_MAX },
    { .key = "send_batch_max_size", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_batch_config, send_batch_max_size),
      .help = "most spans merged into one request, 0 for no limit (a larger incoming "
              "batch is sent whole, never split)",
      .min = 0, .max = INT32_MAX },
    { .key = "timeout", .type = SF_CFG_DURATION, .def = "200ms",
      .offset = offsetof(sf_batch_config, timeout),
      .help = "longest a queued batch waits for others to share its request",
      .min = 0, .max = 3600000 },
    { .key = "metadata_keys", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "batching per client metadata value" },
    { .key = "metadata_cardinality_limit", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "limit on distinct metadata combinations" },
    { 0 }
};

sf_status sf_batch_config_check(sf_cfg_ctx *ctx, void *config)
{
    sf_batch_config *c = config;
    const sf_node *v = sf_cfg_value(ctx);

    if (c->send_batch_max_size != 0 && c->send_batch_max_size < c->send_batch_size) {
        sf_cfg_error(ctx, sf_node_get(v, "send_batch_max_size"), "send_batch_max_size",
                     "must be 0 or at least 'send_batch_size' (%lld)",
                     (long long)c->send_batch_size);
        return SF_CONFIG;
    }
    return SF_OK;
}

bool sf_batch_describe(const void *config, sf_batching *out)
{
    const sf_batch_config *c = config;

    *out = (sf_batching){ .send_batch_size = c->send_batch_size,
                          .send_batch_max_size = c->send_batch_max_size,
                          .timeout_ms = c->timeout };
    return true;
}
