/* sf_otlp_count.h: counts the items (spans, log records, metric data
 * points) of an OTLP export request (protobuf) as its bytes stream past,
 * in pieces of any size, without keeping them: for requests refused before (or while) they arrive, whose
 * spans must still be counted (received = accepted + refused) although the
 * body is never held whole (an HTTP upload being discarded, the slices of a
 * gRPC message). It counts the item fields on the path sf_otlp_scan_signal
 * counts (below) and skips everything inside an item;
 * nothing is validated beyond the framing on that path. On malformed input
 * it stops and keeps the count so far. No allocation. Also the count of a
 * request already decoded into a tree. */
#ifndef SF_OTLP_COUNT_H
#define SF_OTLP_COUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_signal.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

/* The counters count the items of one signal (sf_signal.h): spans; log
 * records at resource_logs.scope_logs.log_records; metric data points, the
 * data_points of the gauge, sum, histogram, exponential_histogram and
 * summary at resource_metrics.scope_metrics.metrics. `spans` keeps its name
 * and means those items. A metric carrying two of the types (which the
 * codec resolves to the last) has the points of both counted here. */
typedef struct sf_span_counter {
    size_t spans;
    bool bad;                   /* framing broken: counting stopped */
    /* private */
    sf_signal signal;
    unsigned level;             /* 0 request, 1 Resource*, 2 Scope*, 3 Metric, 4 its data */
    unsigned state;
    unsigned shift;
    uint64_t acc;               /* varint being read */
    uint64_t tag;
    uint64_t skip;              /* bytes left to skip */
    uint64_t pos;               /* bytes consumed */
    uint64_t end[5];            /* where levels 1 to 4 end */
    uint32_t group[32];         /* numbers of the unknown groups open (skipped whole) */
    unsigned groups;
} sf_span_counter;

void sf_span_counter_init(sf_span_counter *c);                 /* traces */
void sf_span_counter_init_signal(sf_span_counter *c, sf_signal s);
/* Feed the next `n` bytes. */
void sf_span_counter_feed(sf_span_counter *c, const uint8_t *p, size_t n);

/* The same for OTLP/JSON: counts the objects in the item arrays, the
 * "spans" at resourceSpans[].scopeSpans[], the "logRecords" at
 * resourceLogs[].scopeLogs[], the "dataPoints" of each metric's gauge, sum,
 * histogram, exponentialHistogram or summary at
 * resourceMetrics[].scopeMetrics[].metrics[] (either key spelling
 * protobuf's JSON mapping allows, as the JSON decoder does). Tracks strings,
 * escapes and nesting only; keys written with escapes are not recognised. */
#define SF_JSON_COUNT_DEPTH 12

typedef struct sf_json_span_counter {
    size_t spans;
    bool bad;                   /* unbalanced: counting stopped */
    /* private */
    sf_signal signal;
    unsigned depth;             /* containers open */
    uint8_t role[SF_JSON_COUNT_DEPTH];  /* of the first levels */
    bool in_string, escape, string_is_key, expect_key;
    char key[24];               /* the current object's last key (truncated) */
    unsigned key_len;           /* > sizeof(key): too long to be one we look for */
} sf_json_span_counter;

void sf_json_span_counter_init(sf_json_span_counter *c);       /* traces */
void sf_json_span_counter_init_signal(sf_json_span_counter *c, sf_signal s);
void sf_json_span_counter_feed(sf_json_span_counter *c, const uint8_t *p, size_t n);

/* The spans of a decoded request (a tree, sf_request_tree): the sum over
 * its resource_spans and scope_spans. */
size_t sf_otlp_count_spans(
    const Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req);

#endif
