/* exporters/debug/debug.h: the `debug` exporter's config, shared by
 * debug_config.c (map) and debug.c (the printer). */
#ifndef SF_EXPORTERS_DEBUG_H
#define SF_EXPORTERS_DEBUG_H

#include "sf_component.h"

enum { SF_DEBUG_BASIC = 0, SF_DEBUG_NORMAL = 1, SF_DEBUG_DETAILED = 2 };

typedef struct sf_debug_config {
    int verbosity;                  /* SF_DEBUG_* */
} sf_debug_config;

extern const sf_config_row sf_debug_config_map[];

#endif
