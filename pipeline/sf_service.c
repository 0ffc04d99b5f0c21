/* sf_service.c: builds the running collector from a loaded config, runs a
 * receiver's batch through its pipelines, and owns start/stop ordering.
 *
 * DESIGN
 * - Only components some pipeline lists are instantiated, plus the
 *   extensions listed in service.extensions. A processor or exporter gets
 *   one instance per signal whose pipelines list it (as upstream builds
 *   one per pipeline signal): each with its own counters (named for its
 *   signal's items) and, for exporters, its own bounded sending queue, so
 *   a burst of traces can fill the traces queue only, never the logs' or
 *   the metrics'. Receivers and extensions get one instance; a receiver
 *   counts per signal and transport, and runs a request through the
 *   pipelines of the request's signal (sf_request.signal).
 * - The data path is synchronous: a receiver thread calls
 *   sf_component_emit(), which runs the processors in order on the batch
 *   (in place, in the receiver's arena) and hands the packed result to each
 *   exporter's queue, which never blocks. So when emit returns, the spans
 *   are either queued (the client is told OK) or refused with a status the
 *   client can act on; nothing is acknowledged before it is safely queued.
 * - Component contexts are read-only after start; counters are atomics.
 * - One optional span tap and one log tap (an extension's, set at its
 *   create): emit calls them for each traces (logs) request, just before
 *   it counts it on the receiver (so counts never run ahead of a tap), on
 *   the receiver thread, with the bytes as received (before any processor:
 *   the log tap sees bodies a fence removes); read-only once the service
 *   starts. Likewise one optional span gate (trace_control's out-of-band
 *   drop): asked before the pipelines run, it takes resources' spans out
 *   of a traces request, counted as dropped on the receiver.
 * - An extension may hand a request of its own to a traces pipeline after
 *   its processors (sf_component_inject: trace_control's window markers),
 *   from its own thread, only while the exporters run: the flag
 *   `exporting` is set once they started and cleared, with in-flight
 *   injections waited for, before they stop.
 * - Reload (SIGHUP, main.c): the running service stops, the new one starts.
 *   Nothing is shared while both exist: the old one hands over, in an
 *   sf_handover, its final counts (added into the new instances of the same
 *   type and id) and the parcels of components with suspend/resume hooks
 *   (trace_control's windows and socket, the network exporters' unsent
 *   batches). The data path above is not involved. */
#include "sf_service.h"
#include "internal/sf_core.h"
#include "internal/sf_config_int.h"
#include "internal/sf_metrics_render.h"
#include "internal/sf_monitor.h"
#include "sf_overview.h"
#include "sf_sender.h"
#include "sf_share.h"
#include "sf_process.h"
#include "sf_time.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef struct sf_route {
    const char *id;
    sf_signal signal;
    sf_component *editor;           /* first processor with an edit, or NULL */
    size_t n_processors;
    sf_component **processors;
    size_t n_exporters;
    sf_component **exporters;
} sf_route;

struct sf_service {
    const sf_config *cfg;
    sf_history *history;             /* the command's; NULL: none */
    size_t n_components;
    sf_component *components;        /* in config order; only those in use */
    size_t n_routes;
    sf_route *routes;
    sf_monitor *monitor;
    bool started;
    _Atomic int state;               /* sf_service_state, read by extensions' threads */
    /* when state became RUNNING (wall clock, monotonic); written before
     * the state is stored, read only once RUNNING is seen */
    int64_t running_since_wall_ms, running_since_ms;
    /* components an earlier config had and this one has not (reload),
     * with their final counts: collector-wide totals never go back, their
     * series stay on /metrics (marked retired), and a later config that
     * brings the id back carries on from them */
    sf_component *retired;
    size_t n_retired;
    /* set before start, read-only after (see sf_component_set_span_tap) */
    sf_span_tap_fn tap;
    void *tap_ctx;
    sf_metrics_tap_fn metrics_tap;  /* the same for metrics requests */
    void *metrics_tap_ctx;
    sf_log_tap_fn log_tap;          /* the same for logs requests */
    void *log_tap_ctx;
    sf_span_gate gate;              /* the same; gate.keeps NULL: none */
    /* exporters started and not stopping: sf_component_inject may run;
     * `injecting` counts the injections under way, which stop_injecting
     * waits for before exporters stop */
    _Atomic bool exporting;
    _Atomic unsigned injecting;
};

/* ---- build --------------------------------------------------------------- */

/* Whether `kind` has one instance per signal (else one for all). */
static bool per_signal(sf_kind kind)
{
    return kind == SF_KIND_PROCESSOR || kind == SF_KIND_EXPORTER;
}

/* The instance of `cc` serving `signal` (the only one of a receiver). */
static sf_component *instance_of(sf_service *svc, const sf_config_component *cc,
                                 sf_signal signal)
{
    for (size_t i = 0; i < svc->n_components; i++)
        if (svc->components[i].config == cc->config &&
            (!per_signal(svc->components[i].type->kind) || svc->components[i].signal == signal))
            return &svc->components[i];
    return NULL;
}

/* Whether a pipeline of `signal` lists `cc`. */
static bool used_by(const sf_config *cfg, const sf_config_component *cc, sf_signal signal)
{
    for (size_t p = 0; p < cfg->n_pipelines; p++) {
        const sf_config_pipeline *pl = &cfg->pipelines[p];
        if (pl->signal != signal)
            continue;
        for (size_t i = 0; i < pl->n_receivers; i++)
            if (pl->receivers[i] == cc)
                return true;
        for (size_t i = 0; i < pl->n_processors; i++)
            if (pl->processors[i] == cc)
                return true;
        for (size_t i = 0; i < pl->n_exporters; i++)
            if (pl->exporters[i] == cc)
                return true;
    }
    return false;
}

static bool listed_extension(const sf_config *cfg, const sf_config_component *cc)
{
    for (size_t i = 0; i < cfg->n_extensions; i++)
        if (cfg->extensions[i] == cc)
            return true;
    return false;
}

static sf_component **instances(sf_service *svc, sf_config_component **list, size_t n,
                                sf_signal signal)
{
    sf_component **out = sf_calloc(n ? n : 1, sizeof(*out));

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = instance_of(svc, list[i], signal);
    return out;
}

static sf_status build_routes(sf_service *svc)
{
    const sf_config *cfg = svc->cfg;

    svc->routes = sf_calloc(cfg->n_pipelines ? cfg->n_pipelines : 1, sizeof(*svc->routes));
    if (svc->routes == NULL)
        return SF_ENOMEM;
    for (size_t p = 0; p < cfg->n_pipelines; p++) {
        const sf_config_pipeline *pl = &cfg->pipelines[p];
        sf_route *r;

        r = &svc->routes[svc->n_routes++];
        r->id = pl->id;
        r->signal = pl->signal;
        r->n_processors = pl->n_processors;
        r->n_exporters = pl->n_exporters;
        r->processors = instances(svc, pl->processors, pl->n_processors, pl->signal);
        r->exporters = instances(svc, pl->exporters, pl->n_exporters, pl->signal);
        if (r->processors == NULL || r->exporters == NULL)
            return SF_ENOMEM;
        for (size_t i = 0; i < r->n_processors; i++) {
            const sf_otlp_edit *e = r->processors[i]->type->edit != NULL
                ? r->processors[i]->type->edit(r->processors[i], pl->signal) : NULL;

            if (e == NULL)
                continue;
            /* An edit that drops items (a filter) after another processor
             * runs at its own turn: that processor counts what was received. */
            if (i == 0 || e->keep_metric_fn == NULL)
                r->editor = r->processors[i];
            break;
        }
        for (size_t i = 0; i < pl->n_receivers; i++) {
            sf_component *rc = instance_of(svc, pl->receivers[i], pl->signal);
            sf_route **nr = sf_realloc(rc->routes, (rc->n_routes + 1) * sizeof(*nr));
            if (nr == NULL)
                return SF_ENOMEM;
            nr[rc->n_routes++] = r;
            rc->routes = nr;
            rc->signals |= 1u << pl->signal;
        }
    }
    return SF_OK;
}

sf_status sf_service_create(const sf_config *cfg, sf_diag *diag, sf_service **out)
{
    sf_service *svc;
    sf_status st = SF_ENOMEM;

    *out = NULL;
    st = sf_process_init();         /* libraries first, before any component */
    if (st != SF_OK)
        goto out_fail;
    st = SF_ENOMEM;
    svc = sf_calloc(1, sizeof(*svc));
    if (svc == NULL)
        goto out_fail;
    svc->cfg = cfg;
    atomic_init(&svc->state, SF_SERVICE_STARTING);
    svc->components = sf_calloc(cfg->n_components ? cfg->n_components * SF_SIGNAL_COUNT : 1,
                                sizeof(*svc->components));
    if (svc->components == NULL)
        goto out_destroy;

    for (size_t k = 0; k < cfg->n_components * SF_SIGNAL_COUNT; k++) {
        const sf_config_component *cc = &cfg->components[k / SF_SIGNAL_COUNT];
        sf_signal signal = (sf_signal)(k % SF_SIGNAL_COUNT);
        sf_component *c;
        bool wanted;

        if (cc->type == NULL || cc->type->create == NULL)
            continue;
        if (per_signal(cc->type->kind))
            wanted = used_by(cfg, cc, signal);
        else if (signal != SF_SIGNAL_TRACES)
            wanted = false;         /* one instance, made in the traces turn */
        else if (cc->type->kind == SF_KIND_EXTENSION)
            wanted = listed_extension(cfg, cc);
        else
            wanted = used_by(cfg, cc, SF_SIGNAL_TRACES) || used_by(cfg, cc, SF_SIGNAL_LOGS) ||
                     used_by(cfg, cc, SF_SIGNAL_METRICS);
        if (!wanted)
            continue;
        if ((cc->type->kind == SF_KIND_PROCESSOR || cc->type->kind == SF_KIND_EXPORTER) &&
            cc->type->consume == NULL && cc->type->edit == NULL) {
            sf_diag_error(diag, cc->node, NULL, "%s type '%s' cannot be used in a pipeline",
                          sf_kind_name(cc->type->kind), cc->type->name);
            st = SF_CONFIG;
            goto out_destroy;
        }
        c = &svc->components[svc->n_components++];
        c->type = cc->type;
        c->id = cc->id;
        c->config = cc->config;
        c->service = svc;
        c->signal = per_signal(cc->type->kind) ? signal : SF_SIGNAL_TRACES;
        st = cc->type->create(c, cc->config);
        if (st != SF_OK) {
            sf_diag_error(diag, cc->node, NULL, "%s '%s' could not be created%s%s: %s",
                          sf_kind_name(cc->type->kind), cc->id,
                          c->signal != SF_SIGNAL_TRACES ? " for " : "",
                          c->signal != SF_SIGNAL_TRACES ? sf_signal_name(signal) : "",
                          sf_status_str(st));
            c->type = NULL;     /* nothing to destroy */
            svc->n_components--;
            goto out_destroy;
        }
    }
    st = build_routes(svc);
    if (st != SF_OK)
        goto out_destroy;
    *out = svc;
    return SF_OK;

out_destroy:
    sf_service_destroy(svc);
out_fail:
    if (st == SF_ENOMEM)
        sf_diag_error(diag, NULL, NULL, "out of memory while building the service");
    return st;
}

/* ---- run ----------------------------------------------------------------- */

/* No injection from now on, and none still running into the exporters. */
static void stop_injecting(sf_service *svc)
{
    atomic_store(&svc->exporting, false);
    while (atomic_load(&svc->injecting) > 0)
        sched_yield();
}

static sf_status start_kind(sf_service *svc, sf_kind kind)
{
    for (size_t i = 0; i < svc->n_components; i++) {
        sf_component *c = &svc->components[i];
        sf_status st;

        if (c->type->kind != kind || c->type->start == NULL)
            continue;
        st = c->type->start(c);
        if (st != SF_OK) {
            sf_error("%s '%s' failed to start: %s", sf_kind_name(kind), c->id,
                     sf_status_str(st));
            return st;
        }
    }
    return SF_OK;
}

static void shutdown_kind(sf_service *svc, sf_kind kind)
{
    for (size_t i = svc->n_components; i-- > 0;) {
        sf_component *c = &svc->components[i];
        if (c->type->kind == kind && c->type->shutdown != NULL)
            c->type->shutdown(c);
    }
}

static const sf_kind start_order[] = { SF_KIND_EXTENSION, SF_KIND_EXPORTER, SF_KIND_PROCESSOR,
                                       SF_KIND_RECEIVER };

static void suspend_kind(sf_service *svc, sf_kind kind, sf_handover *h, sf_service *next);

/* Start every kind in order. On failure whatever was started is shut down
 * again, except that with `h` (a reload) the components that can be
 * suspended are, into `h`, so their state (open windows, batches not sent,
 * a journal cursor) is not lost with this service. */
static sf_status monitor_metrics(void *ctx, char **out, size_t *out_len)
{
    return sf_service_render_metrics(ctx, out, out_len);
}

static struct json_object *monitor_status(void *ctx)
{
    return sf_service_overview(ctx);
}

static sf_status start_all(sf_service *svc, sf_handover *h)
{
    sf_status st;
    size_t k;

    if (svc->cfg->metrics_address != NULL) {
        const sf_monitor_source src = { .ctx = svc, .metrics = monitor_metrics,
                                        .status = monitor_status };

        st = sf_monitor_start(svc->cfg->metrics_address, &src, &svc->monitor);
        if (st != SF_OK)
            goto out_suspend;
    }
    for (k = 0; k < sizeof(start_order) / sizeof(start_order[0]); k++) {
        st = start_kind(svc, start_order[k]);
        if (st != SF_OK)
            goto out_stop;
        if (start_order[k] == SF_KIND_EXPORTER)
            atomic_store(&svc->exporting, true);
    }
    svc->started = true;
    svc->running_since_wall_ms = sf_wall_ms();
    svc->running_since_ms = sf_now_ms();
    atomic_store(&svc->state, SF_SERVICE_RUNNING);
    return SF_OK;

out_stop:
    stop_injecting(svc);
    /* Shut down every kind tried so far, the failed one included: shutdown
     * is safe on a component that did not start. */
    for (size_t j = k + 1; j-- > 0;) {
        if (h != NULL)
            suspend_kind(svc, start_order[j], h, NULL);
        else
            shutdown_kind(svc, start_order[j]);
    }
    sf_monitor_stop(svc->monitor);
    svc->monitor = NULL;
    return st;

out_suspend:
    if (h != NULL) {
        suspend_kind(svc, SF_KIND_EXTENSION, h, NULL);
        suspend_kind(svc, SF_KIND_EXPORTER, h, NULL);
    }
    return st;
}

sf_status sf_service_start(sf_service *svc)
{
    return start_all(svc, NULL);
}

void sf_service_shutdown(sf_service *svc)
{
    atomic_store(&svc->state, SF_SERVICE_STOPPING);
    if (!svc->started)
        return;
    svc->started = false;
    shutdown_kind(svc, SF_KIND_RECEIVER);
    /* Extensions before exporters: trace_control's closing records then
     * still see live exporter counters, and its window resets happen
     * whatever the exporters' drain takes. */
    shutdown_kind(svc, SF_KIND_EXTENSION);
    shutdown_kind(svc, SF_KIND_PROCESSOR);
    stop_injecting(svc);
    shutdown_kind(svc, SF_KIND_EXPORTER);
    /* The metrics endpoint stays up until here so the final counts can be
     * scraped while queues drain. */
    sf_monitor_stop(svc->monitor);
    svc->monitor = NULL;
}

void sf_service_destroy(sf_service *svc)
{
    if (svc == NULL)
        return;
    sf_service_shutdown(svc);
    for (size_t i = svc->n_components; i-- > 0;) {
        sf_component *c = &svc->components[i];
        if (c->type != NULL && c->type->destroy != NULL)
            c->type->destroy(c);
        sf_free(c->routes);
    }
    for (size_t r = 0; r < svc->n_routes; r++) {
        sf_free(svc->routes[r].processors);
        sf_free(svc->routes[r].exporters);
    }
    sf_free(svc->routes);
    sf_free(svc->components);
    for (size_t i = 0; i < svc->n_retired; i++)
        sf_free((char *)svc->retired[i].id);
    sf_free(svc->retired);
    sf_free(svc);
}

/* ---- reload (SIGHUP) ------------------------------------------------------- */

/* One component of the stopped service: its final counts, carried into
 * the component of the same type and id in the next service, and what it
 * kept across the reload (type->suspend). */
typedef struct sf_handover_item {
    const sf_component_type *type;
    char *id;
    sf_signal signal;               /* processors and exporters: the instance's */
    sf_counters counters;
    sf_counters transport[SF_SIGNAL_COUNT][SF_TRANSPORT_COUNT];
    unsigned transports;
    unsigned signals;
    sf_batch_stats batch;
    void *parcel;
} sf_handover_item;

struct sf_handover {
    size_t n;
    sf_handover_item *items;    /* the live components' and the retired ones' */
};

/* The monotonic counters of `src` added to `dst` (with the counters among
 * the rows of `type`'s own metrics); gauges (queue size, queued spans, a
 * type's gauge rows) describe the live instance and are not. */
static void add_counters(const sf_component_type *type, sf_counters *dst, sf_counters *src)
{
#define ADD(f) sf_count(&dst->f, sf_counter_get(&src->f))
    ADD(accepted_spans);
    ADD(requests);
    ADD(incoming_items);
    ADD(outgoing_items);
    ADD(removed_attributes);
    ADD(sent_spans);
    ADD(enqueue_failed_spans);
    ADD(retries);
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        ADD(refused_spans[r]);
        ADD(refused_requests[r]);
        ADD(dropped_spans[r]);
        ADD(send_failed_spans[r]);
    }
    for (int m = 0; m < SF_OTLP_MSG_COUNT; m++)
        ADD(dropped_fields[m]);
    ADD(unexported[0]);
    ADD(unexported[1]);
    ADD(refused_share);
#undef ADD
    for (size_t i = 0; type != NULL && type->metric_rows != NULL && type->metric_rows[i].name; i++)
        if (!type->metric_rows[i].gauge)
            atomic_fetch_add(&dst->values[i], atomic_load(&src->values[i]));
}

/* A receiver's counters per signal and transport, added. */
static void add_transports(sf_counters (*dst)[SF_TRANSPORT_COUNT],
                           sf_counters (*src)[SF_TRANSPORT_COUNT])
{
    for (int s = 0; s < SF_SIGNAL_COUNT; s++)
        for (int t = 0; t < SF_TRANSPORT_COUNT; t++)
            add_counters(NULL, &dst[s][t], &src[s][t]);
}

static sf_handover_item *handover_find(sf_handover *h, const sf_component_type *type,
                                       const char *id, sf_signal signal)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->items[i].type == type && strcmp(h->items[i].id, id) == 0 &&
            h->items[i].signal == signal)
            return &h->items[i];
    return NULL;
}

static sf_handover_item *handover_item(sf_handover *h, const sf_component *c)
{
    sf_handover_item *it = handover_find(h, c->type, c->id, c->signal), *items;

    if (it != NULL)
        return it;
    items = sf_realloc(h->items, (h->n + 1) * sizeof(*items));
    if (items == NULL)
        return NULL;
    h->items = items;
    it = &h->items[h->n];
    memset(it, 0, sizeof(*it));
    it->type = c->type;
    it->signal = c->signal;
    it->id = sf_strdup(c->id);
    if (it->id == NULL)
        return NULL;
    h->n++;
    return it;
}

static sf_component *component_like(sf_service *svc, const sf_handover_item *it)
{
    for (size_t i = 0; i < svc->n_components; i++)
        if (svc->components[i].type == it->type && strcmp(svc->components[i].id, it->id) == 0 &&
            svc->components[i].signal == it->signal)
            return &svc->components[i];
    return NULL;
}

/* Components of `kind` in reverse order: suspended into `h` when they can
 * be and will be resumed: with `next`, when it has a successor; without
 * (a failed start, handing back to the previous config), when `h` already
 * knows the component from that config. Else shut down. */
static void suspend_kind(sf_service *svc, sf_kind kind, sf_handover *h, sf_service *next)
{
    for (size_t i = svc->n_components; i-- > 0;) {
        sf_component *c = &svc->components[i];
        sf_handover_item *it;

        if (c->type->kind != kind)
            continue;
        if (c->type->suspend == NULL || c->type->resume == NULL ||
            (next != NULL && component_like(next, &(sf_handover_item){
                                 .type = c->type, .id = (char *)c->id, .signal = c->signal }) == NULL) ||
            (next == NULL && handover_find(h, c->type, c->id, c->signal) == NULL) ||
            (it = handover_item(h, c)) == NULL) {
            if (c->type->shutdown != NULL)
                c->type->shutdown(c);
            continue;
        }
        if (it->parcel != NULL) {       /* cannot happen: one instance per id */
            c->type->resume(NULL, it->parcel);
            it->parcel = NULL;
        }
        it->parcel = c->type->suspend(c);
    }
}

void sf_handover_release(sf_handover *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n; i++) {
        if (h->items[i].parcel != NULL)
            h->items[i].type->resume(NULL, h->items[i].parcel);
        sf_free(h->items[i].id);
    }
    sf_free(h->items);
    sf_free(h);
}

sf_status sf_service_stop_for_reload(sf_service *svc, sf_service *next, sf_handover **out)
{
    sf_handover *h = sf_calloc(1, sizeof(*h));

    *out = NULL;
    if (h == NULL)
        return SF_ENOMEM;
    /* Every item before anything stops: no allocation can fail later. */
    for (size_t i = 0; i < svc->n_components + svc->n_retired; i++) {
        sf_component *c = i < svc->n_components ? &svc->components[i]
                                                 : &svc->retired[i - svc->n_components];

        if (handover_item(h, c) == NULL) {
            sf_handover_release(h);
            return SF_ENOMEM;
        }
    }
    atomic_store(&svc->state, SF_SERVICE_STOPPING);
    if (svc->started) {
        svc->started = false;
        /* As sf_service_shutdown, but components with a successor in
         * `next` and suspend/resume hooks are suspended: their state goes
         * to it. Receivers first (their calls finish and are answered;
         * journald's cursor is kept); then every span acknowledged so far
         * is delivered, kept for the successor, or counted, before the
         * counts are taken. */
        suspend_kind(svc, SF_KIND_RECEIVER, h, next);
        suspend_kind(svc, SF_KIND_EXTENSION, h, next);
        shutdown_kind(svc, SF_KIND_PROCESSOR);
        stop_injecting(svc);
        suspend_kind(svc, SF_KIND_EXPORTER, h, next);
        sf_monitor_stop(svc->monitor);
        svc->monitor = NULL;
    }
    for (size_t i = 0; i < svc->n_components + svc->n_retired; i++) {
        sf_component *c = i < svc->n_components ? &svc->components[i]
                                                : &svc->retired[i - svc->n_components];
        sf_handover_item *it = handover_find(h, c->type, c->id, c->signal);

        it->transports |= c->transports;
        it->signals |= c->signals;
        add_counters(c->type, &it->counters, &c->counters);
        add_transports(it->transport, c->transport);
        sf_batch_stats_add(&it->batch, &c->batch);
    }
    *out = h;
    return SF_OK;
}

/* `it`, which this service has no component for, kept as retired. */
static void retire(sf_service *svc, const sf_handover_item *it)
{
    sf_component *more = sf_realloc(svc->retired, (svc->n_retired + 1) * sizeof(*more));
    sf_component *g;

    if (more == NULL) {
        sf_warn("reload: out of memory keeping the counts of retired %s '%s'",
                sf_kind_name(it->type->kind), it->id);
        return;
    }
    svc->retired = more;
    g = &svc->retired[svc->n_retired];
    memset(g, 0, sizeof(*g));
    g->id = sf_strdup(it->id);
    if (g->id == NULL)
        return;
    g->type = it->type;
    g->signal = it->signal;
    g->retired = true;
    g->transports = it->transports;
    g->signals = it->signals;
    add_counters(it->type, &g->counters, (sf_counters *)&it->counters);
    add_transports(g->transport, (sf_counters (*)[SF_TRANSPORT_COUNT])it->transport);
    sf_batch_stats_add(&g->batch, (sf_batch_stats *)&it->batch);
    svc->n_retired++;
}

sf_status sf_service_start_from(sf_service *svc, sf_handover *h)
{
    sf_status st;

    for (size_t i = 0; i < h->n; i++) {
        sf_handover_item *it = &h->items[i];
        sf_component *c = component_like(svc, it);

        if (c == NULL) {
            retire(svc, it);
            continue;
        }
        /* Counted from zero in a fresh instance: adding is carrying. */
        c->successor = true;
        add_counters(c->type, &c->counters, &it->counters);
        add_transports(c->transport, it->transport);
        sf_batch_stats_add(&c->batch, &it->batch);
        if (it->parcel != NULL && c->type->resume != NULL) {
            c->type->resume(c, it->parcel);
            it->parcel = NULL;
        }
    }
    st = start_all(svc, h);
    if (st == SF_OK)
        return SF_OK;
    /* What this service did meanwhile counts: its counts replace the
     * handover's, for the service tried next. */
    for (size_t i = 0; i < h->n; i++) {
        sf_handover_item *it = &h->items[i];
        sf_component *c = component_like(svc, it);

        if (c == NULL)
            continue;
        memset(&it->counters, 0, sizeof(it->counters));
        memset(it->transport, 0, sizeof(it->transport));
        memset(&it->batch, 0, sizeof(it->batch));
        add_counters(c->type, &it->counters, &c->counters);
        add_transports(it->transport, c->transport);
        sf_batch_stats_add(&it->batch, &c->batch);
    }
    return st;
}

/* ---- the data path --------------------------------------------------------- */

/* Why a receiver's request was refused, from the worst status of the
 * pipeline. SF_RETRY and SF_PERMANENT come only from an exporter without a
 * sending queue whose send failed: the receiver's refusal then carries the
 * reason the exporter counted the same spans under (send_failed), not
 * "internal". */
static sf_reason reason_of(sf_status st)
{
    switch (st) {
    case SF_RETRY:     return SF_REASON_RETRIES_EXHAUSTED;
    case SF_PERMANENT: return SF_REASON_PERMANENT_ERROR;
    case SF_FULL:     return SF_REASON_QUEUE_FULL;
    case SF_FILTER:   return SF_REASON_FILTER_FAILED;
    case SF_MEMLIMIT:
    case SF_ENOMEM:   return SF_REASON_MEMORY_LIMIT;
    case SF_INVALID:  return SF_REASON_MALFORMED;
    case SF_TOOBIG:   return SF_REASON_TOO_LARGE;
    case SF_STOPPED:  return SF_REASON_SHUTDOWN;
    default:          return SF_REASON_INTERNAL;
    }
}

/* Rank statuses so that with several exporters the client hears the one
 * that matters most: a permanent failure beats a retryable one. */
static int severity(sf_status st)
{
    if (st == SF_OK)
        return 0;
    return sf_status_retryable(st) ? 1 : 2;
}

/* One pipeline: the codec's pass with its first editor's edit (which is
 * also the request's validation), its processors in order, its exporters. */
static sf_status run_route(const sf_route *r, sf_request *batch)
{
    sf_component *ed = r->editor;
    sf_status worst = SF_OK;
    sf_status st = sf_request_rewrite(batch, ed != NULL ? ed->type->edit(ed, batch->signal)
                                                        : NULL, ed);

    batch->received = batch->spans + batch->stats.filtered_items + batch->stats.capped_items;
    if (st == SF_INVALID)
        return st;              /* nothing of a malformed request goes anywhere */
    if (st != SF_OK) {
        /* The pass stopped early (no memory for its output, or the edit
         * failed): count the spans again without output, so what is
         * refused is counted whole. */
        sf_otlp_scan_signal(batch->signal, batch->raw, batch->raw_len, batch->max_depth,
                            &batch->spans);
        batch->received = batch->spans;
        if (ed == NULL)
            return st;
        /* The edit failed: the editor reports it in its consume, after the
         * processors before it counted the whole batch. */
        batch->edited_by = ed;
        batch->edit_status = st;
    }
    for (size_t i = 0; i < r->n_processors; i++) {
        sf_component *p = r->processors[i];

        st = sf_component_process(p, batch);
        if (st != SF_OK) {
            /* Fail closed: a batch a processor could not handle goes no
             * further. A retry would fail the same way unless it was a
             * transient limit, which the status itself says. */
            return st;
        }
    }
    for (size_t i = 0; i < r->n_exporters; i++) {
        sf_component *e = r->exporters[i];

        st = e->type->consume(e, batch);
        if (severity(st) > severity(worst))
            worst = st;
    }
    return worst;
}

/* The span gate's verdicts on one request: the spans of the entries it
 * refused, by reason. An entry that is not valid on its own is kept (the
 * codec then refuses the request whole), so what is dropped was valid. */
typedef struct gate_call {
    const sf_span_gate *gate;
    unsigned max_depth;
    size_t dropped[SF_REASON_COUNT];
} gate_call;

static bool gate_keeps(void *ctx, const uint8_t *rs, size_t len)
{
    gate_call *g = ctx;
    sf_reason reason = SF_REASON_INTERNAL;
    size_t spans = 0;

    if (g->gate->keeps(g->gate->ctx, rs, len, &reason) || (unsigned)reason >= SF_REASON_COUNT ||
        sf_otlp_scan(rs, len, g->max_depth, &spans) != SF_OK)
        return true;
    g->dropped[reason] += spans;
    return false;
}

/* Run the service's span gate on a traces batch: on a drop, the batch's
 * bytes become `*kept` (the caller frees it), the dropped spans are
 * counted on `rc` and added to *gated. SF_MEMLIMIT when an armed gate
 * finds no memory for the copy: the request is then refused (retryably),
 * never let through past the gate. */
static sf_status run_gate(const sf_service *svc, sf_counters *rc, sf_request *batch,
                          uint8_t **kept, size_t *gated)
{
    gate_call g = { .gate = &svc->gate, .max_depth = batch->max_depth };
    size_t len = 0;

    *kept = NULL;
    if (svc->gate.keeps == NULL || (svc->gate.armed != NULL && !svc->gate.armed(svc->gate.ctx)) ||
        batch->raw_len == 0)
        return SF_OK;
    if ((*kept = sf_malloc(batch->raw_len)) == NULL)
        return SF_MEMLIMIT;
    if (sf_otlp_drop_resources(batch->raw, batch->raw_len, gate_keeps, &g, *kept, &len) == 0) {
        sf_free(*kept);
        *kept = NULL;
        return SF_OK;
    }
    for (int r = 0; r < SF_REASON_COUNT; r++)
        if (g.dropped[r] > 0) {
            sf_count(&rc->dropped_spans[r], g.dropped[r]);
            *gated += g.dropped[r];
        }
    batch->raw = *kept;
    batch->raw_len = len;
    return SF_OK;
}

/* A sending queue of an exporter of `receiver`'s pipelines of `signal`
 * that `client` is over its share of (sf_share_over), or NULL: its request
 * is then refused before the codec runs, so a flooder's refused calls cost
 * a count of their spans, not a decode. */
static sf_component *over_share(const sf_component *receiver, sf_signal signal, uint64_t client)
{
    for (size_t i = 0; client != 0 && i < receiver->n_routes; i++) {
        const sf_route *r = receiver->routes[i];

        for (size_t j = 0; r->signal == signal && j < r->n_exporters; j++) {
            sf_component *e = r->exporters[j];
            int64_t used = atomic_load_explicit(&e->counters.queue_size, memory_order_relaxed);

            if (e->counters.share != NULL &&
                sf_share_over(e->counters.share, client, used > 0 ? (size_t)used : 0))
                return e;
        }
    }
    return NULL;
}

sf_status sf_component_emit(sf_component *receiver, sf_transport transport, sf_request *batch)
{
    const sf_signal signal = batch->signal;
    sf_counters *rc = &receiver->transport[signal][transport];
    const uint8_t *raw = batch->raw;    /* processors replace the batch's bytes */
    size_t raw_len = batch->raw_len;
    sf_status worst = SF_OK;
    size_t spans = 0, routes = 0, gated = 0;
    uint8_t *kept = NULL;
    bool gated_all = false, gate_failed = false;
    sf_component *full;

    sf_count(&rc->requests, 1);
    if ((full = over_share(receiver, signal, batch->client)) != NULL) {
        /* counted as the exporter's queue would have: enqueue-failed */
        sf_otlp_scan_signal(signal, batch->raw, batch->raw_len, batch->max_depth, &spans);
        sf_count(&full->counters.enqueue_failed_spans, spans);
        batch->over_share = true;
        worst = SF_FULL;
    } else if (signal == SF_SIGNAL_TRACES && receiver->service != NULL) {
        gate_failed = run_gate(receiver->service, rc, batch, &kept, &gated) != SF_OK;
        if (gate_failed)
            worst = SF_MEMLIMIT;
        /* every resource gated: nothing goes on (no empty request for the
         * exporters), and nothing is refused */
        gated_all = kept != NULL && batch->raw_len == 0;
    }
    for (size_t i = 0; full == NULL && !gate_failed && !gated_all && i < receiver->n_routes; i++) {
        sf_request copy, *b = batch;
        sf_status st;

        if (receiver->routes[i]->signal != signal)
            continue;
        if (routes++ > 0) {
            /* Processors changed the first copy: start again from the
             * bytes as received. */
            sf_request_init_signal(&copy, batch->arena, signal, batch->raw, batch->raw_len,
                                   batch->max_depth);
            copy.client = batch->client;
            b = &copy;
        }
        st = run_route(receiver->routes[i], b);
        if (routes == 1) {
            /* The first pass validated the request and counted its spans
             * (before any processor filtered some out). */
            spans = b->received;
            for (int m = 0; m < SF_OTLP_MSG_COUNT; m++) {
                if (b->stats.dropped_fields[m] > 0)
                    sf_count(&rc->dropped_fields[m], b->stats.dropped_fields[m]);
            }
        }
        if (b != batch) {
            batch->over_share = batch->over_share || b->over_share;
            sf_request_release(b);
        }
        if (severity(st) > severity(worst))
            worst = st;
        if (st == SF_INVALID)
            break;              /* the same bytes: every pipeline would refuse them */
    }
    if (routes == 0 && !gated_all && full == NULL) {
        /* No pipeline of the signal lists the receiver (receivers check
         * sf_component_receives first), or the gate could not run:
         * refused, never taken and lost. */
        sf_otlp_scan_signal(signal, batch->raw, batch->raw_len, batch->max_depth, &spans);
        if (!gate_failed)
            worst = SF_PERMANENT;
    }
    if (worst == SF_INVALID)
        sf_debug("receiver '%s': refused a malformed request: %s", receiver->id,
                 batch->stats.error != NULL ? batch->stats.error : "invalid");
    /* the taps first: once the receiver's counts show a request, the taps
     * have seen it (a test, or an operator, waiting on one can rely on
     * the other) */
    if (signal == SF_SIGNAL_TRACES && receiver->service != NULL &&
        receiver->service->tap != NULL)
        receiver->service->tap(receiver->service->tap_ctx, raw, raw_len, spans + gated,
                               worst == SF_OK);
    if (signal == SF_SIGNAL_LOGS && receiver->service != NULL &&
        receiver->service->log_tap != NULL)
        receiver->service->log_tap(receiver->service->log_tap_ctx, receiver->id, raw, raw_len,
                                   worst == SF_OK);
    if (signal == SF_SIGNAL_METRICS && receiver->service != NULL &&
        receiver->service->metrics_tap != NULL)
        receiver->service->metrics_tap(receiver->service->metrics_tap_ctx, receiver->id, raw,
                                       raw_len, worst == SF_OK);
    if (worst == SF_OK) {
        sf_count(&rc->accepted_spans, spans);
    } else {
        sf_count(&rc->refused_spans[reason_of(worst)], spans);
        sf_count(&rc->refused_requests[reason_of(worst)], 1);
        if (worst == SF_FULL && batch->over_share)
            sf_count(&rc->refused_share, 1);
    }
    if (kept != NULL) {
        /* the receiver's bytes again: it may look at them once emit returns */
        batch->raw = raw;
        batch->raw_len = raw_len;
        sf_free(kept);
    }
    return worst;
}

/* The exporters of one route, as run_route hands them a batch. */
static sf_status export_route(const sf_route *r, sf_request *batch)
{
    sf_status worst = SF_OK;

    for (size_t i = 0; i < r->n_exporters; i++) {
        sf_component *e = r->exporters[i];
        sf_status st = e->type->consume(e, batch);

        if (severity(st) > severity(worst))
            worst = st;
    }
    return worst;
}

sf_status sf_component_inject(sf_component *self, const char *pipeline, const uint8_t *otlp,
                              size_t len)
{
    sf_service *svc = self->service;
    sf_status worst = SF_OK;
    sf_arena *arena;
    size_t spans = 0, routes = 0;

    if (svc == NULL)
        return SF_STOPPED;
    atomic_fetch_add(&svc->injecting, 1);
    if (!atomic_load(&svc->exporting)) {
        atomic_fetch_sub(&svc->injecting, 1);
        return SF_STOPPED;
    }
    arena = sf_arena_create(4096, 0);
    if (arena == NULL) {
        atomic_fetch_sub(&svc->injecting, 1);
        return SF_ENOMEM;
    }
    for (size_t i = 0; i < svc->n_routes; i++) {
        const sf_route *r = &svc->routes[i];
        sf_request b;
        sf_status st;

        if (r->signal != SF_SIGNAL_TRACES || (pipeline != NULL && strcmp(r->id, pipeline) != 0))
            continue;
        routes++;
        sf_request_init(&b, arena, otlp, len, SF_OTLP_DEFAULT_MAX_DEPTH);
        st = sf_request_rewrite(&b, NULL, NULL);      /* canonical, no edit */
        if (st == SF_OK) {
            spans = b.spans;
            st = export_route(r, &b);
        }
        sf_request_release(&b);
        if (severity(st) > severity(worst))
            worst = st;
        if (st == SF_INVALID)
            break;
    }
    sf_arena_destroy(arena);
    atomic_fetch_sub(&svc->injecting, 1);
    if (routes == 0)
        return SF_INVALID;
    if (worst == SF_OK)
        sf_count(&self->counters.accepted_spans, spans);
    else if (worst != SF_INVALID)
        sf_count(&self->counters.refused_spans[reason_of(worst)], spans);
    return worst;
}

bool sf_component_has_traces_pipeline(const sf_component *c, const char *id)
{
    const sf_config *cfg = c->service != NULL ? c->service->cfg : NULL;

    for (size_t p = 0; cfg != NULL && p < cfg->n_pipelines; p++)
        if (cfg->pipelines[p].signal == SF_SIGNAL_TRACES && strcmp(cfg->pipelines[p].id, id) == 0)
            return true;
    return false;
}

bool sf_component_has_receiver(const sf_component *c, const char *id, sf_signal signal)
{
    const sf_config *cfg = c->service != NULL ? c->service->cfg : NULL;

    for (size_t p = 0; cfg != NULL && p < cfg->n_pipelines; p++)
        for (size_t i = 0; cfg->pipelines[p].signal == signal &&
                           i < cfg->pipelines[p].n_receivers; i++)
            if (strcmp(cfg->pipelines[p].receivers[i]->id, id) == 0)
                return true;
    return false;
}

void sf_component_set_span_tap(sf_component *ext, sf_span_tap_fn fn, void *ctx)
{
    sf_service *svc = ext->service;

    if (svc == NULL)
        return;
    if (svc->tap != NULL && fn != NULL)
        sf_warn("%s '%s' replaces the span tap set before it", sf_kind_name(ext->type->kind),
                ext->id);
    svc->tap = fn;
    svc->tap_ctx = ctx;
}

void sf_component_set_span_gate(sf_component *ext, const sf_span_gate *gate)
{
    sf_service *svc = ext->service;

    if (svc == NULL)
        return;
    if (svc->gate.keeps != NULL && gate != NULL)
        sf_warn("%s '%s' replaces the span gate set before it", sf_kind_name(ext->type->kind),
                ext->id);
    svc->gate = gate != NULL ? *gate : (sf_span_gate){ 0 };
}

void sf_component_set_log_tap(sf_component *ext, sf_log_tap_fn fn, void *ctx)
{
    sf_service *svc = ext->service;

    if (svc == NULL)
        return;
    if (svc->log_tap != NULL && fn != NULL)
        sf_warn("%s '%s' replaces the log tap set before it", sf_kind_name(ext->type->kind),
                ext->id);
    svc->log_tap = fn;
    svc->log_tap_ctx = ctx;
}

void sf_component_set_metrics_tap(sf_component *ext, sf_metrics_tap_fn fn, void *ctx)
{
    sf_service *svc = ext->service;

    if (svc == NULL)
        return;
    if (svc->metrics_tap != NULL && fn != NULL)
        sf_warn("%s '%s' replaces the metrics tap set before it", sf_kind_name(ext->type->kind),
                ext->id);
    svc->metrics_tap = fn;
    svc->metrics_tap_ctx = ctx;
}

void sf_component_refuse(sf_component *receiver, sf_transport transport, sf_signal signal,
                         size_t items, sf_reason reason)
{
    sf_counters *rc = &receiver->transport[signal < SF_SIGNAL_COUNT ? signal : 0][transport];

    sf_count(&rc->requests, 1);
    sf_count(&rc->refused_requests[reason], 1);
    sf_count(&rc->refused_spans[reason], items);
}

bool sf_component_receives(const sf_component *receiver, sf_signal signal)
{
    if (receiver == NULL)
        return false;
    /* a receiver made by hand, outside a service: traces, as it always was */
    if (receiver->service == NULL)
        return signal == SF_SIGNAL_TRACES;
    return (receiver->signals & (1u << signal)) != 0;
}

void sf_component_unexported(sf_component *receiver, sf_transport transport, sf_signal signal)
{
    int i = signal == SF_SIGNAL_LOGS ? 1 : 0;

    if (signal == SF_SIGNAL_TRACES || transport >= SF_TRANSPORT_COUNT)
        return;
    atomic_fetch_add_explicit(&receiver->transport[SF_SIGNAL_TRACES][transport].unexported[i], 1,
                              memory_order_relaxed);
}

bool sf_component_may_accept(const sf_component *receiver)
{
    (void)receiver;
    return !sf_alloc_under_pressure();
}

/* ---- the memory budget ------------------------------------------------------ */

/* One lock for every service's budget: limiters report from their own
 * threads, and what the budget sets (the allocator's limits) is
 * process-wide. Services run one at a time (a reload stops the old one
 * before the new one starts), so the live one's budget is what applies. */
static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t tighter(size_t a, size_t b)
{
    return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

/* The tightest limits, and any pressure, of the service's components. */
static void budget_apply(const sf_service *svc)
{
    size_t soft = 0, hard = 0;
    bool pressure = false;

    for (size_t i = 0; i < svc->n_components; i++) {
        const sf_component *c = &svc->components[i];

        soft = tighter(soft, c->mem_soft);
        hard = tighter(hard, c->mem_hard);
        pressure = pressure || c->mem_pressure;
    }
    sf_alloc_set_limits(soft, hard);
    sf_alloc_set_external_pressure(pressure);
}

void sf_component_set_memory_limits(sf_component *self, size_t soft, size_t hard)
{
    pthread_mutex_lock(&budget_lock);
    self->mem_soft = soft;
    self->mem_hard = hard;
    if (self->mem_soft == 0 && self->mem_hard == 0)
        self->mem_pressure = false;     /* a limiter that stopped presses no more */
    if (self->service != NULL)
        budget_apply(self->service);
    else {
        sf_alloc_set_limits(soft, hard);
        sf_alloc_set_external_pressure(self->mem_pressure);
    }
    pthread_mutex_unlock(&budget_lock);
}

void sf_component_set_memory_pressure(sf_component *self, bool on)
{
    pthread_mutex_lock(&budget_lock);
    if (self->mem_pressure != on) {
        self->mem_pressure = on;
        if (self->service != NULL)
            budget_apply(self->service);
        else
            sf_alloc_set_external_pressure(on);
    }
    pthread_mutex_unlock(&budget_lock);
}

bool sf_component_batching(const sf_component *exporter, sf_batching *out)
{
    const sf_service *svc = exporter->service;

    for (size_t r = 0; svc != NULL && r < svc->n_routes; r++) {
        const sf_route *rt = &svc->routes[r];
        bool feeds = false;

        for (size_t i = 0; i < rt->n_exporters && !feeds; i++)
            feeds = rt->exporters[i] == exporter;
        if (!feeds)
            continue;
        for (size_t i = 0; i < rt->n_processors; i++) {
            sf_component *p = rt->processors[i];

            if (p->type->describe_batching != NULL && p->type->describe_batching(p->config, out)) {
                /* the processor's counts, kept by the core: the
                 * component array outlives every exporter's consumers */
                out->stats = &p->batch;
                return true;
            }
        }
    }
    return false;
}

/* Add one component's counters of `signal` to collector-wide totals. */
static void add_totals(sf_totals *out, const sf_component *c, sf_signal signal)
{
    sf_counters *counters = (sf_counters *)&c->counters;
    sf_counters *transport = (sf_counters *)c->transport[signal];

    if (per_signal(c->type->kind) ? c->signal != signal
                                  : c->type->kind == SF_KIND_EXTENSION && signal != SF_SIGNAL_TRACES)
        return;
    switch (c->type->kind) {
    case SF_KIND_RECEIVER:
        for (int t = 0; t < SF_TRANSPORT_COUNT; t++) {
            out->accepted += sf_counter_get(&transport[t].accepted_spans);
            for (int r = 0; r < SF_REASON_COUNT; r++)
                out->refused[r] += sf_counter_get(&transport[t].refused_spans[r]);
        }
        break;
    case SF_KIND_PROCESSOR:
        for (int r = 0; r < SF_REASON_COUNT; r++)
            out->dropped[r] += sf_counter_get(&counters->dropped_spans[r]);
        break;
    case SF_KIND_EXPORTER:
        out->exported += sf_counter_get(&counters->sent_spans);
        out->enqueue_failed += sf_counter_get(&counters->enqueue_failed_spans);
        for (int r = 0; r < SF_REASON_COUNT; r++)
            out->send_failed[r] += sf_counter_get(&counters->send_failed_spans[r]);
        break;
    case SF_KIND_EXTENSION:
        /* spans an extension injected (sf_component_inject) */
        out->accepted += sf_counter_get(&counters->accepted_spans);
        for (int r = 0; r < SF_REASON_COUNT; r++)
            out->refused[r] += sf_counter_get(&counters->refused_spans[r]);
        break;
    }
}

void sf_service_totals_signal(const sf_service *svc, sf_signal signal, sf_totals *out)
{
    memset(out, 0, sizeof(*out));
    if (svc == NULL)
        return;
    for (size_t i = 0; i < svc->n_components; i++)
        add_totals(out, &svc->components[i], signal);
    for (size_t i = 0; i < svc->n_retired; i++)
        add_totals(out, &svc->retired[i], signal);
}

void sf_service_totals(const sf_service *svc, sf_totals *out)
{
    sf_service_totals_signal(svc, SF_SIGNAL_TRACES, out);
}

size_t sf_service_lost(const sf_service *svc, char *msg, size_t size)
{
    size_t total = 0;
    int len = 0;

    if (size > 0)
        msg[0] = '\0';
    for (size_t i = 0; svc != NULL && i < svc->n_components; i++) {
        sf_component *c = &svc->components[i];

        for (size_t r = 0; c->type->metric_rows != NULL && c->type->metric_rows[r].name != NULL; r++) {
            const sf_metric_row *m = &c->type->metric_rows[r];
            int64_t n = (int64_t)atomic_load(&c->counters.values[r]);

            if (m->lost == NULL || n <= 0)
                continue;
            total += (size_t)n;
            if (len >= 0 && (size_t)len < size)
                len += snprintf(msg + len, size - (size_t)len, "%s%lld %s %s%s %s",
                                len > 0 ? "; " : "", (long long)n, c->id, m->lost,
                                n == 1 ? "" : "s", m->lost_how ? m->lost_how : "");
        }
    }
    return total;
}

bool sf_component_failing_exporter(const sf_component *self, unsigned threshold,
                                   int64_t interval_ms, char *why, size_t size)
{
    const sf_service *svc = self != NULL ? self->service : NULL;
    int64_t since = sf_now_ms() - interval_ms;

    for (size_t i = 0; svc != NULL && i < svc->n_components; i++) {
        sf_component *c = &svc->components[i];
        char detail[128], window[32];
        unsigned n;

        if (c->type->kind != SF_KIND_EXPORTER)
            continue;
        n = sf_failure_count(&c->counters.failures, since, detail, sizeof(detail));
        if (n >= threshold) {
            sf_format_duration(interval_ms, window, sizeof(window));
            snprintf(why, size, "exporter '%s'%s%s%s: %u failed send%s in the last %s; the "
                     "last: %s", c->id, c->signal != SF_SIGNAL_TRACES ? " (" : "",
                     c->signal != SF_SIGNAL_TRACES ? sf_signal_name(c->signal) : "",
                     c->signal != SF_SIGNAL_TRACES ? ")" : "", n, n == 1 ? "" : "s", window,
                     detail);
            return true;
        }
    }
    return false;
}

bool sf_component_unhealthy_receiver(const sf_component *self, char *why, size_t size)
{
    const sf_service *svc = self != NULL ? self->service : NULL;

    for (size_t i = 0; svc != NULL && i < svc->n_components; i++) {
        sf_component *c = &svc->components[i];
        char detail[256];

        if (c->type->kind != SF_KIND_RECEIVER || c->type->unhealthy == NULL)
            continue;
        if (c->type->unhealthy(c, detail, sizeof(detail))) {
            snprintf(why, size, "receiver '%s': %s", c->id, detail);
            return true;
        }
    }
    return false;
}

sf_service_state sf_component_service_state(const sf_component *self)
{
    if (self == NULL || self->service == NULL)
        return SF_SERVICE_STOPPING;
    return (sf_service_state)atomic_load(&self->service->state);
}

bool sf_component_service_running_since(const sf_component *self, int64_t *wall_ms,
                                        int64_t *mono_ms)
{
    if (sf_component_service_state(self) != SF_SERVICE_RUNNING)
        return false;
    *wall_ms = self->service->running_since_wall_ms;
    *mono_ms = self->service->running_since_ms;
    return true;
}

void sf_component_totals(sf_component *self, sf_totals *out)
{
    sf_service_totals_signal(self->service, self->signal, out);
}

sf_status sf_service_render_metrics(sf_service *svc, char **out, size_t *out_len)
{
    const sf_config *cfg = svc->cfg;
    sf_metrics_style style = {
        .type_suffix = cfg->metrics_type_suffix,
        .units = cfg->metrics_units,
        .detailed = cfg->metrics_detailed,
        .labels = cfg->metrics_labels,
        .service_name = cfg->service_name,
        .service_version = cfg->service_version,
        .service_instance_id = cfg->service_instance_id,
        .retired = svc->retired,
        .n_retired = svc->n_retired,
    };

    return sf_metrics_render_style(svc->components, svc->n_components, &style, out, out_len);
}

struct json_object *sf_service_overview(sf_service *svc)
{
    return sf_overview_build(svc->components, svc->n_components, svc->retired, svc->n_retired,
                             svc->cfg, svc->history);
}

void sf_service_set_history(sf_service *svc, sf_history *history)
{
    svc->history = history;
}
