/* tests/build/forbidden_include.c: a core file that includes a component's
 * header. With the core's include path (ctest
 * build/core_cannot_include_components) it must not compile; with the
 * project root added (build/component_header_control) it must, so the first
 * fails because of the boundary and nothing else. */
#include "sf_component.h"
#include "receivers/otlp/otlp.h"
#include "processors/transform/transform.h"
#include "exporters/otlp_http/otlp_http.h"

const void *sf_probe_forbidden_include(void);

const void *sf_probe_forbidden_include(void)
{
    return sf_otlp_receiver_config_map;
}
