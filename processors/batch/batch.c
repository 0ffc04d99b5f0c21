/* processors/batch/batch.c: the `batch` processor. Batches pass through it
 * unchanged (counted in and out); what it configures happens later, in the
 * sending queue of every exporter its pipeline feeds: each exporter asks
 * sf_component_batching() at start and merges queued batches into fewer
 * requests there. So a receiver is still answered only once its batch is in
 * the exporter's bounded queue; upstream's batch processor acknowledges
 * data it holds in memory and loses it on a crash or a full exporter. */
#include "batch.h"

static sf_status batch_create(sf_component *self, const void *config)
{
    (void)config;
    sf_component_set_ctx(self, NULL);
    return SF_OK;
}

static sf_status batch_pass(sf_component *self, size_t spans)
{
    sf_counters *c = sf_component_counters(self);

    sf_count(&c->incoming_items, spans);
    sf_count(&c->outgoing_items, spans);
    return SF_OK;
}

static sf_status batch_consume(sf_component *self, sf_request *batch)
{
    return batch_pass(self, batch->spans);
}

const sf_component_type sf_batch_processor_type = {
    .name = "batch",
    .kind = SF_KIND_PROCESSOR,
    .description = "merges queued batches into fewer export requests, in the exporters' "
                   "sending queues (data is acknowledged only once queued)",
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_batch_config),
    .config_map = sf_batch_config_map,
    .check = sf_batch_config_check,
    .create = batch_create,
    .consume = batch_consume,
    .describe_batching = sf_batch_describe,
};
