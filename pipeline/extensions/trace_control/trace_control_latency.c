/* pipeline/extensions/trace_control/trace_control_latency.c: the latency
 * guard. A target's `engine_metrics` names the prometheus receiver and job
 * that scrape its engine; the core's metrics tap hands this file every
 * metrics request that receiver emitted (one per scrape), and the
 * histograms of the target's two metrics (SGLang's time to first token
 * and inter-token latency) are kept as deltas between scrapes: the last
 * baseline_scrapes of them make a window's baseline when it opens, and
 * those while it is open its running figure. Both are read as p50 and p99
 * bounded by buckets: the upper bound of the bucket holding the quantile
 * (`p99_le`), the only honest figure a histogram gives. With
 * auto_revert.max_latency_increase, a window whose figure rises past its
 * baseline by the ratio or time given ends (cause "latency"), checked as
 * soon as a scrape comes (the tap wakes the control thread).
 *
 * DESIGN
 * - Locks: one mutex per target (tc_latency.mu) guards its series; the tap
 *   takes it once per scrape, after decoding outside it; the control thread
 *   (open, end, the guard) and the metrics thread (status) take it briefly.
 *   The metrics thread holds pub_mu around it: the order is pub_mu, then mu.
 * - Restarts: a bucket count that goes down (the engine started again, or
 *   its buckets changed) skips that scrape and empties the baseline ring; a
 *   window keeps the baseline it opened with and its figure carries on from
 *   the new counters. */
#include "trace_control_int.h"
#include "sf_otlp_wire.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint pb_hdp;

static const char *const metric_keys[SF_TC_LAT_COUNT] = { "ttft", "itl" };

/* ---- the arithmetic --------------------------------------------------------------------- */

static bool same_bounds(const tc_hist *a, const tc_hist *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i + 1 < a->n; i++)
        if (a->le[i] != b->le[i])
            return false;
    return true;
}

bool sf_tc_hist_delta(const tc_hist *now, const tc_hist *before, tc_hist *d)
{
    if (!same_bounds(now, before))
        return false;
    for (size_t i = 0; i < now->n; i++)
        if (now->c[i] < before->c[i])
            return false;
    d->n = now->n;
    for (size_t i = 0; i < now->n; i++) {
        d->le[i] = now->le[i];
        d->c[i] = now->c[i] - before->c[i];
    }
    return true;
}

bool sf_tc_hist_add(tc_hist *acc, const tc_hist *d)
{
    if (d->n == 0)
        return true;
    if (acc->n == 0) {
        *acc = *d;
        return true;
    }
    if (!same_bounds(acc, d))
        return false;
    for (size_t i = 0; i < d->n; i++)
        acc->c[i] += d->c[i];
    return true;
}

uint64_t sf_tc_hist_samples(const tc_hist *h)
{
    uint64_t n = 0;

    for (size_t i = 0; i < h->n; i++)
        n += h->c[i];
    return n;
}

double sf_tc_hist_quantile_le(const tc_hist *h, double q)
{
    uint64_t total = sf_tc_hist_samples(h), rank, seen = 0;

    if (total == 0)
        return NAN;
    /* the rank-th smallest sample, 1-based (Prometheus' histogram_quantile
     * would interpolate inside the bucket: a guess this figure refuses) */
    rank = (uint64_t)ceil(q * (double)total);
    if (rank < 1)
        rank = 1;
    for (size_t i = 0; i < h->n; i++) {
        seen += h->c[i];
        if (seen >= rank)
            return h->le[i];
    }
    return INFINITY;
}

void sf_tc_lat_fig_of(const tc_hist *h, tc_lat_fig *f)
{
    f->samples = sf_tc_hist_samples(h);
    f->p50_le = sf_tc_hist_quantile_le(h, 0.50);
    f->p99_le = sf_tc_hist_quantile_le(h, 0.99);
}

static void format_le(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "none");
    else if (isinf(v))
        snprintf(buf, size, "+Inf");
    else if (v < 1.0)
        snprintf(buf, size, "%gms", v * 1000.0);
    else
        snprintf(buf, size, "%gs", v);
}

bool sf_tc_latency_exceeds(const char *key, const sf_tc_latency_limit *lim, int64_t min_samples,
                           const tc_lat_fig *before, const tc_lat_fig *during, char *why,
                           size_t size)
{
    static const char *const qs[] = { "p50", "p99" };

    if (!lim->set || before->samples < (uint64_t)min_samples ||
        during->samples < (uint64_t)min_samples)
        return false;
    for (int k = 0; k < 2; k++) {
        double b = k == 0 ? before->p50_le : before->p99_le;
        double d = k == 0 ? during->p50_le : during->p99_le;
        double limit;
        char bs[32], ds[32], ls[32];

        /* a baseline in the +Inf bucket has no bound to rise above */
        if (isnan(b) || isnan(d) || isinf(b))
            continue;
        limit = lim->is_ratio ? b * lim->value : b + lim->value;
        if (!(d > limit))
            continue;
        format_le(b, bs, sizeof(bs));
        format_le(d, ds, sizeof(ds));
        format_le(limit, ls, sizeof(ls));
        if (lim->is_ratio)
            snprintf(why, size, "%s %s rose to <= %s from <= %s before the window (bucket-bounded; "
                     "max_latency_increase %gx: %s), %" PRIu64 " samples during, %" PRIu64
                     " before", key, qs[k], ds, bs, lim->value, ls, during->samples,
                     before->samples);
        else
            snprintf(why, size, "%s %s rose to <= %s from <= %s before the window (bucket-bounded; "
                     "max_latency_increase +%gms: %s), %" PRIu64 " samples during, %" PRIu64
                     " before", key, qs[k], ds, bs, lim->value * 1000.0, ls, during->samples,
                     before->samples);
        return true;
    }
    return false;
}

/* ---- decoding a scrape ---------------------------------------------------------------------- */

/* One point into acc (its series summed). A point of other bounds than
 * acc's, or with more buckets than we keep, is left out. */
static void add_point(tc_hist *acc, const pb_hdp *p)
{
    tc_hist h;

    if (p->n_bucket_counts == 0 || p->n_bucket_counts > TC_LAT_MAX_BUCKETS ||
        p->n_bucket_counts != p->n_explicit_bounds + 1)
        return;
    h.n = p->n_bucket_counts;
    for (size_t i = 0; i < h.n; i++) {
        h.le[i] = i < p->n_explicit_bounds ? p->explicit_bounds[i] : INFINITY;
        h.c[i] = p->bucket_counts[i];
    }
    (void)sf_tc_hist_add(acc, &h);
}

/* A gauge's points, summed (SGLang labels them by model and ranks). */
static void add_gauge(const Opentelemetry__Proto__Metrics__V1__Metric *mt, bool *have, double *sum)
{
    for (size_t p = 0; p < mt->gauge->n_data_points; p++) {
        const Opentelemetry__Proto__Metrics__V1__NumberDataPoint *dp = mt->gauge->data_points[p];

        if (!*have)
            *sum = 0;
        *have = true;
        *sum += dp->value_case == OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT
                ? (double)dp->as_int : dp->as_double;
    }
}

sf_status sf_tc_latency_scan(const uint8_t *raw, size_t len, const char *job,
                             const char *const *names, size_t n_names, tc_hist *out,
                             char *instance, size_t inst_size, tc_gauges *gauges)
{
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req;
    sf_arena *arena;
    size_t items;
    bool found = false;

    for (size_t m = 0; m < n_names; m++)
        out[m].n = 0;
    if (gauges != NULL)
        memset(gauges, 0, sizeof(*gauges));
    if (inst_size > 0)
        instance[0] = '\0';
    if (sf_otlp_scan_signal(SF_SIGNAL_METRICS, raw, len, SF_OTLP_DEFAULT_MAX_DEPTH, &items) !=
        SF_OK)
        return SF_INVALID;
    arena = sf_arena_create(16384, 0);
    if (arena == NULL)
        return SF_ENOMEM;
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        sf_arena_pb_allocator(arena), len, raw);
    if (req == NULL) {
        sf_arena_destroy(arena);
        return SF_INVALID;
    }
    for (size_t i = 0; i < req->n_resource_metrics; i++) {
        const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm = req->resource_metrics[i];
        const char *svc = NULL, *inst = NULL;

        if (rm->resource != NULL) {
            svc = sf_tc_str_attr(rm->resource->attributes, rm->resource->n_attributes,
                                 "service.name");
            inst = sf_tc_str_attr(rm->resource->attributes, rm->resource->n_attributes,
                            "service.instance.id");
        }
        if (svc == NULL || strcmp(svc, job) != 0)
            continue;
        if (inst == NULL)
            inst = "";
        if (!found) {
            found = true;
            snprintf(instance, inst_size, "%s", inst);
        } else if (strcmp(instance, inst) != 0) {
            continue;
        }
        for (size_t j = 0; j < rm->n_scope_metrics; j++) {
            const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm = rm->scope_metrics[j];

            for (size_t k = 0; k < sm->n_metrics; k++) {
                const Opentelemetry__Proto__Metrics__V1__Metric *mt = sm->metrics[k];

                if (gauges != NULL && mt->name != NULL && mt->gauge != NULL &&
                    mt->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE) {
                    if (strcmp(mt->name, "sglang:num_running_reqs") == 0)
                        add_gauge(mt, &gauges->have_running, &gauges->running);
                    else if (strcmp(mt->name, "sglang:num_queue_reqs") == 0)
                        add_gauge(mt, &gauges->have_queued, &gauges->queued);
                }
                if (mt->name == NULL || mt->data_case !=
                        OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM ||
                    mt->histogram == NULL)
                    continue;
                for (size_t m = 0; m < n_names; m++) {
                    if (strcmp(mt->name, names[m]) != 0)
                        continue;
                    for (size_t p = 0; p < mt->histogram->n_data_points; p++)
                        add_point(&out[m], mt->histogram->data_points[p]);
                }
            }
        }
    }
    sf_arena_destroy(arena);
    return SF_OK;
}

/* ---- a target's state ----------------------------------------------------------------------- */

sf_status sf_tc_latency_create(const sf_tc_engine_metrics *em, tc_latency **out)
{
    tc_latency *l;

    *out = NULL;
    if (em->receiver == NULL)
        return SF_OK;
    l = sf_calloc(1, sizeof(*l));
    if (l == NULL)
        return SF_ENOMEM;
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        l->s[m].ring = sf_calloc((size_t)em->baseline_scrapes, sizeof(tc_hist));
        if (l->s[m].ring == NULL) {
            sf_tc_latency_destroy(l);
            return SF_ENOMEM;
        }
    }
    pthread_mutex_init(&l->mu, NULL);
    l->em = em;
    *out = l;
    return SF_OK;
}

void sf_tc_latency_destroy(tc_latency *l)
{
    if (l == NULL)
        return;
    for (int m = 0; m < SF_TC_LAT_COUNT; m++)
        sf_free(l->s[m].ring);
    if (l->em != NULL)
        pthread_mutex_destroy(&l->mu);
    sf_free(l);
}

void sf_tc_latency_scrape(tc_latency *l, const tc_hist *h)
{
    size_t cap = (size_t)l->em->baseline_scrapes;
    bool restart = false;

    pthread_mutex_lock(&l->mu);
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        tc_lat_series *s = &l->s[m];
        tc_hist d;

        if (h[m].n == 0)
            continue;               /* not in this scrape: nothing to say */
        if (!s->have_last) {
            s->last = h[m];
            s->have_last = true;
            continue;
        }
        if (!sf_tc_hist_delta(&h[m], &s->last, &d)) {
            restart = true;
            s->ring_n = 0;
            s->ring_next = 0;
            s->last = h[m];
            continue;
        }
        s->last = h[m];
        s->ring[s->ring_next] = d;
        s->ring_next = (s->ring_next + 1) % cap;
        if (s->ring_n < cap)
            s->ring_n++;
        if (l->counting && !sf_tc_hist_add(&s->during, &d))
            s->during = d;          /* the buckets changed: from this scrape on */
    }
    l->scrapes++;
    l->restarts += restart ? 1 : 0;
    if (l->counting)
        l->window_scrapes++;
    pthread_mutex_unlock(&l->mu);
    atomic_store_explicit(&l->fresh, true, memory_order_release);
}

void sf_tc_latency_open(tc_latency *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        tc_lat_series *s = &l->s[m];

        s->before.n = 0;
        s->during.n = 0;
        for (size_t i = 0; i < s->ring_n; i++)
            if (!sf_tc_hist_add(&s->before, &s->ring[i]))
                s->before = s->ring[i];     /* cannot happen: a restart empties the ring */
    }
    l->counting = true;
    l->window = true;
    l->window_scrapes = 0;
    pthread_mutex_unlock(&l->mu);
}

void sf_tc_latency_end(tc_latency *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->counting = false;
    pthread_mutex_unlock(&l->mu);
}

static void view_locked(const tc_latency *l, tc_lat_view *v)
{
    memset(v, 0, sizeof(*v));
    v->valid = true;
    v->window = l->window;
    v->scrapes = l->scrapes;
    v->restarts = l->restarts;
    v->window_scrapes = l->window_scrapes;
    v->load = l->load;
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        sf_tc_lat_fig_of(&l->s[m].before, &v->before[m]);
        sf_tc_lat_fig_of(&l->s[m].during, &v->during[m]);
    }
}

void sf_tc_latency_view(tc_latency *l, tc_lat_view *v)
{
    if (l == NULL) {
        memset(v, 0, sizeof(*v));
        return;
    }
    pthread_mutex_lock(&l->mu);
    view_locked(l, v);
    pthread_mutex_unlock(&l->mu);
}

bool sf_tc_latency_rising(tc_latency *l, const sf_tc_latency_limits *lim, char *why,
                          size_t size)
{
    tc_lat_view v;

    if (l == NULL || !lim->present ||
        !atomic_exchange_explicit(&l->fresh, false, memory_order_acq_rel))
        return false;
    pthread_mutex_lock(&l->mu);
    if (!l->counting) {
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    view_locked(l, &v);
    pthread_mutex_unlock(&l->mu);
    for (int m = 0; m < SF_TC_LAT_COUNT; m++)
        if (sf_tc_latency_exceeds(metric_keys[m], &lim->m[m], lim->min_samples, &v.before[m],
                                  &v.during[m], why, size))
            return true;
    return false;
}

void sf_tc_latency_carry(tc_latency *to, tc_latency *from)
{
    if (to == NULL || from == NULL || strcmp(to->em->job, from->em->job) != 0 ||
        to->em->baseline_scrapes != from->em->baseline_scrapes)
        return;
    pthread_mutex_lock(&from->mu);
    pthread_mutex_lock(&to->mu);
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        tc_lat_series *a = &to->s[m], *b = &from->s[m];

        if (strcmp(to->em->metric[m], from->em->metric[m]) != 0)
            continue;
        a->have_last = b->have_last;
        a->last = b->last;
        memcpy(a->ring, b->ring, (size_t)to->em->baseline_scrapes * sizeof(tc_hist));
        a->ring_n = b->ring_n;
        a->ring_next = b->ring_next;
        a->before = b->before;
        a->during = b->during;
    }
    memcpy(to->instance, from->instance, sizeof(to->instance));
    to->counting = from->counting;
    to->window = from->window;
    to->scrapes = from->scrapes;
    to->restarts = from->restarts;
    to->window_scrapes = from->window_scrapes;
    pthread_mutex_unlock(&to->mu);
    pthread_mutex_unlock(&from->mu);
}

/* ---- the tap ---------------------------------------------------------------------------- */

/* Receiver threads (sf_metrics_tap_fn): every metrics request of a
 * receiver some target's engine_metrics names; decoded once per such
 * target, outside its lock. Refused requests count too: the scrape says
 * what the engine measured all the same. */
void sf_tc_metrics_tap(void *ctx, const char *receiver, const uint8_t *raw, size_t len,
                       bool accepted)
{
    tc_ctx *x = ctx;
    bool woke = false;

    (void)accepted;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const sf_tc_engine_metrics *em = &w->target->engine_metrics;
        tc_hist h[SF_TC_LAT_COUNT];
        tc_gauges g;
        char inst[256];
        bool other;

        if (w->lat == NULL || strcmp(em->receiver, receiver) != 0)
            continue;
        if (sf_tc_latency_scan(raw, len, em->job, (const char *const *)em->metric,
                               SF_TC_LAT_COUNT, h, inst, sizeof(inst), &g) != SF_OK ||
            (h[0].n == 0 && h[1].n == 0))
            continue;       /* another job's scrape, or no histogram of ours in it */
        /* one engine per target: a second instance of the job is not mixed in */
        pthread_mutex_lock(&w->lat->mu);
        if (w->lat->instance[0] == '\0' && inst[0] != '\0')
            memcpy(w->lat->instance, inst, sizeof(inst));
        other = w->lat->instance[0] != '\0' && strcmp(w->lat->instance, inst) != 0;
        if (other)
            w->lat->other_instances++;
        else if (g.have_running || g.have_queued)
            w->lat->load = g;
        pthread_mutex_unlock(&w->lat->mu);
        if (other)
            continue;
        sf_tc_latency_scrape(w->lat, h);
        if (!woke && x->cfg->auto_revert.max_latency_increase.present &&
            x->cfg->auto_revert.enabled) {
            uint64_t one = 1;

            /* the control thread checks the guard at once (its out-of-band
             * wake-up: it finds no span out of band and looks at the windows) */
            woke = write(x->oob_fd, &one, sizeof(one)) == (ssize_t)sizeof(one);
        }
    }
}

/* ---- what a window shows ------------------------------------------------------------------ */

static json_object *le_json(double v)
{
    char buf[32];

    if (isnan(v))
        return NULL;
    if (isinf(v))
        return json_object_new_string("+Inf");
    snprintf(buf, sizeof(buf), "%.6g", v);
    return json_object_new_double_s(v, buf);
}

static json_object *fig_json(const tc_lat_fig *f)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "samples", json_object_new_uint64(f->samples));
    json_object_object_add(o, "p50_le", le_json(f->p50_le));
    json_object_object_add(o, "p99_le", le_json(f->p99_le));
    return o;
}

json_object *sf_tc_latency_json(const tc_lat_view *v, const sf_tc_engine_metrics *em)
{
    json_object *o;

    if (!v->valid || (o = json_object_new_object()) == NULL)
        return NULL;
    json_object_object_add(o, "note", json_object_new_string(
        "bucket-bounded: p50_le and p99_le are the upper bounds (seconds) of the histogram "
        "buckets holding the 50th and 99th percentile; before: the last baseline_scrapes "
        "scrapes before the window opened; during: the scrapes while it was open"));
    json_object_object_add(o, "job", json_object_new_string(em->job));
    json_object_object_add(o, "scrapes", json_object_new_uint64(v->window_scrapes));
    json_object_object_add(o, "restarts", json_object_new_uint64(v->restarts));
    for (int m = 0; m < SF_TC_LAT_COUNT; m++) {
        json_object *mo = json_object_new_object();

        if (mo == NULL)
            continue;
        json_object_object_add(mo, "metric", json_object_new_string(em->metric[m]));
        json_object_object_add(mo, "before", fig_json(&v->before[m]));
        json_object_object_add(mo, "during", fig_json(&v->during[m]));
        json_object_object_add(o, metric_keys[m], mo);
    }
    return o;
}

size_t sf_tc_latency_attrs(const tc_lat_view *v, const char **keys, int *kinds, int64_t *ints,
                           double *dbls, size_t max)
{
    /* [metric][before, during][samples, p50_le, p99_le] */
    static const char *const names[SF_TC_LAT_COUNT][2][3] = {
        { { "spanfence.window.latency.ttft.before.samples",
            "spanfence.window.latency.ttft.before.p50_le",
            "spanfence.window.latency.ttft.before.p99_le" },
          { "spanfence.window.latency.ttft.during.samples",
            "spanfence.window.latency.ttft.during.p50_le",
            "spanfence.window.latency.ttft.during.p99_le" } },
        { { "spanfence.window.latency.itl.before.samples",
            "spanfence.window.latency.itl.before.p50_le",
            "spanfence.window.latency.itl.before.p99_le" },
          { "spanfence.window.latency.itl.during.samples",
            "spanfence.window.latency.itl.during.p50_le",
            "spanfence.window.latency.itl.during.p99_le" } },
    };
    size_t n = 0;

    if (!v->valid)
        return 0;
    for (int m = 0; m < SF_TC_LAT_COUNT; m++)
        for (int side = 0; side < 2; side++) {
            const tc_lat_fig *f = side == 0 ? &v->before[m] : &v->during[m];
            const double le[2] = { f->p50_le, f->p99_le };

            if (n < max) {
                keys[n] = names[m][side][0];
                kinds[n] = 0;
                ints[n++] = (int64_t)f->samples;
            }
            for (int k = 0; k < 2; k++)
                if (n < max && isfinite(le[k])) {
                    keys[n] = names[m][side][1 + k];
                    kinds[n] = 1;
                    dbls[n++] = le[k];
                }
        }
    return n;
}
