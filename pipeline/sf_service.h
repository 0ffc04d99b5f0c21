/* sf_service.h: the running collector built from a loaded config: one
 * instance per component used by a traces pipeline, wired receiver ->
 * processors -> exporters, the extensions named in service.extensions,
 * plus the self-metrics endpoint.
 *
 * `spanfence validate` calls sf_service_create() and sf_service_destroy()
 * only: everything up to the point where sockets are bound and threads
 * start, so a config that validates is one the daemon can build. */
#ifndef SF_SERVICE_H
#define SF_SERVICE_H

#include "sf_config.h"
#include "sf_metrics.h"
#include "sf_status.h"

typedef struct sf_service sf_service;

/* Build every component (type->create) from `cfg`, which must outlive the
 * service. Problems are reported in `diag` (at the component's node). */
sf_status sf_service_create(const sf_config *cfg, sf_diag *diag, sf_service **out);
/* Start extensions, then exporters, then processors, then receivers (so nothing is accepted
 * before it can be sent), then the metrics endpoint. On failure, whatever
 * was started is shut down again. */
sf_status sf_service_start(sf_service *svc);
/* Stop: receivers stop accepting and finish their calls, then extensions
 * (trace_control resets its open windows here), then exporters drain their
 * queues for a bounded time. */
void sf_service_shutdown(sf_service *svc);
void sf_service_destroy(sf_service *svc);

/* Collector-wide totals: sums of every receiver's, processor's and
 * exporter's counters, read now (relaxed: each counter is exact, the set is
 * not one atomic snapshot). */
void sf_service_totals(const sf_service *svc, sf_totals *out);

/* Prometheus text exposition of every component's counters into buf
 * (sf_malloc'd, NUL-terminated); SF_ENOMEM on failure. */
sf_status sf_service_render_metrics(sf_service *svc, char **buf, size_t *len);

#endif
