/* pipeline/extensions/trace_control/trace_control_latency.h: the latency
 * guard's figures (trace_control_latency.c): histograms as a prometheus
 * receiver scrapes them, the bucket arithmetic (deltas, bucket-bounded
 * percentiles, restarts), and what a window shows of its engine's latency.
 * Shared by the extension's files and its unit test, nothing else. */
#ifndef SF_TRACE_CONTROL_LATENCY_H
#define SF_TRACE_CONTROL_LATENCY_H

#include "trace_control.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_LAT_MAX_BUCKETS 64       /* SGLang's TTFT histogram has 34 */

/* One histogram: per-bucket counts (not cumulative, as OTLP carries them),
 * bucket i holding the samples in (le[i-1], le[i]]; the last bucket's
 * bound is +Inf. n == 0: no histogram. */
typedef struct tc_hist {
    size_t n;
    double le[TC_LAT_MAX_BUCKETS];
    uint64_t c[TC_LAT_MAX_BUCKETS];
} tc_hist;

/* d = now - before, bucket by bucket. false, d untouched, when the bounds
 * differ or a bucket went down: the engine restarted (its counters began
 * again) or changed its buckets. */
bool sf_tc_hist_delta(const tc_hist *now, const tc_hist *before, tc_hist *d);
/* acc += d; an empty acc takes d's bounds. false when the bounds differ. */
bool sf_tc_hist_add(tc_hist *acc, const tc_hist *d);
uint64_t sf_tc_hist_samples(const tc_hist *h);
/* The upper bound of the bucket that holds quantile q (0 < q <= 1) of h's
 * samples: the true value is at most this, and above the bucket below it.
 * INFINITY for the +Inf bucket, NAN when h has no sample. */
double sf_tc_hist_quantile_le(const tc_hist *h, double q);

/* A metric's latency over some scrapes: bucket-bounded p50 and p99. */
typedef struct tc_lat_fig {
    uint64_t samples;
    double p50_le, p99_le;          /* NAN: no sample; INFINITY: above the top bound */
} tc_lat_fig;

void sf_tc_lat_fig_of(const tc_hist *h, tc_lat_fig *f);

/* Whether `during` rose above `before` by more than lim allows (p50 or
 * p99), given at least min_samples on both sides (fewer: never); the
 * reason in why. */
bool sf_tc_latency_exceeds(const char *key, const sf_tc_latency_limit *lim, int64_t min_samples,
                           const tc_lat_fig *before, const tc_lat_fig *during, char *why,
                           size_t size);

/* One metric of one target: the last cumulative counts scraped, the
 * deltas of the last baseline_scrapes scrapes (a ring), and while a window
 * counts, the sum of the deltas since it opened. */
typedef struct tc_lat_series {
    bool have_last;
    tc_hist last;
    tc_hist *ring;                  /* baseline_scrapes deltas */
    size_t ring_n, ring_next;
    tc_hist before, during;         /* of the window open (or last closed) */
} tc_lat_series;

/* The engine's own load in the same scrape: SGLang's gauges
 * sglang:num_running_reqs and sglang:num_queue_reqs, summed over their
 * series. Whether a raised level took shows beside the span flow: an
 * engine running requests whose spans never come did not take it, or its
 * exporter is broken. */
typedef struct tc_gauges {
    bool have_running, have_queued;
    double running, queued;
} tc_gauges;

/* What a window shows of its engine's latency (status, records, marker). */
typedef struct tc_lat_view {
    bool valid;                     /* the target has engine_metrics */
    bool window;                    /* before/during are a window's */
    uint64_t scrapes, restarts;     /* seen since the collector started */
    uint64_t window_scrapes;        /* of those, while the window counted */
    tc_gauges load;                 /* the last scrape's (have_*: seen at all) */
    tc_lat_fig before[SF_TC_LAT_COUNT], during[SF_TC_LAT_COUNT];
} tc_lat_view;

/* Decode one ExportMetricsServiceRequest: for each of `names`, the
 * histogram points of that name whose resource has service.name `job`,
 * summed over their series (points with other bounds than the first are
 * left out) into out[i] (n == 0: none). Only the first instance of the job
 * in the request counts (service.instance.id, copied into `instance`, ""
 * when none). SF_INVALID for bytes the codec refuses. Any thread. */

/* gauges may be NULL. */
sf_status sf_tc_latency_scan(const uint8_t *raw, size_t len, const char *job,
                             const char *const *names, size_t n_names, tc_hist *out,
                             char *instance, size_t inst_size, tc_gauges *gauges);

/* A target's latency state: its series, written by the metrics tap on the
 * receiver's threads and read by the control and metrics threads, all
 * under `mu`. */
typedef struct tc_latency {
    pthread_mutex_t mu;
    const sf_tc_engine_metrics *em;
    tc_lat_series s[SF_TC_LAT_COUNT];
    char instance[256];             /* the job's instance followed ("": not seen yet) */
    bool counting;                  /* a window is open: deltas go to `during` */
    bool window;                    /* before/during belong to a window */
    uint64_t scrapes, restarts, window_scrapes, other_instances;
    tc_gauges load;                 /* the last scrape's */
    _Atomic bool fresh;             /* a scrape came since the guard last looked */
} tc_latency;

/* At create, for a target with engine_metrics (*out NULL without). */
sf_status sf_tc_latency_create(const sf_tc_engine_metrics *em, tc_latency **out);
void sf_tc_latency_destroy(tc_latency *l);
/* One scrape's histograms (h[SF_TC_LAT_COUNT], n == 0: absent): a delta
 * per metric into the baseline ring and, while a window counts, into its
 * running figure; a bucket that went down is a restart: that scrape is
 * skipped and the baseline starts again. */
void sf_tc_latency_scrape(tc_latency *l, const tc_hist *h);
/* A window opens: its baseline is the deltas of the last baseline_scrapes
 * scrapes; its running figure starts empty. NULL l: nothing. */
void sf_tc_latency_open(tc_latency *l);
/* The window ended: its running figure stops (kept for its records). */
void sf_tc_latency_end(tc_latency *l);
/* What it shows now (v->valid false for NULL l). */
void sf_tc_latency_view(tc_latency *l, tc_lat_view *v);
/* The guard, after a scrape came (else false at once): whether a metric
 * with a limit rose past it during the open window; the reason in why. */
bool sf_tc_latency_rising(tc_latency *l, const sf_tc_latency_limits *lim, char *why,
                          size_t size);
/* A take-over at reload: the new state carries on from the old one's
 * (same job and metrics), window included. */
void sf_tc_latency_carry(tc_latency *to, tc_latency *from);

/* {"note":..,"scrapes":N,"ttft":{"metric":..,"before":{..},"during":{..}},..} */
struct json_object;
struct json_object *sf_tc_latency_json(const tc_lat_view *v, const sf_tc_engine_metrics *em);
/* The marker span's attributes spanfence.window.latency.<m>.<before|during>.
 * <samples|p50_le|p99_le> (an le attribute is left out when there was no
 * sample or it is +Inf): up to 12 keys, kinds (0 int, 1 double) and values. */
size_t sf_tc_latency_attrs(const tc_lat_view *v, const char **keys, int *kinds, int64_t *ints,
                           double *dbls, size_t max);

#endif
