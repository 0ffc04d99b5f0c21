/* pipeline/cli/components.c: the component types this build of spanfence
 * has, the one table the config loader looks type names up in (as the
 * upstream collector's distributions list theirs in components.go). It
 * sits with the command, not in the core: the core library knows
 * components only through sf_component_type and does not link them. Adding
 * a component type is one extern and one line here (pipeline/README.md,
 * Adding a component). */
#include "internal/sf_core.h"

#include <stddef.h>

extern const sf_component_type sf_otlp_receiver_type;
extern const sf_component_type sf_prometheus_receiver_type;
extern const sf_component_type sf_journald_receiver_type;
extern const sf_component_type sf_transform_processor_type;
extern const sf_component_type sf_attributes_processor_type;
extern const sf_component_type sf_resource_processor_type;
extern const sf_component_type sf_resourcedetection_processor_type;
extern const sf_component_type sf_memory_limiter_processor_type;
extern const sf_component_type sf_batch_processor_type;
extern const sf_component_type sf_filter_processor_type;
extern const sf_component_type sf_otlphttp_exporter_type;
extern const sf_component_type sf_otlpgrpc_exporter_type;
extern const sf_component_type sf_file_exporter_type;
extern const sf_component_type sf_debug_exporter_type;
extern const sf_component_type sf_trace_control_extension_type;
extern const sf_component_type sf_health_check_extension_type;

extern const sf_component_type *const sf_registry[];

const sf_component_type *const sf_registry[] = {
    &sf_otlp_receiver_type,
    &sf_prometheus_receiver_type,
    &sf_journald_receiver_type,
    &sf_transform_processor_type,
    &sf_attributes_processor_type,
    &sf_resource_processor_type,
    &sf_resourcedetection_processor_type,
    &sf_memory_limiter_processor_type,
    &sf_batch_processor_type,
    &sf_filter_processor_type,
    &sf_otlphttp_exporter_type,
    &sf_otlpgrpc_exporter_type,
    &sf_file_exporter_type,
    &sf_debug_exporter_type,
    &sf_trace_control_extension_type,
    &sf_health_check_extension_type,
    NULL
};

/* Upstream types spanfence does not have, and what to use instead: said
 * when a traces pipeline lists one (an error), or when service.extensions
 * does (a warning: the extension is not run). */
const sf_foreign_type sf_foreign_types[] = {
    { SF_KIND_PROCESSOR, "redaction",
      "use the transform processor: keep_keys allowlists attribute keys, replace_pattern "
      "redacts span names" },
    { SF_KIND_PROCESSOR, "tail_sampling", "spanfence does not sample; sample at the gateway" },
    { SF_KIND_PROCESSOR, "probabilistic_sampler",
      "spanfence does not sample; sample at the gateway" },
    { SF_KIND_PROCESSOR, "k8sattributes",
      "spanfence adds no attributes; add them at the gateway" },
    { SF_KIND_PROCESSOR, "groupbytrace", "spanfence does not group; group at the gateway" },
    { SF_KIND_PROCESSOR, "span", "rename spans with the transform processor's replace_pattern" },
    { SF_KIND_RECEIVER, "jaeger", "send OTLP to the otlp receiver" },
    { SF_KIND_RECEIVER, "zipkin", "send OTLP to the otlp receiver" },
    { SF_KIND_RECEIVER, "kafka", "send OTLP to the otlp receiver" },
    { SF_KIND_EXPORTER, "kafka", "export OTLP with otlphttp or otlp" },
    { SF_KIND_EXPORTER, "loadbalancing", "export to one gateway with otlphttp or otlp" },
    { SF_KIND_EXPORTER, "logging", "use the debug exporter" },
    { SF_KIND_EXTENSION, "pprof",
      "spanfence is C: profile it with perf (perf record -g -p PID), no endpoint needed" },
    { SF_KIND_EXTENSION, "zpages",
      "read the pipeline's state from the Prometheus metrics (service.telemetry.metrics) and "
      "health_check" },
    { SF_KIND_EXTENSION, "file_storage",
      "spanfence keeps its queues in memory only, so no span is written to disk" },
    { SF_KIND_EXTENSION, "basicauth",
      "send credentials as exporter headers from ${env:...}" },
    { SF_KIND_EXTENSION, "bearertokenauth",
      "send the token as an exporter header: headers: {authorization: \"Bearer ${env:TOKEN}\"}" },
    { SF_KIND_EXTENSION, "oauth2client",
      "send credentials as exporter headers from ${env:...}" },
    { 0, NULL, NULL }
};
