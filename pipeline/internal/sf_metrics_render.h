/* internal/sf_metrics_render.h: the Prometheus text renderer of the
 * components' counters (served by the monitoring server, internal/sf_monitor.h,
 * through the service). */
#ifndef SF_METRICS_RENDER_H
#define SF_METRICS_RENDER_H

#include <stdbool.h>
#include <stddef.h>

#include "../sf_status.h"

struct sf_component;

/* How series are named, as the upstream collector's Prometheus exporter
 * would (service.telemetry.metrics.readers). NULL: its default reader
 * (and `address`): no _total, no units, no resource labels. */
typedef struct sf_metrics_style {
    bool type_suffix;               /* counters end in _total */
    bool units;                     /* _seconds, _bytes where upstream has a unit */
    bool detailed;                  /* metrics.level: detailed (series upstream serves only then) */
    unsigned labels;                /* SF_RESOURCE_* (sf_config.h) on every series */
    const char *service_name;       /* NULL: "spanfence" */
    const char *service_version;    /* NULL: the build's version */
    const char *service_instance_id;    /* NULL: a UUID made once per process */
    /* components earlier configs had (reload): their upstream series are
     * rendered after the live ones', with retired="true" */
    struct sf_component *retired;
    size_t n_retired;
} sf_metrics_style;

/* Prometheus text exposition of the counters of components[0, n) (each
 * type's own rows too), the process metrics and target_info into *out
 * (sf_malloc'd, NUL-terminated). SF_ENOMEM. */
sf_status sf_metrics_render(struct sf_component *components, size_t n, char **out,
                            size_t *out_len);
sf_status sf_metrics_render_style(struct sf_component *components, size_t n,
                                  const sf_metrics_style *style, char **out, size_t *out_len);

#endif
