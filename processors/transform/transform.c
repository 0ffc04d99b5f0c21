/* processors/transform/transform.c: the `transform` processor on the data
 * path. PLACEHOLDER: being written. */
#include "transform.h"

static sf_status transform_consume(sf_component *self, sf_batch *batch)
{
    (void)self;
    (void)batch;
    return SF_FILTER;
}

const sf_component_type sf_transform_processor_type = {
    .name = "transform",
    .kind = SF_KIND_PROCESSOR,
    .description = "keeps only allowlisted attributes, clears status messages",
    .config_size = sizeof(sf_transform_config),
    .config_map = sf_transform_config_map,
    .consume = transform_consume,
};
