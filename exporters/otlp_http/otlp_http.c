/* exporters/otlp_http/otlp_http.c: the `otlphttp` exporter. PLACEHOLDER:
 * being written. */
#include "otlp_http.h"

const sf_component_type sf_otlphttp_exporter_type = {
    .name = "otlphttp",
    .alias = "otlp_http",
    .kind = SF_KIND_EXPORTER,
    .description = "OTLP over HTTP (protobuf) to the telemetry gateway",
    .config_size = sizeof(sf_otlphttp_config),
    .config_map = sf_otlphttp_config_map,
    .check = sf_otlphttp_check,
};
