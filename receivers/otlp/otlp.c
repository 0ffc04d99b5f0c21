/* receivers/otlp/otlp.c: the `otlp` receiver. PLACEHOLDER: being written. */
#include "otlp.h"

const sf_component_type sf_otlp_receiver_type = {
    .name = "otlp",
    .kind = SF_KIND_RECEIVER,
    .description = "OTLP over gRPC and HTTP",
    .config_size = sizeof(sf_otlp_receiver_config),
    .config_map = sf_otlp_receiver_config_map,
    .check = sf_otlp_receiver_check,
};
