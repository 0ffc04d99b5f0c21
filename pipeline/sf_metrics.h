/* sf_metrics.h: the collector's own counters, per component, served as
 * Prometheus text with the upstream collector's metric names so existing
 * dashboards and alerts work. All counters are relaxed atomics.
 *
 * Accounting invariant (per pipeline, at any moment), in the items of the
 * pipeline's signal (spans, log records, metric points: the counters named
 * *_spans below count the items of their component's signal):
 *   received = receiver accepted + receiver refused (by reason)
 *              + receiver dropped (by reason: an extension's span gate,
 *                before any pipeline: out_of_band)
 *   accepted = exporter sent + exporter send_failed (by reason) + in queue */
#ifndef SF_METRICS_H
#define SF_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_otlp_wire.h"

/* X(ENUM, label) */
#define SF_REASON_MAP(X)                                   \
    X(MALFORMED,          "malformed")                     \
    X(TOO_LARGE,          "too_large")                     \
    X(FILTER_FAILED,      "filter_failed")                 \
    X(MEMORY_LIMIT,       "memory_limit")                  \
    X(QUEUE_FULL,         "queue_full")                    \
    X(RETRIES_EXHAUSTED,  "retries_exhausted")             \
    X(PERMANENT_ERROR,    "permanent_error")               \
    X(SHUTDOWN,           "shutdown")                      \
    X(INTERNAL,           "internal")                      \
    X(FILTERED,           "filtered")                      \
    X(OUT_OF_BAND,        "out_of_band")

typedef enum sf_reason {
#define SF_REASON_ENUM(e, label) SF_REASON_##e,
    SF_REASON_MAP(SF_REASON_ENUM)
#undef SF_REASON_ENUM
    SF_REASON_COUNT
} sf_reason;

const char *sf_reason_label(sf_reason r);

/* An exporter's latest failed sends (sf_sender.c notes every failed
 * attempt, retried or not), for health_check's check_collector_pipeline:
 * their times and the latest one's detail. Written on failures only, under
 * a spin lock held for a few stores; nothing on the success path. */
#define SF_FAILURE_LOG 64

typedef struct sf_failure_log {
    _Atomic bool busy;
    unsigned next;                  /* ring position of the next note */
    int64_t at_ms[SF_FAILURE_LOG];  /* sf_now_ms() of the latest failures; 0: unused */
    char detail[128];               /* the latest one's ("http 503"): never a secret */
} sf_failure_log;

/* Note one failed send now, with the exporter's detail. */
void sf_failure_note(sf_failure_log *log, const char *detail);
/* Failed sends noted at or after `since_ms` (monotonic; at most
 * SF_FAILURE_LOG), and the latest one's detail into `detail`. */
unsigned sf_failure_count(sf_failure_log *log, int64_t since_ms, char *detail, size_t size);

/* Rows of a component type's own metrics (sf_metric_row, sf_describe.h). */
#define SF_TYPE_METRICS_MAX 16

typedef struct sf_counters {
    /* receivers */
    _Atomic uint64_t accepted_spans;              /* otelcol_receiver_accepted_spans */
    _Atomic uint64_t refused_spans[SF_REASON_COUNT]; /* otelcol_receiver_refused_spans{reason} */
    _Atomic uint64_t requests;                    /* spanfence_receiver_requests */
    _Atomic uint64_t refused_requests[SF_REASON_COUNT]; /* spanfence_receiver_refused_requests{reason} */
    _Atomic uint64_t dropped_fields[SF_OTLP_MSG_COUNT]; /* spanfence_receiver_dropped_fields{message} */
    _Atomic uint64_t unexported[2];               /* spanfence_receiver_unexported_requests{signal}:
                                                     [0] metrics, [1] logs */
    _Atomic uint64_t refused_share;               /* spanfence_receiver_refused_share_requests:
                                                     of refused_requests{queue_full}, those
                                                     whose client was over its share */
    /* processors */
    _Atomic uint64_t incoming_items;              /* otelcol_processor_incoming_items */
    _Atomic uint64_t outgoing_items;              /* otelcol_processor_outgoing_items */
    _Atomic uint64_t dropped_spans[SF_REASON_COUNT]; /* otelcol_processor_dropped_spans{reason} */
    _Atomic uint64_t removed_attributes;          /* spanfence_processor_removed_attributes */
    /* exporters */
    _Atomic uint64_t sent_spans;                  /* otelcol_exporter_sent_spans */
    _Atomic uint64_t send_failed_spans[SF_REASON_COUNT]; /* otelcol_exporter_send_failed_spans{reason} */
    _Atomic uint64_t enqueue_failed_spans;        /* otelcol_exporter_enqueue_failed_spans */
    _Atomic uint64_t retries;                     /* spanfence_exporter_retries */
    _Atomic int64_t queue_size;                   /* otelcol_exporter_queue_size (batches) */
    _Atomic int64_t queue_capacity;               /* otelcol_exporter_queue_capacity */
    _Atomic int64_t queued_spans;                 /* spanfence_exporter_queued_spans (incl. in flight) */
    /* the sending queue's room by client (sf_share.h), for the gauges
     * spanfence_exporter_queue_clients and _queue_share, and emit's check
     * before the codec: set by the sender at create and cleared when it is
     * destroyed, read on the metrics thread and the receivers', which stop
     * before exporters are destroyed */
    struct sf_share *share;
    sf_failure_log failures;                      /* the latest failed sends (health_check) */
    /* the type's own series (type->metrics, sf_describe.h), by row */
    _Atomic uint64_t values[SF_TYPE_METRICS_MAX];  /* gauges: int64_t, two's complement */
} sf_counters;

/* Collector-wide sums of every receiver's and exporter's counters at one
 * moment (sf_service_totals); extensions take differences over time. */
typedef struct sf_totals {
    uint64_t accepted;                            /* receivers: accepted spans */
    uint64_t refused[SF_REASON_COUNT];            /* receivers: refused spans by reason */
    uint64_t dropped[SF_REASON_COUNT];            /* processors: dropped spans by reason */
    uint64_t exported;                            /* exporters: sent spans */
    uint64_t send_failed[SF_REASON_COUNT];        /* exporters: given up on, by reason */
    uint64_t enqueue_failed;                      /* exporters: refused by a full queue */
} sf_totals;

/* The spans of one by-reason row of sf_totals, all reasons summed. */
uint64_t sf_reasons_sum(const uint64_t v[SF_REASON_COUNT]);

/* The `batch` processor's series, as upstream v0.120's batchprocessor has
 * them (otelcol_processor_batch_*), labelled by the processor. Merging
 * happens in the sending queues of the exporters the processor's pipeline
 * feeds (sf_sender.c), so they count here, once per request they form:
 * the core owns this (one per batching processor, sf_component_batching
 * hands it to the exporters) and renders it. Buckets are not cumulative;
 * the last is +Inf. All relaxed atomics. */
#define SF_BATCH_SIZE_BOUNDS 22             /* 10 ... 100000 items */
#define SF_BATCH_BYTES_BOUNDS 39            /* 10 ... 9e6 bytes */

typedef enum sf_batch_trigger {
    SF_BATCH_TRIGGER_SIZE,          /* send_batch_size reached, or the request is full */
    SF_BATCH_TRIGGER_TIMEOUT,       /* the timeout ran out first (or shutdown ended the wait) */
    SF_BATCH_TRIGGER_NONE           /* sent alone, as handed over by a reload: no trigger */
} sf_batch_trigger;

typedef struct sf_batch_stats {
    _Atomic uint64_t size_trigger;  /* otelcol_processor_batch_batch_size_trigger_send */
    _Atomic uint64_t timeout_trigger;   /* otelcol_processor_batch_timeout_trigger_send */
    _Atomic uint64_t items[SF_BATCH_SIZE_BOUNDS + 1];   /* ..._batch_send_size, by bucket */
    _Atomic uint64_t items_sum;
    _Atomic uint64_t bytes[SF_BATCH_BYTES_BOUNDS + 1];  /* ..._batch_send_size_bytes */
    _Atomic uint64_t bytes_sum;
} sf_batch_stats;

/* One request formed: `items` spans, `bytes` encoded (uncompressed) bytes.
 * Five relaxed atomic adds. NULL `s` is fine (no batch processor). */
void sf_batch_stats_record(sf_batch_stats *s, sf_batch_trigger trigger, uint64_t items,
                           uint64_t bytes);
/* `src`'s counts added to `dst` (a reload's successor carries them on). */
void sf_batch_stats_add(sf_batch_stats *dst, sf_batch_stats *src);

/* For a type's `metrics` (sf_component.h): the formatted text appended at
 * buf + *len as far as it fits in `size`, and its whole length added to
 * *len either way, so that *len ends as the length all of it needs
 * (snprintf's contract: the caller calls again with a larger buffer). */
void sf_metrics_put(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline void sf_count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline uint64_t sf_counter_get(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* An exporter's items accepted and not yet sent or failed (queued_spans),
 * for /metrics and the status document. Read it before sent_spans and
 * send_failed_spans: a send ends by counting sent (or failed) and only then
 * taking its items off queued_spans (sf_sender.c, with release), so a reader
 * in this order sees a send that ends meanwhile in one of them, never in
 * neither (accepted = sent + failed + queued holds in every read once calls
 * stop; in the other order, a read as the last send ended showed its items
 * gone from queued and not yet sent). */
static inline uint64_t sf_counters_queued(sf_counters *c)
{
    return (uint64_t)atomic_load_explicit(&c->queued_spans, memory_order_acquire);
}

#endif
