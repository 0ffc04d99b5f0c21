/* processors/memory_limiter/memory_limiter.h: the `memory_limiter`
 * processor's config (upstream's keys). */
#ifndef SF_PROCESSORS_MEMORY_LIMITER_H
#define SF_PROCESSORS_MEMORY_LIMITER_H

#include "sf_component.h"

typedef struct sf_memory_limiter_config {
    int64_t check_interval;         /* ms */
    int64_t limit_mib;
    int64_t spike_limit_mib;        /* 0: 20% of the limit */
    int64_t limit_percentage;       /* of total memory (cgroup limit or MemTotal) */
    int64_t spike_limit_percentage;
} sf_memory_limiter_config;

extern const sf_config_row sf_memory_limiter_config_map[];
sf_status sf_memory_limiter_check(sf_cfg_ctx *ctx, void *config);

#endif
