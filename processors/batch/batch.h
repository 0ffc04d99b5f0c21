/* processors/batch/batch.h: the `batch` processor's config (upstream's
 * keys). The batching itself happens in the sending queue of the exporters
 * the pipeline feeds (pipeline/sf_sender.h, sf_batching), after the data is
 * safely queued: the processor only carries the settings there. */
#ifndef SF_PROCESSORS_BATCH_H
#define SF_PROCESSORS_BATCH_H

#include "sf_component.h"

typedef struct sf_batch_config {
    int64_t send_batch_size;        /* spans that send a request without waiting */
    int64_t send_batch_max_size;    /* most spans merged into one request; 0: no limit */
    int64_t timeout;                /* ms: longest wait to fill a request */
} sf_batch_config;

extern const sf_config_row sf_batch_config_map[];
sf_status sf_batch_config_check(sf_cfg_ctx *ctx, void *config);
/* The type's describe_batching: these settings as the sending queues take
 * them (sf_batching). */
bool sf_batch_describe(const void *config, struct sf_batching *out);

extern const sf_component_type sf_batch_processor_type;

#endif
