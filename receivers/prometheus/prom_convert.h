/* receivers/prometheus/prom_convert.h: one parsed scrape (prom_parse.h)
 * into an OTLP ExportMetricsServiceRequest, as upstream's prometheus
 * receiver converts it: counters to cumulative monotonic sums, gauges and
 * untyped to gauges, histograms (explicit bounds from `le`, de-cumulated
 * bucket counts, _sum, _count) and summaries, info and stateset to
 * non-monotonic sums; start times from _created, else from when the series
 * was first seen and reset when it decreases (a start-time table per
 * target, sf_prom_starts); the target to resource attributes; the synthetic
 * up / scrape_* gauges appended. No clock and no I/O here either: the
 * scrape's time comes in `info`. */
#ifndef SF_PROM_CONVERT_H
#define SF_PROM_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_arena.h"
#include "sf_status.h"
#include "prom_parse.h"

/* Upstream's scope name, kept so that dashboards and fences that match it
 * see the same scope. */
#define SF_PROM_SCOPE_NAME \
    "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver"

typedef struct sf_prom_target {
    const char *job;                /* service.name */
    const char *instance;           /* host:port: service.instance.id */
    const char *host;               /* server.address */
    const char *port;               /* server.port (a string, as upstream) */
    const char *scheme;             /* url.scheme */
    const sf_prom_label *labels;    /* static_configs labels, on every point */
    size_t n_labels;
    bool honor_labels;              /* exposed labels win over target labels */
    bool honor_timestamps;          /* use the exposed timestamps */
} sf_prom_target;

typedef struct sf_prom_scrape_info {
    bool up;                        /* false: `r` is ignored, only the scrape_* gauges */
    uint64_t time_ns;               /* when the scrape began (wall clock) */
    double duration_s;
} sf_prom_scrape_info;

typedef struct sf_prom_convert_stats {
    size_t points;                  /* data points in the request (synthetic ones included) */
    size_t dropped;                 /* points not converted: gaugehistograms, histograms
                                     * without a count, decreasing buckets */
    size_t series_added;            /* series not seen in the previous scrape */
    size_t samples_post;            /* samples kept (duplicates dropped) */
} sf_prom_convert_stats;

/* The start times of one target's cumulative series. Owned by the
 * target's scraper thread; at most `max` series (past it, a series is
 * reported as starting now, every scrape). */
typedef struct sf_prom_starts sf_prom_starts;

sf_prom_starts *sf_prom_starts_create(size_t max);
void sf_prom_starts_destroy(sf_prom_starts *s);
/* Series tracked now (tests). */
size_t sf_prom_starts_count(const sf_prom_starts *s);

/* Build the request for one scrape of `t` into arena memory (*out, *len).
 * With info->up, `r` is a successful parse; series not seen in this scrape
 * are forgotten from `starts`. SF_ENOMEM when the arena is exhausted. */
sf_status sf_prom_convert(const sf_prom_result *r, const sf_prom_target *t,
                          const sf_prom_scrape_info *info, sf_prom_starts *starts,
                          sf_arena *arena, uint8_t **out, size_t *len,
                          sf_prom_convert_stats *stats);

#endif
