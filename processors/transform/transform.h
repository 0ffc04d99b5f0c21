/* processors/transform/transform.h: the `transform` processor's config: the
 * OTTL statements spanfence supports, parsed at load time into a program. */
#ifndef SF_PROCESSORS_TRANSFORM_H
#define SF_PROCESSORS_TRANSFORM_H

#include "sf_component.h"

enum { SF_ERROR_MODE_PROPAGATE = 0, SF_ERROR_MODE_IGNORE = 1, SF_ERROR_MODE_SILENT = 2 };

typedef struct sf_transform_program sf_transform_program;   /* transform_config.c */

typedef struct sf_transform_config {
    int error_mode;                 /* SF_ERROR_MODE_* */
    sf_transform_program *program;  /* from trace_statements; memory from sf_cfg_alloc */
} sf_transform_config;

extern const sf_config_row sf_transform_config_map[];

#endif
