/* pipeline/cli/components.c: the component types this build of spanfence
 * has, the one table the config loader looks type names up in (as the
 * upstream collector's distributions list theirs in components.go). It
 * sits with the command, not in the core: the core library knows
 * components only through sf_component_type and does not link them. Adding
 * a component type is one extern and one line here (README, Adding a
 * component). */
#include "sf_component.h"

#include <stddef.h>

extern const sf_component_type sf_otlp_receiver_type;
extern const sf_component_type sf_transform_processor_type;
extern const sf_component_type sf_memory_limiter_processor_type;
extern const sf_component_type sf_batch_processor_type;
extern const sf_component_type sf_otlphttp_exporter_type;
extern const sf_component_type sf_otlpgrpc_exporter_type;
extern const sf_component_type sf_file_exporter_type;
extern const sf_component_type sf_debug_exporter_type;
extern const sf_component_type sf_trace_control_extension_type;
extern const sf_component_type sf_health_check_extension_type;

extern const sf_component_type *const sf_registry[];

const sf_component_type *const sf_registry[] = {
    &sf_otlp_receiver_type,
    &sf_transform_processor_type,
    &sf_memory_limiter_processor_type,
    &sf_batch_processor_type,
    &sf_otlphttp_exporter_type,
    &sf_otlpgrpc_exporter_type,
    &sf_file_exporter_type,
    &sf_debug_exporter_type,
    &sf_trace_control_extension_type,
    &sf_health_check_extension_type,
    NULL
};
