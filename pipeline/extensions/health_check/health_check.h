/* pipeline/extensions/health_check/health_check.h: the `health_check`
 * extension (the upstream collector's healthcheckextension, as a docker
 * HEALTHCHECK or a Kubernetes probe uses it): its config. */
#ifndef SF_HEALTH_CHECK_H
#define SF_HEALTH_CHECK_H

#include "sf_component.h"

typedef struct sf_hc_bodies {
    bool present;
    char *healthy;              /* answer body on 200, or NULL: upstream's JSON */
    char *unhealthy;            /* answer body on 503, or NULL: upstream's JSON */
} sf_hc_bodies;

/* check_collector_pipeline (upstream's legacy keys and defaults): 503
 * while an exporter has failed at least `exporter_failure_threshold`
 * sends within the last `interval`. */
typedef struct sf_hc_pipeline_check {
    bool present;
    bool enabled;
    int64_t interval;               /* ms, upstream's default 5m */
    int64_t exporter_failure_threshold;     /* upstream's default 5; 1..SF_FAILURE_LOG */
} sf_hc_pipeline_check;

typedef struct sf_hc_config {
    char *endpoint;             /* host:port, upstream's default localhost:13133 */
    char *path;                 /* "/" */
    sf_hc_bodies response_body;
    sf_hc_pipeline_check check_collector_pipeline;
} sf_hc_config;

extern const sf_config_row sf_hc_config_map[];
sf_status sf_hc_check(sf_cfg_ctx *ctx, void *config);

#endif
