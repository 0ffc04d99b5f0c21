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

/* Reload (SIGHUP), as the upstream collector does it: the running service
 * stops and the one built from the new config starts, on the same ports.
 *
 * sf_service_stop_for_reload: stop `svc` as sf_service_shutdown does
 * (receivers finish their calls, exporters drain), except that extensions
 * and exporters with a `suspend` hook and a successor of the same type and
 * id in `next` keep their state (trace_control: open windows and its
 * socket; otlphttp, otlp: the batches not sent yet); return that state and
 * every component's final counts in *out. `svc` is then only destroyed, after *out is released.
 *
 * sf_service_start_from: carry the counts into the new service's
 * components of the same type and id (so the metrics continue; counts of
 * components the new config dropped stay in the collector-wide totals),
 * hand each suspended state to its successor, and start. On failure
 * whatever started is stopped again, extensions suspended back into `h`,
 * so `h` can be given to another service (the previous config rebuilt).
 *
 * sf_handover_release: finish what no successor took (trace_control resets
 * the windows of targets the new config dropped) and free. Release before
 * destroying the services and configs the handover came from. */
typedef struct sf_handover sf_handover;
sf_status sf_service_stop_for_reload(sf_service *svc, sf_service *next, sf_handover **out);
sf_status sf_service_start_from(sf_service *svc, sf_handover *h);
void sf_handover_release(sf_handover *h);

/* Collector-wide totals of spans: sums of every receiver's, processor's
 * and exporter's counters of traces, read now (relaxed: each counter is
 * exact, the set is not one atomic snapshot). */
void sf_service_totals(const sf_service *svc, sf_totals *out);
/* The same for the items (spans, log records, metric points) of one
 * signal: its accounting invariant holds on its own, as traces' does. */
void sf_service_totals_signal(const sf_service *svc, sf_signal signal, sf_totals *out);

/* After sf_service_shutdown: the work components still owed (the rows of
 * their types' metrics marked `lost`, e.g. trace_control's audit records not
 * written), lost now (each was logged). The total; `msg` says what, e.g.
 * "2 trace_control audit records could not be written (each is logged
 * above)" (truncated to `size`). */
size_t sf_service_lost(const sf_service *svc, char *msg, size_t size);

/* Prometheus text exposition of every component's counters into buf
 * (sf_malloc'd, NUL-terminated); SF_ENOMEM on failure. */
sf_status sf_service_render_metrics(sf_service *svc, char **buf, size_t *len);
/* The collector at a glance (sf_overview.h), or NULL for want of memory;
 * the caller puts it. Any thread. */
struct json_object *sf_service_overview(sf_service *svc);
/* The history (sf_overview.h) the overview shows: the command's, which
 * outlives this service. Before sf_service_start. */
struct sf_history;
void sf_service_set_history(sf_service *svc, struct sf_history *history);

#endif
