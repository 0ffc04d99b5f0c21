/* exporters/debug/debug_config.c: the `debug` exporter's config map, in the
 * upstream debug exporter's layout (sampling keys accepted, without
 * effect: every batch is printed). */
#include "debug.h"

#include <stddef.h>

const sf_config_row sf_debug_config_map[] = {
    { .key = "verbosity", .type = SF_CFG_ENUM, .def = "basic",
      .offset = offsetof(sf_debug_config, verbosity), .choices = "basic|normal|detailed",
      .help = "basic: one line per batch; normal: one line per span; detailed: every field" },
    { .key = "sampling_initial", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "sampling_thereafter", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "use_internal_logger", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};
